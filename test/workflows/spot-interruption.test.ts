/**
 * A simulated EC2 spot interruption (issue 23, items 6 and 8) with real processes: a local fleet of four cache-node
 * processes, the synthesized state machines under the local runner with the real steps, a failure detector probing
 * the nodes over HTTP, and closed-loop read/write load over warm and cold (test/workflows/durable-load.ts). AWS's
 * documented warning is fed to the same handler core the Lambda runs (simulateSpotInterruption), and "AWS" takes
 * the instance (SIGKILL) at the end of a shortened notice.
 *
 * - The notice is long enough: the node is drained (its ranges to their successors), leaves the ring and is
 *   terminated by the ScaleIn; the refill ScaleOut brings the fleet back to four NORMAL nodes; no error at all.
 * - The notice is too short: the node is killed mid-drain, the drain rolls back, the detector marks the node DOWN
 *   and replace-node replaces it (its Begin waits out a rollback still running); four NORMAL nodes; errors only
 *   between the kill and the fence.
 * Either way: nothing acknowledged is lost, no read is stale, no human acts.
 */
import { simulateSpotInterruption } from '../../core/composition/spot-interruption-lambda.js';
import { NodeHealthChecker } from '../../core/nodes/health-check.js';
import { httpProbe } from '../../core/nodes/health-probe.js';
import { downFenced, ringProblem, type RingDocument } from '../../core/ring/document.js';
import { LocalWorkflowService } from '../../core/workflows/local/local-workflow-service.js';
import { eventually } from '../integration/warm-fixtures.js';
import { DurableLoad, describeErrors } from './durable-load.js';
import { harness, type Harness } from './harness.js';

const LEASE_MS = 1000;
const VICTIM = 'n2';
const quiet = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };

interface Run {
  h: Harness;
  load: DurableLoad;
  checker: NodeHealthChecker;
  service: LocalWorkflowService;
  replacements: string[];
  /** When "AWS" took the instance, if it was still running at the end of the notice. */
  killedAt?: number;
  /** When the victim was first seen DOWN and fenced (its lease run out), or gone from the ring after the kill. */
  fencedAt?: number;
  stopWatch?: () => Promise<void>;
}

/**
 * `slowRollbackMs`: the drain's rollback step is held that long first, so that the detector marks the dead node DOWN
 * and starts replace-node while the rollback still runs (what a dying node's stream retries do in AWS).
 */
async function setUp(o: { slowRollbackMs?: number } = {}): Promise<Run> {
  const h = await harness({
    nodes: ['n1', 'n2', 'n3', 'n4'],
    wrapSteps: (steps) => ({
      ...steps,
      'migrate.rollback': async (input) => {
        if (o.slowRollbackMs && input.execution === 'spot-drain-n2')
          await new Promise((res) => setTimeout(res, o.slowRollbackMs));
        return steps['migrate.rollback'](input);
      },
    }),
  });
  // A short lease, so that a DOWN node is fenced soon (production: 15 s).
  const leased = await h.ring.update((d) => {
    d.leaseMs = LEASE_MS;
  });
  await Promise.all(leased.nodes.map((n) => h.client.pushRing(n.url, leased)));
  const service = new LocalWorkflowService({ runner: h.runner, progress: h.progress });
  const replacements: string[] = [];
  // The failure detector as a local run has it (scripts/local/local-warm.ts), probing every node, with short timers.
  const checker = new NodeHealthChecker({
    ring: h.ring,
    probe: httpProbe(h.client, 500),
    probeAll: true,
    confirmMs: 1000,
    onMarked: async (m) => {
      const run = await service.start('replace-node', { nodeId: m.node, reason: 'health check' });
      replacements.push(run.execution);
    },
  });
  checker.start(250);
  const load = new DurableLoad(h.ring, 4000);
  await load.load();
  load.start();
  const r: Run = { h, load, checker, service, replacements };
  r.stopWatch = watchFence(r);
  return r;
}

async function tearDown(r: Run | undefined): Promise<void> {
  await r?.stopWatch?.();
  await r?.checker.stop();
  await r?.load.close();
  await r?.h.close();
}

/**
 * Watches for the end of the detection window: the victim DOWN in the ring with its lease run out (fenced), or gone
 * from the ring (its replacement took over).
 */
function watchFence(r: Run): () => Promise<void> {
  let watching = true;
  const watch = (async () => {
    while (watching && r.fencedAt === undefined) {
      const doc = (await r.h.ring.load())!;
      const n = doc.nodes.find((x) => x.id === VICTIM);
      const fenced = n ? downFenced(doc, n, { seenAt: Infinity, now: 0, wallNow: Date.now() }) : r.killedAt !== undefined;
      if (fenced) r.fencedAt = Date.now();
      await new Promise((res) => setTimeout(res, 50));
    }
  })();
  return async () => {
    watching = false;
    await watch;
  };
}

/** The warning for the victim's instance, and "AWS" taking the instance at the end of a notice of `noticeMs`. */
async function interrupt(r: Run, noticeMs: number, options: Parameters<typeof simulateSpotInterruption>[0]['options']) {
  const deadline = setTimeout(() => {
    void r.h.fleet.list().then(async (nodes) => {
      if (!nodes.some((n) => n.nodeId === VICTIM)) return; // already drained and terminated
      r.killedAt = Date.now();
      await r.h.fleet.kill(VICTIM, 'SIGKILL');
    });
  }, noticeMs);
  try {
    return await simulateSpotInterruption({
      ring: r.h.ring,
      workflows: r.service,
      instanceId: VICTIM,
      options,
      log: quiet,
      emit: () => {},
    });
  } finally {
    // The handler returns once the drain ended: drained and terminated before the deadline, or failed after the kill.
    clearTimeout(deadline);
  }
}

