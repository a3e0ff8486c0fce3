import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type LifecycleRule,
  type PutObjectCommandInput,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { NotFoundError, StrataError, TierUnavailableError, ValidationError } from '../errors.js';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { isExpired, isLive, isNewer } from '../model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../model/key-order.js';
import { NAMESPACE_PATTERN, validateNamespace } from '../model/keys.js';
import { errName, isConflict, isNotFound, isNotImplemented } from './s3-errors.js';
import { checkPartList, type CompletedPart, type MultipartPresigning, type PartUrl } from './multipart.js';
import { decodeStored, encodeMeta, isHeaderValue, META_UPLOAD } from './s3-metadata.js';
import { S3OrderMarkers, type OrderMarkerPage, type PruneResult } from './s3-order-markers.js';
import {
  DEFAULT_S3_PREFIX,
  normalizePrefix,
  parseS3ObjectKey,
  s3ObjectKey,
  s3StagingKey,
  s3UploadRecordKey,
} from './storage-key.js';
import { mapLimit } from '../util/concurrency.js';
import type {
  KeyOrdering,
  NewUpload,
  PresignedDownload,
  PresignedUrl,
  Presigning,
  ScanOptions,
  KeyPage,
  ScanPage,
  Scanning,
  Tier,
  TierName,
  TierStats,
  UploadClaim,
  UploadRecord,
} from './tier.js';
import {
  claimed,
  claimOf,
  committable,
  completed,
  decodeUpload,
  encodeUpload,
  openUpload,
  recordOf,
  released,
  uploadUrlSeconds,
  type StoredUpload,
} from './upload-record.js';

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
  /** In-flight requests of getMany/putMany/deleteMany. @default 16 */
  batchConcurrency?: number;
  /** The clock order markers' ages are measured with (s3-order-markers.ts; tests move it). @default Date.now */
  now?: () => number;
}

const COMPLETED_MARKER_BODY = 'strata:upload-completed';
const JSON_TYPE = 'application/json';
const TOMBSTONE_TAG = 'strata-tombstone';
const MAX_CAS_ATTEMPTS = 8;
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;
/** Kept between a URL's expiry and its credentials' expiry: clocks differ, and a client needs time to start. */
const CREDENTIAL_MARGIN_SECONDS = 30;
const MAX_COPY_BYTES = 5 * 1024 * MiB;

interface HeadResult {
  /** Undefined for objects without (valid) Strata metadata: such objects are treated as absent, but overwritten conditionally. */
  header?: EntryHeader;
  etag: string;
  size: number;
  contentType?: string;
  /** A completed upload's marker at its staging key (see {@link S3Tier.commitUpload}). */
  completedMarker?: boolean;
}

/**
 * The cold tier on S3. One object per entry at `<prefix>/<ns>/<shard>/<base64url(key)>`; the object body is the
 * raw value (so a presigned GET downloads exactly the value) and the entry header lives in user metadata. Key order
 * lives in a marker object per entry under `<prefix>/_k/<ns>/`, written before the entry's object is created
 * (s3-order-markers.ts).
 *
 * Writes are a versioned compare-and-set: HEAD (version + ETag), refuse when not newer, then a conditional write
 * (`If-Match: <etag>`, or `If-None-Match: *` when absent); a 412 means a concurrent writer won, so we re-HEAD and
 * retry, and concurrent writers converge on the highest version. Multipart uploads carry the same condition on
 * CompleteMultipartUpload, and presigned-upload commits use a conditional CopyObject.
 *
 * Known limit of ETag-based CAS: S3 ETags are content hashes, not write ids. If, between our HEAD and our write,
 * another writer stores a newer version with byte-identical content to what we saw (ABA), our If-Match still
 * holds and our older version replaces it. Tombstones and location markers are therefore written with a small
 * placeholder body unique to their kind and version (the value they report is still empty, size 0), so the
 * common "everything is zero bytes" ABA cannot happen; for live values it needs a concurrent rewrite of
 * identical bytes inside a HEAD→PUT window of milliseconds.
 */
export class S3Tier implements Tier, Presigning, MultipartPresigning, Scanning, KeyOrdering {
  readonly name: TierName;
  readonly kind = 's3';
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

