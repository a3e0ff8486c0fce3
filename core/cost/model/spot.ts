/**
 * What a spot or mixed warm fleet saves (docs/WORKFLOWS.md, "Spot capacity"), and when spot is worth it.
 *
 * Spot prices are an assumption, not a quote: a stated discount off the catalog's on-demand price per instance
 * family, from AWS's published savings range for Graviton families in us-east-1 (the EC2 Spot pricing page and the
 * Spot Instance Advisor, https://aws.amazon.com/ec2/spot/pricing/ and https://aws.amazon.com/ec2/spot/instance-advisor/,
 * read 2026-11). Spot prices move with long-term supply and demand; no price API is called. Replace the table
 * with your own figures (e.g. from DescribeSpotPriceHistory) before deciding on them.
 */
import { ValidationError } from '../../errors.js';
import { COST_TIERS } from '../../metrics/metric-catalog.js';
import { breakdown } from './formulas.js';
import { apportion, type LiveCost, type TenantNamespaces } from './live-cost.js';
import type { PriceBook } from './price-catalog.js';
import type { NamespaceUsage } from './usage.js';

/** Where the spot figures come from, shown next to them. */
export const SPOT_PRICE_ASSUMPTION = {
  asOf: '2026-11',
  source: 'https://aws.amazon.com/ec2/spot/instance-advisor/ (savings over on-demand, us-east-1, Linux)',
  note: 'assumed discount off on-demand per family; spot prices change; no live price lookup',
} as const;

/** Assumed discount off on-demand by instance family (0.6 = spot costs 40 % of on-demand). */
export const SPOT_DISCOUNT_BY_FAMILY: Readonly<Record<string, number>> = {
  t4g: 0.6,
  m7g: 0.6,
  r7g: 0.6,
  c7g: 0.6,
  m6g: 0.6,
  r6g: 0.6,
  c6g: 0.6,
};
/** For a family not in the table: the cautious end of AWS's "up to 90 %". */
export const DEFAULT_SPOT_DISCOUNT = 0.5;

/** The assumed spot hourly price of `instanceType` in `book`. */
export function spotHourly(book: PriceBook, instanceType: string): number {
  const od = book.prices.ec2.instances[instanceType];
  if (!od) throw new ValidationError('instanceType', `catalog '${book.catalogId}' has no price for ${instanceType}`);
  const family = instanceType.split('.')[0]!;
  return od.hourly * (1 - (SPOT_DISCOUNT_BY_FAMILY[family] ?? DEFAULT_SPOT_DISCOUNT));
}

export interface FleetCapacityCost {
  /** What the same nodes would cost on demand, per month. */
  readonly onDemandMonthly: number;
  /** What they cost as configured (spot nodes at the assumed spot price), per month. */
  readonly configuredMonthly: number;
  /** onDemandMonthly - configuredMonthly: the dashboards' "spot savings". */
  readonly spotSavingsMonthly: number;
  readonly spotNodes: number;
  readonly onDemandNodes: number;
}

/**
 * The instance cost of `nodes` warm nodes of `instanceType` (EBS is the same either way) under a capacity setting:
 * 'spot' = all spot, 'mixed' = the first `onDemandBase` on demand, 'on-demand' = none spot.
 */
export function fleetCapacityCost(o: {
  book: PriceBook;
  instanceType: string;
  nodes: number;
  capacity: 'on-demand' | 'spot' | 'mixed';
  onDemandBase?: number;
}): FleetCapacityCost {
  const od = o.book.prices.ec2.instances[o.instanceType];
  if (!od) throw new ValidationError('instanceType', `catalog '${o.book.catalogId}' has no price for ${o.instanceType}`);
  const onDemandNodes = o.capacity === 'on-demand' ? o.nodes : o.capacity === 'spot' ? 0 : Math.min(o.nodes, o.onDemandBase ?? 1);
  const spotNodes = o.nodes - onDemandNodes;
  const h = o.book.hoursPerMonth;
  const onDemandMonthly = o.nodes * od.hourly * h;
  const configuredMonthly = (onDemandNodes * od.hourly + spotNodes * spotHourly(o.book, o.instanceType)) * h;
  return {
    onDemandMonthly,
    configuredMonthly,
    spotSavingsMonthly: onDemandMonthly - configuredMonthly,
    spotNodes,
    onDemandNodes,
  };
}

