import * as z from 'zod';
import { ValidationError } from '../../errors.js';
import { DEFAULT_CATALOG_ID, DEFAULT_REGION, priceBook, type PriceBook } from './price-catalog.js';
import { costPlacement, type CostOptions } from './calculator.js';
import { costPerSpeedup, estimateSpeedup, expectedDistinctKeys, type CostBreakdown } from './formulas.js';
import { candidatePlacements, type Placement } from './placements.js';

/** A caching workload as a user describes it. */
export const workloadSchema = z.strictObject({
  /** d: typical value size in bytes. */
  valueBytes: z.number().positive().finite(),
  /** Distinct keys kept in the cache. */
  keys: z.number().int().positive(),
  /** R: reads a month (the paper: 2,000 and 200,000). */
  requestsPerMonth: z.number().nonnegative().finite(),
  /** Writes a month. @default every expected miss stores its result: keys · (1 − (1 − 1/keys)^R) */
  writesPerMonth: z.number().nonnegative().finite().optional(),
  /** Must the data survive the loss of a node? Then only S3, EBS and S3-backed placements qualify. */
  persistent: z.boolean().default(false),
  /** Hits slower than this (estimated) rank after every placement that meets it. */
  latencyTargetMs: z.number().positive().finite().optional(),
  /** Time the origin takes to compute a value: the baseline the speedup S is measured against. */
  serviceTimeMs: z.number().positive().finite().default(1000),
  /** Whether results leave AWS (C_IO charged, as in the paper) or stay in the region. */
  transferOut: z.enum(['internet', 'in-region']).default('internet'),
});
export type WorkloadInput = z.input<typeof workloadSchema>;
export type Workload = z.output<typeof workloadSchema>;

export type RankBy = 'cost-per-speedup' | 'cost';

export interface RecommendOptions {
  /** @default 'aws-2026-11' */
  readonly catalogId?: string;
  /** @default 'us-east-1' */
  readonly region?: string;
  /** The paper's figure of merit C/S, or the monthly cost alone. @default 'cost-per-speedup' */
  readonly rankBy?: RankBy;
  /** @default every placement the catalog describes (candidatePlacements) */
  readonly placements?: readonly Placement[];
  readonly cost?: Omit<CostOptions, 'transferOut'>;
}

export interface Recommendation {
  readonly rank: number;
  readonly placement: Placement;
  readonly nodes: number;
  readonly cost: CostBreakdown;
  /** Estimated speedup S over R requests starting cold, and the paper's C/S. */
  readonly speedup: number;
  readonly costPerSpeedup: number;
  readonly hitLatencyMs: number;
  readonly meetsLatency: boolean;
  readonly notes: readonly string[];
}

export interface RecommendationReport {
  readonly catalogId: string;
  readonly catalogVersion: string;
  readonly region: string;
  readonly workload: Workload;
  /** Writes a month used for the costs (given, or the expected misses). */
  readonly writesPerMonth: number;
  readonly rankBy: RankBy;
  /** Best first. */
  readonly recommendations: readonly Recommendation[];
  /** Placements left out, and why (volatile when persistence is needed, values that do not fit). */
  readonly excluded: readonly { readonly placement: Placement; readonly reason: string }[];
}

/**
 * Ranks cache placements for a workload by C/S (or cost): placements meeting the latency target first.
 * @example
 * recommend({ valueBytes: 1e6, keys: 500, requestsPerMonth: 2000, persistent: true }).recommendations[0]?.placement.id // 's3:STANDARD'
 */
export function recommend(input: WorkloadInput, options: RecommendOptions = {}): RecommendationReport {
  const workload = parseWorkload(input);
  const book: PriceBook = priceBook(options.catalogId ?? DEFAULT_CATALOG_ID, options.region ?? DEFAULT_REGION);
  const rankBy = options.rankBy ?? 'cost-per-speedup';
  const writesPerMonth = workload.writesPerMonth ?? expectedDistinctKeys(workload.keys, workload.requestsPerMonth);
  const usage = {
    valueBytes: workload.valueBytes,
    keys: workload.keys,
    readsPerMonth: workload.requestsPerMonth,
    writesPerMonth,
  };

  const excluded: { placement: Placement; reason: string }[] = [];
  const ranked: Omit<Recommendation, 'rank'>[] = [];
  for (const placement of options.placements ?? candidatePlacements(book)) {
    if (workload.persistent && !placement.persistent) {
      excluded.push({ placement, reason: 'volatile: data is lost with the node' });
      continue;
    }
    const r = costPlacement(placement, usage, book, { ...options.cost, transferOut: workload.transferOut });
    if (!r.feasible) {
      excluded.push({ placement, reason: r.notes.join('; ') });
      continue;
    }
    const speedup = estimateSpeedup({
      requests: workload.requestsPerMonth,
      keys: workload.keys,
      serviceTimeSec: workload.serviceTimeMs / 1000,
      hitTimeSec: r.hitTimeSec,
      fillTimeSec: r.fillTimeSec,
    });
    const hitLatencyMs = r.hitTimeSec * 1000;
    ranked.push({
      placement,
      nodes: r.nodes,
      cost: r.cost,
      speedup,
      costPerSpeedup: costPerSpeedup(r.cost.total, speedup),
      hitLatencyMs,
      meetsLatency: workload.latencyTargetMs === undefined || hitLatencyMs <= workload.latencyTargetMs,
      notes: r.notes,
    });
  }
  const metric = (x: Omit<Recommendation, 'rank'>): number => (rankBy === 'cost' ? x.cost.total : x.costPerSpeedup);
  ranked.sort(
    (a, b) =>
      Number(b.meetsLatency) - Number(a.meetsLatency) ||
      metric(a) - metric(b) ||
      a.cost.total - b.cost.total ||
      a.placement.id.localeCompare(b.placement.id),
  );
  return {
    catalogId: book.catalogId,
    catalogVersion: book.catalogVersion,
    region: book.region,
    workload,
    writesPerMonth,
    rankBy,
    recommendations: ranked.map((x, i) => ({ rank: i + 1, ...x })),
    excluded,
  };
}

export function parseWorkload(input: WorkloadInput): Workload {
  const r = workloadSchema.safeParse(input);
  if (r.success) return r.data;
  const first = r.error.issues[0];
  throw new ValidationError(first?.path.join('.') || 'workload', first?.message ?? 'invalid workload');
}
