/**
 * Strata/Cost for the local dashboard, modelled. In AWS the cost publisher (core/cost/publisher/publish-cost.ts) reads an
 * hour of AWS usage and prices it; a local run has no AWS usage, so this prices what the local traffic WOULD use on
 * AWS, bucket by bucket, with the same price catalog and formulas (`priceLiveUsage` of core/cost/model/live-cost.ts), and
 * records the results in the local metrics store as the points the cost publisher would publish. Each bucket's
 * value is a rate: USD per hour if that bucket's traffic went on for an hour.
 *
 * What stands for AWS usage, per bucket (the deployment shape is cdk/config/dev.ts):
 *   api         one API Gateway request and one Lambda invocation per API request, billed for its handler time
 *               (Latency Sum) at the keys function's memory;
 *   hot         ElastiCache Serverless: the minimum data charge (local data is far smaller), and one ECPU per
 *               command reaching it (lookups not served by L1, writes) plus one per KiB moved;
 *   cold        S3 requests estimated as the cost publisher does without S3 request metrics
 *               (`estimateS3Requests`); storage of local data is not measured (fractions of a cent a month);
 *   warm        one dev instance (and its gp3 volume) per cache node the fleet sampler saw, when there is a warm tier;
 *   monitoring  CloudWatch: a custom metric per series in the store, and the three dashboards;
 *   workflows   step Lambdas are not priced locally (0).
 */
import { dev } from '../../cdk/config/dev.js';
import { priceBook, type PriceBook } from '../../core/cost/model/price-catalog.js';
import { priceLiveUsage, type TenantNamespaces } from '../../core/cost/model/live-cost.js';
import { costPer1000Hits, projectMonthlyCost } from '../../core/cost/model/projection.js';
import { estimateS3Requests, HIT_TIERS } from '../../core/cost/publisher/usage-reader.js';
import { type LiveUsage, type NamespaceUsage } from '../../core/cost/model/usage.js';
import { COST_TIERS, METRICS, type MetricDef } from '../../core/metrics/metric-catalog.js';
import type { LocalMetricsStore } from '../../core/metrics/local-store.js';

