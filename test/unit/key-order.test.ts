/**
 * Key order is UTF-8 byte order (what Redis BYLEX, LMDB and S3 listings compare), and merging ordered pages of
 * several sources never skips a key nor answers past the point where every source is complete.
 */
import fc from 'fast-check';
import {
  compareKeys,
  inKeyRange,
  lowerBound,
  mergeOrderedPages,
  pageOfUnordered,
  type KeyRange,
  type OrderedKeysPage,
} from '../../core/model/key-order.js';

const utf8Order = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
const key = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 });

describe('key order', () => {
  it('orders keys as their UTF-8 bytes, also above U+FFFF where UTF-16 order differs', () => {
    expect(compareKeys('\u{1F600}', '\uFFFD')).toBeGreaterThan(0);
    expect('\u{1F600}' < '\uFFFD').toBe(true); // the JavaScript order this replaces
    fc.assert(fc.property(key, key, (a, b) => Math.sign(compareKeys(a, b)) === Math.sign(utf8Order(a, b))));
  });

  it('a prefix is a lower bound, and the larger of two lower bounds wins', () => {
    expect(lowerBound({ prefix: 'b', from: { key: 'a', inclusive: true } })).toEqual({ key: 'b', inclusive: true });
    expect(lowerBound({ prefix: 'b', from: { key: 'b', inclusive: false } })).toEqual({ key: 'b', inclusive: false });
    expect(lowerBound({ prefix: 'b', from: { key: 'bz', inclusive: true } })).toEqual({ key: 'bz', inclusive: true });
  });

  it('honours inclusive and exclusive bounds and the prefix', () => {
    const r: KeyRange = { prefix: 'user/', from: { key: 'user/b', inclusive: false }, to: { key: 'user/d', inclusive: true } };
    const keys = ['user/a', 'user/b', 'user/c', 'user/d', 'user/e', 'users', 'user0', 'v'];
    expect(keys.filter((k) => inKeyRange(k, r))).toEqual(['user/c', 'user/d']);
  });

  it('a merge of pages of any split of a key set, page after page, lists the set once in order', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(key, { maxLength: 40 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 7 }),
        fc.array(fc.nat(3), { maxLength: 40 }),
        (all, sources, limit, owner) => {
          // Each key lives in one or two sources (a copy in two tiers, or on two nodes during a migration).
          const held: string[][] = Array.from({ length: sources }, () => []);
          all.forEach((k, i) => {
            held[(owner[i] ?? 0) % sources]!.push(k);
            if (i % 3 === 0) held[(i + 1) % sources]!.push(k);
          });
          const listed: string[] = [];
          let range: KeyRange = {};
          for (let guard = 0; guard < 200; guard++) {
            const pages: OrderedKeysPage[] = held.map((h) => pageOfUnordered(h, { ...range, limit }));
            const page = mergeOrderedPages(pages, limit);
            listed.push(...page.keys);
            if (!page.more) break;
            range = { from: { key: page.keys[page.keys.length - 1]!, inclusive: false } };
          }
          expect(listed).toEqual([...all].sort(compareKeys));
        },
      ),
    );
  });
});
