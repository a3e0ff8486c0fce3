/**
 * The invalidation check's prefix trie answers exactly what checking every invalidated prefix with `startsWith`
 * would: whether some prefix of the key was invalidated at or above the entry's version.
 */
import fc from 'fast-check';
import { PrefixTrie } from '../../core/coordinator/prefix-trie.js';

const brute = (prefixes: Map<string, number>, key: string, v: number) =>
  [...prefixes].some(([p, g]) => key.startsWith(p) && g >= v);

describe('PrefixTrie', () => {
  it('agrees with startsWith over every prefix, for prefixes sharing runs, nested and ending inside others', () => {
    const unit = fc.constantFrom('a', 'b', '/', 'é', '\u{1F600}');
    const str = (min: number) => fc.array(unit, { minLength: min, maxLength: 8 }).map((a) => a.join(''));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(str(1), fc.integer({ min: 1, max: 20 })), { maxLength: 12 }),
        fc.array(fc.tuple(str(0), fc.integer({ min: 1, max: 21 })), { minLength: 1, maxLength: 20 }),
        (entries, probes) => {
          const prefixes = new Map<string, number>();
          for (const [p, g] of entries) prefixes.set(p, Math.max(prefixes.get(p) ?? 0, g));
          const trie = new PrefixTrie(prefixes);
          for (const [key, v] of probes) expect([key, v, trie.covers(key, v)]).toEqual([key, v, brute(prefixes, key, v)]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('covers a key under a long shared run only where a prefix ends, and by its generation', () => {
    const trie = new PrefixTrie([
      ['tenant-3/user-00042/', 10],
      ['tenant-3/user-0004', 5],
    ]);
    expect(trie.covers('tenant-3/user-00042/profile', 10)).toBe(true);
    expect(trie.covers('tenant-3/user-00042/profile', 11)).toBe(false);
    expect(trie.covers('tenant-3/user-00043/profile', 5)).toBe(true);
    expect(trie.covers('tenant-3/user-00043/profile', 6)).toBe(false);
    expect(trie.covers('tenant-3/user-000', 1)).toBe(false);
    expect(trie.covers('tenant-4/user-00042/', 1)).toBe(false);
  });
});
