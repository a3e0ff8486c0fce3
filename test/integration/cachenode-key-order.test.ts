/**
 * The node store's key-order index (cachenode/src/key-order-index.ts), LMDB on a temp dir: pages of a namespace in
 * key order (UTF-8 bytes) whether the keys are in LMDB or still in the journal's overlay, every path that removes a
 * key taking it out of the index (deletes, expiry sweeps, evicted victims, range drops), reopen and crash replay,
 * and the build at open of a store written before the index.
 */
import { cpSync, rmSync } from 'node:fs';
import fc from 'fast-check';
import { open as openLmdb } from 'lmdb';
import { blobKey } from '../../core/model/entry.js';
import {
  after,
  compareKeys,
  inKeyRange,
  pageOfUnordered,
  type KeyRange,
  type OrderedKeysPage,
} from '../../core/model/key-order.js';
import { ringHash, RING_MIN } from '../../core/ring/hash.js';
import { storeKey } from '../../core/nodes/wire.js';
import { KEY_ORDER_STAMP } from '../../cachenode/src/key-order-index.js';
import { INLINE_VALUE_MAX_BYTES, NodeStore } from '../../cachenode/src/store.js';
import { captureLog } from '../helpers/log-capture.js';
import { entry, tempDir } from './warm-fixtures.js';

/**
 * Keys whose UTF-8 order differs from JavaScript's UTF-16 order (U+E000 and U+FFFF sort before the surrogate pairs
 * of U+10000 and above in UTF-8), prefixes of each other, and a combining sequence beside its precomposed form.
 */
const KEYS = [
  'a',
  'ab',
  'abc',
  'abd',
  'a b',
  'b',
  'B',
  'é',
  'e\u0301',
  '\uE000',
  '\uFFFF',
  '\u{10000}',
  '😀',
  '😀x',
  'z',
  'zz',
  '~',
  '0',
  '09',
  '1',
];
const BOUND_KEYS = [...KEYS, 'aa', 'c', '', '\u{10FFFF}', '\u0000', '😀\u0000'];

/** The keys of `all` in `r`, sorted: what a complete listing of `r` answers. */
function expected(all: string[], r: KeyRange): string[] {
  return all.filter((k) => inKeyRange(k, r)).sort(compareKeys);
}

/** Checks `page` against the OrderedKeysPage contract for the keys `want` of its range (sorted). */
function expectValidPage(page: OrderedKeysPage, want: string[], limit: number): void {
  expect(page.keys.length).toBeLessThanOrEqual(limit);
  expect(page.keys).toEqual(want.slice(0, page.keys.length));
  if (page.more) expect(page.keys.length).toBeGreaterThan(0);
  else expect(page.keys).toEqual(want);
}

/** Pages through `r` until done, checking every page; answers every key listed. */
function listAll(store: NodeStore, ns: string, r: KeyRange, limit: number, all?: string[]): string[] {
  const out: string[] = [];
  let range = r;
  for (let i = 0; i < 10_000; i++) {
    const page = store.listOrdered(ns, { ...range, limit });
    if (all) expectValidPage(page, expected(all, range), limit);
    out.push(...page.keys);
    if (!page.more) return out;
    range = after(range, page.keys[page.keys.length - 1]!);
  }
  throw new Error('the listing did not end');
}

const boundArb = fc.option(fc.record({ key: fc.constantFrom(...BOUND_KEYS), inclusive: fc.boolean() }), { nil: undefined });
const rangeArb = fc.record({
  prefix: fc.option(fc.constantFrom('', 'a', 'ab', '😀', '\uE000', 'e', 'zzz'), { nil: undefined }),
  from: boundArb,
  to: boundArb,
});
const limitArb = fc.integer({ min: 1, max: 25 });

/** A range without its undefined fields (the store's query type is exact about optional fields). */
function clean(r: { prefix: string | undefined; from: KeyRange['from']; to: KeyRange['to'] }): KeyRange {
  return {
    ...(r.prefix !== undefined ? { prefix: r.prefix } : {}),
    ...(r.from ? { from: r.from } : {}),
    ...(r.to ? { to: r.to } : {}),
  };
}

