/**
 * The S3 tier's presigned uploads (the Presigning and MultipartPresigning capabilities of S3Tier, which delegates
 * here): the upload record next to each staged upload (`_uploads/<id>.json`, changed with If-Match), the presigned
 * PUT or S3 multipart upload that stages the bytes, and the commit that copies them into place as a versioned write
 * (CopyObject, or a multipart copy above the copy threshold: s3-multipart-copy.ts). Apart from s3-tier.ts because
 * an upload's lifecycle is a job of its own; it shares the tier's client, HEAD, order markers and signing.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EntryHeader, WriteOutcome } from '../model/entry.js';
import { isNewer } from '../model/entry.js';
import { checkPartList, type CompletedPart, type PartUrl } from './multipart.js';
import { backoff, MAX_CAS_ATTEMPTS } from './s3-cas.js';
import { errName, isConflict, isNotFound } from './s3-errors.js';
import { encodeMeta, isHeaderValue, META_UPLOAD, type HeadResult } from './s3-metadata.js';
import {
  checkCopyPartBytes,
  copyInParts,
  copySource,
  DEFAULT_COPY_PART_BYTES,
  MAX_COPY_OBJECT_BYTES,
  type TargetCondition,
} from './s3-multipart-copy.js';
import type { S3OrderMarkers } from './s3-order-markers.js';
import type { S3Presigner } from './s3-presign.js';
import { s3CommitRequestKey, s3ObjectKey, s3StagingKey, s3UploadRecordKey } from './storage-key.js';
import type { NewUpload, PresignedUrl, UploadClaim, UploadRecord } from './tier.js';
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
const COMPLETED_MARKER_BODY = 'strata:upload-completed';
const JSON_TYPE = 'application/json';

/** What the uploads share with their tier. */
export interface S3UploadsDeps {
  client: S3Client;
  bucket: string;
  prefix: string;
  markers: S3OrderMarkers;
  presigner: S3Presigner;
  /** The tier's HEAD: header + ETag, undefined on 404. */
  head(objectKey: string): Promise<HeadResult | undefined>;
  unavailable(e: unknown): Error;
  contention(objectKey: string): Error;
  /** S3TierOptions.copyThresholdBytes and copyPartSizeBytes, validated here. */
  copyThresholdBytes?: number;
  copyPartSizeBytes?: number;
}

export class S3Uploads {
  private readonly d: S3UploadsDeps & { copyThresholdBytes: number; copyPartSizeBytes: number };

  constructor(deps: S3UploadsDeps) {
    const copyThresholdBytes = deps.copyThresholdBytes ?? MAX_COPY_OBJECT_BYTES;
    if (!(Number.isInteger(copyThresholdBytes) && copyThresholdBytes >= 5 * MiB && copyThresholdBytes <= MAX_COPY_OBJECT_BYTES))
      throw new ValidationError(
        'copyThresholdBytes',
        'must be a whole number of bytes from 5 MiB (S3 copies byte ranges of larger sources only) to 5 GiB (the most CopyObject copies)',
      );
    const copyPartSizeBytes = deps.copyPartSizeBytes ?? DEFAULT_COPY_PART_BYTES;
    checkCopyPartBytes('copyPartSizeBytes', copyPartSizeBytes);
    this.d = { ...deps, copyThresholdBytes, copyPartSizeBytes };
  }