  async put(ns: string, key: string, entry: Entry): Promise<WriteOutcome> {
    const objectKey = s3ObjectKey(this.prefix, ns, key);
    const header = this.prepareHeader(entry);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const cur = await this.headObject(objectKey);
      if (cur?.header && !isNewer(header.version, cur.header)) return { applied: false, current: cur.header.version };
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
    const expiresIn = await this.withinCredentials(presignSeconds(expiresInSec, cur.header.expiresAt, now), now);
    const url = await this.presign(new GetObjectCommand({ Bucket: this.bucket, Key: objectKey, IfMatch: cur.etag }), expiresIn);
    return { url, method: 'GET', headers: { 'if-match': cur.etag }, expiresAt: now + expiresIn * 1000, header: cur.header };
  }

  /**
   * Writes the upload's record (`_uploads/<id>.json`) and presigns a PUT of the staging object with
   * `If-None-Match: *` signed in: the URL creates the staging object once, and refuses any later PUT while
   * something is there (the bytes, then the completed-marker that replaces them).
   */
  async presignUpload(upload: NewUpload, expiresInSec: number): Promise<PresignedUrl> {
    const stagingKey = s3StagingKey(this.prefix, upload.uploadId);
    const now = Date.now();
    // Capped before the record is written, so its completion deadline follows the URL's real lifetime.
    const expiresIn = await this.withinCredentials(uploadUrlSeconds(expiresInSec), now);
    await this.createRecord(openUpload(upload, now, expiresIn));
    const ct = upload.contentType && isHeaderValue(upload.contentType) ? upload.contentType : undefined;
    const put = new PutObjectCommand({
      Bucket: this.bucket,
      Key: stagingKey,
      IfNoneMatch: '*',
      ...(ct ? { ContentType: ct } : {}),
    });
    const url = await this.presign(put, expiresIn);
    // S3 presigning never signs content-type; sending it makes the staged object carry it. If-None-Match is signed.
    const headers = { 'if-none-match': '*', ...(ct ? { 'content-type': ct } : {}) };
    return { url, method: 'PUT', headers, expiresAt: now + expiresIn * 1000 };
  }

  async claimUpload(uploadId: string, accept: (r: UploadRecord) => boolean): Promise<UploadClaim | undefined> {
    const now = Date.now();
    const u = await this.changeUpload(uploadId, (cur) => claimed(cur, accept, now));
    return u ? claimOf(u) : undefined;
  }

  async releaseUpload(claim: UploadClaim): Promise<void> {
    await this.changeUpload(claim.record.uploadId, (cur) => released(cur, claim));
  }

