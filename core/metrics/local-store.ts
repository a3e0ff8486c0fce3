/**
 * An in-process stand-in for CloudWatch metrics, for the local run: it takes the same EMF documents the API
 * handlers write to stdout in Lambda (it is a {@link MetricsSink}), keeps them in fixed-width time buckets for a
 * bounded time, and answers the statistics dashboards ask for (Sum, Average, Minimum, Maximum, SampleCount, and
 * percentiles of millisecond metrics, from HDR histograms).
 */
import { build as buildHistogram, type Histogram } from 'hdr-histogram-js';
import type { EmfDocument } from './emf.js';
import type { MetricsSink } from './sink.js';

export interface LocalMetricsStoreOptions {
  /** Width of a time bucket. @default 10000 */
  resolutionMs?: number;
  /** How long points are kept. @default 3600000 (one hour) */
  retainMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/** One series as it was published: metric and the values of one dimension set. */
export interface StoredSeries {
  namespace: string;
  name: string;
  unit: string;
  dimensions: Readonly<Record<string, string>>;
}

/** Which stored series a query reads: exactly these dimension names, with these values (`splitBy`: any value). */
export interface MetricSelector {
  namespace: string;
  name: string;
  dimensions: Readonly<Record<string, string>>;
  /** One result per value of this dimension. */
  splitBy?: string;
}

export type LocalStat = 'Sum' | 'Average' | 'Minimum' | 'Maximum' | 'SampleCount' | `p${number}`;

export interface QueryWindow {
  fromMs: number;
  toMs: number;
  /** Width of one point, rounded up to a multiple of the resolution. @default the resolution */
  stepMs?: number;
}

/** Points of one series: `[start of step (epoch ms), value]`, steps without data left out. */
export interface QueryResult {
  /** The `splitBy` dimension's value. */
  split?: string;
  points: [number, number][];
}

interface Accumulator {
  sum: number;
  count: number;
  min: number;
  max: number;
  /** Microseconds, for millisecond metrics only (percentiles). */
  histogram?: Histogram;
}

/** 1 µs to 1 hour at 3 significant digits; longer values are recorded as the maximum. */
const HISTOGRAM_MAX_US = 3_600_000_000;

function newHistogram(): Histogram {
  return buildHistogram({
    lowestDiscernibleValue: 1,
    highestTrackableValue: HISTOGRAM_MAX_US,
    numberOfSignificantValueDigits: 3,
    bitBucketSize: 'packed',
    useWebAssembly: false,
  });
}

function seriesId(namespace: string, name: string, dimensions: Readonly<Record<string, string>>): string {
  const dims = Object.keys(dimensions)
    .sort()
    .map((k) => `${k}=${dimensions[k]}`)
    .join('\u0001');
  return `${namespace}\u0000${name}\u0000${dims}`;
}

/** Percentile of a `pNN` statistic, or undefined for the other statistics. */
export function percentileOf(stat: string): number | undefined {
  const m = /^p(\d{1,2}(?:\.\d+)?|100)$/.exec(stat);
  return m ? Number(m[1]) : undefined;
}

export class LocalMetricsStore implements MetricsSink {
  readonly resolutionMs: number;
  private readonly retainMs: number;
  private readonly now: () => number;
  /** Bucket start -> series id -> accumulator, oldest bucket first. */
  private readonly buckets = new Map<number, Map<string, Accumulator>>();
  private readonly series = new Map<string, StoredSeries>();

  constructor(opts: LocalMetricsStoreOptions = {}) {
    this.resolutionMs = opts.resolutionMs ?? 10_000;
    this.retainMs = opts.retainMs ?? 3_600_000;
    this.now = opts.now ?? Date.now;
    if (!(this.resolutionMs >= 1) || !(this.retainMs >= this.resolutionMs))
      throw new RangeError('LocalMetricsStore: resolutionMs >= 1 and retainMs >= resolutionMs');
  }

  /** Takes EMF documents: each metric value once per declared dimension set, as CloudWatch does. */
  write(docs: readonly EmfDocument[]): void {
    for (const doc of docs) {
      const at = doc._aws.Timestamp;
      for (const directive of doc._aws.CloudWatchMetrics) {
        for (const m of directive.Metrics) {
          const raw = doc[m.Name];
          const values =
            typeof raw === 'number'
              ? [raw]
              : Array.isArray(raw)
                ? (raw as unknown[]).filter((v): v is number => typeof v === 'number')
                : [];
          for (const set of directive.Dimensions) {
            const dims: Record<string, string> = {};
            for (const d of set) dims[d] = String(doc[d]);
            for (const v of values)
              this.record({ namespace: directive.Namespace, name: m.Name, unit: m.Unit ?? 'None', dimensions: dims }, v, at);
          }
        }
      }
    }
  }

