/**
 * Tier migration (core/workflows/steps/tier-migrate.ts) over real tiers: the embedded memory hot tier and a real
 * redis-server, two cache-node processes for warm, LocalStack S3 for cold; reads through the real Coordinator.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { ValidationError } from '../../core/errors.js';
import type { Entry } from '../../core/model/entry.js';
import { initialRing } from '../../core/ring/document.js';
import { RING_MIN } from '../../core/ring/hash.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { RedisTier } from '../../core/tiers/redis/redis-tier.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import type { Tier } from '../../core/tiers/tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { evictBatch } from '../../core/workflows/steps/evict.js';
import { tierMigrateBatch, type TierMigrateDeps, type TierMigrateResult } from '../../core/workflows/steps/tier-migrate.js';
import { testRedisUrl, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { entry, localFleet, SECRET } from './warm-fixtures.js';

const MiB = 1024 * 1024;

describe('tier migration (memory/redis hot, cache-node processes, LocalStack S3)', () => {
  const fleet = localFleet();
  const nodes = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  const bucket = uniqueName('strata-migrate').toLowerCase();
  let cold: S3Tier;
  let warm: WarmTier;
  let redis: RedisTier;
  let view: RingView;
  let urls: string[];

  beforeAll(async () => {
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
    cold = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    const launched = await Promise.all(['m1', 'm2'].map((id) => fleet.launch(id)));
    urls = launched.map((n) => n.url);
    const store = new RingStore(new InMemoryCasStore());
    const ring = await store.create(
      initialRing(
        launched.map((n) => ({ id: n.nodeId, url: n.url })),
        2,
      ),
    );
    await Promise.all(urls.map((u) => nodes.pushRing(u, ring)));
    view = new RingView({ store, refreshIntervalMs: 0 });
    warm = new WarmTier({ ring: view, client: nodes });
    redis = RedisTier.fromUrl(testRedisUrl(), { keyPrefix: uniqueName('migrate') });
  });

  afterAll(async () => {
    await Promise.all([warm?.close(), cold?.close(), redis?.close()]);
    await nodes.close();
    await fleet.closeAll();
  });

  const freshNs = () =>
    uniqueName('tm')
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '')
      .slice(0, 40);

  /** Runs the step until done, as the state machine does; each call handles at most `maxKeys` keys. */
  async function migrateAll(
    deps: TierMigrateDeps,
    input: Record<string, unknown>,
  ): Promise<TierMigrateResult & { calls: number }> {
    const total = {
      calls: 0,
      scanned: 0,
      matched: 0,
      moved: 0,
      bytes: 0,
      alreadyThere: 0,
      skippedNewer: 0,
      skippedChanged: 0,
      skippedPinned: 0,
      full: 0,
      failed: 0,
      waitedMs: 0,
      report: [] as TierMigrateResult['report'],
    };
    let cursor: string | null = null;
    for (;;) {
      const r = await tierMigrateBatch(deps, { ...input, cursor });
      total.calls++;
      for (const k of [
        'scanned',
        'matched',
        'moved',
        'bytes',
        'alreadyThere',
        'skippedNewer',
        'skippedChanged',
        'skippedPinned',
        'full',
        'failed',
        'waitedMs',
      ] as const)
        total[k] += r[k];
      total.report.push(...r.report);
      if (r.done) return { ...total, done: true, cursor: null, reportTruncated: 0 };
      if (total.calls > 500) throw new Error('migration did not finish');
      cursor = r.cursor;
    }
  }

  async function writeAll(tier: Tier, ns: string, items: [key: string, version: number, tags?: string[]][]): Promise<void> {
    for (const [k, v, tags] of items) await tier.put(ns, k, entry(v, `${k}@${v}`, { tags: tags ?? [] }));
  }

  it('promotes a namespace from cold to hot: every key arrives with its version, other namespaces stay', async () => {
    const ns = freshNs();
    const other = freshNs();
    const keys = Array.from({ length: 23 }, (_, i) => `doc-${i}`);
    await writeAll(
      cold,
      ns,
      keys.map((k, i) => [k, 100 + i]),
    );
    await writeAll(cold, other, [['doc-0', 1]]);
    const hot = new MemoryTier({ name: 'hot', maxBytes: 8 * MiB });
    const r = await migrateAll(
      { hot, warm, cold },
      { selector: { ns }, action: 'promote', from: 'cold', to: 'hot', maxKeys: 5, pageSize: 5 },
    );
    expect(r).toMatchObject({ matched: 23, moved: 23, skippedNewer: 0, failed: 0 });
    expect(r.calls).toBeGreaterThanOrEqual(5); // 5 keys per call: resumed through the cursor
    for (const [i, k] of keys.entries())
      await expect(hot.get(ns, k)).resolves.toMatchObject({
        header: { version: 100 + i },
        value: Buffer.from(`${k}@${100 + i}`),
      });
    await expect(hot.get(other, 'doc-0')).resolves.toBeUndefined();
    // Promote keeps the original: cold still has everything.
    await expect(cold.head(ns, 'doc-7')).resolves.toMatchObject({ version: 107 });
    // Running it again moves nothing.
    await expect(
      migrateAll({ hot, cold }, { selector: { ns }, action: 'promote', from: 'cold', to: 'hot' }),
    ).resolves.toMatchObject({ moved: 0, alreadyThere: 23 });
  });

  it('promotes a key prefix from warm into Redis and never replaces a newer version there', async () => {
    const ns = freshNs();
    await writeAll(warm, ns, [
      ['user:1', 5],
      ['user:2', 5],
      ['user:3', 5],
      ['order:1', 5],
      ['username', 5],
    ]);
    // A concurrent writer already put a newer version of user:2 in the hot tier.
    await redis.put(ns, 'user:2', entry(9, 'newer'));
    const r = await migrateAll(
      { hot: redis, warm, cold },
      { selector: { ns, prefix: 'user:' }, action: 'promote', from: 'warm', to: 'hot' },
    );
    expect(r).toMatchObject({ matched: 3, moved: 2, skippedNewer: 1 });
    expect(r.report.find((l) => l.key === 'user:2')).toMatchObject({ outcome: 'newer' });
    await expect(redis.get(ns, 'user:2')).resolves.toMatchObject({ header: { version: 9 }, value: Buffer.from('newer') });
    for (const k of ['user:1', 'user:3'])
      await expect(redis.get(ns, k)).resolves.toMatchObject({ header: { version: 5 }, value: Buffer.from(`${k}@5`) });
    for (const k of ['order:1', 'username']) await expect(redis.get(ns, k)).resolves.toBeUndefined();
  });

  it('demotes a tag from warm to S3: verified copies, originals removed, reads served from S3', async () => {
    const ns = freshNs();
    await writeAll(warm, ns, [
      ['a', 3, ['archive']],
      ['b', 4, ['archive', 'x']],
      ['c', 5, ['x']],
      ['d', 6],
    ]);
    const r = await migrateAll(
      { warm, cold },
      { selector: { ns, tag: 'archive' }, action: 'demote', from: 'warm', to: 'cold', verify: 'content' },
    );
    expect(r).toMatchObject({ matched: 2, moved: 2, bytes: Buffer.byteLength('a@3') + Buffer.byteLength('b@4'), failed: 0 });
    for (const [k, v] of [
      ['a', 3],
      ['b', 4],
    ] as const) {
      await expect(warm.head(ns, k)).resolves.toBeUndefined();
      await expect(cold.get(ns, k)).resolves.toMatchObject({
        header: { version: v, tags: expect.arrayContaining(['archive']) },
        value: Buffer.from(`${k}@${v}`),
      });
    }
    for (const [k, v] of [
      ['c', 5],
      ['d', 6],
    ] as const) {
      await expect(warm.head(ns, k)).resolves.toMatchObject({ version: v });
      await expect(cold.head(ns, k)).resolves.toBeUndefined();
    }
    const coordinator = new Coordinator({
      tiers: [new MemoryTier({ name: 'hot' }), warm, cold],
      policies: new PolicyRegistry({ defaults: { promoteOnRead: false } }),
    });
    await expect(coordinator.get(ns, 'a')).resolves.toMatchObject({ tier: 'cold', entry: { header: { version: 3 } } });
    await expect(coordinator.get(ns, 'c')).resolves.toMatchObject({ tier: 'warm', entry: { header: { version: 5 } } });
  });

  it('demote: a key rewritten in the source during the copy keeps its new version there', async () => {
    const ns = freshNs();
    await writeAll(warm, ns, [
      ['k1', 10],
      ['k2', 10],
      ['k3', 10],
    ]);
    class OvertakenS3Tier extends S3Tier {
      override async put(n: string, k: string, e: Entry) {
        if (k === 'k2') await warm.put(n, k, entry(11, 'rewritten'));
        return super.put(n, k, e);
      }
    }
    const racing = new OvertakenS3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    const r = await migrateAll({ warm, cold: racing }, { selector: { ns }, action: 'demote', from: 'warm', to: 'cold' });
    await racing.close();
    expect(r).toMatchObject({ moved: 2, skippedChanged: 1 });
    expect(r.report.find((l) => l.key === 'k2')).toMatchObject({ outcome: 'changed', version: 10 });
    await expect(warm.get(ns, 'k2')).resolves.toMatchObject({ header: { version: 11 }, value: Buffer.from('rewritten') });
    const coordinator = new Coordinator({
      tiers: [warm, cold],
      policies: new PolicyRegistry({ defaults: { promoteOnRead: false } }),
    });
    await expect(coordinator.get(ns, 'k2')).resolves.toMatchObject({ tier: 'warm', entry: { header: { version: 11 } } });
    await expect(coordinator.get(ns, 'k1')).resolves.toMatchObject({ tier: 'cold', entry: { header: { version: 10 } } });
  });

  it('demote from hot past warm removes an older warm copy, so readers find the newest version below', async () => {
    const ns = freshNs();
    const hot = new MemoryTier({ name: 'hot' });
    // Write-back state: hot holds version 2 (dirty), warm still has version 1, cold nothing.
    await hot.put(ns, 'wb', entry(2, 'two', { flags: { dirty: true } }));
    await warm.put(ns, 'wb', entry(1, 'one'));
    await hot.put(ns, 'plain', entry(7, 'seven'));
    const r = await migrateAll({ hot, warm, cold }, { selector: { ns }, action: 'demote', from: 'hot', to: 'cold' });
    expect(r).toMatchObject({ matched: 2, moved: 2 });
    await expect(hot.head(ns, 'wb')).resolves.toBeUndefined();
    await expect(warm.head(ns, 'wb')).resolves.toBeUndefined();
    // The copy is clean below (the dirty flag belongs to the hot tier).
    await expect(cold.get(ns, 'wb')).resolves.toMatchObject({ header: { version: 2, flags: {} }, value: Buffer.from('two') });
    const coordinator = new Coordinator({
      tiers: [hot, warm, cold],
      policies: new PolicyRegistry({ defaults: { promoteOnRead: false } }),
    });
    await expect(coordinator.get(ns, 'wb')).resolves.toMatchObject({ tier: 'cold', entry: { header: { version: 2 } } });
    await expect(coordinator.get(ns, 'plain')).resolves.toMatchObject({ tier: 'cold', entry: { header: { version: 7 } } });
  });

  it('pins a prefix in the warm tier: eviction passes those keys over until they are unpinned', async () => {
    const ns = freshNs();
    await Promise.all(urls.map((u) => nodes.deleteRange(u, RING_MIN, null, true)));
    await writeAll(warm, ns, [
      ['keep:1', 1],
      ['keep:2', 1],
      ['tmp:1', 1],
      ['tmp:2', 1],
    ]);
    const pinned = await migrateAll({ warm, cold }, { selector: { ns, prefix: 'keep:' }, action: 'pin', from: 'warm' });
    expect(pinned).toMatchObject({ matched: 2, moved: 2 });
    for (const k of ['keep:1', 'keep:2'])
      await expect(warm.head(ns, k)).resolves.toMatchObject({ version: 1, flags: { pinned: true } });
    await expect(
      migrateAll({ warm, cold }, { selector: { ns, prefix: 'keep:' }, action: 'pin', from: 'warm' }),
    ).resolves.toMatchObject({ moved: 0, alreadyThere: 2 });

    const evictEverything = async () => {
      let n = 0;
      for (const nodeId of ['m1', 'm2']) {
        let cursor = null;
        for (;;) {
          const r = await evictBatch({ nodes, ring: view, cold }, { nodeId, maxBytes: 100 * MiB, cursor });
          n += r.keys;
          if (r.done) break;
          cursor = r.cursor;
        }
      }
      return n;
    };
    await expect(evictEverything()).resolves.toBe(2);
    for (const k of ['keep:1', 'keep:2']) await expect(warm.head(ns, k)).resolves.toMatchObject({ version: 1 });
    for (const k of ['tmp:1', 'tmp:2']) await expect(warm.head(ns, k)).resolves.toBeUndefined();

    await expect(
      migrateAll({ warm, cold }, { selector: { ns, prefix: 'keep:' }, action: 'unpin', from: 'warm' }),
    ).resolves.toMatchObject({ moved: 2 });
    await expect(evictEverything()).resolves.toBe(2);
    for (const k of ['keep:1', 'keep:2'])
      await expect(cold.get(ns, k)).resolves.toMatchObject({ header: { version: 1, flags: {} } });
  });

  it('pins keys from S3 into warm (copied, then pinned there; a newer warm version is left alone)', async () => {
    const ns = freshNs();
    await writeAll(cold, ns, [
      ['r1', 4, ['hot-set']],
      ['r2', 4, ['hot-set']],
      ['r3', 4],
    ]);
    await warm.put(ns, 'r2', entry(8, 'newer in warm'));
    const r = await migrateAll({ warm, cold }, { selector: { ns, tag: 'hot-set' }, action: 'pin', from: 'cold', to: 'warm' });
    expect(r).toMatchObject({ matched: 2, moved: 1, skippedNewer: 1 });
    await expect(warm.get(ns, 'r1')).resolves.toMatchObject({
      header: { version: 4, flags: { pinned: true } },
      value: Buffer.from('r1@4'),
    });
    await expect(warm.get(ns, 'r2')).resolves.toMatchObject({
      header: { version: 8, flags: {} },
      value: Buffer.from('newer in warm'),
    });
    await expect(warm.head(ns, 'r3')).resolves.toBeUndefined();
  });

  it('pins by tag in the memory hot tier: pinned entries survive pressure that evicts the rest', async () => {
    const ns = freshNs();
    const hot = new MemoryTier({ name: 'hot', maxBytes: 64 * 1024 });
    const kb = Buffer.alloc(1024, 3);
    for (let i = 0; i < 8; i++) await hot.put(ns, `t${i}`, entry(1, kb, { tags: i % 2 ? ['vip'] : [] }));
    await expect(migrateAll({ hot }, { selector: { ns, tag: 'vip' }, action: 'pin', from: 'hot' })).resolves.toMatchObject({
      moved: 4,
    });
    for (let i = 0; i < 200; i++) await hot.put(ns, `filler${i}`, entry(1, kb));
    for (let i = 0; i < 8; i++) await expect(hot.has(ns, `t${i}`)).resolves.toBe(i % 2 === 1);
  });

  it('validates its input, and what the tiers can do, with typed errors', async () => {
    const ns = freshNs();
    const deps = { hot: redis, warm, cold };
    const bad = async (input: Record<string, unknown>, field: string) => {
      const e = await tierMigrateBatch(deps, input).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).details).toMatchObject({ field });
    };
    await bad({ selector: { ns }, action: 'promote', from: 'hot', to: 'cold' }, 'input.to');
    await bad({ selector: { ns }, action: 'demote', from: 'cold', to: 'warm' }, 'input.to');
    await bad({ selector: { ns }, action: 'demote', from: 'warm' }, 'input.to');
    await bad({ selector: { ns: 'Not A Namespace' }, action: 'promote', from: 'cold', to: 'hot' }, 'input.selector.ns');
    await bad({ selector: { ns, tag: 'has space' }, action: 'pin', from: 'warm' }, 'input.selector.tag');
    await bad({ selector: { ns }, action: 'evaporate', from: 'warm' }, 'input.action');
    await bad({ selector: { ns }, action: 'unpin', from: 'warm', to: 'hot' }, 'input.to');
    await bad({ selector: { ns }, action: 'pin', from: 'cold' }, 'to'); // S3 has no eviction to exempt from
    await bad({ selector: { ns }, action: 'pin', from: 'hot' }, 'to'); // Redis evicts by its own policy
    await expect(
      tierMigrateBatch({ cold }, { selector: { ns }, action: 'promote', from: 'cold', to: 'hot' }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'to' } });
  });
});
