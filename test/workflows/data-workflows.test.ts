import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { RingView } from '../../core/ring/view.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import type { Entry } from '../../core/model/entry.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';
import { entry } from '../helpers/tiers.js';
import { SECRET } from '../integration/warm-fixtures.js';
import { harness, type Harness } from './harness.js';

const NS = 'evict';
const KEYS = 1200;
const VALUE = 1000;

/**
 * EvictToS3 and TierMigrate end to end: the synthesized state machines under aws-local-stepfunctions with the
 * real step handlers, three real cache nodes (capacity 1 MiB, watermark 30 %) and LocalStack S3 as the cold tier.
 */
describe('EvictToS3 and TierMigrate state machines (real nodes, LocalStack S3)', () => {
  let s3: S3Client;
  let cold: S3Tier;
  let h: Harness;
  let warm: WarmTier;
  const clock = new HybridLogicalClock();
  /** The first key copied to S3: rewritten on the node right after its copy, before the conditional delete. */
  let rewriteOnCopy: string | undefined;
  let armed = false;
  let rewritten: Entry | undefined;

  beforeAll(async () => {
    const bucket = uniqueName('strata-evict-wf').toLowerCase();
    s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    cold = new S3Tier({ bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    // The cold tier as the steps see it: a rewrite lands on the node right after the chosen key's copy.
    const stepCold = Object.create(cold) as S3Tier;
    stepCold.put = async (ns, key, e) => {
      const out = await cold.put(ns, key, e);
      if (armed && !rewritten) {
        rewriteOnCopy = key;
        rewritten = entry(clock.next(), Buffer.alloc(VALUE, 7));
        await warm.put(ns, key, rewritten);
      }
      return out;
    };
    h = await harness({
      tiers: { cold: stepCold },
      fleet: { capacityBytes: 1024 * 1024, env: { STRATA_NODE_WATERMARK: '0.3' } },
    });
    warm = new WarmTier({ ring: new RingView({ store: h.ring, refreshIntervalMs: 0 }), secret: SECRET });
    h.deps.tiers.warm = warm;
    for (let i = 0; i < KEYS; i += 100) {
      await warm.putMany(
        NS,
        Array.from({ length: 100 }, (_, j) => ({
          key: `k${i + j}`,
          entry: entry(clock.next(), Buffer.alloc(VALUE, (i + j) % 251), { tags: (i + j) % 10 === 0 ? ['hot'] : [] }),
        })),
      );
    }
  }, 300_000); // a hang bound: a loaded 2-core machine has taken over 120 s here

  afterAll(async () => {
    await warm?.close();
    await h?.close();
    await cold?.close();
    s3?.destroy();
  });

  it('evicts exactly the chosen victims to S3 (verified), keeps a key rewritten meanwhile, and evicted keys still read from S3', async () => {
    const urls = await h.urls();
    const before = await Promise.all(Object.values(urls).map((u) => h.client.stats(u)));
    expect(before.every((s) => s.fill > 0.3)).toBe(true);
    armed = true;

    const exec = h.runner.start('evict-to-s3', { rateBytesPerSec: 2_000_000, maxMs: 200 });
    const done = await h.runner.wait(exec.name);
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('SUCCEEDED');
    const report = done.output as {
      keys: number;
      bytes: number;
      skippedChanged: number;
      nodes: { nodeId: string; keys: number; report: { key: string; version: number; outcome: string }[] }[];
    };
    expect(report.nodes).toHaveLength(3);
    expect(report.keys).toBeGreaterThan(0);
    expect(report.skippedChanged).toBe(1);

    const moved = report.nodes.flatMap((n) => n.report.filter((l) => l.outcome === 'moved'));
    expect(moved).toHaveLength(report.keys); // the report lists every moved key (under its line limit)
    // Exactly the victims moved: each is in S3 with its version and gone from the warm tier; every other key stayed.
    const movedKeys = new Set(moved.map((l) => l.key));
    for (const l of moved) {
      expect((await cold.head(NS, l.key))?.version).toBe(l.version);
      expect(await warm.head(NS, l.key)).toBeUndefined();
    }
    const all = Array.from({ length: KEYS }, (_, i) => `k${i}`);
    const onWarm = await warm.getMany(NS, all);
    all.forEach((k, i) => expect([k, !!onWarm[i]]).toEqual([k, !movedKeys.has(k)]));
    // The rewritten key kept its new version on the node.
    expect(movedKeys.has(rewriteOnCopy!)).toBe(false);
    expect((await warm.head(NS, rewriteOnCopy!))?.version).toBe(rewritten!.header.version);
    // Nodes are back under their watermark.
    const after = await Promise.all(Object.values(urls).map((u) => h.client.stats(u)));
    expect(after.every((s) => s.fill <= 0.3 + 0.01)).toBe(true);
    // Evicted keys read through the coordinator, from S3.
    // (its own warm and cold tier objects: closing the coordinator closes them)
    const readCold = new S3Tier({ bucket: cold.bucket, endpoint: testS3Endpoint(), region: 'us-east-1' });
    const readWarm = new WarmTier({ ring: new RingView({ store: h.ring, refreshIntervalMs: 0 }), secret: SECRET });
    const coordinator = new Coordinator({
      tiers: [new MemoryTier({ name: 'hot', maxBytes: 1 << 20 }), readWarm, readCold],
      policies: new PolicyRegistry({}),
      flushTimer: false,
    });
    // Keys without the 'hot' tag (not every tenth): a read from S3 promotes the key back up into the warm tier, and
    // the TierMigrate test below counts tagged keys found there.
    const some = [...movedKeys].filter((k) => Number(k.slice(1)) % 10 !== 0).slice(0, 5);
    for (const k of some) {
      const r = await coordinator.get(NS, k);
      expect(r?.tier).toBe('cold');
      expect(r?.entry.value.equals(Buffer.alloc(VALUE, Number(k.slice(1)) % 251))).toBe(true);
    }
    await coordinator.close();
    const p = (await h.progress.get(exec.name))!;
    expect(p).toMatchObject({ workflow: 'evict-to-s3', total: 3, done: 3, outcome: 'succeeded', keys: report.keys });
    expect(h.metrics.filter((m) => m.key === 'keysEvicted').reduce((a, m) => a + m.value, 0)).toBe(report.keys);
  }, 300_000); // a hang bound: a loaded 2-core machine has taken over 120 s here

  it('TierMigrate promotes the tagged keys from S3 back to the warm tier, never over a newer write', async () => {
    // Evicted keys carrying the tag 'hot' (every tenth key) live in S3 now.
    const inCold: string[] = [];
    for (let i = 0; i < KEYS; i += 10) if (await cold.head(NS, `k${i}`)) inCold.push(`k${i}`);
    expect(inCold.length).toBeGreaterThan(0);
    // One of them is written anew on the warm tier meanwhile: the promotion must not replace it.
    const newer = entry(clock.next(), 'newer', { tags: ['hot'] });
    await warm.put(NS, inCold[0]!, newer);

    const done = await h.runner.wait(
      h.runner.start('tier-migrate', {
        selector: { ns: NS, tag: 'hot' },
        action: 'promote',
        from: 'cold',
        to: 'warm',
        maxKeys: 3,
      }).name,
    );
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('SUCCEEDED');
    const totals = done.output as { moved: number; skippedNewer: number; matched: number; calls: number };
    expect(totals.matched).toBe(inCold.length);
    expect(totals.skippedNewer).toBe(1);
    expect(totals.moved).toBe(inCold.length - 1);
    expect(totals.calls).toBeGreaterThan(1); // several bounded batches, resumed from the cursor
    for (const k of inCold.slice(1)) expect((await warm.head(NS, k))?.version).toBe((await cold.head(NS, k))?.version);
    expect((await warm.head(NS, inCold[0]!))?.version).toBe(newer.header.version);
  }, 300_000); // a hang bound: a loaded 2-core machine has taken over 120 s here

  it('rejects a bad TierMigrate request in its first state, before anything moves', async () => {
    const done = await h.runner.wait(
      h.runner.start('tier-migrate', { selector: { ns: NS }, action: 'promote', from: 'hot', to: 'cold' }).name,
    );
    expect(done.status).toBe('FAILED');
    expect(done.error?.Error).toBe('ValidationError');
    expect(done.error?.Cause).toMatch(/promote moves keys up/);
    expect(done.states).toEqual(['Begin']);
  });
});
