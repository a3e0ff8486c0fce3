/**
 * Where the cold tiers keep an entry: S3 object keys and local-folder paths derived from (ns, key).
 * Raw keys never become paths: they are encoded (base64url for S3, base32 for the file system), so '/', '..',
 * '%' or unicode in a key cannot escape the tier's prefix or directory, and namespaces are validated.
 */
import { ValidationError } from '../errors.js';
import { decodeKey, encodeKey, keyShard, validateStoredKey, validateNamespace } from '../model/keys.js';
import type { KeyRef } from './tier.js';

/** S3 object keys are at most 1024 bytes of UTF-8. */
export const S3_MAX_OBJECT_KEY_BYTES = 1024;
export const DEFAULT_S3_PREFIX = 'v1';
/** Folder (under the prefix or the local dir) holding staged presigned uploads; never a namespace (those start with [a-z0-9]). */
export const UPLOADS_FOLDER = '_uploads';
export const UPLOAD_ID_PATTERN = /^[A-Za-z0-9_-]{8,64}$/;

const PREFIX_SEGMENT = /^[A-Za-z0-9._-]+$/;

/** Strips surrounding '/' and checks each segment ('' = no prefix). */
export function normalizePrefix(prefix: string): string {
  const p = prefix.replace(/^\/+|\/+$/g, '');
  if (p === '') return '';
  for (const seg of p.split('/')) {
    if (!PREFIX_SEGMENT.test(seg) || seg === '.' || seg === '..') {
      throw new ValidationError(
        'prefix',
        `invalid S3 prefix segment '${seg}' (use [A-Za-z0-9._-], no empty, '.' or '..' segments)`,
      );
    }
  }
  if (p.length > 200) throw new ValidationError('prefix', 'S3 prefix must be at most 200 characters');
  return p;
}

function join(prefix: string, rest: string): string {
  return prefix === '' ? rest : `${prefix}/${rest}`;
}

/** `<prefix>/<ns>/<shard>/<base64url(key)>`. Validates ns and key. */
export function s3ObjectKey(prefix: string, ns: string, key: string): string {
  validateNamespace(ns);
  validateStoredKey(key);
  const k = join(prefix, `${ns}/${keyShard(ns, key)}/${encodeKey(key)}`);
  if (Buffer.byteLength(k) > S3_MAX_OBJECT_KEY_BYTES)
    throw new ValidationError('key', `object key would be ${Buffer.byteLength(k)} bytes; S3 allows ${S3_MAX_OBJECT_KEY_BYTES}`);
  return k;
}

/** Inverse of {@link s3ObjectKey}; undefined for keys that are not entries under this prefix. */
export function parseS3ObjectKey(prefix: string, objectKey: string): KeyRef | undefined {
  const rest = prefix === '' ? objectKey : objectKey.startsWith(prefix + '/') ? objectKey.slice(prefix.length + 1) : undefined;
  if (rest === undefined) return undefined;
  const parts = rest.split('/');
  if (parts.length !== 3) return undefined;
  const [ns, shard, enc] = parts as [string, string, string];
  if (!/^[A-Za-z0-9_-]+$/.test(enc)) return undefined;
  const key = decodeKey(enc);
  if (encodeKey(key) !== enc || keyShard(ns, key) !== shard) return undefined;
  return { ns, key };
}

export function validateUploadId(uploadId: unknown): string {
  if (typeof uploadId !== 'string' || !UPLOAD_ID_PATTERN.test(uploadId)) {
    throw new ValidationError('uploadId', 'upload id must be 8-64 characters of A-Z, a-z, 0-9, "_" or "-"');
  }
  return uploadId;
}

/** `<prefix>/_uploads/<uploadId>`. */
export function s3StagingKey(prefix: string, uploadId: string): string {
  return join(prefix, `${UPLOADS_FOLDER}/${validateUploadId(uploadId)}`);
}

