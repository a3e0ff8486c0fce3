/**
 * Eviction from the warm tier to S3 (core/workflows/steps/evict.ts) over real parts: two cache-node processes
 * with a ring, LocalStack S3 as the cold tier, and the real Coordinator for the read path.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { NotFoundError, ValidationError } from '../../core/errors.js';
import type { Entry } from '../../core/model/entry.js';
import { initialRing, type RingDocument } from '../../core/ring/document.js';
import { ringHash, RING_MIN } from '../../core/ring/hash.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingRouter, RingView } from '../../core/ring/view.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import type { ScanItem } from '../../core/tiers/tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { evictBatch, planEviction, type EvictBatchResult, type EvictDeps } from '../../core/workflows/steps/evict.js';
import { removeBucket, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { entry, localFleet, SECRET } from './warm-fixtures.js';

const MiB = 1024 * 1024;
const CAPACITY = 2 * MiB;

describe('evict to S3 (cache-node processes, LocalStack S3)', () => {
  // No expiry sweeps on the nodes: expired entries stay until eviction drops them.
  const fleet = localFleet({ capacityBytes: CAPACITY, env: { STRATA_NODE_SWEEP_MS: '0' } });
  const nodes = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  const bucket = uniqueName('strata-evict').toLowerCase();
  let s3: S3Client;
  let cold: S3Tier;
  let store: RingStore;
  let ring: RingDocument;
  let urls: Record<string, string>;
  let view: RingView;
  let warm: WarmTier;

  beforeAll(async () => {
    s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    cold = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    const launched = await Promise.all(['e1', 'e2'].map((id) => fleet.launch(id)));
    urls = Object.fromEntries(launched.map((n) => [n.nodeId, n.url]));
    store = new RingStore(new InMemoryCasStore());
    ring = await store.create(
      initialRing(
        launched.map((n) => ({ id: n.nodeId, url: n.url })),
        1,
      ),
    );
    await Promise.all(Object.values(urls).map((u) => nodes.pushRing(u, ring)));
    view = new RingView({ store, refreshIntervalMs: 0 });
    warm = new WarmTier({ ring: view, client: nodes });
  });

  beforeEach(async () => {
    // Every test starts from empty nodes (a fresh SIEVE order).
    await Promise.all(Object.values(urls).map((u) => nodes.deleteRange(u, RING_MIN, null, true)));
  });

  afterAll(async () => {
    await warm?.close();
    await nodes.close();
    await fleet.closeAll();
    await cold?.close();
    await removeBucket(s3, bucket);
    s3.destroy();
  });

  const deps = (extra: Partial<EvictDeps> = {}): EvictDeps => ({ nodes, ring: view, cold, ...extra });
  const freshNs = () =>
    uniqueName('ev')
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '')
      .slice(0, 40);

  /** `n` keys of `ns` whose range `nodeId` owns, in order. */
  function keysOn(nodeId: string, ns: string, n: number, prefix = 'k'): string[] {
    const router = new RingRouter(ring);
    const out: string[] = [];
    for (let i = 0; out.length < n; i++) {
      const k = `${prefix}${i}`;
      if (router.route(ringHash(ns, k)).owner.id === nodeId) out.push(k);
    }
    return out;
  }

  /** Runs evictBatch until done, as the state machine does. */
  async function evictAll(input: Record<string, unknown>, d: EvictDeps = deps()): Promise<EvictBatchResult[]> {
    const calls: EvictBatchResult[] = [];
    let cursor: unknown = null;
    for (let i = 0; i < 100; i++) {
      const r = await evictBatch(d, { ...input, cursor });
      calls.push(r);
      if (r.done) return calls;
      cursor = r.cursor;
    }
    throw new Error('eviction did not finish');
  }

  async function coldKeys(ns: string): Promise<ScanItem[]> {
    const out: ScanItem[] = [];
    let cursor: string | null = null;
    do {
      const page = await cold.scan(ns, { cursor, limit: 1000 });
      out.push(...page.items);
      cursor = page.cursor;
    } while (cursor);
    return out.sort((a, b) => a.key.localeCompare(b.key));
  }

  const moved = (r: EvictBatchResult) => r.report.filter((l) => l.outcome === 'moved').map((l) => l.key);

  it('moves exactly the victims the node names, in its SIEVE order, and nothing else', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 12);
    for (const [i, k] of keys.entries()) await nodes.put(urls.e1!, ns, k, entry(100 + i, `value ${k}`), ring.version);
    // Read the first two: SIEVE spares them once, so the victims are keys[2..6].
    await nodes.get(urls.e1!, ns, keys[0]!, ring.version);
    await nodes.get(urls.e1!, ns, keys[1]!, ring.version);

    const [r, ...more] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB, maxKeys: 5 });
    expect(more).toEqual([]);
    expect(r).toMatchObject({ done: true, reason: 'max-keys', keys: 5, skippedChanged: 0, skippedExpired: 0, failed: 0 });
    expect(moved(r!)).toEqual(keys.slice(2, 7));
    expect(r!.bytes).toBe(keys.slice(2, 7).reduce((s, k) => s + Buffer.byteLength(`value ${k}`), 0));
    expect(r!.cursor).toMatchObject({ keys: 5, bytes: r!.bytes, calls: 1 });

    // The node lost exactly those; S3 gained exactly those, each at its version with its bytes.
    for (const [i, k] of keys.entries()) {
      const onNode = await nodes.head(urls.e1!, ns, k, ring.version);
      if (i >= 2 && i < 7) expect(onNode).toBeUndefined();
      else expect(onNode).toMatchObject({ version: 100 + i });
    }
    const inS3 = await coldKeys(ns);
    expect(inS3.map((x) => x.key)).toEqual(keys.slice(2, 7).sort());
    for (const x of inS3) {
      const i = keys.indexOf(x.key);
      expect(x.header).toMatchObject({ version: 100 + i, size: Buffer.byteLength(`value ${x.key}`) });
      await expect(cold.get(ns, x.key)).resolves.toMatchObject({ value: Buffer.from(`value ${x.key}`) });
    }
  });

  it('plans the nodes above their watermark and evicts them down to it', async () => {
    const ns = freshNs();
    const big = Buffer.alloc(100_000, 7);
    for (const k of keysOn('e1', ns, 19)) await nodes.put(urls.e1!, ns, k, entry(1, big), ring.version);
    for (const k of keysOn('e2', ns, 2)) await nodes.put(urls.e2!, ns, k, entry(1, big), ring.version);
    const s1 = await nodes.stats(urls.e1!);
    expect(s1.fill).toBeGreaterThan(0.85);

    const plan = await planEviction(deps(), {});
    expect(plan.ringVersion).toBe(ring.version);
    expect(plan.nodes).toEqual([
      {
        nodeId: 'e1',
        url: urls.e1,
        bytes: s1.bytes,
        capacityBytes: CAPACITY,
        fill: s1.fill,
        watermark: 0.85,
        targetBytes: Math.ceil(s1.bytes - 0.85 * CAPACITY),
      },
    ]);
    expect(plan.skipped).toEqual([{ nodeId: 'e2', reason: expect.stringContaining('below its watermark') }]);
    expect(plan.totalBytes).toBe(plan.nodes[0]!.targetBytes);

    const calls = await evictAll({ nodeId: 'e1', maxBytes: plan.nodes[0]!.targetBytes });
    const last = calls[calls.length - 1]!;
    expect(last).toMatchObject({ done: true, reason: 'target-reached' });
    expect(last.cursor.freedBytes).toBeGreaterThanOrEqual(plan.nodes[0]!.targetBytes);
    // One victim at a time beyond the target at most.
    expect(last.cursor.freedBytes - plan.nodes[0]!.targetBytes).toBeLessThan(big.length + 1000);
    expect((await nodes.stats(urls.e1!)).fill).toBeLessThan(0.85);
    expect((await coldKeys(ns)).length).toBe(last.cursor.keys);
    await expect(planEviction(deps(), {})).resolves.toMatchObject({ nodes: [] });

    // A named node is planned whatever its fill, down to the fill asked for.
    const e2 = await planEviction(deps(), { nodeId: 'e2', targetFill: 0 });
    expect(e2.nodes).toEqual([expect.objectContaining({ nodeId: 'e2', targetBytes: (await nodes.stats(urls.e2!)).bytes })]);
    // Forced: every node, with an amount.
    const forced = await planEviction(deps(), { force: true, bytesPerNode: 1000 });
    expect(forced.nodes.map((n) => [n.nodeId, n.targetBytes]).sort()).toEqual([
      ['e1', 1000],
      ['e2', 1000],
    ]);
  });

  it('a key rewritten on the node while it is being copied keeps its new version there', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 4);
    for (const k of keys) await nodes.put(urls.e1!, ns, k, entry(10, `old ${k}`), ring.version);
    const raced = keys[1]!;
    // A real S3 tier whose copy of `raced` is overtaken by a new write on the node (as a client write would).
    class OvertakenS3Tier extends S3Tier {
      override async put(n: string, k: string, e: Entry) {
        if (k === raced) await nodes.put(urls.e1!, n, k, entry(20, 'new value'), ring.version);
        return super.put(n, k, e);
      }
    }
    const racing = new OvertakenS3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    const [r] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB, maxKeys: 4 }, deps({ cold: racing }));
    await racing.close();
    expect(r!.report.find((l) => l.key === raced)).toMatchObject({ outcome: 'changed', version: 10 });
    expect(r).toMatchObject({ keys: 3, skippedChanged: 1 });
    // The node keeps the new version; S3 has the old copy, which readers never see while the node has the new.
    await expect(nodes.get(urls.e1!, ns, raced, ring.version)).resolves.toMatchObject({
      header: { version: 20 },
      value: Buffer.from('new value'),
    });
    await expect(cold.head(ns, raced)).resolves.toMatchObject({ version: 10 });
    const coordinator = new Coordinator({
      tiers: [warm, cold],
      policies: new PolicyRegistry({ defaults: { promoteOnRead: false } }),
    });
    await expect(coordinator.get(ns, raced)).resolves.toMatchObject({
      tier: 'warm',
      entry: { header: { version: 20 }, value: Buffer.from('new value') },
    });
    // The next eviction of that key replaces the older copy below.
    const [again] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB });
    expect(moved(again!)).toContain(raced);
    await expect(cold.get(ns, raced)).resolves.toMatchObject({ header: { version: 20 }, value: Buffer.from('new value') });
  });

  it('evicted keys still read, from S3, through the coordinator (and promotion brings them back)', async () => {
    const marker = freshNs(); // hot holds location markers (write-around)
    const copied = freshNs(); // hot holds copies
    const promoted = freshNs();
    const policies = new PolicyRegistry({
      defaults: { promoteOnRead: false },
      namespaces: { [marker]: { writeAroundBytes: 1 }, [promoted]: { writeAroundBytes: 1, promoteOnRead: true } },
    });
    const hot = new MemoryTier({ name: 'hot', maxBytes: 8 * MiB });
    const coordinator = new Coordinator({ tiers: [hot, warm, cold], policies });
    const written = new Map<string, number>();
    for (const ns of [marker, copied, promoted]) {
      for (let i = 0; i < 8; i++)
        written.set(`${ns}/k${i}`, (await coordinator.put(ns, `k${i}`, Buffer.from(`${ns} ${i}`))).version);
    }
    for (const n of ['e1', 'e2']) {
      const calls = await evictAll({ nodeId: n, maxBytes: 100 * MiB });
      expect(calls[calls.length - 1]).toMatchObject({ done: true, reason: 'no-victims' });
    }
    expect((await nodes.stats(urls.e1!)).keys + (await nodes.stats(urls.e2!)).keys).toBe(0);

    for (let i = 0; i < 8; i++) {
      await expect(coordinator.get(marker, `k${i}`)).resolves.toMatchObject({
        tier: 'cold',
        entry: { header: { version: written.get(`${marker}/k${i}`) }, value: Buffer.from(`${marker} ${i}`) },
      });
      // The hot copy is the same version: still right to serve.
      await expect(coordinator.get(copied, `k${i}`)).resolves.toMatchObject({
        tier: 'hot',
        entry: { header: { version: written.get(`${copied}/k${i}`) } },
      });
    }
    // Without the hot tier (lost, or evicted there too) the copies read from S3 as well.
    const coldOnly = new Coordinator({ tiers: [new MemoryTier({ name: 'hot' }), warm, cold], policies });
    await expect(coldOnly.get(copied, 'k3')).resolves.toMatchObject({
      tier: 'cold',
      entry: { value: Buffer.from(`${copied} 3`) },
    });
    // A read of an evicted key promotes it back into the warm tier (at the same version).
    await expect(coordinator.get(promoted, 'k5')).resolves.toMatchObject({ tier: 'cold' });
    await coordinator.drain();
    await expect(warm.head(promoted, 'k5')).resolves.toMatchObject({ version: written.get(`${promoted}/k5`) });
  });

  it('drops expired victims without copying them', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 6);
    const soon = Date.now() + 300;
    for (const [i, k] of keys.entries())
      await nodes.put(urls.e1!, ns, k, entry(1, `v${i}`, i < 3 ? { expiresAt: soon } : {}), ring.version);
    await new Promise((r) => setTimeout(r, Math.max(0, soon - Date.now()) + 50));
    const [r] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB, maxKeys: 3 });
    // Expired victims come first, are not counted as moved, and free their bytes.
    expect(r).toMatchObject({ keys: 3, skippedExpired: 3 });
    expect(r!.report.slice(0, 3).map((l) => l.outcome)).toEqual(['expired', 'expired', 'expired']);
    expect(
      r!.report
        .slice(0, 3)
        .map((l) => l.key)
        .sort(),
    ).toEqual(keys.slice(0, 3).sort());
    expect((await coldKeys(ns)).map((x) => x.key)).toEqual(keys.slice(3).sort());
    expect((await nodes.stats(urls.e1!)).keys).toBe(0);
  });

  it('never evicts pinned keys', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 6);
    for (const k of keys) await warm.put(ns, k, entry(5, k));
    await expect(warm.setPinned(ns, keys[0]!, 5, true)).resolves.toBe(true);
    await expect(warm.setPinned(ns, keys[3]!, 5, true)).resolves.toBe(true);
    const calls = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB });
    expect(calls[calls.length - 1]).toMatchObject({ done: true, reason: 'no-victims' });
    expect(calls.reduce((s, c) => s + c.keys, 0)).toBe(4);
    expect((await coldKeys(ns)).map((x) => x.key)).toEqual([keys[1], keys[2], keys[4], keys[5]].sort());
    for (const k of [keys[0]!, keys[3]!])
      await expect(warm.head(ns, k)).resolves.toMatchObject({ version: 5, flags: { pinned: true } });
  });

  it('caps the copy bandwidth with a token bucket across the batch', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 10);
    for (const k of keys) await nodes.put(urls.e1!, ns, k, entry(1, Buffer.alloc(5000, 1)), ring.version);
    // A clock that only the bucket's waits move: the waits are computed, not timed.
    const clock = { t: 0, slept: [] as number[] };
    const d = deps({ now: () => clock.t, sleep: async (ms) => void (clock.slept.push(ms), (clock.t += ms)) });
    const [r] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB, rateBytesPerSec: 10_000 }, d);
    expect(r).toMatchObject({ keys: 10, bytes: 50_000 });
    // The first second's worth (the burst) goes at once; the other 40 000 bytes take 4 s at 10 000 B/s.
    const waited = clock.slept.reduce((s, ms) => s + ms, 0);
    expect(waited).toBeCloseTo(4000, 6);
    expect(r!.waitedMs).toBe(4000);
  });

  it('is resumable: a call that runs out of time returns a cursor, the next one carries on', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 9);
    for (const k of keys) await nodes.put(urls.e1!, ns, k, entry(1, k), ring.version);
    // Each page of victims "takes" the whole time budget.
    const clock = { t: 0 };
    const d = deps({ now: () => clock.t, onProgress: () => void (clock.t += 1000) });
    const calls = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB, maxMs: 1000, pageSize: 3 }, d);
    expect(calls.map((c) => [c.keys, c.done, c.reason])).toEqual([
      [3, false, 'time'],
      [3, false, 'time'],
      [3, false, 'time'],
      [0, true, 'no-victims'],
    ]);
    expect(calls[3]!.cursor).toEqual({
      keys: 9,
      bytes: keys.reduce((s, k) => s + k.length, 0),
      freedBytes: expect.any(Number),
      calls: 4,
      idleCalls: 1,
    });
    expect((await coldKeys(ns)).map((x) => x.key)).toEqual([...keys].sort());
  });

  it('validates its input with typed errors', async () => {
    await expect(evictBatch(deps(), { maxBytes: 10 })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { field: 'input.nodeId' },
    });
    await expect(evictBatch(deps(), { nodeId: 'e1', maxBytes: -1 })).rejects.toBeInstanceOf(ValidationError);
    await expect(evictBatch(deps(), { nodeId: 'e1', maxBytes: 10, verify: 'maybe' })).rejects.toBeInstanceOf(ValidationError);
    await expect(evictBatch(deps(), { nodeId: 'e1', maxBytes: 10, extra: 1 })).rejects.toBeInstanceOf(ValidationError);
    await expect(evictBatch(deps(), { nodeId: 'nope', maxBytes: 10 })).rejects.toBeInstanceOf(NotFoundError);
    await expect(planEviction(deps(), { force: true })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { field: 'input.force' },
    });
    await expect(planEviction(deps(), { nodeId: 'nope' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(planEviction(deps(), { targetFill: 2 })).rejects.toBeInstanceOf(ValidationError);
  });

  // Last: it changes the ring.
  it('leaves keys of ranges that migrate, or that the node no longer owns', async () => {
    const ns = freshNs();
    const keys = keysOn('e1', ns, 4);
    for (const k of keys) await nodes.put(urls.e1!, ns, k, entry(1, k), ring.version);
    const publish = async (edit: (d: RingDocument, next: number) => void) => {
      ring = await store.update(edit);
      await Promise.all(Object.values(urls).map((u) => nodes.pushRing(u, ring)));
    };
    const loader = deps({ ring: async () => (await store.load())! });
    const e1Range = ring.ranges.findIndex((r) => r.owner === 'e1');
    await publish((d, next) => {
      d.ranges[e1Range]!.pending = { target: 'e2', session: 'test' };
      d.ranges[e1Range]!.epoch = next;
    });
    const [migrating] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB }, loader);
    expect(migrating).toMatchObject({ keys: 0, skippedMigrating: 4, done: true, reason: 'only-unevictable' });
    await publish((d, next) => {
      d.ranges[e1Range]!.owner = 'e2';
      delete d.ranges[e1Range]!.pending;
      d.ranges[e1Range]!.epoch = next;
    });
    const [notOwned] = await evictAll({ nodeId: 'e1', maxBytes: 100 * MiB }, loader);
    expect(notOwned).toMatchObject({ keys: 0, skippedNotOwned: 4 });
    expect((await nodes.stats(urls.e1!)).keys).toBe(4);
    expect(await coldKeys(ns)).toEqual([]);
  });
});
