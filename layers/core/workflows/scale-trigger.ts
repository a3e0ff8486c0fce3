import * as z from 'zod';
import { CasConflictError, JsonDocStore, type CasStore, type RingStore } from '../ring/store.js';
import type { NodeClient } from '../warm/node-client.js';
import type { ScaleLocks } from './progress.js';
import { decideScaleOut, type NodeLoad, type ScaleDecision } from './threshold.js';

/**
 * The scheduled scale-out trigger (paper 000): reads every node's fill and the fleet's request rate, evaluates
 * the speculative threshold T and starts a ScaleOut for the node that passed it — a pre-launch when it passed
 * T, a split at once when it overflowed. At most one scale-out per node runs (the per-node locks the ScaleOut
 * steps hold), so a trigger that fires again while one is in flight starts nothing.
 *
 * Units: `keys` compares each node's key count with `capacity` records (the paper's unit); `bytes` compares its
 * stored bytes with the smallest node capacity in the fleet (the fleet is homogeneous: one instance type).
 */
export const scaleTriggerSettingsSchema = z.strictObject({
  unit: z.enum(['keys', 'bytes']).default('bytes'),
  /** c in records; required with unit `keys` (bytes take the nodes' own capacity). */
  capacity: z.number().positive().optional(),
  /** δ_L and δ_H: the lowest and highest request rates expected (requests/s). */
  lowRate: z.number().positive().default(50),
  highRate: z.number().positive().default(250),
  /** Migration mode of the scale-outs it starts. */
  mode: z.enum(['incremental', 'parallel']).default('incremental'),
}).refine((s) => s.unit !== 'keys' || s.capacity !== undefined, { message: 'unit "keys" needs capacity (records per node)', path: ['capacity'] });
export type ScaleTriggerSettings = z.input<typeof scaleTriggerSettingsSchema>;

export interface ScaleTriggerDeps {
  ring: RingStore;
  nodes: NodeClient;
  locks: ScaleLocks;
  /** Where the previous sample of the request counters is kept (the ring's CAS store). */
  cas: CasStore;
  /** Starts a ScaleOut execution; returns its name. */
  startScaleOut: (input: { mode: 'incremental' | 'parallel'; forNode: string; reason: string }) => Promise<string>;
  now?: () => number;
}

interface Sample {
  at: number;
  /** Requests served per node so far (the nodes' op counters). */
  counts: Record<string, number>;
}

const REQUEST_OPS = ['get', 'head', 'put', 'delete', 'batchGet', 'batchPut', 'batchDelete'];

export interface TriggerOutcome {
  decision: ScaleDecision;
  rate: number;
  loads: NodeLoad[];
  capacity: number;
  started?: string;
}

/** One evaluation; starts a ScaleOut when the decision is prelaunch or split. */
export async function runScaleTrigger(deps: ScaleTriggerDeps, settings: ScaleTriggerSettings = {}): Promise<TriggerOutcome> {
  const s = scaleTriggerSettingsSchema.parse(settings);
  const now = deps.now ?? Date.now;
  const doc = await deps.ring.load();
  if (!doc) return { decision: { action: 'none', threshold: 0 }, rate: 0, loads: [], capacity: 0 };
  const serving = doc.nodes.filter((n) => n.state === 'NORMAL' || n.state === 'PARTIAL');
  const stats = await Promise.all(serving.map(async (n) => ({ id: n.id, s: await deps.nodes.stats(n.url) })));
  const loads: NodeLoad[] = stats.map(({ id, s: st }) => ({ id, fill: s.unit === 'keys' ? st.keys : st.bytes }));
  const capacity = s.unit === 'keys' ? s.capacity! : Math.min(...stats.map(({ s: st }) => st.capacityBytes));

  // The request rate: counter deltas since the previous sample, or each node's average since it started.
  const counts = Object.fromEntries(stats.map(({ id, s: st }) => [id, requestCount(st)]));
  const samples = new JsonDocStore<Sample>(deps.cas, 'workflows/');
  const prev = await samples.get('scale-trigger-sample');
  const at = now();
  let rate: number;
  if (prev && at > prev.at) {
    rate = Object.entries(counts).reduce((a, [id, c]) => a + Math.max(0, c - (prev.counts[id] ?? 0)), 0) / ((at - prev.at) / 1000);
  } else {
    rate = stats.reduce((a, { s: st }) => a + requestCount(st) / Math.max(1, Number(st.uptimeSeconds ?? 1)), 0);
  }
  await (prev ? samples.update('scale-trigger-sample', () => ({ at, counts })) : samples.create('scale-trigger-sample', { at, counts })).catch((e: unknown) => {
    if (!(e instanceof CasConflictError)) throw e; // another trigger sampled at the same time
  });

  const inFlight = await deps.locks.held(serving.map((n) => n.id));
  const decision = decideScaleOut({ capacity, lowRate: s.lowRate, highRate: s.highRate }, loads, rate, inFlight);
  const out: TriggerOutcome = { decision, rate, loads, capacity };
  if (decision.action === 'prelaunch' || decision.action === 'split') {
    const why = decision.action === 'split' ? `node ${decision.node} is full (${decision.fill} of ${capacity})` : `node ${decision.node} passed T = ${Math.round(decision.threshold)} (fill ${decision.fill}, ${rate.toFixed(1)} req/s)`;
    out.started = await deps.startScaleOut({ mode: s.mode, forNode: decision.node, reason: `${decision.action}: ${why}` });
  }
  return out;
}

function requestCount(stats: Record<string, unknown>): number {
  const ops = (stats.ops ?? {}) as Record<string, { count?: number }>;
  return REQUEST_OPS.reduce((a, op) => a + (ops[op]?.count ?? 0), 0);
}
