import * as z from 'zod';
import { StrataError, ValidationError } from '../errors.js';
import { validateKey, validateNamespace } from '../model/keys.js';
import type { ApiEvent } from './http.js';
import { bodyBytes, header } from './http.js';

export const MAX_TTL_SECONDS = 31_536_000;
export const TAG_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;
export const MAX_TAGS = 16;

export const ttlSchema = z.number().int().min(1).max(MAX_TTL_SECONDS);
export const tagsSchema = z.array(z.string().regex(TAG_PATTERN, 'tags are 1-64 characters of A-Z, a-z, 0-9, "_", ".", ":" or "-"')).max(MAX_TAGS);
const contentTypeSchema = z.string().min(1).max(200).regex(/^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(\s*;.*)?$/, 'must be a media type like text/plain');

export const batchKeysSchema = z.strictObject({ keys: z.array(z.string()).min(1).max(100) });
export const batchPutSchema = z.strictObject({
  items: z
    .array(
      z.strictObject({
        key: z.string(),
        value: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'value must be base64'),
        ttl: ttlSchema.nullable().optional(),
        tags: tagsSchema.optional(),
        contentType: contentTypeSchema.optional(),
      }),
    )
    .min(1)
    .max(100),
});
export const uploadRequestSchema = z.strictObject({ contentType: contentTypeSchema.optional(), ttl: ttlSchema.nullable().optional(), tags: tagsSchema.optional() });
export const completeUploadSchema = uploadRequestSchema.extend({ uploadId: z.string().regex(/^[A-Za-z0-9_-]{8,64}$/, 'uploadId is the id returned when the upload URL was requested') });

/** Path parameters ns and key, validated (the key arrives URL-decoded). */
export function keyParams(event: ApiEvent): { ns: string; key: string } {
  const p = event.pathParameters ?? {};
  return { ns: validateNamespace(p.ns), key: validateKey(p.key) };
}

export function nsParam(event: ApiEvent): string {
  return validateNamespace(event.pathParameters?.ns);
}

/** Parses a JSON body against a schema; 415 for another content type, 400 naming the first bad field. */
export function jsonBody<T extends z.ZodType>(event: ApiEvent, schema: T, { optional = false } = {}): z.infer<T> {
  const raw = bodyBytes(event);
  if (optional && raw.length === 0) return schema.parse({});
  const type = header(event, 'content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new StrataError('UNSUPPORTED_MEDIA_TYPE', `this endpoint takes application/json, not '${type || 'no content-type'}'`, { expected: 'application/json' });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw new StrataError('MALFORMED_JSON', `body is not valid JSON: ${(e as Error).message}`);
  }
  return parseWith(schema, parsed, 'body');
}

export function parseWith<T extends z.ZodType>(schema: T, value: unknown, root: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = [root, ...issue.path.map(String)].join('.').replace(/\.(\d+)(?=\.|$)/g, '[$1]');
  throw new ValidationError(field, issue.message);
}

/** x-strata-ttl: whole seconds, 1..MAX_TTL_SECONDS; absent = namespace default. */
export function ttlHeader(event: ApiEvent): number | undefined {
  const raw = header(event, 'x-strata-ttl');
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d{1,9}$/.test(raw.trim())) throw new ValidationError('ttl', `x-strata-ttl must be a whole number of seconds between 1 and ${MAX_TTL_SECONDS}`, { value: raw.slice(0, 40) });
  const n = Number(raw.trim());
  if (n < 1 || n > MAX_TTL_SECONDS) throw new ValidationError('ttl', `x-strata-ttl must be between 1 and ${MAX_TTL_SECONDS} seconds`, { value: n });
  return n;
}

export function tagsHeader(event: ApiEvent): string[] | undefined {
  const raw = header(event, 'x-strata-tags');
  if (raw === undefined || raw.trim() === '') return undefined;
  return parseWith(tagsSchema, raw.split(',').map((t) => t.trim()), 'tags');
}

/** If-Match: a version, bare or as an ETag ("123", W/"123"). */
export function ifMatchHeader(event: ApiEvent): number | undefined {
  const raw = header(event, 'if-match');
  if (raw === undefined) return undefined;
  const m = /^\s*(?:W\/)?"?(\d{1,16})"?\s*$/.exec(raw);
  if (!m || !Number.isSafeInteger(Number(m[1]))) throw new ValidationError('if-match', 'If-Match must be a version number returned by an earlier read or write', { value: raw.slice(0, 40) });
  return Number(m[1]);
}

export function ifNoneMatchHeader(event: ApiEvent): boolean {
  const raw = header(event, 'if-none-match');
  if (raw === undefined) return false;
  if (raw.trim() !== '*') throw new ValidationError('if-none-match', 'If-None-Match only supports "*" (create only)');
  return true;
}

export function valueContentType(event: ApiEvent): string {
  const type = (header(event, 'content-type') ?? '').trim();
  if (type === '') return 'application/octet-stream';
  if (/^multipart\//i.test(type)) {
    throw new StrataError('UNSUPPORTED_MEDIA_TYPE', 'send the value as the raw request body, not as a multipart form', { received: type.split(';')[0] });
  }
  return parseWith(contentTypeSchema, type, 'content-type');
}
