// EC2 spot interruptions: the two-minute warning (an EventBridge event) drains the cache node before its instance
// goes, and the fleet is brought back to its size once the drain is done. When two minutes are not enough, the
// instance dies mid-drain and the failure path takes over (docs/WORKFLOWS.md, "Spot interruptions").
import type { MetricKey } from '../metrics/metric-catalog.js';
import type { RingDocument, RingNode } from '../ring/document.js';
import type { LogLevel } from '../util/logger.js';

/** EventBridge's `detail-type` of the two-minute warning (source `aws.ec2`). */
export const SPOT_INTERRUPTION_WARNING = 'EC2 Spot Instance Interruption Warning';
/** EventBridge's `detail-type` of a rebalance recommendation: the instance is at elevated risk of interruption. */
export const REBALANCE_RECOMMENDATION = 'EC2 Instance Rebalance Recommendation';
/** How long EC2 gives between the warning and the interruption. */
export const SPOT_NOTICE_MS = 120_000;

/** One warning, as {@link parseSpotEvent} reads it. */
export interface SpotSignal {
  kind: 'interruption' | 'rebalance';
  instanceId: string;
  /** `terminate`, `stop` or `hibernate` for a warning; null for a rebalance recommendation. */
  action: string | null;
  /** When EC2 emitted it (epoch ms): the two minutes count from here. */
  at: number;
  /** EventBridge's event id (for the log). */
  eventId: string | null;
}

/**
 * Reads an EventBridge event of EC2 (the documented shapes: `detail-type`, `time`, `detail['instance-id']`,
 * `detail['instance-action']`); the reason when it is not one this handles. Never throws: a rule that routes
 * something else here is logged, not retried.
 */
export function parseSpotEvent(event: unknown, now: number = Date.now()): SpotSignal | { ignored: string } {
  if (typeof event !== 'object' || event === null) return { ignored: 'the event is not an object' };
  const e = event as Record<string, unknown>;
  const type = e['detail-type'];
  const kind = type === SPOT_INTERRUPTION_WARNING ? 'interruption' : type === REBALANCE_RECOMMENDATION ? 'rebalance' : null;
  if (!kind)
    return {
      ignored: `detail-type '${String(type)}' is neither '${SPOT_INTERRUPTION_WARNING}' nor '${REBALANCE_RECOMMENDATION}'`,
    };
  if (e.source !== undefined && e.source !== 'aws.ec2') return { ignored: `source '${String(e.source)}' is not aws.ec2` };
  const detail = (typeof e.detail === 'object' && e.detail !== null ? e.detail : {}) as Record<string, unknown>;
  const instanceId = detail['instance-id'];
  if (typeof instanceId !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(instanceId))
    return { ignored: `detail['instance-id'] is missing or not an instance id (${JSON.stringify(instanceId ?? null)})` };
  const action = typeof detail['instance-action'] === 'string' ? detail['instance-action'] : null;
  const time = typeof e.time === 'string' ? Date.parse(e.time) : NaN;
  return {
    kind,
    instanceId,
    action: kind === 'interruption' ? action : null,
    // A missing or odd time (a hand-made test event): the notice counts from its arrival.
    at: Number.isFinite(time) ? time : now,
    eventId: typeof e.id === 'string' ? e.id : null,
  };
}

/** The ring node running `instanceId`: nodes record their instance (on EC2 the node id is the instance id). */
export function nodeOfInstance(doc: Pick<RingDocument, 'nodes'>, instanceId: string): RingNode | undefined {
  return doc.nodes.find((n) => n.instance === instanceId) ?? doc.nodes.find((n) => n.id === instanceId && !n.instance);
}

/** An execution name (1-80 of A-Z a-z 0-9 _ -) for `prefix` and the instance: the same for every delivery of its warnings. */
export function spotExecutionName(prefix: 'spot-drain' | 'spot-refill', instanceId: string): string {
  return `${prefix}-${instanceId.replace(/[^A-Za-z0-9_-]/g, '-')}`.slice(0, 80);
}

/** What the handler needs of the workflows (Step Functions in AWS, the local runner locally). */
export interface SpotWorkflows {
  /** Starts `workflow` under `name`; `exists` when an execution of that name was started before (a redelivery). */
  start(workflow: 'scale-in' | 'scale-out', input: Record<string, unknown>, name: string): Promise<'started' | 'exists'>;
  /** The status of execution `name` (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED), undefined when there is none. */
  status(name: string): Promise<string | undefined>;
}

