/** Text rendering of a workflow execution's progress (the `strata workflow ... --wait` progress bar). */
import { GRACE_FACTS } from './contract.js';
import type { WorkflowExecutionDetail } from './workflows.js';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/**
 * Bytes in binary units with one decimal above 1 KiB.
 *
 * @example
 * ```ts
 * formatBytes(13_002_342); // "12.4 MiB"
 * ```
 */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '0 B';
  let v = n;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${UNITS[i]}`;
}

/** Options of {@link renderProgressBar}. */
export interface ProgressBarOptions {
  /** Cells of the bar between the brackets. Default 24. */
  width?: number | undefined;
  /** Truncate the line to this many characters (a terminal's width), with `…`. Default: no limit. */
  columns?: number | undefined;
  /** The clock the grace period's countdown is measured with. Default: now. */
  now?: Date | number | undefined;
  /** Round the countdown's seconds up to a multiple of this (logs: fewer lines). Default 1. */
  countdownStepSeconds?: number | undefined;
}

/** What {@link renderProgressBar} reads of an execution; `workflow` and `input` name and time its grace period. */
export type ProgressSubject = Pick<WorkflowExecutionDetail, 'status' | 'progress'> &
  Partial<Pick<WorkflowExecutionDetail, 'workflow' | 'input'>>;

/** A scale workflow waiting out its grace period (see {@link graceWait}). */
export interface GraceWait {
  /** When the wait ends. */
  until: Date;
  /** How long the whole wait is, ms. */
  ms: number;
}

/** The scale workflows' default grace period, ms (the `graceMs` of their input, docs/WORKFLOWS.md). */
const DEFAULT_GRACE_MS = 60_000;
const SCALE_WORKFLOWS: ReadonlySet<string> = new Set(['scale-out', 'scale-in']);
/** What a scale workflow does when its grace period ends. */
const GRACE_ENDS_WITH: Readonly<Record<string, string>> = {
  'scale-in': ' before terminating the node',
  'scale-out': ' before the sources drop the moved ranges',
};

function finiteNumber(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

/**
 * The grace period a running scale workflow waits out after its ring change (before the sources drop the ranges they
 * handed over, or before the drained node is terminated), or undefined when it is not waiting. From the progress
 * facts `graceUntil` / `graceMs` (contract.ts `GRACE_FACTS`) when the server writes them; otherwise, for servers that
 * do not, inferred: every session is done but the execution has not ended, so it is in the wait that starts right
 * after the last progress update and lasts the input's `graceMs` (default 60 s).
 */
export function graceWait(d: ProgressSubject): GraceWait | undefined {
  const p = d.progress;
  if (d.status !== 'RUNNING' || !p || p.outcome !== undefined) return undefined;
  const until = p.facts[GRACE_FACTS.until];
  const factMs = finiteNumber(p.facts[GRACE_FACTS.ms]);
  if (typeof until === 'string' && !Number.isNaN(Date.parse(until))) {
    const end = new Date(until);
    return { until: end, ms: factMs ?? Math.max(0, end.getTime() - p.updatedAt.getTime()) };
  }
  if (d.workflow === undefined || !SCALE_WORKFLOWS.has(d.workflow) || p.total === 0 || p.done < p.total) return undefined;
  const input = typeof d.input === 'object' && d.input !== null ? (d.input as Record<string, unknown>) : {};
  const ms = finiteNumber(input.graceMs) ?? DEFAULT_GRACE_MS;
  return { until: new Date(p.updatedAt.getTime() + ms), ms };
}

/** `waiting 60 s grace before terminating the node, 23 s left`. */
function graceText(d: ProgressSubject, g: GraceWait, now: number, step: number): string {
  const leftMs = g.until.getTime() - now;
  if (leftMs <= 0) return 'grace period over, finishing';
  const left = Math.ceil(leftMs / 1000 / step) * step;
  const what = d.workflow === undefined ? '' : (GRACE_ENDS_WITH[d.workflow] ?? '');
  return `waiting ${Math.round(g.ms / 1000)} s grace${what}, ${left} s left`;
}

/**
 * One line showing an execution's progress: `[########----------------] 3/5 sessions · 12.4 MiB · streaming session 4 of 5`.
 * Before the first step has written progress: an empty bar and `starting`. A stopped execution other than
 * `SUCCEEDED` shows its status after the bar. A scale workflow waiting out its grace period counts it down
 * (`… · node n3 left the ring · waiting 60 s grace before terminating the node, 23 s left`, see {@link graceWait}).
 *
 * @example
 * ```ts
 * await strata.workflows.wait(execution, { onProgress: (d) => process.stderr.write(`\r${renderProgressBar(d)}`) });
 * ```
 */
export function renderProgressBar(d: ProgressSubject, o: ProgressBarOptions = {}): string {
  const width = Math.max(1, Math.floor(o.width ?? 24));
  const p = d.progress;
  const fraction = d.status === 'SUCCEEDED' ? 1 : Math.min(1, Math.max(0, p?.fraction ?? 0));
  // Full only when really done: 99.9% still shows a dash.
  const filled = fraction >= 1 ? width : Math.min(width - 1, Math.floor(fraction * width));
  const parts: string[] = [];
  if (d.status !== 'RUNNING' && d.status !== 'SUCCEEDED') parts.push(d.status);
  if (p && p.total > 0) parts.push(`${p.done}/${p.total} ${p.unit}`);
  if (p && (p.bytes > 0 || p.total > 0)) parts.push(formatBytes(p.bytes));
  parts.push(p?.phase || (d.status === 'RUNNING' ? 'starting' : d.status.toLowerCase()));
  // The ring change is done and every session counted, but the execution still waits (a minute by default).
  const grace = graceWait(d);
  if (grace)
    parts.push(graceText(d, grace, o.now === undefined ? Date.now() : Number(o.now), Math.max(1, o.countdownStepSeconds ?? 1)));
  const line = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${parts.join(' · ')}`;
  return o.columns !== undefined && o.columns > 1 && line.length > o.columns ? `${line.slice(0, o.columns - 1)}…` : line;
}

/** Where a {@link ProgressReporter} writes (`process.stderr` in the CLI). */
export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean | undefined;
  columns?: number | undefined;
}

/**
 * Shows progress on a stream: on a terminal one line redrawn in place (`\r`, then clear to the end of the line);
 * elsewhere (logs, pipes) a plain line whenever the text changes, and at least every `heartbeatMs` while
 * nothing changes.
 */
export class ProgressReporter {
  private last = '';
  private lastAt = -Infinity;
  private drawn = false;

  constructor(
    private readonly out: ProgressOutput,
    private readonly o: { width?: number | undefined; heartbeatMs?: number | undefined; now?: (() => number) | undefined } = {},
  ) {}

  update(d: ProgressSubject): void {
    const now = (this.o.now ?? Date.now)();
    if (this.out.isTTY) {
      // Leave the last column free: writing into it wraps on some terminals and breaks the redraw.
      const line = renderProgressBar(d, {
        width: this.o.width ?? 24,
        now,
        ...(this.out.columns ? { columns: this.out.columns - 1 } : {}),
      });
      if (line === this.last && this.drawn) return;
      this.out.write(`\r${line}\x1b[K`);
      this.drawn = true;
      this.last = line;
      return;
    }
    // A log gets a line per change: a countdown in 10 s steps keeps a minute's grace period to six lines.
    const line = renderProgressBar(d, { width: this.o.width ?? 24, now, countdownStepSeconds: 10 });
    if (line === this.last && now - this.lastAt < (this.o.heartbeatMs ?? 30_000)) return;
    this.out.write(`${line}\n`);
    this.last = line;
    this.lastAt = now;
  }

  /** Ends the redrawn line (terminal), so what follows starts on a fresh one. */
  finish(): void {
    if (this.out.isTTY && this.drawn) this.out.write('\n');
    this.drawn = false;
  }
}
