import { MemoryTier, memoryLossSlot } from '../../core/tiers/memory-tier.js';
import { makeTombstone } from '../../core/model/entry.js';
import { entry } from '../helpers/tiers.js';

describe('MemoryTier', () => {
  it('refuses older and equal versions and reports the stored one', async () => {
    const t = new MemoryTier();
    expect(await t.put('ns', 'k', entry(5, 'five'))).toEqual({ applied: true, current: 5 });
    expect(await t.put('ns', 'k', entry(4, 'four'))).toEqual({ applied: false, current: 5 });
    expect(await t.put('ns', 'k', entry(5, 'again'))).toEqual({ applied: false, current: 5 });
    expect((await t.get('ns', 'k'))!.value.toString()).toBe('five');
    expect(await t.put('ns', 'k', entry(6, 'six'))).toEqual({ applied: true, current: 6 });
  });

  it('treats expired entries as absent, for reads and for version checks', async () => {
    let now = 1000;
    const t = new MemoryTier({ now: () => now });
    await t.put('ns', 'k', entry(9, 'x', { expiresAt: 1500 }));
    now = 1500;
    expect(await t.get('ns', 'k')).toBeUndefined();
    expect((await t.put('ns', 'k', entry(2))).applied).toBe(true);
  });

  it('stays within its byte budget, evicting in S3-FIFO order', async () => {
    const t = new MemoryTier({ maxBytes: 20_000 });
    const big = Buffer.alloc(1000, 1);
    for (let i = 0; i < 100; i++) await t.put('ns', `k${i}`, entry(1, big));
    const s = await t.stats();
    expect(s.bytes).toBeLessThanOrEqual(20_000);
    expect(s.evictions).toBeGreaterThan(0);
    expect(await t.get('ns', 'k99')).toBeDefined();
    expect(await t.get('ns', 'k0')).toBeUndefined();
  });

  it('keeps a hot key that is read while a scan of cold keys streams through', async () => {
    const t = new MemoryTier({ maxBytes: 50_000 });
    const v = Buffer.alloc(1000);
    await t.put('ns', 'hot', entry(1, v));
    for (let i = 0; i < 500; i++) {
      await t.put('ns', `scan${i}`, entry(1, v));
      await t.get('ns', 'hot');
    }
    expect(await t.get('ns', 'hot')).toBeDefined();
  });

  it('never evicts dirty entries and refuses dirty writes past its dirty share', async () => {
    const t = new MemoryTier({ maxBytes: 10_000, maxDirtyRatio: 0.5 });
    const v = Buffer.alloc(1000);
    const outcomes = [];
    for (let i = 0; i < 8; i++) outcomes.push(await t.put('ns', `d${i}`, entry(1, v, { flags: { dirty: true } })));
    expect(outcomes.some((o) => o.full)).toBe(true);
    const accepted = outcomes.filter((o) => o.applied).length;
    for (let i = 0; i < 50; i++) await t.put('ns', `c${i}`, entry(1, v));
    const dirty = await t.listDirty(100);
    expect(dirty).toHaveLength(accepted);
    for (const d of dirty) expect(await t.get(d.ns, d.key)).toBeDefined();
  });

  it('marks clean only the version that was flushed', async () => {
    const t = new MemoryTier();
    await t.put('ns', 'k', entry(1, 'a', { flags: { dirty: true } }));
    await t.put('ns', 'k', entry(2, 'b', { flags: { dirty: true } }));
    expect(await t.markClean('ns', 'k', 1)).toBe(false);
    expect(await t.listDirty(10)).toEqual([{ ns: 'ns', key: 'k' }]);
    expect(await t.markClean('ns', 'k', 2)).toBe(true);
    expect(await t.listDirty(10)).toEqual([]);
    expect((await t.get('ns', 'k'))!.header.flags.dirty).toBeUndefined();
  });

  it('returns tombstones to the caller, and copies values in and out', async () => {
    const t = new MemoryTier();
    const e = entry(1, 'abc');
    await t.put('ns', 'k', e);
    e.value[0] = 0x7a;
    const got = (await t.get('ns', 'k'))!;
    expect(got.value.toString()).toBe('abc');
    got.value[0] = 0x7a;
    expect((await t.get('ns', 'k'))!.value.toString()).toBe('abc');
    await t.put('ns', 'k', makeTombstone(2, 60_000));
    expect((await t.get('ns', 'k'))!.header.flags.tombstone).toBe(true);
    expect(await t.has('ns', 'k')).toBe(false);
  });

  it('deletes conditionally on the version', async () => {
    const t = new MemoryTier();
    await t.put('ns', 'k', entry(3));
    expect(await t.delete('ns', 'k', 2)).toBe(false);
    expect(await t.delete('ns', 'k', 3)).toBe(true);
    expect(await t.get('ns', 'k')).toBeUndefined();
  });
});

