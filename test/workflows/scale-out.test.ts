import { RingStore } from '../../core/ring/store.js';
import { LOCAL_FLEET_SUBNETS } from '../../core/workflows/steps/fleet-placement.js';
import { summary } from '../integration/warm-workload.js';
import { harness, runUnderLoad } from './harness.js';

/** Options that keep a local run quick: short stream steps (so the loop runs several times) and grace. */
const FAST = { streamMaxMs: 150, graceMs: 500 };

async function scaleOutUnderLoad(mode: 'incremental' | 'parallel') {
  const h = await harness();
  try {
    const { w, done, name } = await runUnderLoad(h, 'scale-out', { mode, ...FAST });
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('SUCCEEDED');
    const ring = (await h.ring.load())!;
    expect(ring.nodes).toHaveLength(4);
    expect(ring.nodes.every((n) => n.state === 'NORMAL')).toBe(true);
    expect(ring.ranges.some((r) => r.pending)).toBe(false);
    const joined = ring.nodes.find((n) => !['n1', 'n2', 'n3'].includes(n.id))!;
    expect(ring.ranges.filter((r) => r.owner === joined.id).length).toBeGreaterThan(0);
    // The ring records the AZ the begin step launched it in: no NORMAL node has one yet, so the first configured.
    expect(joined.az).toBe(LOCAL_FLEET_SUBNETS[0]!.availabilityZone);
    expect(w.errors).toEqual([]);
    expect(w.staleReads).toEqual([]);
    expect(w.ops).toBeGreaterThan(0);
    const { missing } = await w.verify(new RingStore(h.cas));
    expect(missing).toEqual([]);
    // The progress record the admin API shows.
    const p = (await h.progress.get(name))!;
    expect(p).toMatchObject({ workflow: 'scale-out', total: 3, done: 3, outcome: 'succeeded' });
    expect(p.keys).toBeGreaterThan(0);
    // The grace wait after NodeNormal has no step of its own: the finish step says when it ends, for progress bars.
    expect(p.facts).toMatchObject({ graceUntil: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), graceMs: expect.any(Number) });
    expect(done.states).toEqual(
      expect.arrayContaining([
        'Begin',
        'LaunchNode',
        'CheckNode',
        'PlanSessions',
        'MigrateSessions',
        'NodeNormal',
        'CleanUpSources',
      ]),
    );
    expect(h.metrics.find((m) => m.key === 'nodeAllocationMs')?.value).toBeGreaterThan(0);
    return { done, summary: summary(w) };
  } finally {
    await h.close();
  }
}

describe('ScaleOut state machine (aws-local-stepfunctions, real cache nodes)', () => {
  it('incremental 3 -> 4 under load: zero errors, every acknowledged write readable with its latest version', async () => {
    const r = await scaleOutUnderLoad('incremental');
    // One session at a time: each published on its own.
    expect(r.done.states.filter((s) => s === 'PublishSession')).toHaveLength(3);
    expect(r.done.states).not.toContain('PublishAllSessions');
  }, 300_000);

  it('parallel 3 -> 4 under load: the same guarantees, all sessions published together', async () => {
    const r = await scaleOutUnderLoad('parallel');
    expect(r.done.states).toContain('PublishAllSessions');
    expect(r.done.states).not.toContain('PublishSession');
  }, 300_000);
});
