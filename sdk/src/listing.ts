/**
 * Listing keys in key order (`GET /v1/ns/{ns}/keys`): one page ({@link StrataClient.listKeys}) or every page as an
 * async iterator ({@link StrataClient.keys}), following the server's opaque cursor.
 */
import { invalid, isObject, optionError, type Json } from './json.js';
import type { RequestOptions } from './types.js';

/** Which bounds are part of the range: `start` (the default: start <= key < end), `end`, `both` or `none`. */
export type BoundInclusion = 'start' | 'end' | 'both' | 'none';

/** The server's largest page. */
export const MAX_LIST_LIMIT = 1000;

/** Options of {@link StrataClient.keys} and {@link StrataClient.listKeys}. */
export interface ListKeysOptions extends RequestOptions {
  /** Only keys starting with this. */
  prefix?: string | undefined;
  /** Lower bound (see `inclusive`). */
  start?: string | undefined;
  /** Upper bound (see `inclusive`). */
  end?: string | undefined;
  /** @default 'start' */
  inclusive?: BoundInclusion | undefined;
  /** Keys per request (1-1000). @default 100 (the server's default) */
  limit?: number | undefined;
  /** Each key with its version, size, expiry, tags and the tiers holding it (the server reads more for it). */
  metadata?: boolean | undefined;
}

/** One listed key; the fields besides `key` are there when the listing asked for `metadata`. */
export interface ListedKey {
  key: string;
  version?: number;
  size?: number;
  expiresAt?: Date | null;
  tags?: string[];
  contentType?: string;
  /** The tiers holding this version, top-down. */
  tiers?: string[];
}

/** One page: its keys in key order, and the cursor of the next (null at the end). */
export interface KeyPage {
  keys: ListedKey[];
  cursor: string | null;
}

const INCLUSIONS: readonly BoundInclusion[] = ['start', 'end', 'both', 'none'];

/** The query string of a page, checked before anything is sent. */
export function listQuery(opts: ListKeysOptions, cursor: string | null | undefined): URLSearchParams {
  const q = new URLSearchParams();
  for (const name of ['prefix', 'start', 'end'] as const) {
    const v = opts[name];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0) throw optionError(name, 'must be a non-empty string');
    q.set(name, v);
  }
  if (opts.inclusive !== undefined) {
    if (!INCLUSIONS.includes(opts.inclusive)) throw optionError('inclusive', `is one of ${INCLUSIONS.join(', ')}`);
    q.set('inclusive', opts.inclusive);
  }
  if (opts.limit !== undefined) {
    if (!Number.isInteger(opts.limit) || opts.limit < 1 || opts.limit > MAX_LIST_LIMIT)
      throw optionError('limit', `must be a whole number from 1 to ${MAX_LIST_LIMIT}; got ${String(opts.limit)}`);
    q.set('limit', String(opts.limit));
  }
  if (opts.metadata) q.set('metadata', 'true');
  if (cursor) q.set('cursor', cursor);
  return q;
}

export function parseKeyPage(body: Json, status: number, requestId?: string): KeyPage {
  if (!Array.isArray(body.keys) || !(body.cursor === null || typeof body.cursor === 'string'))
    throw invalid(status, `expected a page of keys from the server, got: ${JSON.stringify(body).slice(0, 200)}`, requestId);
  const keys = body.keys.map((k): ListedKey => {
    if (!isObject(k) || typeof k.key !== 'string')
      throw invalid(status, `expected a listed key, got: ${JSON.stringify(k).slice(0, 200)}`, requestId);
    const out: ListedKey = { key: k.key };
    if (typeof k.version === 'number') out.version = k.version;
    if (typeof k.size === 'number') out.size = k.size;
    if (k.expiresAt === null || typeof k.expiresAt === 'string')
      out.expiresAt = k.expiresAt === null ? null : new Date(k.expiresAt);
    if (Array.isArray(k.tags)) out.tags = k.tags.filter((t): t is string => typeof t === 'string');
    if (typeof k.contentType === 'string') out.contentType = k.contentType;
    if (Array.isArray(k.tiers)) out.tiers = k.tiers.filter((t): t is string => typeof t === 'string');
    return out;
  });
  return { keys, cursor: body.cursor };
}

/** Every key of a listing, page after page: a page is asked for only when the previous one is used up. */
export async function* iterateKeys(page: (cursor: string | null) => Promise<KeyPage>): AsyncGenerator<ListedKey> {
  let cursor: string | null = null;
  do {
    const p = await page(cursor);
    yield* p.keys;
    cursor = p.cursor;
  } while (cursor !== null);
}
