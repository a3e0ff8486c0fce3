import * as z from 'zod';
import { StrataError, ValidationError } from '../../errors.js';
import { nodeIdSchema, rangesOfNode, removeNode } from '../../ring/document.js';
import type { RingStore } from '../../ring/store.js';
import type { Migrator } from '../../nodes/migration.js';
import type { NodeClient } from '../../nodes/node-client.js';
import type { MetricKey } from '../../metrics/metric-catalog.js';
import { chooseLaunchSubnet, launchClientToken, leastLoaded, scaleInCandidates, type FleetSubnet } from './fleet-placement.js';
import type { ProgressStore, ScaleLocks, WorkflowName } from '../progress.js';
import { GRACE_FACTS } from '../../../sdk/src/contract.js';

/**
 * The scale-out and scale-in steps the state machines call (through the step Lambda, lambdas/workflows/steps.ts).
 * Each is one bounded, idempotent call over the migration primitives of core/nodes/migration.ts: a step
 * that Step Functions retries, or that runs again after a crash, continues from the persisted session state.
 */
export interface ScaleDeps {
  ring: RingStore;
  migrator: Migrator;
  nodes: NodeClient;
  progress: ProgressStore;
  locks: ScaleLocks;
  /** The base URL of a launched instance: http://<private IP>:<port> on EC2, the local fleet's record locally. */
  nodeUrl: (n: { nodeId: string; instanceId: string; privateIp?: string | null }) => Promise<string | undefined>;
  metric: (key: MetricKey, value: number, dims?: Record<string, string>) => void;
  now: () => number;
  /** Where ScaleOut launches nodes (STRATA_FLEET_SUBNETS on AWS, stand-ins locally), in configuration order. */
  fleetSubnets: readonly FleetSubnet[];
}

export class ScaleOutInFlightError extends StrataError {
  constructor(node: string) {
    super('VERSION_CONFLICT', `a scale-out for node '${node}' is already running (at most one per node)`, { node });
  }
}

export class NoNodeToRemoveError extends StrataError {
  constructor(message: string) {
    super('VALIDATION_FAILED', message);
  }
}

const execution = z.string().min(1).max(128);
const mode = z.enum(['incremental', 'parallel']).default('incremental');
/** The workflows whose state machines run the migration steps (migration-map.ts). */
const workflow = z.enum(['scale-out', 'scale-in', 'rolling-upgrade']);

/** Options shared by ScaleOut and ScaleIn, normalised by their begin step for the states that follow. */
export const migrationOptions = {
  mode,
  /** Each stream step returns after this long (a Lambda step must end well inside its timeout). */
  streamMaxMs: z.number().int().min(100).max(600_000).default(60_000),
  /** Bytes per second asked of each source; 0 = the node's own cap. */
  rateBytesPerSec: z.number().min(0).default(0),
  /** How long a source keeps a handed-over range before dropping it. */
  graceMs: z.number().int().min(0).max(3_600_000).default(60_000),
};

export const scaleOutBeginInput = z.strictObject({
  execution,
  workflow: z.literal('scale-out').optional(),
  ...migrationOptions,
  /** The node whose fill triggered this (speculative pre-launch or overflow): locked for the execution. */
  forNode: nodeIdSchema.nullish(),
  /** Source nodes to take ranges from (default: every NORMAL node, one session each). */
  sources: z.array(nodeIdSchema).min(1).nullish(),
  /** How long the launched node may take to answer its health check. */
  launchTimeoutMs: z.number().int().min(1000).max(3_600_000).default(900_000),
  /** Set by the trigger: why this scale-out started. */
  reason: z.string().max(200).nullish(),
});

export const checkNodeInput = z.strictObject({
  execution,
  /** The workflow that launched it (ScaleOut, or ReplaceNode and RollingUpgrade, which launch the same way). */
  workflow: z.enum(['scale-out', 'replace-node', 'rolling-upgrade']).default('scale-out'),
  /** On EC2 the node id is the instance id (the launch template's user data names the node after it). */
  nodeId: nodeIdSchema,
  instanceId: z.string().min(1),
  privateIp: z.string().nullish(),
  /** Epoch ms of the launch request. */
  launchedAt: z.number(),
  launchTimeoutMs: z.number().int().min(1000),
});

