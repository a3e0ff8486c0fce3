/**
 * A cache node dies (SIGKILL) in the middle of a ScaleOut's or ScaleIn's migration, under read/write load (issue 23,
 * item 4): a source, or the target, killed during a session's second stream step. What must hold after either
 * death: the execution ends (FAILED with a completed rollback); the ring is valid, with no pending range and no
 * JOINING or PARTIAL node, and every node owns something; no read is stale and nothing acknowledged is lost (the
 * load writes warm and cold, as every policy with a durable warm copy must: test/workflows/durable-load.ts); no
 * step of the failed execution acts once its rollback began, nor after it ended; and a dead node left owning ranges
 * can be marked DOWN and replaced.
 */
import { markDown, replaceDownNode, ringProblem, downFenced, type RingDocument } from '../../core/ring/document.js';
import type { MigrationSession } from '../../core/nodes/migration.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import type { LocalExecution } from '../../core/workflows/local/asl-runner.js';
import type { StepHandlers, StepName } from '../../core/workflows/steps/registry.js';
import { eventually } from '../integration/warm-fixtures.js';
import { DurableLoad, describeErrors } from './durable-load.js';
import { harness, type Harness } from './harness.js';

/** Throttled so that a session takes several stream steps: the kill lands mid-stream. */
const RUN = { streamMaxMs: 100, graceMs: 300, rateBytesPerSec: 100_000 };
const LEASE_MS = 1000;

interface StepCall {
  step: StepName;
  of: string;
  start: number;
  end?: number;
  ok?: boolean;
  error?: string;
}

/** Every migration step call, with when it began and ended and how. */
class StepLog {
  readonly calls: StepCall[] = [];

  wrap(steps: StepHandlers): StepHandlers {
    const out = { ...steps };
    for (const name of Object.keys(steps) as StepName[]) {
      if (!name.startsWith('migrate.')) continue;
      out[name] = async (input) => {
        const of = String(input.sessionId ?? input.sessionIds ?? input.planId ?? '');
        const call: StepCall = { step: name, of, start: Date.now() };
        this.calls.push(call);
        try {
          const r = await steps[name](input);
          call.ok = true;
          return r;
        } catch (e) {
          call.ok = false;
          call.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
          throw e;
        } finally {
          call.end = Date.now();
        }
      };
    }
    return out;
  }

  /** Calls of the other steps that succeeded although they began after `at`. */
  actedAfterStart(at: number): StepCall[] {
    return this.calls.filter((c) => c.step !== 'migrate.rollback' && c.start >= at && c.ok);
  }

  /** Calls of the other steps that succeeded although they ended after `at`. */
  actedAfterEnd(at: number): StepCall[] {
    return this.calls.filter((c) => c.step !== 'migrate.rollback' && c.ok === true && c.end! > at);
  }
}

type Victim = 'source' | 'target';

/** The harness's store, recording when a rollback's fence landed: the first write of a plan as `rolling-back`. */
class FenceRecordingStore extends InMemoryCasStore {
  fencedAt?: number;

  override async put(key: string, body: string, ifEtag: string | null): Promise<string> {
    const etag = await super.put(key, body, ifEtag);
    if (this.fencedAt === undefined && key.startsWith('migrations/plans/') && body.includes('"state":"rolling-back"'))
      this.fencedAt = Date.now();
    return etag;
  }
}

/**
 * Kills the source or the target of session `s<session>` with SIGKILL while that session's `call`-th stream
 * step runs (30 ms into it), once.
 */
function killDuringStream(ref: { h?: Harness; killed?: { node: string; at: number } }, victim: Victim, session = 0, call = 2) {
  return (steps: StepHandlers): StepHandlers => {
    const calls = new Map<string, number>();
    return {
      ...steps,
      'migrate.stream': async (input) => {
        const id = String(input.sessionId);
        const n = (calls.get(id) ?? 0) + 1;
        calls.set(id, n);
        if (ref.killed || !id.endsWith(`-s${session}`) || n !== call) return steps['migrate.stream'](input);
        const s: MigrationSession = await ref.h!.migrator.session(id);
        ref.killed = { node: victim === 'source' ? s.source : s.target, at: Date.now() };
        const running = steps['migrate.stream'](input);
        await new Promise((r) => setTimeout(r, 30));
        await ref.h!.fleet.kill(ref.killed.node, 'SIGKILL');
        return running;
      },
    };
  };
}

