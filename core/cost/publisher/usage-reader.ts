import { METRIC_NAMESPACES, METRICS, OTHER, type Operation, type ServedTier } from '../../metrics/metric-catalog.js';
import type { ColdUsage, CostedFunction, FleetInstance, FleetVolume, LiveUsage, TimeWindow } from '../model/usage.js';
import type { NodeLifecycle } from '../model/spot.js';

/**
 * What Strata actually used over a time window, read from AWS through small reader interfaces (implemented over
 * the AWS SDK in aws-usage-readers.ts, and in memory by the unit tests):
 *
 *   warm  EC2 DescribeInstances / DescribeVolumes, filtered by the fleet's tags: instance types, how each instance
 *         was bought (on demand or spot), and gp3 volumes;
 *   hot   AWS/ElastiCache BytesUsedForCache (average) and ElastiCacheProcessingUnits (sum) of the serverless cache;
 *   cold  bytes and objects: AWS/S3 BucketSizeBytes / NumberOfObjects (daily storage metrics) when CloudWatch has
 *         them, else a ListObjectsV2 walk of the tier's prefix; requests: AWS/S3 GetRequests / PutRequests when
 *         the bucket has a request-metrics filter, else estimated from Strata/Requests (see {@link estimateS3Requests});
 *   api   AWS/ApiGateway Count, AWS/Lambda Invocations and Duration per function (tagged with the tier it serves);
 *   per namespace  Strata/Requests Hits (per tier), Misses, BytesIn, BytesOut: the basis of per-tenant shares.
 *
 * Strata's own metrics are read with their most specific dimension set (per namespace) and summed here, so a
 * total never depends on how a backend matches partial dimension sets.
 */

/** A cache-node instance and how it was bought; absent lifecycle: on demand. */
export interface FleetNodeInstance extends FleetInstance {
  readonly lifecycle?: NodeLifecycle;
}

/** The warm tier's EC2 resources (instances and every volume of them, attached or not). */
export interface FleetReader {
  instances(): Promise<FleetNodeInstance[]>;
  volumes(): Promise<FleetVolume[]>;
}

/** Usage as the publisher reads it: {@link LiveUsage} whose instances say how they were bought. */
export interface PublisherUsage extends LiveUsage {
  readonly fleet: { readonly instances: readonly FleetNodeInstance[]; readonly volumes: readonly FleetVolume[] };
}

export interface ObjectListing {
  readonly bytes: number;
  readonly objects: number;
  /** The walk stopped at its object limit: bytes and objects are lower bounds. */
  readonly truncated: boolean;
}

/** Sums the objects under a prefix (the fallback when S3's daily storage metrics are not there yet). */
export interface ObjectStoreReader {
  list(bucket: string, prefix: string, maxObjects: number): Promise<ObjectListing>;
}

export type MetricStatistic = 'Sum' | 'Average' | 'Maximum';

/** One metric series to read. `id` must start with a lower-case letter (GetMetricData's rule). */
export interface MetricQuery {
  readonly id: string;
  readonly namespace: string;
  readonly metricName: string;
  readonly dimensions: Readonly<Record<string, string>>;
  readonly stat: MetricStatistic;
  readonly periodSeconds: number;
}

export interface MetricValue {
  readonly timestamp: Date;
  readonly value: number;
}

/** Reads metric series (CloudWatch GetMetricData in AWS). Series without data map to an empty list or are absent. */
export interface MetricSource {
  query(queries: readonly MetricQuery[], range: TimeWindow): Promise<ReadonlyMap<string, readonly MetricValue[]>>;
}

/** What to read: names of the environment's resources. */
export interface UsageTargets {
  /** Value of the `Environment` dimension of Strata's metrics. */
  readonly environment: string;
  /** Namespaces to read per-namespace request metrics for ({@link OTHER} is always added). */
  readonly namespaces: readonly string[];
  /** ElastiCache Serverless cache; absent: no hot tier. */
  readonly hot?: { readonly cacheName: string; readonly dimension: string };
  /** Cold tier; absent: no cold tier. */
  readonly cold?: {
    readonly bucket: string;
    readonly prefix: string;
    readonly requestMetricsFilterId?: string;
    readonly maxListedObjects: number;
  };
  /** API Gateway REST API name (dimension `ApiName`); absent: no API. */
  readonly apiName?: string;
  readonly functions: readonly CostedFunction[];
}

export interface UsageSources {
  readonly fleet: FleetReader;
  readonly objects: ObjectStoreReader;
  readonly metrics: MetricSource;
}

