import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, mkdirSync, utimesSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { NotFoundError, ValidationError } from '../../core/errors.js';
import type { Entry, EntryHeader } from '../../core/model/entry.js';
import { makeLocationMarker, makeTombstone } from '../../core/model/entry.js';
import fc from 'fast-check';
import { after, compareKeys, inKeyRange, type KeyRange } from '../../core/model/key-order.js';
import { contentHash } from '../../core/model/keys.js';
import { LocalFolderTier, StagedUploadExistsError } from '../../core/tiers/local-folder-tier.js';
import { pageOfKeyListing } from '../../core/tiers/ordered-from-listing.js';
import {
  MAX_UPLOAD_URL_SECONDS,
  UPLOAD_CLAIM_LEASE_MS,
  UPLOAD_COMPLETE_GRACE_MS,
  type NewUpload,
  type UploadRecord,
} from '../../core/tiers/tier.js';

function entry(version: number, value: Buffer | string, extra: Partial<EntryHeader> = {}): Entry {
  const v = Buffer.isBuffer(value) ? value : Buffer.from(value);
  return { header: { version, expiresAt: null, size: v.length, hash: contentHash(v), tags: [], flags: {}, ...extra }, value: v };
}

function allFiles(dir: string): string[] {
  const out: string[] = [];
  for (const d of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, d.name);
    out.push(p);
    if (d.isDirectory()) out.push(...allFiles(p));
  }
  return out;
}

async function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks);
}