/** Suffix of an upload's record beside its staging object (upload ids have no '.', so the two never collide). */
export const UPLOAD_RECORD_SUFFIX = '.json';

/** `<prefix>/_uploads/<uploadId>.json`: the upload's record (tiers/upload-record.ts). */
export function s3UploadRecordKey(prefix: string, uploadId: string): string {
  return join(prefix, `${UPLOADS_FOLDER}/${validateUploadId(uploadId)}${UPLOAD_RECORD_SUFFIX}`);
}

/**
 * An upload's commit request beside its record: its creation is the S3 event that starts the upload-commit workflow
 * in AWS (cdk/stacks/workflows-stack.ts matches `<prefix>/_uploads/*.commit`).
 */
export function s3CommitRequestKey(prefix: string, uploadId: string): string {
  return join(prefix, `${UPLOADS_FOLDER}/${validateUploadId(uploadId)}${COMMIT_REQUEST_SUFFIX}`);
}

/** Suffix of an upload's commit request (see {@link s3CommitRequestKey}). */
export const COMMIT_REQUEST_SUFFIX = '.commit';

// ---- sweep requests ------------------------------------------------------------------------------------------

/** Folder (under the prefix) of the invalidation sweeps' requests; never a namespace (those start with [a-z0-9]). */
export const SWEEPS_FOLDER = '_sweeps';
/** Suffix of a sweep request (see {@link s3SweepRequestKey}). */
export const SWEEP_REQUEST_SUFFIX = '.sweep';
/** A sweep's name, as an execution's (Step Functions: 1-80 of these). */
export const SWEEP_NAME_PATTERN = /^[A-Za-z0-9_-]{1,80}$/;

/**
 * `<prefix>/_sweeps/<name>.sweep`: a sweep request, named as its execution would be; its creation is the S3 event that
 * starts the invalidation-sweep workflow in AWS (cdk/stacks/workflows-stack.ts matches `<prefix>/_sweeps/*.sweep`).
 */
export function s3SweepRequestKey(prefix: string, name: string): string {
  if (!SWEEP_NAME_PATTERN.test(name)) throw new ValidationError('name', 'a sweep is named with 1-80 of A-Z a-z 0-9 _ -');
  return join(prefix, `${SWEEPS_FOLDER}/${name}${SWEEP_REQUEST_SUFFIX}`);
}

// ---- S3 order markers --------------------------------------------------------------------------------------

/**
 * Folder (under the prefix) of the S3 tier's key-order index (tiers/s3-order-markers.ts); never a namespace (those
 * start with [a-z0-9]). Two characters, as a shard is, so `_k/<ns>/` is exactly as long as `<ns>/<shard>/`.
 */
export const ORDER_MARKERS_FOLDER = '_k';

/**
 * The 64 base64url characters in ASCII order. Encoding a key's bits with them (see {@link encodeOrderedKey}) keeps key
 * order: the name of a marker compares in S3's listing order (UTF-8 bytes, here ASCII) as the key compares in
 * model/key-order.ts `compareKeys` order (UTF-8 bytes). Standard base64url does not: its alphabet runs A-Z, a-z, 0-9, '-', '_'.
 */
const ORDERED_ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
const ORDERED_INDEX = new Int8Array(128).fill(-1);
for (let i = 0; i < ORDERED_ALPHABET.length; i++) ORDERED_INDEX[ORDERED_ALPHABET.charCodeAt(i)] = i;

/**
 * A key's UTF-8 bytes as a bit string cut into 6-bit characters of {@link ORDERED_ALPHABET}, the last one padded
 * with zero bits (no '=' padding): as long as base64url, and order-preserving. Why: where two keys first differ in
 * a byte, their bit strings first differ in a bit both encodings hold in full, in the same character, with the same
 * bits before it; where one key is a prefix of the other, the shorter's encoding is at most equal character by
 * character (its padding is zeros) and shorter (n bytes take ceil(8n/6) characters, which grows with n).
 */