/** Tiers a `Hits` datapoint can name (`none` is a miss, counted by `Misses`). */
export const HIT_TIERS: readonly ServedTier[] = ['l1', 'hot', 'warm', 'cold', 'origin'];
/** Operations that write to the cold tier (write-through puts, delete tombstones). */
const COLD_WRITE_OPERATIONS: readonly Operation[] = ['put', 'delete', 'batch-put', 'batch-delete'];

const MINUTE = 60;
const DAY = 86_400;
/** S3 storage metrics are daily; look back far enough to find the latest one. */
const STORAGE_LOOKBACK_MS = 3 * DAY * 1000;

/** Everything read per window; ids are positional (q0, q1, ...), `key` says what each is. */
interface KeyedQuery extends MetricQuery {
  readonly key: string;
}

function windowQueries(t: UsageTargets): KeyedQuery[] {
  const out: KeyedQuery[] = [];
  const add = (key: string, namespace: string, metricName: string, dimensions: Record<string, string>, stat: MetricStatistic) =>
    out.push({ id: `q${out.length}`, key, namespace, metricName, dimensions, stat, periodSeconds: MINUTE });
  const R = METRIC_NAMESPACES.requests;
  const env = t.environment;
  for (const ns of namespacesOf(t)) {
    for (const tier of HIT_TIERS)
      add(`hits:${ns}:${tier}`, R, METRICS.hits.name, { Environment: env, Namespace: ns, Tier: tier }, 'Sum');
    add(`misses:${ns}`, R, METRICS.misses.name, { Environment: env, Namespace: ns }, 'Sum');
    add(`bytesIn:${ns}`, R, METRICS.bytesIn.name, { Environment: env, Namespace: ns }, 'Sum');
    add(`bytesOut:${ns}`, R, METRICS.bytesOut.name, { Environment: env, Namespace: ns }, 'Sum');
  }
  if (t.cold) {
    for (const op of COLD_WRITE_OPERATIONS)
      add(`requests:${op}`, R, METRICS.requests.name, { Environment: env, Operation: op }, 'Sum');
    if (t.cold.requestMetricsFilterId) {
      const dims = { BucketName: t.cold.bucket, FilterId: t.cold.requestMetricsFilterId };
      add('s3:get', 'AWS/S3', 'GetRequests', dims, 'Sum');
      add('s3:put', 'AWS/S3', 'PutRequests', dims, 'Sum');
    }
  }
  if (t.hot) {
    const dims = { [t.hot.dimension]: t.hot.cacheName };
    add('hot:bytes', 'AWS/ElastiCache', 'BytesUsedForCache', dims, 'Average');
    add('hot:ecpus', 'AWS/ElastiCache', 'ElastiCacheProcessingUnits', dims, 'Sum');
  }
  if (t.apiName) add('api:count', 'AWS/ApiGateway', 'Count', { ApiName: t.apiName }, 'Sum');
  for (const f of t.functions) {
    add(`fn:invocations:${f.name}`, 'AWS/Lambda', 'Invocations', { FunctionName: f.name }, 'Sum');
    add(`fn:duration:${f.name}`, 'AWS/Lambda', 'Duration', { FunctionName: f.name }, 'Sum');
  }
  return out;
}

function storageQueries(cold: NonNullable<UsageTargets['cold']>): KeyedQuery[] {
  return [
    {
      id: 'q0',
      key: 's3:bytes',
      namespace: 'AWS/S3',
      metricName: 'BucketSizeBytes',
      dimensions: { BucketName: cold.bucket, StorageType: 'StandardStorage' },
      stat: 'Average',
      periodSeconds: DAY,
    },
    {
      id: 'q1',
      key: 's3:objects',
      namespace: 'AWS/S3',
      metricName: 'NumberOfObjects',
      dimensions: { BucketName: cold.bucket, StorageType: 'AllStorageTypes' },
      stat: 'Average',
      periodSeconds: DAY,
    },
  ];
}

/** The configured namespaces plus {@link OTHER} (where the request recorder puts every other one), without repeats. */
export function namespacesOf(t: Pick<UsageTargets, 'namespaces'>): string[] {
  return [...new Set([...t.namespaces, OTHER])];
}

/** How many metric series one collection reads (each is billed as one GetMetricData metric). */
export function usageQueryCount(t: UsageTargets): number {
  return windowQueries(t).length + (t.cold ? storageQueries(t.cold).length : 0);
}

