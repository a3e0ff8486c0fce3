import { ValidationError } from '../../errors.js';
import { COST_TIERS, METRIC_NAMESPACES, METRICS, type CostTier } from '../../metrics/metric-catalog.js';
import { priceBook } from '../model/price-catalog.js';
import type { CostPublisherSettings } from './settings.js';
import { readFleetState, type FleetState, type FleetStateSource } from './fleet-state.js';
import { priceLiveUsage, type LiveCost, type MonitoringUsage, type UnpricedItem } from '../model/live-cost.js';
import {
  MAX_DATA_PER_CALL,
  metricPoint,
  publishPoints,
  type MetricPoint,
  type MetricSink,
  type PublishResult,
} from './metric-writer.js';
import { NO_SPOT, runningSpotCost, withSpotPrices, type RunningSpotCost } from '../model/spot.js';
import { completedHoursOfMonth, costPer1000Hits, projectMonthlyCost, type MonthlyProjection } from '../model/projection.js';
import { collectUsage, usageQueryCount, type PublisherUsage, type UsageSources, type UsageTargets } from './usage-reader.js';
import { type CostedFunction, type NamespaceUsage } from '../model/usage.js';

/**
 * The scheduled cost publisher (lambdas/ops/cost-publisher.ts is its handler): reads the last window of usage and
 * the fleet's state, prices the usage (each running cache node by how it was bought: spot nodes at the assumed spot
 * price of core/cost/model/spot.ts), projects the month, and publishes everything in Strata/Cost and Strata/Fleet
 * (core/metrics/metric-catalog.ts), all stamped with the run's time.
 */

export interface CostPublisherDeps extends UsageSources {
  readonly fleetState: FleetStateSource;
  readonly sink: MetricSink;
}

export interface CostPublisherReport {
  readonly at: string;
  readonly environment: string;
  readonly catalog: { readonly id: string; readonly version: string; readonly region: string };
  readonly window: { readonly start: string; readonly end: string };
  /** USD per hour. */
  readonly costPerHour: {
    readonly total: number;
    readonly tiers: Readonly<Record<CostTier, number>>;
    readonly tenants: Readonly<Record<string, number>>;
  };
  readonly projection: MonthlyProjection;
  readonly costPer1000Hits: number | undefined;
  readonly hitsPerHour: number;
  readonly usage: {
    readonly runningInstances: number;
    readonly volumes: number;
    readonly cold?: {
      readonly bytes: number;
      readonly objects: number;
      readonly storageSource: string;
      readonly requestSource: string;
      readonly truncated: boolean;
    };
  };
  readonly fleet: FleetState;
  /** The running spot nodes (SpotNodes), their on-demand and assumed spot price (USD per hour), and the savings. */
  readonly spot: RunningSpotCost;
  readonly unpriced: readonly UnpricedItem[];
  readonly published: PublishResult;
}

/** What to read, from the settings (plus functions known only at run time, such as the publisher itself). */
export function usageTargets(settings: CostPublisherSettings, extraFunctions: readonly CostedFunction[] = []): UsageTargets {
  return {
    environment: settings.environment,
    namespaces: settings.tenants.flatMap((t) => t.namespaces),
    ...(settings.hot ? { hot: settings.hot } : {}),
    ...(settings.cold ? { cold: settings.cold } : {}),
    ...(settings.apiName ? { apiName: settings.apiName } : {}),
    functions: [...settings.functions, ...extraFunctions.filter((f) => !settings.functions.some((s) => s.name === f.name))],
  };
}

/**
 * The Strata/Cost and Strata/Fleet points of one run. SpotSavingsMonthly and SpotNodes are published on every run,
 * 0 without spot nodes (`spot` defaults to none), as the tier costs are: the widgets draw a line at 0, not a gap.
 */
