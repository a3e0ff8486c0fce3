import * as z from 'zod';
import { readNodeReport } from '../../ring/node-report-reader.js';
import { CasConflictError, JsonDocStore, type CasStore, type RingStore } from '../../ring/store.js';
import type { ScaleLocks } from '../progress.js';
import { decideScaleOut, scaleTriggerSettingsSchema, type NodeLoad, type ScaleDecision } from './threshold.js';

/**
 * The scheduled scale-out trigger (paper 000): reads every node's fill and the fleet's request rate, evaluates
 * the speculative threshold T and starts a ScaleOut for the node that passed it — a pre-launch when it passed
 * T, a split at once when it overflowed. At most one scale-out per node runs (the per-node locks the ScaleOut
 * steps hold), so a trigger that fires again while one is in flight starts nothing.
 *
 * Fill and request counters come from the statistics reports the nodes write to the ring store
 * (ring/node-reports.ts), not from the nodes themselves: the trigger needs only S3 and Step Functions, so it runs
 * outside the VPC. A serving node without a fresh report is left out of the decision and listed as silent (its
 * load is unknown; the SilentNodes alarm covers it).
 *
 * Units: `keys` compares each node's key count with `capacity` records (the paper's unit); `bytes` compares its
 * stored bytes with the smallest node capacity in the fleet (the fleet is homogeneous: one instance type).
 *
 * Where the policy evaluator runs in AWS (cdk/config `policies.evaluator`), the trigger is the policy rule
 * `default-prelaunch` instead (core/policy/defaults.ts): the evaluator measures with {@link measureScaleOut} and starts
 * the {@link scaleOutRequest} of its measurement. Without it, its own Lambda runs {@link runScaleTrigger} on a schedule.
 */
export { scaleTriggerSettingsSchema };
export type ScaleTriggerSettings = z.input<typeof scaleTriggerSettingsSchema>;

/** What a measurement reads: the ring, the locks and the nodes' reports, and where it keeps its counter sample. */
export interface ScaleMeasureDeps {
  ring: RingStore;
  locks: ScaleLocks;
  /** The ring store: the nodes' reports, and where the previous sample of their request counters is kept. */
  cas: CasStore;
  /** What precedes a node's id in its report's key (ring/node-report-reader.ts nodeReportKey). @default '' */
  reportIdPrefix?: string;
  now?: () => number;
}

export interface ScaleTriggerDeps extends ScaleMeasureDeps {
  /** Starts a ScaleOut execution; returns its name. */
  startScaleOut: (input: ScaleOutRequest) => Promise<string>;
}

/** The ScaleOut input the trigger starts (core/workflows/steps/scale-steps.ts scaleOutBeginInput). */
export interface ScaleOutRequest {
  mode: 'incremental' | 'parallel';
  /** The node that passed T: ScaleOut holds its lock, so no second scale-out runs for it. */
  forNode: string;
  reason: string;
}

/**
 * The previous run's counters. Per node, the count and the time of the report it came from (the node's clock):
 * a rate is a difference of two reports of the same node, so neither the reports' age nor the node's clock skew
 * distorts it. (Samples written before reports existed have no `reports` and are ignored once.)
 */
interface Sample {
  at: number;
  reports?: Record<string, { count: number; at: number }>;
}

/** Key of the sample under the ring store's `workflows/` folder: the one document the trigger writes. */
export const SCALE_TRIGGER_SAMPLE_KEY = 'workflows/scale-trigger-sample';

const REQUEST_OPS = ['get', 'head', 'put', 'delete', 'batchGet', 'batchPut', 'batchDelete'];

export interface TriggerOutcome {
  decision: ScaleDecision;
  rate: number;
  loads: NodeLoad[];
  capacity: number;
  /** Serving nodes left out for want of a fresh, complete report, with the reason. */
  silent: { node: string; reason: string }[];
  /** Nodes with a scale-out in flight (their lock is held). */
  inFlight?: string[];
  started?: string;
}

/** One evaluation; starts a ScaleOut when the decision is prelaunch or split. */
export async function runScaleTrigger(deps: ScaleTriggerDeps, settings: ScaleTriggerSettings = {}): Promise<TriggerOutcome> {
  const s = scaleTriggerSettingsSchema.parse(settings);
  const out = await measureScaleOut(deps, s);
  const request = scaleOutRequest(out, s);
  if (request) out.started = await deps.startScaleOut(request);
  return out;
}

/** The ScaleOut a measurement calls for (a node passed T, or is full), or undefined. */
export function scaleOutRequest(out: TriggerOutcome, settings: ScaleTriggerSettings = {}): ScaleOutRequest | undefined {
  const { decision, rate, capacity } = out;
  if (decision.action !== 'prelaunch' && decision.action !== 'split') return undefined;
  const why =
    decision.action === 'split'
      ? `node ${decision.node} is full (${decision.fill} of ${capacity})`
      : `node ${decision.node} passed T = ${Math.round(decision.threshold)} (fill ${decision.fill}, ${rate.toFixed(1)} req/s)`;
  const mode = scaleTriggerSettingsSchema.parse(settings).mode;
  return { mode, forNode: decision.node, reason: `${decision.action}: ${why}` };
}

