/**
 * Pure parts of the elasticity benchmark (paper 000, Algorithm 1): what the coordinator does before one insert,
 * and the accounting of time. No I/O here, so the unit tests can check them exactly.
 */
import { decideScaleOut, type NodeLoad, type ThresholdParams } from '../../core/workflows/trigger/threshold.js';

/**
 * `on-overflow`: the baseline: a node is split only when it is full (launch a node, then migrate), and inserts
 * wait meanwhile. `speculative`: paper 000's pre-launch: a node past the threshold T gets a node launched for it
 * in the background (at most `maxBackground` such launches at a time, the paper's threads t1 and t2); an overflow
 * with nothing in flight for the node starts one at once (thread t3) and waits for it.
 */
export type Variant = 'on-overflow' | 'speculative';

export interface PolicyConfig {
  variant: Variant;
  /** c (records), δ_L, δ_H. */
  params: ThresholdParams;
  /** R, the request rate fed to the threshold (requests/s). */
  rate: number;
  /** Background pre-launches in flight at most (the paper runs two threads). @default 2 */
  maxBackground?: number;
}

export interface PolicyState {
  /** Every node of the ring with its fill (records it owns). */
  loads: readonly NodeLoad[];
  /** Nodes with a scale-out (launch + split) in flight: at most one per node. */
  inFlight: ReadonlySet<string>;
  /** How many of those were started in the background (pre-launches). */
  backgroundInFlight: number;
}

export interface ScaleStart {
  /** The node to split. */
  node: string;
  reason: 'prelaunch' | 'overflow';
}

export interface InsertPlan {
  /** Scale-outs to start now. */
  start: ScaleStart[];
  /** When set, the insert must wait for this node's scale-out to finish, then be routed again. */
  waitFor?: string;
  /** The threshold T the decision used (speculative only). */
  threshold?: number;
}

/** Fill ≥ c: the node is full and takes no insert until it is split. */
export function isFull(fill: number, capacity: number): boolean {
  return fill >= capacity;
}

/**
 * The decision before inserting a key that routes to `target` (Algorithm 1, lines 4-25): a pre-launch for the
 * fullest node past T (speculative only, within the background budget), and, when `target` is full, a
 * scale-out for it (unless one is in flight) and the order to wait for it.
 */
export function planInsert(cfg: PolicyConfig, state: PolicyState, target: string): InsertPlan {
  const plan: InsertPlan = { start: [] };
  const fill = state.loads.find((l) => l.id === target)?.fill ?? 0;
  let inFlight = state.inFlight;
  if (isFull(fill, cfg.params.capacity)) {
    plan.waitFor = target;
    if (!inFlight.has(target)) {
      plan.start.push({ node: target, reason: 'overflow' });
      inFlight = new Set([...inFlight, target]);
    }
  }
  if (cfg.variant === 'speculative') {
    const d = decideScaleOut(cfg.params, state.loads, cfg.rate, inFlight);
    plan.threshold = d.threshold;
    if ((d.action === 'prelaunch' || d.action === 'split') && state.backgroundInFlight < (cfg.maxBackground ?? 2)) {
      plan.start.push({ node: d.node, reason: 'prelaunch' });
    }
  }
  return plan;
}

/** Total length of a union of intervals [start, end) (overlaps counted once), clipped to [from, to]. */
export function unionLength(
  intervals: readonly { start: number; end: number }[],
  from = Number.NEGATIVE_INFINITY,
  to = Number.POSITIVE_INFINITY,
): number {
  const xs = intervals
    .map((i) => ({ start: Math.max(i.start, from), end: Math.min(i.end, to) }))
    .filter((i) => i.end > i.start)
    .sort((a, b) => a.start - b.start);
  let total = 0;
  let curStart = Number.NaN;
  let curEnd = Number.NaN;
  for (const i of xs) {
    if (Number.isNaN(curEnd) || i.start > curEnd) {
      if (!Number.isNaN(curEnd)) total += curEnd - curStart;
      curStart = i.start;
      curEnd = i.end;
    } else curEnd = Math.max(curEnd, i.end);
  }
  if (!Number.isNaN(curEnd)) total += curEnd - curStart;
  return total;
}

/**
 * The insert schedule of a steady stream of `rate` requests/s that pauses while it is blocked: insert `i` is
 * due at start + i/rate + (time blocked so far). A blocked stream resumes at the rate where it stopped (no burst
 * to catch up), so the run takes N/R plus the time spent waiting on scaling, as in the paper's experiment.
 */
export function dueAt(startMs: number, i: number, rate: number, blockedMs: number): number {
  return startMs + (i * 1000) / rate + blockedMs;
}

/** Share of `part` in `total` (0 when total is 0). */
export function share(part: number, total: number): number {
  return total > 0 ? part / total : 0;
}
