import { isUtf8 } from 'node:buffer';
import * as z from 'zod';
import { StrataError, ValidationError } from '../errors.js';
import { MAX_KEY_BYTES, validateKey, validateUserNamespace } from '../model/keys.js';
import { MAX_TTL_SECONDS, parseWith, tagsSchema, ttlSchema } from '../model/schemas.js';
import type { ApiEvent } from './http.js';
import { bodyBytes, header } from './http.js';

/**
 * A media type, parameters optional. Only what an HTTP header may carry (visible ASCII, space and tab): the value is
 * sent back as `content-type` on reads, and a JSON body (batch put, uploads) could otherwise store a control
 * character, a line break or a character above U+00FF, which Node refuses to send (the read then failed with 500).
 */
const contentTypeSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\w!#$&^.+-]+\/[\w!#$&^.+-]+([ \t]*;[\t\x20-\x7e]*)?$/, 'must be a media type like text/plain');

/**
 * A key in a JSON body. The handlers check it with validateKey (naming the item, with the byte limit in the details);
 * the metadata states the same rule in the OpenAPI document. JSON Schema counts code points, not bytes, so the
 * byte limit is the extension keyword `x-strata-max-utf8-bytes` (maxLength only bounds what can fit).
 */
export const KEY_JSON_SCHEMA = {
  minLength: 1,
  maxLength: MAX_KEY_BYTES,
  pattern: '^[^\\u0000]+$',
  'x-strata-max-utf8-bytes': MAX_KEY_BYTES,
  description: `1-${MAX_KEY_BYTES} bytes of UTF-8, no NUL, well-formed Unicode (no lone surrogates)`,
} as const;
const keySchema = z.string().meta(KEY_JSON_SCHEMA);

/**
 * Standard base64 (RFC 4648 §4) in its one canonical form: padded to a multiple of 4 characters, pad bits zero.
 * Node's decoder skips what it does not understand and drops a trailing partial byte, so anything looser would
 * store other bytes than the client meant; non-canonical pad bits would let two strings decode to one value.
 * The document states it as one regular expression; the server checks the same language without the repeated
 * group, which V8 cannot match against a multi-megabyte value (its backtracking stack overflows).
 */
export const BASE64_PATTERN = '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$';
const BASE64_FLAT = /^[A-Za-z0-9+/]*(?:[AQgw]==|[AEIMQUYcgkosw048]=)?$/;
export function isCanonicalBase64(s: string): boolean {
  return s.length % 4 === 0 && BASE64_FLAT.test(s);
}
const base64Schema = z
  .string()
  .refine(
    isCanonicalBase64,
    'value must be standard base64 (RFC 4648: A-Z a-z 0-9 + /, padded with = to a multiple of 4 characters)',
  )
  .meta({ pattern: BASE64_PATTERN, contentEncoding: 'base64' });

export const batchKeysSchema = z.strictObject({ keys: z.array(keySchema).min(1).max(100) });
export const batchPutSchema = z.strictObject({
  items: z
    .array(
      z.strictObject({
        key: keySchema,
        value: base64Schema,
        ttl: ttlSchema.nullable().optional(),
        tags: tagsSchema.optional(),
        contentType: contentTypeSchema.optional(),
      }),
    )
    .min(1)
    .max(100),
});
export const uploadRequestSchema = z.strictObject({
  contentType: contentTypeSchema.optional(),
  ttl: ttlSchema.nullable().optional(),
  tags: tagsSchema.optional(),
});
/** `PATCH /v1/ns/{ns}/keys/{key}`: the key's new time to live in whole seconds, or null for none. */
export const touchSchema = z.strictObject({ ttl: ttlSchema.nullable() });
const uploadIdSchema = z.string().regex(/^[A-Za-z0-9_-]{8,64}$/, 'uploadId is the id returned when the upload URL was requested');
/** A part number of a multipart upload (core/tiers/multipart.ts: S3's 1..10,000). */
const partNumberSchema = z.int().min(1).max(10_000);
/** `POST /v1/ns/{ns}/uploads/{key}`: `multipart: true` asks for a multipart upload (part URLs from `.../parts`). */
export const createUploadSchema = uploadRequestSchema.extend({ multipart: z.boolean().optional() });
export const completeUploadSchema = uploadRequestSchema.extend({
  uploadId: uploadIdSchema,
  /** A multipart upload's parts, ascending by partNumber, each with the ETag its PUT answered. */
  parts: z
    .array(z.strictObject({ partNumber: partNumberSchema, etag: z.string().min(1).max(200) }))
    .min(1)
    .max(10_000)
    .optional(),
});
/** `POST /v1/ns/{ns}/uploads/{key}/parts`: URLs for up to 100 parts at once. */
export const partUrlsSchema = z.strictObject({
  uploadId: uploadIdSchema,
  partNumbers: z.array(partNumberSchema).min(1).max(100),
});
/** `POST /v1/ns/{ns}/uploads/{key}/abort`. */
export const abortUploadSchema = z.strictObject({ uploadId: uploadIdSchema });

