/**
 * Commits of uploads above the S3 tier's copy threshold (core/tiers/s3-multipart-copy.ts): a multipart upload on the
 * entry's key whose parts are UploadPartCopy ranges of the staging object, completed under the precondition the
 * CopyObject carries. AWS's rules are checked on the requests the tier sends: LocalStack checks none of them, and
 * nothing local holds a 6 GiB or 5 TiB object, so the S3 client here answers from a small in-memory stand-in
 * (test/integration/s3-tier.test.ts commits real bytes this way against LocalStack). Each rule's page is cited
 * next to its assertion.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { StrataError, TierUnavailableError, ValidationError } from '../../core/errors.js';
import { contentHash } from '../../core/model/keys.js';
import { MAX_PART_BYTES, MAX_PARTS, MIN_PART_BYTES } from '../../core/tiers/multipart.js';
import {
  COPY_CONCURRENCY,
  MAX_COPY_OBJECT_BYTES,
  MAX_OBJECT_BYTES,
  planCopyParts,
  type CopyPart,
} from '../../core/tiers/s3-multipart-copy.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { s3ObjectKey, s3OrderMarkerKey, s3StagingKey, s3UploadRecordKey } from '../../core/tiers/storage-key.js';
import { claimed, encodeUpload, openUpload } from '../../core/tiers/upload-record.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const TiB = 1024 * GiB;
const BUCKET = 'stand-in';

interface Sent {
  command: string;
  input: Record<string, unknown>;
}
interface StoredObject {
  etag: string;
  size: number;
  body?: string;
  metadata?: Record<string, string>;
  contentType?: string;
}

function s3Error(name: string, status: number): Error {
  return Object.assign(new Error(name), { name, $metadata: { httpStatusCode: status } });
}

/**
 * An S3 stand-in answering the commands a commit sends, with S3's conditions (If-Match, If-None-Match,
 * x-amz-copy-source-if-match), from memory. `sent` records every request in order; `onPartCopy` runs before each
 * UploadPartCopy is answered (a test fails or delays parts there).
 */
class StandInS3 {
  readonly objects = new Map<string, StoredObject>();
  readonly uploads = new Map<string, { key: string; parts: Map<number, number> }>();
  readonly sent: Sent[] = [];
  inFlight = 0;
  maxInFlight = 0;
  onPartCopy?: (input: Record<string, unknown>) => Promise<void> | void;
  onComplete?: (input: Record<string, unknown>) => Promise<void>;
  private seq = 0;
  readonly client: S3Client;

