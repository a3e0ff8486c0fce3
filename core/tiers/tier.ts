import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../model/key-order.js';

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

/** How long a tier may keep a copy (a cache tier's own residency, below the entry's expiry). */
export interface PutOptions {
  /**
   * A cache tier that evicts only entries with a TTL (ElastiCache Serverless: volatile-lru) keeps this copy at
   * most this long, never past the entry's own expiry; dirty (write-back) entries are exempt until marked clean.
   * Tiers that never evict on their own ignore it.
   */
  residencyMs?: number;
  /**
   * Create only: the write applies only if the tier holds no record of the key at all (a value, a tombstone or a
   * location marker; an expired one counts as absent, as for every versioned write), checked atomically with the
   * write. Only tiers that declare {@link CreatesIfAbsent} honour it; the coordinator asks no other tier.
   */
  ifAbsent?: boolean;
}

/**
 * One storage tier. Every write is versioned: a tier applies a write only when its version is newer than the
 * live entry it holds (expired entries count as absent), atomically with respect to other writers of the same
 * tier. Reads return tombstones and location markers as they are, so the coordinator can stop or skip; they
 * never return expired entries. A tier that cannot reach its backend throws TierUnavailableError.
 */
/** How a read is made. */
export interface ReadOptions {
  /**
   * A background read (a policy's copy or move), not a use of the entry: a tier that tracks use (eviction order,
   * last access and read count: the cache nodes, the memory tier) leaves them as they were.
   */
  readonly peek?: boolean;
}

export interface Tier {
  readonly name: TierName;
  /** Short description of the backend ('memory', 'redis', 's3', 'local-folder', 'cachenode'). */
  readonly kind: string;

  /** `opts.peek`: a background read (see {@link ReadOptions}); tiers that track no use of entries ignore it. */
  get(ns: string, key: string, opts?: ReadOptions): Promise<Entry | undefined>;
  head(ns: string, key: string): Promise<EntryHeader | undefined>;
  has(ns: string, key: string): Promise<boolean>;
  /** Versioned write (also used for tombstones and location markers). */
  put(ns: string, key: string, entry: Entry, opts?: PutOptions): Promise<WriteOutcome>;
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
  /**
   * Clears the dirty flag if the entry still has `version` (a newer write keeps its own flag); `residencyMs`
   * then applies to the now clean copy as in {@link PutOptions}.
   */
  markClean(ns: string, key: string, version: number, residencyMs?: number): Promise<boolean>;
  /**
   * Dirty entries found gone (evicted, or expired) before they were flushed since the last call: acknowledged
   * write-back writes that never reached a durable tier. Optional: a tier that never loses dirty entries omits it.
   */
  takeLostDirty?(): number;
}

/** A presigned download: the URL, and the header of exactly the entry version it serves (and nothing else). */
export interface PresignedDownload extends PresignedUrl {
  header: EntryHeader;
}

/**
 * What the API records when it hands out an upload URL (api/operations.ts), kept next to the staging object until
 * the upload is completed or cleaned up: who may complete it, where to, and the metadata given at creation.
 */
export interface UploadRecord {
  uploadId: string;
  /** The creator's identity (api/tenant-access.ts `callerIdentity`), or null when the request carried none. */
  owner: string | null;
  ns: string;
  key: string;
  /** TTL as given at creation: seconds, null = never expires, absent = the namespace default (counted from completion). */
  ttlSeconds?: number | null;
  tags?: string[];
  contentType?: string;
  /**
   * A multipart upload (tiers/multipart.ts): the bytes arrive as numbered parts through part URLs, and the tier
   * assembles them at completion. `id` is the backend's own upload id (S3's UploadId; the folder tier: 'local').
   */
  multipart?: { id: string };
  /** When the upload URL stops accepting the bytes (epoch ms). */
  urlExpiresAt: number;
  /** Completion is refused after this (epoch ms). */
  completeBy: number;
}

/** A completion in progress: the upload's record, taken by one caller (see {@link Presigning.claimUpload}). */
export interface UploadClaim {
  record: UploadRecord;
  claimId: string;
}

/** What {@link Presigning.presignUpload} records: the record without its deadlines (the tier sets them). */
export type NewUpload = Omit<UploadRecord, 'urlExpiresAt' | 'completeBy' | 'multipart'>;

/**
 * A tier that can hand out presigned URLs for large values (S3, or the local folder through the local server).
 *
 * Uploads are single-use and bound to their creator: `presignUpload` stores an {@link UploadRecord} and returns a
 * URL that accepts one PUT; completing takes the record with `claimUpload` (of concurrent claims exactly one
 * wins), then moves the bytes into place with `commitUpload`, which refuses an upload not claimed for that ns/key
 * and marks it completed once the bytes are in place; a failed completion gives the claim back (`releaseUpload`) so
 * the owner may try again. A completed upload's staging object is replaced by a small marker, so its URL refuses a
 * second PUT for as long as the URL lives.
 */