describe('MemoryTier as a near cache: a copy from before a newer one left is refused (putSync since)', () => {
  function nearTier(maxBytes?: number) {
    const clock = { now: 1000 };
    const t = new MemoryTier({ name: 'l1', now: () => clock.now, ...(maxBytes ? { maxBytes } : {}) });
    t.trackLosses();
    return { t, clock };
  }

  it('refuses an older copy once the newer one expired, though nothing newer is left to compare with', () => {
    const { t, clock } = nearTier();
    const since = t.time(); // a read begins, and fetches v1
    t.putSync('ns', 'k', entry(2, 'v2'), { maxAgeMs: 100, since: t.time() }); // v2 written meanwhile
    clock.now += 150; // v2's copy expires
    expect(t.putSync('ns', 'k', entry(1, 'v1'), { maxAgeMs: 100, since })).toEqual({ applied: false, current: null });
    expect(t.getSync('ns', 'k')).toBeUndefined();
    // A read that began after the expiry fills as before.
    expect(t.putSync('ns', 'k', entry(2, 'v2'), { maxAgeMs: 100, since: t.time() }).applied).toBe(true);
  });

  it('drops the copies a rule names, as losses: a fill read before the drop is refused', () => {
    const { t, clock } = nearTier();
    for (const [ns, key] of [
      ['ns', 'a'],
      ['ns', 'b'],
      ['ns2', 'a'],
    ])
      t.putSync(ns!, key!, entry(1, `${ns}/${key}`), { since: t.time() });
    const since = t.time(); // a read of ns/a begins
    clock.now += 10;
    expect(t.dropWhereSync((ns, key, h) => key === 'a' && h.version === 1)).toBe(2);
    expect(t.getSync('ns', 'a')).toBeUndefined();
    expect(t.getSync('ns2', 'a')).toBeUndefined();
    expect(t.getSync('ns', 'b')?.value.toString()).toBe('ns/b');
    expect(t.putSync('ns', 'a', entry(1, 'ns/a'), { since }).applied).toBe(false);
  });

  it('refuses an older copy once the newer one was evicted or deleted', () => {
    const { t, clock } = nearTier(8_000);
    const since = t.time();
    clock.now += 1;
    t.putSync('ns', 'k', entry(2, Buffer.alloc(1000)), { maxAgeMs: 60_000, since: t.time() });
    for (let i = 0; t.getSync('ns', 'k', { peek: true }); i++)
      t.putSync('ns', `other${i}`, entry(1, Buffer.alloc(1000)), { maxAgeMs: 60_000, since: t.time() });
    expect(t.putSync('ns', 'k', entry(1, 'v1'), { since }).applied).toBe(false);
    t.putSync('ns', 'd', entry(2, 'v2'), { since: t.time() });
    clock.now += 1;
    t.deleteSync('ns', 'd');
    expect(t.putSync('ns', 'd', entry(1, 'v1'), { since }).applied).toBe(false);
  });

  it('drops the older copy a key still holds when it refuses one (two keys sharing a slot)', () => {
    const { t, clock } = nearTier();
    const slot = memoryLossSlot('ns', 'k');
    let other = 0;
    while (memoryLossSlot('ns', `o${other}`) !== slot) other++;
    t.putSync('ns', 'k', entry(1, 'v1'), { maxAgeMs: 60_000, since: t.time() });
    t.putSync('ns', `o${other}`, entry(1), { since: t.time() });
    const since = t.time(); // a write of v2 to k begins
    clock.now += 1;
    t.deleteSync('ns', `o${other}`); // a loss in k's slot
    expect(t.putSync('ns', 'k', entry(2, 'v2'), { maxAgeMs: 60_000, since }).applied).toBe(false);
    // v1 must not stay: the caller just acknowledged v2.
    expect(t.getSync('ns', 'k')).toBeUndefined();
  });

  it('checks nothing where losses are not tracked (the hot tier)', () => {
    const t = new MemoryTier();
    t.putSync('ns', 'k', entry(2), { since: 0 });
    t.deleteSync('ns', 'k');
    expect(t.putSync('ns', 'k', entry(1), { since: 0 }).applied).toBe(true);
  });
});