  constructor() {
    this.client = new S3Client({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
    this.client.middlewareStack.add(
      (_next, context) => async (args) => {
        const input = { ...(args.input as Record<string, unknown>) };
        this.sent.push({ command: context.commandName!, input });
        return { output: { ...(await this.answer(context.commandName!, input)), $metadata: {} }, response: {} };
      },
      { step: 'initialize', name: 'standInS3' },
    );
  }

  private etag(): string {
    return `"e${++this.seq}"`;
  }

  private condition(key: string, input: Record<string, unknown>): void {
    const cur = this.objects.get(key);
    if (input.IfNoneMatch === '*' && cur) throw s3Error('PreconditionFailed', 412);
    if (typeof input.IfMatch === 'string' && input.IfMatch !== cur?.etag) throw s3Error('PreconditionFailed', 412);
  }

  private source(input: Record<string, unknown>): StoredObject {
    const path = String(input.CopySource);
    const key = decodeURIComponent(path.slice(BUCKET.length + 1));
    const src = this.objects.get(key);
    if (!src) throw s3Error('NoSuchKey', 404);
    if (input.CopySourceIfMatch !== undefined && input.CopySourceIfMatch !== src.etag) throw s3Error('PreconditionFailed', 412);
    return src;
  }

  private async answer(command: string, input: Record<string, unknown>): Promise<Record<string, unknown>> {
    const key = input.Key as string;
    switch (command) {
      case 'HeadObjectCommand':
      case 'GetObjectCommand': {
        const o = this.objects.get(key);
        if (!o) throw s3Error('NotFound', 404);
        const body = o.body ?? '';
        return {
          ETag: o.etag,
          ContentLength: o.size,
          Metadata: o.metadata ?? {},
          ContentType: o.contentType,
          Body: { transformToString: async () => body },
        };
      }
      case 'PutObjectCommand': {
        this.condition(key, input);
        const body = String(input.Body ?? '');
        const meta = input.Metadata as Record<string, string> | undefined;
        this.objects.set(key, { etag: this.etag(), size: body.length, body, ...(meta ? { metadata: meta } : {}) });
        return {};
      }
      case 'CopyObjectCommand': {
        const src = this.source(input);
        this.condition(key, input);
        const copy = { etag: this.etag(), size: src.size, metadata: input.Metadata as Record<string, string> };
        this.objects.set(key, { ...copy, contentType: input.ContentType as string });
        return {};
      }
      case 'CreateMultipartUploadCommand': {
        const id = `mpu-${++this.seq}`;
        this.uploads.set(id, { key, parts: new Map() });
        return { UploadId: id };
      }
      case 'UploadPartCopyCommand': {
        this.inFlight++;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        try {
          await new Promise((r) => setImmediate(r));
          await this.onPartCopy?.(input);
          const upload = this.uploads.get(input.UploadId as string);
          if (!upload) throw s3Error('NoSuchUpload', 404);
          this.source(input);
          const [, first, last] = /^bytes=(\d+)-(\d+)$/.exec(String(input.CopySourceRange))!;
          upload.parts.set(input.PartNumber as number, Number(last) - Number(first) + 1);
          return { CopyPartResult: { ETag: `"part${input.PartNumber as number}"` } };
        } finally {
          this.inFlight--;
        }
      }
      case 'CompleteMultipartUploadCommand': {
        const upload = this.uploads.get(input.UploadId as string);
        if (!upload) throw s3Error('NoSuchUpload', 404);
        await this.onComplete?.(input);
        this.condition(key, input);
        const sent = this.sent.find((s) => s.command === 'CreateMultipartUploadCommand' && s.input.Key === key)!.input;
        const size = [...upload.parts.values()].reduce((a, b) => a + b, 0);
        this.objects.set(key, {
          etag: `"e${++this.seq}-${upload.parts.size}"`,
          size,
          metadata: sent.Metadata as Record<string, string>,
          contentType: sent.ContentType as string,
        });
        this.uploads.delete(input.UploadId as string);
        return {};
      }
      case 'AbortMultipartUploadCommand':
        this.uploads.delete(input.UploadId as string);
        return {};
      default:
        throw new Error(`the stand-in does not answer ${command}`);
    }
  }

  requests(command: string): Record<string, unknown>[] {
    return this.sent.filter((s) => s.command === `${command}Command`).map((s) => s.input);
  }

  /** A claimed upload of `size` bytes for (ns, key), as presignUpload, the PUT and claimUpload leave it. */
  stage(uploadId: string, ns: string, key: string, size: number): StoredObject {
    const now = Date.now();
    const record = claimed(openUpload({ uploadId, owner: null, ns, key }, now, 600), () => true, now)!;
    const body = encodeUpload(record);
    this.objects.set(s3UploadRecordKey('v1', uploadId), { etag: this.etag(), size: body.length, body });
    const staged = { etag: `"staged${++this.seq}-12"`, size, contentType: 'application/octet-stream' };
    this.objects.set(s3StagingKey('v1', uploadId), staged);
    return staged;
  }
}

const header = (version: number) => ({ version, expiresAt: null, tags: ['t'], flags: {}, contentType: 'video/mp4' });

/**
 * The rules every plan keeps, whatever the size (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html):
 * at most 10,000 parts numbered 1.. ascending, contiguous zero-based inclusive ranges covering every byte once, each
 * part 5 MiB to 5 GiB but the last (no minimum). Collected, then asserted once: plans run to 10,000 parts.
 */
function expectWithinS3Limits(parts: readonly CopyPart[], size: number): void {
  const broken: string[] = [];
  if (parts.length > MAX_PARTS) broken.push(`${parts.length} parts`);
  if (parts[0]?.first !== 0) broken.push('does not start at byte 0');
  if (parts[parts.length - 1]?.last !== size - 1) broken.push('does not end at the last byte');
  parts.forEach((p, i) => {
    const bytes = p.last - p.first + 1;
    if (p.partNumber !== i + 1) broken.push(`part ${i} numbered ${p.partNumber}`);
    if (i > 0 && p.first !== parts[i - 1]!.last + 1) broken.push(`part ${p.partNumber} not contiguous`);
    if (bytes > MAX_PART_BYTES || bytes <= 0) broken.push(`part ${p.partNumber}: ${bytes} bytes`);
    if (i < parts.length - 1 && bytes < MIN_PART_BYTES) broken.push(`part ${p.partNumber} below 5 MiB`);
  });
  expect(broken).toEqual([]);
}

describe('planCopyParts', () => {
  it('keeps S3 multipart limits from just above 5 GiB to the largest object S3 stores', () => {
    for (const size of [MAX_COPY_OBJECT_BYTES + 1, 6 * GiB, 100 * GiB + 7, 5 * TiB, MAX_OBJECT_BYTES]) {
      for (const preferred of [MIN_PART_BYTES, 512 * MiB, MAX_PART_BYTES])
        expectWithinS3Limits(planCopyParts(size, preferred), size);
    }
  });

  it('raises the part size when 10,000 parts of the preferred size would not hold the object', () => {
    // 5 TiB in parts of at most 10,000: 524.288 MiB each, so parts of 525 MiB (whole MiB) and 9,987 of them.
    const parts = planCopyParts(5 * TiB, 512 * MiB);
    expect(parts[0]!.last + 1).toBe(525 * MiB);
    expect(parts).toHaveLength(Math.ceil((5 * TiB) / (525 * MiB)));
    // 48.8 TiB (10,000 x 5 GiB) is the largest object: exactly 10,000 parts of 5 GiB.
    expect(planCopyParts(MAX_OBJECT_BYTES, 512 * MiB)).toHaveLength(MAX_PARTS);
  });

  it('refuses an object larger than S3 stores with PAYLOAD_TOO_LARGE', () => {
    expect(() => planCopyParts(MAX_OBJECT_BYTES + 1, 512 * MiB)).toThrow(StrataError);
    expect(() => planCopyParts(MAX_OBJECT_BYTES + 1, 512 * MiB)).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
  });
});

describe('S3Tier.commitUpload above the copy threshold (requests checked against AWS rules)', () => {
  const ns = 'big';

  it('commits a 6 GiB upload as a multipart copy of the staging object (CopyObject copies at most 5 GiB)', async () => {
    const s3 = new StandInS3();
    const tier = new S3Tier({ bucket: BUCKET, client: s3.client });
    const staged = s3.stage('upload-6g', ns, 'six', 6 * GiB);
    await expect(tier.commitUpload('upload-6g', ns, 'six', header(3))).resolves.toEqual({
      applied: true,
      current: 3,
      size: 6 * GiB,
    });

    // "to copy an object greater than 5 GB, you must use the multipart upload Upload Part - Copy (UploadPartCopy) API"
    // (https://docs.aws.amazon.com/sdkfornet/v3/apidocs/items/S3/MS3CopyObjectCopyObjectRequest.html)
    expect(s3.requests('CopyObject')).toEqual([]);
    const [create] = s3.requests('CreateMultipartUpload');
    const objectKey = s3ObjectKey('v1', ns, 'six');
    expect(create).toMatchObject({ Bucket: BUCKET, Key: objectKey, ContentType: 'video/mp4' });
    expect(create!.Tagging).toBeUndefined();

    const copies = s3.requests('UploadPartCopy');
    const ranges = copies.map((c) => {
      // CopySourceRange "must use the form bytes=first-last", zero-based offsets
      // (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-upload-part-copy-request/copy-source-range.html)
      const m = /^bytes=(\d+)-(\d+)$/.exec(String(c.CopySourceRange));
      expect(m).not.toBeNull();
      return { partNumber: c.PartNumber as number, first: Number(m![1]), last: Number(m![2]) };
    });
    ranges.sort((a, b) => a.partNumber - b.partNumber);
    expectWithinS3Limits(ranges, 6 * GiB);
    for (const c of copies) {
      expect(c).toMatchObject({ Bucket: BUCKET, Key: objectKey });
      expect(c.CopySource).toBe(`${BUCKET}/${s3StagingKey('v1', 'upload-6g')}`);
      // x-amz-copy-source-if-match: "Copies the object if its entity tag (ETag) matches the specified tag"
      // (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-upload-part-copy-request/copy-source-if-match.html)
      expect(c.CopySourceIfMatch).toBe(staged.etag);
      // CreateMultipartUpload and UploadPartCopy "don't accept conditional headers"
      // (https://docs.amazonaws.cn/en_us/AmazonS3/latest/userguide/conditional-writes-enforce.html)
      expect(c.IfMatch).toBeUndefined();
      expect(c.IfNoneMatch).toBeUndefined();
    }
    expect(new Set(copies.map((c) => c.UploadId)).size).toBe(1);

    // The key had no object: the completion carries If-None-Match: * (CompleteMultipartUpload's IfNoneMatch,
    // https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-complete-multipart-upload-request/if-none-match.html),
    // listing each part by number, ascending, with the ETag its copy answered.
    const [complete] = s3.requests('CompleteMultipartUpload');
    expect(complete).toMatchObject({ Key: objectKey, UploadId: copies[0]!.UploadId, IfNoneMatch: '*' });
    expect(complete!.IfMatch).toBeUndefined();
    const parts = (complete!.MultipartUpload as { Parts: { PartNumber: number; ETag: string }[] }).Parts;
    expect(parts).toEqual(ranges.map((r) => ({ PartNumber: r.partNumber, ETag: `"part${r.partNumber}"` })));
    expect(s3.requests('AbortMultipartUpload')).toEqual([]);

    // The order marker went first (s3-order-markers.ts), and the upload is settled: record completed, marker staged.
    const commands = s3.sent.map((s) => (s.command === 'PutObjectCommand' ? `Put ${s.input.Key as string}` : s.command));
    expect(commands.indexOf(`Put ${s3OrderMarkerKey('v1', ns, 'six')}`)).toBeLessThan(
      commands.indexOf('CreateMultipartUploadCommand'),
    );
    expect(commands).toContain(`Put ${s3StagingKey('v1', 'upload-6g')}`);
    expect(await tier.head(ns, 'six')).toMatchObject({
      version: 3,
      size: 6 * GiB,
      hash: `etag:${staged.etag.replace(/"/g, '')}`,
    });
  });

  it('carries the metadata and content type CopyObject sets, and If-Match on the current object', async () => {
    const s3 = new StandInS3();
    const byCopy = new S3Tier({ bucket: BUCKET, client: s3.client });
    const byParts = new S3Tier({ bucket: BUCKET, client: s3.client, copyThresholdBytes: 5 * MiB, copyPartSizeBytes: 5 * MiB });
    const stagedA = s3.stage('upload-a', ns, 'k', 12 * MiB);
    await byCopy.commitUpload('upload-a', ns, 'k', header(1));
    const current = s3.objects.get(s3ObjectKey('v1', ns, 'k'))!;
    s3.stage('upload-b', ns, 'k', 12 * MiB).etag = stagedA.etag; // the same bytes again, so the same hash
    await byParts.commitUpload('upload-b', ns, 'k', header(2));
    const [copy] = s3.requests('CopyObject');
    const [create] = s3.requests('CreateMultipartUpload');
    const versionless = (m: unknown) => ({ ...(m as Record<string, string>), 'strata-version': '' });
    expect(versionless(create!.Metadata)).toEqual(versionless(copy!.Metadata));
    expect(create!.ContentType).toBe(copy!.ContentType);
    // An existing object: If-Match on the ETag the tier saw
    // (CompleteMultipartUpload's IfMatch, https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-complete-multipart-upload-request).
    const [complete] = s3.requests('CompleteMultipartUpload');
    expect(complete).toMatchObject({ IfMatch: current.etag });
    expect(complete!.IfNoneMatch).toBeUndefined();
    // 12 MiB in parts of 5 MiB: 5, 5 and 2 MiB.
    expect(s3.requests('UploadPartCopy').map((c) => c.CopySourceRange)).toEqual(
      expect.arrayContaining([`bytes=0-${5 * MiB - 1}`, `bytes=${5 * MiB}-${10 * MiB - 1}`, `bytes=${10 * MiB}-${12 * MiB - 1}`]),
    );
  });

  it('commits a 5 TiB upload in at most 10,000 parts, several in flight but no more than its bound', async () => {
    const s3 = new StandInS3();
    const tier = new S3Tier({ bucket: BUCKET, client: s3.client });
    s3.stage('upload-5t', ns, 'five', 5 * TiB);
    await expect(tier.commitUpload('upload-5t', ns, 'five', header(1))).resolves.toMatchObject({ applied: true, size: 5 * TiB });
    const copies = s3.requests('UploadPartCopy');
    expect(copies.length).toBeLessThanOrEqual(MAX_PARTS);
    expect(s3.objects.get(s3ObjectKey('v1', ns, 'five'))!.size).toBe(5 * TiB);
    expect(s3.maxInFlight).toBeGreaterThan(1);
    expect(s3.maxInFlight).toBeLessThanOrEqual(COPY_CONCURRENCY);
  });

  it('aborts the multipart upload when a part copy fails, once no copy is in flight, and reports the outage', async () => {
    const s3 = new StandInS3();
    const tier = new S3Tier({ bucket: BUCKET, client: s3.client });
    s3.stage('upload-fail', ns, 'broken', 20 * GiB);
    const settledAfterAbort: number[] = [];
    s3.onPartCopy = async (input) => {
      if (input.PartNumber === 3) throw s3Error('InternalError', 500);
      // Slower parts still in flight when part 3 fails.
      await new Promise((r) => setTimeout(r, 20));
      if (s3.requests('AbortMultipartUpload').length > 0) settledAfterAbort.push(input.PartNumber as number);
    };
    await expect(tier.commitUpload('upload-fail', ns, 'broken', header(1))).rejects.toThrow(TierUnavailableError);
    const [create] = s3.requests('CreateMultipartUpload');
    expect(s3.requests('AbortMultipartUpload')).toEqual([
      expect.objectContaining({ Bucket: BUCKET, Key: s3ObjectKey('v1', ns, 'broken'), UploadId: expect.any(String) }),
    ]);
    expect(create).toBeDefined();
    expect(settledAfterAbort).toEqual([]);
    expect(s3.uploads.size).toBe(0);
    expect(s3.requests('CompleteMultipartUpload')).toEqual([]);
    expect(s3.objects.has(s3ObjectKey('v1', ns, 'broken'))).toBe(false);
    // Not committed: the upload is still claimed, its bytes still staged, so the completion can be retried.
    expect(s3.objects.get(s3StagingKey('v1', 'upload-fail'))!.size).toBe(20 * GiB);
  });

  it('aborts and decides again when a concurrent write lands before the completion (412), never undoing a newer one', async () => {
    const s3 = new StandInS3();
    const tier = new S3Tier({ bucket: BUCKET, client: s3.client });
    s3.stage('upload-race', ns, 'raced', 6 * GiB);
    const otherWriter = new S3Tier({ bucket: BUCKET, client: s3.client });
    let landed = false;
    s3.onComplete = async () => {
      if (landed) return;
      landed = true;
      // A newer version written by another writer between the tier's HEAD and its completion.
      const v = Buffer.from('n');
      const h = { version: 9, expiresAt: null, size: 1, hash: contentHash(v), tags: [], flags: {} };
      await otherWriter.put(ns, 'raced', { header: h, value: v });
    };
    await expect(tier.commitUpload('upload-race', ns, 'raced', header(5))).resolves.toEqual({
      applied: false,
      current: 9,
      size: 6 * GiB,
    });
    expect(s3.requests('CompleteMultipartUpload')).toHaveLength(1);
    expect(s3.requests('AbortMultipartUpload')).toHaveLength(1);
    expect(s3.uploads.size).toBe(0);
    expect(await tier.head(ns, 'raced')).toMatchObject({ version: 9, size: 1 });
  });

  it('refuses copy thresholds and part sizes outside S3 limits', () => {
    const client = new StandInS3().client;
    const make = (o: { copyThresholdBytes?: number; copyPartSizeBytes?: number }) => () =>
      new S3Tier({ bucket: BUCKET, client, ...o });
    expect(make({ copyThresholdBytes: 5 * MiB - 1 })).toThrow(ValidationError);
    expect(make({ copyThresholdBytes: 5 * GiB + 1 })).toThrow(ValidationError);
    expect(make({ copyPartSizeBytes: 5 * MiB - 1 })).toThrow(ValidationError);
    expect(make({ copyPartSizeBytes: 5 * GiB + 1 })).toThrow(ValidationError);
    expect(make({ copyThresholdBytes: 5 * MiB, copyPartSizeBytes: 5 * GiB })).not.toThrow();
  });
});