export interface Presigning {
  /** A URL that serves the live version of (ns, key) as it is now, and fails (412 or 404) once it changed. */
  presignDownload(ns: string, key: string, expiresInSec: number): Promise<PresignedDownload>;
  /** Records the upload and returns a URL that accepts one PUT of the bytes (URLs last at most {@link MAX_UPLOAD_URL_SECONDS}). */
  presignUpload(upload: NewUpload, expiresInSec: number): Promise<PresignedUrl>;
  /**
   * Takes the upload for completion when `accept(record)` holds and it is neither completed, past `completeBy`, nor
   * taken by another completion (whose claim has not gone stale). Undefined when unknown or not accepted; throws
   * VERSION_CONFLICT when an accepted upload is being completed by another request.
   */
  claimUpload(uploadId: string, accept: (r: UploadRecord) => boolean): Promise<UploadClaim | undefined>;
  /** Gives a claim back after a failed completion (best effort; a stale claim is taken over anyway). */
  releaseUpload(claim: UploadClaim): Promise<void>;
  /**
   * Moves a claimed upload into (ns, key) as `header` (versioned like put; a refused commit keeps the bytes staged so
   * the coordinator can re-stamp and commit again) and marks the upload completed. Throws NotFound if nothing was
   * uploaded, the upload is not claimed for (ns, key), or it was already completed.
   */
  commitUpload(
    uploadId: string,
    ns: string,
    key: string,
    header: Omit<EntryHeader, 'size' | 'hash'>,
  ): Promise<WriteOutcome & { size: number }>;
}

/**
 * Longest life of an upload URL. Staged objects, upload records and completed-markers live at least a day (the
 * bucket's lifecycle rule on `_uploads/`, the folder tier's sweep), so a completed upload's marker outlives its URL.
 */
export const MAX_UPLOAD_URL_SECONDS = 12 * 3600;
/** How long after its URL expired an upload can still be completed (the bytes may have arrived just in time). */
export const UPLOAD_COMPLETE_GRACE_MS = 3600_000;
/** A claim older than this is taken to belong to a completion that died (a Lambda is cut off after 15 minutes). */
export const UPLOAD_CLAIM_LEASE_MS = 15 * 60_000;

/**
 * A tier whose backend can restart or fail over and come back with older contents (Redis restored from a
 * snapshot, a replica promoted before it caught up). The coordinator's hot fence checks it after every
 * (re)connect: see coordinator/hot-fence.ts.
 */
export interface Incarnations {
  /** Calls `listener` whenever a connection to the backend is lost or reset (a reconnect follows). */
  onConnectionLost(listener: () => void): void;
  /**
   * Whether the backend is the incarnation last confirmed with {@link confirmIncarnation}; `token` names the
   * current one, `previous` the one recorded (null: none, a backend never used before). Throws
   * TierUnavailableError when the backend cannot be reached.
   */
  checkIncarnation(): Promise<{ same: true } | { same: false; token: string; previous: string | null }>;
  /** Records `token` as the incarnation whose contents the caller has made safe to read. */
  confirmIncarnation(token: string): Promise<void>;
}

/**
 * A tier whose versioned write can also be conditional on the key having no record ({@link PutOptions.ifAbsent}):
 * what an exclusive create (If-None-Match: *) of a key with no record anywhere needs, since no version both racing
 * creators would pick is then known to be fresh (coordinator/coordinator.ts, createVersion).
 */
export interface CreatesIfAbsent {
  readonly createsIfAbsent: true;
}

export function supportsCreateIfAbsent(t: Tier): t is Tier & CreatesIfAbsent {
  return (t as Partial<CreatesIfAbsent>).createsIfAbsent === true;
}

export function supportsIncarnations(t: Tier): t is Tier & Incarnations {
  return typeof (t as Partial<Incarnations>).checkIncarnation === 'function';
}

/** A cache tier that can hold promoted copies as pending (EntryFlags.pending) until they are confirmed. */
export interface Confirming {
  /** Makes a pending copy of exactly `version` servable; false when the key holds anything else. */
  confirm(ns: string, key: string, version: number): Promise<boolean>;
}

export function supportsConfirming(t: Tier): t is Tier & Confirming {
  return typeof (t as Partial<Confirming>).confirm === 'function';
}

export function supportsDirtyTracking(t: Tier): t is Tier & DirtyTracking {
  return typeof (t as Partial<DirtyTracking>).listDirty === 'function';
}

export function supportsPresigning(t: Tier): t is Tier & Presigning {
  return typeof (t as Partial<Presigning>).presignUpload === 'function';
}

/**
 * What a tier knows of an entry's reads, for the policies' selections by `idleSeconds` and `accessCount` (paper
 * 003's LRU cascade). Each tier counts only the reads that reach it, as each tier of Tiera keeps its own LRU order.
 */
