import { COST_TIERS, OTHER, type CostTier } from '../../metrics/metric-catalog.js';
import type { PriceBook } from './price-catalog.js';
import { addBreakdowns, allocationCost, breakdown, requestCost, storageCost, type CostBreakdown } from './formulas.js';
import type { LiveUsage, NamespaceUsage } from './usage.js';
import { grantSpecificity } from '../../model/tenancy.js';

/**
 * Live cost: one window of actual usage ({@link LiveUsage}) priced with the catalog and the cost model's formulas,
 * as USD per hour per tier and per tenant. Monthly catalog prices are prorated over the catalog's hours per
 * month (730 for AWS); per-request prices apply to the requests of the window, which is one hour long by default,
 * so its request charges are already a rate per hour.
 *
 *   warm        Σ running instances: C_Alloc = 1 h × 1 × hourly(type);  Σ volumes (gp3): C_S = GiB × GB-month,
 *               C_R = IOPS above 3,000 × IOPS-month + MiB/s above 125 × MiB/s-month (both per hour)
 *   hot         C_S = max(GB used, 0.1 GB) × GB-hour;  C_R = ECPUs × ECPU price
 *   cold        C_S = GB stored × GB-month / h;  C_R = PUTs × PUT price + GETs × GET price
 *   api         API Gateway requests × REST price + Lambda (api functions): invocations × request price + GB-s × GB-s price
 *   workflows   Lambda (workflow functions), as above
 *   monitoring  Lambda (the publisher) + CloudWatch: (custom metrics × metric-month + dashboards × dashboard-month
 *               + alarm metrics × alarm-month) / h + PutMetricData calls and GetMetricData metrics of the hour
 *
 * Per tenant, each tier's cost is shared in proportion to a usage driver of the tenant's namespaces (see
 * {@link TENANT_DRIVER}); the shares of a tier always add up to the tier's cost.
 */

export interface MonitoringUsage {
  /** Metric series published (each is a custom metric billed per month). */
  readonly customMetrics: number;
  readonly dashboards: number;
  /** Metrics watched by alarms (a metric-math alarm is billed per metric it reads). */
  readonly alarmMetrics: number;
  readonly putMetricDataCallsPerHour: number;
  readonly getMetricDataMetricsPerHour: number;
}

export interface TenantNamespaces {
  readonly name: string;
  readonly namespaces: readonly string[];
}

export interface LiveCostOptions {
  readonly tenants: readonly TenantNamespaces[];
  readonly monitoring: MonitoringUsage;
}

/** Something in the usage the catalog has no price for (left out of the totals, so they are lower bounds). */
export interface UnpricedItem {
  readonly tier: CostTier;
  readonly item: string;
  readonly reason: string;
}

export interface LiveCost {
  /** USD per hour by tier, with the model's components. */
  readonly tiers: Readonly<Record<CostTier, CostBreakdown>>;
  /** USD per hour by tenant (configured tenants, plus {@link OTHER} when unmapped namespaces had traffic). */
  readonly tenants: Readonly<Record<string, number>>;
  /** USD per hour, all tiers. */
  readonly total: number;
  readonly unpriced: readonly UnpricedItem[];
}

/** What each tier's cost is shared by between tenants. */
export const TENANT_DRIVER: Readonly<Record<CostTier, 'bytes' | 'requests'>> = {
  hot: 'bytes',
  warm: 'bytes',
  cold: 'bytes',
  api: 'requests',
  workflows: 'bytes',
  monitoring: 'requests',
};

/**
 * Prices one window of usage.
 * @example priceLiveUsage(usage, priceBook('aws-2026-11', 'us-east-1'), { tenants: [{ name: 'web', namespaces: ['pages'] }], monitoring }).tiers.warm.total
 */
export function priceLiveUsage(usage: LiveUsage, book: PriceBook, options: LiveCostOptions): LiveCost {
  const hours = windowHours(usage);
  const unpriced: UnpricedItem[] = [];
  const tiers: Record<CostTier, CostBreakdown> = {
    hot: hotCost(usage, book, hours, unpriced),
    warm: warmCost(usage, book, unpriced),
    cold: coldCost(usage, book, hours, unpriced),
    api: addBreakdowns(apiGatewayCost(usage, book, hours, unpriced), lambdaCost(usage, book, hours, 'api', unpriced)),
    workflows: lambdaCost(usage, book, hours, 'workflows', unpriced),
    monitoring: addBreakdowns(
      lambdaCost(usage, book, hours, 'monitoring', unpriced),
      cloudWatchCost(options.monitoring, book, unpriced),
    ),
  };
  const total = COST_TIERS.reduce((a, t) => a + tiers[t].total, 0);
  return { tiers, tenants: apportion(tiers, usage.namespaces, options.tenants), total, unpriced };
}

