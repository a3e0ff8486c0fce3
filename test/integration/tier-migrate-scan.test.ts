/**
 * Enumeration (tiers' `scan`) on the tiers that need real backends: Redis (redis-server), S3 (LocalStack) and the
 * warm tier (real cache-node processes). MemoryTier and LocalFolderTier are covered in test/unit/tier-scan.test.ts.
 */
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ValidationError } from '../../core/errors.js';
import { makeTombstone } from '../../core/model/entry.js';
import { initialRing, type RingDocument } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { RedisTier } from '../../core/tiers/redis/redis-tier.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { supportsKeyListing, type KeyPage, type ScanItem, type Scanning, type Tier } from '../../core/tiers/tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { testRedisUrl, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { entry, localFleet, SECRET } from './warm-fixtures.js';

async function scanAll(
  tier: Scanning,
  ns: string,
  opts: { prefix?: string; limit: number },
): Promise<{ items: ScanItem[]; pages: number }> {
  const items: ScanItem[] = [];
  let cursor: string | null = null;
  for (let pages = 1; pages < 10_000; pages++) {
    const page = await tier.scan(ns, { ...opts, cursor });
    items.push(...page.items);
    cursor = page.cursor;
    if (cursor === null) return { items, pages };
  }
  throw new Error('scan did not finish');
}

const KEYS = ['a', 'a/b', 'ab', 'user:1', 'user:10', 'user:2', 'user:ü', 'x'.repeat(300), '日本', '{braces}', '*star?'];
const uniq = (items: ScanItem[]) => [...new Set(items.map((i) => i.key))].sort();

/** What every backend must do; `exact`: no duplicates (all but Redis, whose SCAN may repeat a key). */
function contract(make: () => Tier & Scanning, opts: { exact: boolean; pageLimits: number[] }) {
  let tier: Tier & Scanning;
  let ns: string;
  beforeAll(async () => {
    tier = make();
    ns = uniqueName('scan')
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '')
      .slice(0, 40);
    for (const [i, k] of KEYS.entries())
      await tier.put(ns, k, entry(10 + i, `value of ${k}`, { tags: i % 3 === 0 ? ['third'] : [] }));
    await tier.put(ns, 'gone', makeTombstone(99, 3_600_000));
    await tier.put(`${ns}x`, 'a', entry(1, 'a namespace whose name extends this one'));
  });
  afterAll(() => tier.close());

  it('lists the namespace (and only it) over pages of any size, with each entry header', async () => {
    for (const limit of opts.pageLimits) {
      const { items } = await scanAll(tier, ns, { limit });
      expect(uniq(items)).toEqual([...KEYS, 'gone'].sort());
      if (opts.exact) expect(items).toHaveLength(KEYS.length + 1);
      for (const it of items) {
        if (it.key === 'gone') expect(it.header).toMatchObject({ version: 99, flags: { tombstone: true } });
        else {
          const i = KEYS.indexOf(it.key);
          expect(it.header).toMatchObject({
            version: 10 + i,
            size: Buffer.byteLength(`value of ${it.key}`),
            tags: i % 3 === 0 ? ['third'] : [],
          });
        }
      }
    }
  });

  it('filters by a prefix of the user key', async () => {
    await expect(scanAll(tier, ns, { prefix: 'user:1', limit: 4 }).then((r) => uniq(r.items))).resolves.toEqual([
      'user:1',
      'user:10',
    ]);
    await expect(scanAll(tier, ns, { prefix: 'a', limit: 4 }).then((r) => uniq(r.items))).resolves.toEqual(['a', 'a/b', 'ab']);
    await expect(scanAll(tier, ns, { prefix: '*', limit: 4 }).then((r) => uniq(r.items))).resolves.toEqual(['*star?']);
    await expect(scanAll(tier, ns, { prefix: 'none-such', limit: 4 }).then((r) => r.items)).resolves.toEqual([]);
  });

  it('lists the same keys without their headers where it offers keys (a cold tier), with the same prefix rule', async () => {
    if (!supportsKeyListing(tier)) return expect(tier.kind).toMatch(/redis|cachenode/);
    for (const limit of opts.pageLimits) {
      const keys: string[] = [];
      let cursor: string | null = null;
      do {
        const page: KeyPage = await tier.keys(ns, { limit, cursor });
        expect(page.keys.length).toBeLessThanOrEqual(limit);
        keys.push(...page.keys);
        cursor = page.cursor;
      } while (cursor !== null);
      expect(keys.sort()).toEqual([...KEYS, 'gone'].sort());
    }
    expect((await tier.keys(ns, { prefix: 'user:1', limit: 100 })).keys.sort()).toEqual(['user:1', 'user:10']);
  });
}

