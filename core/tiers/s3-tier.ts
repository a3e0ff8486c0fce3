import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type LifecycleRule,
  type PutObjectCommandInput,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { NotFoundError, StrataError, TierUnavailableError, ValidationError } from '../errors.js';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { isExpired, isLive, isNewer } from '../model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../model/key-order.js';
import { NAMESPACE_PATTERN, validateNamespace } from '../model/keys.js';
import { mapLimit } from '../util/concurrency.js';
import type { CompletedPart, MultipartPresigning, PartUrl } from './multipart.js';
import { backoff, MAX_CAS_ATTEMPTS } from './s3-cas.js';
import { isConflict, isNotFound, isNotImplemented } from './s3-errors.js';
import { decodeStored, encodeMeta, headResultOf, type HeadResult } from './s3-metadata.js';
import { S3SweepRequests } from './s3-sweep-requests.js';
import { S3OrderMarkers, type OrderMarkerPage, type PruneResult } from './s3-order-markers.js';
import { presignSeconds, S3Presigner } from './s3-presign.js';
import { S3Uploads } from './s3-uploads.js';
import type { StoredUpload, UploadRecords } from './upload-record.js';
import { DEFAULT_S3_PREFIX, normalizePrefix, parseS3ObjectKey, s3ObjectKey } from './storage-key.js';
import type {
  CreatesIfAbsent,
  KeyOrdering,
  KeyPage,
  NewUpload,
  PresignedDownload,
  PresignedUrl,
  Presigning,
  PutOptions,
  ScanOptions,
  ScanPage,
  Scanning,
  SweepRequests,
  Tier,
  TierName,
  TierStats,
  UploadClaim,
  UploadRecord,
} from './tier.js';

const MiB = 1024 * 1024;

export interface S3TierOptions {
  /** @default 'cold' */
  name?: TierName;
  bucket: string;
  /** Key prefix of every object this tier writes. @default 'v1' */
  prefix?: string;
  /**
   * A client to use (not destroyed by close()). Note: presigned URLs are made with this client; the tier strips
   * the SDK's default flexible-checksum parameters from them, so no special client configuration is needed.
   */
  client?: S3Client;
  /** Custom endpoint, e.g. LocalStack's http://127.0.0.1:4566 (ignored when `client` is given). */
  endpoint?: string;
  /** @default AWS_REGION, else 'us-east-1' */
  region?: string;
  /** Path-style addressing (needed for LocalStack). @default true when `endpoint` is set */
  forcePathStyle?: boolean;
  /** Values above this many bytes are written with a multipart upload. @default 16 MiB */
  multipartThresholdBytes?: number;
  /** Multipart part size (S3 minimum 5 MiB). @default 8 MiB */
  partSizeBytes?: number;
  /**
   * Lifetime given to tombstones written without an expiry, and the basis of {@link S3Tier.tombstoneLifecycleRule}
   * (a bucket lifecycle rule expiring objects tagged strata-tombstone=1). @default 10 minutes
   */
  tombstoneTtlMs?: number;
  /**
   * A committed upload ({@link S3Tier.commitUpload}) above this many bytes is copied into place in parts
   * (UploadPartCopy, s3-multipart-copy.ts) instead of with one CopyObject, which copies at most 5 GiB. From 5 MiB
   * (S3 copies a byte range only from a source above 5 MB) to 5 GiB. @default 5 GiB: CopyObject whenever it can
   */
  copyThresholdBytes?: number;
  /**
   * Part size of those copies, raised when an object would need more than S3's 10,000 parts (a 5 TiB object takes
   * parts of 525 MiB). From 5 MiB to 5 GiB (S3's part size limits). @default 512 MiB
   */
  copyPartSizeBytes?: number;
  /** In-flight requests of getMany/putMany/deleteMany. @default 16 */
  batchConcurrency?: number;
  /** The clock order markers' ages are measured with (s3-order-markers.ts; tests move it). @default Date.now */
  now?: () => number;
}

const TOMBSTONE_TAG = 'strata-tombstone';