/** Path parameters ns and key, validated (the key arrives URL-decoded). */
export function keyParams(event: ApiEvent): { ns: string; key: string } {
  const p = event.pathParameters ?? {};
  return { ns: validateUserNamespace(p.ns), key: validateKey(p.key) };
}

export function nsParam(event: ApiEvent): string {
  return validateUserNamespace(event.pathParameters?.ns);
}

/** Parses a JSON body against a schema; 415 for another content type, 400 naming the first bad field. */
export function jsonBody<T extends z.ZodType>(event: ApiEvent, schema: T, { optional = false } = {}): z.infer<T> {
  const raw = bodyBytes(event);
  if (optional && raw.length === 0) return schema.parse({});
  const type = header(event, 'content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new StrataError('UNSUPPORTED_MEDIA_TYPE', `this endpoint takes application/json, not '${type || 'no content-type'}'`, {
      expected: 'application/json',
    });
  }
  // JSON text is UTF-8 (RFC 8259 §8.1). Decoding invalid bytes would replace them with U+FFFD, so two different
  // keys could arrive as one: refuse the body instead.
  if (!isUtf8(raw)) throw new StrataError('MALFORMED_JSON', 'body is not valid UTF-8 (JSON text must be UTF-8)');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw new StrataError('MALFORMED_JSON', `body is not valid JSON: ${(e as Error).message}`);
  }
  return parseWith(schema, parsed, 'body');
}

/** x-strata-ttl: whole seconds, 1..MAX_TTL_SECONDS; absent = namespace default. */
export function ttlHeader(event: ApiEvent): number | undefined {
  const raw = header(event, 'x-strata-ttl');
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d{1,9}$/.test(raw.trim()))
    throw new ValidationError('ttl', `x-strata-ttl must be a whole number of seconds between 1 and ${MAX_TTL_SECONDS}`, {
      value: raw.slice(0, 40),
    });
  const n = Number(raw.trim());
  if (n < 1 || n > MAX_TTL_SECONDS)
    throw new ValidationError('ttl', `x-strata-ttl must be between 1 and ${MAX_TTL_SECONDS} seconds`, { value: n });
  return n;
}

export function tagsHeader(event: ApiEvent): string[] | undefined {
  const raw = header(event, 'x-strata-tags');
  if (raw === undefined || raw.trim() === '') return undefined;
  return parseWith(
    tagsSchema,
    raw.split(',').map((t) => t.trim()),
    'tags',
  );
}

/**
 * If-Match (RFC 9110 §13.1.1): `*` (the key must exist) or one version, bare or as an ETag (`123`, `"123"`,
 * `W/"123"`). A version above 2^53-1 cannot be stored, so it never matches: 409 like any other stale version.
 * A list of ETags is refused: the coordinator checks one expected version under the key's lock.
 */