export const scaleOutPlanInput = z.strictObject({
  execution,
  workflow: z.literal('scale-out').optional(),
  nodeId: nodeIdSchema,
  url: z.string().url(),
  instanceId: z.string().min(1),
  /** The AZ the begin step launched it in (recorded in the ring). */
  az: z.string().min(1).max(64).nullish(),
  mode,
  sources: z.array(nodeIdSchema).min(1).nullish(),
});

export const scaleInBeginInput = z.strictObject({
  execution,
  workflow: z.literal('scale-in').optional(),
  ...migrationOptions,
  /** The node to remove (default: the least loaded in the AZ with the most NORMAL nodes). */
  nodeId: nodeIdSchema.nullish(),
});

export const sessionStepInput = z.strictObject({ execution, workflow, sessionId: z.string().min(1) });
export const streamStepInput = sessionStepInput.extend({
  /** Return after this long (a Lambda step must end well inside its timeout). @default 60000 */
  maxMs: z.number().int().min(100).max(600_000).default(60_000),
  rateBytesPerSec: z.number().min(0).default(0),
});
export const publishStepInput = z.strictObject({
  execution,
  workflow,
  /** The sessions to publish together (one in incremental mode; all in parallel mode). */
  sessionIds: z.array(z.string().min(1)).min(1),
  graceMs: z.number().int().min(0).default(60_000),
});
export const finishStepInput = z.strictObject({
  execution,
  workflow,
  planId: z.string().min(1),
  forNode: nodeIdSchema.nullish(),
  /** The grace period the state machine waits next (its Wait state), so progress can count it down. */
  graceSeconds: z.number().int().min(0).optional(),
});
export const rollbackStepInput = z.strictObject({
  execution,
  workflow,
  /** The execution's state when the failure was caught: what was begun, launched and planned so far. */
  state: z.looseObject({
    begin: z.looseObject({ forNode: z.string().nullish(), nodeId: z.string().nullish(), planId: z.string().nullish() }).nullish(),
    instance: z.looseObject({ instanceId: z.string().nullish() }).nullish(),
    plan: z.looseObject({ planId: z.string().nullish() }).nullish(),
    /** The failure Step Functions caught (Error and Cause). */
    error: z.looseObject({ Error: z.string().optional(), Cause: z.string().optional() }).nullish(),
  }),
});

export class NodeLaunchTimeoutError extends StrataError {
  constructor(nodeId: string, ms: number) {
    super('TIER_UNAVAILABLE', `node ${nodeId} did not become healthy within ${ms} ms of its launch`, { nodeId });
  }
}

/** The options the migration states read, from a begin step's validated input. */
export function normalisedOptions(i: {
  mode: 'incremental' | 'parallel';
  streamMaxMs: number;
  rateBytesPerSec: number;
  graceMs: number;
}) {
  return {
    mode: i.mode,
    maxConcurrency: i.mode === 'incremental' ? 1 : 0,
    publishEach: i.mode === 'incremental',
    streamMaxMs: i.streamMaxMs,
    rateBytesPerSec: i.rateBytesPerSec,
    graceMs: i.graceMs,
    graceSeconds: Math.ceil(i.graceMs / 1000),
  };
}