/** Reads the usage of `window` from `sources`. */
export async function collectUsage(sources: UsageSources, t: UsageTargets, window: TimeWindow): Promise<PublisherUsage> {
  const queries = windowQueries(t);
  const [series, instances, volumes, cold] = await Promise.all([
    sources.metrics.query(queries, window),
    sources.fleet.instances(),
    sources.fleet.volumes(),
    t.cold ? coldStorage(sources, t.cold, window) : Promise.resolve(undefined),
  ]);
  const byKey = new Map(queries.map((q) => [q.key, series.get(q.id) ?? []]));
  const sum = (key: string): number => (byKey.get(key) ?? []).reduce((a, p) => a + p.value, 0);
  const mean = (key: string): number => {
    const pts = byKey.get(key) ?? [];
    return pts.length ? pts.reduce((a, p) => a + p.value, 0) / pts.length : 0;
  };
  const has = (key: string): boolean => (byKey.get(key) ?? []).length > 0;

  const namespaces = namespacesOf(t).map((ns) => ({
    namespace: ns,
    requests: HIT_TIERS.reduce((a, tier) => a + sum(`hits:${ns}:${tier}`), 0) + sum(`misses:${ns}`),
    bytes: sum(`bytesIn:${ns}`) + sum(`bytesOut:${ns}`),
  }));
  const hitsIn = (tier: ServedTier): number => namespacesOf(t).reduce((a, ns) => a + sum(`hits:${ns}:${tier}`), 0);
  const misses = namespacesOf(t).reduce((a, ns) => a + sum(`misses:${ns}`), 0);

  let coldUsage: ColdUsage | undefined;
  if (t.cold && cold) {
    const measured = t.cold.requestMetricsFilterId !== undefined && (has('s3:get') || has('s3:put'));
    const estimate = estimateS3Requests({
      coldHits: hitsIn('cold'),
      misses,
      coldWrites: COLD_WRITE_OPERATIONS.reduce((a, op) => a + sum(`requests:${op}`), 0),
    });
    coldUsage = {
      ...cold,
      getRequests: measured ? sum('s3:get') : estimate.get,
      putRequests: measured ? sum('s3:put') : estimate.put,
      requestSource: measured ? 'cloudwatch' : 'estimate',
    };
  }

  return {
    window,
    fleet: { instances, volumes },
    ...(t.hot ? { hot: { bytesUsed: mean('hot:bytes'), ecpus: sum('hot:ecpus') } } : {}),
    ...(coldUsage ? { cold: coldUsage } : {}),
    apiRequests: t.apiName ? sum('api:count') : 0,
    functions: t.functions.map((f) => ({
      ...f,
      invocations: sum(`fn:invocations:${f.name}`),
      gbSeconds: (sum(`fn:duration:${f.name}`) / 1000) * (f.memoryMb / 1024),
    })),
    hits: HIT_TIERS.reduce((a, tier) => a + hitsIn(tier), 0),
    namespaces,
  };
}

/**
 * S3 requests when the bucket has no request metrics: every cold-tier hit is a GET, so is every miss (a lookup
 * that found nothing reached the cold tier last), and every put or delete the API handled wrote the cold tier
 * once (write-through, tombstones). Batches count as one write, so heavy batch use makes this a lower bound.
 */
export function estimateS3Requests(x: { coldHits: number; misses: number; coldWrites: number }): { get: number; put: number } {
  return { get: x.coldHits + x.misses, put: x.coldWrites };
}

async function coldStorage(
  sources: UsageSources,
  cold: NonNullable<UsageTargets['cold']>,
  window: TimeWindow,
): Promise<Omit<ColdUsage, 'getRequests' | 'putRequests' | 'requestSource'>> {
  const queries = storageQueries(cold);
  const series = await sources.metrics.query(queries, {
    start: new Date(window.end.getTime() - STORAGE_LOOKBACK_MS),
    end: window.end,
  });
  const latest = (id: string): number | undefined => {
    const pts = [...(series.get(id) ?? [])].sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime());
    return pts[pts.length - 1]?.value;
  };
  const bytes = latest('q0');
  if (bytes !== undefined) return { bytes, objects: latest('q1') ?? 0, storageSource: 'cloudwatch', truncated: false };
  const listing = await sources.objects.list(cold.bucket, cold.prefix, cold.maxListedObjects);
  return { bytes: listing.bytes, objects: listing.objects, storageSource: 'listing', truncated: listing.truncated };
}
