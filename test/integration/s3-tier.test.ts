import { randomBytes } from 'node:crypto';
import {
  CreateBucketCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { NotFoundError, TierUnavailableError, ValidationError } from '../../core/errors.js';
import type { Entry, EntryHeader } from '../../core/model/entry.js';
import { makeLocationMarker, makeTombstone } from '../../core/model/entry.js';
import { contentHash } from '../../core/model/keys.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { MAX_UPLOAD_URL_SECONDS, type NewUpload, type UploadClaim, type UploadRecord } from '../../core/tiers/tier.js';
import { parseS3ObjectKey, s3ObjectKey } from '../../core/tiers/storage-key.js';
import { removeBucket, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { freePort } from '../helpers/services.js';

const MiB = 1024 * 1024;

function entry(version: number, value: Buffer | string, extra: Partial<EntryHeader> = {}): Entry {
  const v = Buffer.isBuffer(value) ? value : Buffer.from(value);
  return { header: { version, expiresAt: null, size: v.length, hash: contentHash(v), tags: [], flags: {}, ...extra }, value: v };
}

function commitHeader(version: number, extra: Partial<EntryHeader> = {}): Omit<EntryHeader, 'size' | 'hash'> {
  return { version, expiresAt: null, tags: [], flags: {}, ...extra };
}

describe('S3Tier (LocalStack)', () => {
  const bucket = uniqueName('strata-s3tier').toLowerCase();
  let admin: S3Client;
  let tier: S3Tier;

  beforeAll(async () => {
    admin = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
    tier = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
  });

  afterAll(async () => {
    await tier?.close();
    if (!admin) return;
    await removeBucket(admin, bucket);
    admin.destroy();
  });

  it('round trips binary values (and an empty one) with their headers', async () => {
    const bin = randomBytes(100_000);
    const expiresAt = Date.now() + 3_600_000;
    await expect(
      tier.put('ns', 'bin', entry(1, bin, { tags: ['a', 'ünï'], contentType: 'application/x-thing', expiresAt })),
    ).resolves.toEqual({ applied: true, current: 1 });
    await expect(tier.put('ns', 'empty', entry(1, Buffer.alloc(0)))).resolves.toEqual({ applied: true, current: 1 });
    const got = await tier.get('ns', 'bin');
    expect(got!.value.equals(bin)).toBe(true);
    expect(got!.header).toEqual({
      version: 1,
      expiresAt,
      size: bin.length,
      hash: contentHash(bin),
      tags: ['a', 'ünï'],
      contentType: 'application/x-thing',
      flags: {},
    });
    expect(await tier.head('ns', 'bin')).toEqual(got!.header);
    const empty = await tier.get('ns', 'empty');
    expect(empty!.value.length).toBe(0);
    expect(await tier.has('ns', 'empty')).toBe(true);
    expect(await tier.get('ns', 'missing')).toBeUndefined();
    expect(await tier.head('ns', 'missing')).toBeUndefined();
    expect(await tier.has('ns', 'missing')).toBe(false);

    // The object is the raw value, typed, with a compact metadata header.
    const raw = await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: s3ObjectKey('v1', 'ns', 'bin') }));
    expect(raw.ContentLength).toBe(bin.length);
    expect(raw.ContentType).toBe('application/x-thing');
    expect(raw.Metadata?.['strata-version']).toBe('1');
    expect(JSON.stringify(raw.Metadata).length).toBeLessThan(1024);
  });

  it('round trips hostile keys, all under the prefix', async () => {
    const keys = ['/', '..', '../../escape', 'a/b/../c', '%2F', 'ключ', '🙂'.repeat(128), 'x'.repeat(512)];
    await tier.putMany(
      'weird',
      keys.map((key, i) => ({ key, entry: entry(i + 1, `v:${key}`) })),
    );
    const got = await tier.getMany('weird', keys);
    expect(got.map((e) => e?.value.toString())).toEqual(keys.map((k) => `v:${k}`));
    const list = await admin.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'v1/weird/' }));
    const found = (list.Contents ?? []).map((o) => parseS3ObjectKey('v1', o.Key!)?.key).sort();
    expect(found).toEqual([...keys].sort());
  });

  it('refuses older and equal versions and reports the current one', async () => {
    await tier.put('ns', 'v', entry(10, 'ten'));
    await expect(tier.put('ns', 'v', entry(9, 'nine'))).resolves.toEqual({ applied: false, current: 10 });
    await expect(tier.put('ns', 'v', entry(10, 'ten again'))).resolves.toEqual({ applied: false, current: 10 });
    await expect(tier.put('ns', 'v', entry(11, 'eleven'))).resolves.toEqual({ applied: true, current: 11 });
    expect((await tier.get('ns', 'v'))!.value.toString()).toBe('eleven');
  });

  it('converges on the highest of concurrent writes to one key (conditional writes)', async () => {
    const versions = Array.from({ length: 20 }, () => 1 + Math.floor(Math.random() * 1e9));
    const outcomes = await Promise.all(versions.map((v) => tier.put('ns', 'race', entry(v, `value-${v}`))));
    const max = Math.max(...versions);
    const got = await tier.get('ns', 'race');
    expect(got!.header.version).toBe(max);
    expect(got!.value.toString()).toBe(`value-${max}`);
    expect(outcomes[versions.indexOf(max)]).toEqual({ applied: true, current: max });
  });

  it('treats expired entries as absent', async () => {
    await tier.put('ns', 'exp', entry(5, 'short', { expiresAt: Date.now() + 1000 }));
    expect(await tier.get('ns', 'exp')).toBeDefined();
    await new Promise((r) => setTimeout(r, 1100));
    expect(await tier.get('ns', 'exp')).toBeUndefined();
    expect(await tier.head('ns', 'exp')).toBeUndefined();
    await expect(tier.put('ns', 'exp', entry(2, 'older but live'))).resolves.toEqual({ applied: true, current: 2 });
    expect((await tier.get('ns', 'exp'))!.value.toString()).toBe('older but live');
  });

  it('stores tombstones (tagged for lifecycle expiry) and location markers', async () => {
    await tier.put('ns', 'dead', entry(1, 'alive'));
    await expect(tier.put('ns', 'dead', makeTombstone(2, 600_000))).resolves.toEqual({ applied: true, current: 2 });
    const t = await tier.get('ns', 'dead');
    expect(t!.header.flags.tombstone).toBe(true);
    expect(t!.header.size).toBe(0);
    expect(t!.value.length).toBe(0);
    expect(await tier.has('ns', 'dead')).toBe(false);
    await expect(tier.put('ns', 'dead', entry(1, 'resurrect?'))).resolves.toEqual({ applied: false, current: 2 });
    const tags = await admin.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: s3ObjectKey('v1', 'ns', 'dead') }));
    expect(tags.TagSet).toEqual([{ Key: 'strata-tombstone', Value: '1' }]);
    await expect(tier.presignDownload('ns', 'dead', 60)).rejects.toThrow(NotFoundError);

    await tier.put('ns', 'marker', makeLocationMarker(3, null));
    expect(await tier.head('ns', 'marker')).toMatchObject({ version: 3, size: 0, flags: { elsewhere: true } });
    // A newer value replaces the tombstone and drops its tag.
    await tier.put('ns', 'dead', entry(4, 'back'));
    const tags2 = await admin.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: s3ObjectKey('v1', 'ns', 'dead') }));
    expect(tags2.TagSet ?? []).toEqual([]);
    expect(tier.tombstoneLifecycleRule()).toMatchObject({ Status: 'Enabled', Expiration: { Days: 1 } });
  });

  it('gives every tombstone version its own ETag (no ABA between empty markers under If-Match)', async () => {
    const objectKey = s3ObjectKey('v1', 'ns', 'aba');
    const etags: string[] = [];
    for (const e of [makeTombstone(5, 600_000), makeTombstone(6, 600_000), makeLocationMarker(7, null)]) {
      await tier.put('ns', 'aba', e);
      etags.push((await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: objectKey }))).ETag!);
      expect((await tier.get('ns', 'aba'))!.value.length).toBe(0);
    }
    expect(new Set(etags).size).toBe(3);
  });

  it('writes large values with a multipart upload', async () => {
    const big = randomBytes(20 * MiB);
    await expect(tier.put('ns', 'big', entry(1, big))).resolves.toEqual({ applied: true, current: 1 });
    const raw = await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: s3ObjectKey('v1', 'ns', 'big') }));
    expect(raw.ETag).toMatch(/-\d+"$/); // multipart ETag
    const got = await tier.get('ns', 'big');
    expect(got!.value.equals(big)).toBe(true);
    expect(got!.header.size).toBe(big.length);
    // The multipart path is conditional too.
    await expect(tier.put('ns', 'big', entry(1, big))).resolves.toEqual({ applied: false, current: 1 });
    const big2 = randomBytes(17 * MiB);
    await expect(tier.put('ns', 'big', entry(2, big2))).resolves.toEqual({ applied: true, current: 2 });
    expect((await tier.get('ns', 'big'))!.value.equals(big2)).toBe(true);
  }, 300_000);

  it('deletes conditionally on the version', async () => {
    await tier.put('ns', 'del', entry(4, 'v'));
    expect(await tier.delete('ns', 'del', 3)).toBe(false);
    expect(await tier.get('ns', 'del')).toBeDefined();
    expect(await tier.delete('ns', 'del', 4)).toBe(true);
    expect(await tier.get('ns', 'del')).toBeUndefined();
    expect(await tier.delete('ns', 'del', 4)).toBe(false);
    await tier.put('ns', 'del2', entry(1, 'v'));
    expect(await tier.deleteMany('ns', ['del2', 'never'])).toEqual([true, false]);
  });

  it('keeps batch results in request order', async () => {
    const keys = Array.from({ length: 30 }, (_, i) => `b${i}`);
    const items = keys.filter((_, i) => i % 3 !== 0).map((key, i) => ({ key, entry: entry(i + 1, `v-${key}`) }));
    expect((await tier.putMany('batch', items)).every((o) => o.applied)).toBe(true);
    const got = await tier.getMany('batch', keys);
    expect(got.map((e) => e?.value.toString())).toEqual(keys.map((k, i) => (i % 3 !== 0 ? `v-${k}` : undefined)));
  });

  // Presigned URLs with headers signed in: SigV4 query authentication covers every header listed in
  // X-Amz-SignedHeaders, so on AWS a request without them (or with other values) fails with 403
  // (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html). LocalStack does not check
  // presigned signatures, so these tests check that the header is signed into the URL, and send it.
  const signedHeaders = (url: string): string[] => (new URL(url).searchParams.get('X-Amz-SignedHeaders') ?? '').split(';');

  it('hands out a presigned download URL that returns the exact bytes of the version it was made for', async () => {
    const bin = randomBytes(50_000);
    await tier.put('ns', 'dl/🙂', entry(1, bin, { contentType: 'image/png' }));
    const dl = await tier.presignDownload('ns', 'dl/🙂', 60);
    const etag = expect.stringMatching(/^"[0-9a-f]{32}"$/);
    expect(dl).toMatchObject({ method: 'GET', headers: { 'if-match': etag }, header: { version: 1, size: bin.length } });
    expect(dl.url).not.toContain('x-amz-checksum');
    expect(signedHeaders(dl.url)).toContain('if-match');
    const res = await fetch(dl.url, { headers: dl.headers });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer()).equals(bin)).toBe(true);
    await expect(tier.presignDownload('ns', 'nope', 60)).rejects.toThrow(NotFoundError);
  });

  it('answers 412 on a download URL made before an overwrite or a delete, never the newer bytes', async () => {
    // GetObject with If-Match: "Return the object only if its entity tag (ETag) is the same as the one specified
    // in this header; otherwise, return a 412 Precondition Failed error"
    // (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-get-object-request/if-match.html).
    await tier.put('ns', 'dl-replaced', entry(1, 'old bytes'));
    const before = await tier.presignDownload('ns', 'dl-replaced', 60);
    await tier.put('ns', 'dl-replaced', entry(2, 'new bytes'));
    const res = await fetch(before.url, { headers: before.headers });
    expect(res.status).toBe(412);
    expect(await res.text()).not.toContain('new bytes');
    const after = await tier.presignDownload('ns', 'dl-replaced', 60);
    expect(after.header.version).toBe(2);
    expect(await (await fetch(after.url, { headers: after.headers })).text()).toBe('new bytes');
    await tier.put('ns', 'dl-replaced', makeTombstone(3, 600_000));
    expect((await fetch(after.url, { headers: after.headers })).status).toBe(412);
  });

  // "If you created a presigned URL by using temporary credentials, the URL expires when the credentials expire.
  // This is true even if the URL was created with a later expiration time."
  // (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html, "Expiration time for presigned
  // URLs"). The API reports expiresAt and derives the upload's completion deadline from it: both must be true.
  it('never signs a URL past the expiry of the credentials that sign it', async () => {
    const expiration = new Date(Date.now() + 120_000);
    const client = new S3Client({
      endpoint: testS3Endpoint(),
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: async () => ({ accessKeyId: 'test', secretAccessKey: 'test', sessionToken: 'session', expiration }),
    });
    const shortLived = new S3Tier({ bucket, client });
    try {
      await tier.put('ns', 'dl-short', entry(1, 'bytes'));
      const dl = await shortLived.presignDownload('ns', 'dl-short', 3600);
      const dlSeconds = Number(new URL(dl.url).searchParams.get('X-Amz-Expires'));
      expect(dlSeconds).toBeLessThanOrEqual(120);
      expect(dl.expiresAt).toBeLessThanOrEqual(expiration.getTime());
      const up = await shortLived.presignUpload(upload(`short-${uniqueName('u')}`, 'ns', 'up-short'), 3600);
      expect(Number(new URL(up.url).searchParams.get('X-Amz-Expires'))).toBeLessThanOrEqual(120);
      expect(up.expiresAt).toBeLessThanOrEqual(expiration.getTime());
      // Long-term keys (no expiry) keep the requested lifetime.
      const long = await tier.presignDownload('ns', 'dl-short', 3600);
      expect(Number(new URL(long.url).searchParams.get('X-Amz-Expires'))).toBe(3600);
    } finally {
      await shortLived.close();
      client.destroy();
    }
  });

  const upload = (uploadId: string, ns: string, key: string, extra: Partial<NewUpload> = {}): NewUpload => {
    return { uploadId, owner: 'tenant:a', ns, key, ...extra };
  };
  const mine = (r: UploadRecord): boolean => r.owner === 'tenant:a';
  const claimFor = async (uploadId: string): Promise<UploadClaim> => (await tier.claimUpload(uploadId, mine))!;

  it('commits a claimed upload into place with a version, once', async () => {
    const uploadId = uniqueName('up').replace(/[^A-Za-z0-9_-]/g, '_');
    const up = await tier.presignUpload(
      upload(uploadId, 'ns', 'uploaded', { contentType: 'text/csv', ttlSeconds: 60, tags: ['t'] }),
      300,
    );
    expect(up).toMatchObject({ method: 'PUT', headers: { 'content-type': 'text/csv', 'if-none-match': '*' } });
    expect(up.url).toContain(`/v1/_uploads/${uploadId}`);
    expect(up.url).not.toContain('x-amz-checksum');
    // PutObject with If-None-Match: * "prevents overwrites of existing data by validating that there's not an object
    // with the same key name already in your bucket" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html),
    // signed into the URL so a client cannot drop it on AWS (see signedHeaders above).
    expect(signedHeaders(up.url)).toContain('if-none-match');
    const bytes = randomBytes(300_000);
    expect((await fetch(up.url, { method: 'PUT', body: bytes, headers: up.headers })).status).toBe(200);
    // One PUT per URL: a second one (other bytes) is refused before and after the completion.
    expect((await fetch(up.url, { method: 'PUT', body: Buffer.from('evil'), headers: up.headers })).status).toBe(412);

    // Not claimed (or claimed for another key): the tier refuses the commit.
    await expect(tier.commitUpload(uploadId, 'ns', 'uploaded', commitHeader(6))).rejects.toThrow(NotFoundError);
    expect(await tier.claimUpload(uploadId, (r) => r.owner === 'tenant:b')).toBeUndefined();
    const claim = await claimFor(uploadId);
    const record = {
      uploadId,
      owner: 'tenant:a',
      ns: 'ns',
      key: 'uploaded',
      ttlSeconds: 60,
      tags: ['t'],
      contentType: 'text/csv',
    };
    expect(claim.record).toMatchObject(record);
    await expect(tier.claimUpload(uploadId, mine)).rejects.toMatchObject({ code: 'VERSION_CONFLICT' });
    await expect(tier.commitUpload(uploadId, 'ns', 'elsewhere', commitHeader(6))).rejects.toThrow(NotFoundError);

    await tier.put('ns', 'uploaded', entry(5, 'old'));
    const out = await tier.commitUpload(uploadId, 'ns', 'uploaded', commitHeader(6, { tags: ['t'], contentType: 'text/csv' }));
    expect(out).toEqual({ applied: true, current: 6, size: bytes.length });
    const got = await tier.get('ns', 'uploaded');
    expect(got!.value.equals(bytes)).toBe(true);
    expect(got!.header).toMatchObject({ version: 6, size: bytes.length, tags: ['t'], contentType: 'text/csv' });
    expect(got!.header.hash).toMatch(/^etag:[0-9a-f]{32}/);
    // Completed: the record cannot be claimed nor committed again, and a marker holds the staging key against PUTs.
    expect(await tier.claimUpload(uploadId, mine)).toBeUndefined();
    await expect(tier.commitUpload(uploadId, 'ns', 'uploaded', commitHeader(7))).rejects.toThrow(NotFoundError);
    expect((await fetch(up.url, { method: 'PUT', body: Buffer.from('evil'), headers: up.headers })).status).toBe(412);
    const marker = await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: `v1/_uploads/${uploadId}` }));
    expect(marker.ContentLength).toBeLessThan(100);
    expect((await tier.get('ns', 'uploaded'))!.value.equals(bytes)).toBe(true);
  });

  it('keeps the staged bytes of an older commit so the coordinator can re-stamp, and gives claims back', async () => {
    const stale = uniqueName('stale').replace(/[^A-Za-z0-9_-]/g, '_');
    await tier.put('ns', 'restamped', entry(6, 'current'));
    const up = await tier.presignUpload(upload(stale, 'ns', 'restamped'), 60);
    await fetch(up.url, { method: 'PUT', body: Buffer.from('restamped'), headers: up.headers });
    const claim = await claimFor(stale);
    await expect(tier.commitUpload(stale, 'ns', 'restamped', commitHeader(3))).resolves.toEqual({
      applied: false,
      current: 6,
      size: 9,
    });
    expect((await tier.get('ns', 'restamped'))!.header.version).toBe(6);
    // A failed completion gives its claim back; the next claim (a retry) proceeds.
    await tier.releaseUpload(claim);
    await claimFor(stale);
    await expect(tier.commitUpload(stale, 'ns', 'restamped', commitHeader(8))).resolves.toEqual({
      applied: true,
      current: 8,
      size: 9,
    });
    expect((await tier.get('ns', 'restamped'))!.value.toString()).toBe('restamped');

    // A commit onto an absent key uses If-None-Match.
    const fresh = `${stale}-fresh`;
    const up2 = await tier.presignUpload(upload(fresh, 'ns', 'fresh-upload'), 60);
    await fetch(up2.url, { method: 'PUT', body: Buffer.from('fresh bytes'), headers: up2.headers });
    await claimFor(fresh);
    await expect(tier.commitUpload(fresh, 'ns', 'fresh-upload', commitHeader(1))).resolves.toEqual({
      applied: true,
      current: 1,
      size: 11,
    });
    expect((await tier.get('ns', 'fresh-upload'))!.value.toString()).toBe('fresh bytes');
  });

  it('lets exactly one of concurrent claims of an upload win (If-Match on its record)', async () => {
    // PutObject with If-Match "uploads the object only if the ETag ... matches the ETag of the object in S3. If the
    // ETag values do not match, the operation returns a 412 Precondition Failed error"
    // (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-put-object-request/if-match.html).
    const id = uniqueName('race').replace(/[^A-Za-z0-9_-]/g, '_');
    await tier.presignUpload(upload(id, 'ns', 'raced'), 60);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => tier.claimUpload(id, mine)));
    expect(results.filter((r) => r.status === 'fulfilled' && r.value !== undefined)).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'VERSION_CONFLICT' });
    }
  });

  it('caps upload URLs below the staging lifecycle, and rejects unknown uploads and bad ids', async () => {
    const id = uniqueName('cap').replace(/[^A-Za-z0-9_-]/g, '_');
    const up = await tier.presignUpload(upload(id, 'ns', 'x'), 7 * 24 * 3600);
    expect(up.expiresAt).toBeLessThanOrEqual(Date.now() + MAX_UPLOAD_URL_SECONDS * 1000);
    await expect(tier.presignUpload(upload(id, 'ns', 'x'), 60)).rejects.toThrow(ValidationError);
    await expect(tier.commitUpload('never-uploaded-1', 'ns', 'x', commitHeader(1))).rejects.toThrow(NotFoundError);
    expect(await tier.claimUpload('never-uploaded-1', () => true)).toBeUndefined();
    await expect(tier.presignUpload(upload('../../etc', 'ns', 'x'), 60)).rejects.toThrow(ValidationError);
  });

  it('ignores objects it did not write', async () => {
    const key = s3ObjectKey('v1', 'ns', 'foreign');
    await admin.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'not ours' }));
    expect(await tier.get('ns', 'foreign')).toBeUndefined();
    await expect(tier.put('ns', 'foreign', entry(1, 'ours'))).resolves.toEqual({ applied: true, current: 1 });
    const obj = await admin.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    expect(await obj.Body!.transformToString()).toBe('ours');
  });

  it('rejects headers too large for S3 metadata', async () => {
    const tags = Array.from({ length: 40 }, (_, i) => `tag-${i}-${'x'.repeat(50)}`);
    await expect(tier.put('ns', 'fat', entry(1, 'v', { tags }))).rejects.toThrow(ValidationError);
  });

  it('answers ping and stats', async () => {
    await expect(tier.ping()).resolves.toBeUndefined();
    await expect(tier.stats()).resolves.toEqual({ name: 'cold', kind: 's3', bucket, prefix: 'v1' });
    const missing = new S3Tier({
      bucket: uniqueName('no-such-bucket').toLowerCase(),
      endpoint: testS3Endpoint(),
      region: 'us-east-1',
    });
    await expect(missing.ping()).rejects.toThrow(TierUnavailableError);
    await missing.close();
  });

  it('reports an unreachable endpoint as TierUnavailableError', async () => {
    const port = await freePort();
    const down = new S3Tier({ bucket, endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1' });
    try {
      await expect(down.get('ns', 'k')).rejects.toThrow(TierUnavailableError);
      await expect(down.put('ns', 'k', entry(1, 'v'))).rejects.toThrow(TierUnavailableError);
      await expect(down.ping()).rejects.toThrow(TierUnavailableError);
      await expect(down.presignDownload('ns', 'k', 60)).rejects.toThrow(TierUnavailableError);
    } finally {
      await down.close();
    }
  });
});