interface Outcome {
  h: Harness;
  load: DurableLoad;
  log: StepLog;
  done: LocalExecution;
  killed: { node: string; at: number };
  endedAt: number;
  /** The ring when the execution ended, and 3 s later. */
  ringAtEnd: RingDocument;
  ringAfter: RingDocument;
  /** When the rollback's fence landed (the plan written as rolling-back). */
  fencedAt?: number;
}

/** A ScaleOut (or ScaleIn) under load whose source or target is killed mid-stream; resolves once it ended. */
async function migrateWithDeath(
  mode: 'incremental' | 'parallel',
  victim: Victim,
  workflow: 'scale-out' | 'scale-in' = 'scale-out',
  session = 0,
): Promise<Outcome> {
  const ref: { h?: Harness; killed?: { node: string; at: number } } = {};
  const log = new StepLog();
  const cas = new FenceRecordingStore();
  const h = await harness({
    cas,
    wrapSteps: (steps) => log.wrap(killDuringStream(ref, victim, session)(steps)),
    ...(workflow === 'scale-in' ? { nodes: ['n1', 'n2', 'n3', 'n4'] } : {}),
  });
  ref.h = h;
  // A short lease, so that a DOWN node is fenced soon (production: 15 s).
  const leased = await h.ring.update((d) => {
    d.leaseMs = LEASE_MS;
  });
  await Promise.all(leased.nodes.map((n) => h.client.pushRing(n.url, leased)));
  const load = new DurableLoad(h.ring);
  try {
    await load.load();
    load.start();
    const exec = h.runner.start(workflow, { mode, ...RUN });
    const done = await h.runner.wait(exec.name);
    const endedAt = Date.now();
    await load.stop();
    const ringAtEnd = (await h.ring.load())!;
    // Whatever the failed execution still had in flight has had time to act (a Map iteration that was not
    // stopped, a step that was retried).
    await new Promise((r) => setTimeout(r, 3000));
    const ringAfter = (await h.ring.load())!;
    expect(ref.killed).toBeDefined();
    return { h, load, log, done, killed: ref.killed!, endedAt, ringAtEnd, ringAfter, fencedAt: cas.fencedAt };
  } catch (e) {
    await load.close();
    await h.close();
    throw e;
  }
}

/** What must hold after either death, whoever died. */
function expectCleanEnd(o: Outcome, failState = 'ScaleOutFailed') {
  const { done, log, ringAtEnd, ringAfter } = o;
  expect(done.status).toBe('FAILED');
  // The rollback completed: the execution went on to its Fail state (a failed rollback fails the execution itself).
  expect(done.states).toEqual(expect.arrayContaining(['RollBack', failState]));
  // No step of the failed execution acted once the rollback began, or after the execution ended.
  expect(o.fencedAt).toBeDefined();
  expect(log.actedAfterStart(o.fencedAt!)).toEqual([]);
  expect(log.actedAfterEnd(o.endedAt)).toEqual([]);
  expect(ringAfter.version).toBe(ringAtEnd.version);
  // A consistent ring: no pending range, no node left JOINING or PARTIAL.
  for (const ring of [ringAtEnd, ringAfter]) {
    expect(ringProblem(ring)).toBeUndefined();
    expect(ring.ranges.filter((r) => r.pending)).toEqual([]);
    expect(ring.nodes.filter((n) => n.state !== 'NORMAL').map((n) => `${n.id} ${n.state}`)).toEqual([]);
    for (const n of ring.nodes) expect(ring.ranges.some((r) => r.owner === n.id)).toBe(true);
  }
  expect(o.load.staleReads).toEqual([]);
}

/** Whether a coordinator may skip `node` by now: the ring marks it DOWN and its lease has run out. */
async function fencedNow(h: Harness, node: string): Promise<boolean> {
  const doc = (await h.ring.load())!;
  const n = doc.nodes.find((x) => x.id === node)!;
  return downFenced(doc, n, { seenAt: Infinity, now: 0, wallNow: Date.now() });
}

/**
 * A dead source still owns its ranges after the rollback (they never moved), as does a joining node that died after
 * it took some over, so writes to them fail until it is marked DOWN: that is the failure path (docs/WORKFLOWS.md,
 * "When a cache node fails"), which the health check takes in a deployment. Marks it DOWN here, checks writes work
 * again once it is fenced, replaces it (possible: no migration involves it any more), and checks that nothing
 * acknowledged was lost.
 */
