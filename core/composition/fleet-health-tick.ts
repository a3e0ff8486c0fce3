import type { MetricKey } from '../metrics/metric-catalog.js';
import { emfDocument, serializeEmf } from '../metrics/emf.js';
import { NodeHealthChecker } from '../nodes/health-check.js';
import { type BatchNodeProbe, type NodeProbe } from '../nodes/health-probe.js';
import {
  HEALTH_CHECKER_KEY,
  type HoldReason,
  type MarkedDown,
  type NodeHealthCheckerSnapshot,
} from '../nodes/health-snapshot.js';
import { HealthControls } from '../nodes/health-controls.js';
import type { RingDocument } from '../ring/document.js';
import { CasConflictError, RingStore, type CasStore } from '../ring/store.js';
import { log as defaultLog, type Logger } from '../util/logger.js';
import { ExecutionExistsError, type WorkflowService } from '../workflows/admin-service.js';

/**
 * The failure detector of the cache nodes in AWS: one run of core/nodes/health-check.ts per policy tick, in the
 * scheduled evaluator (core/composition/policy-evaluator-lambda.ts: a Lambda outside the VPC, so it probes the nodes'
 * EC2 status, not the nodes themselves). Locally the checker runs in the API process instead, every second, fed by
 * the coordinators' suspicion (scripts/local/local-warm.ts startLocalHealthCheck); in AWS the coordinators' suspicion
 * is not shared, so the checker probes every serving node at each tick (`probeAll`: one EC2 call covers them,
 * plus one report read per healthy instance for its daemon's heartbeat, core/nodes/heartbeat-probe.ts).
 *
 * The evaluator keeps nothing between invocations, so the checker's tracks are kept in the ring store, beside the
 * operators' switch (`health/controls`): {@link HEALTH_CHECKER_KEY}, read once per tick and written back, by
 * compare-and-set, only when it changed (a node started or stopped failing, a marking, a hold): a healthy fleet
 * costs one GET a tick and no PUT.
 *
 * A node is marked DOWN (a ring compare-and-set) after two failed probes at least {@link FLEET_HEALTH_CONFIRM_MS}
 * apart: two ticks a minute apart. Then the replace-node workflow is started for it, under an execution name derived
 * from the node and the ring version of the mark (so a start is never doubled); a start that fails is tried again at
 * the next ticks, up to {@link REPLACEMENT_START_ATTEMPTS} times, while the node is still DOWN.
 */

export { HEALTH_CHECKER_KEY };

/**
 * How long a node's probes must have failed before it is marked: a little under the ticker's minute, so that the
 * second failed tick a minute after the first confirms even when EventBridge starts it a few seconds early.
 */
export const FLEET_HEALTH_CONFIRM_MS = 50_000;
/** Failed probes in a row a marking needs: two ticks, a minute apart. */
export const FLEET_HEALTH_CONFIRM_PROBES = 2;
/** A replacement whose start failed is tried again at this many ticks in all (about ten minutes), then left to an operator. */
export const REPLACEMENT_START_ATTEMPTS = 10;

/** A replacement that could not be started yet (kept in the state document, tried again at the next ticks). */
export interface PendingReplacement {
  node: string;
  /** The `down.at` of the mark it is for: a node marked again later (a new incarnation) is another replacement. */
  downAt: number;
  execution: string;
  attempts: number;
  lastError: string;
}

/** {@link HEALTH_CHECKER_KEY}: what one tick leaves for the next. */
export interface FleetHealthStateDocument {
  format: 1;
  checker: NodeHealthCheckerSnapshot;
  replacements: PendingReplacement[];
}

export interface FleetHealthOptions {
  /** The ring store: the ring, `health/controls` (read) and {@link HEALTH_CHECKER_KEY} (read and written). */
  cas: CasStore;
  /** The nodes' probe: the EC2 status of their instances in AWS (core/nodes/ec2-probe.ts). */
  probe: NodeProbe | BatchNodeProbe;
  /** Starts replace-node for each node marked DOWN (the evaluator's workflow service); absent: marks only. */
  workflows?: Pick<WorkflowService, 'start'>;
  /** The deployment's name: the metrics' Environment dimension. */
  environment: string;
  /** @default the process logger */
  log?: Logger;
  /** Where the EMF metric lines go. @default stdout (CloudWatch Logs turns them into metrics) */
  emit?: (text: string) => void;
  /** @default Date.now */
  now?: () => number;
  /** @default {@link FLEET_HEALTH_CONFIRM_MS} */
  confirmMs?: number;
  /** @default {@link FLEET_HEALTH_CONFIRM_PROBES} */
  confirmProbes?: number;
}

