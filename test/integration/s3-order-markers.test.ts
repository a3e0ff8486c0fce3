/**
 * The S3 tier's key order (core/tiers/s3-order-markers.ts) against LocalStack: a marker object per entry under
 * `_k/<ns>/`, named by an order-preserving encoding of the key, written before every object creation (put, upload
 * commits), listed in key order within prefixes and bounds, pruned only once old and its object gone (with a
 * conditional delete), and backfilled for objects written before markers existed.
 */
import {
  CreateBucketCommand,
  DeleteObjectsCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  S3Client,
  type DeleteObjectCommandInput,
} from '@aws-sdk/client-s3';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Entry } from '../../core/model/entry.js';
import { after, compareKeys, inKeyRange, type KeyRange } from '../../core/model/key-order.js';
import { contentHash } from '../../core/model/keys.js';
import { isNotFound } from '../../core/tiers/s3-errors.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { s3ObjectKey, s3OrderMarkerKey } from '../../core/tiers/storage-key.js';
import type { UploadRecord } from '../../core/tiers/tier.js';
import { mapLimit } from '../../core/util/concurrency.js';
import { removeBucket, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { honourConditionalDeletes } from '../helpers/s3-conditional-delete.js';

const MiB = 1024 * 1024;
const HOUR = 3600_000;

function entry(version: number, value = 'v'): Entry {
  const v = Buffer.from(value);
  return { header: { version, expiresAt: null, size: v.length, hash: contentHash(v), tags: [], flags: {} }, value: v };
}

/** Keys whose order UTF-16 gets wrong (above U+FFFF), prefixes of each other, 512-byte keys. */
const KEYS = [
  'a',
  'ab',
  'abc',
  'a/b',
  'a b',
  'b',
  'user',
  'user/',
  'user/a',
  'user/b',
  'user/c/d',
  'users',
  'user0',
  'é',
  'éa',
  '\uFFFD',
  '\u{1F600}',
  '\u{1F600}x',
  '\u{10FFFF}',
  'x'.repeat(512),
  'x'.repeat(511),
  '🙂'.repeat(128),
  'é'.repeat(256),
  ...Array.from({ length: 30 }, (_, i) => `n/${String(i).padStart(2, '0')}`),
];

describe('S3Tier key order (LocalStack)', () => {
  const bucket = uniqueName('strata-s3order').toLowerCase();
  let admin: S3Client;
  let tier: S3Tier;
  const clients: S3Client[] = [];
  const tiers: S3Tier[] = [];

  const client = (): S3Client => {
    const c = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    clients.push(c);
    return c;
  };
  const tierWith = (c: S3Client, now: () => number = Date.now): S3Tier => {
    const t = new S3Tier({ bucket, client: c, now });
    tiers.push(t);
    return t;
  };
  const exists = async (Key: string): Promise<boolean> => {
    try {
      await admin.send(new HeadObjectCommand({ Bucket: bucket, Key }));
      return true;
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  };
  const etagOf = async (Key: string): Promise<string> => (await admin.send(new HeadObjectCommand({ Bucket: bucket, Key }))).ETag!;

  /** Every key of `r`, page after page of `limit`, checking each page keeps the contract of OrderedKeysPage. */
  async function listAll(t: S3Tier, ns: string, r: KeyRange, limit: number): Promise<string[]> {
    const out: string[] = [];
    let range = r;
    for (let i = 0; i < 500; i++) {
      const page = await t.listOrdered(ns, { ...range, limit });
      expect(page.keys.length).toBeLessThanOrEqual(limit);
      if (page.more) expect(page.keys.length).toBeGreaterThan(0);
      out.push(...page.keys);
      if (!page.more) return out;
      range = after(range, page.keys[page.keys.length - 1]!);
    }
    throw new Error('the listing did not end');
  }
  const expected = (keys: readonly string[], r: KeyRange): string[] => keys.filter((k) => inKeyRange(k, r)).sort(compareKeys);

  beforeAll(async () => {
    admin = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
    tier = tierWith(client());
    await mapLimit(KEYS, 8, (k) => tier.put('ord', k, entry(1, k)));
    // Neighbours that must stay out: another namespace, and one whose name starts like it.
    await tier.put('ord2', 'a', entry(1));
    await tier.put('or', 'zz', entry(1));
  });

  afterAll(async () => {
    await Promise.allSettled(tiers.map((t) => t.close()));
    for (const c of clients) c.destroy();
    if (!admin) return;
    await removeBucket(admin, bucket);
    admin.destroy();
  });

  it('lists a namespace in UTF-8 order, within prefixes and inclusive or exclusive bounds, page after page', async () => {
    const all = [...KEYS].sort(compareKeys);
    expect(all.indexOf('\uFFFD')).toBeLessThan(all.indexOf('\u{1F600}')); // UTF-16 order would have it the other way
    expect(await tier.listOrdered('ord', { limit: 1000 })).toEqual({ keys: all, more: false });
    const ranges: KeyRange[] = [
      {},
      { prefix: 'user' },
      { prefix: 'user/' },
      { prefix: 'a' },
      { prefix: 'é' },
      { prefix: '\u{1F600}' },
      { prefix: 'x'.repeat(511) },
      { prefix: 'nothing here' },
      { from: { key: 'b', inclusive: true } },
      { from: { key: 'b', inclusive: false } },
      { from: { key: 'a', inclusive: true }, to: { key: 'ab', inclusive: false } },
      { from: { key: 'a', inclusive: false }, to: { key: 'ab', inclusive: true } },
      { prefix: 'user', from: { key: 'user/', inclusive: false }, to: { key: 'user/c/d', inclusive: true } },
      { prefix: 'n/', from: { key: 'n/05', inclusive: true }, to: { key: 'n/25', inclusive: false } },
      { to: { key: 'a', inclusive: true } },
      { from: { key: '\uFFFD', inclusive: true }, to: { key: '\u{1F600}x', inclusive: true } },
      { from: { key: 'x'.repeat(511), inclusive: false } },
    ];
    for (const r of ranges) {
      for (const limit of [1, 3, 1000])
        expect([r, limit, await listAll(tier, 'ord', r, limit)]).toEqual([r, limit, expected(KEYS, r)]);
    }
    expect(await listAll(tier, 'ord2', {}, 10)).toEqual(['a']);
    expect(await listAll(tier, 'or', {}, 10)).toEqual(['zz']);
  });

  it('agrees with a sorted list for any range and page size', async () => {
    // Bounds and prefixes drawn from the keys, their starts, and other strings. Well-formed ones only, as the API
    // accepts (validateKey): a start cut inside a surrogate pair, or a lone surrogate from 'binary', has no UTF-8 form
    // (Buffer encodes it as U+FFFD), so no marker name can stand for it. Drawn unfiltered, the test failed now and
    // then (once in three runs here).
    const near = fc
      .oneof(
        fc.constantFrom(...KEYS),
        fc.constantFrom(...KEYS).chain((k) => fc.nat(k.length).map((n) => k.slice(0, n))),
        fc.string({ unit: 'binary', maxLength: 4 }),
      )
      .filter((s) => s.isWellFormed());
    const bound = fc.option(fc.record({ key: near, inclusive: fc.boolean() }), { nil: undefined });
    const range = fc.record(
      { prefix: fc.option(near, { nil: undefined }), from: bound, to: bound },
      { requiredKeys: [] },
    ) as fc.Arbitrary<KeyRange>;
    await fc.assert(
      fc.asyncProperty(range, fc.integer({ min: 1, max: 9 }), async (r, limit) => {
        const clean = Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as KeyRange;
        expect(await listAll(tier, 'ord', clean, limit)).toEqual(expected(KEYS, clean));
      }),
      { numRuns: 40 },
    );
  });

  it('keeps the markers out of namespaces, key listings and scans', async () => {
    const namespaces = await tier.namespaces();
    expect(namespaces).toEqual(expect.arrayContaining(['ord', 'ord2', 'or']));
    expect(namespaces).not.toContain('_k');
    const listed: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await tier.keys('ord', { cursor, limit: 7 });
      listed.push(...page.keys);
      cursor = page.cursor;
    } while (cursor !== null);
    expect(listed.sort(compareKeys)).toEqual([...KEYS].sort(compareKeys));
    const scan = await tier.scan('ord', { limit: 1000, prefix: 'user' });
    expect(scan.items.map((i) => i.key).sort(compareKeys)).toEqual(expected(KEYS, { prefix: 'user' }));
    const markers = await admin.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'v1/_k/ord/' }));
    expect(markers.KeyCount).toBe(KEYS.length);
  });

  it('writes the marker before creating the object, again after a long write, and not for an overwrite', async () => {
    const c = client();
    const puts: string[] = [];
    c.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'PutObjectCommand') puts.push((args.input as { Key: string }).Key);
        return next(args);
      },
      { step: 'initialize', name: 'recordPuts' },
    );
    let clock = Date.now();
    const t = tierWith(c, () => clock);
    const marker = s3OrderMarkerKey('v1', 'seq', 'k');
    const object = s3ObjectKey('v1', 'seq', 'k');
    await t.put('seq', 'k', entry(1));
    expect(puts).toEqual([marker, object]);
    await t.put('seq', 'k', entry(2));
    expect(puts).toEqual([marker, object, object]);
    // A creation whose write outlasted 15 minutes marks again (a prune may have judged the first marker stale).
    puts.length = 0;
    c.middlewareStack.add(
      (next, context) => async (args) => {
        if (
          context.commandName === 'PutObjectCommand' &&
          (args.input as { Key: string }).Key === s3ObjectKey('v1', 'seq', 'slow')
        )
          clock += 20 * 60_000;
        return next(args);
      },
      { step: 'initialize', name: 'slowWrite' },
    );
    await t.put('seq', 'slow', entry(1));
    expect(puts).toEqual([
      s3OrderMarkerKey('v1', 'seq', 'slow'),
      s3ObjectKey('v1', 'seq', 'slow'),
      s3OrderMarkerKey('v1', 'seq', 'slow'),
    ]);
  });

  it('lists a deleted key until its marker is pruned, which waits an hour and for the object to be gone', async () => {
    await tier.put('del', 'gone', entry(1));
    await tier.put('del', 'kept', entry(1));
    await tier.delete('del', 'gone');
    expect((await tier.listOrdered('del', { limit: 10 })).keys).toEqual(['gone', 'kept']);
    // Young markers stay, whatever became of their objects.
    expect(await tier.pruneOrderMarkers('del', ['gone', 'kept', 'never-written'])).toEqual({
      removed: [],
      kept: expect.arrayContaining(['gone', 'kept', 'never-written']),
      unsupported: false,
    });
    const later = tierWith(conditionalDeleteClient(), () => Date.now() + 2 * HOUR);
    const pruned = await later.pruneOrderMarkers('del', ['gone', 'kept']);
    expect(pruned).toEqual({ removed: ['gone'], kept: ['kept'], unsupported: false });
    expect(await exists(s3OrderMarkerKey('v1', 'del', 'gone'))).toBe(false);
    expect((await tier.listOrdered('del', { limit: 10 })).keys).toEqual(['kept']);
    await tier.put('del', 'gone', entry(2));
    expect((await tier.listOrdered('del', { limit: 10 })).keys).toEqual(['gone', 'kept']);
  });

  it('keeps a marker written again between its read and the conditional delete (a creation of the key)', async () => {
    await tier.put('race', 'k', entry(1));
    await tier.delete('race', 'k');
    const markerKey = s3OrderMarkerKey('v1', 'race', 'k');
    const read = await etagOf(markerKey);
    const seen: DeleteObjectCommandInput[] = [];
    // The key is created again after the prune found the marker old and the object gone, before its delete.
    const later = tierWith(
      conditionalDeleteClient(seen, async () => {
        await tier.put('race', 'k', entry(2));
      }),
      () => Date.now() + 2 * HOUR,
    );
    expect(await later.pruneOrderMarkers('race', ['k'])).toEqual({ removed: [], kept: ['k'], unsupported: false });
    expect(seen).toEqual([expect.objectContaining({ Key: markerKey, IfMatch: read })]);
    expect(await etagOf(markerKey)).not.toBe(read); // a random body: a new ETag at every marker PUT
    expect((await tier.listOrdered('race', { limit: 10 })).keys).toEqual(['k']);
    expect((await tier.get('race', 'k'))?.header.version).toBe(2);
  });

  it('deletes a marker only with If-Match: <its ETag>, and keeps it where S3 refuses conditional deletes', async () => {
    // https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html: DeleteObject with If-Match
    // deletes only while the object's ETag is the one given (412 Precondition Failed otherwise). LocalStack answers
    // 501: the tier must then delete nothing, since an unconditional delete could take a marker just written again.
    await tier.put('cond', 'k', entry(1));
    await tier.delete('cond', 'k');
    const markerKey = s3OrderMarkerKey('v1', 'cond', 'k');
    const c = client();
    const sent: { method: string; path: string; ifMatch?: string }[] = [];
    c.middlewareStack.add(
      (next) => async (args) => {
        const req = args.request as { method: string; path: string; headers: Record<string, string> };
        if (req.method === 'DELETE') sent.push({ method: req.method, path: req.path, ifMatch: req.headers['if-match'] });
        return next(args);
      },
      { step: 'finalizeRequest', name: 'recordDeletes' },
    );
    const later = tierWith(c, () => Date.now() + 2 * HOUR);
    expect(await later.pruneOrderMarkers('cond', ['k'])).toEqual({ removed: [], kept: ['k'], unsupported: true });
    expect(sent).toEqual([{ method: 'DELETE', path: `/${bucket}/${markerKey}`, ifMatch: await etagOf(markerKey) }]);
    expect(await exists(markerKey)).toBe(true);
  });

  it('marks the keys that upload completions create (single PUT and multipart)', async () => {
    const mine = (r: UploadRecord): boolean => r.owner === 'tenant:a';
    const id = () => uniqueName('up').replace(/[^A-Za-z0-9_-]/g, '_');
    const header = { version: 3, expiresAt: null, tags: [], flags: {} };

    const single = id();
    const up = await tier.presignUpload({ uploadId: single, owner: 'tenant:a', ns: 'upl', key: 'single' }, 300);
    expect((await fetch(up.url, { method: 'PUT', body: randomBytes(1000), headers: up.headers })).status).toBe(200);
    await tier.claimUpload(single, mine);
    expect(await tier.commitUpload(single, 'upl', 'single', header)).toMatchObject({ applied: true });

    const multi = id();
    await tier.createMultipartUpload({ uploadId: multi, owner: 'tenant:a', ns: 'upl', key: 'multi' }, 300);
    const parts = [randomBytes(5 * MiB), randomBytes(100)];
    const urls = (await tier.presignParts(multi, [1, 2], mine, 300))!;
    const etags: string[] = [];
    for (const [i, u] of urls.entries())
      etags.push((await fetch(u.url, { method: 'PUT', headers: u.headers, body: parts[i] })).headers.get('etag')!);
    const claim = (await tier.claimUpload(multi, mine))!;
    await tier.completeParts(
      claim,
      etags.map((etag, i) => ({ partNumber: i + 1, etag })),
    );
    expect(await tier.commitUpload(multi, 'upl', 'multi', header)).toMatchObject({ applied: true, size: 5 * MiB + 100 });

    expect(await exists(s3OrderMarkerKey('v1', 'upl', 'single'))).toBe(true);
    expect(await exists(s3OrderMarkerKey('v1', 'upl', 'multi'))).toBe(true);
    expect(await tier.listOrdered('upl', { limit: 10 })).toEqual({ keys: ['multi', 'single'], more: false });
  });

  it('backfills the markers of objects written before markers existed, once', async () => {
    const keys = Array.from({ length: 25 }, (_, i) => `old/${i}-\u{1F600}`);
    await mapLimit(keys, 8, (k) => tier.put('legacy', k, entry(1, k)));
    // As a tier without markers left them: the objects alone.
    await admin.send(
      new DeleteObjectsCommand({
        Bucket: bucket,
        Delete: { Objects: keys.slice(5).map((k) => ({ Key: s3OrderMarkerKey('v1', 'legacy', k) })) },
      }),
    );
    expect((await tier.listOrdered('legacy', { limit: 100 })).keys).toHaveLength(5);
    const run = async (): Promise<number> => {
      let created = 0;
      let cursor: string | null = null;
      do {
        const page = await tier.backfillOrderMarkers('legacy', cursor);
        created += page.created;
        cursor = page.cursor;
      } while (cursor !== null);
      return created;
    };
    expect(await run()).toBe(20);
    expect(await tier.listOrdered('legacy', { limit: 100 })).toEqual({ keys: [...keys].sort(compareKeys), more: false });
    expect(await run()).toBe(0); // markers there are left as they are (If-None-Match)
  });

  /** A client whose DeleteObject honours If-Match as S3's does (test/helpers/s3-conditional-delete.ts). */
  function conditionalDeleteClient(seen: DeleteObjectCommandInput[] = [], before?: () => Promise<void>): S3Client {
    return honourConditionalDeletes(client(), admin, seen, before);
  }
});