  /**
   * Writes the upload's record (`_uploads/<id>.json`) and presigns a PUT of the staging object with
   * `If-None-Match: *` signed in: the URL creates the staging object once, and refuses any later PUT while
   * something is there (the bytes, then the completed-marker that replaces them).
   */
  async presignUpload(upload: NewUpload, expiresInSec: number): Promise<PresignedUrl> {
    const stagingKey = s3StagingKey(this.d.prefix, upload.uploadId);
    const now = Date.now();
    // Capped before the record is written, so its completion deadline follows the URL's real lifetime.
    const expiresIn = await this.d.presigner.withinCredentials(uploadUrlSeconds(expiresInSec), now);
    await this.createRecord(openUpload(upload, now, expiresIn));
    const ct = upload.contentType && isHeaderValue(upload.contentType) ? upload.contentType : undefined;
    const put = new PutObjectCommand({
      Bucket: this.d.bucket,
      Key: stagingKey,
      IfNoneMatch: '*',
      ...(ct ? { ContentType: ct } : {}),
    });
    const url = await this.d.presigner.url(put, expiresIn);
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
    const stagingKey = s3StagingKey(this.d.prefix, uploadId);
    const objectKey = s3ObjectKey(this.d.prefix, ns, key);
    if (!committable((await this.readUpload(uploadId))?.upload, ns, key)) throw uploadNotFound(uploadId);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const staged = await this.d.head(stagingKey);
      if (!staged || staged.completedMarker) throw uploadNotFound(uploadId);
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
      const cur = await this.d.head(objectKey);
      if (cur?.header && !isNewer(full.version, cur.header)) {
        // Keep the staged object: the coordinator re-stamps a newer version and commits the same upload again.
        return { applied: false, current: cur.header.version, size: staged.size };
      }
      const { meta, contentType } = encodeMeta(full, false);
      const markedAt = cur?.header ? undefined : await this.d.markers.mark(ns, key); // as in put
      try {
        const condition: TargetCondition = cur ? { IfMatch: cur.etag } : { IfNoneMatch: '*' };
        if (staged.size > this.d.copyThresholdBytes) {
          await copyInParts({
            client: this.d.client,
            bucket: this.d.bucket,
            source: { key: stagingKey, etag: staged.etag, size: staged.size },
            target: { key: objectKey, metadata: meta, contentType, condition },
            partBytes: this.d.copyPartSizeBytes,
          });
        } else {
          await this.d.client.send(
            new CopyObjectCommand({
              Bucket: this.d.bucket,
              Key: objectKey,
              CopySource: copySource(this.d.bucket, stagingKey),
              CopySourceIfMatch: staged.etag,
              MetadataDirective: 'REPLACE',
              Metadata: meta,
              ContentType: contentType,
              TaggingDirective: 'REPLACE',
              ...condition,
            }),
          );
        }
      } catch (e) {
        // 412: the target changed (a concurrent writer) or the staging object did; 409: a concurrent conditional
        // write (S3 then wants the multipart upload started again, which the next attempt does); 404: the target was
        // deleted meanwhile (or the staging object vanished). Re-HEAD both and decide again.
        if (!isConflict(e) && !isNotFound(e)) throw this.d.unavailable(e);
        await backoff(attempt);
        continue;
      }
      if (markedAt !== undefined) await this.d.markers.settle(ns, key, markedAt);
      await this.settleCommitted(uploadId, stagingKey);
      return { applied: true, current: full.version, size: staged.size };
    }
    throw this.d.contention(objectKey);
  }

  // ---- asynchronous completions (upload-record.ts UploadRecords) -----------------------------------------

  async stagedBytes(uploadId: string): Promise<number | undefined> {
    const staged = await this.d.head(s3StagingKey(this.d.prefix, uploadId));
    return staged && !staged.completedMarker ? staged.size : undefined;
  }

  async readUploadRecord(uploadId: string): Promise<StoredUpload | undefined> {
    return (await this.readUpload(uploadId))?.upload;
  }

  changeUploadRecord(uploadId: string, change: (u: StoredUpload) => StoredUpload | undefined): Promise<StoredUpload | undefined> {
    return this.changeUpload(uploadId, change);
  }

  async requestCommit(uploadId: string, body: string): Promise<void> {
    try {
      await this.d.client.send(
        new PutObjectCommand({
          Bucket: this.d.bucket,
          Key: s3CommitRequestKey(this.d.prefix, uploadId),
          Body: body,
          ContentType: JSON_TYPE,
        }),
      );
    } catch (e) {
      throw this.d.unavailable(e);
    }
  }

  // ---- multipart uploads (tiers/multipart.ts): S3's own, on the staging key ------------------------------

  /** CreateMultipartUpload on the staging key, then the record naming S3's UploadId. */
  async createMultipartUpload(upload: NewUpload, expiresInSec: number): Promise<{ expiresAt: number }> {
    const stagingKey = s3StagingKey(this.d.prefix, upload.uploadId);
    const now = Date.now();
    const expiresIn = await this.d.presigner.withinCredentials(uploadUrlSeconds(expiresInSec), now);
    const ct = upload.contentType && isHeaderValue(upload.contentType) ? upload.contentType : undefined;
    let id: string | undefined;
    try {
      const created = await this.d.client.send(
        new CreateMultipartUploadCommand({ Bucket: this.d.bucket, Key: stagingKey, ...(ct ? { ContentType: ct } : {}) }),
      );
      id = created.UploadId;
    } catch (e) {
      throw this.d.unavailable(e);
    }
    if (!id) throw this.d.unavailable(new Error('CreateMultipartUpload answered without an UploadId'));
    const stored: StoredUpload = { ...openUpload(upload, now, expiresIn), multipart: { id } };
    try {
      await this.createRecord(stored);
    } catch (e) {
      await this.d.client
        .send(new AbortMultipartUploadCommand({ Bucket: this.d.bucket, Key: stagingKey, UploadId: id }))
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
    const expiresIn = await this.d.presigner.withinCredentials(Math.min(uploadUrlSeconds(expiresInSec), left), now);
    const Key = s3StagingKey(this.d.prefix, uploadId);
    const UploadId = u.multipart.id;
    return Promise.all(
      partNumbers.map(async (PartNumber) => ({
        partNumber: PartNumber,
        url: await this.d.presigner.url(new UploadPartCommand({ Bucket: this.d.bucket, Key, UploadId, PartNumber }), expiresIn),
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
    const Key = s3StagingKey(this.d.prefix, uploadId);
    const staged = await this.d.head(Key);
    if (staged && !staged.completedMarker) return;
    const Parts = parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag }));
    try {
      await this.d.client.send(
        new CompleteMultipartUploadCommand({ Bucket: this.d.bucket, Key, UploadId: u.multipart.id, MultipartUpload: { Parts } }),
      );
    } catch (e) {
      const name = errName(e);
      // S3's refusals of the part list itself are the caller's to fix; the list was checked for order already.
      if (name === 'InvalidPart' || name === 'InvalidPartOrder' || name === 'EntityTooSmall')
        throw new ValidationError('body.parts', `S3 refused the parts (${name}): ${(e as Error).message}`);
      if (name === 'NoSuchUpload') throw uploadNotFound(uploadId);
      throw this.d.unavailable(e);
    }
  }

  /** AbortMultipartUpload (S3 frees the parts), then the record is closed and a marker replaces staged bytes. */
  async abortUpload(claim: UploadClaim): Promise<void> {
    const { uploadId } = claim.record;
    const u = (await this.readUpload(uploadId))?.upload;
    const Key = s3StagingKey(this.d.prefix, uploadId);
    if (u?.multipart) {
      try {
        await this.d.client.send(new AbortMultipartUploadCommand({ Bucket: this.d.bucket, Key, UploadId: u.multipart.id }));
      } catch (e) {
        if (errName(e) !== 'NoSuchUpload' && !isNotFound(e)) throw this.d.unavailable(e);
      }
    }
    await this.settleCommitted(uploadId, Key);
  }

  /** Writes a new upload record. Ids are random: a record already there means a reused id, which must not take over another upload. */
  private async createRecord(stored: StoredUpload): Promise<void> {
    try {
      await this.d.client.send(
        new PutObjectCommand({
          Bucket: this.d.bucket,
          Key: s3UploadRecordKey(this.d.prefix, stored.uploadId),
          Body: encodeUpload(stored),
          ContentType: JSON_TYPE,
          IfNoneMatch: '*',
        }),
      );
    } catch (e) {
      throw isConflict(e) ? new ValidationError('uploadId', 'this upload id is taken') : this.d.unavailable(e);
    }
  }

  /** The upload's record and the ETag it was read at; undefined when there is none (or it is not a record). */
  private async readUpload(uploadId: string): Promise<{ upload: StoredUpload; etag: string } | undefined> {
    const recordKey = s3UploadRecordKey(this.d.prefix, uploadId);
    let res;
    try {
      res = await this.d.client.send(new GetObjectCommand({ Bucket: this.d.bucket, Key: recordKey }));
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw this.d.unavailable(e);
    }
    let text: string;
    try {
      text = await res.Body!.transformToString();
    } catch (e) {
      throw this.d.unavailable(e);
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
    const recordKey = s3UploadRecordKey(this.d.prefix, uploadId);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const cur = await this.readUpload(uploadId);
      if (!cur) return undefined;
      const next = change(cur.upload);
      if (!next) return undefined;
      try {
        await this.d.client.send(
          new PutObjectCommand({
            Bucket: this.d.bucket,
            Key: recordKey,
            Body: encodeUpload(next),
            ContentType: JSON_TYPE,
            IfMatch: cur.etag,
          }),
        );
        return next;
      } catch (e) {
        if (!isConflict(e) && !isNotFound(e)) throw this.d.unavailable(e);
        await backoff(attempt);
      }
    }
    throw this.d.contention(recordKey);
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
        Bucket: this.d.bucket,
        Key: stagingKey,
        Body: COMPLETED_MARKER_BODY,
        Metadata: { [META_UPLOAD]: 'completed' },
      };
      await this.d.client.send(new PutObjectCommand(marker));
    } catch {
      // Best effort, see above.
    }
  }
}

function uploadNotFound(uploadId: string): NotFoundError {
  return new NotFoundError(`upload '${uploadId}' not found (nothing was uploaded, it expired, or it was already completed)`, {
    uploadId,
  });
}
