import { hash } from 'node:crypto';
import { ValidationError } from '../errors.js';

/** Namespaces: lowercase DNS-label-like names, safe as path segments, Redis prefixes and S3 prefixes. */
export const NAMESPACE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/**
 * Strata's own records kept in the tiers (the hot-fence document). Valid for the tiers, refused by the API
 * (validateUserNamespace), so no tenant can read or overwrite them.
 */
export const SYSTEM_NAMESPACE = 'strata-system';
/** Keys: 1..512 bytes of UTF-8 (any characters; tiers never use raw keys as paths). */
export const MAX_KEY_BYTES = 512;

export function validateNamespace(ns: unknown, field = 'ns'): string {
  if (typeof ns !== 'string' || !NAMESPACE_PATTERN.test(ns)) {
    throw new ValidationError(
      field,
      'namespace must be 1-63 characters of a-z, 0-9, "_" or "-", starting with a letter or digit',
      { value: typeof ns === 'string' ? ns.slice(0, 80) : undefined },
    );
  }
  return ns;
}

/** A namespace a request may name: valid, and not the one Strata keeps its own records in. */
export function validateUserNamespace(ns: unknown, field = 'ns'): string {
  validateNamespace(ns, field);
  if (ns === SYSTEM_NAMESPACE)
    throw new ValidationError(field, `namespace '${SYSTEM_NAMESPACE}' is reserved for Strata's own records`, { value: ns });
  return ns as string;
}

export function validateKey(key: unknown, field = 'key'): string {
  if (typeof key !== 'string' || key.length === 0) throw new ValidationError(field, 'key must be a non-empty string');
  if (key.includes('\u0000')) throw new ValidationError(field, 'key must not contain NUL characters');
  // Lone surrogates cannot be encoded as UTF-8 and would alias other keys after encoding.
  if (!key.isWellFormed()) throw new ValidationError(field, 'key must be well-formed Unicode (no lone surrogates)');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES)
    throw new ValidationError(field, `key is ${bytes} bytes of UTF-8; the limit is ${MAX_KEY_BYTES}`, { limit: MAX_KEY_BYTES });
  return key;
}

/**
 * The keys of storeOnce blobs (model/entry.ts `blobKey`): a NUL, which no request may send, then the content's
 * address (base64url SHA-256, `.z` when zstd-compressed).
 */
export const BLOB_KEY_PREFIX = '\u0000blob/';
const BLOB_ADDRESS = /^[A-Za-z0-9_-]{43}(\.z)?$/;

/** A key as tiers and cache nodes take it: a key a request may name, or a storeOnce blob's. */
export function validateStoredKey(key: unknown, field = 'key'): string {
  if (typeof key === 'string' && key.startsWith(BLOB_KEY_PREFIX) && BLOB_ADDRESS.test(key.slice(BLOB_KEY_PREFIX.length)))
    return key;
  return validateKey(key, field);
}

/** Reversible, path-safe encoding of a key (base64url of its UTF-8 bytes: no '/', '.', '{' or '%'). */
export function encodeKey(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

export function decodeKey(encoded: string): string {
  return Buffer.from(encoded, 'base64url').toString('utf8');
}

/**
 * Two hex characters spreading keys over 256 shards (S3 prefixes, Redis hash-tag shards). FNV-1a over the
 * UTF-16 code units: it only has to spread keys evenly, and it runs on every request, so no crypto hash.
 */
export function keyShard(ns: string, key: string): string {
  return keyShardIndex(ns, key).toString(16).padStart(2, '0');
}

/** {@link keyShard} as a number, 0..255 (the hot fence indexes its epochs by it). */
export function keyShardIndex(ns: string, key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < ns.length; i++) h = Math.imul(h ^ ns.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ 0, 0x01000193);
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  // Fold the high bits in: FNV's low byte alone is weakly mixed for short keys.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return (h >>> 0) & 0xff;
}

export function contentHash(value: Buffer): string {
  return hash('sha256', value, 'base64url');
}