export const IF_MATCH_PATTERN = /^\s*(?:(\*)|(?:W\/)?"(\d{1,16})"|(\d{1,16}))\s*$/;
export function ifMatchHeader(event: ApiEvent): number | '*' | undefined {
  const raw = header(event, 'if-match');
  if (raw === undefined) return undefined;
  const m = IF_MATCH_PATTERN.exec(raw);
  if (!m) {
    const list = raw.includes(',');
    const message = list
      ? 'If-Match takes one version (or *), not a list of ETags'
      : 'If-Match must be * or a version returned by an earlier read or write';
    throw new ValidationError('if-match', message, { value: raw.slice(0, 40) });
  }
  return m[1] ? '*' : Number(m[2] ?? m[3]);
}

export function ifNoneMatchHeader(event: ApiEvent): boolean {
  const raw = header(event, 'if-none-match');
  if (raw === undefined) return false;
  if (raw.trim() !== '*') throw new ValidationError('if-none-match', 'If-None-Match only supports "*" (create only)');
  return true;
}

/** One entity tag as a read's If-None-Match takes it: `"123"`, `W/"123"` (any opaque tag, too) or a bare version. */
const OPAQUE_TAG = String.raw`[\x21\x23-\x7e]*`;
const ENTITY_TAG = String.raw`(?:W/)?"${OPAQUE_TAG}"|\d{1,16}`;
/** Each entity tag of a valid list, in order: the quoted tag's content, or the bare version. */
const EACH_ENTITY_TAG = new RegExp(String.raw`(?:W/)?"(${OPAQUE_TAG})"|(\d{1,16})`, 'g');
/**
 * If-None-Match of a read (RFC 9110 §13.1.2): `*`, or a comma-separated list of entity tags. Written once: the
 * server checks it, and the OpenAPI document states it (route-docs.ts).
 */
export const IF_NONE_MATCH_READ_PATTERN = new RegExp(String.raw`^\s*(?:\*|(?:${ENTITY_TAG})(?:\s*,\s*(?:${ENTITY_TAG}))*)\s*$`);

/**
 * A read's If-None-Match, compared weakly: the versions it names, or `'any'` for `*`. An entity tag that is not
 * one of our versions (`"abc"`) names none, and never matches. Something that is not a list of entity tags is a 400.
 */
export function ifNoneMatchRead(event: ApiEvent): 'any' | number[] | undefined {
  const raw = header(event, 'if-none-match');
  if (raw === undefined) return undefined;
  if (!IF_NONE_MATCH_READ_PATTERN.test(raw)) {
    const message = 'If-None-Match must be * or a list of versions returned by earlier reads ("12", W/"12" or 12)';
    throw new ValidationError('if-none-match', message, { value: raw.slice(0, 40) });
  }
  if (raw.trim() === '*') return 'any';
  // Tag by tag, left to right (a quoted tag may hold a comma): the quoted ones that are versions, and the bare ones.
  return [...raw.matchAll(EACH_ENTITY_TAG)]
    .map((m) => m[1] ?? m[2]!)
    .filter((v) => /^\d{1,16}$/.test(v))
    .map(Number);
}

/** Whether a read's If-None-Match names the stored `version` (then the answer is 304 Not Modified). */
export function notModified(condition: 'any' | number[] | undefined, version: number): boolean {
  return condition === 'any' || (condition?.includes(version) ?? false);
}

export function valueContentType(event: ApiEvent): string {
  const type = (header(event, 'content-type') ?? '').trim();
  if (type === '') return 'application/octet-stream';
  if (/^multipart\//i.test(type)) {
    throw new StrataError('UNSUPPORTED_MEDIA_TYPE', 'send the value as the raw request body, not as a multipart form', {
      received: type.split(';')[0],
    });
  }
  return parseWith(contentTypeSchema, type, 'content-type');
}

/** `?limit=`: a whole number from 1 to `max`, as a query parameter (a string) parsed to a number. */
export function limitParam(max: number) {
  return z
    .string()
    .regex(/^\d{1,4}$/, `limit must be a whole number from 1 to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(1, `limit must be from 1 to ${max}`).max(max, `limit must be from 1 to ${max}`));
}

/** Query parameters without the empty ones (`?limit=` is as if `limit` were not sent). */
export function dropEmpty(q: Record<string, string | undefined> | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(q ?? {})) if (v !== undefined && v !== '') out[k] = v;
  return out;
}
