import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';

export type TierName = 'l1' | 'hot' | 'warm' | 'cold';

export interface KeyRef {
  ns: string;
  key: string;
}

export interface TierStats {
  name: TierName;
  kind: string;
  entries?: number;
  bytes?: number;
  capacityBytes?: number;
  evictions?: number;
  [extra: string]: unknown;
}

export interface PresignedUrl {
  url: string;
  method: 'GET' | 'PUT';
  /** Headers the client must send with the request. */
  headers: Record<string, string>;
  expiresAt: number;
}

/**
 * One storage tier. Every write is versioned: a tier applies a write only when its version is newer than the
 * live entry it holds (expired entries count as absent), atomically with respect to other writers of the same
 * tier. Reads return tombstones and location markers as they are, so the coordinator can stop or skip; they
 * never return expired entries. A tier that cannot reach its backend throws TierUnavailableError.
 */
export interface Tier {
  readonly name: TierName;
  /** Short description of the backend ('memory', 'redis', 's3', 'local-folder', 'cachenode'). */
  readonly kind: string;

  get(ns: string, key: string): Promise<Entry | undefined>;
  head(ns: string, key: string): Promise<EntryHeader | undefined>;
  has(ns: string, key: string): Promise<boolean>;
  /** Versioned write (also used for tombstones and location markers). */
  put(ns: string, key: string, entry: Entry): Promise<WriteOutcome>;
  /** Removes the entry only if its version is exactly `version` (or any version when omitted). Returns whether it removed one. */
  delete(ns: string, key: string, version?: number): Promise<boolean>;

  getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]>;
  putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]>;
  deleteMany(ns: string, keys: string[]): Promise<boolean[]>;

  stats(): Promise<TierStats>;
  /** Cheap liveness probe for /v1/health. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A tier that can keep write-back state: which entries are dirty and not yet flushed below. */
export interface DirtyTracking {
  /** Up to `limit` dirty entries, oldest first. */
  listDirty(limit: number): Promise<KeyRef[]>;
  /** Clears the dirty flag if the entry still has `version` (a newer write keeps its own flag). */
  markClean(ns: string, key: string, version: number): Promise<boolean>;
}

/** A tier that can hand out presigned URLs for large values (S3, or the local folder through the local server). */
export interface Presigning {
  presignDownload(ns: string, key: string, expiresInSec: number): Promise<PresignedUrl>;
  /** URL to upload bytes to a staging object; `commitUpload` then moves it into place with a version. */
  presignUpload(uploadId: string, expiresInSec: number, contentType?: string): Promise<PresignedUrl>;
  /** Moves a staged upload into (ns, key) as `header` (versioned like put). Throws NotFound if nothing was uploaded. */
  commitUpload(uploadId: string, ns: string, key: string, header: Omit<EntryHeader, 'size' | 'hash'>): Promise<WriteOutcome & { size: number }>;
}

export function supportsDirtyTracking(t: Tier): t is Tier & DirtyTracking {
  return typeof (t as Partial<DirtyTracking>).listDirty === 'function';
}

export function supportsPresigning(t: Tier): t is Tier & Presigning {
  return typeof (t as Partial<Presigning>).presignUpload === 'function';
}

/** One entry a scan found: its key and its header as {@link Tier.head} would return it. */
export interface ScanItem {
  key: string;
  header: EntryHeader;
}

export interface ScanOptions {
  /** Only keys that start with this string (a prefix of the user key, not of any storage key). */
  prefix?: string;
  /** Where the previous page stopped (its `cursor`); absent or null = from the start. */
  cursor?: string | null;
  /** Page size: at most this many items (a Redis SCAN page may overshoot a little; see RedisTier.scan). */
  limit: number;
}

export interface ScanPage {
  items: ScanItem[];
  /** Opaque: pass it back for the next page. Null once the scan is complete. A page may be empty before the end. */
  cursor: string | null;
}

/**
 * A tier that can enumerate the keys it holds in a namespace (tier migration, pinning). Entries that stay for the
 * whole scan are listed at least once (duplicates are possible: callers must be idempotent); entries written or
 * removed during the scan may or may not be. Items are as {@link Tier.head} returns them: never expired,
 * tombstones and location markers included.
 */
export interface Scanning {
  scan(ns: string, opts: ScanOptions): Promise<ScanPage>;
}

/**
 * A tier with an eviction order of its own that can exempt entries from it: a pinned entry is never chosen as a
 * victim (MemoryTier's S3-FIFO, the cache nodes' SIEVE victims and the evict-to-S3 step all honour the flag).
 * The flag lives in the entry header (`flags.pinned`) and belongs to that version: a newer write of the key
 * starts unpinned.
 */
export interface Pinning {
  /**
   * Sets (or clears) the pinned flag of the entry if it is exactly `version` (the version, value and expiry stay
   * as they are). Returns whether the entry now has the requested flag; false when the key is absent, expired or
   * at another version.
   */
  setPinned(ns: string, key: string, version: number, pinned: boolean): Promise<boolean>;
}

export function supportsScan(t: Tier): t is Tier & Scanning {
  return typeof (t as Partial<Scanning>).scan === 'function';
}

export function supportsPinning(t: Tier): t is Tier & Pinning {
  return typeof (t as Partial<Pinning>).setPinned === 'function';
}
