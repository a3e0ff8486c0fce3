import type { RequestPrice } from './catalogs/schema.js';

/**
 * The cost formulas of paper 001 (§III-C), one function each, in the paper's names. Everything is per month
 * and in USD; sizes are in billed GB (the catalog says how many bytes that is).
 *
 *   volatile placements (memory, instance disk):  C = C_Alloc + C_IO
 *   S3:                                           C = C_S + C_R + C_IO
 *   EBS:                                          C = C_Alloc + C_S + C_R + C_IO
 *   figure of merit:                              C/S, the cost per unit of speedup
 */

/** Cost components of one placement for one month. Components a placement does not incur are 0. */
export interface CostBreakdown {
  /** C_Alloc = h · k · c_t: k instances (or cache nodes) of type t for h hours. */
  readonly alloc: number;
  /** C_S: data held for the month (S3 objects, EBS volumes, ElastiCache Serverless GB-hours). */
  readonly store: number;
  /** C_R: request charges (S3 PUT/GET and retrieval, EBS I/O or provisioned performance, ECPUs). */
  readonly req: number;
  /** C_IO = R · d · c_io: every result transferred out of AWS. */
  readonly io: number;
  /** Strata's front door per request (API Gateway + coordinator Lambda); not in the paper's model. */
  readonly access: number;
  readonly total: number;
}

/** C_Alloc = h · k · c_t. */
export function allocationCost(hours: number, nodes: number, hourlyPrice: number): number {
  return hours * nodes * hourlyPrice;
}

/** C_S = T · c_s for T GB held all month. */
export function storageCost(gb: number, perGBMonth: number): number {
  return gb * perGBMonth;
}

/** C_R for `count` requests at a batch price ("$0.01 per 10,000"). */
export function requestCost(count: number, price: RequestPrice): number {
  return (count * price.usd) / price.per;
}

/** C_IO = R · d · c_io: R transfers of d GB at c_io per GB. */
export function transferCost(requests: number, gbPerRequest: number, perGB: number): number {
  return requests * gbPerRequest * perGB;
}

/** C/S: cost per unit of speedup, the paper's figure of merit (lower is better). */
export function costPerSpeedup(cost: number, speedup: number): number {
  if (!(speedup > 0)) throw new RangeError(`speedup must be positive, got ${speedup}`);
  return cost / speedup;
}

/** A breakdown with the total filled in. */
export function breakdown(parts: Partial<Omit<CostBreakdown, 'total'>>): CostBreakdown {
  const b = {
    alloc: parts.alloc ?? 0,
    store: parts.store ?? 0,
    req: parts.req ?? 0,
    io: parts.io ?? 0,
    access: parts.access ?? 0,
  };
  return { ...b, total: b.alloc + b.store + b.req + b.io + b.access };
}

/** Component-wise sum, for placements built from several tiers. */
export function addBreakdowns(...parts: CostBreakdown[]): CostBreakdown {
  return breakdown({
    alloc: sum(parts.map((p) => p.alloc)),
    store: sum(parts.map((p) => p.store)),
    req: sum(parts.map((p) => p.req)),
    io: sum(parts.map((p) => p.io)),
    access: sum(parts.map((p) => p.access)),
  });
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

/**
 * Expected number of distinct keys among R requests drawn uniformly from K keys: K · (1 − (1 − 1/K)^R).
 * In a cache that starts cold and evicts nothing (the paper's experiment) this is the number of misses.
 */
export function expectedDistinctKeys(keys: number, requests: number): number {
  if (keys <= 0 || requests <= 0) return 0;
  return keys * -Math.expm1(requests * Math.log1p(-1 / keys));
}

export interface SpeedupInput {
  readonly requests: number;
  readonly keys: number;
  /** Time the service takes to compute a result (the paper's Table II baseline). */
  readonly serviceTimeSec: number;
  /** Time to find and return a cached result. */
  readonly hitTimeSec: number;
  /** Extra time a miss spends storing its result in the cache. */
  readonly fillTimeSec: number;
}

/**
 * The paper's speedup S: time to answer R requests without a cache over the time with one, starting cold.
 * S = R · t_svc / (M · (t_svc + t_fill) + (R − M) · t_hit), M = expected misses.
 */
export function estimateSpeedup(w: SpeedupInput): number {
  if (w.requests <= 0) return 1;
  const misses = Math.min(w.requests, expectedDistinctKeys(w.keys, w.requests));
  const cached = misses * (w.serviceTimeSec + w.fillTimeSec) + (w.requests - misses) * w.hitTimeSec;
  return (w.requests * w.serviceTimeSec) / cached;
}
