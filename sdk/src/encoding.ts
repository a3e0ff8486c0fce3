/** Internal helpers: key/namespace validation and encoding, value encoding, base64. Not exported from the package. */
import { ValidationError } from './errors.js';
import type { CacheItem, CacheValue } from './types.js';

const NS_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const TAG_RE = /^[A-Za-z0-9_.:-]{1,64}$/;
const MAX_KEY_BYTES = 512;
const MAX_TAGS = 16;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function invalid(field: string, message: string): ValidationError {
  return new ValidationError({ code: 'VALIDATION_FAILED', status: 0, message: `${field}: ${message}`, details: { field } });
}

export function checkNamespace(ns: string): string {
  if (typeof ns !== 'string' || !NS_RE.test(ns)) throw invalid('ns', 'must match ^[a-z0-9][a-z0-9_-]{0,62}$');
  return ns;
}

export function checkKey(key: string): string {
  if (typeof key !== 'string' || key.length === 0) throw invalid('key', 'must be a non-empty string');
  try {
    encodeURIComponent(key);
  } catch {
    throw invalid('key', 'must be valid UTF-8 (no lone surrogates)');
  }
  if (encoder.encode(key).byteLength > MAX_KEY_BYTES) throw invalid('key', `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`);
  return key;
}

export function checkTags(tags: readonly string[] | undefined): void {
  if (tags === undefined) return;
  if (!Array.isArray(tags) || tags.length > MAX_TAGS) throw invalid('tags', `must be an array of at most ${MAX_TAGS} tags`);
  for (const t of tags)
    if (typeof t !== 'string' || !TAG_RE.test(t)) throw invalid('tags', `"${String(t)}" must match [A-Za-z0-9_.:-]{1,64}`);
}

/** Percent-encodes a key for the URL path: `encodeURIComponent`, plus `.` as `%2E` so `.`/`..` survive URL normalisation. */
export function encodeKey(key: string): string {
  return encodeURIComponent(checkKey(key)).replace(/\./g, '%2E');
}

export interface EncodedValue {
  bytes: Uint8Array;
  contentType: string;
}

/** Encodes a value: bytes as-is, strings as UTF-8 text, everything else as JSON. */
export function encodeValue(value: CacheValue, contentType?: string): EncodedValue {
  if (value instanceof Uint8Array) return { bytes: value, contentType: contentType ?? 'application/octet-stream' };
  if (value instanceof ArrayBuffer)
    return { bytes: new Uint8Array(value), contentType: contentType ?? 'application/octet-stream' };
  if (ArrayBuffer.isView(value)) {
    return {
      bytes: new Uint8Array(value.buffer, value.byteOffset, value.byteLength),
      contentType: contentType ?? 'application/octet-stream',
    };
  }
  if (typeof value === 'string') return { bytes: encoder.encode(value), contentType: contentType ?? 'text/plain; charset=utf-8' };
  const json = JSON.stringify(value);
  if (json === undefined) throw invalid('value', 'cannot be serialised as JSON (undefined, a function or a symbol)');
  return { bytes: encoder.encode(json), contentType: contentType ?? 'application/json' };
}

export function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

export function fromBase64(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, 'base64'));
}

export function parseDate(v: unknown): Date | null {
  if (typeof v !== 'string' || v === '') return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
}

export function parseTags(v: string | null | undefined): string[] {
  return v
    ? v
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean)
    : [];
}

export function makeItem(fields: Omit<CacheItem, 'text' | 'json'>): CacheItem {
  const item: CacheItem = {
    ...fields,
    text: () => decoder.decode(item.value),
    json: <T>() => JSON.parse(decoder.decode(item.value)) as T,
  };
  if (item.contentType === undefined) delete item.contentType;
  return item;
}

export function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Runs `fn` over `items` with at most `limit` in flight; results keep input order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        results[i] = await fn(items[i] as T, i);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  });
  await Promise.all(workers);
  return results;
}
