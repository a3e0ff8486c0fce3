import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initialRing } from '../../core/ring/document.js';
import { nodeStatsKey, SILENT_AFTER_INTERVALS, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { runScaleTriggerFromEnv } from '../../core/composition/scale-trigger-lambda.js';
import { ScaleLocks } from '../../core/workflows/progress.js';
import { runScaleTrigger, SCALE_TRIGGER_SAMPLE_KEY, type ScaleTriggerDeps } from '../../core/workflows/trigger/scale-trigger.js';

/**
 * The scale-out trigger reading the nodes' statistics reports from a ring store (a folder, as locally) instead of
 * asking the nodes: fills, request rates from successive reports, silent nodes, and the runtime without a secret.
 */
describe('scale-out trigger on node reports', () => {
  const T0 = Date.parse('2026-11-10T12:00:00Z');
  const INTERVAL = 30_000;
  let dir: string;
  let cas: FileCasStore;
  let now: number;
  let started: { forNode: string; reason: string }[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'strata-trigger-'));
    cas = new FileCasStore(dir);
    now = T0;
    started = [];
    await new RingStore(cas).create(
      initialRing(
        [
          { id: 'n1', url: 'http://n1:1' },
          { id: 'n2', url: 'http://n2:1' },
        ],
        1,
      ),
    );
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Writes node `id`'s report as the node does: its key, its shape, `at` on its own clock. */
  type Reported = Partial<Record<'keys' | 'bytes' | 'capacityBytes' | 'gets' | 'uptimeSeconds', number>> & { prefix?: string };
  async function report(id: string, at: number, s: Reported): Promise<void> {
    const stats = {
      nodeId: id,
      keys: s.keys ?? 10,
      bytes: s.bytes ?? 1000,
      capacityBytes: s.capacityBytes ?? 100_000,
      uptimeSeconds: s.uptimeSeconds ?? 100,
      ops: { get: { count: s.gets ?? 0 } },
    };
    const body: NodeStatsReport = { nodeId: id, at, intervalMs: INTERVAL, stats };
    const key = nodeStatsKey(`${s.prefix ?? ''}${id}`);
    const cur = await cas.get(key);
    await cas.put(key, JSON.stringify(body), cur?.etag ?? null);
  }

  const deps = (o: Partial<ScaleTriggerDeps> = {}): ScaleTriggerDeps => ({
    ring: new RingStore(cas),
    locks: new ScaleLocks(cas),
    cas,
    now: () => now,
    startScaleOut: async (input) => {
      started.push(input);
      return `exec-${started.length}`;
    },
    ...o,
  });
  const settings = { unit: 'bytes' as const, lowRate: 1, highRate: 1000 };

  it("measures the request rate between two reports of each node, on that node's own clock", async () => {
    // n2's clock runs 40 s behind the trigger's; its rate is still its counter delta over its own report times.
    await report('n1', T0 - 5000, { gets: 1000, uptimeSeconds: 100 });
    await report('n2', T0 - 45_000, { gets: 500, uptimeSeconds: 50 });
    const first = await runScaleTrigger(deps(), settings);
    // First sight of each node: its average since start, 1000/100 + 500/50.
    expect(first.rate).toBeCloseTo(20, 9);
    expect(first.silent).toEqual([]);

    now = T0 + 30_000;
    await report('n1', T0 + 25_000, { gets: 1600, uptimeSeconds: 130 }); // +600 in 30 s
    await report('n2', T0 - 15_000, { gets: 800, uptimeSeconds: 80 }); // +300 in 30 s
    const second = await runScaleTrigger(deps(), settings);
    expect(second.rate).toBeCloseTo(20 + 10, 9);
    type Sample = { reports: Record<string, { count: number; at: number }> };
    const sample = JSON.parse((await cas.get(SCALE_TRIGGER_SAMPLE_KEY))!.body) as Sample;
    expect(sample.reports).toEqual({ n1: { count: 1600, at: T0 + 25_000 }, n2: { count: 800, at: T0 - 15_000 } });
  });

  it('falls back to the average since start for a report it already sampled and for a restarted node', async () => {
    await report('n1', T0, { gets: 1000, uptimeSeconds: 100 });
    await report('n2', T0, { gets: 1000, uptimeSeconds: 100 });
    await runScaleTrigger(deps(), settings);
    now = T0 + 10_000;
    await report('n2', T0 + 10_000, { gets: 50, uptimeSeconds: 5 }); // restarted: its counter went back
    const again = await runScaleTrigger(deps(), settings);
    expect(again.rate).toBeCloseTo(1000 / 100 + 50 / 5, 9);
  });

  it('leaves a node without a fresh report out of the decision and lists it as silent', async () => {
    await report('n1', T0 - 1000, { bytes: 99_000, capacityBytes: 100_000 });
    // Full, but stale.
    await report('n2', T0 - (SILENT_AFTER_INTERVALS * INTERVAL + 1), { bytes: 100_000, capacityBytes: 100_000 });
    const out = await runScaleTrigger(deps(), settings);
    expect(out.loads).toEqual([{ id: 'n1', fill: 99_000 }]);
    expect(out.silent).toEqual([{ node: 'n2', reason: expect.stringMatching(/old \(silent after 90 s\)/) }]);
    expect(out.decision).toMatchObject({ action: 'prelaunch', node: 'n1' });
    expect(started).toEqual([expect.objectContaining({ forNode: 'n1' })]);
  });

  it('starts nothing and writes no sample when no serving node has a usable report', async () => {
    await cas.put(nodeStatsKey('n1'), JSON.stringify({ nodeId: 'n1', at: T0, intervalMs: INTERVAL, stats: { keys: 1 } }), null);
    const out = await runScaleTrigger(deps(), settings);
    expect(out).toMatchObject({ decision: { action: 'none' }, loads: [] });
    expect(out.silent).toEqual([
      { node: 'n1', reason: 'stats report lacks bytes, capacityBytes' },
      { node: 'n2', reason: 'no stats report in the ring store' },
    ]);
    expect(started).toEqual([]);
    expect(await cas.get(SCALE_TRIGGER_SAMPLE_KEY)).toBeUndefined();
  });

  it("splits a full node at once, reading reports under the fleet's report id prefix", async () => {
    await report('n1', T0, { bytes: 100_000, capacityBytes: 100_000, prefix: 'AROAEXAMPLE:' });
    await report('n2', T0, { bytes: 10, capacityBytes: 100_000, prefix: 'AROAEXAMPLE:' });
    const out = await runScaleTrigger(deps({ reportIdPrefix: 'AROAEXAMPLE:' }), settings);
    expect(out.decision).toMatchObject({ action: 'split', node: 'n1' });
    expect(started[0]!.reason).toMatch(/^split: node n1 is full/);
  });

  it('runs from its environment with the ring store alone: no fleet secret, no node client', async () => {
    await report('n1', Date.now(), { bytes: 10 });
    await report('n2', Date.now(), { bytes: 10 });
    const out = await runScaleTriggerFromEnv({
      STRATA_WARM_RING_DIR: dir,
      STRATA_SCALE_OUT_ARN: 'arn:aws:states:us-east-1:123456789012:stateMachine:strata-dev-scale-out',
      STRATA_SCALE_TRIGGER: JSON.stringify(settings),
    });
    expect(out).toMatchObject({ decision: { action: 'none' }, silent: [] });
    expect(out.loads.map((l) => l.id).sort()).toEqual(['n1', 'n2']);
  });
});
