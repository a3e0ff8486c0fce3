/**
 * If-None-Match: * over redis-server (hot, hot fence on), a cache node (warm) and a cold tier (the local folder tier,
 * and S3 in LocalStack, which decides write-through creates as a deployment's cold tier does; the cache node decides
 * where warm is the lowest durable tier): two
 * coordinators, one clock a second ahead of the other, race to create the same keys. For each key exactly one
 * create is acknowledged and kept, and a write after it still lands above it, in every layout the write path uses.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import type { WriteResult } from '../../core/coordinator/types.js';
import { VersionConflictError } from '../../core/errors.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import type { Tier } from '../../core/tiers/tier.js';
import { closeSharingTiers, startTierStack, type TierStack } from './tier-stack.js';

const buf = (s: string) => Buffer.from(s);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Namespaces by layout, and the tier each one's creates are decided in. */
const LAYOUTS = {
  through: { writeTiers: ['hot', 'warm', 'cold'] as const, authority: 'cold' },
  back: { writeTiers: ['hot', 'cold'] as const, writeMode: 'write-back' as const, authority: 'hot' },
  'hot-only': { writeTiers: ['hot'] as const, authority: 'hot' },
  'cold-only': { writeTiers: ['cold'] as const, authority: 'cold' },
  // Warm as the lowest durable tier: the key's cache node decides (its owner, over HTTP).
  'warm-durable': { writeTiers: ['hot', 'warm'] as const, authority: 'warm' },
};

type Outcome = { value: string; w?: WriteResult };

describe.each(['folder', 's3'] as const)('If-None-Match: * from two coordinators (redis, cache node, %s)', (coldKind) => {
  let stack: TierStack;
  let a: Coordinator;
  let b: Coordinator;

  beforeAll(async () => {
    stack = await startTierStack(coldKind);
    const policies = new PolicyRegistry({
      defaults: { nearCache: { enabled: false } },
      namespaces: Object.fromEntries(
        Object.entries(LAYOUTS).map(([ns, l]) => [
          ns,
          { writeTiers: [...l.writeTiers], ...('writeMode' in l ? { writeMode: l.writeMode } : {}) },
        ]),
      ),
    });
    const make = (skewMs: number) =>
      new Coordinator({
        tiers: [stack.hot, stack.warm, stack.cold],
        policies,
        clock: new HybridLogicalClock(() => Date.now() + skewMs),
        flushTimer: false,
        onBackgroundError: () => {},
      });
    [a, b] = [make(1000), make(0)];
    await Promise.all([a.ready(), b.ready()]);
    // Both fences meet a Redis they have not seen and fence it whole once: let them settle before anything is written.
    for (let i = 0; i < 3; i++) await Promise.all([a.get('through', 'settle'), b.get('through', 'settle')]);
  }, 180_000);

  afterAll(async () => {
    await closeSharingTiers(a, b);
    await stack?.close();
  });

  async function race(ns: string, key: string): Promise<Outcome> {
    // Started a few ms apart in random order, so the laggard's create often lands between the other's check and write.
    const tries = [b, a, b, a, b, a].map(async (c, i) => {
      const value = `${key}:${c === a ? 'a' : 'b'}${i}`;
      await sleep(Math.floor(Math.random() * 4));
      return c.put(ns, key, buf(value), { ifNoneMatch: true }).then(
        (w): Outcome => ({ value, w }),
        (e: unknown): Outcome => {
          if (!(e instanceof VersionConflictError)) throw e;
          return { value };
        },
      );
    });
    const won = (await Promise.all(tries)).filter((o) => o.w);
    expect(won.map((o) => o.value)).toHaveLength(1);
    const winner = won[0]!;
    const authority = stack[LAYOUTS[ns as keyof typeof LAYOUTS].authority as 'hot' | 'warm' | 'cold'] as Tier;
    const stored = (await authority.get(ns, key))!;
    expect([stored.value.toString(), stored.header.version]).toEqual([winner.value, winner.w!.version]);
    for (const c of [a, b]) {
      const r = (await c.get(ns, key))!;
      expect([r.entry.value.toString(), r.entry.header.version]).toEqual([winner.value, winner.w!.version]);
    }
    return winner;
  }

  it.each(Object.keys(LAYOUTS))(
    '%s: exactly one create per key, new, deleted or expired',
    async (ns) => {
      for (let k = 0; k < 8; k++) await race(ns, `new-${k}`);
      for (let k = 0; k < 4; k++) {
        await (k % 2 ? a : b).put(ns, `deleted-${k}`, buf('old'));
        await (k % 2 ? b : a).delete(ns, `deleted-${k}`);
        await race(ns, `deleted-${k}`);
      }
      for (let k = 0; k < 4; k++) await b.put(ns, `expired-${k}`, buf('old'), { ttlSeconds: 1 });
      await sleep(1100);
      for (let k = 0; k < 4; k++) await race(ns, `expired-${k}`);
    },
    60_000,
  );

  it.each(Object.keys(LAYOUTS))(
    '%s: a write after a create lands above it, from either clock',
    async (ns) => {
      for (let k = 0; k < 4; k++) {
        const key = `then-${k}`;
        if (k % 2) {
          await a.put(ns, key, buf('old'));
          await b.delete(ns, key);
        }
        const winner = await race(ns, key);
        for (const c of [b, a]) {
          const value = `after-${c === a ? 'a' : 'b'}`;
          const w = await c.put(ns, key, buf(value));
          expect(w.superseded).toBeUndefined();
          expect(w.version).toBeGreaterThan(winner.w!.version);
          for (const reader of [a, b]) expect((await reader.get(ns, key))!.entry.value.toString()).toBe(value);
        }
      }
    },
    60_000,
  );
});