async function recoverDeadNode(o: Outcome) {
  const { h, load, killed } = o;
  const ring = (await h.ring.load())!;
  expect(ring.nodes.find((n) => n.id === killed.node)?.state).toBe('NORMAL');
  const marked = await h.ring.update((d, next) => markDown(d, killed.node, next, 'test: killed mid-migration'));
  await Promise.all(
    marked.nodes.filter((n) => n.id !== killed.node).map((n) => h.client.pushRing(n.url, marked).catch(() => undefined)),
  );
  await eventually(() => fencedNow(h, killed.node), 10_000, `the lease of ${killed.node} run out`);
  await new Promise((r) => setTimeout(r, 500)); // the coordinators refresh their rings every 200 ms
  const downPhase = await load.phase(1500);
  expect(downPhase.ops).toBeGreaterThan(0);
  expect(describeErrors(downPhase.errors)).toBe(describeErrors([]));

  // No migration involves the dead node any more: it can be replaced.
  const fresh = await h.fleet.launch(`${killed.node}-new`);
  const replaced = await h.ring.update((d, next) => {
    replaceDownNode(d, killed.node, { id: fresh.nodeId, url: fresh.url, instance: fresh.nodeId }, next);
  });
  await Promise.all(replaced.nodes.map((n) => h.client.pushRing(n.url, replaced)));
  expect(replaced.nodes.some((n) => n.id === killed.node)).toBe(false);
  await new Promise((r) => setTimeout(r, 500));
  const replacedPhase = await load.phase(1500);
  expect(replacedPhase.ops).toBeGreaterThan(0);
  expect(describeErrors(replacedPhase.errors)).toBe(describeErrors([]));
  expect(load.staleReads).toEqual([]);
  expect(await load.missing()).toEqual([]);
}

describe('a node dies mid-migration (SIGKILL, under load)', () => {
  for (const mode of ['parallel', 'incremental'] as const) {
    it(`ScaleOut, ${mode}: the source of a session dies; the migration rolls back without it, and the node can then be replaced`, async () => {
      const o = await migrateWithDeath(mode, 'source');
      try {
        expectCleanEnd(o);
        // Nothing was published: the joining node owns nothing, left the ring and was terminated.
        expect(o.done.states).toContain('TerminateNode');
        expect(o.ringAfter.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3']);
        // The dead node's writes failed from the kill until its rollback, and go on failing until it is marked DOWN.
        await recoverDeadNode(o);
      } finally {
        await o.load.close();
        await o.h.close();
      }
    }, 300_000);
  }

  it('ScaleIn, incremental: the draining node dies; it is NORMAL again, owns what it did not hand over, and can be replaced', async () => {
    const o = await migrateWithDeath('incremental', 'source', 'scale-in');
    try {
      expectCleanEnd(o, 'ScaleInFailed');
      expect(o.ringAfter.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3', 'n4']);
      await recoverDeadNode(o);
    } finally {
      await o.load.close();
      await o.h.close();
    }
  }, 300_000);

  it('ScaleOut, incremental: the joining node dies after it took over a range; it stays NORMAL with it, and can be replaced', async () => {
    const o = await migrateWithDeath('incremental', 'target', 'scale-out', 1);
    try {
      expectCleanEnd(o);
      expect(o.done.states.filter((x) => x === 'PublishSession')).toHaveLength(1);
      expect(o.done.states).not.toContain('TerminateNode');
      expect(o.ringAfter.nodes.map((n) => n.id)).toContain(o.killed.node);
      await recoverDeadNode(o);
    } finally {
      await o.load.close();
      await o.h.close();
    }
  }, 300_000);

  it('ScaleOut, incremental: the joining node dies; the rollback releases its pending ranges and writes work with no one intervening', async () => {
    const o = await migrateWithDeath('incremental', 'target');
    try {
      expectCleanEnd(o);
      expect(o.done.states).toContain('TerminateNode');
      expect(o.ringAfter.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3']);
      expect((await o.h.fleet.list()).map((n) => n.nodeId)).not.toContain(o.killed.node);
      // Shadow writes to the dead target failed until the rollback released its ranges; since then, nothing fails.
      const after = await o.load.phase(1500);
      expect(after.ops).toBeGreaterThan(0);
      expect(describeErrors(after.errors)).toBe(describeErrors([]));
      expect(o.load.staleReads).toEqual([]);
      expect(await o.load.missing()).toEqual([]);
    } finally {
      await o.load.close();
      await o.h.close();
    }
  }, 300_000);
});