export function encodeOrderedKey(key: string): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const byte of Buffer.from(key, 'utf8')) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += ORDERED_ALPHABET[(acc >>> bits) & 63];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += ORDERED_ALPHABET[(acc << (6 - bits)) & 63];
  return out;
}

/** Inverse of {@link encodeOrderedKey}; undefined for anything it never answers (other characters, lengths, padding). */
export function decodeOrderedKey(enc: string): string | undefined {
  if (enc.length % 4 === 1) return undefined;
  const out = Buffer.alloc(Math.floor((enc.length * 6) / 8));
  let acc = 0;
  let bits = 0;
  let n = 0;
  for (let i = 0; i < enc.length; i++) {
    const c = enc.charCodeAt(i);
    const v = c < 128 ? ORDERED_INDEX[c]! : -1;
    if (v < 0) return undefined;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >>> bits) & 255;
    }
    acc &= (1 << bits) - 1;
  }
  if (acc !== 0) return undefined; // padding bits must be zero: one name per key
  const key = out.toString('utf8');
  // Not UTF-8 (decoding replaced something): not a name we wrote.
  return Buffer.from(key, 'utf8').equals(out) ? key : undefined;
}

/**
 * The longest string that starts the encoding of every key starting with `keyPrefix`: the characters of its whole
 * 6-bit groups. The last, partial character of `encodeOrderedKey(keyPrefix)` holds padding where a longer key holds
 * its next bits, so it is no prefix of theirs.
 */
export function orderedKeyPrefix(keyPrefix: string): string {
  return encodeOrderedKey(keyPrefix).slice(0, Math.floor((Buffer.byteLength(keyPrefix) * 8) / 6));
}

/** `<prefix>/_k/<ns>/`: where the order markers of a namespace live. */
export function s3OrderMarkerFolder(prefix: string, ns: string): string {
  validateNamespace(ns);
  return join(prefix, `${ORDER_MARKERS_FOLDER}/${ns}/`);
}

/**
 * `<prefix>/_k/<ns>/<encodeOrderedKey(key)>`: the order marker of an entry (tiers/s3-order-markers.ts). Exactly as
 * long as the entry's own object key (`_k/<ns>/` against `<ns>/<shard>/`, and an encoding as long as base64url), so
 * every key S3 can hold an entry of has a marker too; checked all the same.
 */
export function s3OrderMarkerKey(prefix: string, ns: string, key: string): string {
  validateStoredKey(key);
  const k = s3OrderMarkerFolder(prefix, ns) + encodeOrderedKey(key);
  if (Buffer.byteLength(k) > S3_MAX_OBJECT_KEY_BYTES)
    throw new ValidationError('key', `object key would be ${Buffer.byteLength(k)} bytes; S3 allows ${S3_MAX_OBJECT_KEY_BYTES}`);
  return k;
}

/** The key a marker of `ns` is named for; undefined for other objects (not under the folder, or not a name we write). */
export function parseS3OrderMarkerKey(prefix: string, ns: string, objectKey: string): string | undefined {
  const folder = s3OrderMarkerFolder(prefix, ns);
  if (!objectKey.startsWith(folder)) return undefined;
  const key = decodeOrderedKey(objectKey.slice(folder.length));
  if (key === undefined) return undefined;
  try {
    return validateStoredKey(key);
  } catch {
    return undefined;
  }
}

// ---- Local folder layout ----------------------------------------------------------------------------------

/**
 * The local run's warm tier (`STRATA_LOCAL_NODES`: cache-node data and ring, wiped at every start) inside the
 * local data folder, next to the folder tier's namespaces. Like every folder of the data folder that is not a
 * namespace, it starts with '_', which no namespace can (NAMESPACE_PATTERN): a namespace's folder can never be
 * one the local run owns, and so never be wiped with it.
 */