/**
 * The cold tier on S3. One object per entry at `<prefix>/<ns>/<shard>/<base64url(key)>`; the object body is the
 * raw value (so a presigned GET downloads exactly the value) and the entry header lives in user metadata. Key order
 * lives in a marker object per entry under `<prefix>/_k/<ns>/`, written before the entry's object is created
 * (s3-order-markers.ts).
 *
 * Writes are a versioned compare-and-set: HEAD (version + ETag), refuse when not newer, then a conditional write
 * (`If-Match: <etag>`, or `If-None-Match: *` when absent); a 412 means a concurrent writer won, so we re-HEAD and
 * retry, and concurrent writers converge on the highest version. Multipart uploads carry the same condition on
 * CompleteMultipartUpload, and presigned-upload commits use a conditional CopyObject (a multipart copy above 5 GiB,
 * s3-multipart-copy.ts, conditional at its completion).
 *
 * Known limit of ETag-based CAS: S3 ETags are content hashes, not write ids. If, between our HEAD and our write,
 * another writer stores a newer version with byte-identical content to what we saw (ABA), our If-Match still
 * holds and our older version replaces it. Tombstones and location markers are therefore written with a small
 * placeholder body unique to their kind and version (the value they report is still empty, size 0), so the
 * common "everything is zero bytes" ABA cannot happen; for live values it needs a concurrent rewrite of
 * identical bytes inside a HEAD→PUT window of milliseconds.
 */
