// RollingUpgrade's steps: every cache node, one at a time, handed over to a freshly launched node and retired.
import * as z from 'zod';
import { ValidationError } from '../../errors.js';
import { nodeIdSchema, rangesOfNode, removeNode, type RingDocument } from '../../ring/document.js';
import { CasConflictError, JsonDocStore, RingPreconditionError } from '../../ring/store.js';
import { GRACE_FACTS } from '../../../sdk/src/contract.js';
import { chooseLaunchSubnet, launchClientToken, launchedNode, launchedNodeFields } from './fleet-placement.js';
import {
  migrationOptions,
  NoNodeToRemoveError,
  normalisedOptions,
  ScaleOutInFlightError,
  UPGRADE_STEP_FACT,
  type ScaleDeps,
} from './scale-steps.js';

const execution = z.string().min(1).max(128);
const workflow = z.literal('rolling-upgrade').default('rolling-upgrade');

/**
 * What `rolling-upgrade` takes (the execution's input), validated by the API before it starts and by the begin step.
 * The new version is whatever a launch starts now: on AWS the fleet's launch template (its `$Latest` version: the
 * AMI, the user data that fetches the cache-node bundle), locally the local fleet's launch environment.
 */
export const rollingUpgradeRequest = z.strictObject({
  /**
   * The nodes to replace, in this order. Default: every NORMAL node of the ring at the start; or, when the last
   * rolling upgrade stopped part way (a failure rolled back its current node), the nodes it had not replaced yet.
   */
  nodes: z.array(nodeIdSchema).min(1).max(1000).nullish(),
  ...migrationOptions,
  /** How long a launched node may take to answer its health check. @default 900000 */
  launchTimeoutMs: z.number().int().min(1000).max(3_600_000).default(900_000),
  /**
   * Start even though the record says another rolling upgrade is running: for one whose execution was stopped by
   * hand (aborted), which leaves its record behind. A running one is not stopped by this: do not use it then.
   */
  force: z.boolean().default(false),
  /** Why (recorded in the progress facts). */
  reason: z.string().max(200).nullish(),
});
export type RollingUpgradeRequest = z.input<typeof rollingUpgradeRequest>;

const beginInput = rollingUpgradeRequest.extend({ execution, workflow });

const nextInput = z.strictObject({
  execution,
  workflow,
  nodes: z.array(nodeIdSchema).min(1),
  launchTimeoutMs: z.number().int().min(1000),
});

const planInput = z.strictObject({
  execution,
  workflow,
  /** The node handed off (the old version). */
  nodeId: nodeIdSchema,
  /** Its successor. */
  ...launchedNodeFields,
  mode: z.enum(['incremental', 'parallel']),
});

const finishInput = z.strictObject({
  execution,
  workflow,
  planId: z.string().min(1),
  nodeId: nodeIdSchema,
  newNodeId: nodeIdSchema,
  /** The grace period the state machine waits next, before the old instance is terminated. */
  graceSeconds: z.number().int().min(0),
});

const doneInput = z.strictObject({ execution, workflow });

const rollbackInput = z.strictObject({
  execution,
  workflow,
  /** The execution's state when the failure was caught. */
  state: z.looseObject({
    next: z.looseObject({ nodeId: z.string().nullish(), instanceId: z.string().nullish() }).nullish(),
    instance: z.looseObject({ instanceId: z.string().nullish() }).nullish(),
    plan: z.looseObject({ planId: z.string().nullish() }).nullish(),
    error: z.looseObject({ Error: z.string().optional(), Cause: z.string().optional() }).nullish(),
  }),
});

/**
 * The record of the last rolling upgrade (`migrations/rolling-upgrades/last`, beside the migration plans: the documents
 * the step Lambda may write in AWS, cdk/constructs/cold-tier-bucket.ts): the lock and the resume point.
 */
export interface UpgradeRecord {
  execution: string;
  /** `stopped`: a failure rolled back its current node; a new upgrade without `nodes` continues with the rest. */
  state: 'running' | 'done' | 'stopped';
  /** The nodes it set out to replace, in order. */
  nodes: string[];
  /** Old node → the node that replaced it. */
  replaced: Record<string, string>;
  startedAt: string;
  updatedAt: string;
}

/** A running record older than this belongs to an execution that has ended (the state machine's timeout is 24 h). */
const RECORD_STALE_MS = 25 * 3600_000;
const RECORD_ID = 'last';

type UpgradeDeps = Pick<ScaleDeps, 'ring' | 'migrator' | 'progress' | 'locks' | 'now' | 'fleetSubnets'>;