describe('RedisTier.scan (redis-server)', () => {
  contract(() => RedisTier.fromUrl(testRedisUrl(), { keyPrefix: uniqueName('scan') }), {
    exact: false,
    pageLimits: [1, 3, 1000],
  });

  it('refuses a cursor that is not its own with a typed error', async () => {
    const t = RedisTier.fromUrl(testRedisUrl(), { keyPrefix: uniqueName('scan') });
    await expect(t.scan('ns', { cursor: 'k:abc', limit: 10 })).rejects.toBeInstanceOf(ValidationError);
    await t.close();
  });
});

describe('S3Tier.scan (LocalStack)', () => {
  const bucket = uniqueName('strata-scan').toLowerCase();
  beforeAll(async () => {
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
  });
  contract(() => new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' }), { exact: true, pageLimits: [2, 1000] });

  it('lists its namespaces from common prefixes, sorted, without the staged uploads', async () => {
    const t = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1', prefix: 'listed' });
    for (const ns of ['zeta', 'alpha', 'mid-1']) await t.put(ns, 'k', entry(1, ns));
    await t.put('alpha', 'k2', entry(1, 'second key, same namespace'));
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'listed/_uploads/abcdefgh', Body: 'staged' }));
    s3.destroy();
    expect(await t.namespaces()).toEqual(['alpha', 'mid-1', 'zeta']);
    await t.close();
  });

  it('HEADs only the keys a match wants (a replacement node fills a quarter of a namespace)', async () => {
    const t = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    const keys = Array.from({ length: 24 }, (_, i) => `m${i}`);
    for (const [i, k] of keys.entries()) await t.put('matched', k, entry(i + 1, k));
    const wanted = (k: string) => Number(k.slice(1)) % 4 === 0;
    const heads: string[] = [];
    const head = t.head.bind(t);
    t.head = (ns, key) => (heads.push(key), head(ns, key));
    const { items } = await scanAll({ scan: (ns, o) => t.scan(ns, { ...o, match: wanted }) }, 'matched', { limit: 1000 });
    expect(uniq(items)).toEqual(keys.filter(wanted).sort());
    expect(heads.sort()).toEqual(keys.filter(wanted).sort());
    // Its keys: the same wanted keys, and no HEAD at all (the fill reads each entry anyway).
    heads.length = 0;
    expect((await t.keys('matched', { limit: 1000, match: wanted })).keys.sort()).toEqual(keys.filter(wanted).sort());
    expect(heads).toEqual([]);
    await t.close();
  });
});

describe('WarmTier.scan (three cache-node processes)', () => {
  const fleet = localFleet();
  const admin = new NodeClient({ secret: SECRET });
  let ring: RingDocument;
  let store: RingStore;

  beforeAll(async () => {
    const nodes = await Promise.all(['s1', 's2', 's3'].map((id) => fleet.launch(id)));
    store = new RingStore(new InMemoryCasStore());
    ring = await store.create(
      initialRing(
        nodes.map((n) => ({ id: n.nodeId, url: n.url })),
        2,
      ),
    );
    await Promise.all(nodes.map((n) => admin.pushRing(n.url, ring)));
  });
  afterAll(async () => {
    await admin.close();
    await fleet.closeAll();
  });

  contract(() => new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET }), {
    exact: true,
    pageLimits: [1, 5, 1000],
  });

  it('walks every range of every node: keys of all namespaces count against the page, matches are kept', async () => {
    const t = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET });
    const keys = Array.from({ length: 60 }, (_, i) => `k${i}`);
    await t.putMany(
      'wide',
      keys.map((k, i) => ({ key: k, entry: entry(i + 1, k) })),
    );
    await t.putMany(
      'noise',
      keys.map((k) => ({ key: k, entry: entry(1, 'noise') })),
    );
    const { items, pages } = await scanAll(t, 'wide', { limit: 7 });
    expect(uniq(items)).toEqual([...keys].sort());
    expect(items).toHaveLength(60);
    // At most 7 entries examined per page, of any namespace: more pages than 60/7.
    expect(pages).toBeGreaterThan(Math.ceil(60 / 7));
    // Headers only travel: the sizes are the stored ones.
    for (const it of items) expect(it.header.size).toBe(Buffer.byteLength(it.key));
    await expect(t.scan('wide', { cursor: 'bogus', limit: 1 })).rejects.toBeInstanceOf(ValidationError);
    await t.close();
  });
});
