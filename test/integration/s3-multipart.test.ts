/**
 * The S3 tier's multipart uploads (core/tiers/multipart.ts) against LocalStack: CreateMultipartUpload on the staging
 * key, presigned UploadPart URLs, CompleteMultipartUpload with the parts' ETags and the usual versioned commit, and
 * AbortMultipartUpload, which S3 then no longer lists. The rules are S3's
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html: parts 5 MiB to 5 GiB but the last, 1..10,000).
 * Commits above the tier's copy threshold (lowered here from 5 GiB) copy the staged object into place in parts
 * (s3-multipart-copy.ts); test/unit/s3-multipart-copy.test.ts checks those requests against AWS's rules at full size.
 */
import {
  CreateBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import { TierUnavailableError } from '../../core/errors.js';
import type { Entry } from '../../core/model/entry.js';
import { contentHash } from '../../core/model/keys.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { s3ObjectKey, s3StagingKey } from '../../core/tiers/storage-key.js';
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

  describe('commits above the copy threshold', () => {
    /** What a tier sent: each command's name and input, in order. */
    interface Sent {
      command: string;
      input: Record<string, unknown>;
    }
    const clients: S3Client[] = [];
    /**
     * A tier copying uploads above 6 MiB in parts of 5 MiB, over a client that records its requests and runs
     * `before(command, input)` ahead of each (a test fails a request there, or writes in between).
     */
    const copyingTier = (sent: Sent[], before?: (command: string, input: Record<string, unknown>) => Promise<void>): S3Tier => {
      const client = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
      clients.push(client);
      client.middlewareStack.add(
        (next, context) => async (args) => {
          const input = args.input as Record<string, unknown>;
          sent.push({ command: context.commandName!.replace(/Command$/, ''), input: { ...input } });
          await before?.(context.commandName!.replace(/Command$/, ''), input);
          return next(args);
        },
        { step: 'initialize', name: 'recordAndIntercept' },
      );
      return new S3Tier({ bucket, client, copyThresholdBytes: 6 * MiB, copyPartSizeBytes: 5 * MiB });
    };
    const of = (sent: Sent[], command: string) => sent.filter((s) => s.command === command).map((s) => s.input);
    const header = (version: number) => ({ version, expiresAt: null, tags: ['big'], flags: {}, contentType: 'video/mp4' });
    /** A single-PUT upload of `bytes` for ns/key, claimed and ready to commit. */
    const staged = async (t: S3Tier, key: string, bytes: Buffer): Promise<string> => {
      const uploadId = id();
      const up = await t.presignUpload(upload(uploadId, key), 300);
      expect((await fetch(up.url, { method: 'PUT', body: bytes, headers: up.headers })).status).toBe(200);
      await t.claimUpload(uploadId, mine);
      return uploadId;
    };
    const entry = (version: number, value: string): Entry => {
      const v = Buffer.from(value);
      return { header: { version, expiresAt: null, size: v.length, hash: contentHash(v), tags: [], flags: {} }, value: v };
    };
    const dangling = async (key: string): Promise<string[]> => {
      const listed = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: s3ObjectKey('v1', 'ns', key) }));
      return (listed.Uploads ?? []).map((u) => u.UploadId!);
    };

    afterAll(() => {
      for (const c of clients) c.destroy();
    });

    it('copies the staged bytes in ranges under the staged ETag, completing with the write precondition', async () => {
      const sent: Sent[] = [];
      const t = copyingTier(sent);
      const bytes = randomBytes(13 * MiB + 17);
      const first = await staged(t, 'copied', bytes);
      const stagedEtag = (await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: s3StagingKey('v1', first) }))).ETag;
      await expect(t.commitUpload(first, 'ns', 'copied', header(4))).resolves.toEqual({
        applied: true,
        current: 4,
        size: bytes.length,
      });
      const got = await t.get('ns', 'copied');
      expect(got!.value.equals(bytes)).toBe(true);
      expect(got!.header).toMatchObject({ version: 4, size: bytes.length, tags: ['big'], contentType: 'video/mp4' });
      expect(of(sent, 'CopyObject')).toEqual([]);
      const copies = of(sent, 'UploadPartCopy').map((c) => [c.PartNumber, c.CopySourceRange, c.CopySourceIfMatch]);
      expect(copies.sort((x, y) => (x[0] as number) - (y[0] as number))).toEqual([
        [1, `bytes=0-${5 * MiB - 1}`, stagedEtag],
        [2, `bytes=${5 * MiB}-${10 * MiB - 1}`, stagedEtag],
        [3, `bytes=${10 * MiB}-${bytes.length - 1}`, stagedEtag],
      ]);
      expect(of(sent, 'CompleteMultipartUpload')).toEqual([expect.objectContaining({ IfNoneMatch: '*' })]);

      // Over an existing object: If-Match on its ETag, and the new bytes replace the old ones whole.
      const current = (await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: s3ObjectKey('v1', 'ns', 'copied') }))).ETag;
      const again = randomBytes(7 * MiB);
      const second = await staged(t, 'copied', again);
      await expect(t.commitUpload(second, 'ns', 'copied', header(5))).resolves.toMatchObject({ applied: true, current: 5 });
      expect(of(sent, 'CompleteMultipartUpload')[1]).toMatchObject({ IfMatch: current });
      expect((await t.get('ns', 'copied'))!.value.equals(again)).toBe(true);
      expect(await dangling('copied')).toEqual([]);
    });

    it('never undoes a newer write: an older commit is refused, and one raced by a newer write gives way', async () => {
      // Older than the current version: refused before any copy, the bytes kept staged for a re-stamp.
      const sent: Sent[] = [];
      const t = copyingTier(sent);
      await t.put('ns', 'raced', entry(9, 'nine'));
      const older = await staged(t, 'raced', randomBytes(7 * MiB));
      await expect(t.commitUpload(older, 'ns', 'raced', header(5))).resolves.toMatchObject({ applied: false, current: 9 });
      expect(of(sent, 'CreateMultipartUpload')).toEqual([]);

      // Newer than what the tier saw, but a newer one still lands while the parts are copied: the completion's
      // If-Match fails (412), the tier aborts, reads again and gives way to version 12.
      let raced = false;
      const racing = copyingTier([], async (command) => {
        if (command !== 'CompleteMultipartUpload' || raced) return;
        raced = true;
        await tier.put('ns', 'raced', entry(12, 'twelve'));
      });
      const newer = await staged(racing, 'raced', randomBytes(7 * MiB));
      await expect(racing.commitUpload(newer, 'ns', 'raced', header(10))).resolves.toEqual({
        applied: false,
        current: 12,
        size: 7 * MiB,
      });
      expect(raced).toBe(true);
      expect((await tier.get('ns', 'raced'))!.value.toString()).toBe('twelve');
      expect(await dangling('raced')).toEqual([]);
    });

    it('aborts the multipart upload when a part copy fails, leaving none behind; the retry commits', async () => {
      let failing = true;
      const sent: Sent[] = [];
      const t = copyingTier(sent, async (command, input) => {
        if (failing && command === 'UploadPartCopy' && input.PartNumber === 2)
          throw Object.assign(new Error('We encountered an internal error'), {
            name: 'InternalError',
            $metadata: { httpStatusCode: 500 },
          });
      });
      const bytes = randomBytes(12 * MiB);
      const uploadId = await staged(t, 'aborted-copy', bytes);
      await expect(t.commitUpload(uploadId, 'ns', 'aborted-copy', header(1))).rejects.toThrow(TierUnavailableError);
      const [create] = of(sent, 'CreateMultipartUpload');
      expect(of(sent, 'AbortMultipartUpload')).toEqual([expect.objectContaining({ UploadId: expect.any(String) })]);
      expect(await dangling('aborted-copy')).toEqual([]);
      expect(create).toBeDefined();
      expect(await t.head('ns', 'aborted-copy')).toBeUndefined();
      // Still claimed and staged: the completion can be tried again.
      failing = false;
      await expect(t.commitUpload(uploadId, 'ns', 'aborted-copy', header(1))).resolves.toMatchObject({ applied: true });
      expect((await t.get('ns', 'aborted-copy'))!.value.equals(bytes)).toBe(true);
    });

    it('does not mix two staged objects: a staging object replaced mid-copy fails its parts (copy-source If-Match)', async () => {
      const replacement = randomBytes(8 * MiB);
      let replaced = false;
      const sent: Sent[] = [];
      let uploadId = '';
      const t = copyingTier(sent, async (command, input) => {
        if (command !== 'UploadPartCopy' || input.PartNumber !== 2 || replaced) return;
        replaced = true;
        // Nothing but the tier writes staging objects on S3 (the URL's If-None-Match); an operator's PUT stands in.
        await admin.send(new PutObjectCommand({ Bucket: bucket, Key: s3StagingKey('v1', uploadId), Body: replacement }));
      });
      uploadId = await staged(t, 'replaced', randomBytes(8 * MiB));
      await expect(t.commitUpload(uploadId, 'ns', 'replaced', header(1))).resolves.toMatchObject({ applied: true });
      expect(replaced).toBe(true);
      // The first attempt's parts carried the first ETag and failed; the second copied the replacement whole.
      expect(of(sent, 'CreateMultipartUpload')).toHaveLength(2);
      expect((await t.get('ns', 'replaced'))!.value.equals(replacement)).toBe(true);
      expect(await dangling('replaced')).toEqual([]);
    });
  });
});