/**
 * Paper 002's spot lifetime model (its chapter on spot instances, 7.3.1) reduced to what today's Spot market
 * leaves of it. The paper chains hourly price transitions and a bid: an instance lives while the price stays below
 * the bid, P(i, b, n) = Σ_{j∉B} M_ij P(j, b, n-1). Since 2017 there is no bid: EC2 reclaims capacity, not
 * outbid instances, and publishes an interruption frequency band per pool instead of a price walk. With one
 * "alive" state and a per-hour interruption probability p, the chain's n-step survival is (1 - p)^n and the
 * expected lifetime 1/p hours. A Spot node is worth it when its discount per hour exceeds what an interruption
 * costs per hour: p × (drain + refill), where drain + refill is the extra node-hours and requests a drain and a
 * replacement spend (and the misses while the new node warms).
 */
export function spotBreakEven(o: {
  onDemandHourly: number;
  spotHourly: number;
  /** Probability that a Spot node is interrupted in an hour (e.g. 0.05 / 730 for "<5 % a month"). */
  interruptionsPerHour: number;
  /** USD one interruption costs: the drain and refill's node-hours, requests and warm-up misses. */
  costPerInterruption: number;
}): { savingsPerNodeHour: number; expectedLifetimeHours: number; survival: (hours: number) => number; worthIt: boolean } {
  const p = o.interruptionsPerHour;
  if (!(p >= 0 && p <= 1)) throw new ValidationError('interruptionsPerHour', 'interruptionsPerHour is a probability (0-1)');
  const savingsPerNodeHour = o.onDemandHourly - o.spotHourly - p * o.costPerInterruption;
  return {
    savingsPerNodeHour,
    expectedLifetimeHours: p === 0 ? Infinity : 1 / p,
    survival: (hours) => (1 - p) ** hours,
    worthIt: savingsPerNodeHour > 0,
  };
}

/** How a running cache node was bought (EC2's InstanceLifecycle, else the launch's `strata:capacity` tag). */
export type NodeLifecycle = 'on-demand' | 'spot';

/** The running spot nodes of a warm fleet, priced both ways: the basis of the published SpotSavingsMonthly. */
export interface RunningSpotCost {
  /** Running instances bought as spot (SpotNodes). */
  readonly spotNodes: number;
  /** USD per hour the running spot nodes would cost on demand (catalog price). */
  readonly onDemandPerHour: number;
  /** USD per hour they cost at the assumed spot price ({@link spotHourly}). */
  readonly spotPerHour: number;
  /** (onDemandPerHour - spotPerHour) × the catalog's hours per month: what spot saves, as a monthly rate. */
  readonly savingsMonthly: number;
}

/** No spot node running: savings 0 (published as 0, so the dashboards draw a flat line rather than a gap). */
export const NO_SPOT: RunningSpotCost = { spotNodes: 0, onDemandPerHour: 0, spotPerHour: 0, savingsMonthly: 0 };

/**
 * The running spot nodes among `instances` and what they save. Only `running` instances are billed (as in
 * live-cost.ts); a spot node of a type the catalog has no price for is counted but saves nothing here (the live
 * cost already lists it as unpriced).
 */
export function runningSpotCost(
  book: PriceBook,
  instances: readonly { readonly type: string; readonly state: string; readonly lifecycle?: NodeLifecycle }[],
): RunningSpotCost {
  let spotNodes = 0;
  let onDemandPerHour = 0;
  let spotPerHour = 0;
  for (const i of instances) {
    if (i.state !== 'running' || i.lifecycle !== 'spot') continue;
    spotNodes++;
    const od = book.prices.ec2.instances[i.type];
    if (!od) continue;
    onDemandPerHour += od.hourly;
    spotPerHour += spotHourly(book, i.type);
  }
  return { spotNodes, onDemandPerHour, spotPerHour, savingsMonthly: (onDemandPerHour - spotPerHour) * book.hoursPerMonth };
}

/**
 * `cost` (priced by priceLiveUsage, every instance at its on-demand price) with the running spot nodes at their
 * assumed spot price instead: the warm tier's allocation cost and the total drop by what spot saves per hour, and
 * the tenants' shares are recomputed from the corrected tiers (so they still add up to the total).
 */
export function withSpotPrices(
  cost: LiveCost,
  spot: RunningSpotCost,
  namespaces: readonly NamespaceUsage[],
  tenants: readonly TenantNamespaces[],
): LiveCost {
  const saved = spot.onDemandPerHour - spot.spotPerHour;
  if (saved === 0) return cost;
  const w = cost.tiers.warm;
  const tiers = {
    ...cost.tiers,
    warm: breakdown({ alloc: w.alloc - saved, store: w.store, req: w.req, io: w.io, access: w.access }),
  };
  return {
    ...cost,
    tiers,
    total: COST_TIERS.reduce((a, t) => a + tiers[t].total, 0),
    tenants: apportion(tiers, namespaces, tenants),
  };
}
