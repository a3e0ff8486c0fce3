import { BLOB_KEY_PREFIX } from './keys.js';
/**
 * The per-entry header stored with every value in every tier. A write or a move never replaces a newer
 * version with an older one (see {@link isNewer}); a delete leaves a short-lived tombstone so an in-flight
 * promotion or migration cannot resurrect the key.
 */
export interface EntryFlags {
  /** Written by a write-back policy and not yet flushed to the durable tiers. */
  dirty?: boolean;
  /** A delete marker: the key is gone as of `version`. */
  tombstone?: boolean;
  /**
   * On a tombstone only: an origin's 404 remembered (coordinator/origin.ts, negativeTtlSeconds), not a delete. Reads
   * that meet it miss without asking the origin; a delete's tombstone lets them ask.
   */
  negative?: boolean;
  /**
   * A location marker in an upper tier: the value of `version` lives in a lower tier (write-around).
   * Readers skip to the next tier; promotions of older versions are refused.
   */
  elsewhere?: boolean;
  /**
   * Kept in its tier: never chosen for eviction (memory S3-FIFO, cache-node SIEVE victims, evict-to-S3). Set and
   * cleared in place by tier migration's pin/unpin (see Pinning in tiers/tier.ts); a newer write starts unpinned.
   */
  pinned?: boolean;
  /**
   * A promoted hot copy not yet confirmed against the tier it came from: never served. The promotion confirms it
   * (Confirming in tiers/tier.ts) only if its source still holds that version, so a promotion that races a newer
   * write and that write's eviction cannot install an older version.
   */
  pending?: boolean;
  /**
   * On a storeOnce blob only: the garbage collector found no key referring to it and will remove this version unless a
   * writer refers to it again first (which rewrites it, unflagged, at a newer version; coordinator/dedup.ts).
   */
  condemned?: boolean;
}

/**
 * What a policy's foreground rules did to a value before any tier stored it (core/transforms/codec.ts): every tier
 * holds the transformed bytes (`size` and `hash` describe them), and reads undo it. Applied in the order written,
 * undone in reverse.
 */
export interface EntryEncoding {
  /** The size of the value as the caller wrote it. */
  size: number;
  /** Compressed with zstd (node:zlib). */
  zstd?: true;
  /**
   * Encrypted with AES-256-GCM under a data key that `key` (a KMS key in AWS, a local key file locally) wraps;
   * `dataKey` is the wrapped data key, never the key itself.
   */
  aes?: { key: string; dataKey: string };
  /**
   * storeOnce: this entry holds no bytes; the value is the content-addressed blob {@link blobKey}(blob) of the same
   * namespace, shared by every key that wrote the same bytes (coordinator/dedup.ts). The blob has its own encoding.
   */
  blob?: string;
}

export { BLOB_KEY_PREFIX } from './keys.js';

/**
 * Where a storeOnce blob lives: a key of the namespace no request can name (keys never contain NUL), so per-namespace
 * scans, migrations and evictions carry blobs along with the keys that refer to them.
 */
export function blobKey(address: string): string {
  return BLOB_KEY_PREFIX + address;
}

export function isBlobKey(key: string): boolean {
  return key.startsWith(BLOB_KEY_PREFIX);
}

export interface EntryHeader {
  /** Monotonic hybrid-logical-clock version (a safe integer, see model/hlc.ts). */
  version: number;
  /** Absolute expiry, epoch milliseconds; null = no expiry. */
  expiresAt: number | null;
  /** Size in bytes of the value as stored (after any {@link EntryEncoding}). */
  size: number;
  /**
   * Content fingerprint: base64url SHA-256 of the value as stored, or `etag:<etag>` for values committed from a presigned
   * upload (their bytes never pass through Strata); '' for tombstones and location markers.
   */
  hash: string;
  tags: string[];
  contentType?: string;
  flags: EntryFlags;
  /** Set when the stored bytes are transformed (compressed, encrypted): what reads must undo. */
  encoding?: EntryEncoding;
  /**
   * On hot-tier copies only: the epoch of the key's shard when the copy's data was taken (coordinator/hot-fence.ts).
   * A clean copy whose epoch is below the shard's current one may be older than an acknowledged write.
   */
  hotEpoch?: number;
  /**
   * Set on a read-through origin's value in a namespace with stale-while-revalidate (coordinator/origin.ts): its TTL,
   * epoch milliseconds. Past it, until `expiresAt` (later by the grace period), it is served marked stale while one
   * refresh runs; tiers keep it until `expiresAt` as for any entry.
   */
  staleAt?: number;
}

export interface Entry {
  header: EntryHeader;
  value: Buffer;
}

/** Outcome of a versioned write to one tier. */
export interface WriteOutcome {
  /** True when this write is now the stored version. */
  applied: boolean;
  /** The version the tier holds after the call (ours when applied, the newer one otherwise; null if none). */
  current: number | null;
  /**
   * Set when the write was refused for lack of room rather than for its version (a bounded tier that may not
   * evict what it holds, e.g. dirty write-back entries). The caller must place the value elsewhere.
   */
  full?: boolean;
}

export function isExpired(h: Pick<EntryHeader, 'expiresAt'>, now = Date.now()): boolean {
  return h.expiresAt !== null && h.expiresAt <= now;
}

/** Past its TTL but within its stale-while-revalidate grace (see {@link EntryHeader.staleAt}). */
export function isStale(h: Pick<EntryHeader, 'staleAt'>, now = Date.now()): boolean {
  return h.staleAt !== undefined && h.staleAt <= now;
}

/** A live entry is one a reader may return: not expired, not a tombstone, not a location marker. */
export function isLive(h: EntryHeader, now = Date.now()): boolean {
  return !isExpired(h, now) && !h.flags.tombstone && !h.flags.elsewhere;
}

/**
 * Whether `candidate` may replace `existing`. Expired entries count as absent; equal versions never
 * replace each other (a write is applied exactly once).
 */
export function isNewer(
  candidate: number,
  existing: Pick<EntryHeader, 'version' | 'expiresAt'> | undefined | null,
  now = Date.now(),
): boolean {
  if (!existing || isExpired(existing, now)) return true;
  return candidate > existing.version;
}

/** Compact wire form of a header (stored as JSON beside the value in Redis, as metadata in S3, etc.). */
export function encodeHeader(h: EntryHeader): string {
  return JSON.stringify(h);
}

export function decodeHeader(s: string): EntryHeader {
  const h = JSON.parse(s) as EntryHeader;
  if (typeof h.version !== 'number' || typeof h.size !== 'number') throw new Error('corrupt entry header');
  h.flags ??= {};
  h.tags ??= [];
  h.expiresAt ??= null;
  return h;
}

/**
 * An entry as another tier gets it (a promotion, a flush, a copy before presigning): the same version and value,
 * with `flags`, and without the hot copy's epoch, which only means something in the hot tier.
 */
export function copyForTier(e: Entry, flags: EntryFlags = {}): Entry {
  const { hotEpoch: _epoch, ...header } = e.header;
  return { header: { ...header, flags }, value: e.value };
}

export function makeTombstone(version: number, ttlMs: number, now = Date.now(), negative = false): Entry {
  const flags: EntryFlags = negative ? { tombstone: true, negative: true } : { tombstone: true };
  return {
    header: { version, expiresAt: now + ttlMs, size: 0, hash: '', tags: [], flags },
    value: Buffer.alloc(0),
  };
}

export function makeLocationMarker(version: number, expiresAt: number | null): Entry {
  return { header: { version, expiresAt, size: 0, hash: '', tags: [], flags: { elsewhere: true } }, value: Buffer.alloc(0) };
}