/** Length of the usage window in hours: request counts of the window divided by it give rates per hour. */
function windowHours(usage: LiveUsage): number {
  const h = (usage.window.end.getTime() - usage.window.start.getTime()) / 3_600_000;
  if (!(h > 0)) throw new RangeError(`usage window must be positive, got ${h} h`);
  return h;
}

const perHour = (book: PriceBook, monthly: number): number => monthly / book.hoursPerMonth;

function warmCost(usage: LiveUsage, book: PriceBook, unpriced: UnpricedItem[]): CostBreakdown {
  let alloc = 0;
  for (const i of usage.fleet.instances) {
    if (i.state !== 'running') continue;
    const price = book.prices.ec2.instances[i.type];
    if (!price)
      unpriced.push({
        tier: 'warm',
        item: `instance ${i.id}`,
        reason: `catalog ${book.catalogId} has no EC2 ${i.type} in ${book.region}`,
      });
    else alloc += allocationCost(1, 1, price.hourly);
  }
  let store = 0;
  let req = 0;
  const gp3 = book.prices.ebs.gp3;
  for (const v of usage.fleet.volumes) {
    if (v.type !== 'gp3' || !gp3) {
      unpriced.push({
        tier: 'warm',
        item: `volume ${v.id}`,
        reason: `catalog ${book.catalogId} has no ${v.type} prices in ${book.region}`,
      });
      continue;
    }
    store += perHour(book, storageCost(v.sizeGiB, gp3.perGBMonth));
    req += perHour(
      book,
      Math.max(0, v.iops - gp3.baselineIops) * gp3.perIopsMonth +
        Math.max(0, v.throughputMiBps - gp3.baselineThroughputMBps) * gp3.perMBpsMonth,
    );
  }
  return breakdown({ alloc, store, req });
}

function hotCost(usage: LiveUsage, book: PriceBook, hours: number, unpriced: UnpricedItem[]): CostBreakdown {
  if (!usage.hot) return breakdown({});
  const sl = book.prices.elasticache?.serverless;
  if (!sl) {
    unpriced.push({
      tier: 'hot',
      item: 'ElastiCache Serverless',
      reason: `catalog ${book.catalogId} has no ElastiCache Serverless prices in ${book.region}`,
    });
    return breakdown({});
  }
  const gb = usage.hot.bytesUsed / book.bytesPerGB;
  return breakdown({
    store: storageCost(Math.max(gb, sl.minGB), sl.perGBHour),
    req: requestCost(usage.hot.ecpus, sl.ecpu) / hours,
  });
}

function coldCost(usage: LiveUsage, book: PriceBook, hours: number, unpriced: UnpricedItem[]): CostBreakdown {
  if (!usage.cold) return breakdown({});
  const cls = book.prices.s3.classes.STANDARD;
  if (!cls) {
    unpriced.push({ tier: 'cold', item: 'S3 STANDARD', reason: `catalog ${book.catalogId} has no S3 prices in ${book.region}` });
    return breakdown({});
  }
  const c = usage.cold;
  return breakdown({
    store: perHour(book, storageCost(c.bytes / book.bytesPerGB, cls.perGBMonth)),
    req: (requestCost(c.putRequests, cls.put) + requestCost(c.getRequests, cls.get)) / hours,
  });
}

function apiGatewayCost(usage: LiveUsage, book: PriceBook, hours: number, unpriced: UnpricedItem[]): CostBreakdown {
  if (usage.apiRequests === 0) return breakdown({});
  const gw = book.prices.apiGateway;
  if (!gw) {
    unpriced.push({
      tier: 'api',
      item: 'API Gateway',
      reason: `catalog ${book.catalogId} has no API Gateway prices in ${book.region}`,
    });
    return breakdown({});
  }
  return breakdown({ access: requestCost(usage.apiRequests, gw.restRequests) / hours });
}

