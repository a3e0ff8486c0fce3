/**
 * RollingUpgrade with real cache-node processes (issue 23, items 7 and 8): the four nodes of a local fleet replaced
 * one at a time by nodes of "a new version" (the local fleet's launch environment, STRATA_NODE_BUILD), each handing
 * its ranges over to its successor before it is terminated, under concurrent read/write load. And a successor killed
 * mid-hand-off: the current node's hand-off rolls back, the ring stays consistent, and a second run finishes the job.
 */
import { ringProblem, type RingDocument } from '../../core/ring/document.js';
import { RingStore } from '../../core/ring/store.js';
import type { StepHandlers } from '../../core/workflows/steps/registry.js';
import { summary } from '../integration/warm-workload.js';
import { DurableLoad, describeErrors } from './durable-load.js';
import { harness, runUnderLoad, type Harness } from './harness.js';

const ORIGINAL = ['n1', 'n2', 'n3', 'n4'];
const NEW_BUILD = { STRATA_NODE_BUILD: 'v2' };
/**
 * Short stream steps (so the loop runs several times), and a grace period longer than the load's ring refresh (1 s),
 * as in a deployment, where it is longer than the routers' (a router that has not seen the old node leave may still
 * call it until then).
 */
const FAST = { streamMaxMs: 150, graceMs: 1500 };
/** How soon after a ring change every writer of the durable load routes by it: its refresh (200 ms) and a request. */
const RING_SEEN_MS = 1000;

/** The fleet is back to four healthy nodes of the new version, none of the originals, with a consistent ring. */
async function expectUpgradedFleet(h: Harness, ring: RingDocument, originals: string[]) {
  expect(ringProblem(ring)).toBeUndefined();
  expect(ring.ranges.filter((r) => r.pending)).toEqual([]);
  expect(ring.nodes).toHaveLength(4);
  expect(ring.nodes.filter((n) => n.state !== 'NORMAL')).toEqual([]);
  expect(ring.nodes.map((n) => n.id).filter((id) => originals.includes(id))).toEqual([]);
  for (const n of ring.nodes) {
    expect(ring.ranges.some((r) => r.owner === n.id)).toBe(true);
    expect(h.fleet.launchEnvOf(n.id)).toEqual(NEW_BUILD);
    expect(h.fleet.running(n.id)).toBe(true);
  }
  // Every original instance was terminated: the fleet runs exactly the ring's nodes.
  expect((await h.fleet.list()).map((n) => n.nodeId).sort()).toEqual(ring.nodes.map((n) => n.id).sort());
}