/**
 * The fill of the fullest node with no scale-out in flight as a percentage of T (above 100: it passed T), and that
 * node: what the policy rule `default-prelaunch` compares (core/policy/defaults.ts). 0 when every measured node has a
 * scale-out in flight; undefined when no node could be measured (no ring, or no fresh report).
 */
export function prelaunchFill(out: TriggerOutcome): { percent: number; node?: string } | undefined {
  const threshold = out.decision.threshold;
  if (!out.loads.length || !(threshold > 0)) return undefined;
  const inFlight = new Set(out.inFlight ?? []);
  const free = out.loads.filter((l) => !inFlight.has(l.id)).sort((a, b) => b.fill - a.fill)[0];
  return free ? { percent: (free.fill / threshold) * 100, node: free.id } : { percent: 0 };
}

/**
 * Reads every serving node's fill and the fleet's request rate, and decides (threshold.ts decideScaleOut) without
 * starting anything. Writes the counter sample the next measurement's rate is taken against.
 */
export async function measureScaleOut(deps: ScaleMeasureDeps, settings: ScaleTriggerSettings = {}): Promise<TriggerOutcome> {
  const s = scaleTriggerSettingsSchema.parse(settings);
  const now = deps.now ?? Date.now;
  const doc = await deps.ring.load();
  if (!doc) return { decision: { action: 'none', threshold: 0 }, rate: 0, loads: [], capacity: 0, silent: [] };
  const serving = doc.nodes.filter((n) => n.state === 'NORMAL' || n.state === 'PARTIAL');
  const read = await Promise.all(serving.map((n) => readNodeReport(deps.cas, n.id, now(), deps.reportIdPrefix)));
  const stats: { id: string; at: number; st: ReportedStats }[] = [];
  const silent: { node: string; reason: string }[] = [];
  for (const r of read) {
    if (!r.fresh) {
      silent.push({ node: r.node, reason: r.reason });
      continue;
    }
    const st = reportedStats(r.report.stats);
    if (typeof st === 'string') silent.push({ node: r.node, reason: st });
    else stats.push({ id: r.node, at: r.report.at, st });
  }
  const samples = new JsonDocStore<Sample>(deps.cas, '');
  const prev = await samples.get(SCALE_TRIGGER_SAMPLE_KEY);
  if (stats.length === 0) return { decision: { action: 'none', threshold: 0 }, rate: 0, loads: [], capacity: 0, silent };
  const loads: NodeLoad[] = stats.map(({ id, st }) => ({ id, fill: s.unit === 'keys' ? st.keys : st.bytes }));
  const capacity = s.unit === 'keys' ? s.capacity! : Math.min(...stats.map(({ st }) => st.capacityBytes));

  // The request rate, summed over the nodes: each node's counter delta between its previous report and this one,
  // or its average since it started (first sight of it, the same report as last time, or a restart that reset it).
  const reports = Object.fromEntries(stats.map(({ id, at: reportAt, st }) => [id, { count: requestCount(st), at: reportAt }]));
  const rate = stats.reduce((a, { id, st }) => {
    const before = prev?.reports?.[id];
    const cur = reports[id]!;
    if (before && cur.at > before.at && cur.count >= before.count)
      return a + (cur.count - before.count) / ((cur.at - before.at) / 1000);
    return a + cur.count / Math.max(1, Number(st.uptimeSeconds) || 1);
  }, 0);
  const next: Sample = { at: now(), reports };
  const write = prev ? samples.update(SCALE_TRIGGER_SAMPLE_KEY, () => next) : samples.create(SCALE_TRIGGER_SAMPLE_KEY, next);
  await write.catch((e: unknown) => {
    if (!(e instanceof CasConflictError)) throw e; // another trigger sampled at the same time
  });

  const inFlight = await deps.locks.held(serving.map((n) => n.id));
  const decision = decideScaleOut({ capacity, lowRate: s.lowRate, highRate: s.highRate }, loads, rate, inFlight);
  return { decision, rate, loads, capacity, silent, inFlight: [...inFlight] };
}

/** What the decision reads of a node's `/stats` body, as its report carries it. */
interface ReportedStats {
  keys: number;
  bytes: number;
  capacityBytes: number;
  uptimeSeconds?: number;
  ops?: Record<string, { count?: number }>;
}

/** The fields the decision needs, or why the report lacks them. */
function reportedStats(stats: Record<string, unknown>): ReportedStats | string {
  const usable = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
  const missing = (['keys', 'bytes', 'capacityBytes'] as const).filter((k) => !usable(stats[k]));
  if (missing.length) return `stats report lacks ${missing.join(', ')}`;
  return stats as unknown as ReportedStats;
}

function requestCount(stats: ReportedStats): number {
  const ops = stats.ops ?? {};
  return REQUEST_OPS.reduce((a, op) => a + (ops[op]?.count ?? 0), 0);
}