export interface FleetHealthTickResult {
  /** Why nothing was checked (no ring, or a ring without nodes). */
  skipped?: string;
  probed: string[];
  marked: string[];
  held?: HoldReason;
  /** The replace-node executions started at this tick (a retried start included). */
  started: string[];
  /** Whether the state document was written (only when something changed). */
  saved: boolean;
}

/** The replace-node execution for the node marked DOWN at ring version `ringVersion`: 1-80 of A-Z a-z 0-9 _ -. */
export function replacementExecutionName(node: string, ringVersion: number): string {
  return `replace-node-${node.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 48)}-v${ringVersion}`;
}

/**
 * One tick of the failure detector: reads the ring (no ring, or no node in it: nothing else is read), restores the
 * checker from {@link HEALTH_CHECKER_KEY}, retries the replacements whose start failed, probes every serving node,
 * marks those confirmed DOWN (within the checker's caps and the operators' pause) and starts their replacements,
 * then saves the state if it changed. Throws only when the ring cannot be read.
 */
export async function fleetHealthTick(o: FleetHealthOptions): Promise<FleetHealthTickResult> {
  const log = o.log ?? defaultLog;
  const now = (o.now ?? Date.now)();
  const store = new RingStore(o.cas);
  const ring = await store.load();
  if (!ring || ring.nodes.length === 0)
    return { skipped: ring ? 'the ring has no node' : 'no ring document', probed: [], marked: [], started: [], saved: false };

  const saved = await loadState(o.cas, log);
  // Copies: `saved` stays what was read, to tell whether this tick changed anything.
  const replacements = (saved?.doc?.replacements ?? []).map((p) => ({ ...p }));
  const started: string[] = [];
  const start = async (node: string, execution: string): Promise<void> => {
    if (!o.workflows) throw new Error('no workflow service is configured (STRATA_WORKFLOW_ARNS): replace the node by hand');
    try {
      await o.workflows.start('replace-node', { nodeId: node, reason: 'health check' }, execution);
    } catch (e) {
      // Started by an earlier attempt whose answer was lost: that is the replacement.
      if (!(e instanceof ExecutionExistsError)) throw e;
    }
    started.push(execution);
    log.warn(`health check: started ${execution} to replace cache node ${node}`, { node, execution });
  };

  await retryReplacements(replacements, ring, start, log);

  let preloaded: RingDocument | undefined = ring;
  const checker = new NodeHealthChecker({
    // The ring just read serves the checker's first read; its mark re-reads the store (compare-and-set).
    ring: {
      load: async () => {
        const doc = preloaded;
        preloaded = undefined;
        return doc ?? store.load();
      },
      update: (edit) => store.update(edit),
    },
    probe: o.probe,
    probeAll: true,
    confirmMs: o.confirmMs ?? FLEET_HEALTH_CONFIRM_MS,
    confirmProbes: o.confirmProbes ?? FLEET_HEALTH_CONFIRM_PROBES,
    controls: new HealthControls(o.cas),
    now: () => now,
    log: (level, message, fields) => log[level](message, fields),
    metric: metricsOf(o.environment, o.emit ?? ((s) => void process.stdout.write(s)), now),
    onMarked: async (m: MarkedDown) => {
      const execution = replacementExecutionName(m.node, m.ringVersion);
      try {
        await start(m.node, execution);
      } catch (e) {
        const lastError = messageOf(e).slice(0, 300);
        replacements.push({ node: m.node, downAt: Math.round(m.at), execution, attempts: 1, lastError });
        throw e;
      }
    },
  });
  if (saved?.doc && !checker.restore(saved.doc.checker))
    log.warn(`health check: ${HEALTH_CHECKER_KEY} holds no checker state it can read; starting from zero`);

  const tick = await checker.tick(now);
  const next: FleetHealthStateDocument = { format: 1, checker: checker.snapshot(), replacements };
  // Nothing to remember and nothing saved yet (a healthy fleet since the deployment): no document either. A damaged
  // document is replaced.
  const empty =
    next.checker.tracks.length === 0 && next.checker.marked.length === 0 && !next.checker.held && replacements.length === 0;
  const changed = saved?.doc ? JSON.stringify(next) !== JSON.stringify(saved.doc) : saved !== undefined || !empty;
  let written = false;
  if (changed) {
    try {
      await o.cas.put(HEALTH_CHECKER_KEY, JSON.stringify(next), saved?.etag ?? null);
      written = true;
    } catch (e) {
      if (e instanceof CasConflictError) log.warn("health check: an overlapping tick saved first; this tick's state is dropped");
      else log.warn('health check: its state could not be saved; the next tick starts from the last one saved', { error: e });
    }
  }
  return {
    probed: tick.probed,
    marked: tick.marked,
    ...(tick.held ? { held: tick.held } : {}),
    started,
    saved: written,
  };
}

