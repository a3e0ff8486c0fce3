/**
 * Listing keys in key order (`GET /v1/ns/{ns}/keys`; docs/API.md, "Listing keys").
 *
 * No single place holds every key in order: each tier orders its own (tiers/tier.ts `KeyOrdering`: a second LMDB
 * database on each cache node, marker objects under `_k/` in S3; the hot tier's dirty write-back entries, the only
 * keys it holds ahead of the durable tiers). A page asks every
 * tier the namespace reads for its next keys in the range, merges them (model/key-order.ts: only up to where every
 * tier's answer is complete), and then reads each candidate through the coordinator's own read path, so what a page
 * answers is what a GET would: the newest version, never a deleted, expired or invalidated key, whatever copies the
 * tiers' orders still name. The cursor is the last key examined; the next page starts after it.
 *
 * Cost of a page of n keys: one ordered read per tier (per cache node, one S3 listing per 1,000 keys; the hot
 * tier only where it may hold writes the durable tiers do not have yet), then one batched header read per tier the walk reaches, as a batch GET of n keys would; metadata adds one
 * header read per tier that listed the key. Keys an order names but no read finds (deleted, expired, evicted) cost
 * a read each and are skipped; a page gives up filling itself after a few rounds and answers short, with a cursor.
 */
import { TierUnavailableError } from '../errors.js';
import type { EntryHeader } from '../model/entry.js';
import { isLive, isStale } from '../model/entry.js';
import { after, mergeOrderedPages, type KeyRange, type OrderedKeysPage, type OrderedKeysQuery } from '../model/key-order.js';
import { supportsKeyOrdering, type Tier, type TierName } from '../tiers/tier.js';
import { mapLimit } from '../util/concurrency.js';

/** Most keys one page may ask for. */
export const MAX_LIST_LIMIT = 1000;
export const DEFAULT_LIST_LIMIT = 100;
/** Rounds a page may take to fill itself past keys that are no longer live, before it answers short. */
const MAX_ROUNDS = 4;
/** Where ranges start when none is given: past the internal keys (storeOnce blobs start with NUL, user keys never do). */
const FIRST_USER_KEY = '\u0001';

export interface ListKeysOptions extends KeyRange {
  /** At most this many keys (1-{@link MAX_LIST_LIMIT}). */
  limit: number;
  /** Each key's header and the tiers holding its version, besides its name. */
  metadata?: boolean;
}

export interface ListedKey {
  key: string;
  /** With `metadata`: the live entry's header (as written: its size before any transform). */
  header?: EntryHeader;
  /** With `metadata`: the tiers that hold this version, top-down. */
  tiers?: TierName[];
}

export interface KeyListing {
  keys: ListedKey[];
  /** The last key this page examined (the next page starts after it); null once the range is exhausted. */
  last: string | null;
}

/**
 * What a listing needs from the hot tier: nothing when every acknowledged write reaches a durable tier below it
 * (write-through: the durable tiers list every key), the keys it holds ahead of them (write-back: its dirty
 * entries), or all of it (a namespace with no durable tier).
 */
export type HotListing = 'none' | 'ahead' | 'all';

export interface KeyListingDeps {
  /** The tiers the namespace reads, top-down. */
  tiers: readonly Tier[];
  /** The hot tier, if one is configured, and what a listing needs of it. */
  hot?: { tier: Tier; lists: HotListing };
  /**
   * Each key's live header as a HEAD would answer it (undefined: deleted, expired, invalidated or absent); throws
   * TierUnavailableError exactly where a HEAD would.
   */
  resolve(ns: string, keys: string[]): Promise<(EntryHeader | undefined)[]>;
  /**
   * Whether a listing may be answered while `failed` tiers could not list (the rest did): true when the tiers that
   * answered hold every acknowledged write of the namespace, as for a read's miss (TierWalk.certain).
   */
  certainWithout(ns: string, failed: TierName[], answered: TierName[]): boolean;
}

