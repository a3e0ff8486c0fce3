/**
 * Listing keys (issue 24, item 2): in key order, across the tiers, each key once, never a deleted, expired or
 * invalidated one, paged without gaps or repeats, while other coordinators write; a tier that cannot list fails the
 * page only where the others cannot stand in for it.
 */
import type { Coordinator } from '../../core/coordinator/coordinator.js';
import type { ListKeysOptions } from '../../core/coordinator/key-listing.js';
import { TierUnavailableError } from '../../core/errors.js';
import { compareKeys, type KeyRange } from '../../core/model/key-order.js';
import { contentHash } from '../../core/model/keys.js';
import type { Entry } from '../../core/model/entry.js';
import { makeTombstone } from '../../core/model/entry.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { skewedPair } from '../helpers/skewed-pair.js';

const buf = (s: string) => Buffer.from(s);
const LEASE = { invalidations: { leaseMs: 40 } };
/** A namespace whose writes reach the hot tier first and the cold tier at a flush (none runs by itself here). */
const WRITE_BACK = new PolicyRegistry({ namespaces: { ns: { writeMode: 'write-back' } } });

function entry(version: number, value: string, expiresAt: number | null = null): Entry {
  const v = buf(value);
  return { header: { version, expiresAt, size: v.length, hash: contentHash(v), tags: [], flags: {} }, value: v };
}

/** Every page of a listing, following the cursor to the end. */
async function listAll(c: Coordinator, range: KeyRange = {}, limit = 3): Promise<string[][]> {
  const pages: string[][] = [];
  let from = range.from;
  for (let i = 0; i < 1000; i++) {
    const page = await c.listKeys('ns', { ...range, from, limit } satisfies ListKeysOptions);
    pages.push(page.keys.map((k) => k.key));
    if (page.last === null) return pages;
    from = { key: page.last, inclusive: false };
  }
  throw new Error('the listing did not end');
}