describe('NodeStore key-order index (LMDB on a temp dir)', () => {
  const tmp = tempDir('strata-key-order-');
  const copies: string[] = [];
  let store: NodeStore;
  let now = Date.now();
  // Journaled writes stay in the overlay until someone waits for them (settle, close), unless a test says otherwise.
  const open = (dir = tmp.dir) =>
    new NodeStore({ dir, capacityBytes: 64 * 1024 * 1024, sync: 'commit', applyIntervalMs: 3_600_000, now: () => now });

  beforeEach(() => {
    tmp.remove();
    now = Date.now();
    store = open();
  });
  afterEach(async () => {
    await store.close();
  });
  afterAll(() => {
    tmp.remove();
    for (const d of copies) rmSync(d, { recursive: true, force: true });
  });

  /** Every key of `ns` the store holds in LMDB (a sweep of `meta`, in ring order), sorted by key. */
  async function storedKeys(ns: string): Promise<string[]> {
    await store.settle();
    return store
      .scan(RING_MIN, null, undefined, 1_000_000, false)
      .filter((i) => i.ns === ns)
      .map((i) => i.key)
      .sort(compareKeys);
  }

  /** The data directory as a crash would leave it (see cachenode-journal.test.ts: LMDB as committed, the journal). */
  function crashCopy(): string {
    const dir = `${tmp.dir}-crash${copies.length}`;
    copies.push(dir);
    cpSync(tmp.dir, dir, { recursive: true, filter: (src) => !src.endsWith('lock.mdb') });
    return dir;
  }

  it('pages through a namespace in UTF-8 key order with prefix, bounds and limit, from LMDB and the journal overlay alike', async () => {
    // Half the keys committed to LMDB, half still journaled (served from the overlay), others in neighbouring
    // namespaces ('n2' starts with 'n'), and a storeOnce blob, which is never listed.
    await store.putMany(KEYS.filter((_, i) => i % 2 === 0).map((key) => ({ ns: 'n', key, entry: entry(1) })));
    await store.putMany(['a', 'zz', 'q'].map((key) => ({ ns: 'n2', key, entry: entry(1) })));
    await store.put('m', 'b', entry(1));
    await store.put('n', blobKey('x'.repeat(43)), entry(1));
    await store.settle();
    await store.putMany(KEYS.filter((_, i) => i % 2 === 1).map((key) => ({ ns: 'n', key, entry: entry(1) })));
    expect(store.listOrdered('n', { limit: 100 })).toEqual({ keys: [...KEYS].sort(compareKeys), more: false });
    // UTF-8 order, not UTF-16: U+E000 and U+FFFF before the characters above U+FFFF.
    const all = store.listOrdered('n', { limit: 100 }).keys;
    expect(all.indexOf('\uFFFF')).toBeLessThan(all.indexOf('\u{10000}'));
    expect(all.indexOf('\u{10000}')).toBeLessThan(all.indexOf('😀'));
    const property = () =>
      fc.assert(
        fc.property(rangeArb, limitArb, (r, limit) => {
          const range = clean(r);
          expectValidPage(store.listOrdered('n', { ...range, limit }), expected(KEYS, range), limit);
          expect(listAll(store, 'n', range, limit, KEYS)).toEqual(expected(KEYS, range));
        }),
        { numRuns: 300 },
      );
    property();
    expect(listAll(store, 'n2', {}, 2)).toEqual(['a', 'q', 'zz']);
    expect(store.listOrdered('n', { from: { key: '\u0000', inclusive: true }, limit: 1 }).keys).toEqual(['0']);
    await store.settle();
    property();
    // With everything in LMDB, a page is exactly the first `limit` keys of its range.
    fc.assert(
      fc.property(rangeArb, limitArb, (r, limit) => {
        const q = { ...clean(r), limit };
        expect(store.listOrdered('n', q)).toEqual(pageOfUnordered(KEYS, q));
      }),
      { numRuns: 200 },
    );
  });

  it('lists a write from the moment it is decided: journaled or queued to LMDB directly, before it commits', async () => {
    const small = store.put('n', 'journaled', entry(1));
    const large = store.put('n', 'direct', entry(1, Buffer.alloc(INLINE_VALUE_MAX_BYTES + 1, 1)));
    expect(store.listOrdered('n', { limit: 10 }).keys).toEqual(['direct', 'journaled']);
    await Promise.all([small, large]);
    expect(store.listOrdered('n', { limit: 10 }).keys).toEqual(['direct', 'journaled']);
    // A removal still waiting for LMDB may leave the key listed (a listing may name dead keys); once applied it goes.
    await store.remove('n', 'journaled');
    await store.settle();
    expect(store.listOrdered('n', { limit: 10 }).keys).toEqual(['direct']);
    // Overwrites and pin changes keep a key listed once.
    await store.put('n', 'direct', entry(2, 'now small'));
    await store.setPinned(storeKey('n', 'direct'), 2, true);
    await store.settle();
    expect(store.listOrdered('n', { limit: 10 })).toEqual({ keys: ['direct'], more: false });
  });

  it('takes every removed key out of the index: deletes, expiry sweeps, evicted victims and range drops', async () => {
    const keys = Array.from({ length: 400 }, (_, i) => `k${String(i).padStart(3, '0')}`);
    await store.putMany(
      keys.map((key, i) => ({ ns: 'n', key, entry: entry(1, `v${i}`, i % 10 === 0 ? { expiresAt: now + 1000 } : {}) })),
    );
    await store.settle();
    let live = [...keys];
    expect(listAll(store, 'n', {}, 37, live)).toEqual(live);

    // Deletes (single and batched).
    await store.remove('n', 'k001');
    await store.removeMany(['k002', 'k003'].map((k) => ({ sk: storeKey('n', k) })));
    live = live.filter((k) => !['k001', 'k002', 'k003'].includes(k));
    expect(await storedKeys('n')).toEqual(live);
    expect(listAll(store, 'n', {}, 37, live)).toEqual(live);

    // Expiry sweeps: expired keys may be listed until swept (a listing may name dead keys), not after.
    now += 2000;
    let swept = 0;
    for (let n; (n = await store.sweepExpired(100_000)) > 0;) swept += n;
    expect(swept).toBe(40);
    live = live.filter((k) => Number(k.slice(1)) % 10 !== 0);
    expect(await storedKeys('n')).toEqual(live);
    expect(listAll(store, 'n', {}, 37, live)).toEqual(live);

    // Victims an evictor copied down, then removed at their version.
    const victims = store.victims(25);
    expect(victims).toHaveLength(25);
    await store.removeMany(victims.map((v) => ({ sk: storeKey(v.ns, v.key), version: v.version })));
    const evicted = new Set(victims.map((v) => v.key));
    live = live.filter((k) => !evicted.has(k));
    expect(await storedKeys('n')).toEqual(live);
    expect(listAll(store, 'n', {}, 37, live)).toEqual(live);

    // A range dropped after it migrated away: its keys leave the index, the others stay.
    const cut = '8000000000000000';
    const dropped = await store.deleteRange(RING_MIN, cut);
    live = live.filter((k) => ringHash('n', k) >= cut);
    expect(dropped).toBeGreaterThan(0);
    expect(await storedKeys('n')).toEqual(live);
    expect(listAll(store, 'n', {}, 37, live)).toEqual(live);
    expect(listAll(store, 'n', { prefix: 'k1' }, 5, live)).toEqual(live.filter((k) => k.startsWith('k1')));
  });

  it('keeps the index across a reopen, and a crash replays journaled puts and removals into it', async () => {
    await store.putMany(['a', 'b', 'c'].map((key) => ({ ns: 'n', key, entry: entry(1) })));
    await store.settle();
    await store.putMany(['d', 'e'].map((key) => ({ ns: 'n', key, entry: entry(1) })));
    await store.remove('n', 'a');
    const dir = crashCopy();
    const log = captureLog();
    let crashed: NodeStore;
    try {
      crashed = open(dir);
    } finally {
      log.restore();
    }
    // The replay kept the index itself: nothing to build.
    expect(log.lines().map((l) => l.msg)).toEqual(['replayed the write journal']);
    try {
      await crashed.settle();
      expect(crashed.listOrdered('n', { limit: 10 })).toEqual({ keys: ['b', 'c', 'd', 'e'], more: false });
    } finally {
      await crashed.close();
    }
    await store.close();
    const reopened = captureLog();
    try {
      store = open();
    } finally {
      reopened.restore();
    }
    expect(store.listOrdered('n', { limit: 10 })).toEqual({ keys: ['b', 'c', 'd', 'e'], more: false });
    // An index in order is not built again.
    expect(reopened.lines().filter((l) => String(l.msg).includes('key-order index'))).toEqual([]);
  });

  it('builds the index once at open for a store written before it, and again when it lost keys to an older build', async () => {
    const keys = Array.from({ length: 120 }, (_, i) => `key-${i}-${'é😀'.repeat(i % 3)}`);
    await store.putMany(keys.map((key) => ({ ns: 'n', key, entry: entry(1) })));
    await store.put('other', 'x', entry(1));
    await store.close();
    // As a build from before the index left the directory: no index, no stamp.
    const raw = () => {
      const env = openLmdb({ path: tmp.dir, maxDbs: 8, noSubdir: false });
      return {
        env,
        order: env.openDB<Buffer, Buffer>({ name: 'order', encoding: 'binary', keyEncoding: 'binary' }),
        sys: env.openDB<unknown, string>({ name: 'sys', encoding: 'json' }),
      };
    };
    let lmdb = raw();
    lmdb.order.clearSync();
    lmdb.sys.removeSync(KEY_ORDER_STAMP);
    await lmdb.env.close();

    const opened = (): Record<string, unknown>[] => {
      const log = captureLog();
      try {
        store = open();
      } finally {
        log.restore();
      }
      return log.lines().filter((l) => String(l.msg).includes('key-order index'));
    };
    expect(opened()).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'built the key-order index of the store',
        keys: 121,
        reason: 'the store was written before the index existed',
      }),
    ]);
    const sorted = [...keys].sort(compareKeys);
    expect(listAll(store, 'n', {}, 50, keys)).toEqual(sorted);
    expect(store.listOrdered('other', { limit: 5 }).keys).toEqual(['x']);
    expect(store.getSys(KEY_ORDER_STAMP)).toBe(1);
    await store.close();
    expect(opened()).toEqual([]);
    await store.close();

    // An older build wrote the directory after the index existed (a rollback on the same volume): a key it added
    // is in `meta` but not in the index. The counts differ at the next open, and the index is built again.
    lmdb = raw();
    lmdb.order.removeSync(storeKey('n', keys[7]!).subarray(8));
    await lmdb.env.close();
    expect(opened()).toEqual([expect.objectContaining({ keys: 121, reason: 'the index listed 120 keys and meta holds 121' })]);
    expect(listAll(store, 'n', {}, 50, keys)).toEqual(sorted);
  });
});