export interface SpotDrainOptions {
  /**
   * Each stream step of the drain returns after this long, so the state machine sees a dying source soon and each
   * Lambda call stays short. @default 20000
   */
  streamMaxMs?: number;
  /**
   * How long the drained node stays up after it left the ring, so callers with an older ring refresh before it
   * goes. Short: EC2 takes the instance at the end of the two minutes anyway. @default 10000
   */
  graceMs?: number;
  /** Bytes per second asked of the draining node; 0 = its own cap (the deadline wants all of it). @default 0 */
  rateBytesPerSec?: number;
  /**
   * How long this call waits for the drain's outcome (to start the refill, or not), from its start: past the
   * notice, a drain still running has lost its node and is rolling back. @default to a minute past the notice's end,
   * at least a minute
   */
  followMs?: number;
  /** Between two looks at the drain's status. @default 5000 */
  pollMs?: number;
  /** Options of the refill ScaleOut (its own defaults otherwise: a refill has no deadline). */
  refill?: { graceMs?: number; streamMaxMs?: number; rateBytesPerSec?: number };
}

export interface SpotDeps {
  ring: { load(): Promise<RingDocument | undefined> };
  workflows: SpotWorkflows;
  log: (level: LogLevel, message: string, fields: Record<string, unknown>) => void;
  metric: (key: MetricKey, value: number, dims?: Record<string, string>) => void;
  /** @default Date.now */
  now?: () => number;
  /** @default a timer */
  sleep?: (ms: number) => Promise<void>;
}

export type SpotOutcome =
  | { outcome: 'ignored'; reason: string; instanceId: string | null; node: string | null }
  | {
      /** drained: the node left the ring and the refill was started; failed: the failure path took over. */
      outcome: 'drained' | 'drain-failed' | 'drain-running';
      instanceId: string;
      node: string | null;
      drain: string;
      /** The ScaleOut that brings the fleet back to its size (only after a drain that finished). */
      refill: string | null;
      drainStatus: string;
      redelivered: boolean;
    };

const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);

/**
 * Handles one EC2 spot warning for a cache node:
 *
 * 1. The instance's node, from the ring. Not there, or already LEAVING or DOWN (drained or failing by other means;
 *    the failure path replaces a DOWN node), or not serving yet (JOINING, PARTIAL: its ScaleOut rolls back when it
 *    dies): logged and ignored.
 * 2. The drain, at once: a ScaleIn of that node (incremental, each of its ranges to its successor), named after the
 *    instance (`spot-drain-<instance>`) so that a redelivered warning, or the rebalance recommendation and the
 *    warning of one instance, start it once. The ScaleIn locks the node (core/workflows/progress.ts ScaleLocks).
 * 3. The refill, once the drain finished: a ScaleOut (`spot-refill-<instance>`, taking no node lock, so nothing
 *    collides with a drain still ending) brings the fleet back to its size. Not before: launching takes 1-2 minutes
 *    on EC2, which the drain cannot wait for, and a drain that fails leaves the node to the failure path (marked
 *    DOWN, then replaced by replace-node), which restores the size itself; a refill started as well would leave the
 *    fleet one node larger.
 *
 * A delivery that finds its drain already started (a retried invocation) follows that drain instead of starting
 * anything. Every action is a log line, and a metric: `SpotInterruptions` (by outcome), `SpotDrainTime`,
 * `SpotDrainsFailed`.
 */
