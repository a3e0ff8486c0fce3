/**
 * Multipart uploads through presigned part URLs: for values too big for one presigned PUT, or of unknown length
 * (a stream). The rules are S3's, which the folder tier follows too, so a client that works against `npm start`
 * works against AWS (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html, "Amazon S3 multipart upload
 * limits"): part numbers 1..10,000, each part 5 MiB to 5 GiB except the last (no minimum), and completion names
 * the parts by number and ETag in ascending order (CompleteMultipartUpload,
 * https://docs.aws.amazon.com/goto/SdkForKotlin/s3-2006-03-01/CompleteMultipartUpload).
 *
 * The completed parts become the upload's staged object; the commit that follows is the single-PUT upload's
 * (Presigning.commitUpload through Coordinator.commitUpload): a multipart upload differs only in how the bytes
 * arrive.
 */
import { ValidationError } from '../errors.js';
import type { NewUpload, PresignedUrl, Presigning, Tier, UploadClaim, UploadRecord } from './tier.js';

const MiB = 1024 * 1024;
/** Smallest part but the last. */
export const MIN_PART_BYTES = 5 * MiB;
/** Largest part. */
export const MAX_PART_BYTES = 5 * 1024 * MiB;
/** Most parts in one upload (and the highest part number). */
export const MAX_PARTS = 10_000;

/** A part as completion names it: its number and the ETag its PUT answered. */
export interface CompletedPart {
  partNumber: number;
  etag: string;
}

/** A part URL: PUT the part's bytes there, with `headers`; the answer's `etag` header is the part's ETag. */
export interface PartUrl extends PresignedUrl {
  partNumber: number;
}

/** A presigning tier that also takes multipart uploads (S3, the local folder). */
export interface MultipartPresigning {
  /** Records a multipart upload (no URL yet: {@link presignParts} hands them out); returns when it expires. */
  createMultipartUpload(upload: NewUpload, expiresInSec: number): Promise<{ expiresAt: number }>;
  /**
   * URLs for these parts of the upload when `accept(record)` holds and it is an open multipart upload whose URLs
   * have not expired; undefined otherwise (unknown, not the caller's, completed or aborted: not told apart).
   */
  presignParts(
    uploadId: string,
    partNumbers: readonly number[],
    accept: (r: UploadRecord) => boolean,
    expiresInSec: number,
  ): Promise<PartUrl[] | undefined>;
  /**
   * Assembles the claimed upload's parts, in order, into its staged object (idempotent: a completion retried after
   * a failed commit finds them assembled). VALIDATION_FAILED for a part that is missing, has another ETag, or is
   * too small while not the last.
   */
  completeParts(claim: UploadClaim, parts: readonly CompletedPart[]): Promise<void>;
  /** Ends the claimed upload without a value: its parts and staged bytes are dropped, and it cannot be completed. */
  abortUpload(claim: UploadClaim): Promise<void>;
}

export function supportsMultipart(t: Tier & Presigning): t is Tier & Presigning & MultipartPresigning {
  return typeof (t as Partial<MultipartPresigning>).presignParts === 'function';
}

/** Checks a completion's part list against the rules above (VALIDATION_FAILED naming the offending entry). */
export function checkPartList(parts: readonly CompletedPart[]): void {
  if (parts.length === 0) throw new ValidationError('body.parts', 'a multipart upload completes with at least one part');
  if (parts.length > MAX_PARTS) throw new ValidationError('body.parts', `at most ${MAX_PARTS} parts`);
  parts.forEach((p, i) => {
    if (i > 0 && p.partNumber <= parts[i - 1]!.partNumber)
      throw new ValidationError(
        `body.parts[${i}].partNumber`,
        'parts are listed in ascending order of partNumber, each once (S3 CompleteMultipartUpload)',
      );
  });
}

/** Checks the sizes of the parts a completion names, in order: every part but the last at least MIN_PART_BYTES. */
export function checkPartSizes(sizes: readonly number[]): void {
  sizes.forEach((size, i) => {
    if (i < sizes.length - 1 && size < MIN_PART_BYTES)
      throw new ValidationError(
        `body.parts[${i}]`,
        `part is ${size} bytes; every part but the last must be at least ${MIN_PART_BYTES} bytes (5 MiB)`,
        { size, minimum: MIN_PART_BYTES },
      );
  });
}
