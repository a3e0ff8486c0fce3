import * as z from 'zod';
import { readNodeReport } from '../../ring/node-report-reader.js';
import { CasConflictError, JsonDocStore, type CasStore, type RingStore } from '../../ring/store.js';
import type { ScaleLocks } from '../progress.js';
import { decideScaleOut, type NodeLoad, type ScaleDecision } from './threshold.js';

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
 */
export const scaleTriggerSettingsSchema = z
  .strictObject({
    unit: z.enum(['keys', 'bytes']).default('bytes'),
    /** c in records; required with unit `keys` (bytes take the nodes' own capacity). */
    capacity: z.number().positive().optional(),
    /** δ_L and δ_H: the lowest and highest request rates expected (requests/s). */
    lowRate: z.number().positive().default(50),
    highRate: z.number().positive().default(250),
    /** Migration mode of the scale-outs it starts. */
    mode: z.enum(['incremental', 'parallel']).default('incremental'),
  })
  .refine((s) => s.unit !== 'keys' || s.capacity !== undefined, {
    message: 'unit "keys" needs capacity (records per node)',
    path: ['capacity'],
  });
export type ScaleTriggerSettings = z.input<typeof scaleTriggerSettingsSchema>;

export interface ScaleTriggerDeps {
  ring: RingStore;
  locks: ScaleLocks;
  /** The ring store: the nodes' reports, and where the previous sample of their request counters is kept. */
  cas: CasStore;
  /** What precedes a node's id in its report's key (ring/node-report-reader.ts nodeReportKey). @default '' */
  reportIdPrefix?: string;
  /** Starts a ScaleOut execution; returns its name. */
  startScaleOut: (input: { mode: 'incremental' | 'parallel'; forNode: string; reason: string }) => Promise<string>;
  now?: () => number;
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
  started?: string;
}

/** One evaluation; starts a ScaleOut when the decision is prelaunch or split. */
export async function runScaleTrigger(deps: ScaleTriggerDeps, settings: ScaleTriggerSettings = {}): Promise<TriggerOutcome> {
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
  const out: TriggerOutcome = { decision, rate, loads, capacity, silent };
  if (decision.action === 'prelaunch' || decision.action === 'split') {
    const why =
      decision.action === 'split'
        ? `node ${decision.node} is full (${decision.fill} of ${capacity})`
        : `node ${decision.node} passed T = ${Math.round(decision.threshold)} (fill ${decision.fill}, ${rate.toFixed(1)} req/s)`;
    out.started = await deps.startScaleOut({ mode: s.mode, forNode: decision.node, reason: `${decision.action}: ${why}` });
  }
  return out;
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
