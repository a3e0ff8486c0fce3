// Reading the key-value API's answers: entries from headers, write and batch results, the 303's location headers.
// Internal: not exported from the package.
import { makeItem, parseDate, parseTags } from './encoding.js';
import { invalid, isObject, type Json } from './json.js';
import { requestIdOf } from './transport.js';
import type { CacheItem, NotModified, PutResult } from './types.js';

/** Prefix of the 303 headers that name headers the `location` needs (`x-strata-location-if-match` → `if-match`). */
const LOCATION_HEADER_PREFIX = 'x-strata-location-';

/** The headers a 303's location must be requested with (S3 URLs with a signed `If-Match`). */
export function locationHeaders(res: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  res.forEach((value, name) => {
    if (name.toLowerCase().startsWith(LOCATION_HEADER_PREFIX))
      out[name.slice(LOCATION_HEADER_PREFIX.length).toLowerCase()] = value;
  });
  return out;
}

/** A version from `x-strata-version` or an `etag` (`"123"`, `W/"123"`). */
export function parseVersion(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const m = /^(?:W\/)?"?(\d+)"?$/.exec(value.trim());
  return m ? Number(m[1]) : undefined;
}

export function asNumber(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
  return undefined;
}

export function stringArray(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export async function readJson(res: Response): Promise<Json> {
  const text = await res.text();
  try {
    const body: unknown = JSON.parse(text);
    if (isObject(body)) return body;
  } catch {
    /* fall through */
  }
  throw invalid(
    res.status,
    `expected a JSON object from the server (HTTP ${res.status}), got: ${text.slice(0, 200)}`,
    requestIdOf(res),
  );
}

/**
 * What the headers of a read say about the entry (version, expiry, serving tier, tags): from `meta` (the API's answer),
 * else `body` (a download's, whose headers may carry them too).
 */
export function entryMeta(meta: Headers, body: Headers = meta) {
  const get = (name: string) => meta.get(name) ?? body.get(name);
  return {
    version:
      parseVersion(meta.get('x-strata-version')) ?? parseVersion(body.get('x-strata-version')) ?? parseVersion(meta.get('etag')),
    expiresAt: parseDate(get('x-strata-expires-at')),
    tier: (get('x-strata-tier') ?? 'unknown').split(',')[0]!.trim(),
    tags: parseTags(get('x-strata-tags')),
  };
}

export function itemFromHeaders(key: string, value: Uint8Array, meta: Headers, body: Headers = meta): CacheItem {
  const { version, ...rest } = entryMeta(meta, body);
  const contentType = body.get('content-type') ?? meta.get('content-type') ?? undefined;
  return makeItem({ key, value, version: version ?? 0, contentType, ...rest });
}

/** A 304's headers: the stored version, which is the one the caller holds. */
export function notModifiedFrom(key: string, res: Response): NotModified {
  const { version, ...rest } = entryMeta(res.headers);
  if (version === undefined) throw invalid(304, 'not-modified answer without a version', requestIdOf(res));
  return { key, notModified: true, version, ...rest };
}

export function putResult(body: Json, ns: string, key: string, status: number): PutResult {
  const version = asNumber(body.version);
  if (version === undefined) throw invalid(status, `write response without a version: ${JSON.stringify(body).slice(0, 200)}`);
  return {
    ns: typeof body.ns === 'string' ? body.ns : ns,
    key: typeof body.key === 'string' ? body.key : key,
    version,
    expiresAt: parseDate(body.expiresAt),
    size: asNumber(body.size) ?? 0,
    tiers: stringArray(body.tiers),
    // Servers before `durable` existed acknowledged write-through writes only once durable.
    durable: body.durable !== false,
  };
}

export function batchItems(body: Json, expected: number, status: number): Json[] {
  const items = body.items;
  if (!Array.isArray(items) || items.length !== expected || !items.every(isObject)) {
    throw invalid(status, `batch response must carry ${expected} items`);
  }
  return items;
}
