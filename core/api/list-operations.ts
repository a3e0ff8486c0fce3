/**
 * `GET /v1/ns/{ns}/keys`: a namespace's keys in key order, within bounds, paged by a signed cursor
 * (coordinator/key-listing.ts for how a page is made; docs/API.md, "Listing keys", for the contract).
 */
import * as z from 'zod';
import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, type ListedKey } from '../coordinator/key-listing.js';
import { ValidationError } from '../errors.js';
import { compareKeys, type KeyRange } from '../model/key-order.js';
import { validateKey } from '../model/keys.js';
import { parseWith } from '../model/schemas.js';
import type { ApiEvent, ApiResult } from './http.js';
import { json } from './http.js';
import { decodeListCursor, encodeListCursor } from './list-cursor.js';
import type { ApiContext } from './operations.js';
import { callerIdentity } from './tenant-access.js';
import { dropEmpty, limitParam, nsParam } from './validation.js';

/** Which of the bounds `start` and `end` are part of the range (paper 002's range queries: either may be open). */
export const INCLUSIVE_VALUES = ['start', 'end', 'both', 'none'] as const;
/** The secret that signs the cursors (coordinator/system-secret.ts). */
const CURSOR_SECRET = 'list-cursor';

export const listKeysQuery = z.strictObject({
  prefix: z.string().optional(),
  start: z.string().optional(),
  end: z.string().optional(),
  inclusive: z.enum(INCLUSIVE_VALUES, { error: `inclusive is one of ${INCLUSIVE_VALUES.join(', ')}` }).optional(),
  limit: limitParam(MAX_LIST_LIMIT).optional(),
  cursor: z.string().max(4096, 'cursor is at most 4096 characters: pass back the one a page returned').optional(),
  metadata: z.enum(['true', 'false'], { error: 'metadata is true or false' }).optional(),
});

/** The range a query asks for (each bound a valid key; `start` after `end` is refused rather than answered empty). */
export function rangeOf(q: z.infer<typeof listKeysQuery>): KeyRange {
  const inclusive = q.inclusive ?? 'start';
  const prefix = q.prefix === undefined ? undefined : validateKey(q.prefix, 'prefix');
  const from =
    q.start === undefined
      ? undefined
      : { key: validateKey(q.start, 'start'), inclusive: inclusive === 'start' || inclusive === 'both' };
  const to =
    q.end === undefined ? undefined : { key: validateKey(q.end, 'end'), inclusive: inclusive === 'end' || inclusive === 'both' };
  if (from && to && compareKeys(from.key, to.key) > 0)
    throw new ValidationError('start', 'start comes after end in key order (UTF-8 bytes): swap them');
  return { ...(prefix !== undefined ? { prefix } : {}), ...(from ? { from } : {}), ...(to ? { to } : {}) };
}

export async function listKeys(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const ns = nsParam(event);
  const q = parseWith(listKeysQuery, dropEmpty(event.queryStringParameters), 'query');
  const range = rangeOf(q);
  const scope = { caller: callerIdentity(ctx.tenantAccess, event) ?? 'anonymous', ns, range };
  const secret = await ctx.coordinator.sharedSecret(CURSOR_SECRET);
  const from = q.cursor === undefined ? range.from : { key: decodeListCursor(secret, scope, q.cursor), inclusive: false };
  const metadata = q.metadata === 'true';
  const page = await ctx.coordinator.listKeys(ns, { ...range, from, limit: q.limit ?? DEFAULT_LIST_LIMIT, metadata });
  return json(200, {
    ns,
    keys: page.keys.map((k) => (metadata ? withMetadata(k) : { key: k.key })),
    cursor: page.last === null ? null : encodeListCursor(secret, scope, page.last),
  });
}

function withMetadata(k: ListedKey): Record<string, unknown> {
  const h = k.header!;
  return {
    key: k.key,
    version: h.version,
    size: h.size,
    expiresAt: h.expiresAt === null ? null : new Date(h.expiresAt).toISOString(),
    tags: h.tags,
    ...(h.contentType ? { contentType: h.contentType } : {}),
    tiers: k.tiers ?? [],
  };
}