  /** Records one value of one series (EMF ingestion, and publishers that produce points rather than EMF). */
  record(s: StoredSeries, value: number, timestampMs: number = this.now()): void {
    if (!Number.isFinite(value)) return;
    const start = this.bucketStart(timestampMs);
    if (start < this.bucketStart(this.now()) - this.retainMs) return;
    const id = seriesId(s.namespace, s.name, s.dimensions);
    if (!this.series.has(id)) this.series.set(id, { ...s, dimensions: { ...s.dimensions } });
    let bucket = this.buckets.get(start);
    if (!bucket) {
      bucket = new Map();
      this.buckets.set(start, bucket);
      this.prune();
    }
    let acc = bucket.get(id);
    if (!acc) {
      acc = {
        sum: 0,
        count: 0,
        min: Infinity,
        max: -Infinity,
        ...(s.unit === 'Milliseconds' ? { histogram: newHistogram() } : {}),
      };
      bucket.set(id, acc);
    }
    acc.sum += value;
    acc.count += 1;
    acc.min = Math.min(acc.min, value);
    acc.max = Math.max(acc.max, value);
    acc.histogram?.recordValue(Math.min(HISTOGRAM_MAX_US, Math.max(1, Math.round(value * 1000))));
  }

  /** Every series seen (within the retention), e.g. to list the values of a dimension. */
  knownSeries(): StoredSeries[] {
    return [...this.series.values()];
  }

  /** Time of the oldest point kept, or undefined when nothing was recorded. */
  oldestPointMs(): number | undefined {
    let oldest: number | undefined;
    for (const start of this.buckets.keys()) if (oldest === undefined || start < oldest) oldest = start;
    return oldest;
  }

  /**
   * Statistic `stat` of the series `sel` picks, per step of the window. Percentiles are available for
   * millisecond metrics (the others keep no histogram) and yield no points otherwise.
   */
  query(sel: MetricSelector, stat: LocalStat, window: QueryWindow): QueryResult[] {
    const step = Math.max(1, Math.ceil((window.stepMs ?? this.resolutionMs) / this.resolutionMs)) * this.resolutionMs;
    const groups = new Map<string | undefined, string[]>();
    const want = [...Object.keys(sel.dimensions), ...(sel.splitBy ? [sel.splitBy] : [])].sort().join(',');
    for (const [id, s] of this.series) {
      if (s.namespace !== sel.namespace || s.name !== sel.name) continue;
      if (Object.keys(s.dimensions).sort().join(',') !== want) continue;
      if (!Object.entries(sel.dimensions).every(([k, v]) => s.dimensions[k] === v)) continue;
      const split = sel.splitBy ? s.dimensions[sel.splitBy] : undefined;
      groups.set(split, [...(groups.get(split) ?? []), id]);
    }
    const results: QueryResult[] = [];
    const percentile = percentileOf(stat);
    const firstBucket = this.bucketStart(window.fromMs);
    for (const [split, ids] of groups) {
      const points: [number, number][] = [];
      for (let stepStart = firstBucket; stepStart <= window.toMs; stepStart += step) {
        const merged = this.merge(ids, stepStart, Math.min(stepStart + step, window.toMs + 1), percentile !== undefined);
        const v = merged && statOf(merged, stat);
        if (v !== undefined) points.push([stepStart, v]);
      }
      results.push({ ...(split !== undefined ? { split } : {}), points });
    }
    return results.sort((a, b) => (a.split ?? '').localeCompare(b.split ?? ''));
  }

  /** The accumulators of `ids` in [fromMs, toMs) combined (histograms only when a percentile needs them). */
  private merge(ids: string[], fromMs: number, toMs: number, withHistogram: boolean): Accumulator | undefined {
    const found: Accumulator[] = [];
    for (let start = fromMs; start < toMs; start += this.resolutionMs) {
      const bucket = this.buckets.get(start);
      if (!bucket) continue;
      for (const id of ids) {
        const acc = bucket.get(id);
        if (acc) found.push(acc);
      }
    }
    if (found.length <= 1) return found[0];
    const out: Accumulator = { sum: 0, count: 0, min: Infinity, max: -Infinity };
    for (const acc of found) {
      out.sum += acc.sum;
      out.count += acc.count;
      out.min = Math.min(out.min, acc.min);
      out.max = Math.max(out.max, acc.max);
      if (withHistogram && acc.histogram) (out.histogram ??= newHistogram()).add(acc.histogram);
    }
    return out;
  }

  private bucketStart(ms: number): number {
    return Math.floor(ms / this.resolutionMs) * this.resolutionMs;
  }

  private prune(): void {
    const oldest = this.bucketStart(this.now()) - this.retainMs;
    for (const start of [...this.buckets.keys()]) if (start < oldest) this.buckets.delete(start);
    if (this.buckets.size === 0) this.series.clear();
  }
}

function statOf(acc: Accumulator, stat: LocalStat): number | undefined {
  if (acc.count === 0) return undefined;
  switch (stat) {
    case 'Sum':
      return acc.sum;
    case 'Average':
      return acc.sum / acc.count;
    case 'Minimum':
      return acc.min;
    case 'Maximum':
      return acc.max;
    case 'SampleCount':
      return acc.count;
    default: {
      const p = percentileOf(stat);
      if (p === undefined || !acc.histogram) return undefined;
      return acc.histogram.getValueAtPercentile(p) / 1000;
    }
  }
}