/**
 * RollingUpgrade's steps (the state machine: cdk/constructs/workflows/rolling-upgrade.ts). Begin picks the nodes and
 * takes the fleet-wide upgrade record; Next picks the next node still to replace, locks it and places its
 * successor's launch in its AZ; the launch and the health check are ScaleOut's; Plan hands the node's ranges to the
 * successor (core/nodes/hand-off.ts), migrated by the shared migration states; Finish makes the successor NORMAL
 * and removes the old node from the ring (its instance is terminated after the grace period); Done closes the record.
 * A failure rolls back the current node's hand-off and stops: the nodes replaced so far stay replaced.
 */
export function upgradeSteps(d: UpgradeDeps) {
  // Beside the migration plans, in the ring's document store (under the prefix the ring's writers may write).
  const records = new JsonDocStore<UpgradeRecord>(d.migrator.plans.cas, 'migrations/rolling-upgrades/');
  const iso = () => new Date(d.now()).toISOString();
  const progress = (exec: string, edit: Parameters<typeof d.progress.update>[2]) =>
    d.progress.update(exec, 'rolling-upgrade', edit);

  async function putRecord(rec: UpgradeRecord, expect: (cur: UpgradeRecord) => void): Promise<void> {
    if (!(await records.get(RECORD_ID))) {
      try {
        await records.create(RECORD_ID, rec);
        return;
      } catch (e) {
        if (!(e instanceof CasConflictError)) throw e; // another begin created it meanwhile: check it
      }
    }
    await records.update(RECORD_ID, (cur) => {
      expect(cur);
      return rec;
    });
  }

  async function editRecord(exec: string, edit: (r: UpgradeRecord) => void): Promise<UpgradeRecord | undefined> {
    if (!(await records.get(RECORD_ID))) return undefined;
    return records.update(RECORD_ID, (cur) => {
      if (cur.execution !== exec) return undefined; // taken over by a forced upgrade: not ours to change
      edit(cur);
      cur.updatedAt = iso();
      return cur;
    });
  }

  function stepName(nodes: string[], k: number): string {
    return `node ${k + 1} of ${nodes.length} (${nodes[k]})`;
  }

  return {
    /**
     * Validates the request, picks the nodes to replace (named, or the rest of a stopped upgrade, or every NORMAL
     * node) and takes the upgrade record: one rolling upgrade at a time.
     */
    async begin(raw: unknown) {
      const i = beginInput.parse(raw);
      if (d.fleetSubnets.length === 0)
        throw new ValidationError(
          'STRATA_FLEET_SUBNETS',
          'the fleet has no subnets configured: RollingUpgrade cannot launch nodes',
        );
      const doc = await d.ring.load();
      if (!doc) throw new NoNodeToRemoveError('there is no ring yet: no node to upgrade');
      const last = await records.get(RECORD_ID);
      if (last?.execution === i.execution) return beginResult(i, last.nodes, null); // a retried begin
      const live = last?.state === 'running' && d.now() - Date.parse(last.startedAt) < RECORD_STALE_MS;
      if (live && !i.force)
        throw new RingPreconditionError(
          `a rolling upgrade is already running (execution '${last.execution}'); if it was aborted, start with force: true`,
        );
      let nodes: string[];
      let resumedFrom: string | null = null;
      if (i.nodes) {
        for (const id of i.nodes) {
          const n = doc.nodes.find((x) => x.id === id);
          if (!n)
            throw new NoNodeToRemoveError(`node '${id}' is not in the ring (nodes: ${doc.nodes.map((x) => x.id).join(', ')})`);
          if (n.state !== 'NORMAL')
            throw new NoNodeToRemoveError(
              `node '${id}' is ${n.state}: only a NORMAL node is upgraded (ReplaceNode replaces a DOWN one)`,
            );
        }
        nodes = [...new Set(i.nodes)];
      } else {
        const rest =
          last && last.state !== 'done'
            ? last.nodes.filter((id) => !last.replaced[id] && doc.nodes.some((n) => n.id === id && n.state === 'NORMAL'))
            : [];
        if (rest.length) resumedFrom = last!.execution;
        nodes = rest.length ? rest : doc.nodes.filter((n) => n.state === 'NORMAL').map((n) => n.id);
      }
      if (nodes.length === 0) throw new NoNodeToRemoveError('the ring has no NORMAL node to upgrade');
      const at = iso();
      await putRecord({ execution: i.execution, state: 'running', nodes, replaced: {}, startedAt: at, updatedAt: at }, (cur) => {
        // Checked again inside the compare-and-set: two begins racing, only one goes on.
        const stillLive = cur.state === 'running' && d.now() - Date.parse(cur.startedAt) < RECORD_STALE_MS;
        if (stillLive && cur.execution !== i.execution && !i.force)
          throw new RingPreconditionError(`a rolling upgrade is already running (execution '${cur.execution}')`);
      });
      return beginResult(i, nodes, resumedFrom);
    },

    /**
     * The next node still to replace (in the ring, NORMAL, not replaced by this upgrade), locked for the execution, and
     * its successor's launch: in the old node's AZ (else the AZ with the fewest nodes), with a ClientToken of its own.
     * `done: true` when none is left. A node that is no longer NORMAL (marked DOWN meanwhile: ReplaceNode's) is
     * skipped.
     */
    async next(raw: unknown) {
      const i = nextInput.parse(raw);
      const doc = (await d.ring.load())!;
      const rec = await records.get(RECORD_ID);
      const replaced = rec?.execution === i.execution ? rec.replaced : {};
      const skipped: string[] = [];
      for (const [k, id] of i.nodes.entries()) {
        if (replaced[id]) continue;
        const n = doc.nodes.find((x) => x.id === id);
        if (!n) continue; // removed meanwhile (a scale-in): nothing to upgrade
        if (n.state !== 'NORMAL') {
          skipped.push(`${id} (${n.state})`);
          continue;
        }
        if (!(await d.locks.acquire(id, i.execution))) throw new ScaleOutInFlightError(id);
        const inAz = d.fleetSubnets.find((s) => s.availabilityZone === n.az);
        const subnet = inAz ?? chooseLaunchSubnet(d.fleetSubnets, doc.nodes);
        const launch = { ordinal: k, ...subnet, clientToken: launchClientToken(i.execution, k) };
        const step = stepName(i.nodes, k);
        await progress(i.execution, (p) => {
          p.done = Object.keys(replaced).length;
          p.phase = `${step}: launching its successor`;
          p.facts[UPGRADE_STEP_FACT] = step;
          p.facts.nodeId = id;
          if (skipped.length) p.facts.skipped = skipped.join(', ');
        });
        return {
          done: false,
          index: k,
          nodeId: id,
          instanceId: n.instance ?? null,
          launch,
          launchedAt: d.now(),
          launchTimeoutMs: i.launchTimeoutMs,
        };
      }
      if (skipped.length) await progress(i.execution, (p) => void (p.facts.skipped = skipped.join(', ')));
      return { done: true };
    },

    /** The successor joins (JOINING) and the old node is LEAVING; one session per range of the old node. */
    async plan(raw: unknown) {
      const i = planInput.parse(raw);
      const target = launchedNode(i);
      const plan = await d.migrator.planHandOff({ from: i.nodeId, target, mode: i.mode, execution: i.execution });
      const sessions = await Promise.all(plan.sessions.map((id) => d.migrator.session(id)));
      await progress(i.execution, (p) => {
        const step = p.facts[UPGRADE_STEP_FACT] ?? i.nodeId;
        p.facts.planId = plan.id;
        p.facts.newNodeId = i.newNodeId;
        p.facts.plannedKeys = sessions.reduce((a, s) => a + s.planned.keys, 0);
        p.facts.plannedBytes = sessions.reduce((a, s) => a + s.planned.bytes, 0);
        p.phase = `${String(step)}: handing ${sessions.length} ranges over to ${i.newNodeId}`;
      });
      return { planId: plan.id, sessions: plan.sessions };
    },

    /** The successor is NORMAL, the old node leaves the ring; its instance goes after the grace period. */
    async finish(raw: unknown) {
      const i = finishInput.parse(raw);
      const plan = await d.migrator.finish(i.planId, { terminateAfterMs: 0, execution: i.execution });
      const rec = await editRecord(i.execution, (r) => void (r.replaced[i.nodeId] = i.newNodeId));
      await d.locks.release(i.nodeId, i.execution);
      const doc = (await d.ring.load())!;
      await progress(i.execution, (p) => {
        if (rec) p.done = Math.min(p.total, Object.keys(rec.replaced).length);
        p.phase = `${String(p.facts[UPGRADE_STEP_FACT] ?? i.nodeId)}: replaced by ${i.newNodeId}; its instance goes after the grace period`;
        p.facts[GRACE_FACTS.until] = new Date(Date.now() + i.graceSeconds * 1000).toISOString();
        p.facts[GRACE_FACTS.ms] = i.graceSeconds * 1000;
      });
      return { planId: plan.id, node: i.nodeId, newNode: i.newNodeId, nodes: doc.nodes.length, ringVersion: doc.version };
    },

    /** Every node replaced: the record is closed (the next upgrade starts from every NORMAL node). */
    async done(raw: unknown) {
      const i = doneInput.parse(raw);
      const rec = await editRecord(i.execution, (r) => void (r.state = 'done'));
      const replaced = rec ? Object.keys(rec.replaced).length : 0;
      await progress(i.execution, (p) => {
        p.done = p.total;
        p.phase = `done: ${replaced} nodes replaced`;
        p.outcome = 'succeeded';
        delete p.facts[UPGRADE_STEP_FACT];
      });
      return { replaced: rec?.replaced ?? {} };
    },

    /**
     * Undoes the current node's hand-off after a failure (the nodes replaced before stay replaced): the plan is rolled
     * back (Migrator.rollbackPlan: pending ranges released; the successor leaves the ring if it took nothing over,
     * else it stays NORMAL with what it took; the old node is NORMAL again with the rest). A successor launched but
     * not yet planned leaves the ring if it joined. Which instances are then to be terminated: the successor when it
     * owns nothing (`terminateNew`), the old node when it had handed everything over (`terminateOld`: a failure
     * after the last publish). The record is `stopped`: an upgrade started without `nodes` continues from here.
     */
    async rollback(raw: unknown) {
      const i = rollbackInput.parse(raw);
      const st = i.state;
      const oldNode = st.next?.nodeId ?? null;
      const newNode = st.instance?.instanceId ?? null;
      const failure = `${st.error?.Error ?? 'a failure'}${st.error?.Cause ? `: ${String(st.error.Cause).slice(0, 300)}` : ''}`;
      let warnings: string[] = [];
      if (st.plan?.planId) {
        const plan = await d.migrator.rollbackPlan(st.plan.planId, { execution: i.execution, reason: failure });
        warnings = plan.rollback?.warnings ?? [];
      } else if (newNode) {
        // Failed before (or while) planning: the successor may have joined and the old node be LEAVING, without a plan.
        await d.ring.update((doc) => unplannedHandOff(doc, oldNode, newNode));
      }
      const doc = await d.ring.load();
      const inRing = (id: string | null) => !!id && !!doc?.nodes.some((n) => n.id === id);
      if (oldNode) await d.locks.release(oldNode, i.execution);
      const rec = await editRecord(i.execution, (r) => {
        if (oldNode && newNode && !inRing(oldNode) && inRing(newNode)) r.replaced[oldNode] = newNode;
        r.state = 'stopped';
      });
      await progress(i.execution, (p) => {
        const step = p.facts[UPGRADE_STEP_FACT];
        const replaced = rec ? Object.keys(rec.replaced).length : p.done;
        p.done = Math.min(p.total, replaced);
        p.phase = `${step ? `${String(step)}: ` : ''}rolled back after ${failure}; ${replaced} of ${p.total} nodes replaced`;
        p.outcome = 'rolled-back';
        if (warnings.length) p.facts.rollbackWarnings = warnings.slice(0, 5).join(' | ').slice(0, 1000);
      });
      const oldInstanceId = st.next?.instanceId ?? null;
      return {
        newInstanceId: newNode,
        terminateNew: !!newNode && !inRing(newNode),
        oldInstanceId,
        terminateOld: !!oldNode && !!oldInstanceId && !inRing(oldNode),
        warnings: warnings.length,
      };
    },
  };

  async function beginResult(i: z.infer<typeof beginInput>, nodes: string[], resumedFrom: string | null) {
    await progress(i.execution, (p) => {
      p.total = nodes.length;
      p.phase = `replacing ${nodes.length} nodes one at a time`;
      p.facts.mode = i.mode;
      p.facts.nodes = nodes.join(', ').slice(0, 1000);
      p.facts.resumedFrom = resumedFrom;
      p.facts.reason = i.reason ?? null;
    });
    return { nodes, total: nodes.length, launchTimeoutMs: i.launchTimeoutMs, options: normalisedOptions(i) };
  }
}

/**
 * The ring after a hand-off that failed before its plan existed: the successor leaves if it owns nothing, the old
 * node is NORMAL again (it kept every range). No change when neither applies.
 */
function unplannedHandOff(doc: RingDocument, oldNode: string | null, newNode: string): boolean {
  let changed = false;
  if (doc.nodes.some((n) => n.id === newNode)) {
    const r = rangesOfNode(doc, newNode);
    if (r.owned.length === 0 && r.incoming.length === 0) {
      removeNode(doc, newNode);
      changed = true;
    }
  }
  const old = oldNode ? doc.nodes.find((n) => n.id === oldNode) : undefined;
  if (old?.state === 'LEAVING' && !doc.ranges.some((x) => x.pending && x.owner === old.id)) {
    old.state = 'NORMAL';
    changed = true;
  }
  return changed;
}

export type UpgradeSteps = ReturnType<typeof upgradeSteps>;