export interface LocalCostModelOptions {
  store: LocalMetricsStore;
  /** `Environment` dimension value. */
  environment: string;
  /** @default the newest AWS catalog, in the dev environment's region */
  book?: PriceBook;
  /** Tenants to share the cost between (their namespaces); others count as `other`. @default none */
  tenants?: readonly TenantNamespaces[];
  /** First bucket to price. @default the bucket of `now()` at construction */
  startMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/** Which catalog and region the local model prices with, for the dashboard's caption. */
export interface LocalCostModel {
  readonly book: PriceBook;
  /** Prices every bucket that ended since the last call (and records it in the store). */
  catchUp(): void;
}

const WRITE_OPERATIONS = ['put', 'delete', 'batch-put', 'batch-delete', 'upload-complete'] as const;
const DASHBOARDS = 3;
/** Keys function memory in the dev environment, MB (the function most requests go to). */
const API_MEMORY_MB = dev.api?.functions?.keys?.memoryMb ?? 1024;

export function localCostModel(o: LocalCostModelOptions): LocalCostModel {
  const { store, environment } = o;
  const book = o.book ?? priceBook(undefined, dev.region);
  const now = o.now ?? Date.now;
  const res = store.resolutionMs;
  let next = Math.floor((o.startMs ?? now()) / res) * res;

  /** Sum of a catalog metric over one bucket, per value of `splitBy` (or under '' without one). */
  const sums = (def: MetricDef, dims: Record<string, string>, at: number, splitBy?: string, stat: 'Sum' | 'Maximum' = 'Sum') => {
    const out = new Map<string, number>();
    const dimensions = { Environment: environment, ...dims };
    const sel = { namespace: def.namespace, name: def.name, dimensions, ...(splitBy ? { splitBy } : {}) };
    const results = store.query(sel, stat, { fromMs: at, toMs: at + res - 1 });
    for (const r of results) for (const [, v] of r.points) out.set(r.split ?? '', (out.get(r.split ?? '') ?? 0) + v);
    return out;
  };
  const sum = (def: MetricDef, dims: Record<string, string>, at: number): number => sums(def, dims, at).get('') ?? 0;

  /** Cache nodes in the ring around `at` (the fleet sampler records them every bucket; look back a few). */
  const nodesAt = (at: number): number => {
    for (let t = at; t > at - 6 * res; t -= res) {
      const n = sums(METRICS.nodes, {}, t, undefined, 'Maximum').get('');
      if (n !== undefined) return n;
    }
    return 0;
  };

  const usageOf = (at: number): LiveUsage => {
    const requests = sum(METRICS.requests, {}, at);
    const hits = Object.fromEntries(HIT_TIERS.map((t) => [t, sum(METRICS.hits, { Tier: t }, at)]));
    const misses = sum(METRICS.misses, {}, at);
    const writes = WRITE_OPERATIONS.reduce((a, op) => a + sum(METRICS.requests, { Operation: op }, at), 0);
    const bytes = sum(METRICS.bytesIn, {}, at) + sum(METRICS.bytesOut, {}, at);
    const lookups = HIT_TIERS.reduce((a, t) => a + hits[t]!, 0) + misses;
    const handlerMs = sum(METRICS.latency, {}, at);
    const nodes = nodesAt(at);
    const volume = dev.fleet.dataVolume;
    const byNs = new Map<string, { requests: number; bytes: number }>();
    const addNs = (m: Map<string, number>, key: 'requests' | 'bytes') => {
      for (const [ns, v] of m) {
        const cur = byNs.get(ns) ?? { requests: 0, bytes: 0 };
        byNs.set(ns, { ...cur, [key]: cur[key] + v });
      }
    };
    for (const t of HIT_TIERS) addNs(sums(METRICS.hits, { Tier: t }, at, 'Namespace'), 'requests');
    addNs(sums(METRICS.misses, {}, at, 'Namespace'), 'requests');
    addNs(sums(METRICS.bytesIn, {}, at, 'Namespace'), 'bytes');
    addNs(sums(METRICS.bytesOut, {}, at, 'Namespace'), 'bytes');
    const namespaces: NamespaceUsage[] = [...byNs].map(([namespace, u]) => ({ namespace, ...u }));
    const s3 = estimateS3Requests({ coldHits: hits.cold!, misses, coldWrites: writes });
    return {
      window: { start: new Date(at), end: new Date(at + res) },
      fleet: {
        instances: Array.from({ length: nodes }, (_, i) => ({
          id: `local-node-${i + 1}`,
          type: dev.fleet.instanceType,
          state: 'running',
        })),
        volumes: Array.from({ length: nodes }, (_, i) => ({
          id: `local-volume-${i + 1}`,
          type: 'gp3',
          sizeGiB: volume?.sizeGiB ?? 20,
          iops: volume?.iops ?? 3000,
          throughputMiBps: volume?.throughputMiBps ?? 125,
        })),
      },
      hot: { bytesUsed: 0, ecpus: lookups - hits.l1! + writes + bytes / 1024 },
      cold: {
        bytes: 0,
        objects: 0,
        storageSource: 'listing',
        truncated: false,
        getRequests: s3.get,
        putRequests: s3.put,
        requestSource: 'estimate',
      },
      apiRequests: requests,
      functions: [
        {
          name: 'api',
          memoryMb: API_MEMORY_MB,
          tier: 'api',
          invocations: requests,
          gbSeconds: (handlerMs / 1000) * (API_MEMORY_MB / 1024),
        },
      ],
      hits: HIT_TIERS.reduce((a, t) => a + hits[t]!, 0),
      namespaces,
    };
  };

  const record = (def: MetricDef, dims: Record<string, string>, value: number, at: number) => {
    const dimensions = { Environment: environment, ...dims };
    store.record({ namespace: def.namespace, name: def.name, unit: def.unit, dimensions }, value, at);
  };

  const price = (at: number): void => {
    const usage = usageOf(at);
    const monitoring = {
      customMetrics: store.knownSeries().length,
      dashboards: DASHBOARDS,
      alarmMetrics: 0,
      putMetricDataCallsPerHour: 0,
      getMetricDataMetricsPerHour: 0,
    };
    const cost = priceLiveUsage(usage, book, { tenants: o.tenants ?? [], monitoring });
    for (const tier of COST_TIERS) record(METRICS.costPerHour, { Tier: tier }, cost.tiers[tier].total, at);
    for (const [tenant, usd] of Object.entries(cost.tenants)) record(METRICS.costPerHour, { Tenant: tenant }, usd, at);
    record(METRICS.totalCostPerHour, {}, cost.total, at);
    // A local run has no month-to-date: the projection is this rate from the start of this hour to the month's end.
    record(METRICS.projectedMonthlyCost, {}, projectMonthlyCost(new Date(at), cost.total, []).projected, at);
    const per1000 = costPer1000Hits(cost.total, usage.hits * (3_600_000 / res));
    if (per1000 !== undefined) record(METRICS.costPer1000Hits, {}, per1000, at);
  };

  return {
    book,
    catchUp: () => {
      const end = Math.floor(now() / res) * res;
      // Never more than the store keeps (a long idle run priced in one go would be recorded and pruned at once).
      next = Math.max(next, end - 360 * res);
      for (; next + res <= end; next += res) price(next);
    },
  };
}