describe('RollingUpgrade state machine (aws-local-stepfunctions, real cache nodes)', () => {
  it('replaces all four nodes one at a time under load: no error, no stale read, nothing lost, four NORMAL nodes of the new build', async () => {
    const h = await harness({ nodes: ORIGINAL });
    try {
      h.fleet.setLaunchEnv(NEW_BUILD);
      const { w, done, name } = await runUnderLoad(h, 'rolling-upgrade', { mode: 'incremental', ...FAST });
      expect(done.error).toBeUndefined();
      expect(done.status).toBe('SUCCEEDED');
      await expectUpgradedFleet(h, (await h.ring.load())!, ORIGINAL);
      expect(w.errors).toEqual([]);
      expect(w.staleReads).toEqual([]);
      expect(w.ops).toBeGreaterThan(0);
      const { missing } = await w.verify(new RingStore(h.cas));
      expect(missing).toEqual([]);
      // One node at a time: each turn launched, handed over and terminated its node before the next.
      for (const state of ['NextTurn', 'LaunchNode', 'PlanHandOff', 'HandOffDone', 'TerminateOldNode'])
        expect(done.states.filter((s) => s === state)).toHaveLength(state === 'NextTurn' ? 5 : 4);
      const order = done.states.filter((s) => ['LaunchNode', 'TerminateOldNode'].includes(s));
      expect(order).toEqual(Array.from({ length: 4 }, () => ['LaunchNode', 'TerminateOldNode']).flat());
      expect(done.states).toEqual(expect.arrayContaining(['Begin', 'MigrateSessions', 'PublishSession', 'Done', 'Upgraded']));
      expect(done.states).not.toContain('RollBack');
      const p = (await h.progress.get(name))!;
      expect(p).toMatchObject({ workflow: 'rolling-upgrade', total: 4, done: 4, outcome: 'succeeded' });
      expect(p.keys).toBeGreaterThan(0);
      expect(summary(w)).toMatch(/errors 0 .*stale reads 0/);
    } finally {
      await h.close();
    }
  }, 300_000);

  it('a successor killed mid-hand-off: that hand-off rolls back, the ring stays consistent, nothing is lost, and a second run finishes the upgrade', async () => {
    const ref: { h?: Harness; killed?: { node: string; at: number } } = {};
    // Kills the successor of the second node while its first range streams (the second stream step of it).
    const killSecondSuccessor = (steps: StepHandlers): StepHandlers => {
      const plans: string[] = [];
      const calls = new Map<string, number>();
      return {
        ...steps,
        'migrate.stream': async (input) => {
          const id = String(input.sessionId);
          const plan = id.replace(/-s\d+$/, '');
          if (!plans.includes(plan)) plans.push(plan);
          const n = (calls.get(id) ?? 0) + 1;
          calls.set(id, n);
          if (ref.killed || plans.indexOf(plan) !== 1 || !id.endsWith('-s0') || n !== 2) return steps['migrate.stream'](input);
          const s = await ref.h!.migrator.session(id);
          ref.killed = { node: s.target, at: Date.now() };
          const running = steps['migrate.stream'](input);
          await new Promise((r) => setTimeout(r, 30));
          await ref.h!.fleet.kill(s.target, 'SIGKILL');
          return running;
        },
      };
    };
    const h = await harness({ nodes: ORIGINAL, wrapSteps: killSecondSuccessor });
    ref.h = h;
    // Warm and cold (a durable warm copy, as every policy that keeps one): a write the dead successor took as a
    // shadow copy is in cold too. Throttled so that a range takes several stream steps: the kill lands mid-stream.
    const load = new DurableLoad(h.ring);
    try {
      h.fleet.setLaunchEnv(NEW_BUILD);
      await load.load();
      load.start();
      const first = h.runner.start('rolling-upgrade', { mode: 'incremental', ...FAST, rateBytesPerSec: 100_000 });
      const failed = await h.runner.wait(first.name);
      const endedAt = Date.now();
      await load.stop();
      expect(ref.killed).toBeDefined();
      expect(failed.status).toBe('FAILED');
      expect(failed.states).toEqual(expect.arrayContaining(['RollBack', 'TerminateNewNode', 'UpgradeFailed']));
      expect(failed.states.filter((s) => s === 'TerminateOldNode')).toHaveLength(1);

      // Consistent: no pending range, every node NORMAL and owning ranges; the first node's successor stays, the
      // second node is back with all its ranges, the dead successor left the ring and its instance is gone.
      const ring = (await h.ring.load())!;
      expect(ringProblem(ring)).toBeUndefined();
      expect(ring.ranges.filter((r) => r.pending)).toEqual([]);
      expect(ring.nodes.filter((n) => n.state !== 'NORMAL')).toEqual([]);
      for (const n of ring.nodes) expect(ring.ranges.some((r) => r.owner === n.id)).toBe(true);
      const ids = ring.nodes.map((n) => n.id);
      expect(ids).toHaveLength(4);
      expect(ids).not.toContain(ref.killed!.node);
      expect(ids.filter((id) => ORIGINAL.includes(id))).toHaveLength(3);
      expect((await h.fleet.list()).map((n) => n.nodeId)).not.toContain(ref.killed!.node);
      const p = (await h.progress.get(first.name))!;
      expect(p).toMatchObject({ outcome: 'rolled-back', total: 4, done: 1 });

      // Only writes failed, and only while the dead successor was a shadow target: from the kill until the writers saw
      // the rollback's ring (they refresh theirs every 200 ms; a write in flight then fails with it). None before, none
      // since. Nothing read stale, nothing acknowledged lost.
      const window = { killedAt: ref.killed!.at, until: endedAt + RING_SEEN_MS };
      const outside = load.errors.filter((e) => !e.write || e.at < window.killedAt || e.at > window.until);
      expect({ ...window, outside }).toEqual({ ...window, outside: [] });
      const after = await load.phase(1500);
      expect(after.ops).toBeGreaterThan(0);
      expect(describeErrors(after.errors)).toBe(describeErrors([]));
      expect(load.staleReads).toEqual([]);
      expect(await load.missing()).toEqual([]);

      // A second run without nodes continues with the three not yet replaced, under load, without an error.
      const errorsBefore = load.errors.length;
      load.start();
      const second = h.runner.start('rolling-upgrade', { mode: 'incremental', ...FAST });
      const done = await h.runner.wait(second.name);
      await load.stop();
      expect(done.error).toBeUndefined();
      expect(done.status).toBe('SUCCEEDED');
      expect(done.states.filter((s) => s === 'TerminateOldNode')).toHaveLength(3);
      await expectUpgradedFleet(h, (await h.ring.load())!, ORIGINAL);
      expect(await h.progress.get(second.name)).toMatchObject({
        total: 3,
        done: 3,
        outcome: 'succeeded',
        facts: expect.objectContaining({ resumedFrom: first.name }),
      });
      expect(describeErrors(load.errors.slice(errorsBefore))).toBe(describeErrors([]));
      expect(load.staleReads).toEqual([]);
      expect(await load.missing()).toEqual([]);
    } finally {
      await load.close();
      await h.close();
    }
  }, 300_000);
});
