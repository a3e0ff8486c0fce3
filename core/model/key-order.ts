/**
 * Key order for listings (`GET /v1/ns/{ns}/keys`): the order of a key's UTF-8 bytes, which is what every ordered
 * store underneath compares (Redis sorted sets by lex, LMDB keys, S3 object names), bounds and prefixes over it,
 * and the merge of ordered pages from several sources (tiers, cache nodes, Redis shards) into one.
 */

/** One bound of a range: a key and whether the key itself is in the range. */
export interface KeyBound {
  readonly key: string;
  readonly inclusive: boolean;
}

/** A range of keys in key order, optionally narrowed to a prefix. */
export interface KeyRange {
  /** Only keys that start with this string. */
  readonly prefix?: string;
  /** Lower bound; absent = from the first key. */
  readonly from?: KeyBound;
  /** Upper bound; absent = to the last key. */
  readonly to?: KeyBound;
}

export interface OrderedKeysQuery extends KeyRange {
  /** At most this many keys (at least 1). */
  readonly limit: number;
  /**
   * Only the keys the tier may hold ahead of the durable tiers below it (a cache tier's dirty write-back entries):
   * the others are listed by those tiers. A tier that cannot tell lists them all (a superset is always allowed).
   */
  readonly aheadOnly?: boolean;
}

export interface OrderedKeysPage {
  /** Keys in ascending {@link compareKeys} order, each once. */
  keys: string[];
  /**
   * False once the source holds no key in the range past the last one returned. While true, `keys` is not empty
   * and complete up to its last key: every key in the range up to it that the source held for the whole call is
   * in it, so a merge may answer up to there and go on after it.
   */
  more: boolean;
}

/**
 * Compares two keys by their UTF-8 bytes. JavaScript's `<` compares UTF-16 code units, which orders characters
 * above U+FFFF (surrogate pairs, 0xD800-0xDFFF) before U+E000-U+FFFF; UTF-8 puts them after. Keys are
 * well-formed Unicode (model/keys.ts), so comparing code points is the same as comparing UTF-8 bytes.
 */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // A surrogate (a code point above U+FFFF) outranks every code unit outside the surrogate range.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/** Whether `key` is at or past the lower bound of `r` (prefix included). */
export function aboveLower(key: string, r: KeyRange): boolean {
  if (r.prefix !== undefined && compareKeys(key, r.prefix) < 0) return false;
  if (r.from === undefined) return true;
  const c = compareKeys(key, r.from.key);
  return c > 0 || (c === 0 && r.from.inclusive);
}

/** Whether `key` is at or before the upper bound of `r` (prefix included). */
export function belowUpper(key: string, r: KeyRange): boolean {
  if (r.prefix !== undefined && !key.startsWith(r.prefix) && compareKeys(key, r.prefix) > 0) return false;
  if (r.to === undefined) return true;
  const c = compareKeys(key, r.to.key);
  return c < 0 || (c === 0 && r.to.inclusive);
}

export function inKeyRange(key: string, r: KeyRange): boolean {
  return (r.prefix === undefined || key.startsWith(r.prefix)) && aboveLower(key, r) && belowUpper(key, r);
}

/**
 * The lower bound where a scan of `r` starts: the larger of `from` and the prefix (a prefix is an inclusive lower
 * bound). Undefined = from the first key.
 */
export function lowerBound(r: KeyRange): KeyBound | undefined {
  const p = r.prefix ? { key: r.prefix, inclusive: true } : undefined;
  if (!r.from) return p;
  if (!p) return r.from;
  const c = compareKeys(r.from.key, p.key);
  return c > 0 || (c === 0 && !r.from.inclusive) ? r.from : p;
}

/**
 * The range that is left of `r` once a page has answered up to `last`: the same bounds, starting after it.
 * A cursor is this `from`.
 */
export function after(r: KeyRange, last: string): KeyRange {
  return { ...r, from: { key: last, inclusive: false } };
}

/**
 * One page of `q` from keys held in no order (a tier that keeps no index: the memory and folder tiers). Sorts what
 * is in range, O(n log n) for n keys in range: fine for the embedded tiers it serves, not for a large store.
 */
export function pageOfUnordered(keys: Iterable<string>, q: OrderedKeysQuery): OrderedKeysPage {
  const inRange: string[] = [];
  for (const k of keys) if (inKeyRange(k, q)) inRange.push(k);
  inRange.sort(compareKeys);
  const out: string[] = [];
  for (const k of inRange) if (out.length === 0 || out[out.length - 1] !== k) out.push(k);
  return out.length > q.limit ? { keys: out.slice(0, q.limit), more: true } : { keys: out, more: false };
}

/**
 * Merges ordered pages of several sources of one query into one: the union of their keys up to the point where
 * all of them are complete (the smallest last key among the sources with `more`), each key once. The result is a
 * valid page of the union of the sources (`more` while any source has more), though it may hold fewer keys than
 * the sum of the pages: keys past that point are asked again after it.
 */
export function mergeOrderedPages(pages: readonly OrderedKeysPage[], limit = Infinity): OrderedKeysPage {
  let bound: string | undefined;
  for (const p of pages) {
    if (!p.more) continue;
    const last = p.keys[p.keys.length - 1];
    if (last === undefined) throw new Error('an ordered page with more keys must not be empty');
    if (bound === undefined || compareKeys(last, bound) < 0) bound = last;
  }
  const all: string[] = [];
  for (const p of pages) for (const k of p.keys) if (bound === undefined || compareKeys(k, bound) <= 0) all.push(k);
  all.sort(compareKeys);
  const keys: string[] = [];
  for (const k of all) if (keys.length === 0 || keys[keys.length - 1] !== k) keys.push(k);
  if (keys.length > limit) return { keys: keys.slice(0, limit), more: true };
  return { keys, more: bound !== undefined };
}
