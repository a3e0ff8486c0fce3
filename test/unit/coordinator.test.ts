import { jest } from '@jest/globals';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry, type NamespacePolicyInput } from '../../core/policy/namespace-settings.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { StrataError, TierUnavailableError, VersionConflictError } from '../../core/errors.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { SwitchableTier, entry } from '../helpers/tiers.js';
import type { Entry } from '../../core/model/entry.js';

function setup(defaults: NamespacePolicyInput = {}, opts: { l1?: boolean } = {}) {
  const hot = new SwitchableTier('hot');
  const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
  const l1 = opts.l1 ? new MemoryTier({ name: 'l1', maxBytes: 1024 * 1024 }) : undefined;
  const c = new Coordinator({
    tiers: [hot, cold],
    nearCache: l1,
    policies: new PolicyRegistry({ defaults }),
    flushTimer: false,
    onBackgroundError: () => {},
    hotFence: { leaseMs: 20 },
  });
  return { c, hot, cold, l1 };
}

const buf = (s: string) => Buffer.from(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Coordinator', () => {
  describe('read path', () => {
    it('serves from the highest tier that holds the key and promotes lower hits upwards off the critical path', async () => {
      const { c, hot, cold } = setup();
      await cold.put('ns', 'k', entry(7, 'from-cold'));
      const r = await c.get('ns', 'k');
      expect(r!.tier).toBe('cold');
      await c.drain();
      expect((await hot.get('ns', 'k'))!.header.version).toBe(7);
      expect((await c.get('ns', 'k'))!.tier).toBe('hot');
    });

    it('never lets a promotion replace a newer write', async () => {
      const { c, hot, cold } = setup();
      await cold.put('ns', 'k', entry(1, 'old'));
      await hot.put('ns', 'k', entry(2, 'new', { expiresAt: Date.now() - 1 })); // expired in hot
      const r = await c.get('ns', 'k');
      expect(r!.entry.value.toString()).toBe('old');
      // A write lands before the promotion runs.
      await c.put('ns', 'k', buf('newest'));
      await c.drain();
      expect((await c.get('ns', 'k'))!.entry.value.toString()).toBe('newest');
    });

    it('stops at a tombstone even when a lower tier still has the value', async () => {
      const { c, cold } = setup();
      await c.put('ns', 'k', buf('v'));
      await c.delete('ns', 'k');
      expect(await c.get('ns', 'k')).toBeUndefined();
      // The cold copy of an older version cannot come back.
      await cold.put('ns', 'k', entry(1, 'resurrected'));
      expect(await c.get('ns', 'k')).toBeUndefined();
    });

    it('falls through to the next tier when one is down, and answers 503 when none can serve', async () => {
      const { c, hot, cold } = setup();
      await c.put('ns', 'k', buf('v'));
      hot.down = true;
      expect((await c.get('ns', 'k'))!.tier).toBe('cold');
      cold.down = true;
      await expect(c.get('ns', 'k')).rejects.toBeInstanceOf(TierUnavailableError);
      await expect(c.get('ns', 'k')).rejects.toMatchObject({ status: 503, code: 'TIER_UNAVAILABLE' });
    });

    it('does not claim a miss when a tier that might hold the key failed', async () => {
      const { c, cold } = setup();
      cold.down = true;
      await expect(c.get('ns', 'absent')).rejects.toBeInstanceOf(TierUnavailableError);
    });

    it('batch-gets across tiers in order, with misses absent', async () => {
      const { c, hot, cold } = setup();
      await hot.put('ns', 'a', entry(1, 'A'));
      await cold.put('ns', 'b', entry(1, 'B'));
      const rs = await c.getMany('ns', ['a', 'b', 'zz']);
      expect(rs.map((r) => r?.tier)).toEqual(['hot', 'cold', undefined]);
      expect(rs[1]!.entry.value.toString()).toBe('B');
    });
  });

  describe('write policies', () => {
    it('write-through acknowledges once hot and cold hold the same version', async () => {
      const { c, hot, cold } = setup();
      const w = await c.put('ns', 'k', buf('v1'), { tags: ['t'], contentType: 'text/plain' });
      expect(w.tiers).toEqual(['hot', 'cold']);
      expect((await hot.get('ns', 'k'))!.header.version).toBe(w.version);
      const coldEntry = (await cold.get('ns', 'k'))!;
      expect(coldEntry.header).toMatchObject({ version: w.version, tags: ['t'], contentType: 'text/plain', size: 2 });
    });

    it('write-through still acknowledges with hot down, but not with cold down', async () => {
      const { c, hot, cold } = setup();
      hot.down = true;
      expect((await c.put('ns', 'k', buf('v'))).tiers).toEqual(['cold']);
      hot.down = false;
      expect((await c.stats()).hotFence).toMatchObject({ bumps: 1, unknownHotCopies: 1 });
      cold.down = true;
      await expect(c.put('ns', 'k', buf('v'))).rejects.toBeInstanceOf(TierUnavailableError);
    });

    it('write-back acknowledges from hot, marks dirty, and the flush makes it durable and clean', async () => {
      const { c, hot, cold } = setup({ writeMode: 'write-back' });
      const w = await c.put('ns', 'k', buf('v'));
      expect(w.tiers).toEqual(['hot']);
      expect(w.durable).toBe(false); // acknowledged from hot alone: said in the result
      expect(await cold.get('ns', 'k')).toBeUndefined();
      expect(await hot.listDirty(10)).toEqual([{ ns: 'ns', key: 'k' }]);
      expect(await c.flushDirty()).toBe(1);
      expect((await cold.get('ns', 'k'))!.header.version).toBe(w.version);
      expect(await hot.listDirty(10)).toEqual([]);
    });

    it('a due flush with a backlog budget writes down a backlog past one pass of 1,000, and stops when nothing lands', async () => {
      const { c, hot, cold } = setup({ writeMode: 'write-back', flushIntervalMs: 100 });
      for (let i = 0; i < 2500; i++) await c.put('ns', `k${i}`, buf('v'));
      // One pass takes 1,000 (the Lambda end-of-invocation flush); the ticker's flush goes on while a backlog lasts.
      expect(await c.flushDirty()).toBe(1000);
      await new Promise((r) => setTimeout(r, 110)); // due again (the interval is 100 ms)
      expect(await c.flushIfDue(60_000)).toBe(1500);
      expect(await hot.listDirty(10)).toEqual([]);
      expect(await cold.get('ns', 'k2499')).toBeDefined();
      // With the durable tier down nothing lands: the pass fails (reported by the timer), and the drain stops there
      // rather than spinning through its budget; the entries stay dirty for the next tick.
      for (let i = 0; i < 1200; i++) await c.put('ns', `d${i}`, buf('v'));
      cold.down = true;
      const calls = cold.calls;
      await new Promise((r) => setTimeout(r, 110));
      await expect(c.flushIfDue(60_000)).rejects.toThrow(TierUnavailableError);
      expect(cold.calls - calls).toBeLessThanOrEqual(1000);
      expect(await hot.listDirty(2000)).toHaveLength(1200);
      cold.down = false;
    });

    it('write-back writes through when the hot tier has no room for more dirty data', async () => {
      const hot = new SwitchableTier('hot', 4000);
      const cold = new SwitchableTier('cold');
      const c = new Coordinator({
        tiers: [hot, cold],
        policies: new PolicyRegistry({ defaults: { writeMode: 'write-back' } }),
        flushTimer: false,
      });
      const results = [];
      for (let i = 0; i < 5; i++) results.push(await c.put('ns', `k${i}`, Buffer.alloc(900)));
      expect(results.map((r) => r.tiers.join('+'))).toContain('hot+cold');
      for (let i = 0; i < 5; i++) expect((await c.get('ns', `k${i}`))!.entry.value.length).toBe(900);
    });

    it('refuses, rather than acknowledges, a write that no tier could store', async () => {
      const hot = new SwitchableTier('hot', 1000);
      const c = new Coordinator({ tiers: [hot], flushTimer: false });
      await expect(c.put('ns', 'k', Buffer.alloc(5000))).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
    });

    it('write-around keeps large values out of hot, leaving a location marker that shields them', async () => {
      const { c, hot } = setup({ writeAroundBytes: 1000 });
      await c.put('ns', 'big', Buffer.alloc(5000, 7));
      const marker = (await hot.get('ns', 'big'))!;
      expect(marker.header.flags.elsewhere).toBe(true);
      expect(marker.value.length).toBe(0);
      const r = await c.get('ns', 'big');
      expect(r!.tier).toBe('cold');
      expect(r!.entry.value.length).toBe(5000);
      await c.drain();
      expect((await hot.get('ns', 'big'))!.header.flags.elsewhere).toBe(true); // not promoted
    });

    it('applies TTLs: explicit, namespace default, and none', async () => {
      const { c } = setup({ defaultTtlSeconds: 60 });
      const before = Date.now();
      expect((await c.put('ns', 'a', buf('v'), { ttlSeconds: 5 })).expiresAt).toBeGreaterThanOrEqual(before + 5000);
      expect((await c.put('ns', 'b', buf('v'))).expiresAt).toBeGreaterThanOrEqual(before + 60_000);
      expect((await c.put('ns', 'c', buf('v'), { ttlSeconds: null })).expiresAt).toBeNull();
    });
  });

  describe('versions', () => {
    it('re-stamps a write that lost to a newer version elsewhere instead of dropping it', async () => {
      const { c, cold } = setup();
      // Another writer with a clock far ahead already stored a version in cold.
      const future = new HybridLogicalClock(() => Date.now() + 60_000).next();
      await cold.put('ns', 'k', entry(future, 'theirs'));
      const w = await c.put('ns', 'k', buf('mine'));
      expect(w.version).toBeGreaterThan(future);
      expect((await c.get('ns', 'k'))!.entry.value.toString()).toBe('mine');
    });

    it('makes every version it issues higher than the previous one for the same key', async () => {
      const { c } = setup();
      const vs = [];
      for (let i = 0; i < 50; i++) vs.push((await c.put('ns', 'k', buf(String(i)))).version);
      expect([...vs].sort((a, b) => a - b)).toEqual(vs);
      expect((await c.get('ns', 'k'))!.entry.value.toString()).toBe('49');
    });

    it('acknowledges every write when coordinators in different processes race on one key, newest wins everywhere', async () => {
      const hot = new SwitchableTier('hot');
      const cold = new SwitchableTier('cold');
      const a = new Coordinator({ tiers: [hot, cold], flushTimer: false });
      const b = new Coordinator({ tiers: [hot, cold], flushTimer: false });
      const writes = await Promise.all(Array.from({ length: 64 }, (_, i) => (i % 2 ? a : b).put('ns', 'hot-key', buf(`w${i}`))));
      const winner = writes.reduce((m, w, i) => (w.version > writes[m]!.version ? i : m), 0);
      for (const tier of [hot, cold]) {
        const e = (await tier.get('ns', 'hot-key'))!;
        expect(e.header.version).toBe(writes[winner]!.version);
        expect(e.value.toString()).toBe(`w${winner}`);
      }
      expect(writes.filter((w) => !w.superseded).length).toBeGreaterThan(0);
    });

    it('enforces If-Match and If-None-Match with a 409', async () => {
      const { c } = setup();
      const w1 = await c.put('ns', 'k', buf('a'), { ifNoneMatch: true });
      await expect(c.put('ns', 'k', buf('b'), { ifNoneMatch: true })).rejects.toBeInstanceOf(VersionConflictError);
      await expect(c.put('ns', 'k', buf('b'), { ifMatch: w1.version - 1 })).rejects.toMatchObject({
        status: 409,
        details: { current: w1.version },
      });
      const w2 = await c.put('ns', 'k', buf('b'), { ifMatch: w1.version });
      expect(w2.version).toBeGreaterThan(w1.version);
      await expect(c.delete('ns', 'k', { ifMatch: w1.version })).rejects.toBeInstanceOf(VersionConflictError);
      await c.delete('ns', 'k', { ifMatch: w2.version });
      expect(await c.get('ns', 'k')).toBeUndefined();
    });

    it('concurrent writers of one key whose writes land out of order: every write acknowledged, the newest stored', async () => {
      // Writes reach the tier after a random delay, so a later-stamped write often lands first and the earlier one
      // loses: it retries under the key's lock, above everything seen, instead of failing or being superseded.
      class ShuffledTier extends MemoryTier {
        override async put(ns: string, key: string, e: Parameters<MemoryTier['put']>[2]) {
          await new Promise((r) => setTimeout(r, Math.random() * 5));
          return super.put(ns, key, e);
        }
      }
      const hot = new ShuffledTier({ name: 'hot' });
      const c = new Coordinator({
        tiers: [hot],
        policies: new PolicyRegistry({ defaults: { writeTiers: ['hot'], nearCache: { enabled: false } } }),
        flushTimer: false,
      });
      const spy = jest.spyOn((c as unknown as { writeLocks: { run: (...a: unknown[]) => unknown } }).writeLocks, 'run');
      const rs = await Promise.all(Array.from({ length: 32 }, (_, i) => c.put('ns', 'hot-key', buf(`v${i}`))));
      expect(rs.every((r) => !r.superseded && r.tiers.includes('hot'))).toBe(true);
      const newest = rs.reduce((a, r, i) => (r.version > a.version ? { version: r.version, i } : a), { version: 0, i: -1 });
      const stored = (await hot.get('ns', 'hot-key'))!;
      expect(stored.header.version).toBe(newest.version);
      expect(stored.value.toString()).toBe(`v${newest.i}`);
      expect(spy.mock.calls.length).toBeGreaterThan(0); // some lost their first attempt and took the lock
      expect(spy.mock.calls.length).toBeLessThan(32); // the rest took none
      // Uncontended writes take no lock at all.
      spy.mockClear();
      await Promise.all(Array.from({ length: 8 }, (_, i) => c.put('ns', `solo${i}`, buf('x'))));
      expect(spy).not.toHaveBeenCalled();
    });

    it('lets exactly one of many concurrent create-only writes win', async () => {
      const { c } = setup();
      const rs = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => c.put('ns', 'once', buf(String(i)), { ifNoneMatch: true })),
      );
      expect(rs.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of rs) if (r.status === 'rejected') expect((r.reason as StrataError).code).toBe('VERSION_CONFLICT');
    });
  });

  describe('near cache (L1)', () => {
    it('serves repeat reads from L1 and keeps read-your-writes across a delete racing a read', async () => {
      const { c, hot } = setup({}, { l1: true });
      await c.put('ns', 'k', buf('v1'));
      expect((await c.get('ns', 'k'))!.tier).toBe('l1');
      // A slow reader fetched v1 from hot; the delete lands; then the reader fills L1 with v1: refused.
      const stale = (await hot.get('ns', 'k'))!;
      await c.delete('ns', 'k');
      await (c as unknown as { nearFill: (...a: unknown[]) => void }).nearFill('ns', 'k', stale, c.policies.for('ns'), 0);
      expect(await c.get('ns', 'k')).toBeUndefined();
    });

    it("keeps read-your-writes when a slow read's fill lands after the newer write's copy expired", async () => {
      const { c, hot } = setup({ nearCache: { ttlMs: 20 } }, { l1: true });
      const v1 = await c.put('ns', 'k', buf('v1'));
      await sleep(30); // L1's copy of v1 expires: the next read walks the tiers
      // The read fetches v1 from hot, then stalls (a GC pause, a slow tier) before it fills L1.
      const get = hot.get.bind(hot);
      let reached!: () => void;
      const atHot = new Promise<void>((r) => (reached = r));
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      hot.get = async (...a) => {
        const e = await get(...a);
        hot.get = get;
        reached();
        await held;
        return e;
      };
      const slow = c.get('ns', 'k');
      await atHot;
      const v2 = await c.put('ns', 'k', buf('v2')); // acknowledged; L1 holds v2 for 20 ms
      await sleep(30);
      release();
      expect((await slow)!.entry.header.version).toBe(v1.version); // it began before v2: fine
      // Without the guard its fill would have put v1 back into L1, and this read would return it.
      expect((await c.get('ns', 'k'))!.entry.header.version).toBe(v2.version);
    });

    it("keeps read-your-writes when a slower write's fill lands after the newer write's copy left L1", async () => {
      const { c, l1 } = setup({}, { l1: true });
      const policy = c.policies.for('ns');
      const since = l1!.time(); // the slow write of v1 begins
      const v1 = await c.put('ns', 'k', buf('v1'));
      const stale = (await c.get('ns', 'k'))!.entry;
      const v2 = await c.put('ns', 'k', buf('v2'));
      l1!.deleteSync('ns', 'k'); // evicted, or dropped (a conditional write, an invalidation check)
      // The slow write of v1 (in the tiers before v2) fills L1 only now.
      await (c as unknown as { nearFill: (...a: unknown[]) => void }).nearFill('ns', 'k', stale, policy, since);
      expect(stale.header.version).toBe(v1.version);
      expect((await c.get('ns', 'k'))!.entry.header.version).toBe(v2.version);
    });

    it('keeps read-your-writes when a write is too large for L1 and L1 holds an older copy', async () => {
      const { c } = setup({ nearCache: { maxValueBytes: 1024 } }, { l1: true });
      await c.put('ns', 'k', buf('small'));
      expect((await c.get('ns', 'k'))!.tier).toBe('l1');
      const big = await c.put('ns', 'k', Buffer.alloc(4096, 7));
      const r = (await c.get('ns', 'k'))!;
      expect([r.entry.header.version, r.tier]).toEqual([big.version, 'hot']);
    });

    it('keeps read-your-writes when L1 is switched off and back on at runtime', async () => {
      const { c } = setup({ nearCache: { ttlMs: 60_000 } }, { l1: true });
      await c.put('ns', 'k', buf('v1'));
      expect((await c.get('ns', 'k'))!.tier).toBe('l1');
      c.replacePolicies(new PolicyRegistry({ defaults: { nearCache: { enabled: false, ttlMs: 60_000 } } }));
      const v2 = await c.put('ns', 'k', buf('v2'));
      c.replacePolicies(new PolicyRegistry({ defaults: { nearCache: { ttlMs: 60_000 } } }));
      expect((await c.get('ns', 'k'))!.entry.header.version).toBe(v2.version);
    });

    it('can be switched off per namespace', async () => {
      const hot = new SwitchableTier('hot');
      const l1 = new MemoryTier({ name: 'l1' });
      const c = new Coordinator({
        tiers: [hot],
        nearCache: l1,
        policies: new PolicyRegistry({ namespaces: { nol1: { nearCache: { enabled: false } } } }),
        flushTimer: false,
      });
      await c.put('nol1', 'k', buf('v'));
      expect((await c.get('nol1', 'k'))!.tier).toBe('hot');
    });
  });

  describe('hot copies never undo an acknowledged write', () => {
    /** Two coordinators (two containers) over one hot and one durable tier. */
    function pair(defaults: NamespacePolicyInput = {}) {
      const hot = new SwitchableTier('hot');
      const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
      const make = () =>
        new Coordinator({
          tiers: [hot, cold],
          policies: new PolicyRegistry({ defaults }),
          flushTimer: false,
          onBackgroundError: () => {},
          hotFence: { leaseMs: 30 },
        });
      return { hot, cold, a: make(), b: make() };
    }

    it('a write whose hot copy failed is not shadowed by the older hot copy, for any coordinator', async () => {
      const { hot, a, b } = pair();
      await a.put('ns', 'k', buf('v1'));
      await b.ready();
      expect((await b.get('ns', 'k'))!.entry.value.toString()).toBe('v1');
      hot.down = true; // stalled or partitioned: the hot copy of v2 is never written
      const v2 = await a.put('ns', 'k', buf('v2'));
      expect(v2.tiers).toEqual(['cold']);
      hot.down = false; // hot answers again, still holding v1
      expect((await hot.get('ns', 'k'))!.value.toString()).toBe('v1');
      for (const c of [a, b]) {
        const r = await c.get('ns', 'k');
        expect(r!.entry.header.version).toBe(v2.version);
        expect((await c.head('ns', 'k'))!.header.version).toBe(v2.version);
      }
    });

    it('a delete whose hot tombstone failed does not bring the key back', async () => {
      const { hot, a, b } = pair();
      await a.put('ns', 'k', buf('v1'));
      hot.down = true;
      await a.delete('ns', 'k');
      hot.down = false;
      expect(await b.get('ns', 'k')).toBeUndefined();
      expect(await a.get('ns', 'k')).toBeUndefined();
      expect(await b.head('ns', 'k')).toBeUndefined();
    });

    it('a dirty write-back copy stays readable after its shard is fenced, unless a newer durable write exists', async () => {
      const { hot, a, b } = pair({ writeMode: 'write-back' });
      const dirty = await a.put('ns', 'k', buf('dirty'));
      expect(dirty.durable).toBe(false);
      // Another key of any shard fails its hot copy: every shard may be bumped, the dirty copy must still win.
      hot.down = true;
      for (let i = 0; i < 64; i++) await a.put('ns', `other-${i}`, buf('x'));
      hot.down = false;
      expect((await b.get('ns', 'k'))!.entry.value.toString()).toBe('dirty');
      // A write-through of the key while hot is down makes the durable copy the newest: it wins over the dirty one.
      hot.down = true;
      const newer = await a.put('ns', 'k', buf('newer'));
      hot.down = false;
      expect((await b.get('ns', 'k'))!.entry.header.version).toBe(newer.version);
    });

    it('does not acknowledge a write whose hot copy failed when the fence cannot be raised', async () => {
      const hot = new SwitchableTier('hot');
      const cold = new SwitchableTier('cold');
      const c = new Coordinator({
        tiers: [hot, cold],
        flushTimer: false,
        onBackgroundError: () => {},
        hotFence: { leaseMs: 20 },
      });
      await c.put('ns', 'k', buf('v1'));
      hot.down = true;
      const putFence = cold.put.bind(cold);
      cold.put = async (ns: string, key: string, e: Entry) =>
        ns === 'strata-system' ? Promise.reject(new TierUnavailableError('cold')) : putFence(ns, key, e);
      await expect(c.put('ns', 'k', buf('v2'))).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
    });

    it('a promotion that raced a newer write and its eviction does not install the older version', async () => {
      const { c, hot, cold } = setup();
      await cold.put('ns', 'k', entry(1, 'old'));
      await c.ready();
      // The read of cold is held until a newer write has landed and its hot copy has been evicted.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const coldGet = cold.get.bind(cold);
      cold.get = async (ns: string, key: string) => {
        const e = await coldGet(ns, key);
        await gate;
        return e;
      };
      const racing = c.get('ns', 'k');
      await new Promise((r) => setTimeout(r, 5));
      cold.get = coldGet;
      const w = await c.put('ns', 'k', buf('new'));
      await hot.delete('ns', 'k'); // evicted
      release();
      expect((await racing)!.entry.value.toString()).toBe('old'); // that read began before the write
      await c.drain();
      expect((await c.get('ns', 'k'))!.entry.header.version).toBe(w.version);
      await c.drain(); // the newer version is promoted and confirmed
      expect((await hot.get('ns', 'k'))!.header).toMatchObject({ version: w.version, flags: {} });
    });

    it('serves hot copies again once the fence has been read, and counts the writes whose hot outcome was unknown', async () => {
      const { hot, a } = pair();
      await a.put('ns', 'k', buf('v1'));
      await a.ready();
      expect((await a.get('ns', 'k'))!.tier).toBe('hot');
      hot.down = true;
      await a.put('ns', 'k', buf('v2'));
      hot.down = false;
      expect((await a.get('ns', 'k'))!.tier).toBe('cold'); // the stale hot copy is skipped
      await a.drain(); // the promotion re-installs v2 under the new epoch
      expect((await a.get('ns', 'k'))!).toMatchObject({ tier: 'hot' });
      expect((await a.stats()).hotFence).toMatchObject({ unknownHotCopies: 1, bumps: 1 });
    });
  });

  describe('a full durable tier is not a written one', () => {
    it('shadows the older copy in a full tier with a marker and acknowledges with the tiers that took the value', async () => {
      const warm = new SwitchableTier('warm', 4000);
      const cold = new SwitchableTier('cold');
      const c = new Coordinator({ tiers: [warm, cold], flushTimer: false });
      const v1 = await c.put('ns', 'k', Buffer.alloc(1000, 1));
      expect(v1.tiers).toEqual(['warm', 'cold']);
      for (let i = 0; i < 2; i++) await warm.put('ns', `filler-${i}`, entry(1, Buffer.alloc(1000), { flags: { pinned: true } }));
      const v2 = await c.put('ns', 'k', Buffer.alloc(3000, 2)); // does not fit in warm any more
      expect(v2.tiers).toEqual(['cold']);
      expect((await warm.get('ns', 'k'))!.header).toMatchObject({ version: v2.version, flags: { elsewhere: true } });
      const r = await c.get('ns', 'k');
      expect(r!.entry.header.version).toBe(v2.version);
      expect(r!.tier).toBe('cold');
    });

    it('refuses with a typed 503 when no durable tier could take the value, leaving the old one intact', async () => {
      const warm = new SwitchableTier('warm', 2000);
      const c = new Coordinator({
        tiers: [warm],
        flushTimer: false,
        policies: new PolicyRegistry({ defaults: { writeTiers: ['warm'] } }),
      });
      const v1 = await c.put('ns', 'k', Buffer.alloc(100));
      await expect(c.put('ns', 'k', Buffer.alloc(5000))).rejects.toMatchObject({
        status: 503,
        code: 'TIER_UNAVAILABLE',
        details: { reason: 'full' },
      });
      expect((await c.get('ns', 'k'))!.entry.header.version).toBe(v1.version);
    });
  });

  describe('one tier walk: get, head, getMany and preconditions agree', () => {
    it('head fails with 503 exactly when get does', async () => {
      const { c, cold } = setup();
      await cold.put('ns', 'only-cold', entry(5, 'v'));
      cold.down = true;
      await expect(c.get('ns', 'only-cold')).rejects.toMatchObject({ status: 503 });
      await expect(c.head('ns', 'only-cold')).rejects.toMatchObject({ status: 503 });
      await expect(c.getMany('ns', ['only-cold'])).rejects.toMatchObject({ status: 503 });
    });

    it('gives a hit from below a failed tier only when every acknowledged write reaches the tier it came from', async () => {
      const hot = new SwitchableTier('hot');
      const warm = new SwitchableTier('warm');
      const cold = new SwitchableTier('cold');
      const make = (writeTiers: ('hot' | 'warm' | 'cold')[]) =>
        new Coordinator({
          tiers: [hot, warm, cold],
          policies: new PolicyRegistry({ defaults: { writeTiers } }),
          flushTimer: false,
          onBackgroundError: () => {},
          hotFence: { leaseMs: 20 },
        });
      await cold.put('ns', 'k', entry(1, 'evicted to cold long ago'));
      warm.down = true; // may hold a newer version
      const warmOnly = make(['hot', 'warm']);
      await expect(warmOnly.get('ns', 'k')).rejects.toMatchObject({ status: 503 });
      await expect(warmOnly.head('ns', 'k')).rejects.toMatchObject({ status: 503 });
      // A namespace that writes to cold too: cold has every acknowledged write, so its answer stands.
      const both = make(['hot', 'warm', 'cold']);
      expect((await both.get('ns', 'k'))!.tier).toBe('cold');
      expect((await both.head('ns', 'k'))!.tier).toBe('cold');
    });

    it('decides no precondition on a partial view', async () => {
      const { c, cold } = setup();
      await cold.put('ns', 'k', entry(5, 'v'));
      cold.down = true;
      await expect(c.put('ns', 'k', buf('x'), { ifMatch: 5 })).rejects.toMatchObject({ status: 503 });
      await expect(c.put('ns', 'k', buf('x'), { ifNoneMatch: true })).rejects.toMatchObject({ status: 503 });
      await expect(c.delete('ns', 'k', { ifMatch: 5 })).rejects.toMatchObject({ status: 503 });
    });

    it('answers a miss while only the hot tier is down, for a write-through namespace (hot never leads)', async () => {
      const { c, hot } = setup();
      hot.down = true;
      expect(await c.get('ns', 'absent')).toBeUndefined();
      expect(await c.head('ns', 'absent')).toBeUndefined();
    });

    it('If-Match: * applies only to a key that exists', async () => {
      const { c } = setup();
      await expect(c.put('ns', 'k', buf('x'), { ifMatch: '*' })).rejects.toBeInstanceOf(VersionConflictError);
      await c.put('ns', 'k', buf('v1'));
      const w = await c.put('ns', 'k', buf('v2'), { ifMatch: '*' });
      expect((await c.get('ns', 'k'))!.entry.header.version).toBe(w.version);
      await c.delete('ns', 'k', { ifMatch: '*' });
      await expect(c.delete('ns', 'k', { ifMatch: '*' })).rejects.toBeInstanceOf(VersionConflictError);
    });
  });
});
