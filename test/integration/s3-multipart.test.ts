/**
 * The S3 tier's multipart uploads (core/tiers/multipart.ts) against LocalStack: CreateMultipartUpload on the staging
 * key, presigned UploadPart URLs, CompleteMultipartUpload with the parts' ETags and the usual versioned commit, and
 * AbortMultipartUpload, which S3 then no longer lists. The rules are S3's
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html: parts 5 MiB to 5 GiB but the last, 1..10,000).
 */
import { CreateBucketCommand, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import type { NewUpload, UploadRecord } from '../../core/tiers/tier.js';
import { removeBucket, testS3Endpoint, uniqueName } from '../helpers/env.js';

const MiB = 1024 * 1024;

describe('S3Tier multipart uploads (LocalStack)', () => {
  const bucket = uniqueName('strata-s3mp').toLowerCase();
  let admin: S3Client;
  let tier: S3Tier;
  const id = () => uniqueName('mp').replace(/[^A-Za-z0-9_-]/g, '_');
  const upload = (uploadId: string, key: string): NewUpload => ({ uploadId, owner: 'tenant:a', ns: 'ns', key });
  const mine = (r: UploadRecord): boolean => r.owner === 'tenant:a';

  beforeAll(async () => {
    admin = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
    tier = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
  });

  afterAll(async () => {
    await tier?.close();
    if (!admin) return;
    const uploads = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    expect(uploads.Uploads ?? []).toEqual([]); // every test completes or aborts what it starts
    await removeBucket(admin, bucket);
    admin.destroy();
  });

  it('assembles presigned parts into the staging object, which commits as a versioned write', async () => {
    const uploadId = id();
    await tier.createMultipartUpload(upload(uploadId, 'joined'), 300);
    expect(await tier.presignParts(uploadId, [1], (r) => r.owner === 'tenant:b', 300)).toBeUndefined();
    const urls = (await tier.presignParts(uploadId, [1, 2], mine, 300))!;
    expect(urls.map((u) => [u.partNumber, u.method])).toEqual([
      [1, 'PUT'],
      [2, 'PUT'],
    ]);
    const parts = [randomBytes(5 * MiB), randomBytes(1234)];
    const etags: string[] = [];
    for (const [i, u] of urls.entries()) {
      const res = await fetch(u.url, { method: 'PUT', headers: u.headers, body: parts[i] });
      expect(res.status).toBe(200);
      etags.push(res.headers.get('etag')!);
    }
    const claim = (await tier.claimUpload(uploadId, mine))!;
    await tier.completeParts(claim, [
      { partNumber: 1, etag: etags[0]! },
      { partNumber: 2, etag: etags[1]! },
    ]);
    // A completion retried after a failed commit finds the parts joined already.
    await tier.completeParts(claim, [
      { partNumber: 1, etag: etags[0]! },
      { partNumber: 2, etag: etags[1]! },
    ]);
    const w = await tier.commitUpload(uploadId, 'ns', 'joined', { version: 7, expiresAt: null, tags: [], flags: {} });
    expect(w).toMatchObject({ applied: true, current: 7, size: 5 * MiB + 1234 });
    const got = await tier.get('ns', 'joined');
    expect(Buffer.compare(got!.value, Buffer.concat(parts))).toBe(0);
    expect(await tier.presignParts(uploadId, [3], mine, 300)).toBeUndefined();
  });

  it('refuses a part list S3 refuses (a small part that is not the last) with VALIDATION_FAILED, and aborts', async () => {
    const uploadId = id();
    await tier.createMultipartUpload(upload(uploadId, 'aborted'), 300);
    const urls = (await tier.presignParts(uploadId, [1, 2], mine, 300))!;
    const etags: string[] = [];
    for (const u of urls) etags.push((await fetch(u.url, { method: 'PUT', body: Buffer.alloc(1000, 1) })).headers.get('etag')!);
    const claim = (await tier.claimUpload(uploadId, mine))!;
    await expect(
      tier.completeParts(claim, [
        { partNumber: 1, etag: etags[0]! },
        { partNumber: 2, etag: etags[1]! },
      ]),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(
      tier.completeParts(claim, [
        { partNumber: 2, etag: etags[1]! },
        { partNumber: 1, etag: etags[0]! },
      ]),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await tier.abortUpload(claim);
    const listed = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    expect((listed.Uploads ?? []).map((u) => u.Key).filter((k) => k?.endsWith(uploadId))).toEqual([]);
    expect(await tier.claimUpload(uploadId, mine)).toBeUndefined();
  });
});