describe('Coordinator.listKeys', () => {
  it('lists the keys of every tier in UTF-8 order, each once, a page at a time', async () => {
    const { a, cold } = skewedPair({ ...LEASE, policies: WRITE_BACK });
    const written = ['b', 'a/1', 'a/2', 'é', '\u{1F600}', '\uFFFD', 'a', 'c/x'];
    for (const k of written) await a.put('ns', k, buf(k));
    await a.flushDirty();
    // Only in the cold tier (evicted from hot), and only in the hot tier (a write-back write not yet flushed).
    await cold.put('ns', 'cold-only', entry(5, 'x'));
    await a.put('ns', 'hot-only', buf('y'));
    const pages = await listAll(a);
    expect(pages.flat()).toEqual([...written, 'cold-only', 'hot-only'].sort(compareKeys));
    expect(pages.flat().indexOf('\uFFFD')).toBeLessThan(pages.flat().indexOf('\u{1F600}'));
    expect(pages.slice(0, -1).every((p) => p.length === 3)).toBe(true);
  });

  it('lists a write-back entry flushed and evicted from hot while the page is made (tiers are read top-down)', async () => {
    const { a, hot } = skewedPair({ ...LEASE, policies: WRITE_BACK });
    await a.put('ns', 'moving', buf('1'));
    const listHot = hot.listOrdered.bind(hot);
    // The flush lands and the clean hot copy goes just as the hot tier is asked: the key is in the cold tier by the
    // time that is asked. (Asked at once, both tiers could answer before and after the move: the key in neither.)
    hot.listOrdered = async (ns, q) => {
      await a.flushDirty();
      await hot.delete('ns', 'moving');
      return listHot(ns, q);
    };
    expect((await a.listKeys('ns', { limit: 10 })).keys.map((k) => k.key)).toEqual(['moving']);
  });

  it('does not ask the hot tier of a write-through namespace: the durable tiers hold every acknowledged write', async () => {
    const { a, hot } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('1'));
    hot.listOrdered = () => Promise.reject(new Error('the hot tier was asked'));
    expect((await a.listKeys('ns', { limit: 10 })).keys.map((k) => k.key)).toEqual(['k']);
  });

  it('honours the prefix and inclusive or exclusive bounds', async () => {
    const { a } = skewedPair(LEASE);
    for (const k of ['u/a', 'u/b', 'u/c', 'u/d', 'u0', 'v']) await a.put('ns', k, buf(k));
    const flat = async (r: KeyRange) => (await listAll(a, r, 2)).flat();
    expect(await flat({ prefix: 'u/' })).toEqual(['u/a', 'u/b', 'u/c', 'u/d']);
    expect(await flat({ prefix: 'u/', from: { key: 'u/b', inclusive: false }, to: { key: 'u/d', inclusive: false } })).toEqual([
      'u/c',
    ]);
    expect(await flat({ from: { key: 'u/b', inclusive: true }, to: { key: 'u0', inclusive: true } })).toEqual([
      'u/b',
      'u/c',
      'u/d',
      'u0',
    ]);
  });

  it('never lists a deleted, expired or invalidated key, wherever an older copy is left', async () => {
    const { a, b, cold } = skewedPair(LEASE);
    for (const k of ['keep', 'gone', 'old', 'tagged', 'p/1']) await a.put('ns', k, buf(k), k === 'tagged' ? { tags: ['t'] } : {});
    await b.delete('ns', 'gone');
    // An older copy below a newer tombstone (a promotion that lost to the delete), and an expired entry.
    await cold.put('ns', 'stale-copy', entry(1, 'old'));
    await a.put('ns', 'stale-copy', buf('new'));
    await a.delete('ns', 'stale-copy');
    await cold.put('ns', 'expired', entry(5, 'x', Date.now() + 30));
    await new Promise((r) => setTimeout(r, 40));
    await b.invalidate('ns', { tags: ['t'] }, 'test');
    await b.invalidate('ns', { prefix: 'p/' }, 'test');
    expect((await listAll(a)).flat()).toEqual(['keep', 'old']);
    // Written after the invalidation: listed as usual.
    await b.put('ns', 'p/2', buf('after'));
    expect((await listAll(a)).flat()).toEqual(['keep', 'old', 'p/2']);
  });

  it('a page skips keys that are no longer live and still answers in order, short rather than wrong', async () => {
    const { a, cold } = skewedPair(LEASE);
    // Ten tombstones between the live keys: the orders name them, the reads drop them.
    for (let i = 0; i < 10; i++) await cold.put('ns', `m${i}`, makeTombstone(10 + i, 60_000));
    await a.put('ns', 'a', buf('1'));
    await a.put('ns', 'z', buf('2'));
    const pages = await listAll(a, {}, 2);
    expect(pages.flat()).toEqual(['a', 'z']);
  });

  it('a key live for the whole listing is on exactly one page while other coordinators write and delete', async () => {
    const { a, b } = skewedPair(LEASE);
    const stable = Array.from({ length: 60 }, (_, i) => `k${String(i).padStart(3, '0')}`);
    for (const k of stable) await a.put('ns', k, buf(k));
    let stop = false;
    const churn = (async () => {
      for (let i = 0; !stop; i++) {
        const k = `k${String(i % 60).padStart(3, '0')}x`;
        await b.put('ns', k, buf('churn'));
        await b.delete('ns', k);
        await new Promise((r) => setImmediate(r));
      }
    })();
    const listed = (await listAll(a, {}, 7)).flat();
    stop = true;
    await churn;
    const once = listed.filter((k) => stable.includes(k));
    expect(once).toEqual(stable);
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort(compareKeys)).toEqual(listed);
  });

  it('with metadata, gives each key its header and the tiers holding that version', async () => {
    const { a, cold } = skewedPair(LEASE);
    const w = await a.put('ns', 'both', buf('12345'), { tags: ['x'], ttlSeconds: 60 });
    await cold.put('ns', 'cold-only', entry(5, 'x'));
    const page = await a.listKeys('ns', { limit: 10, metadata: true });
    const both = page.keys.find((k) => k.key === 'both')!;
    expect(both.header).toMatchObject({ version: w.version, size: 5, tags: ['x'] });
    expect(both.tiers).toEqual(w.tiers);
    expect(page.keys.find((k) => k.key === 'cold-only')!.tiers).toEqual(['cold']);
  });

  it('answers while the hot tier is down when the durable tier holds every write; fails closed when it is the durable one', async () => {
    const { a, hot, cold } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('1'));
    hot.down = true;
    expect((await a.listKeys('ns', { limit: 10 })).keys.map((k) => k.key)).toEqual(['k']);
    hot.down = false;
    cold.down = true;
    await expect(a.listKeys('ns', { limit: 10 })).rejects.toBeInstanceOf(TierUnavailableError);
  });
});
