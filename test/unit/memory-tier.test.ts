import { MemoryTier } from '../../core/tiers/memory-tier.js';
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
