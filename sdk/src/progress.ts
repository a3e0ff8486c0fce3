/** Text rendering of a workflow execution's progress (the `strata workflow ... --wait` progress bar). */
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
  width?: number;
  /** Truncate the line to this many characters (a terminal's width), with `…`. Default: no limit. */
  columns?: number;
}

/**
 * One line showing an execution's progress: `[########----------------] 3/5 sessions · 12.4 MiB · streaming session 4 of 5`.
 * Before the first step has written progress: an empty bar and `starting`. A stopped execution other than
 * `SUCCEEDED` shows its status after the bar.
 *
 * @example
 * ```ts
 * await strata.workflows.wait(execution, { onProgress: (d) => process.stderr.write(`\r${renderProgressBar(d)}`) });
 * ```
 */
export function renderProgressBar(d: Pick<WorkflowExecutionDetail, 'status' | 'progress'>, o: ProgressBarOptions = {}): string {
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
  const line = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${parts.join(' · ')}`;
  return o.columns !== undefined && o.columns > 1 && line.length > o.columns ? `${line.slice(0, o.columns - 1)}…` : line;
}

/** Where a {@link ProgressReporter} writes (`process.stderr` in the CLI). */
export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
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
    private readonly o: { width?: number; heartbeatMs?: number; now?: () => number } = {},
  ) {}

  update(d: Pick<WorkflowExecutionDetail, 'status' | 'progress'>): void {
    const now = (this.o.now ?? Date.now)();
    if (this.out.isTTY) {
      // Leave the last column free: writing into it wraps on some terminals and breaks the redraw.
      const line = renderProgressBar(d, { width: this.o.width ?? 24, ...(this.out.columns ? { columns: this.out.columns - 1 } : {}) });
      if (line === this.last && this.drawn) return;
      this.out.write(`\r${line}\x1b[K`);
      this.drawn = true;
      this.last = line;
      return;
    }
    const line = renderProgressBar(d, { width: this.o.width ?? 24 });
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