describe('LocalFolderTier', () => {
  let root: string;
  let dir: string;
  let now: number;
  let tier: LocalFolderTier;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'strata-lft-'));
    dir = join(root, 'cold');
    now = Date.now();
    tier = new LocalFolderTier({ dir, publicBaseUrl: 'http://localhost:9999/', signingSecret: 'test-secret', now: () => now });
  });

  afterEach(async () => {
    await tier.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('keeps the newest version when two instances over one folder write a key at once (two coordinators)', async () => {
    const other = new LocalFolderTier({ dir: join(root, '.', 'cold'), fsync: false });
    try {
      // Versions interleaved between the two instances, all in flight together: without one lock per file across
      // instances, an older version's rename landed over a newer one.
      for (let round = 0; round < 5; round++) {
        const key = `k${round}`;
        const versions = Array.from({ length: 40 }, (_, i) => 1 + i);
        await Promise.all(versions.map((v) => (v % 2 ? tier : other).put('ns', key, entry(v, `v${v}`))));
        expect((await tier.get('ns', key))?.header.version).toBe(40);
      }
    } finally {
      await other.close();
    }
  });

  it('round trips binary values, including an empty one, with their headers', async () => {
    const bin = randomBytes(70_000);
    await expect(
      tier.put('ns', 'bin', entry(1, bin, { tags: ['a', 'b'], contentType: 'application/x-thing', expiresAt: now + 60_000 })),
    ).resolves.toEqual({ applied: true, current: 1 });
    await expect(tier.put('ns', 'empty', entry(1, Buffer.alloc(0)))).resolves.toEqual({ applied: true, current: 1 });
    const got = await tier.get('ns', 'bin');
    expect(got!.value.equals(bin)).toBe(true);
    expect(got!.header).toEqual({
      version: 1,
      expiresAt: now + 60_000,
      size: bin.length,
      hash: contentHash(bin),
      tags: ['a', 'b'],
      contentType: 'application/x-thing',
      flags: {},
    });
    const empty = await tier.get('ns', 'empty');
    expect(empty!.value.length).toBe(0);
    expect(empty!.header.size).toBe(0);
    expect(await tier.head('ns', 'bin')).toEqual(got!.header);
    expect(await tier.has('ns', 'empty')).toBe(true);
    expect(await tier.get('ns', 'missing')).toBeUndefined();
    expect(await tier.head('other', 'bin')).toBeUndefined();
    expect(await tier.has('ns', 'missing')).toBe(false);
  });

  it('refuses older and equal versions and reports the current one', async () => {
    await tier.put('ns', 'k', entry(10, 'ten'));
    await expect(tier.put('ns', 'k', entry(9, 'nine'))).resolves.toEqual({ applied: false, current: 10 });
    await expect(tier.put('ns', 'k', entry(10, 'other ten'))).resolves.toEqual({ applied: false, current: 10 });
    await expect(tier.put('ns', 'k', entry(11, 'eleven'))).resolves.toEqual({ applied: true, current: 11 });
    expect((await tier.get('ns', 'k'))!.value.toString()).toBe('eleven');
  });

  it('converges on the highest of 50 concurrent writes to one key', async () => {
    const versions = Array.from({ length: 50 }, () => 1 + Math.floor(Math.random() * 1e9));
    const outcomes = await Promise.all(versions.map((v) => tier.put('ns', 'hot', entry(v, `value-${v}`))));
    const max = Math.max(...versions);
    const got = await tier.get('ns', 'hot');
    expect(got!.header.version).toBe(max);
    expect(got!.value.toString()).toBe(`value-${max}`);
    for (const o of outcomes) expect(o.current).toBeGreaterThanOrEqual(0);
    expect(outcomes.filter((o) => o.applied && o.current === max)).toHaveLength(1);
    // No temp files left behind.
    expect(allFiles(dir).filter((p) => p.includes('.tmp-'))).toEqual([]);
  });

  it('treats expired entries as absent (reads, writes and deletes)', async () => {
    await tier.put('ns', 'k', entry(5, 'short', { expiresAt: now + 1000 }));
    expect(await tier.get('ns', 'k')).toBeDefined();
    now += 1000;
    expect(await tier.get('ns', 'k')).toBeUndefined();
    expect(await tier.head('ns', 'k')).toBeUndefined();
    expect(await tier.has('ns', 'k')).toBe(false);
    // An older version may replace an expired entry.
    await expect(tier.put('ns', 'k', entry(3, 'older but live'))).resolves.toEqual({ applied: true, current: 3 });
    expect((await tier.get('ns', 'k'))!.value.toString()).toBe('older but live');
    await tier.put('ns', 'gone', entry(1, 'x', { expiresAt: now + 10 }));
    now += 10;
    expect(await tier.delete('ns', 'gone')).toBe(false);
  });

  it('returns tombstones and location markers as they are', async () => {
    await tier.put('ns', 'k', entry(1, 'v'));
    await expect(tier.put('ns', 'k', makeTombstone(2, 60_000, now))).resolves.toEqual({ applied: true, current: 2 });
    const t = await tier.get('ns', 'k');
    expect(t!.header.flags.tombstone).toBe(true);
    expect(t!.value.length).toBe(0);
    expect(await tier.has('ns', 'k')).toBe(false);
    await expect(tier.put('ns', 'k', entry(1, 'resurrect?'))).resolves.toEqual({ applied: false, current: 2 });
    await tier.put('ns', 'm', makeLocationMarker(7, null));
    expect((await tier.head('ns', 'm'))!.flags.elsewhere).toBe(true);
    expect(await tier.has('ns', 'm')).toBe(false);
    await expect(tier.presignDownload('ns', 'k', 60)).rejects.toThrow(NotFoundError);
  });

  it('round trips hostile keys and never writes outside its directory', async () => {
    const keys = [
      '/',
      '..',
      '../..',
      '../../../outside',
      'a/../../b',
      '%2e%2e%2f',
      '%',
      'ключ/значение',
      '🙂🙃',
      'CaseSensitive',
      'casesensitive',
      'x'.repeat(512),
      '🙂'.repeat(128),
      'é'.repeat(256),
    ];
    for (const [i, k] of keys.entries()) await tier.put('ns', k, entry(i + 1, `value of ${k}`));
    for (const [i, k] of keys.entries()) {
      const got = await tier.get('ns', k);
      expect(got?.header.version).toBe(i + 1);
      expect(got!.value.toString()).toBe(`value of ${k}`);
    }
    expect(readdirSync(root)).toEqual(['cold']);
    const files = allFiles(dir);
    for (const f of files) {
      expect(resolve(f).startsWith(resolve(dir) + '/')).toBe(true);
      expect(
        relative(dir, f)
          .split('/')
          .every((seg) => seg !== '..' && Buffer.byteLength(seg) < 255),
      ).toBe(true);
    }
    expect(files.filter((f) => f.endsWith('.e'))).toHaveLength(keys.length);
    expect(() => tier.entryPath('..', 'k')).toThrow(ValidationError);
    await expect(tier.put('../x', 'k', entry(1, 'v'))).rejects.toThrow(ValidationError);
    await expect(tier.put('ns', 'x'.repeat(513), entry(1, 'v'))).rejects.toThrow(ValidationError);
  });

  it('deletes conditionally on the version', async () => {
    await tier.put('ns', 'k', entry(4, 'v'));
    expect(await tier.delete('ns', 'k', 3)).toBe(false);
    expect(await tier.get('ns', 'k')).toBeDefined();
    expect(await tier.delete('ns', 'k', 4)).toBe(true);
    expect(await tier.get('ns', 'k')).toBeUndefined();
    expect(await tier.delete('ns', 'k', 4)).toBe(false);
    await tier.put('ns', 'any', entry(9, 'v'));
    expect(await tier.delete('ns', 'any')).toBe(true);
    expect(await tier.delete('ns', 'never')).toBe(false);
  });

  it('lists keys in UTF-8 order within prefixes and bounds, page after page, never a deleted one', async () => {
    const keys = [
      'a',
      'ab',
      'a/b',
      'b',
      'user/',
      'user/a',
      'users',
      'é',
      '\uFFFD',
      '\u{1F600}',
      '\u{1F600}x',
      'x'.repeat(512),
      '🙂'.repeat(128),
      ...Array.from({ length: 20 }, (_, i) => `n/${i}`),
    ];
    await tier.putMany(
      'ns',
      [...keys, 'deleted'].map((key) => ({ key, entry: entry(1, key) })),
    );
    await tier.put('other', 'a', entry(1, 'a'));
    await tier.delete('ns', 'deleted');
    const listAll = async (r: KeyRange, limit: number): Promise<string[]> => {
      const out: string[] = [];
      let range = r;
      for (;;) {
        const page = await tier.listOrdered('ns', { ...range, limit });
        expect(page.keys.length).toBeLessThanOrEqual(limit);
        out.push(...page.keys);
        if (!page.more) return out;
        expect(page.keys.length).toBeGreaterThan(0);
        range = after(range, page.keys[page.keys.length - 1]!);
      }
    };
    const all = [...keys].sort(compareKeys);
    expect(all.indexOf('\uFFFD')).toBeLessThan(all.indexOf('\u{1F600}'));
    expect(await tier.listOrdered('ns', { limit: 100 })).toEqual({ keys: all, more: false });
    const near = fc.oneof(
      fc.constantFrom(...keys),
      fc.constantFrom(...keys).chain((k) => fc.nat(k.length).map((n) => k.slice(0, n))),
    );
    const bound = fc.option(fc.record({ key: near, inclusive: fc.boolean() }), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(
        fc.option(near, { nil: undefined }),
        bound,
        bound,
        fc.integer({ min: 1, max: 6 }),
        async (prefix, from, to, limit) => {
          const r: KeyRange = { ...(prefix !== undefined ? { prefix } : {}), ...(from ? { from } : {}), ...(to ? { to } : {}) };
          expect(await listAll(r, limit)).toEqual(all.filter((k) => inKeyRange(k, r)));
        },
      ),
      { numRuns: 30 },
    );
  });

  it('sorts a key listing walked to its end, however the tier pages it', async () => {
    const pages = [['c', 'a'], [], ['b', 'é'], ['\u{1F600}']];
    const asked: (string | null | undefined)[] = [];
    const list = async (opts: { cursor?: string | null }) => {
      asked.push(opts.cursor);
      const i = opts.cursor ? Number(opts.cursor) : 0;
      return { keys: pages[i]!, cursor: i + 1 < pages.length ? String(i + 1) : null };
    };
    expect(await pageOfKeyListing(list, { limit: 3 })).toEqual({ keys: ['a', 'b', 'c'], more: true });
    expect(await pageOfKeyListing(list, { limit: 3, from: { key: 'c', inclusive: false } })).toEqual({
      keys: ['é', '\u{1F600}'],
      more: false,
    });
    expect(asked).toEqual([null, '1', '2', '3', null, '1', '2', '3']);
  });

  it('keeps batch results in request order', async () => {
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    const outcomes = await tier.putMany(
      'ns',
      keys.filter((_, i) => i % 2 === 0).map((key, i) => ({ key, entry: entry(i + 1, `v-${key}`) })),
    );
    expect(outcomes.every((o) => o.applied)).toBe(true);
    const got = await tier.getMany('ns', keys);
    expect(got.map((e) => e?.value.toString())).toEqual(keys.map((k, i) => (i % 2 === 0 ? `v-${k}` : undefined)));
    expect(await tier.deleteMany('ns', ['k0', 'k1', 'k2'])).toEqual([true, false, true]);
  });

  it('signs blob tokens and rejects tampered, forged and expired ones', async () => {
    await tier.put('ns', 'a/b 🙂', entry(1, 'payload', { expiresAt: now + 3_600_000 }));
    const dl = await tier.presignDownload('ns', 'a/b 🙂', 120);
    expect(dl.method).toBe('GET');
    expect(dl.expiresAt).toBe(now + 120_000);
    expect(dl.url).toMatch(/^http:\/\/localhost:9999\/local-blobs\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const token = dl.url.split('/local-blobs/')[1]!;
    // The token names the version it was made for: the local server answers 412 once the key holds another one.
    expect(tier.verifyBlobToken(token)).toEqual({ op: 'get', ns: 'ns', key: 'a/b 🙂', version: 1, exp: now + 120_000 });
    expect(dl.header).toMatchObject({ version: 1, size: 7 });

    const [payload, sig] = token.split('.') as [string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { path: string };
    const evil = Buffer.from(JSON.stringify({ ...claims, path: 'ns/' + Buffer.from('other').toString('base64url') })).toString(
      'base64url',
    );
    expect(tier.verifyBlobToken(`${evil}.${sig}`)).toBeNull();
    const otherVersion = Buffer.from(JSON.stringify({ ...claims, v: 2 })).toString('base64url');
    expect(tier.verifyBlobToken(`${otherVersion}.${sig}`)).toBeNull();
    const flipped = sig.slice(0, -2) + (sig.at(-2) === 'A' ? 'B' : 'A') + sig.at(-1);
    expect(tier.verifyBlobToken(`${payload}.${flipped}`)).toBeNull();
    expect(tier.verifyBlobToken(`${payload}.`)).toBeNull();
    expect(tier.verifyBlobToken(payload)).toBeNull();
    expect(tier.verifyBlobToken('')).toBeNull();
    expect(tier.verifyBlobToken(`${payload}.${sig}.x`)).toBeNull();
    const other = new LocalFolderTier({ dir, signingSecret: 'another-secret', now: () => now });
    expect(other.verifyBlobToken(token)).toBeNull();
    // A token signed with the right key but without the context prefix is still rejected.
    const naive = createHmac('sha256', 'test-secret').update(payload).digest('base64url');
    expect(tier.verifyBlobToken(`${payload}.${naive}`)).toBeNull();

    now += 120_000;
    expect(tier.verifyBlobToken(token)).toBeNull();
  });

  it('caps a download URL at the entry expiry', async () => {
    await tier.put('ns', 'k', entry(1, 'v', { expiresAt: now + 30_500 }));
    const dl = await tier.presignDownload('ns', 'k', 3600);
    expect(dl.expiresAt).toBe(now + 30_000);
  });

  it('streams a live value for the local server and nothing for tombstones', async () => {
    const bin = randomBytes(200_000);
    await tier.put('ns', 'big', entry(1, bin, { contentType: 'image/png' }));
    const blob = await tier.readBlob('ns', 'big');
    expect(blob!.size).toBe(bin.length);
    expect(blob!.header.contentType).toBe('image/png');
    // An overwrite while the stream is open does not tear it.
    await tier.put('ns', 'big', entry(2, 'replaced'));
    expect((await collect(blob!.body)).equals(bin)).toBe(true);
    const empty = await tier.put('ns', 'empty', entry(1, Buffer.alloc(0)));
    expect(empty.applied).toBe(true);
    expect((await collect((await tier.readBlob('ns', 'empty'))!.body)).length).toBe(0);
    await tier.put('ns', 'dead', makeTombstone(1, 60_000, now));
    expect(await tier.readBlob('ns', 'dead')).toBeUndefined();
    expect(await tier.readBlob('ns', 'nope')).toBeUndefined();
  });

  const upload = (uploadId: string, key: string, extra: Partial<NewUpload> = {}): NewUpload => {
    return { uploadId, owner: 'tenant:a', ns: 'ns', key, ...extra };
  };
  const mine = (r: UploadRecord): boolean => r.owner === 'tenant:a';
  const header = (version: number, extra: Partial<EntryHeader> = {}) => ({
    version,
    expiresAt: null,
    tags: [],
    flags: {},
    ...extra,
  });

  it('stages an upload once and commits it once, when claimed for its key, with the versioned-put rule', async () => {
    const up = await tier.presignUpload(
      upload('upload-0001', 'file', { contentType: 'text/csv', ttlSeconds: 30, tags: ['t'] }),
      300,
    );
    expect(up).toMatchObject({ method: 'PUT', headers: { 'content-type': 'text/csv' }, expiresAt: now + 300_000 });
    const claims = tier.verifyBlobToken(up.url.split('/local-blobs/')[1]!);
    expect(claims).toEqual({ op: 'put', uploadId: 'upload-0001', contentType: 'text/csv', exp: now + 300_000 });

    const bytes = randomBytes(300_000);
    // Streamed in chunks, like an HTTP request body.
    async function* chunks(): AsyncGenerator<Buffer> {
      for (let i = 0; i < bytes.length; i += 65_536) yield bytes.subarray(i, i + 65_536);
    }
    await expect(tier.writeStagedUpload('upload-0001', chunks())).resolves.toEqual({ size: bytes.length });
    // The URL takes one PUT (as S3's with If-None-Match: *), streamed or not.
    await expect(tier.writeStagedUpload('upload-0001', Buffer.from('evil'))).rejects.toBeInstanceOf(StagedUploadExistsError);
    await expect(tier.writeStagedUpload('upload-0001', chunks())).rejects.toBeInstanceOf(StagedUploadExistsError);

    await tier.put('ns', 'file', entry(5, 'old'));
    // Not claimed, or claimed for another key: refused.
    await expect(tier.commitUpload('upload-0001', 'ns', 'file', header(6))).rejects.toThrow(NotFoundError);
    expect(await tier.claimUpload('upload-0001', (r) => r.owner === 'tenant:b')).toBeUndefined();
    const claim = (await tier.claimUpload('upload-0001', mine))!;
    const record = {
      uploadId: 'upload-0001',
      owner: 'tenant:a',
      key: 'file',
      ttlSeconds: 30,
      tags: ['t'],
      contentType: 'text/csv',
    };
    expect(claim.record).toMatchObject(record);
    await expect(tier.claimUpload('upload-0001', mine)).rejects.toMatchObject({ code: 'VERSION_CONFLICT' });
    await expect(tier.commitUpload('upload-0001', 'ns', 'other', header(6))).rejects.toThrow(NotFoundError);

    const out = await tier.commitUpload('upload-0001', 'ns', 'file', header(6, { tags: ['t'], contentType: 'text/csv' }));
    expect(out).toEqual({ applied: true, current: 6, size: bytes.length });
    const got = await tier.get('ns', 'file');
    expect(got!.value.equals(bytes)).toBe(true);
    expect(got!.header).toMatchObject({
      version: 6,
      size: bytes.length,
      hash: contentHash(bytes),
      tags: ['t'],
      contentType: 'text/csv',
    });

    // Completed: never claimed nor committed again, and the marker left at the staging path refuses a PUT.
    expect(await tier.claimUpload('upload-0001', mine)).toBeUndefined();
    await expect(tier.commitUpload('upload-0001', 'ns', 'file', header(7))).rejects.toThrow(NotFoundError);
    await expect(tier.writeStagedUpload('upload-0001', Buffer.from('evil'))).rejects.toBeInstanceOf(StagedUploadExistsError);
    expect((await tier.get('ns', 'file'))!.value.equals(bytes)).toBe(true);
    await expect(tier.commitUpload('never-uploaded', 'ns', 'file', header(8))).rejects.toThrow(NotFoundError);
  });

  it('keeps the staged bytes of an older commit for the re-stamp, gives claims back, and lets one of racing claims win', async () => {
    await tier.put('ns', 'file', entry(6, 'current'));
    await tier.presignUpload(upload('upload-0002', 'file'), 60);
    await tier.writeStagedUpload('upload-0002', Buffer.from('restamped'));
    const claim = (await tier.claimUpload('upload-0002', mine))!;
    await expect(tier.commitUpload('upload-0002', 'ns', 'file', header(3))).resolves.toEqual({
      applied: false,
      current: 6,
      size: 9,
    });
    expect((await tier.get('ns', 'file'))!.header.version).toBe(6);
    await tier.releaseUpload(claim);
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => tier.claimUpload('upload-0002', mine)));
    expect(results.filter((r) => r.status === 'fulfilled' && r.value)).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(4);
    await expect(tier.commitUpload('upload-0002', 'ns', 'file', header(9))).resolves.toEqual({
      applied: true,
      current: 9,
      size: 9,
    });
    expect((await tier.get('ns', 'file'))!.value.toString()).toBe('restamped');
    // The record and the marker stay until the sweep; no commit leaves a temp file behind.
    expect(readdirSync(join(dir, '_uploads')).sort()).toEqual(['upload-0002', 'upload-0002.json']);
    expect(allFiles(dir).filter((p) => p.includes('.tmp-'))).toEqual([]);
  });

  it('lets a stale claim be taken over, refuses completion past the deadline, and caps upload URLs', async () => {
    await tier.presignUpload(upload('upload-0004', 'late'), 60);
    await tier.writeStagedUpload('upload-0004', Buffer.from('x'));
    await tier.claimUpload('upload-0004', mine);
    await expect(tier.claimUpload('upload-0004', mine)).rejects.toMatchObject({ code: 'VERSION_CONFLICT' });
    now += UPLOAD_CLAIM_LEASE_MS;
    expect(await tier.claimUpload('upload-0004', mine)).toBeDefined();
    now += 60_000 + UPLOAD_COMPLETE_GRACE_MS;
    await tier.presignUpload(upload('upload-0005', 'late'), 60);
    now += 60_001 + UPLOAD_COMPLETE_GRACE_MS;
    expect(await tier.claimUpload('upload-0005', mine)).toBeUndefined();
    expect((await tier.presignUpload(upload('upload-0006', 'k'), 7 * 86_400)).expiresAt).toBe(
      now + MAX_UPLOAD_URL_SECONDS * 1000,
    );
    await expect(tier.presignUpload(upload('upload-0006', 'k'), 60)).rejects.toThrow(ValidationError);
  });

  it('refuses bad upload ids and oversized uploads', async () => {
    await expect(tier.writeStagedUpload('../../etc', Buffer.from('x'))).rejects.toThrow(ValidationError);
    await expect(tier.presignUpload(upload('bad id!', 'k'), 60)).rejects.toThrow(ValidationError);
    await expect(tier.writeStagedUpload('upload-0003', Buffer.alloc(11), { maxBytes: 10 })).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
    });
    expect(existsSync(join(dir, '_uploads', 'upload-0003'))).toBe(false);
  });

  it('ignores crash leftovers and corrupt files, and sweeps old temp files', async () => {
    await tier.put('ns', 'k', entry(1, 'v'));
    const path = tier.entryPath('ns', 'k');
    const shardDir = join(path, '..');
    writeFileSync(join(shardDir, '.tmp-deadbeef0000'), 'half a write');
    const old = new Date(now - 2 * 3_600_000);
    utimesSync(join(shardDir, '.tmp-deadbeef0000'), old, old);
    writeFileSync(join(shardDir, '.tmp-fresh'), 'in progress');
    mkdirSync(join(dir, '_uploads'), { recursive: true });
    writeFileSync(join(dir, '_uploads', 'abandoned-upload'), 'x');
    utimesSync(join(dir, '_uploads', 'abandoned-upload'), new Date(now - 2 * 86_400_000), new Date(now - 2 * 86_400_000));

    expect((await tier.get('ns', 'k'))!.value.toString()).toBe('v');
    const stats = await tier.stats();
    expect(stats).toMatchObject({ name: 'cold', kind: 'local-folder', dir: resolve(dir), entries: 1 });
    expect(stats.bytes).toBe(statSync(path).size);

    expect(await tier.sweep()).toBe(2);
    expect(readdirSync(shardDir).sort()).toEqual(['.tmp-fresh', path.split('/').pop()!].sort());

    // A file not written by the tier reads as absent and is replaced by the next put.
    writeFileSync(path, 'garbage');
    expect(await tier.get('ns', 'k')).toBeUndefined();
    await expect(tier.put('ns', 'k', entry(1, 'again'))).resolves.toEqual({ applied: true, current: 1 });
  });

  it('reports an unusable directory as unavailable', async () => {
    await tier.ping();
    writeFileSync(join(root, 'a-file'), 'x');
    const broken = new LocalFolderTier({ dir: join(root, 'a-file', 'sub') });
    await expect(broken.ping()).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
    await expect(broken.put('ns', 'k', entry(1, 'v'))).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
  });
});
