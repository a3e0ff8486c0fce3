/**
 * Key order for a tier that keeps none but can list its keys (Scanning.keys): the local folder tier, whose files
 * are named by shard and base32 of the key, and Redis for a namespace it alone holds (its SCAN). Each page walks the whole namespace (under the range's prefix) and sorts
 * what is in range: O(n log n) for the n keys in range, every page. Fine for `npm start` and tests, which is all
 * the folder tier serves; a store too large for that keeps an index instead (s3-order-markers.ts).
 */
import { inKeyRange, pageOfUnordered, type OrderedKeysPage, type OrderedKeysQuery } from '../model/key-order.js';
import type { KeyPage, ScanOptions } from './tier.js';

/** Listing pages asked of the tier at a time. */
const WALK_PAGE = 1000;

/**
 * One page of `q` from `list` (a tier's `keys(ns, opts)`), walked to its end. A key present for the whole walk is
 * listed by it (Scanning's contract), so it is in range here and on the page if it sorts early enough.
 */
export async function pageOfKeyListing(
  list: (opts: ScanOptions) => Promise<KeyPage>,
  q: OrderedKeysQuery,
): Promise<OrderedKeysPage> {
  const inRange: string[] = [];
  let cursor: string | null = null;
  do {
    const page: KeyPage = await list({ ...(q.prefix ? { prefix: q.prefix } : {}), cursor, limit: WALK_PAGE });
    for (const k of page.keys) if (inKeyRange(k, q)) inRange.push(k);
    cursor = page.cursor;
  } while (cursor !== null);
  return pageOfUnordered(inRange, { ...q, limit: Math.max(1, Math.floor(q.limit)) });
}
