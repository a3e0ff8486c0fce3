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

// Run only as the forked side (bench/hot-path.ts imports the constants above).
if (process.send && process.argv[1]?.endsWith('hot-path-side.ts')) void main(process.argv[2]!, process.argv[3]!);
