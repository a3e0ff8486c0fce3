import { makeTombstone } from '../../layers/core/model/entry.js';
import { RING_MIN } from '../../layers/core/ring/hash.js';
import { encodeAbsentRecord, encodeEntryRecord, encodeTrailerRecord, RecordReader, storeKey } from '../../layers/core/warm/wire.js';
import { Sieve } from '../../cachenode/src/sieve.js';
import { ENTRY_OVERHEAD_BYTES, NodeStore } from '../../cachenode/src/store.js';
import { entry, tempDir } from './warm-fixtures.js';

describe('NodeStore (LMDB on a temp dir)', () => {
  const tmp = tempDir('strata-store-');
  let store: NodeStore;
  let now = Date.now();

  beforeEach(() => {
    tmp.remove();
    store = new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
  });

  afterEach(async () => {
    await store.close();
    now = Date.now();
  });

  afterAll(() => tmp.remove());

  it('decides concurrent writes of one key by version, whatever their order of arrival', async () => {
    const results = await Promise.all([store.put('n', 'k', entry(5, 'five')), store.put('n', 'k', entry(9, 'nine')), store.put('n', 'k', entry(7, 'seven'))]);
    expect(results).toEqual([{ applied: true, current: 5 }, { applied: true, current: 9 }, { applied: false, current: 9 }]);
    expect(store.get('n', 'k')!.value.toString()).toBe('nine');
  });

  it('keeps byte accounting and key count exact across replace, remove and reopen', async () => {
    await store.put('n', 'a', entry(1, 'x'.repeat(100)));
    await store.put('n', 'b', entry(1, 'y'.repeat(200)));
    const s1 = store.stats();
    expect(s1.keys).toBe(2);
    await store.put('n', 'a', entry(2, 'x'.repeat(10)));
    await store.remove('n', 'b');
    const s2 = store.stats();
    expect(s2.keys).toBe(1);
    expect(s2.bytes).toBe(storeKey('n', 'a').length + JSON.stringify(entry(2, 'x'.repeat(10)).header).length + 10 + ENTRY_OVERHEAD_BYTES);
    await store.close();
    store = new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
    expect(store.stats()).toMatchObject({ keys: 1, bytes: s2.bytes });
  });

  it('refuses growth past capacity with `full`, but always takes tombstones', async () => {
    const big = Buffer.alloc(460 * 1024, 1);
    await expect(store.put('n', 'a', entry(1, big))).resolves.toMatchObject({ applied: true });
    await expect(store.put('n', 'b', entry(1, big))).resolves.toMatchObject({ applied: true });
    await expect(store.put('n', 'c', entry(1, big))).resolves.toEqual({ applied: false, current: null, full: true });
    await expect(store.put('n', 'c', makeTombstone(2, 60_000))).resolves.toMatchObject({ applied: true });
    expect(store.stats().aboveWatermark).toBe(true);
  });

  it('scans a ring range in position order, after a cursor, skipping expired entries', async () => {
    for (let i = 0; i < 50; i++) await store.put('n', `k${i}`, entry(1, `v${i}`, i === 3 ? { expiresAt: now + 1000 } : {}));
    now += 2000;
    const first = store.scan(RING_MIN, null, undefined, 20);
    const rest = store.scan(RING_MIN, null, first[first.length - 1]!.sk, 100);
    const all = [...first, ...rest];
    expect(all).toHaveLength(49);
    for (let i = 1; i < all.length; i++) expect(Buffer.compare(all[i - 1]!.sk, all[i]!.sk)).toBe(-1);
    await expect(store.sweepExpired()).resolves.toBe(1);
    expect(store.stats().keys).toBe(49);
  });

  it('names victims in SIEVE order: keys read since they were passed over are spared once', async () => {
    for (let i = 0; i < 5; i++) await store.put('n', `k${i}`, entry(1));
    store.get('n', 'k0');
    store.get('n', 'k1');
    // k0 and k1 were read: the hand clears their bits and first picks k2 (order of insertion otherwise).
    expect(store.victims(3).map((v) => v.key)).toEqual(['k2', 'k3', 'k4']);
  });
});

describe('Sieve', () => {
  it('evicts the oldest unvisited key, clearing visited bits as the hand passes', () => {
    const s = new Sieve<string>();
    for (const k of ['a', 'b', 'c', 'd']) s.insert(k);
    s.touch('a');
    s.touch('c');
    expect(s.nextVictim()).toBe('b');
    s.remove('b');
    expect(s.nextVictim()).toBe('d');
    s.remove('d');
    // a and c lost their bits when the hand passed them.
    expect(s.nextVictim()).toBe('a');
    expect([...s.order()]).toEqual(['a', 'c']);
  });

  it('lists distinct victims and copes with removals under the hand', () => {
    const s = new Sieve<number>();
    for (let i = 0; i < 10; i++) s.insert(i);
    expect(s.victims(20)).toHaveLength(10);
    s.remove(0);
    s.remove(9);
    expect(new Set(s.victims(8)).size).toBe(8);
    expect(s.size).toBe(8);
  });
});

describe('record stream codec', () => {
  it('reassembles records split at any byte', () => {
    const recs = Buffer.concat([encodeEntryRecord('ns', 'ké y', entry(3, Buffer.alloc(3000, 7), { tags: ['ü'] })), encodeAbsentRecord(), encodeTrailerRecord({ done: true, next: null })]);
    for (const step of [1, 7, 4096]) {
      const reader = new RecordReader();
      const out = [];
      for (let at = 0; at < recs.length; at += step) out.push(...reader.push(recs.subarray(at, at + step)));
      expect(out.map((r) => r.type)).toEqual([1, 2, 3]);
      expect(out[0]).toMatchObject({ ns: 'ns', key: 'ké y', entry: { header: { version: 3, tags: ['ü'] } } });
      expect(reader.pending).toBe(0);
    }
  });
});