function lambdaCost(usage: LiveUsage, book: PriceBook, hours: number, tier: CostTier, unpriced: UnpricedItem[]): CostBreakdown {
  const fns = usage.functions.filter((f) => f.tier === tier);
  if (fns.length === 0) return breakdown({});
  const lambda = book.prices.lambda;
  if (!lambda) {
    unpriced.push({ tier, item: 'Lambda', reason: `catalog ${book.catalogId} has no Lambda prices in ${book.region}` });
    return breakdown({});
  }
  const cost = fns.reduce((a, f) => a + requestCost(f.invocations, lambda.requests) + f.gbSeconds * lambda.perGBSecondArm64, 0);
  return breakdown({ access: cost / hours });
}

function cloudWatchCost(m: MonitoringUsage, book: PriceBook, unpriced: UnpricedItem[]): CostBreakdown {
  const cw = book.prices.cloudWatch;
  if (!cw) {
    unpriced.push({
      tier: 'monitoring',
      item: 'CloudWatch',
      reason: `catalog ${book.catalogId} has no CloudWatch prices in ${book.region}`,
    });
    return breakdown({});
  }
  return breakdown({
    store: perHour(
      book,
      m.customMetrics * cw.customMetricPerMonth + m.dashboards * cw.dashboardPerMonth + m.alarmMetrics * cw.alarmStandardPerMonth,
    ),
    req:
      requestCost(m.putMetricDataCallsPerHour, cw.putMetricData) +
      requestCost(m.getMetricDataMetricsPerHour, cw.getMetricDataMetrics),
  });
}

/**
 * Shares each tier's cost between tenants by their namespaces' usage driver ({@link TENANT_DRIVER}); namespaces no
 * tenant lists count for {@link OTHER}. A tier whose driver saw nothing in the window is shared by the other
 * driver, and when there was no traffic at all, evenly between the configured tenants (idle cost is everyone's).
 */
export function apportion(
  tiers: Readonly<Record<CostTier, CostBreakdown>>,
  namespaces: readonly NamespaceUsage[],
  tenants: readonly TenantNamespaces[],
): Record<string, number> {
  const tenantOf = tenantOfNamespace(tenants);
  const drivers = new Map<string, { bytes: number; requests: number }>();
  for (const t of tenants) drivers.set(t.name, { bytes: 0, requests: 0 });
  for (const n of namespaces) {
    const name = tenantOf(n.namespace) ?? OTHER;
    const d = drivers.get(name) ?? { bytes: 0, requests: 0 };
    drivers.set(name, { bytes: d.bytes + n.bytes, requests: d.requests + n.requests });
  }
  const other = drivers.get(OTHER);
  if (other && other.bytes === 0 && other.requests === 0 && !tenants.some((t) => t.name === OTHER)) drivers.delete(OTHER);

  const out: Record<string, number> = Object.fromEntries([...drivers.keys()].map((k) => [k, 0]));
  const totals = { bytes: sumOf(drivers, 'bytes'), requests: sumOf(drivers, 'requests') };
  for (const tier of COST_TIERS) {
    const cost = tiers[tier].total;
    if (cost === 0) continue;
    const primary = TENANT_DRIVER[tier];
    const driver =
      totals[primary] > 0
        ? primary
        : totals[primary === 'bytes' ? 'requests' : 'bytes'] > 0
          ? primary === 'bytes'
            ? 'requests'
            : 'bytes'
          : undefined;
    if (driver) {
      for (const [name, d] of drivers) out[name]! += (cost * d[driver]) / totals[driver];
    } else {
      const even = tenants.length ? tenants.map((t) => t.name) : [...drivers.keys()];
      const names = even.length ? even : [OTHER];
      for (const name of names) out[name] = (out[name] ?? 0) + cost / names.length;
    }
  }
  return out;
}

function sumOf(drivers: Map<string, { bytes: number; requests: number }>, key: 'bytes' | 'requests'): number {
  let s = 0;
  for (const d of drivers.values()) s += d[key];
  return s;
}

/**
 * The tenant a namespace belongs to: the one whose grant covers it most specifically (its name, else the longest
 * matching prefix such as `web-*`; `*` matches everything; the first tenant on a tie), as the API enforces them.
 */
function tenantOfNamespace(tenants: readonly TenantNamespaces[]): (ns: string) => string | undefined {
  return (ns) => {
    let best: { tenant: string; specificity: number } | undefined;
    for (const t of tenants) {
      for (const g of t.namespaces) {
        const specificity = grantSpecificity(g, ns);
        if (specificity >= 0 && (!best || specificity > best.specificity)) best = { tenant: t.name, specificity };
      }
    }
    return best?.tenant;
  };
}