export function costAndFleetPoints(
  environment: string,
  cost: LiveCost,
  projection: MonthlyProjection,
  per1000Hits: number | undefined,
  fleet: FleetState,
  spot: Pick<RunningSpotCost, 'spotNodes' | 'savingsMonthly'> = NO_SPOT,
): MetricPoint[] {
  const env = { Environment: environment };
  const points: MetricPoint[] = [
    ...COST_TIERS.map((tier) => metricPoint(METRICS.costPerHour, { ...env, Tier: tier }, cost.tiers[tier].total)),
    ...Object.entries(cost.tenants).map(([tenant, usd]) => metricPoint(METRICS.costPerHour, { ...env, Tenant: tenant }, usd)),
    metricPoint(METRICS.totalCostPerHour, env, cost.total),
    metricPoint(METRICS.projectedMonthlyCost, env, projection.projected),
    ...(per1000Hits !== undefined ? [metricPoint(METRICS.costPer1000Hits, env, per1000Hits)] : []),
    metricPoint(METRICS.spotSavingsMonthly, env, spot.savingsMonthly),
    metricPoint(METRICS.nodes, env, fleet.nodes),
    metricPoint(METRICS.spotNodes, env, spot.spotNodes),
    ...fleet.fills.map((f) => metricPoint(METRICS.nodeFill, { ...env, Node: f.node }, f.percent)),
    ...(fleet.maxFillPercent !== undefined ? [metricPoint(METRICS.maxNodeFill, env, fleet.maxFillPercent)] : []),
    metricPoint(METRICS.migrationsInProgress, env, fleet.migrationsInProgress),
    metricPoint(METRICS.silentNodes, env, fleet.silent.length),
  ];
  return points;
}

/** Series a run publishes only with traffic (see {@link costAndFleetPoints} and live-cost.ts `apportion`). */
export interface TrafficSeries {
  /** CostPer1000Hits: only when the window had hits. */
  readonly costPer1000Hits: boolean;
  /** CostPerHour for Tenant=other: when unmapped namespaces had traffic, or when no tenant is configured. */
  readonly otherTenant: boolean;
}

/** Whether a window's usage makes the run publish the {@link TrafficSeries} (`other`: at most, as an upper bound). */
export function trafficSeries(
  usage: { readonly hits: number; readonly namespaces: readonly NamespaceUsage[] },
  tenants: number,
): TrafficSeries {
  return {
    costPer1000Hits: usage.hits > 0,
    otherTenant: tenants === 0 || usage.namespaces.some((n) => n.requests > 0 || n.bytes > 0),
  };
}

/**
 * CloudWatch usage of the publisher itself, priced under `monitoring`: the series it publishes (each tenant, plus
 * `other` and CostPer1000Hits when `traffic` says they are published, and each node counted), its PutMetricData
 * calls and the GetMetricData metrics it reads, per run times runs per hour, plus the configured dashboards and
 * alarm metrics. Without `traffic`, every series that can be published is counted.
 */
export function monitoringUsage(
  settings: CostPublisherSettings,
  targets: UsageTargets,
  nodes: number,
  traffic: TrafficSeries = { costPer1000Hits: true, otherTenant: true },
): MonitoringUsage {
  // CostPerHour per tier and per tenant, TotalCostPerHour, ProjectedMonthlyCost, SpotSavingsMonthly, and the two
  // series published only with traffic.
  const costSeries =
    COST_TIERS.length + settings.tenants.length + 3 + Number(traffic.otherTenant) + Number(traffic.costPer1000Hits);
  // Nodes, SpotNodes, MaxNodeFillPercent, MigrationsInProgress, SilentNodes, and NodeFillPercent per node.
  const fleetSeries = 5 + nodes;
  const calls = Math.ceil(costSeries / MAX_DATA_PER_CALL) + Math.ceil(fleetSeries / MAX_DATA_PER_CALL);
  const reads = usageQueryCount(targets) + 1;
  return {
    customMetrics: costSeries + fleetSeries,
    dashboards: settings.monitoring.dashboards,
    alarmMetrics: settings.monitoring.alarmMetrics,
    putMetricDataCallsPerHour: calls * settings.monitoring.runsPerHour,
    getMetricDataMetricsPerHour: reads * settings.monitoring.runsPerHour,
  };
}