export class S3Tier
  implements Tier, Presigning, MultipartPresigning, UploadRecords, Scanning, KeyOrdering, CreatesIfAbsent, SweepRequests
{
  readonly name: TierName;
  readonly kind = 's3';
  readonly createsIfAbsent = true;
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;
  private readonly ownsClient: boolean;
  private readonly multipartThreshold: number;
  private readonly partSize: number;
  private readonly tombstoneTtlMs: number;
  private readonly concurrency: number;
  /** Whether DeleteObject honours If-Match (AWS does; LocalStack answers 501). Learned on first use. */
  private conditionalDelete: boolean | undefined;
  /** The key-order index: a marker object per entry (s3-order-markers.ts). */
  private readonly markers: S3OrderMarkers;
  private readonly presigner: S3Presigner;
  /** Presigned uploads and their commits (s3-uploads.ts). */
  private readonly uploads: S3Uploads;
  /** Sweep requests (s3-sweep-requests.ts). */
  private readonly sweeps: S3SweepRequests;

  constructor(opts: S3TierOptions) {
    if (!opts.bucket) throw new ValidationError('bucket', 'S3Tier needs a bucket name');
    this.name = opts.name ?? 'cold';
    this.bucket = opts.bucket;
    this.prefix = normalizePrefix(opts.prefix ?? DEFAULT_S3_PREFIX);
    this.multipartThreshold = opts.multipartThresholdBytes ?? 16 * MiB;
    this.partSize = opts.partSizeBytes ?? 8 * MiB;
    if (!(this.partSize >= 5 * MiB)) throw new ValidationError('partSizeBytes', 'S3 multipart parts must be at least 5 MiB');
    if (!(this.multipartThreshold > 0))
      throw new ValidationError('multipartThresholdBytes', 'must be a positive number of bytes');
    this.tombstoneTtlMs = opts.tombstoneTtlMs ?? 10 * 60_000;
    this.concurrency = Math.max(1, opts.batchConcurrency ?? 16);
    if (opts.client) {
      this.client = opts.client;
      this.ownsClient = false;
    } else {
      const config: S3ClientConfig = {
        region: opts.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
        maxAttempts: 3,
        requestHandler: {
          connectionTimeout: 3_000,
          // Idle-socket timeout rather than a whole-request deadline, so multi-MiB transfers are not cut off.
          socketTimeout: 30_000,
          httpAgent: { keepAlive: true, maxSockets: 64 },
          httpsAgent: { keepAlive: true, maxSockets: 64 },
        },
      };
      if (opts.endpoint) {
        config.endpoint = opts.endpoint;
        config.forcePathStyle = opts.forcePathStyle ?? true;
      } else if (opts.forcePathStyle !== undefined) {
        config.forcePathStyle = opts.forcePathStyle;
      }
      this.client = new S3Client(config);
      this.ownsClient = true;
    }
    this.markers = new S3OrderMarkers({
      client: this.client,
      bucket: this.bucket,
      prefix: this.prefix,
      concurrency: this.concurrency,
      now: opts.now ?? Date.now,
      unavailable: (e) => this.unavailable(e),
    });
    this.presigner = new S3Presigner(this.client, (e) => this.unavailable(e));
    this.uploads = new S3Uploads({
      client: this.client,
      bucket: this.bucket,
      prefix: this.prefix,
      markers: this.markers,
      presigner: this.presigner,
      head: (objectKey) => this.headObject(objectKey),
      unavailable: (e) => this.unavailable(e),
      contention: (objectKey) => this.contention(objectKey),
      ...(opts.copyThresholdBytes !== undefined ? { copyThresholdBytes: opts.copyThresholdBytes } : {}),
      ...(opts.copyPartSizeBytes !== undefined ? { copyPartSizeBytes: opts.copyPartSizeBytes } : {}),
    });
    this.sweeps = new S3SweepRequests({
      client: this.client,
      bucket: this.bucket,
      prefix: this.prefix,
      unavailable: (e) => this.unavailable(e),
    });
  }

  // ---- reads ----------------------------------------------------------------------------------------------

  async get(ns: string, key: string): Promise<Entry | undefined> {
    const objectKey = s3ObjectKey(this.prefix, ns, key);
    const res = await this.unlessNotFound(this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: objectKey })));
    if (!res) return undefined;
    const header = decodeStored(res.Metadata, res.ContentLength ?? 0);
    if (!header || isExpired(header)) {
      discard(res.Body);
      return undefined;
    }
    if (header.size === 0) {
      discard(res.Body);
      return { header, value: Buffer.alloc(0) };
    }
    try {
      const bytes = await res.Body!.transformToByteArray();
      const value = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      header.size = value.length;
      return { header, value };
    } catch (e) {
      throw this.unavailable(e);
    }
  }

  async head(ns: string, key: string): Promise<EntryHeader | undefined> {
    const cur = await this.headObject(s3ObjectKey(this.prefix, ns, key));
    return cur?.header && !isExpired(cur.header) ? cur.header : undefined;
  }

  async has(ns: string, key: string): Promise<boolean> {
    const h = await this.head(ns, key);
    return !!h && isLive(h);
  }

  // ---- writes ---------------------------------------------------------------------------------------------

  /**
   * A versioned write: a compare-and-set on the object's ETag (or on its absence), re-read and decided again when
   * another writer got there first. `ifAbsent` (an exclusive create): refused while any live record of the key is
   * there; the same conditional PUT makes the check atomic, since a record created after the HEAD fails it.
   */
  async put(ns: string, key: string, entry: Entry, opts?: PutOptions): Promise<WriteOutcome> {
    const objectKey = s3ObjectKey(this.prefix, ns, key);
    const header = this.prepareHeader(entry);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const cur = await this.headObject(objectKey);
      if (cur?.header && !isNewer(header.version, cur.header)) return { applied: false, current: cur.header.version };
      if (opts?.ifAbsent && cur?.header && !isExpired(cur.header)) return { applied: false, current: cur.header.version };
      // Creating the entry's object (or taking over one we did not write): its order marker goes first.
      const markedAt = cur?.header ? undefined : await this.markers.mark(ns, key);
      try {
        await this.writeObject(objectKey, header, entry.value, cur ? { IfMatch: cur.etag } : { IfNoneMatch: '*' });
        if (markedAt !== undefined) await this.markers.settle(ns, key, markedAt);
        return { applied: true, current: header.version };
      } catch (e) {
        if (!isConflict(e)) throw this.unavailable(e);
        await backoff(attempt);
      }
    }
    throw this.contention(objectKey);
  }

  async delete(ns: string, key: string, version?: number): Promise<boolean> {
    const objectKey = s3ObjectKey(this.prefix, ns, key);
    const cur = await this.headObject(objectKey);
    if (!cur) return false;
    if (!cur.header) return false; // not ours
    if (isExpired(cur.header)) {
      // Counts as absent; remove it opportunistically when it is the version asked for (or any).
      if (version === undefined || cur.header.version === version)
        await this.deleteObject(objectKey, cur.etag).catch(() => false);
      return false;
    }
    if (version !== undefined && cur.header.version !== version) return false;
    if (version === undefined) return this.deleteUnconditionally(objectKey);
    return this.deleteObject(objectKey, cur.etag);
  }

  async getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
    return mapLimit(keys, this.concurrency, (k) => this.get(ns, k));
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    return mapLimit(items, this.concurrency, (i) => this.put(ns, i.key, i.entry));
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    return mapLimit(keys, this.concurrency, (k) => this.delete(ns, k));
  }

  // ---- enumeration ----------------------------------------------------------------------------------------

  /**
   * The namespaces under the tier's prefix, sorted: ListObjectsV2 with `/` as the delimiter answers each
   * `<prefix>/<ns>/` once as a common prefix (in UTF-8 order, a page of up to 1,000 at a time), whatever the number
   * of objects below it. `_uploads/` (staged uploads) and `_k/` (order markers) are no namespaces and are left out.
   * https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html (Delimiter, CommonPrefixes)
   */
  async namespaces(): Promise<string[]> {
    const listPrefix = this.prefix === '' ? '' : `${this.prefix}/`;
    const out: string[] = [];
    let token: string | undefined;
    do {
      let res;
      try {
        res = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: listPrefix,
            Delimiter: '/',
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
      } catch (e) {
        throw this.unavailable(e);
      }
      for (const cp of res.CommonPrefixes ?? []) {
        const ns = cp.Prefix?.slice(listPrefix.length, -1);
        if (ns !== undefined && NAMESPACE_PATTERN.test(ns)) out.push(ns);
      }
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
    return out.sort();
  }

  /**
   * One ListObjectsV2 page (`limit` objects) under `<prefix>/<ns>/`, then a HEAD of each listed entry whose key
   * starts with `opts.prefix` and passes `opts.match` (for its header). Object keys are `<ns>/<shard>/<base64url(key)>`, so a prefix of
   * the user key is not a prefix of the object key: the whole namespace is listed and filtered here. The cursor
   * is S3's continuation token.
   */
  async scan(ns: string, opts: ScanOptions): Promise<ScanPage> {
    const page = await this.keys(ns, opts);
    const heads = await mapLimit(page.keys, this.concurrency, (k) => this.head(ns, k));
    const items = page.keys.flatMap((key, i) => (heads[i] ? [{ key, header: heads[i]! }] : []));
    return { items, cursor: page.cursor };
  }

  /** One ListObjectsV2 page (at most 1,000 keys, S3's page size), without the HEAD per key a scan adds. */
  async keys(ns: string, opts: ScanOptions): Promise<KeyPage> {
    validateNamespace(ns);
    const listPrefix = `${this.prefix === '' ? '' : this.prefix + '/'}${ns}/`;
    let res;
    try {
      res = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: listPrefix,
          MaxKeys: Math.max(1, Math.min(1000, Math.floor(opts.limit))),
          ...(opts.cursor ? { ContinuationToken: opts.cursor } : {}),
        }),
      );
    } catch (e) {
      throw this.unavailable(e);
    }
    const keys: string[] = [];
    for (const o of res.Contents ?? []) {
      const ref = o.Key ? parseS3ObjectKey(this.prefix, o.Key) : undefined;
      if (ref && ref.ns === ns && ref.key.startsWith(opts.prefix ?? '') && (!opts.match || opts.match(ref.key)))
        keys.push(ref.key);
    }
    return { keys, cursor: res.IsTruncated && res.NextContinuationToken ? res.NextContinuationToken : null };
  }

  /** Keys in order, from the order markers (s3-order-markers.ts: what keeps them right). */
  async listOrdered(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
    return this.markers.list(ns, q);
  }

  /** One page of the order markers of `ns` with their ages (S3OrderMarkers.page), for a prune. */
  async orderMarkerPage(ns: string, cursor: string | null, limit: number): Promise<OrderMarkerPage> {
    return this.markers.page(ns, cursor, limit);
  }

  /** Deletes the order markers of `keys` whose objects are gone for good (S3OrderMarkers.prune). */
  async pruneOrderMarkers(ns: string, keys: readonly string[]): Promise<PruneResult> {
    return this.markers.prune(ns, keys);
  }

  /**
   * One page of the order markers' backfill: a page of {@link keys} (objects written before markers existed have
   * none), each given a marker where it lacks one. Run it over every namespace ({@link namespaces}), page after
   * page until the cursor is null, once every writer runs a version that marks its creations (a writer that does
   * not could create an unmarked object behind the backfill). Idempotent, and safe beside writes and prunes.
   */
  async backfillOrderMarkers(
    ns: string,
    cursor: string | null,
    limit = 1000,
  ): Promise<{ listed: number; created: number; cursor: string | null }> {
    const page = await this.keys(ns, { cursor, limit });
    const created = await this.markers.backfill(ns, page.keys);
    return { listed: page.keys.length, created, cursor: page.cursor };
  }

  // ---- presigning -----------------------------------------------------------------------------------------

  /**
   * A GET URL bound to the object as it is now: `If-Match: <its ETag>` is signed into the URL (a signed header
   * the client must send, see `headers`), so S3 answers 412 once the key was overwritten or deleted (a tombstone is
   * an object too) instead of serving other bytes than the version this URL was made for. ETags are content
   * hashes: a later version with identical bytes still downloads, and they are the same bytes.
   */
  async presignDownload(ns: string, key: string, expiresInSec: number): Promise<PresignedDownload> {
    const objectKey = s3ObjectKey(this.prefix, ns, key);
    const cur = await this.headObject(objectKey);
    const now = Date.now();
    if (!cur?.header || !isLive(cur.header, now)) throw new NotFoundError(`key not found in tier '${this.name}'`, { ns, key });
    const expiresIn = await this.presigner.withinCredentials(presignSeconds(expiresInSec, cur.header.expiresAt, now), now);
    const url = await this.presigner.url(
      new GetObjectCommand({ Bucket: this.bucket, Key: objectKey, IfMatch: cur.etag }),
      expiresIn,
    );
    return { url, method: 'GET', headers: { 'if-match': cur.etag }, expiresAt: now + expiresIn * 1000, header: cur.header };
  }

  /**
   * Writes the upload's record and presigns a PUT of its staging object that creates it once (`If-None-Match: *`
   * signed in); s3-uploads.ts holds the uploads' lifecycle.
   */
  async presignUpload(upload: NewUpload, expiresInSec: number): Promise<PresignedUrl> {
    return this.uploads.presignUpload(upload, expiresInSec);
  }

  async claimUpload(uploadId: string, accept: (r: UploadRecord) => boolean): Promise<UploadClaim | undefined> {
    return this.uploads.claimUpload(uploadId, accept);
  }

  async releaseUpload(claim: UploadClaim): Promise<void> {
    return this.uploads.releaseUpload(claim);
  }

  /** The staged size and the upload's record, for asynchronous completions (upload-record.ts UploadRecords). */
  stagedBytes(uploadId: string): Promise<number | undefined> {
    return this.uploads.stagedBytes(uploadId);
  }

  readUploadRecord(uploadId: string): Promise<StoredUpload | undefined> {
    return this.uploads.readUploadRecord(uploadId);
  }

  changeUploadRecord(uploadId: string, change: (u: StoredUpload) => StoredUpload | undefined): Promise<StoredUpload | undefined> {
    return this.uploads.changeUploadRecord(uploadId, change);
  }

  /** `_uploads/<id>.commit`, whose creation event starts the upload-commit workflow (s3-uploads.ts). */
  requestCommit(uploadId: string, body: string): Promise<void> {
    return this.uploads.requestCommit(uploadId, body);
  }

  /** `_sweeps/<name>.sweep`, whose creation event starts the invalidation-sweep workflow (s3-sweep-requests.ts). */
  requestSweep(name: string, input: Record<string, unknown>): Promise<boolean> {
    return this.sweeps.requestSweep(name, input);
  }

  readSweepRequest(object: string): Promise<Record<string, unknown> | undefined> {
    return this.sweeps.readSweepRequest(object);
  }

  deleteSweepRequest(object: string): Promise<void> {
    return this.sweeps.deleteSweepRequest(object);
  }

  /** Copies the claimed upload's staged object into place as a versioned write (a multipart copy above the copy threshold). */
  async commitUpload(
    uploadId: string,
    ns: string,
    key: string,
    header: Omit<EntryHeader, 'size' | 'hash'>,
  ): Promise<WriteOutcome & { size: number }> {
    return this.uploads.commitUpload(uploadId, ns, key, header);
  }

  // ---- multipart uploads (tiers/multipart.ts): S3's own, on the staging key ------------------------------

  async createMultipartUpload(upload: NewUpload, expiresInSec: number): Promise<{ expiresAt: number }> {
    return this.uploads.createMultipartUpload(upload, expiresInSec);
  }

  async presignParts(
    uploadId: string,
    partNumbers: readonly number[],
    accept: (r: UploadRecord) => boolean,
    expiresInSec: number,
  ): Promise<PartUrl[] | undefined> {
    return this.uploads.presignParts(uploadId, partNumbers, accept, expiresInSec);
  }

  async completeParts(claim: UploadClaim, parts: readonly CompletedPart[]): Promise<void> {
    return this.uploads.completeParts(claim, parts);
  }

  async abortUpload(claim: UploadClaim): Promise<void> {
    return this.uploads.abortUpload(claim);
  }

  // ---- service --------------------------------------------------------------------------------------------

  async stats(): Promise<TierStats> {
    return { name: this.name, kind: this.kind, bucket: this.bucket, prefix: this.prefix };
  }

  async ping(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (e) {
      throw this.unavailable(e);
    }
  }

  async close(): Promise<void> {
    if (this.ownsClient) this.client.destroy();
  }

  /**
   * A bucket lifecycle rule expiring tombstone objects (tagged strata-tombstone=1) under this prefix, for
   * PutBucketLifecycleConfiguration (merge it with the bucket's other rules; S3 counts whole days).
   */
  tombstoneLifecycleRule(): LifecycleRule {
    return {
      ID: `strata-tombstones-${this.prefix || 'root'}`.slice(0, 255),
      Status: 'Enabled',
      Filter: { And: { Prefix: this.prefix ? `${this.prefix}/` : '', Tags: [{ Key: TOMBSTONE_TAG, Value: '1' }] } },
      Expiration: { Days: Math.max(1, Math.ceil(this.tombstoneTtlMs / 86_400_000)) },
    };
  }

  // ---- internals ------------------------------------------------------------------------------------------

  private prepareHeader(entry: Entry): EntryHeader {
    const h = entry.header;
    const header: EntryHeader = { ...h, size: entry.value.length, tags: [...h.tags], flags: { ...h.flags } };
    if (h.flags.tombstone && h.expiresAt === null) header.expiresAt = Date.now() + this.tombstoneTtlMs;
    return header;
  }

  /** The response, undefined for a 404, TierUnavailableError for anything else. */
  private async unlessNotFound<T>(request: Promise<T>): Promise<T | undefined> {
    try {
      return await request;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw this.unavailable(e);
    }
  }

  /** HEAD → header + ETag; undefined on 404. */
  private async headObject(objectKey: string): Promise<HeadResult | undefined> {
    const res = await this.unlessNotFound(this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey })));
    return res && headResultOf(res);
  }

  private async writeObject(
    objectKey: string,
    header: EntryHeader,
    value: Buffer,
    cond: { IfMatch: string } | { IfNoneMatch: '*' },
  ): Promise<void> {
    const marker = value.length === 0 && (header.flags.tombstone || header.flags.elsewhere);
    const body = marker ? Buffer.from(`strata:${header.flags.tombstone ? 'tombstone' : 'elsewhere'}:${header.version}`) : value;
    const { meta, contentType } = encodeMeta(header, !!marker);
    const params: PutObjectCommandInput = {
      Bucket: this.bucket,
      Key: objectKey,
      Body: body,
      ContentLength: body.length,
      ContentType: contentType,
      Metadata: meta,
      ...(header.flags.tombstone ? { Tagging: `${TOMBSTONE_TAG}=1` } : {}),
      ...cond,
    };
    if (body.length > this.multipartThreshold) {
      // lib-storage passes IfMatch / IfNoneMatch through to CompleteMultipartUpload, which checks them at
      // completion (verified against LocalStack and documented by AWS), so multipart writes are as atomic as PutObject.
      const upload = new Upload({ client: this.client, params, partSize: this.partSize, queueSize: 4, leavePartsOnError: false });
      await upload.done();
    } else {
      await this.client.send(new PutObjectCommand(params));
    }
  }

  /** Conditional delete of exactly the object we saw; false when it changed or vanished. */
  private async deleteObject(objectKey: string, etag: string): Promise<boolean> {
    if (this.conditionalDelete !== false) {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey, IfMatch: etag }));
        this.conditionalDelete = true;
        return true;
      } catch (e) {
        if (isConflict(e) || isNotFound(e)) return false;
        if (!isNotImplemented(e)) throw this.unavailable(e);
        this.conditionalDelete = false;
      }
    }
    // Backend without conditional DeleteObject (LocalStack answers 501): the version was checked by the HEAD just
    // before, so a write landing between that HEAD and this DELETE (milliseconds) is deleted with it.
    return this.deleteUnconditionally(objectKey);
  }

  /** DeleteObject without a precondition: true when it deleted something (a 404 means it was already gone). */
  private async deleteUnconditionally(objectKey: string): Promise<boolean> {
    return (
      (await this.unlessNotFound(this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey })))) !==
      undefined
    );
  }

  private unavailable(e: unknown): Error {
    if (e instanceof StrataError) return e;
    return new TierUnavailableError(this.name, e);
  }

  private contention(objectKey: string): Error {
    return new TierUnavailableError(
      this.name,
      new Error(`gave up after ${MAX_CAS_ATTEMPTS} conflicting conditional writes to ${objectKey}`),
    );
  }
}

// ---- helpers ----------------------------------------------------------------------------------------------

function discard(body: unknown): void {
  const b = body as { destroy?: () => void } | undefined;
  try {
    b?.destroy?.();
  } catch {
    /* ignore */
  }
}