export async function listKeys(deps: KeyListingDeps, ns: string, opts: ListKeysOptions): Promise<KeyListing> {
  let range: KeyRange = opts.prefix || opts.from ? opts : { ...opts, from: { key: FIRST_USER_KEY, inclusive: true } };
  const out: ListedKey[] = [];
  for (let round = 1; ; round++) {
    const want = opts.limit - out.length;
    const pages = await listTiers(deps, ns, { prefix: range.prefix, from: range.from, to: range.to, limit: want });
    const merged = mergeOrderedPages(
      pages.map((p) => p.page),
      want,
    );
    const headers = await deps.resolve(ns, merged.keys);
    const live: ListedKey[] = [];
    merged.keys.forEach((key, i) => {
      const h = headers[i];
      // A value past its TTL but within a stale-while-revalidate grace is served by GET, marked stale; a listing
      // names only keys within their TTL.
      if (h && isLive(h) && !isStale(h)) live.push(opts.metadata ? { key, header: h } : { key });
    });
    if (opts.metadata) await addHolders(ns, live, pages, deps.hot?.tier);
    out.push(...live);
    if (!merged.more) return { keys: out, last: null };
    const last = merged.keys[merged.keys.length - 1]!;
    if (out.length >= opts.limit || round >= MAX_ROUNDS) return { keys: out, last };
    range = after(range, last);
  }
}

interface TierPage {
  tier: Tier;
  page: OrderedKeysPage;
}

/**
 * Every tier's next keys in the range, top-down, one tier after the other: an entry that moves down while the page
 * is made (a write-back flush, an eviction to S3: the lower copy is written before the upper one goes) is in the
 * upper tier when it is asked, or already in the lower one when that is asked after it. A tier that fails is left
 * out only where the others make the answer sure.
 */
async function listTiers(deps: KeyListingDeps, ns: string, q: OrderedKeysQuery): Promise<TierPage[]> {
  const failed: TierName[] = [];
  const answered: TierPage[] = [];
  let cause: unknown;
  for (const tier of deps.tiers) {
    const hot = deps.hot?.tier === tier ? deps.hot.lists : undefined;
    if (hot === 'none') continue;
    try {
      answered.push({ tier, page: await listTier(tier, ns, hot === 'ahead' ? { ...q, aheadOnly: true } : q) });
    } catch (e) {
      if (!(e instanceof TierUnavailableError)) throw e;
      failed.push(tier.name);
      cause ??= e;
    }
  }
  if (
    failed.length > 0 &&
    !deps.certainWithout(
      ns,
      failed,
      answered.map((p) => p.tier.name),
    )
  ) {
    throw new TierUnavailableError(failed.join(','), cause);
  }
  return answered;
}

/** One tier's ordered page: every tier Strata ships orders its keys (tiers/tier.ts `KeyOrdering`). */
function listTier(tier: Tier, ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
  if (!supportsKeyOrdering(tier)) throw new Error(`tier '${tier.name}' (${tier.kind}) cannot list its keys in order`);
  return tier.listOrdered(ns, q);
}

/**
 * The tiers that hold each listed key's live version: those whose order named it, and the hot tier (whose order
 * names only what it holds ahead of the others, if it is asked at all), each whose copy is that version.
 */
async function addHolders(ns: string, listed: ListedKey[], pages: readonly TierPage[], hot?: Tier): Promise<void> {
  const named = pages.map((p) => ({ tier: p.tier, keys: new Set(p.page.keys) }));
  if (hot && !pages.some((p) => p.tier === hot)) named.unshift({ tier: hot, keys: new Set<string>() });
  await mapLimit(listed, 16, async (item) => {
    const holders = await Promise.all(
      named.map(async ({ tier, keys }) => {
        if (tier !== hot && !keys.has(item.key)) return undefined;
        const h = await tier.head(ns, item.key).catch(() => undefined);
        return h && h.version === item.header!.version && !h.flags.tombstone && !h.flags.elsewhere ? tier.name : undefined;
      }),
    );
    item.tiers = holders.filter((n): n is TierName => n !== undefined);
  });
}
