/**
 * If-None-Match: * (create only) is an exclusive claim across processes: of creators racing for one key in different
 * coordinators (separate clocks, one a second ahead), exactly one is acknowledged and kept, in every tier layout the
 * write path uses, whether the key never existed, was deleted (a tombstone) or expired.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import type { CoordinatorOptions, WriteResult } from '../../core/coordinator/types.js';
import { VersionConflictError } from '../../core/errors.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { Tier } from '../../core/tiers/tier.js';
import { SwitchableTier } from '../helpers/tiers.js';

const buf = (s: string) => Buffer.from(s);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** A memory tier whose every call takes 0-2 ms, as a network round trip does: the window a race needs. */
function slow(tier: SwitchableTier): SwitchableTier {
  const calls = tier as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const m of ['get', 'head', 'put', 'getMany', 'delete'] as const) {
    const original = calls[m]!.bind(tier);
    calls[m] = async (...args: unknown[]) => {
      await sleep(Math.floor(Math.random() * 3));
      return original(...args);
    };
  }
  return tier;
}

interface Layout {
  name: string;
  tiers: () => Tier[];
  policies?: PolicyRegistry;
  /** Where every acknowledged create must be (the tier the write path arbitrates in). */
  authority: (tiers: Tier[]) => Tier;
}

const LAYOUTS: Layout[] = [
  {
    name: 'write-through hot + cold',
    tiers: () => [slow(new SwitchableTier('hot')), slow(new SwitchableTier('cold', 64 << 20))],
    authority: (t) => t[1]!,
  },
  {
    name: 'write-through hot + warm + cold',
    tiers: () => [slow(new SwitchableTier('hot')), slow(new SwitchableTier('warm')), slow(new SwitchableTier('cold', 64 << 20))],
    policies: new PolicyRegistry({ defaults: { writeTiers: ['hot', 'warm', 'cold'] } }),
    authority: (t) => t[2]!,
  },
  {
    name: 'write-back',
    tiers: () => [slow(new SwitchableTier('hot')), slow(new SwitchableTier('cold', 64 << 20))],
    policies: new PolicyRegistry({ defaults: { writeMode: 'write-back' } }),
    authority: (t) => t[0]!,
  },
  {
    name: 'hot-only namespace',
    tiers: () => [slow(new SwitchableTier('hot')), slow(new SwitchableTier('cold', 64 << 20))],
    policies: new PolicyRegistry({ defaults: { writeTiers: ['hot'] } }),
    authority: (t) => t[0]!,
  },
  { name: 'a durable tier only', tiers: () => [slow(new SwitchableTier('cold', 64 << 20))], authority: (t) => t[0]! },
];

/** Two coordinators (two processes) over the same tiers; a's clock runs a second ahead of b's. */
function pair(layout: Layout, opts: Partial<CoordinatorOptions> = {}) {
  const tiers = layout.tiers();
  const make = (skewMs: number) =>
    new Coordinator({
      tiers,
      nearCache: new MemoryTier({ name: 'l1', maxBytes: 1 << 20 }),
      clock: new HybridLogicalClock(() => Date.now() + skewMs),
      flushTimer: false,
      onBackgroundError: () => {},
      ...(layout.policies ? { policies: layout.policies } : {}),
      ...opts,
    });
  return { a: make(1000), b: make(0), tiers, authority: layout.authority(tiers) };
}

type Outcome = { who: string; value: string; w: WriteResult } | { who: string; value: string; conflict: VersionConflictError };

/** Three creates of `key` from each coordinator, all started at once. */
async function race(a: Coordinator, b: Coordinator, key: string): Promise<Outcome[]> {
  const tries = [a, b, a, b, a, b].map((c, i) => {
    const who = c === a ? 'a' : 'b';
    const value = `${key}:${who}${i}`;
    return c.put('ns', key, buf(value), { ifNoneMatch: true }).then(
      (w): Outcome => ({ who, value, w }),
      (e: unknown): Outcome => {
        if (!(e instanceof VersionConflictError)) throw e;
        return { who, value, conflict: e };
      },
    );
  });
  return Promise.all(tries);
}