/** The state document and its etag; a document that is not JSON reads as none (and is replaced at the next save). */
async function loadState(
  cas: CasStore,
  log: Logger,
): Promise<{ etag: string; doc: FleetHealthStateDocument | undefined } | undefined> {
  const got = await cas.get(HEALTH_CHECKER_KEY);
  if (!got) return undefined;
  try {
    const doc = JSON.parse(got.body) as FleetHealthStateDocument;
    if (doc?.format !== 1 || !Array.isArray(doc.replacements)) throw new Error(`format ${String(doc?.format)}`);
    return { etag: got.etag, doc };
  } catch (e) {
    log.warn(`health check: ${HEALTH_CHECKER_KEY} cannot be read; starting from zero`, { error: messageOf(e) });
    return { etag: got.etag, doc: undefined };
  }
}

/**
 * Starts again the replacements whose start failed, while their node is still DOWN from the same mark; drops those
 * started, no longer needed, or tried {@link REPLACEMENT_START_ATTEMPTS} times (an error line says to act by hand).
 */
async function retryReplacements(
  pending: PendingReplacement[],
  ring: RingDocument,
  start: (node: string, execution: string) => Promise<void>,
  log: Logger,
): Promise<void> {
  for (const p of [...pending]) {
    const drop = () => pending.splice(pending.indexOf(p), 1);
    const node = ring.nodes.find((n) => n.id === p.node);
    if (!node || node.state !== 'DOWN' || node.down?.at !== p.downAt) {
      log.info(`health check: cache node ${p.node} is no longer the DOWN node ${p.execution} was for; not starting it`, {
        ...p,
      });
      drop();
      continue;
    }
    try {
      await start(p.node, p.execution);
      drop();
    } catch (e) {
      p.attempts++;
      p.lastError = messageOf(e).slice(0, 300);
      if (p.attempts >= REPLACEMENT_START_ATTEMPTS) {
        log.error(
          `health check: replace-node for cache node ${p.node} could not be started in ${p.attempts} attempts; ` +
            'start it by hand (strata workflow start replace-node)',
          { ...p },
        );
        drop();
      } else log.warn(`health check: starting ${p.execution} failed again; trying at the next tick`, { ...p });
    }
  }
}

/** The checker's metrics as catalog EMF lines: a marking (NodesMarkedDown) and a hold (NodeHealthHeld, by Reason). */
function metricsOf(
  environment: string,
  emit: (text: string) => void,
  now: number,
): (name: string, value: number, dims?: Record<string, string>) => void {
  return (name, value, dims = {}) => {
    const key: MetricKey | undefined =
      name === 'NodeMarkedDown' ? 'nodesMarkedDown' : name === 'NodeHealthHeld' ? 'nodeHealthHeld' : undefined;
    if (!key) return;
    const reason = key === 'nodeHealthHeld' ? dims.reason : undefined;
    emit(
      serializeEmf([
        emfDocument({
          timestamp: now,
          dimensions: { Environment: environment, ...(reason ? { Reason: reason } : {}) },
          values: { [key]: value },
          // The node is a property of the line, not a dimension: one metric however many nodes the fleet had.
          ...(dims.node ? { properties: { Node: dims.node } } : {}),
        }),
      ]),
    );
  };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
