// What a failure detector that runs one tick at a time keeps between its runs (core/nodes/health-check.ts
// snapshot and restore): its format, written once here, and its checked reading.
import type { ProbeResult } from './health-probe.js';

/** Why a due marking was not made: the checker is paused, `maxDown` is reached, or too many nodes fail at once. */
export type HoldReason = 'paused' | 'cap' | 'storm';

export interface MarkedDown {
  node: string;
  at: number;
  reason: string;
  /** The ring version the mark was written in. */
  ringVersion: number;
}

/** One node's track as {@link NodeHealthChecker.snapshot} keeps it (only nodes with a streak of failures). */
export interface TrackSnapshot {
  id: string;
  /** Which node of that id it is (url, instance, addedAt): a replacement under the same id starts afresh. */
  incarnation: string | null;
  coordinatorFailures: number;
  lastReportAt: number | null;
  probeFailures: number;
  failingSince: number | null;
  lastProbe: { at: number; result: ProbeResult } | null;
  lastError: string | null;
}

/**
 * What a checker must remember between two runs of a process that does not stay up (the scheduled evaluator in AWS
 * ticks once per invocation): the nodes with a streak of failures, the markings it made, and the hold in progress.
 * JSON-able. A node without a streak is left out (the next ring read brings it back with nothing to remember), so
 * a healthy fleet's snapshot does not change from tick to tick and its owner need not write it.
 */
export interface NodeHealthCheckerSnapshot {
  format: 1;
  tracks: TrackSnapshot[];
  marked: MarkedDown[];
  held?: HoldReason;
  heldSince: number | null;
}

export const MARKED_HISTORY = 20;

/**
 * Where a checker that runs one tick at a time (the policy evaluator in AWS, core/composition/fleet-health-tick.ts)
 * keeps its {@link NodeHealthCheckerSnapshot} in the ring store, beside the operators' switch (`health/controls`).
 */
export const HEALTH_CHECKER_KEY = 'health/checker';

/** A {@link NodeHealthCheckerSnapshot}, checked field by field; undefined when `v` is not one. */
export const HOLD_REASONS: readonly HoldReason[] = ['paused', 'cap', 'storm'];
const PROBE_RESULTS: readonly ProbeResult[] = ['ok', 'down', 'unknown'];

export function parseSnapshot(v: unknown): NodeHealthCheckerSnapshot | undefined {
  const o = v as Partial<NodeHealthCheckerSnapshot> | null;
  if (typeof o !== 'object' || o === null || o.format !== 1 || !Array.isArray(o.tracks) || !Array.isArray(o.marked))
    return undefined;
  if (o.held !== undefined && !HOLD_REASONS.includes(o.held)) return undefined;
  if (!nullOr(o.heldSince, isNum)) return undefined;
  const trackOk = (t: TrackSnapshot) =>
    typeof t === 'object' &&
    t !== null &&
    typeof t.id === 'string' &&
    nullOr(t.incarnation, (x) => typeof x === 'string') &&
    isCount(t.coordinatorFailures) &&
    isCount(t.probeFailures) &&
    nullOr(t.lastReportAt, isNum) &&
    nullOr(t.failingSince, isNum) &&
    (t.probeFailures === 0 || t.failingSince !== null) &&
    nullOr(t.lastError, (x) => typeof x === 'string') &&
    nullOr(t.lastProbe, (p) => typeof p === 'object' && isNum(p.at) && PROBE_RESULTS.includes(p.result));
  const markedOk = (m: MarkedDown) =>
    typeof m === 'object' &&
    m !== null &&
    typeof m.node === 'string' &&
    isNum(m.at) &&
    typeof m.reason === 'string' &&
    isNum(m.ringVersion);
  if (!o.tracks.every(trackOk) || !o.marked.every(markedOk)) return undefined;
  if (new Set(o.tracks.map((t) => t.id)).size !== o.tracks.length) return undefined;
  return o as NodeHealthCheckerSnapshot;
}

function isNum(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function isCount(x: unknown): x is number {
  return Number.isInteger(x) && (x as number) >= 0;
}

function nullOr<T>(x: T | null | undefined, ok: (x: T) => boolean): boolean {
  return x === null || (x !== undefined && ok(x));
}