export function scaleSteps(d: ScaleDeps) {
  const progress = (exec: string, wf: WorkflowName, edit: Parameters<ProgressStore['update']>[2]) =>
    d.progress.update(exec, wf, edit);

  return {
    /**
     * Validates the request, normalises its options, takes the per-node lock of the triggering node and places the
     * launch: the subnet of the AZ with the fewest NORMAL nodes, and RunInstances' ClientToken (`launch`).
     */
    async scaleOutBegin(raw: unknown) {
      const i = scaleOutBeginInput.parse(raw);
      // Checked before the lock: a failed begin has no rollback to release it.
      if (d.fleetSubnets.length === 0) {
        throw new ValidationError('STRATA_FLEET_SUBNETS', 'the fleet has no subnets configured: ScaleOut cannot launch a node');
      }
      const subnet = chooseLaunchSubnet(d.fleetSubnets, (await d.ring.load())?.nodes ?? []);
      if (i.forNode && !(await d.locks.acquire(i.forNode, i.execution))) throw new ScaleOutInFlightError(i.forNode);
      // One launch per execution today; the ordinal keeps tokens distinct when an execution launches several.
      const launch = { ordinal: 0, ...subnet, clientToken: launchClientToken(i.execution, 0) };
      await progress(i.execution, 'scale-out', (p) => {
        p.phase = 'launching a node';
        p.facts.mode = i.mode;
        p.facts.forNode = i.forNode ?? null;
        p.facts.reason = i.reason ?? null;
        p.facts.availabilityZone = launch.availabilityZone;
      });
      const options = normalisedOptions(i);
      const placed = { launchedAt: d.now(), launchTimeoutMs: i.launchTimeoutMs, launch };
      return { forNode: i.forNode ?? null, sources: i.sources ?? null, ...placed, options };
    },

    /** One health probe of the launched instance; the state machine waits and asks again until healthy. */
    async checkNode(raw: unknown) {
      const i = checkNodeInput.parse(raw);
      const url = await d.nodeUrl(i);
      if (d.now() - i.launchedAt > i.launchTimeoutMs) throw new NodeLaunchTimeoutError(i.nodeId, i.launchTimeoutMs);
      if (!url) return { healthy: false, url: null, allocationMs: null };
      const healthy = await d.nodes.health(url).then(
        (h) => h.status === 'ok',
        () => false,
      );
      if (!healthy) return { healthy: false, url, allocationMs: null };
      const allocationMs = d.now() - i.launchedAt;
      d.metric('nodeAllocationMs', allocationMs);
      await progress(i.execution, i.workflow, (p) => {
        p.phase = `${upgradeStep(p)}node ${i.nodeId} healthy; ${i.workflow === 'scale-out' ? 'planning' : 'taking over'}`;
        p.facts.allocationMs = allocationMs;
        p.facts.url = url;
        p.facts.instanceId = i.instanceId;
      });
      return { healthy: true, url, allocationMs };
    },

    /** Adds the node as JOINING and plans one session per source: its fullest range cut at the median (000). */
    async scaleOutPlan(raw: unknown) {
      const i = scaleOutPlanInput.parse(raw);
      const target = { id: i.nodeId, url: i.url, instance: i.instanceId, ...(i.az ? { az: i.az } : {}) };
      const plan = await d.migrator.planScaleOut({
        target,
        mode: i.mode,
        execution: i.execution,
        ...(i.sources ? { sources: i.sources } : {}),
      });
      return recordPlan(i.execution, 'scale-out', plan.id, plan.sessions);
    },

    /**
     * Picks the node to remove (the named one, or of the AZ with the most NORMAL nodes the one holding the fewest
     * bytes, so the fleet stays spread), marks it LEAVING, plans its drain.
     */
    async scaleInBegin(raw: unknown) {
      const i = scaleInBeginInput.parse(raw);
      const doc = await d.ring.load();
      if (!doc) throw new NoNodeToRemoveError('there is no ring yet: nothing to scale in');
      const normal = doc.nodes.filter((n) => n.state === 'NORMAL');
      let nodeId = i.nodeId ?? undefined;
      if (nodeId) {
        const n = doc.nodes.find((x) => x.id === nodeId);
        if (!n)
          throw new NoNodeToRemoveError(`node '${nodeId}' is not in the ring (nodes: ${doc.nodes.map((x) => x.id).join(', ')})`);
        if (n.state !== 'NORMAL' && n.state !== 'LEAVING')
          throw new NoNodeToRemoveError(`node '${nodeId}' is ${n.state}: only a NORMAL node can be drained`);
      } else {
        if (normal.length < 2)
          throw new NoNodeToRemoveError(`scale-in needs at least 2 NORMAL nodes (the ring has ${normal.length})`);
        const candidates = scaleInCandidates(normal);
        const loads = await Promise.all(candidates.map(async (n) => ({ id: n.id, bytes: (await d.nodes.stats(n.url)).bytes })));
        nodeId = leastLoaded(loads)!;
      }
      if (!(await d.locks.acquire(nodeId, i.execution))) throw new ScaleOutInFlightError(nodeId);
      const instanceId = doc.nodes.find((n) => n.id === nodeId)!.instance ?? null;
      await progress(i.execution, 'scale-in', (p) => {
        p.facts.nodeId = nodeId!;
        p.facts.instanceId = instanceId;
        p.facts.mode = i.mode;
      });
      const plan = await d.migrator
        .planScaleIn({ node: nodeId, mode: i.mode, execution: i.execution })
        .catch(async (e: unknown) => {
          // Nothing began: the node serves as before (planning may have marked it LEAVING) and is not held locked.
          await d.ring
            .update((doc) => {
              const n = doc.nodes.find((x) => x.id === nodeId);
              if (n?.state !== 'LEAVING') return false;
              n.state = 'NORMAL';
            })
            .catch(() => undefined);
          await d.locks.release(nodeId!, i.execution);
          throw e;
        });
      return {
        nodeId,
        instanceId,
        options: normalisedOptions(i),
        ...(await recordPlan(i.execution, 'scale-in', plan.id, plan.sessions)),
      };
    },

    /**
     * The session steps (prepare, stream, publish) and finish and cleanup act only for the execution that planned
     * the plan, and not once it is rolled back (a permanent RingPreconditionError): a Map iteration that goes on
     * after a sibling failed, or a retry in flight when the rollback began, changes nothing.
     */
    async prepare(raw: unknown) {
      const i = sessionStepInput.parse(raw);
      const s = await d.migrator.prepare(i.sessionId, { execution: i.execution });
      await progress(i.execution, i.workflow, (p) => {
        p.phase = `${upgradeStep(p)}streaming ${s.span.start}… from ${s.source} to ${s.target}`;
      });
      return { sessionId: s.id, state: s.state };
    },

    /** Streams for at most `maxMs`; `done: false` means "call again" (the state machine loops). */
    async stream(raw: unknown) {
      const i = streamStepInput.parse(raw);
      const before = (await d.migrator.session(i.sessionId)).copied;
      const r = await d.migrator.stream(i.sessionId, {
        execution: i.execution,
        maxMs: i.maxMs,
        ...(i.rateBytesPerSec ? { rateBytesPerSec: i.rateBytesPerSec } : {}),
      });
      const keys = r.session.copied.keys - before.keys;
      const bytes = r.session.copied.bytes - before.bytes;
      d.metric('bytesMoved', bytes, { Workflow: i.workflow });
      await progress(i.execution, i.workflow, (p) => {
        p.keys += keys;
        p.bytes += bytes;
      });
      return { sessionId: i.sessionId, done: r.done, keys: r.session.copied.keys, bytes: r.session.copied.bytes };
    },

    async publish(raw: unknown) {
      const i = publishStepInput.parse(raw);
      const out = await d.migrator.publish(i.sessionIds, { graceMs: i.graceMs, execution: i.execution });
      d.metric('sessionsDone', out.length, { Workflow: i.workflow });
      await progress(i.execution, i.workflow, (p) => {
        if (i.workflow === 'rolling-upgrade') {
          // A rolling upgrade counts the nodes it replaced (its own steps move `done`), not sessions.
          p.phase = `${upgradeStep(p)}published ${out.map((s) => s.id).join(', ')}`;
          return;
        }
        p.done = Math.min(p.total, p.done + out.length);
        p.phase = `published ${p.done} of ${p.total} sessions`;
      });
      return { published: out.map((s) => s.id) };
    },

    /** Ends the plan: scale-out makes the node NORMAL, scale-in removes it from the ring. Releases the lock. */
    async finish(raw: unknown) {
      const i = finishStepInput.parse(raw);
      const plan = await d.migrator.finish(i.planId, { terminateAfterMs: 0, execution: i.execution });
      const doc = (await d.ring.load())!;
      if (i.forNode) await d.locks.release(i.forNode, i.execution);
      if (i.workflow === 'scale-in') await d.locks.release(plan.node, i.execution);
      await progress(i.execution, i.workflow, (p) => {
        p.phase = i.workflow === 'scale-out' ? `node ${plan.node} is NORMAL` : `node ${plan.node} left the ring`;
        if (i.graceSeconds !== undefined) {
          // The wait that follows has no step of its own: say when it ends, or a progress bar sits at 100% through it.
          p.facts[GRACE_FACTS.until] = new Date(Date.now() + i.graceSeconds * 1000).toISOString();
          p.facts[GRACE_FACTS.ms] = i.graceSeconds * 1000;
        }
      });
      return { planId: plan.id, state: plan.state, node: plan.node, nodes: doc.nodes.length, ringVersion: doc.version };
    },

    /** After the grace period: the sources drop the spans they handed over. */
    async cleanup(raw: unknown) {
      const i = finishStepInput.parse(raw);
      const plan = await d.migrator.assertLive(i.planId, { execution: i.execution }, 'cleanup');
      let cleaned = 0;
      for (const id of plan.sessions) {
        const s = await d.migrator.session(id);
        if (s.state === 'published') {
          await d.migrator.cleanup(id, { force: true, execution: i.execution });
          cleaned++;
        }
      }
      await progress(i.execution, i.workflow, (p) => {
        p.phase = 'done';
        p.outcome = 'succeeded';
      });
      return { cleaned };
    },

    /**
     * Undoes a failed scale operation: the plan is fenced (no step of it acts from now on), sessions not yet
     * published are rolled back (pending marks released in one ring edit, the target's partial copies dropped where
     * it can be reached); a joining node that owns nothing leaves the ring and its instance is to be terminated
     * (`terminate: true`); a draining node goes back to NORMAL. A dead source or target does not stop it: what it
     * could not do is in `warnings` (and the progress facts). Releases the locks.
     */
    async rollback(raw: unknown) {
      const i = rollbackStepInput.parse(raw);
      const st = i.state;
      const planId = st.plan?.planId ?? st.begin?.planId ?? null;
      const instanceId = st.instance?.instanceId ?? null;
      let node = (i.workflow === 'scale-out' ? instanceId : st.begin?.nodeId) ?? null;
      const failure = `${st.error?.Error ?? 'a failure'}${st.error?.Cause ? `: ${String(st.error.Cause).slice(0, 300)}` : ''}`;
      let warnings: string[] = [];
      if (planId) {
        // Needs no node to answer (a dead source or target is why many rollbacks run); fences the plan first.
        const plan = await d.migrator.rollbackPlan(planId, { execution: i.execution, reason: failure });
        node = plan.node;
        warnings = plan.rollback?.warnings ?? [];
      } else if (node && i.workflow === 'scale-out') {
        // Failed before (or while) planning: the node may be in the ring as JOINING without a plan.
        await d.ring.update((doc) => {
          if (!doc.nodes.some((n) => n.id === node)) return false;
          const r = rangesOfNode(doc, node!);
          if (r.owned.length > 0 || r.incoming.length > 0) return false;
          removeNode(doc, node!);
        });
      }
      const doc = await d.ring.load();
      const inRing = !!doc && !!node && doc.nodes.some((n) => n.id === node);
      if (st.begin?.forNode) await d.locks.release(st.begin.forNode, i.execution);
      if (i.workflow === 'scale-in' && node) await d.locks.release(node, i.execution);
      await progress(i.execution, i.workflow, (p) => {
        p.phase = `rolled back after ${failure}`;
        p.outcome = 'rolled-back';
        if (warnings.length) p.facts.rollbackWarnings = warnings.slice(0, 5).join(' | ').slice(0, 1000);
      });
      // A launched node that ended up owning nothing (it left the ring) is terminated; one that took over ranges
      // before the failure stays, as a NORMAL node.
      return { node, instanceId, terminate: i.workflow === 'scale-out' && !!instanceId && !inRing, warnings: warnings.length };
    },
  };

  async function recordPlan(exec: string, wf: WorkflowName, planId: string, sessions: string[]) {
    const all = await Promise.all(sessions.map((id) => d.migrator.session(id)));
    await progress(exec, wf, (p) => {
      p.total = sessions.length;
      p.facts.planId = planId;
      p.facts.plannedKeys = all.reduce((a, s) => a + s.planned.keys, 0);
      p.facts.plannedBytes = all.reduce((a, s) => a + s.planned.bytes, 0);
      p.phase = sessions.length ? `planned ${sessions.length} sessions` : 'nothing to move';
    });
    return { planId, sessions };
  }
}

export type ScaleSteps = ReturnType<typeof scaleSteps>;

/**
 * A rolling upgrade's progress names the node it is at (`node 2 of 4 (n3)`, the fact its own steps set): the
 * migration steps it shares with ScaleOut and ScaleIn put it before their phase. Empty for the other workflows.
 */
export const UPGRADE_STEP_FACT = 'upgradeStep';
function upgradeStep(p: { facts: Record<string, unknown> }): string {
  const v = p.facts[UPGRADE_STEP_FACT];
  return typeof v === 'string' && v ? `${v}: ` : '';
}