export const LOCAL_WARM_FOLDER = '_warm';
/** The local run's policy store (edited policy documents and their audit trail), kept across restarts. */
export const LOCAL_POLICY_FOLDER = '_policies';
/**
 * The local run's encryption keys (`npm start`'s STRATA_KEYRING, one file per key a policy names), kept across
 * restarts: values encrypted under a key are lost with its file.
 */
export const LOCAL_KEYS_FOLDER = '_keys';
/** Every folder of the local data folder that is not a namespace (a test checks that none can be one). */
export const RESERVED_LOCAL_FOLDERS: readonly string[] = [
  UPLOADS_FOLDER,
  LOCAL_WARM_FOLDER,
  LOCAL_POLICY_FOLDER,
  LOCAL_KEYS_FOLDER,
];

const B32 = 'abcdefghijklmnopqrstuvwxyz234567';
const B32_INDEX = new Map([...B32].map((c, i) => [c, i] as const));

/** RFC 4648 base32, lowercase, no padding: safe on case-insensitive file systems (macOS, Windows). */
export function base32Encode(buf: Buffer): string {
  let out = '';
  let bits = 0;
  let acc = 0;
  for (const byte of buf) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += B32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += B32[(acc << (5 - bits)) & 31];
  return out;
}

export function base32Decode(s: string): Buffer {
  const out: number[] = [];
  let bits = 0;
  let acc = 0;
  for (const c of s) {
    const v = B32_INDEX.get(c);
    if (v === undefined) throw new Error(`invalid base32 character '${c}'`);
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out.push((acc >>> (bits - 8)) & 255);
      bits -= 8;
    }
    acc &= (1 << bits) - 1;
  }
  return Buffer.from(out);
}

/** Longest file-name segment (NAME_MAX is 255 bytes; leaves room for the suffix and temp-file decorations). */
export const LOCAL_SEGMENT_CHARS = 200;
/** Suffix of entry files: directories (continuations of long keys) never carry it, so they cannot collide with files. */
export const LOCAL_ENTRY_SUFFIX = '.e';

/**
 * Relative path segments of an entry file: `[ns, shard, ...chunks]`, the key as base32 of its UTF-8 cut into
 * segments of at most 200 characters (a 512-byte key is 820 characters, above NAME_MAX), the last one with
 * the '.e' suffix. Base32 rather than base64url because a case-insensitive file system would alias keys
 * whose base64url forms differ only in case. Segments never start with '.', so temp files ('.tmp-...') and
 * `_uploads` never collide with entries.
 */
export function localEntrySegments(ns: string, key: string): string[] {
  validateNamespace(ns);
  validateStoredKey(key);
  const enc = base32Encode(Buffer.from(key, 'utf8'));
  const chunks: string[] = [];
  for (let i = 0; i < enc.length; i += LOCAL_SEGMENT_CHARS) chunks.push(enc.slice(i, i + LOCAL_SEGMENT_CHARS));
  chunks[chunks.length - 1] += LOCAL_ENTRY_SUFFIX;
  return [ns, keyShard(ns, key), ...chunks];
}

/** Inverse of {@link localEntrySegments}; undefined for paths that are not entries. */
export function parseLocalEntrySegments(segments: string[]): KeyRef | undefined {
  if (segments.length < 3) return undefined;
  const [ns, shard, ...chunks] = segments as [string, string, ...string[]];
  const last = chunks[chunks.length - 1]!;
  if (!last.endsWith(LOCAL_ENTRY_SUFFIX)) return undefined;
  chunks[chunks.length - 1] = last.slice(0, -LOCAL_ENTRY_SUFFIX.length);
  try {
    const key = base32Decode(chunks.join('')).toString('utf8');
    const again = localEntrySegments(ns, key);
    if (again.join('/') !== segments.join('/') || again[1] !== shard) return undefined;
    return { ns, key };
  } catch {
    return undefined;
  }
}
