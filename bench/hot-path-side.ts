/**
 * One side of the hot-path benchmark in a process of its own (bench/hot-path.ts starts two and drives their
 * rounds in turn): `raw` = ioredis GET/SET, `coordinator` = the Coordinator over a RedisTier (and its near-cache
 * variant). Each side's garbage and GC pauses stay in its own process, so one side's heap cannot land its pauses
 * in the other's latency tail. Messages: { op: 'load' } | { op: 'get' | 'put' | 'l1Get', seconds, warmupSeconds }
 * → the LoadResult; { op: 'close' }.
 */
import { Redis } from 'ioredis';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { MemoryTier } from '../core/tiers/memory-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { closedLoop } from './lib/measure.js';
import { PolicyAdministration } from '../core/policy/admin.js';
import { compilePolicy } from '../core/policy/compile.js';
import { parsePolicyDocument, type PolicyRuleInput } from '../core/policy/document.js';
import { LivePolicy, type LivePolicyOptions } from '../core/policy/live.js';
import { InMemoryCasStore } from '../core/ring/store.js';

export const KEYS = 10_000;
export const CONCURRENCY = 64;
const VALUE = Buffer.alloc(1024, 0x5a);
const key = (i: number) => (i * 7919) % KEYS;

type Msg = { op: 'load' | 'close' } | { op: 'get' | 'put' | 'l1Get'; seconds: number; warmupSeconds: number };

async function main(side: string, url: string): Promise<void> {
  const raw = side === 'raw' ? new Redis(url, { enableAutoPipelining: true }) : undefined;
  const coordinator =
    side === 'coordinator'
      ? new Coordinator({
          tiers: [RedisTier.fromUrl(url)],
          policies: new PolicyRegistry({ defaults: { writeTiers: ['hot'], nearCache: { enabled: false } } }),
          flushTimer: false,
        })
      : undefined;
  const withL1 =
    side === 'coordinator'
      ? new Coordinator({
          tiers: [RedisTier.fromUrl(url)],
          nearCache: new MemoryTier({ name: 'l1', maxBytes: 64 << 20 }),
          policies: new PolicyRegistry({ defaults: { writeTiers: ['hot'], nearCache: { ttlMs: 60_000 } } }),
          flushTimer: false,
        })
      : undefined;
  const ops = {
    get: raw ? (i: number) => raw.getBuffer(`raw:${key(i)}`) : (i: number) => coordinator!.get('bench', `k${key(i)}`),
    put: raw ? (i: number) => raw.set(`raw:${key(i)}`, VALUE) : (i: number) => coordinator!.put('bench', `k${key(i)}`, VALUE),
    l1Get: (i: number) => withL1!.get('bench', `k${key(i)}`),
  };
  process.on('message', (m: Msg) => {
    void (async () => {
      if (m.op === 'close') {
        await Promise.allSettled([coordinator?.close(), withL1?.close()]);
        raw?.disconnect();
        process.exit(0);
      }
      if (m.op === 'load') {
        for (let i = 0; i < KEYS; i += 500)
          await Promise.all(
            Array.from({ length: 500 }, (_, j) =>
              raw ? raw.set(`raw:${i + j}`, VALUE) : coordinator!.put('bench', `k${i + j}`, VALUE),
            ),
          );
        if (withL1) for (let i = 0; i < KEYS; i++) await withL1.get('bench', `k${i}`); // fill L1
        process.send!({ done: true });
        return;
      }
      if (m.op === 'get' || m.op === 'put' || m.op === 'l1Get')
        process.send!(
          await closedLoop(ops[m.op], { concurrency: CONCURRENCY, seconds: m.seconds, warmupSeconds: m.warmupSeconds }),
        );
    })();
  });
  process.send!({ ready: true });
}

/**
 * A live policy of ten active rules (bench/policy-overhead.ts): the benchmark namespace's placement (hot, with a
 * flush timer to tiers this run does not have, so it places as hot-path's coordinator does) and write-around, six
 * other namespaces' placements, and an alert. Its store is in memory and re-read every 15 s, as a Lambda container
 * re-reads S3; `onChange` follows a new policy read from it (as the API puts it into the coordinator). The default
 * rules (core/policy/defaults.ts: background loops, nothing on the request path) are left out, so exactly these ten
 * are in force.
 */
export function tenRulePolicy(onChange: LivePolicyOptions['onChange'] = () => {}): LivePolicy {
  const rules: PolicyRuleInput[] = [
    { id: 'bench-place', scope: { namespace: 'bench' }, on: { action: 'put' }, do: [{ store: { tiers: ['hot'] } }] },
    {
      id: 'bench-flush',
      scope: { namespace: 'bench' },
      on: { timer: { everySeconds: 1 } },
      do: [{ copy: { from: 'hot', to: ['warm', 'cold'], what: [{ object: 'dirty', equals: true }] } }],
    },
    {
      id: 'bench-around',
      scope: { namespace: 'bench' },
      on: { action: 'put' },
      when: [{ object: 'size', op: '>=', value: 1 << 20 }],
      do: [{ store: { tiers: ['warm', 'cold'] } }],
    },
    ...Array.from({ length: 6 }, (_, i) => ({
      id: `ns${i}-place`,
      scope: { namespace: `ns${i}` },
      on: { action: 'put' as const },
      do: [{ store: { tiers: ['hot' as const, 'cold' as const] } }],
    })),
    {
      id: 'fill-alert',
      on: { threshold: { tier: 'hot', metric: 'fillPercent', op: '>=', value: 90 } },
      do: [{ alert: { message: 'hot is filling' } }],
    },
  ];
  const doc = parsePolicyDocument({ namespaces: { bench: { settings: { nearCache: { enabled: false } } } }, rules });
  const compile = { background: true, defaults: false };
  const admin = new PolicyAdministration({ cas: new InMemoryCasStore(), deployment: doc, compile });
  const compiled = compilePolicy(doc, compile);
  if (compiled.rules.length !== 10) throw new Error(`expected 10 active rules, got ${compiled.rules.length}`);
  return LivePolicy.fromDeployment({ admin, refreshMs: 15_000, onChange }, compiled);
}

// Run only as the forked side (bench/hot-path.ts imports the constants above).
if (process.send && process.argv[1]?.endsWith('hot-path-side.ts')) void main(process.argv[2]!, process.argv[3]!);