export interface AccessFacts {
  /** Its last read in this tier, or when it arrived in this tier (or the tier's process started), if later (epoch ms). */
  lastAccessMs: number;
  /** Reads in this tier since it arrived (or since the tier's process started). */
  count: number;
}

/** One entry a scan found: its key and its header as {@link Tier.head} would return it. */
export interface ScanItem {
  key: string;
  header: EntryHeader;
  /**
   * Its access facts, where the tier tracks them (warm: the cache nodes; MemoryTier). Absent = unknown (Redis, S3,
   * the folder tier, a cache node that predates them, a pinned entry on a node): a selection by access never takes
   * an entry whose facts are unknown.
   */
  access?: AccessFacts;
}

export interface ScanOptions {
  /** Only keys that start with this string (a prefix of the user key, not of any storage key). */
  prefix?: string;
  /** Where the previous page stopped (its `cursor`); absent or null = from the start. */
  cursor?: string | null;
  /** Page size: at most this many items (a Redis SCAN page may overshoot a little; see RedisTier.scan). */
  limit: number;
  /**
   * Keys the caller wants: a tier may leave the others out before it reads their headers (the cold tiers read a
   * header per entry, the dominant cost of a scan that keeps a quarter of a namespace, e.g. a replacement node's
   * fill). A saving, not a filter the caller can rely on: tiers that do not honour it list every key.
   */
  match?: (key: string) => boolean;
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
  /**
   * The namespaces the tier holds entries of, sorted (a replacement node's fill walks them). Optional: the cold
   * tiers keep a folder or key prefix per namespace and list them cheaply; the others do not offer it.
   */
  namespaces?(): Promise<string[]>;
  /**
   * The keys a {@link scan} with the same options would list, without reading a header each: no expiry check, no
   * tombstone told apart, for a caller that reads every entry anyway (a replacement node's fill, whose scan read
   * each header only to read the whole entry next). The cursor is the scan's. Optional: the cold tiers offer it,
   * where a header is a file read or an S3 HEAD per key.
   */
  keys?(ns: string, opts: ScanOptions): Promise<KeyPage>;
}

/** A page of {@link Scanning.keys}. */
export interface KeyPage {
  keys: string[];
  /** Opaque: pass it back for the next page. Null once the listing is complete. */
  cursor: string | null;
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

export function supportsNamespaceListing(t: Tier): t is Tier & Scanning & Required<Pick<Scanning, 'namespaces'>> {
  return supportsScan(t) && typeof t.namespaces === 'function';
}

export function supportsKeyListing(t: Tier): t is Tier & Scanning & Required<Pick<Scanning, 'keys'>> {
  return supportsScan(t) && typeof t.keys === 'function';
}

/**
 * A tier that lists the keys it holds in a namespace in key order (model/key-order.ts: UTF-8 bytes), within a
 * range: what `GET /v1/ns/{ns}/keys` merges across the tiers (coordinator/key-listing.ts). Each tier orders only its
 * own keys; where the order lives and what keeps it right is the tier's own (docs/API.md, "Listing keys").
 *
 * A listing may name keys that are no longer live (deleted, expired, evicted, a tombstone, a copy left on a cache
 * node that gave its range away): the coordinator reads each key before it answers, so extra keys cost time, not
 * correctness. A key live in the tier for the whole call is never left out. Internal keys (storeOnce blobs, which
 * start with NUL) may be listed; the coordinator's ranges start past them.
 */
export interface KeyOrdering {
  listOrdered(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage>;
}

export function supportsKeyOrdering(t: Tier): t is Tier & KeyOrdering {
  return typeof (t as Partial<KeyOrdering>).listOrdered === 'function';
}

export function supportsPinning(t: Tier): t is Tier & Pinning {
  return typeof (t as Partial<Pinning>).setPinned === 'function';
}

/**
 * A tier whose bucket's events can start the invalidation-sweep workflow (the S3 tier, deployed: the Workflows
 * stack's rule matches a sweep request's creation). The API functions run in a VPC without a route to Step
 * Functions, so they write a request object instead of starting the execution (api/namespace-operations.ts).
 */
export interface SweepRequests {
  /**
   * Writes the sweep request `name` (its execution's name) with its input, unless one of that name exists: true
   * when this call created it (its creation starts the sweep), false when it was there already.
   */
  requestSweep(name: string, input: Record<string, unknown>): Promise<boolean>;
  /** The input of the sweep request stored at `object` (the event's key), undefined when it is gone. */
  readSweepRequest(object: string): Promise<Record<string, unknown> | undefined>;
  /** Removes the sweep request at `object` once its sweep is done. */
  deleteSweepRequest(object: string): Promise<void>;
}

export function supportsSweepRequests(t: Tier): t is Tier & SweepRequests {
  return typeof (t as Partial<SweepRequests>).requestSweep === 'function';
}
