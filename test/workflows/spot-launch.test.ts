/**
 * ScaleOut on a mixed fleet (`fleet.capacity: 'mixed'`), through its synthesized state machine: the launch is a
 * Parallel state that counts the fleet's instances, chooses on demand or Spot, launches with an instant EC2 Fleet
 * (CreateFleet) and reads the node's address (DescribeInstances). Run locally under aws-local-stepfunctions, EC2
 * answered by the local fleet (core/workflows/local/sdk-integrations.ts) with real cache-node processes, under load.
 * What AWS alone checks (the request's parameters, IAM) is in test/infra/spot-fleet.test.ts.
 */
import { synthesizeWorkflowDefinitions } from '../../cdk/lib/workflow-definitions.js';
import { RingStore } from '../../core/ring/store.js';
import { harness, runUnderLoad } from './harness.js';

const FAST = { streamMaxMs: 150, graceMs: 500 };

describe('ScaleOut on a mixed fleet', () => {
  it('launches through CreateFleet, on demand while the base is short, then Spot; nothing lost or stale', async () => {
    const definitions = synthesizeWorkflowDefinitions({
      capacity: { type: 'mixed', instanceTypes: ['r7g.large', 'r6g.large'], onDemandBase: 4 },
    });
    const h = await harness({ definitions });
    try {
      const lifecycles: string[] = [];
      for (let i = 0; i < 2; i++) {
        const { w, done } = await runUnderLoad(h, 'scale-out', { mode: 'incremental', ...FAST });
        expect(done.error).toBeUndefined();
        expect(done.status).toBe('SUCCEEDED');
        expect(done.states).toEqual(expect.arrayContaining(['LaunchNode', 'CheckNode', 'PlanSessions']));
        // The launch's own states (inside the Parallel): the instant fleet, then the node's address.
        expect(done.states.some((s) => /CreateFleet|Fleet/.test(s))).toBe(true);
        lifecycles.push((done.output as { instance?: { lifecycle?: string } } | undefined)?.instance?.lifecycle ?? '?');
        expect(w.errors).toEqual([]);
        expect(w.staleReads).toEqual([]);
        expect((await w.verify(new RingStore(h.cas))).missing).toEqual([]);
      }
      // The harness's three nodes were launched outside the workflow (on demand, as the local fleet counts them):
      // the first launch makes the fourth on-demand node, which fills the base of 4; the next one is Spot.
      expect(lifecycles).toEqual(['on-demand', 'spot']);
      const ring = (await h.ring.load())!;
      expect(ring.nodes.filter((n) => n.state === 'NORMAL')).toHaveLength(5);
      expect(ring.ranges.some((r) => r.pending)).toBe(false);
    } finally {
      await h.close();
    }
    // Two ScaleOuts with real processes under load: 10-20 s on a quiet machine, past a minute on a loaded CI one.
  }, 300_000);
});
