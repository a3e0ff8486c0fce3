/**
 * Server-side copies of objects too large for one CopyObject: how the S3 tier commits a completed upload above its
 * copy threshold (S3Tier.commitUpload). The bytes never leave S3; the copy is a multipart upload on the target key
 * whose parts are byte ranges of the source (UploadPartCopy), completed with the target's precondition, so it is
 * as atomic as the CopyObject it stands in for: the object appears whole at completion, or not at all.
 *
 * AWS's rules, each written into test/unit/s3-multipart-copy.test.ts (LocalStack checks none of them):
 * - CopyObject copies at most 5 GB in one atomic action; larger objects need UploadPartCopy
 *   (https://docs.aws.amazon.com/sdkfornet/v3/apidocs/items/S3/MS3CopyObjectCopyObjectRequest.html,
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/CopyingObjctsMPUapi.html).
 * - Multipart limits (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html): part numbers 1..10,000,
 *   parts 5 MiB to 5 GiB except the last (no minimum), objects of at most 48.8 TiB (10,000 parts of 5 GiB; the page
 *   said 5 TiB before, which fits with parts of 525 MiB).
 * - CopySourceRange is `bytes=first-last`, zero-based and inclusive, and a range may be copied only from a source
 *   above 5 MB (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-upload-part-copy-request/copy-source-range.html).
 * - x-amz-copy-source-if-match copies only while the source has that ETag, else 412
 *   (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-upload-part-copy-request/copy-source-if-match.html):
 *   a staging object replaced mid-copy fails the copy instead of mixing two objects' bytes.
 * - CompleteMultipartUpload takes If-Match (412 when the target's ETag differs) and If-None-Match: * (412 when the
 *   key exists); a 409 ConditionalRequestConflict means a concurrent write, and the multipart upload must be started
 *   again (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-complete-multipart-upload-request/if-none-match.html,
 *   https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-complete-multipart-upload-request,
 *   IfMatch). CreateMultipartUpload and UploadPartCopy accept no such precondition
 *   (https://docs.amazonaws.cn/en_us/AmazonS3/latest/userguide/conditional-writes-enforce.html), so the completion
 *   is the one place that decides, and a failed copy starts from CreateMultipartUpload again.
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCopyCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { StrataError, ValidationError } from '../errors.js';
import { mapLimit } from '../util/concurrency.js';
import { MAX_PART_BYTES, MAX_PARTS, MIN_PART_BYTES } from './multipart.js';

const MiB = 1024 * 1024;

/** The largest object one CopyObject copies (5 GiB). */
export const MAX_COPY_OBJECT_BYTES = 5 * 1024 * MiB;
/** The largest object S3 stores: 10,000 parts of 5 GiB (48.8 TiB). */
export const MAX_OBJECT_BYTES = MAX_PARTS * MAX_PART_BYTES;
/** Part size of a copy unless the object needs larger parts to fit 10,000: few requests, each well below 5 GiB. */
export const DEFAULT_COPY_PART_BYTES = 512 * MiB;
/** UploadPartCopy requests in flight per copy. */
export const COPY_CONCURRENCY = 8;

/** One part of a copy: the source's bytes first..last (inclusive), as part `partNumber`. */
export interface CopyPart {
  partNumber: number;
  first: number;
  last: number;
}

/** The precondition of the write the copy stands in for: the target's current ETag, or that there is none. */
export type TargetCondition = { IfMatch: string } | { IfNoneMatch: '*' };

export interface PartCopy {
  client: S3Client;
  bucket: string;
  /** The object copied, with the ETag it must keep until the last part is copied. */
  source: { key: string; etag: string; size: number };
  /** Where to, with the metadata and Content-Type the object gets (CopyObject's MetadataDirective REPLACE). */
  target: { key: string; metadata: Record<string, string>; contentType: string; condition: TargetCondition };
  /** Preferred part size (raised when the object needs larger parts to fit in 10,000). */
  partBytes: number;
  /** @default COPY_CONCURRENCY */
  concurrency?: number;
}

/** Checks a part size an operator configures: S3's part limits. */
export function checkCopyPartBytes(field: string, bytes: number): void {
  if (!(Number.isInteger(bytes) && bytes >= MIN_PART_BYTES && bytes <= MAX_PART_BYTES))
    throw new ValidationError(field, `must be a whole number of bytes from 5 MiB to 5 GiB (S3's part size limits)`);
}

/**
 * The parts of a copy of `size` bytes: `preferredPartBytes` each (the last takes the rest), or, when that would
 * need more than 10,000 parts, the smallest whole number of MiB that fits. PAYLOAD_TOO_LARGE above S3's largest
 * object.
 */
export function planCopyParts(size: number, preferredPartBytes: number): CopyPart[] {
  if (size > MAX_OBJECT_BYTES)
    throw new StrataError('PAYLOAD_TOO_LARGE', `S3 stores objects of at most ${MAX_OBJECT_BYTES} bytes`, {
      limit: MAX_OBJECT_BYTES,
      size,
    });
  const partBytes = Math.max(preferredPartBytes, Math.ceil(size / MAX_PARTS / MiB) * MiB);
  const parts: CopyPart[] = [];
  for (let first = 0; first < size; first += partBytes)
    parts.push({ partNumber: parts.length + 1, first, last: Math.min(size, first + partBytes) - 1 });
  return parts;
}

/** `x-amz-copy-source`: the bucket and the key, each path segment URL-encoded. */
export function copySource(bucket: string, key: string): string {
  return `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

/**
 * Copies `source` to `target` in parts, under the target's precondition (checked at completion). Rejects with S3's
 * own error (412 or 409 when the target or the source changed, 404 when either vanished: the caller decides
 * again); on any failure after the multipart upload was created, it is aborted once no part copy is in flight
 * (a part still being copied when the abort lands could otherwise outlive it and keep its storage).
 */
export async function copyInParts(p: PartCopy): Promise<void> {
  const { client, bucket, source, target } = p;
  const parts = planCopyParts(source.size, p.partBytes);
  const created = await client.send(
    new CreateMultipartUploadCommand({
      Bucket: bucket,
      Key: target.key,
      Metadata: target.metadata,
      ContentType: target.contentType,
    }),
  );
  const UploadId = created.UploadId;
  if (!UploadId) throw new Error('CreateMultipartUpload answered without an UploadId');
  try {
    const CopySource = copySource(bucket, source.key);
    let failure: { error: unknown } | undefined;
    const etags = await mapLimit(parts, p.concurrency ?? COPY_CONCURRENCY, async (part) => {
      if (failure) return '';
      try {
        const res = await client.send(
          new UploadPartCopyCommand({
            Bucket: bucket,
            Key: target.key,
            UploadId,
            PartNumber: part.partNumber,
            CopySource,
            CopySourceIfMatch: source.etag,
            CopySourceRange: `bytes=${part.first}-${part.last}`,
          }),
        );
        const etag = res.CopyPartResult?.ETag;
        if (!etag) throw new Error(`UploadPartCopy of part ${part.partNumber} answered without an ETag`);
        return etag;
      } catch (error) {
        failure ??= { error };
        return '';
      }
    });
    if (failure) throw failure.error;
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: target.key,
        UploadId,
        MultipartUpload: { Parts: parts.map((part, i) => ({ PartNumber: part.partNumber, ETag: etags[i] })) },
        ...target.condition,
      }),
    );
  } catch (e) {
    // Best effort: after a 409 S3 may have dropped the upload already, and the bucket's abort-incomplete rule
    // removes whatever an abort that failed leaves.
    await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: target.key, UploadId })).catch(() => {});
    throw e;
  }
}