/** Reads this month's hourly averages of TotalCostPerHour (the month-to-date). */
async function hourlyRatesThisMonth(
  deps: CostPublisherDeps,
  environment: string,
  at: Date,
): Promise<{ timestamp: Date; value: number }[]> {
  const range = completedHoursOfMonth(at);
  if (range.end <= range.start) return [];
  const def = METRICS.totalCostPerHour;
  const series = await deps.metrics.query(
    [
      {
        id: 'rate',
        namespace: def.namespace,
        metricName: def.name,
        dimensions: { Environment: environment },
        stat: 'Average',
        periodSeconds: 3600,
      },
    ],
    range,
  );
  return [...(series.get('rate') ?? [])];
}

/** One run: collect, price, project, publish. */
export async function runCostPublisher(
  deps: CostPublisherDeps,
  settings: CostPublisherSettings,
  at: Date,
  extraFunctions: readonly CostedFunction[] = [],
): Promise<CostPublisherReport> {
  const region = settings.region;
  if (!region)
    throw new ValidationError('region', 'the cost publisher needs a region for its prices (settings.region or AWS_REGION)');
  const book = priceBook(settings.catalogId, region);
  const targets = usageTargets(settings, extraFunctions);
  const window = { start: new Date(at.getTime() - settings.windowMinutes * 60_000), end: at };

  const [usage, fleet, hourly] = await Promise.all([
    collectUsage(deps, targets, window),
    readFleetState(deps.fleetState),
    hourlyRatesThisMonth(deps, settings.environment, at),
  ]);
  const spot = runningSpotCost(book, usage.fleet.instances);
  const cost = withSpotPrices(
    priceLiveUsage(usage, book, {
      tenants: settings.tenants,
      monitoring: monitoringUsage(settings, targets, fleet.nodes, trafficSeries(usage, settings.tenants.length)),
    }),
    spot,
    usage.namespaces,
    settings.tenants,
  );
  const projection = projectMonthlyCost(at, cost.total, hourly);
  const hitsPerHour = usage.hits / (settings.windowMinutes / 60);
  const per1000 = costPer1000Hits(cost.total, hitsPerHour);

  const points = costAndFleetPoints(settings.environment, cost, projection, per1000, fleet, spot);
  const published = await publishPoints(deps.sink, points, at);
  return {
    at: at.toISOString(),
    environment: settings.environment,
    catalog: { id: book.catalogId, version: book.catalogVersion, region: book.region },
    window: { start: window.start.toISOString(), end: window.end.toISOString() },
    costPerHour: {
      total: cost.total,
      tiers: Object.fromEntries(COST_TIERS.map((t) => [t, cost.tiers[t].total])) as Record<CostTier, number>,
      tenants: cost.tenants,
    },
    projection,
    costPer1000Hits: per1000,
    hitsPerHour: hitsPerHour,
    usage: summary(usage),
    fleet,
    spot,
    unpriced: cost.unpriced,
    published,
  };
}

function summary(usage: PublisherUsage): CostPublisherReport['usage'] {
  return {
    runningInstances: usage.fleet.instances.filter((i) => i.state === 'running').length,
    volumes: usage.fleet.volumes.length,
    ...(usage.cold
      ? {
          cold: {
            bytes: usage.cold.bytes,
            objects: usage.cold.objects,
            storageSource: usage.cold.storageSource,
            requestSource: usage.cold.requestSource,
            truncated: usage.cold.truncated,
          },
        }
      : {}),
  };
}

/** The namespaces the publisher writes to (for IAM conditions). */
export const PUBLISHED_NAMESPACES = [METRIC_NAMESPACES.cost, METRIC_NAMESPACES.fleet] as const;