  async commitUpload(
    uploadId: string,
    ns: string,
    key: string,
    header: Omit<EntryHeader, 'size' | 'hash'>,
  ): Promise<WriteOutcome & { size: number }> {
    const stagingKey = s3StagingKey(this.prefix, uploadId);
    const objectKey = s3ObjectKey(this.prefix, ns, key);
    if (!committable((await this.readUpload(uploadId))?.upload, ns, key)) throw uploadNotFound(uploadId);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const staged = await this.headObject(stagingKey);
      if (!staged || staged.completedMarker) throw uploadNotFound(uploadId);
      if (staged.size > MAX_COPY_BYTES)
        throw new StrataError('PAYLOAD_TOO_LARGE', `uploads above ${MAX_COPY_BYTES} bytes are not supported`, {
          limit: MAX_COPY_BYTES,
        });
      const full: EntryHeader = {
        version: header.version,
        expiresAt: header.expiresAt,
        size: staged.size,
        // The bytes never pass through us: identify them by S3's ETag (MD5 for single-part uploads).
        hash: `etag:${staged.etag.replace(/"/g, '')}`,
        tags: [...header.tags],
        flags: { ...header.flags },
        ...((header.contentType ?? staged.contentType) ? { contentType: header.contentType ?? staged.contentType } : {}),
      };
      const cur = await this.headObject(objectKey);
      if (cur?.header && !isNewer(full.version, cur.header)) {
        // Keep the staged object: the coordinator re-stamps a newer version and commits the same upload again.
        return { applied: false, current: cur.header.version, size: staged.size };
      }
      const { meta, contentType } = encodeMeta(full, false);
      const markedAt = cur?.header ? undefined : await this.markers.mark(ns, key); // as in put
      try {
        await this.client.send(
          new CopyObjectCommand({
            Bucket: this.bucket,
            Key: objectKey,
            CopySource: `${this.bucket}/${stagingKey.split('/').map(encodeURIComponent).join('/')}`,
            CopySourceIfMatch: staged.etag,
            MetadataDirective: 'REPLACE',
            Metadata: meta,
            ContentType: contentType,
            TaggingDirective: 'REPLACE',
            ...(cur ? { IfMatch: cur.etag } : { IfNoneMatch: '*' }),
          }),
        );
      } catch (e) {
        // 412: the target changed (a concurrent writer); 404: the target was deleted meanwhile (or the staging
        // object vanished). Re-HEAD both and decide again.
        if (!isConflict(e) && !isNotFound(e)) throw this.unavailable(e);
        await backoff(attempt);
        continue;
      }
      if (markedAt !== undefined) await this.markers.settle(ns, key, markedAt);
      await this.settleCommitted(uploadId, stagingKey);
      return { applied: true, current: full.version, size: staged.size };
    }
    throw this.contention(objectKey);
  }

  // ---- multipart uploads (tiers/multipart.ts): S3's own, on the staging key ------------------------------

  /** CreateMultipartUpload on the staging key, then the record naming S3's UploadId. */
  async createMultipartUpload(upload: NewUpload, expiresInSec: number): Promise<{ expiresAt: number }> {
    const stagingKey = s3StagingKey(this.prefix, upload.uploadId);
    const now = Date.now();
    const expiresIn = await this.withinCredentials(uploadUrlSeconds(expiresInSec), now);
    const ct = upload.contentType && isHeaderValue(upload.contentType) ? upload.contentType : undefined;
    let id: string | undefined;
    try {
      const created = await this.client.send(
        new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: stagingKey, ...(ct ? { ContentType: ct } : {}) }),
      );
      id = created.UploadId;
    } catch (e) {
      throw this.unavailable(e);
    }
    if (!id) throw this.unavailable(new Error('CreateMultipartUpload answered without an UploadId'));
    const stored: StoredUpload = { ...openUpload(upload, now, expiresIn), multipart: { id } };
    try {
      await this.createRecord(stored);
    } catch (e) {
      await this.client
        .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: stagingKey, UploadId: id }))
        .catch(() => {});
      throw e;
    }
    return { expiresAt: stored.urlExpiresAt };
  }

  /** Presigned UploadPart URLs, lasting no longer than the upload's own URL lifetime. */
  async presignParts(
    uploadId: string,
    partNumbers: readonly number[],
    accept: (r: UploadRecord) => boolean,
    expiresInSec: number,
  ): Promise<PartUrl[] | undefined> {
    const u = (await this.readUpload(uploadId))?.upload;
    const now = Date.now();
    if (!u?.multipart || u.state !== 'open' || now >= u.urlExpiresAt || !accept(recordOf(u))) return undefined;
    const left = Math.max(1, Math.floor((u.urlExpiresAt - now) / 1000));
    const expiresIn = await this.withinCredentials(Math.min(uploadUrlSeconds(expiresInSec), left), now);
    const Key = s3StagingKey(this.prefix, uploadId);
    const UploadId = u.multipart.id;
    return Promise.all(
      partNumbers.map(async (PartNumber) => ({
        partNumber: PartNumber,
        url: await this.presign(new UploadPartCommand({ Bucket: this.bucket, Key, UploadId, PartNumber }), expiresIn),
        method: 'PUT' as const,
        headers: {},
        expiresAt: now + expiresIn * 1000,
      })),
    );
  }

  /** CompleteMultipartUpload into the staging object, unless an earlier completion of the claim assembled it. */
  async completeParts(claim: UploadClaim, parts: readonly CompletedPart[]): Promise<void> {
    checkPartList(parts);
    const { uploadId } = claim.record;
    const u = (await this.readUpload(uploadId))?.upload;
    if (!u?.multipart)
      throw new ValidationError('body.parts', 'this upload is not a multipart upload: complete it without parts');
    const Key = s3StagingKey(this.prefix, uploadId);
    const staged = await this.headObject(Key);
    if (staged && !staged.completedMarker) return;
    const Parts = parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag }));
    try {
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId: u.multipart.id, MultipartUpload: { Parts } }),
      );
    } catch (e) {
      const name = errName(e);
      // S3's refusals of the part list itself are the caller's to fix; the list was checked for order already.
      if (name === 'InvalidPart' || name === 'InvalidPartOrder' || name === 'EntityTooSmall')
        throw new ValidationError('body.parts', `S3 refused the parts (${name}): ${(e as Error).message}`);
      if (name === 'NoSuchUpload') throw uploadNotFound(uploadId);
      throw this.unavailable(e);
    }
  }

  /** AbortMultipartUpload (S3 frees the parts), then the record is closed and a marker replaces staged bytes. */
  async abortUpload(claim: UploadClaim): Promise<void> {
    const { uploadId } = claim.record;
    const u = (await this.readUpload(uploadId))?.upload;
    const Key = s3StagingKey(this.prefix, uploadId);
    if (u?.multipart) {
      try {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId: u.multipart.id }));
      } catch (e) {
        if (errName(e) !== 'NoSuchUpload' && !isNotFound(e)) throw this.unavailable(e);
      }
    }
    await this.settleCommitted(uploadId, Key);
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
    if (!res) return undefined;
    const size = res.ContentLength ?? 0;
    const header = decodeStored(res.Metadata, size);
    return {
      ...(header ? { header } : {}),
      etag: res.ETag ?? '',
      size,
      ...(res.ContentType ? { contentType: res.ContentType } : {}),
      ...(res.Metadata?.[META_UPLOAD] === 'completed' ? { completedMarker: true } : {}),
    };
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

  /** Writes a new upload record. Ids are random: a record already there means a reused id, which must not take over another upload. */
  private async createRecord(stored: StoredUpload): Promise<void> {
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: s3UploadRecordKey(this.prefix, stored.uploadId),
          Body: encodeUpload(stored),
          ContentType: JSON_TYPE,
          IfNoneMatch: '*',
        }),
      );
    } catch (e) {
      throw isConflict(e) ? new ValidationError('uploadId', 'this upload id is taken') : this.unavailable(e);
    }
  }

  /** The upload's record and the ETag it was read at; undefined when there is none (or it is not a record). */
  private async readUpload(uploadId: string): Promise<{ upload: StoredUpload; etag: string } | undefined> {
    const recordKey = s3UploadRecordKey(this.prefix, uploadId);
    const res = await this.unlessNotFound(this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: recordKey })));
    if (!res) return undefined;
    let text: string;
    try {
      text = await res.Body!.transformToString();
    } catch (e) {
      throw this.unavailable(e);
    }
    const upload = decodeUpload(text, uploadId);
    return upload ? { upload, etag: res.ETag ?? '' } : undefined;
  }

  /**
   * Read-modify-write of an upload's record, made atomic by `If-Match` on the ETag it was read at (a 412 means
   * another request changed it: read again and decide again). Returns the record written, or undefined when there
   * is none or `change` declines.
   */
  private async changeUpload(
    uploadId: string,
    change: (u: StoredUpload) => StoredUpload | undefined,
  ): Promise<StoredUpload | undefined> {
    const recordKey = s3UploadRecordKey(this.prefix, uploadId);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const cur = await this.readUpload(uploadId);
      if (!cur) return undefined;
      const next = change(cur.upload);
      if (!next) return undefined;
      try {
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: recordKey,
            Body: encodeUpload(next),
            ContentType: JSON_TYPE,
            IfMatch: cur.etag,
          }),
        );
        return next;
      } catch (e) {
        if (!isConflict(e) && !isNotFound(e)) throw this.unavailable(e);
        await backoff(attempt);
      }
    }
    throw this.contention(recordKey);
  }

  /**
   * After a commit: the record says completed (no claim can take it again) and a small marker replaces the staged
   * bytes (the upload URL's `If-None-Match: *` then refuses a second PUT; the `_uploads/` lifecycle rule removes
   * both after the URL expired). The value is already in place, so a failure here is not the caller's: the staged
   * bytes then stay (the URL still cannot PUT over them) and the record stays claimed by this completion.
   */
  private async settleCommitted(uploadId: string, stagingKey: string): Promise<void> {
    try {
      await this.changeUpload(uploadId, (u) => (u.state === 'claimed' ? completed(u) : undefined));
      const marker = {
        Bucket: this.bucket,
        Key: stagingKey,
        Body: COMPLETED_MARKER_BODY,
        Metadata: { [META_UPLOAD]: 'completed' },
      };
      await this.client.send(new PutObjectCommand(marker));
    } catch {
      // Best effort, see above.
    }
  }

  /**
   * `seconds`, shortened to what the signing credentials have left. A URL signed with temporary credentials (a
   * Lambda's role, an instance profile) stops working when they expire, whatever its X-Amz-Expires says
   * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html, "Expiration time for
   * presigned URLs"), so the expiry we report and the upload's completion deadline would otherwise be lies.
   * Credentials without a known expiry (long-term keys, Lambda's environment credentials) leave it unchanged.
   */
  private async withinCredentials(seconds: number, now: number): Promise<number> {
    let expiration: Date | undefined;
    try {
      expiration = (await this.client.config.credentials()).expiration;
    } catch (e) {
      throw this.unavailable(e);
    }
    if (!expiration) return seconds;
    const left = Math.floor((expiration.getTime() - now) / 1000) - CREDENTIAL_MARGIN_SECONDS;
    return Math.max(1, Math.min(seconds, left));
  }

  private async presign(command: GetObjectCommand | PutObjectCommand | UploadPartCommand, expiresIn: number): Promise<string> {
    // SDK >= 3.729 adds flexible-checksum parameters at presign time (for PUT: the CRC32 of an *empty* body),
    // which real S3 then enforces against the uploaded bytes. Drop them from the request before it is signed.
    const stack = command.middlewareStack as unknown as { addRelativeTo(mw: unknown, opts: Record<string, unknown>): void };
    stack.addRelativeTo(
      (next: (args: { request?: unknown }) => Promise<unknown>) => async (args: { request?: unknown }) => {
        const headers = (args.request as { headers?: Record<string, string> } | undefined)?.headers;
        if (headers) {
          for (const h of Object.keys(headers)) {
            const l = h.toLowerCase();
            if (l.startsWith('x-amz-checksum-') || l === 'x-amz-sdk-checksum-algorithm') delete headers[h];
          }
        }
        return next(args);
      },
      { relation: 'before', toMiddleware: 'presignInterceptMiddleware', name: 'strataStripPresignChecksums', override: true },
    );
    try {
      // getSignedUrl is generic over one command type; the union of three does not infer, each alone does.
      return await getSignedUrl(this.client, command as GetObjectCommand, { expiresIn });
    } catch (e) {
      throw this.unavailable(e);
    }
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

/** Whole seconds in 1..7 days, never past the entry's expiry. */
function presignSeconds(requested: number, expiresAt: number | null, now: number): number {
  let s = Number.isFinite(requested) ? Math.floor(requested) : 900;
  if (expiresAt !== null) s = Math.min(s, Math.floor((expiresAt - now) / 1000));
  return Math.max(1, Math.min(MAX_PRESIGN_SECONDS, s));
}

function uploadNotFound(uploadId: string): NotFoundError {
  return new NotFoundError(`upload '${uploadId}' not found (nothing was uploaded, it expired, or it was already completed)`, {
    uploadId,
  });
}

function discard(body: unknown): void {
  const b = body as { destroy?: () => void } | undefined;
  try {
    b?.destroy?.();
  } catch {
    /* ignore */
  }
}

function backoff(attempt: number): Promise<void> {
  const ms = Math.random() * Math.min(200, 10 * 2 ** attempt);
  return new Promise((r) => setTimeout(r, ms));
}