/** Exactly one create won; the stored and the read value are the winner's, at the winner's version. */
async function expectOneWinner(outcomes: Outcome[], key: string, a: Coordinator, b: Coordinator, authority: Tier) {
  const won = outcomes.filter((o): o is Extract<Outcome, { w: WriteResult }> => 'w' in o);
  expect(won.map((o) => o.value)).toHaveLength(1);
  expect(outcomes.filter((o) => 'conflict' in o)).toHaveLength(outcomes.length - 1);
  const winner = won[0]!;
  const stored = (await authority.get('ns', key))!;
  expect([stored.value.toString(), stored.header.version]).toEqual([winner.value, winner.w.version]);
  // Read by both: the loser's near cache holds nothing of its refused write.
  for (const c of [a, b]) {
    const r = (await c.get('ns', key))!;
    expect([r.entry.value.toString(), r.entry.header.version]).toEqual([winner.value, winner.w.version]);
  }
  return winner;
}

describe('If-None-Match: * across processes', () => {
  describe.each(LAYOUTS)('$name', (layout) => {
    it('of creators racing for keys that never existed, exactly one per key is acknowledged and kept', async () => {
      const { a, b, authority } = pair(layout);
      for (let k = 0; k < 20; k++) {
        const key = `new-${k}`;
        await expectOneWinner(await race(a, b, key), key, a, b, authority);
      }
    });

    it('of creators racing for a deleted key (a tombstone), exactly one is acknowledged and kept', async () => {
      const { a, b, authority } = pair(layout);
      for (let k = 0; k < 10; k++) {
        const key = `deleted-${k}`;
        await (k % 2 ? a : b).put('ns', key, buf('old'));
        await (k % 2 ? b : a).delete('ns', key);
        await expectOneWinner(await race(a, b, key), key, a, b, authority);
      }
    });

    it('of creators racing for an expired key, exactly one is acknowledged and kept', async () => {
      const { a, b, authority } = pair(layout);
      for (let k = 0; k < 5; k++) await b.put('ns', `expired-${k}`, buf('old'), { ttlSeconds: 1 });
      await sleep(1100);
      for (let k = 0; k < 5; k++) {
        const key = `expired-${k}`;
        await expectOneWinner(await race(a, b, key), key, a, b, authority);
      }
    });

    it('a write after a create is visible, whichever clock is ahead; no read goes back to an older version', async () => {
      const { a, b, authority } = pair(layout);
      for (let k = 0; k < 6; k++) {
        const key = `then-${k}`;
        if (k >= 3) {
          await a.put('ns', key, buf('old'));
          await b.delete('ns', key);
        }
        const winner = await expectOneWinner(await race(a, b, key), key, a, b, authority);
        // The laggard's clock is a second behind a's: its write must still land above the create.
        for (const [c, value] of [
          [b, 'after-b'],
          [a, 'after-a'],
        ] as const) {
          const w = await c.put('ns', key, buf(value));
          expect(w.superseded).toBeUndefined();
          expect(w.version).toBeGreaterThan(winner.w.version);
          // The writer reads it back, and so does every reader past the near cache (the tiers themselves).
          expect((await c.get('ns', key))!.entry.value.toString()).toBe(value);
          expect((await authority.get('ns', key))!.value.toString()).toBe(value);
        }
        await expect(b.put('ns', key, buf('again'), { ifNoneMatch: true })).rejects.toBeInstanceOf(VersionConflictError);
      }
    });
  });

  it('reads during the race never return a version older than an acknowledged create', async () => {
    const { a, b, authority } = pair(LAYOUTS[0]!);
    for (let k = 0; k < 10; k++) {
      const key = `watched-${k}`;
      let acked: number | undefined;
      const seen: { version: number; ackedBefore: number | undefined }[] = [];
      let done = false;
      const reader = (async () => {
        while (!done) {
          const ackedBefore = acked;
          const r = await (seen.length % 2 ? a : b).get('ns', key);
          if (r) seen.push({ version: r.entry.header.version, ackedBefore });
          await sleep(0);
        }
      })();
      const tries = [a, b, a, b].map((c, i) =>
        c.put('ns', key, buf(`${i}`), { ifNoneMatch: true }).then(
          (w) => (acked = w.version),
          () => undefined,
        ),
      );
      await Promise.all(tries);
      done = true;
      await reader;
      for (const s of seen) if (s.ackedBefore !== undefined) expect(s.version).toBeGreaterThanOrEqual(s.ackedBefore);
      expect((await authority.head('ns', key))!.version).toBe(acked);
    }
  });
});