function expectFourNormal(doc: RingDocument) {
  expect(ringProblem(doc)).toBeUndefined();
  expect(doc.nodes.map((n) => `${n.id} ${n.state}`).filter((s) => !s.endsWith(' NORMAL'))).toEqual([]);
  expect(doc.nodes).toHaveLength(4);
  expect(doc.nodes.some((n) => n.id === VICTIM)).toBe(false);
  expect(doc.ranges.filter((r) => r.pending)).toEqual([]);
  for (const n of doc.nodes) expect(doc.ranges.some((x) => x.owner === n.id)).toBe(true);
}

describe('a simulated spot interruption (real cache nodes, under read/write load)', () => {
  let r: Run | undefined;
  afterEach(async () => {
    await tearDown(r);
    r = undefined;
  });

  it('drains the node within the notice to its successors, removes and terminates it, and refills the fleet to four', async () => {
    r = await setUp();
    const before = (await r.h.ring.load())!;
    const successors = new Set(
      before.ranges
        .map((x, i) => (x.owner === VICTIM ? before.ranges[(i + 1) % before.ranges.length]!.owner : ''))
        .filter(Boolean),
    );
    const out = await interrupt(r, 20_000, { graceMs: 1000, streamMaxMs: 500, refill: { graceMs: 1000 } });
    expect(out).toMatchObject({ outcome: 'drained', node: VICTIM, drain: 'spot-drain-n2', refill: 'spot-refill-n2' });
    const drained = r.h.runner.describe('spot-drain-n2')!;
    expect(drained.status).toBe('SUCCEEDED');
    expect(drained.states).toEqual(expect.arrayContaining(['Begin', 'PublishSession', 'RemoveFromRing', 'TerminateNode']));
    expect(r.killedAt).toBeUndefined(); // gone before the notice ran out
    expect((await r.h.fleet.list()).some((n) => n.nodeId === VICTIM)).toBe(false);

    const refill = await r.h.runner.wait('spot-refill-n2');
    expect(refill.error).toBeUndefined();
    expect(refill.status).toBe('SUCCEEDED');
    await new Promise((res) => setTimeout(res, 500));
    await r.load.stop();

    const after = (await r.h.ring.load())!;
    expectFourNormal(after);
    // What the victim owned went to its successors (then the new node took its share from the fleet).
    expect(successors.size).toBeGreaterThan(0);
    expect(r.replacements).toEqual([]); // the failure path never ran
    expect(r.load.ops).toBeGreaterThan(0);
    expect(describeErrors(r.load.errors)).toBe(describeErrors([]));
    expect(r.load.staleReads).toEqual([]);
    expect(await r.load.missing()).toEqual([]);
  }, 300_000);

  it('falls back to the failure path when the notice is too short: killed mid-drain, rolled back, marked DOWN, replaced', async () => {
    r = await setUp({ slowRollbackMs: 4000 });
    // Throttled so the drain cannot finish within the (shortened) notice: the kill lands mid-drain.
    const out = await interrupt(r, 1500, { graceMs: 1000, streamMaxMs: 200, rateBytesPerSec: 20_000 });
    expect(r.killedAt).toBeDefined();
    expect(out).toMatchObject({ outcome: 'drain-failed', refill: null });
    const drained = r.h.runner.describe('spot-drain-n2')!;
    expect(drained.status).toBe('FAILED');
    expect(drained.states).toEqual(expect.arrayContaining(['RollBack', 'ScaleInFailed']));
    expect(r.h.runner.describe('spot-refill-n2')).toBeUndefined();

    // The detector marks the dead node DOWN and starts replace-node, which replaces it with no one intervening.
    await eventually(async () => r!.replacements.length > 0, 30_000, 'the detector to start replace-node');
    const replaced = await r.h.runner.wait(r.replacements[0]!);
    expect(replaced.error).toBeUndefined();
    expect(replaced.status).toBe('SUCCEEDED');
    expect(r.replacements).toHaveLength(1);
    // It was started while the drain was still rolling back: its Begin waited for the rollback instead of failing.
    expect(Date.parse(r.h.runner.describe(r.replacements[0]!)!.startedAt)).toBeLessThan(Date.parse(drained.stoppedAt!));
    await new Promise((res) => setTimeout(res, 500));
    await r.load.stop();

    expectFourNormal((await r.h.ring.load())!);
    expect(r.fencedAt).toBeDefined();
    // Errors only inside the detection window: from the kill until the node was fenced (the coordinators refresh
    // their rings every 200 ms and a call in flight may take its timeout to fail: a second of slack).
    const outside = r.load.errors.filter((e) => e.at < r!.killedAt! || e.at > r!.fencedAt! + 1000);
    expect(describeErrors(outside)).toBe(describeErrors([]));
    expect(r.load.staleReads).toEqual([]);
    expect(await r.load.missing()).toEqual([]);
  }, 300_000);
});