export async function handleSpotInterruption(event: unknown, deps: SpotDeps, o: SpotDrainOptions = {}): Promise<SpotOutcome> {
  const now = deps.now ?? Date.now;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const signal = parseSpotEvent(event, now());
  if ('ignored' in signal) {
    deps.log('warn', `spot interruption: event ignored: ${signal.ignored}`, {});
    deps.metric('spotInterruptions', 1, { Outcome: 'ignored' });
    return { outcome: 'ignored', reason: signal.ignored, instanceId: null, node: null };
  }
  const what = signal.kind === 'interruption' ? 'interruption warning' : 'rebalance recommendation';
  const fields = { instanceId: signal.instanceId, kind: signal.kind, action: signal.action, eventId: signal.eventId };
  const drain = spotExecutionName('spot-drain', signal.instanceId);
  const refill = spotExecutionName('spot-refill', signal.instanceId);

  let node: string | null = null;
  const redelivered = (await deps.workflows.status(drain)) !== undefined;
  if (redelivered) {
    deps.log('info', `spot interruption: ${what} for ${signal.instanceId} again; following ${drain}`, { ...fields, drain });
    deps.metric('spotInterruptions', 1, { Outcome: 'redelivered' });
  } else {
    const doc = await deps.ring.load();
    const n = doc ? nodeOfInstance(doc, signal.instanceId) : undefined;
    const skip = !n
      ? 'its instance runs no node of the ring'
      : n.state === 'LEAVING'
        ? `node ${n.id} is already LEAVING (being drained)`
        : n.state === 'DOWN'
          ? `node ${n.id} is already DOWN (the failure path replaces it)`
          : n.state !== 'NORMAL'
            ? `node ${n.id} is ${n.state} (not serving yet: its ScaleOut rolls back if it goes)`
            : undefined;
    if (skip) {
      deps.log('info', `spot interruption: ${what} for ${signal.instanceId} ignored: ${skip}`, {
        ...fields,
        node: n?.id ?? null,
      });
      deps.metric('spotInterruptions', 1, { Outcome: 'ignored' });
      return { outcome: 'ignored', reason: skip, instanceId: signal.instanceId, node: n?.id ?? null };
    }
    node = n!.id;
    const input = {
      nodeId: node,
      mode: 'incremental',
      streamMaxMs: o.streamMaxMs ?? 20_000,
      graceMs: o.graceMs ?? 10_000,
      rateBytesPerSec: o.rateBytesPerSec ?? 0,
    };
    const started = await deps.workflows.start('scale-in', input, drain);
    const left = Math.max(0, signal.at + SPOT_NOTICE_MS - now());
    deps.log('warn', `spot interruption: ${what} for node ${node} (${signal.instanceId}); draining it (${drain})`, {
      ...fields,
      node,
      drain,
      started,
      noticeLeftMs: signal.kind === 'interruption' ? left : null,
    });
    deps.metric('spotInterruptions', 1, { Outcome: started === 'started' ? 'draining' : 'redelivered' });
  }

  // Follow the drain to its end: the refill starts only after a drain that finished.
  const until = now() + (o.followMs ?? Math.max(60_000, signal.at + SPOT_NOTICE_MS + 60_000 - now()));
  let status = (await deps.workflows.status(drain)) ?? 'RUNNING';
  while (!TERMINAL.has(status) && now() < until) {
    await sleep(Math.max(1, Math.min(o.pollMs ?? 5000, until - now())));
    status = (await deps.workflows.status(drain)) ?? 'RUNNING';
  }
  const base = { instanceId: signal.instanceId, node, drain, drainStatus: status, redelivered };
  if (status === 'SUCCEEDED') {
    const ms = Math.max(0, now() - signal.at);
    const input = {
      mode: 'incremental',
      reason: `spot ${signal.kind} of ${node ?? signal.instanceId} (${signal.instanceId})`,
      ...o.refill,
    };
    const started = await deps.workflows.start('scale-out', input, refill);
    if (!redelivered || started === 'started') deps.metric('spotDrainMs', ms);
    deps.log('info', `spot interruption: ${signal.instanceId} drained in ${ms} ms; refilling the fleet (${refill})`, {
      ...fields,
      ...base,
      refill,
      started,
      drainMs: ms,
    });
    return { outcome: 'drained', ...base, refill };
  }
  if (TERMINAL.has(status)) {
    deps.metric('spotDrainsFailed', 1);
    deps.log(
      'warn',
      `spot interruption: the drain of ${signal.instanceId} ended ${status}; the failure path takes over ` +
        '(the node is marked DOWN once it is gone, then replaced by replace-node)',
      { ...fields, ...base },
    );
    return { outcome: 'drain-failed', ...base, refill: null };
  }
  deps.log('warn', `spot interruption: the drain of ${signal.instanceId} is still running past the notice; no refill started`, {
    ...fields,
    ...base,
  });
  return { outcome: 'drain-running', ...base, refill: null };
}
