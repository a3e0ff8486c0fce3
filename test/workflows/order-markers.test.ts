/**
 * The order-markers workflow: the synthesized state machine under the local runner with the real step handlers, over
 * a real S3 tier on LocalStack (and a memory tier, which keeps no markers and is skipped). Prune deletes the markers
 * of deleted objects once they are an hour old, and keeps those of live objects and young ones; backfill gives
 * marker-less objects a marker so ordered listings find them; a batch resumes from the cursor its state carries.
 */
import { CreateBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { Entry } from '../../core/model/entry.js';
import { contentHash } from '../../core/model/keys.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { s3OrderMarkerKey } from '../../core/tiers/storage-key.js';
import { localWorkflows, type LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { stepHandlers } from '../../core/workflows/steps/handlers.js';
import type { OrderMarkersTotals } from '../../core/workflows/steps/order-marker-steps.js';
import { mapLimit } from '../../core/util/concurrency.js';
import { removeBucket, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { honourConditionalDeletes } from '../helpers/s3-conditional-delete.js';
import { localFleet, SECRET } from '../integration/warm-fixtures.js';
import { definitions } from './harness.js';

const HOUR = 3600_000;

function entry(version: number, value = 'v'): Entry {
  const v = Buffer.from(value);
  return { header: { version, expiresAt: null, size: v.length, hash: contentHash(v), tags: [], flags: {} }, value: v };
}

describe('OrderMarkers state machine (local runner, real step handlers, LocalStack S3)', () => {
  const bucket = uniqueName('strata-markers-wf').toLowerCase();
  const fleet = localFleet(); // no node is launched: the workflow needs none
  let admin: S3Client;
  const clients: S3Client[] = [];
  const closers: (() => Promise<void>)[] = [];
  /** The tiers' clock offset: +2 h makes every marker written so far old enough to prune. */
  let offset = 0;
  const metrics: { key: string; value: number }[] = [];

  const client = (): S3Client => {
    const c = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    clients.push(c);
    return c;
  };
  /** A cold tier over the shared bucket; `conditional`: DeleteObject honours If-Match (LocalStack answers 501). */
  const coldTier = (conditional = true): S3Tier => {
    const c = client();
    const t = new S3Tier({
      bucket,
      client: conditional ? honourConditionalDeletes(c, admin) : c,
      now: () => Date.now() + offset,
    });
    closers.push(() => t.close());
    return t;
  };
  const run = (cold: S3Tier): LocalWorkflows => {
    const local = localWorkflows({
      definitions: definitions(),
      cas: new InMemoryCasStore(),
      fleet,
      secret: SECRET,
      // hot keeps no markers: skipped, as the sweep skips tiers that cannot scan.
      tiers: { hot: new MemoryTier({ name: 'hot', maxBytes: 1 << 20 }), cold },
      retryIntervalMs: 20,
      metric: (key, value) => metrics.push({ key, value }),
    });
    closers.push(() => local.close());
    return local;
  };
  const markersOf = async (ns: string): Promise<string[]> => {
    const res = await admin.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `v1/_k/${ns}/` }));
    return (res.Contents ?? []).map((o) => o.Key!).sort();
  };
  const marker = (ns: string, key: string) => s3OrderMarkerKey('v1', ns, key);

  beforeAll(async () => {
    admin = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  });

  beforeEach(() => {
    offset = 0;
    metrics.length = 0;
  });

  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  afterAll(async () => {
    for (const c of clients) c.destroy();
    await fleet.closeAll();
    if (!admin) return;
    await removeBucket(admin, bucket);
    admin.destroy();
  });

  it('prunes the markers of deleted objects once they are an hour old, in every namespace, and keeps the rest', async () => {
    const writer = coldTier();
    const live = ['a', 'b/1', 'c', '\u{1F600}'];
    const gone = Array.from({ length: 9 }, (_, i) => `gone/${i}`);
    await mapLimit([...live, ...gone], 8, (k) => writer.put('pa', k, entry(1, k)));
    await writer.put('pb', 'kept', entry(1));
    await writer.put('pb', 'dropped', entry(1));
    await mapLimit(gone, 8, (k) => writer.delete('pa', k));
    await writer.delete('pb', 'dropped');
    const before = { pa: await markersOf('pa'), pb: await markersOf('pb') };
    expect(before.pa).toHaveLength(live.length + gone.length);

    // Now: every marker is young, whatever became of its object (a creation may have just written it).
    const young = run(coldTier());
    const first = await young.runner.wait(young.runner.start('order-markers', { mode: 'prune', limit: 4 }).name);
    expect([first.status, first.error]).toEqual(['SUCCEEDED', undefined]);
    expect(first.output).toMatchObject({ removed: 0, young: 15, listed: 15, unsupported: false, skipped: ['hot'] });
    expect({ pa: await markersOf('pa'), pb: await markersOf('pb') }).toEqual(before);

    // Two hours on: the markers of the deleted objects go, those of live objects stay.
    offset = 2 * HOUR;
    const later = run(coldTier());
    const done = await later.runner.wait(later.runner.start('order-markers', { mode: 'prune', limit: 4 }).name);
    expect([done.status, done.error]).toEqual(['SUCCEEDED', undefined]);
    const totals = done.output as OrderMarkersTotals;
    expect(totals).toMatchObject({ mode: 'prune', listed: 15, removed: 10, kept: 5, young: 0, unsupported: false });
    expect(totals.namespaces).toBeGreaterThanOrEqual(2);
    expect(totals.batches).toBeGreaterThan(4); // pages of 4, namespace after namespace
    expect(await markersOf('pa')).toEqual(live.map((k) => marker('pa', k)).sort());
    expect(await markersOf('pb')).toEqual([marker('pb', 'kept')]);
    expect((await writer.listOrdered('pa', { limit: 100 })).keys).toEqual(['a', 'b/1', 'c', '\u{1F600}']);
    expect(metrics.filter((m) => m.key === 'orderMarkersRemoved').reduce((s, m) => s + m.value, 0)).toBe(10);
    const progress = await later.deps.progress.get(done.name);
    expect(progress).toMatchObject({ outcome: 'succeeded', keys: 10, workflow: 'order-markers' });
    expect(progress!.phase).toMatch(/^removed 10 stale order markers of 15 listed/);
  });

  it('keeps every marker and reports unsupported where S3 refuses conditional deletes (LocalStack: 501)', async () => {
    const writer = coldTier(false);
    await writer.put('pu', 'k', entry(1));
    await writer.delete('pu', 'k');
    offset = 2 * HOUR;
    const local = run(coldTier(false));
    const done = await local.runner.wait(local.runner.start('order-markers', { mode: 'prune', ns: 'pu' }).name);
    expect([done.status, done.error]).toEqual(['SUCCEEDED', undefined]);
    expect(done.output).toMatchObject({ unsupported: true, removed: 0, kept: 1 });
    expect(await markersOf('pu')).toEqual([marker('pu', 'k')]);
    const progress = await local.deps.progress.get(done.name);
    expect(progress).toMatchObject({ outcome: 'succeeded', facts: { unsupported: true } });
    expect(progress!.phase).toMatch(/^unsupported: /);
  });

  it('backfills the markers of objects written before markers existed, so an ordered listing finds them', async () => {
    const writer = coldTier();
    const keys = Array.from({ length: 17 }, (_, i) => `old/${String(i).padStart(2, '0')}`);
    await mapLimit(keys, 8, (k) => writer.put('bf', k, entry(1, k)));
    // As a writer that predates markers left them: the objects alone.
    await admin.send(
      new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.slice(2).map((k) => ({ Key: marker('bf', k) })) } }),
    );
    expect((await writer.listOrdered('bf', { limit: 100 })).keys).toEqual(keys.slice(0, 2));
    const local = run(coldTier());
    const done = await local.runner.wait(local.runner.start('order-markers', { mode: 'backfill', ns: 'bf', limit: 5 }).name);
    expect([done.status, done.error]).toEqual(['SUCCEEDED', undefined]);
    expect(done.output).toMatchObject({ mode: 'backfill', listed: 17, created: 15, namespaces: 1 });
    expect((done.output as OrderMarkersTotals).batches).toBe(4);
    expect(await writer.listOrdered('bf', { limit: 100 })).toEqual({ keys, more: false });
    expect(metrics.filter((m) => m.key === 'orderMarkersCreated').reduce((s, m) => s + m.value, 0)).toBe(15);
    // Run again: every object has its marker, none is written twice.
    const again = await local.runner.wait(local.runner.start('order-markers', { mode: 'backfill', ns: 'bf' }).name);
    expect(again.output).toMatchObject({ listed: 17, created: 0 });
  });

  it('resumes a prune from the cursor in its state: each marker listed once, across a new step process', async () => {
    const writer = coldTier();
    const keys = Array.from({ length: 12 }, (_, i) => `r/${String(i).padStart(2, '0')}`);
    await mapLimit(keys, 8, (k) => writer.put('rs', k, entry(1, k)));
    await mapLimit(
      keys.filter((_, i) => i % 2 === 0),
      8,
      (k) => writer.delete('rs', k),
    );
    offset = 2 * HOUR;
    const begin = stepHandlers(run(coldTier()).deps);
    let state = (await begin['order-markers.begin']({ execution: 'resume', mode: 'prune', ns: 'rs', limit: 5 })) as {
      done: boolean;
      cursor: string | null;
      totals: OrderMarkersTotals;
    };
    state = (await begin['order-markers.batch']({ execution: 'resume', batch: state })) as typeof state;
    expect(state).toMatchObject({ done: false, tier: 1, totals: { listed: 0, skipped: ['hot'] } }); // no markers in hot
    state = (await begin['order-markers.batch']({ execution: 'resume', batch: state })) as typeof state;
    expect(state).toMatchObject({ done: false, totals: { listed: 5, removed: 3 } });
    expect(state.cursor).not.toBeNull();
    // Each further batch as a fresh step Lambda would run it: from the state alone.
    for (let i = 0; i < 10 && !state.done; i++) {
      const fresh = stepHandlers(run(coldTier()).deps);
      state = JSON.parse(
        JSON.stringify(await fresh['order-markers.batch']({ execution: 'resume', batch: state })),
      ) as typeof state;
    }
    expect(state).toMatchObject({ done: true, totals: { listed: 12, removed: 6, kept: 6, batches: 3 } });
    expect(await markersOf('rs')).toEqual(
      keys
        .filter((_, i) => i % 2 === 1)
        .map((k) => marker('rs', k))
        .sort(),
    );
  });

  it('rejects a bad request in its first state, before anything is listed', async () => {
    const local = run(coldTier());
    for (const input of [{}, { mode: 'compact' }, { mode: 'prune', ns: 'Not A Namespace' }, { mode: 'prune', limit: 5000 }]) {
      const done = await local.runner.wait(local.runner.start('order-markers', input).name);
      expect([input, done.status, done.states]).toEqual([input, 'FAILED', ['Begin']]);
    }
  });
});
