import { rmSync } from 'node:fs';
import fc from 'fast-check';
import { makeTombstone } from '../../core/model/entry.js';
import { open as openLmdb } from 'lmdb';
import { bigIntToPosition, positionToBigInt, RING_HASH, RING_MIN } from '../../core/ring/hash.js';
import { encodeAbsentRecord, encodeEntryRecord, encodeTrailerRecord, RecordReader, storeKey } from '../../core/nodes/wire.js';
import { Sieve } from '../../cachenode/src/sieve.js';
import { ENTRY_OVERHEAD_BYTES, INLINE_VALUE_MAX_BYTES, NodeStore, StoreLayoutError } from '../../cachenode/src/store.js';
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

  async function reopenLarge(s: NodeStore): Promise<NodeStore> {
    await s.close();
    return new NodeStore({ dir: tmp.dir, capacityBytes: 1024 ** 3, sync: 'commit', now: () => now });
  }

  it('stamps a new store with its ring hash and refuses a directory whose keys another hash ordered', async () => {
    const reopen = () => new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit' });
    expect(store.getSys('store.keyHash')).toBe(RING_HASH);
    await store.put('n', 'k', entry(1, 'v'));
    await store.settle();
    // Another build's stamp.
    await store.putSys('store.keyHash', 'murmur3-64');
    await store.close();
    expect(reopen).toThrow(StoreLayoutError);
    expect(reopen).toThrow(/placed by ring hash "murmur3-64", but this build places them by "xxh64"/);
    // A store from before the stamp (positions were SHA-256): data but no stamp. The refusal writes nothing.
    const lmdb = openLmdb({ path: tmp.dir, maxDbs: 4, noSubdir: false });
    lmdb.openDB<unknown, string>({ name: 'sys', encoding: 'json' }).removeSync('store.keyHash');
    await lmdb.close();
    expect(reopen).toThrow(/placed by ring hash "sha256-64"/);
    expect(reopen).toThrow(/placed by ring hash "sha256-64"/);
    // Emptied, the directory opens afresh and is stamped.
    tmp.remove();
    store = reopen();
    expect(store.getSys('store.keyHash')).toBe(RING_HASH);
  });

  it('opens a data directory whose name has a dot in it (a directory, not a file name with an extension)', async () => {
    const dotted = `${tmp.dir}.v1`;
    const s = new NodeStore({ dir: dotted, capacityBytes: 1024 * 1024, sync: 'commit' });
    try {
      await s.put('n', 'k', entry(1, 'kept'));
      await s.close();
      const again = new NodeStore({ dir: dotted, capacityBytes: 1024 * 1024, sync: 'commit' });
      expect(again.get('n', 'k')!.value.toString()).toBe('kept');
      await again.close();
    } finally {
      rmSync(dotted, { recursive: true, force: true });
    }
  });

  it('decides concurrent writes of one key by version, whatever their order of arrival', async () => {
    const results = await Promise.all([
      store.put('n', 'k', entry(5, 'five')),
      store.put('n', 'k', entry(9, 'nine')),
      store.put('n', 'k', entry(7, 'seven')),
    ]);
    expect(results).toEqual([
      { applied: true, current: 5 },
      { applied: true, current: 9 },
      { applied: false, current: 9 },
    ]);
    expect(store.get('n', 'k')!.value.toString()).toBe('nine');
  });

  it('takes an exclusive create only while the key has no live record: value, tombstone or pending write', async () => {
    const create = (key: string, v: number) => store.putAt(storeKey('n', key), entry(v, `c${v}`), undefined, true);
    await store.put('n', 'value', entry(3, 'old'));
    await store.put('n', 'tomb', makeTombstone(3, 60_000));
    await store.put('n', 'expired', entry(3, 'gone', { expiresAt: now + 1000 }));
    now += 2000;
    // A create above the record's version is still refused: the record was written after the caller looked.
    await expect(create('value', 9)).resolves.toEqual({ applied: false, current: 3 });
    await expect(create('tomb', 9)).resolves.toEqual({ applied: false, current: 3 });
    await expect(create('expired', 9)).resolves.toEqual({ applied: true, current: 9 });
    await expect(create('new', 9)).resolves.toEqual({ applied: true, current: 9 });
    // Two creates decided in one turn (the first still journaled): the second sees the first.
    await expect(Promise.all([create('both', 9), create('both', 10)])).resolves.toEqual([
      { applied: true, current: 9 },
      { applied: false, current: 9 },
    ]);
    expect(store.get('n', 'value')!.value.toString()).toBe('old');
    expect(store.get('n', 'both')!.value.toString()).toBe('c9');
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
    expect(s2.bytes).toBe(
      storeKey('n', 'a').length + JSON.stringify(entry(2, 'x'.repeat(10)).header).length + 10 + ENTRY_OVERHEAD_BYTES,
    );
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
    // Scans read LMDB: journaled writes are there once applied.
    await store.settle();
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

  it('measures a range across many read chunks: key count, bytes and the key at a quantile', async () => {
    store = await reopenLarge(store);
    const n = 9000;
    for (let i = 0; i < n; i += 500)
      await store.putMany(
        Array.from({ length: 500 }, (_, j) => ({ ns: 'n', key: `q${i + j}`, entry: entry(1, 'x'.repeat((i + j) % 7)) })),
      );
    await store.settle();
    const all = store.scan(RING_MIN, null, undefined, n + 1, false);
    expect(all).toHaveLength(n);
    const expectedBytes = store.stats().bytes;
    for (const q of [0.5, 0.95]) {
      const s = await store.rangeStats(RING_MIN, null, q);
      expect(s).toEqual({ keys: n, bytes: expectedBytes, cut: all[Math.floor(n * q)]!.sk.toString('hex', 0, 8) });
    }
  });

  it('answers range stats from its position buckets exactly as a full read would, wherever a range starts and ends', async () => {
    store = await reopenLarge(store);
    const n = 3000;
    for (let i = 0; i < n; i += 500)
      await store.putMany(
        Array.from({ length: 500 }, (_, j) => ({ ns: 'n', key: `h${i + j}`, entry: entry(1, 'x'.repeat((i + j) % 11)) })),
      );
    // Overwrites that change sizes, and removes: the buckets must follow both.
    for (let i = 0; i < n; i += 7) await store.put('n', `h${i}`, entry(2, 'y'.repeat(40)));
    for (let i = 3; i < n; i += 13) await store.remove('n', `h${i}`);
    const check = async (label: string) => {
      await store.settle();
      const all = store.scan(RING_MIN, null, undefined, n + 1).map((it) => ({
        pos: it.sk.toString('hex', 0, 8),
        bytes: it.sk.length + Buffer.byteLength(it.headerJson) + it.value.length + ENTRY_OVERHEAD_BYTES,
      }));
      const positions = all.map((a) => a.pos);
      const shift = (pos: string, d: bigint) => bigIntToPosition(BigInt.asUintN(64, positionToBigInt(pos) + d));
      // Boundaries: stored positions (a range may start exactly at a key), next to them, bucket starts, anywhere.
      const boundary = fc.oneof(
        fc.constantFrom(...positions),
        fc.tuple(fc.constantFrom(...positions), fc.bigInt({ min: -(1n << 50n), max: 1n << 50n })).map(([p, d]) => shift(p, d)),
        fc.integer({ min: 0, max: 0xffff }).map((b) => b.toString(16).padStart(4, '0') + '000000000000'),
        fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map(bigIntToPosition),
      );
      await fc.assert(
        fc.asyncProperty(boundary, fc.option(boundary, { nil: null }), fc.constantFrom(0.5, 0.25, 0.9), async (a, b, q) => {
          const [start, upper] = b === null ? [a, null] : a < b ? [a, b] : [b, a];
          const end = upper === start ? null : upper;
          const inSpan = all.filter((x) => x.pos >= start && (end === null || x.pos < end));
          let cut: string | null = null;
          if (inSpan.length >= 2) cut = inSpan[Math.min(inSpan.length - 1, Math.max(1, Math.floor(inSpan.length * q)))]!.pos;
          if (cut === start) cut = null;
          const expected = { keys: inSpan.length, bytes: inSpan.reduce((t, x) => t + x.bytes, 0), cut };
          expect({ label, ...(await store.rangeStats(start, end, q)) }).toEqual({ label, ...expected });
        }),
        { numRuns: 300 },
      );
    };
    await check('after writes');
    store = await reopenLarge(store);
    await check('after a reopen (buckets rebuilt from disk)');
  });

  describe('record layouts (small values inline, large ones in the data database)', () => {
    /** The store's LMDB databases, to look at what is on disk. */
    const dbs = () =>
      store as unknown as {
        meta: { getBinary(k: Buffer): Buffer | undefined; put(k: Buffer, v: Buffer): Promise<boolean> };
        data: { getBinary(k: Buffer): Buffer | undefined; put(k: Buffer, v: Buffer): Promise<boolean> };
      };
    const small = Buffer.alloc(INLINE_VALUE_MAX_BYTES, 0x61);
    const large = Buffer.alloc(INLINE_VALUE_MAX_BYTES + 1, 0x62);

    it('moves a value between the layouts as it changes size, leaving nothing behind in the data database', async () => {
      const sk = storeKey('n', 'k');
      // dbs() reads LMDB: each step settles first (journaled writes are applied later).
      await store.put('n', 'k', entry(1, small));
      await store.settle();
      expect(dbs().data.getBinary(sk)).toBeUndefined();
      expect(store.get('n', 'k')!.value.equals(small)).toBe(true);
      await store.put('n', 'k', entry(2, large));
      await store.settle();
      expect(dbs().data.getBinary(sk)!.equals(large)).toBe(true);
      expect(store.get('n', 'k')).toMatchObject({ header: { version: 2, size: large.length } });
      expect(store.get('n', 'k')!.value.equals(large)).toBe(true);
      await store.put('n', 'k', entry(3, 'tiny'));
      await store.settle();
      expect(dbs().data.getBinary(sk)).toBeUndefined();
      expect(store.get('n', 'k')!.value.toString()).toBe('tiny');
      await store.put('n', 'k', entry(4, large));
      await store.remove('n', 'k');
      await store.settle();
      expect(dbs().data.getBinary(sk)).toBeUndefined();
      expect(dbs().meta.getBinary(sk)).toBeUndefined();
      expect(store.stats()).toMatchObject({ keys: 0, bytes: 0 });
    });

    it('scans, pins and reopens both layouts with their values and headers intact', async () => {
      await store.put('n', 'a', entry(1, small, { tags: ['t'] }));
      await store.put('n', 'b', entry(1, large));
      await expect(store.setPinned(storeKey('n', 'a'), 1, true)).resolves.toBe(true);
      await store.close();
      store = new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
      const byKey = Object.fromEntries(store.scan(RING_MIN, null, undefined, 10).map((i) => [i.key, i]));
      expect(byKey.a!.value.equals(small)).toBe(true);
      expect(JSON.parse(byKey.a!.headerJson)).toMatchObject({ version: 1, tags: ['t'], flags: { pinned: true } });
      expect(byKey.b!.value.equals(large)).toBe(true);
      expect(store.get('n', 'a')!.value.equals(small)).toBe(true);
      expect(store.head('n', 'b')).toMatchObject({ version: 1, size: large.length });
      // Pinned entries are never victims; the other one is.
      expect(store.victims(5).map((v) => v.key)).toEqual(['b']);
    });

    it('reads records written before values went inline (header JSON alone, value in the data database)', async () => {
      const sk = storeKey('n', 'old');
      const e = entry(7, 'legacy value');
      const json = JSON.stringify(e.header);
      const rec = Buffer.alloc(20 + Buffer.byteLength(json));
      rec.writeDoubleBE(7, 0);
      rec.writeDoubleBE(Number.NaN, 8);
      rec.writeUInt32BE(sk.length + Buffer.byteLength(json) + e.value.length + ENTRY_OVERHEAD_BYTES, 16);
      rec.write(json, 20, 'utf8');
      await dbs().meta.put(sk, rec);
      await dbs().data.put(sk, e.value);
      await store.close();
      store = new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
      expect(store.stats().keys).toBe(1);
      expect(store.get('n', 'old')).toEqual({ header: e.header, value: e.value });
      expect(store.scan(RING_MIN, null, undefined, 10)[0]!.value.toString()).toBe('legacy value');
      // Rewritten small: it goes inline and its old value leaves the data database.
      await expect(store.put('n', 'old', entry(8, 'new'))).resolves.toEqual({ applied: true, current: 8 });
      await store.settle();
      expect(dbs().data.getBinary(sk)).toBeUndefined();
      expect(store.get('n', 'old')!.value.toString()).toBe('new');
    });
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
    const recs = Buffer.concat([
      encodeEntryRecord('ns', 'ké y', entry(3, Buffer.alloc(3000, 7), { tags: ['ü'] })),
      encodeAbsentRecord(),
      encodeTrailerRecord({ done: true, next: null }),
    ]);
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
