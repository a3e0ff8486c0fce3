import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeStatsKey, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { FileCasStore } from '../../core/ring/store.js';
import { runScaleTrigger } from '../../core/workflows/trigger/scale-trigger.js';
import { ringHash } from '../../core/ring/hash.js';
import { RingRouter, RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { entry } from '../helpers/tiers.js';
import { eventually, SECRET } from '../integration/warm-fixtures.js';
import { harness } from './harness.js';

/**
 * The scheduled trigger against real nodes: it reads their fill and request counters from the statistics reports
 * they write to the ring store (a folder here), evaluates paper 000's T and starts ScaleOut executions on the local
 * runner; the per-node lock keeps it to one scale-out per node.
 */
describe("scale-out trigger (paper 000 threshold on the nodes' reported fill)", () => {
  it('pre-launches for the node past T, not again while that scale-out runs, and nothing below T', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-trigger-ring-'));
    const h = await harness({ nodes: ['n1', 'n2'], rangesPerNode: 1, cas: new FileCasStore(dir) });
    /** What each node's stats reporter writes (ring/node-reports.ts), from its /stats as it is now. */
    const reportAll = async () => {
      for (const [id, url] of Object.entries(await h.urls())) {
        const body: NodeStatsReport = { nodeId: id, at: Date.now(), intervalMs: 30_000, stats: await h.client.stats(url) };
        const cur = await h.cas.get(nodeStatsKey(id));
        await h.cas.put(nodeStatsKey(id), JSON.stringify(body), cur?.etag ?? null);
      }
    };
    try {
      const urls = await h.urls();
      // 600 keys through the ring, 400 in n1's range and 200 in n2's: only n1 comes near T below.
      const router = new RingRouter((await h.ring.load())!);
      const wanted: Record<string, number> = { n1: 400, n2: 200 };
      const keys: string[] = [];
      for (let i = 0; keys.length < 600; i++) {
        const owner = router.route(ringHash('ns', `k${i}`)).owner.id;
        if (wanted[owner]! > 0) {
          wanted[owner]!--;
          keys.push(`k${i}`);
        }
      }
      const warm = new WarmTier({ ring: new RingView({ store: h.ring, refreshIntervalMs: 0 }), secret: SECRET });
      await warm.putMany(
        'ns',
        keys.map((key, i) => ({ key, entry: entry(i + 1) })),
      );
      await warm.close();
      const stats = await Promise.all(Object.values(urls).map((u) => h.client.stats(u)));
      expect(stats.map((s) => s.keys).sort()).toEqual([200, 400]);

      const started: { forNode: string; reason: string }[] = [];
      const startScaleOut = async (input: { mode: 'incremental' | 'parallel'; forNode: string; reason: string }) => {
        started.push(input);
        return h.runner.start('scale-out', { ...input, streamMaxMs: 200, graceMs: 200 }).name;
      };
      const fullest = stats.reduce((a, s) => (s.keys > a.keys ? s : a));
      // c = twice the fullest node less 10; δL = δH = 1 req/s: T = c/2 + (2 − R) ≤ fill − 3, just below it.
      const settings = { unit: 'keys' as const, capacity: fullest.keys * 2 - 10, lowRate: 1, highRate: 1 };
      const deps = { ring: h.ring, locks: h.deps.locks, cas: h.cas, startScaleOut };
      // Until the nodes report, the trigger knows nothing of their fill: it decides nothing and names them silent.
      const blind = await runScaleTrigger(deps, settings);
      expect(blind).toMatchObject({ decision: { action: 'none' }, loads: [] });
      expect(blind.silent.map((x) => x.node).sort()).toEqual(['n1', 'n2']);
      expect(started).toHaveLength(0);

      await reportAll();
      const first = await runScaleTrigger(deps, settings);
      expect(first.silent).toEqual([]);
      expect(first.decision).toMatchObject({ action: 'prelaunch', node: fullest.nodeId });
      expect(started).toHaveLength(1);
      expect(started[0]!.reason).toMatch(/^prelaunch: node .* passed T/);
      // Once its first step holds the node's lock, the same node is not scaled out twice.
      await eventually(async () => !!(await h.progress.get(first.started!)), 10_000, 'the scale-out began');
      const again = await runScaleTrigger(deps, settings);
      expect(['in-flight', 'none']).toContain(again.decision.action);
      expect(started).toHaveLength(1);
      const done = await h.runner.wait(first.started!);
      expect(done.status).toBe('SUCCEEDED');
      // After the split the lock is released and the fleet (the new node reporting too) is below T.
      await reportAll();
      const after = await runScaleTrigger(deps, { ...settings, capacity: fullest.keys * 4 });
      expect(after.decision.action).toBe('none');
      expect(after.loads).toHaveLength(3);
    } finally {
      await h.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000); // a hang bound: a loaded 2-core machine has taken over 120 s here
});
