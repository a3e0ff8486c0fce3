import * as hdr from 'hdr-histogram-js';

export const OPS = [
  'get',
  'head',
  'put',
  'delete',
  'batchGet',
  'batchPut',
  'batchDelete',
  'export',
  'import',
  'rangeDelete',
] as const;
export type Op = (typeof OPS)[number];

interface OpStats {
  count: number;
  errors: number;
  histogram: hdr.Histogram;
}

/** Per-operation counters and latency histograms (microseconds, HDR, 3 significant digits). */
export class NodeStats {
  private readonly ops = new Map<Op, OpStats>();
  readonly startedAt = Date.now();
  /** Key requests this node served as the range's owner or reader (shadow writes not counted). */
  servedAsOwner = 0;
  shadowWrites = 0;
  /** Requests refused with 409 (range not owned, or the caller's ring is too old). */
  refused = 0;
  unauthorized = 0;
  /** Wall-clock ms of the first key request it served (as above). */
  firstServedAt: number | null = null;

  constructor() {
    for (const op of OPS)
      this.ops.set(op, {
        count: 0,
        errors: 0,
        histogram: hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 }),
      });
  }

  record(op: Op, startedMs: number, ok: boolean): void {
    const s = this.ops.get(op)!;
    s.count++;
    if (!ok) s.errors++;
    s.histogram.recordValue(Math.min(60_000_000, Math.max(1, Math.round((performance.now() - startedMs) * 1000))));
  }

  served(): void {
    this.servedAsOwner++;
    this.firstServedAt ??= Date.now();
  }

  snapshot(): Record<string, unknown> {
    const ops: Record<string, unknown> = {};
    for (const [op, s] of this.ops) {
      if (s.count === 0) continue;
      const h = s.histogram;
      ops[op] = {
        count: s.count,
        errors: s.errors,
        p50Ms: h.getValueAtPercentile(50) / 1000,
        p99Ms: h.getValueAtPercentile(99) / 1000,
        p999Ms: h.getValueAtPercentile(99.9) / 1000,
        maxMs: h.maxValue / 1000,
      };
    }
    return {
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      servedAsOwner: this.servedAsOwner,
      shadowWrites: this.shadowWrites,
      refused: this.refused,
      unauthorized: this.unauthorized,
      firstServedAt: this.firstServedAt,
      ops,
    };
  }
}
