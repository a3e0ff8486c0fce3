import type { MetricDatum } from '@aws-sdk/client-cloudwatch';
import { DASHBOARDS, referencedMetricKeys } from '../../dashboards/index.js';
import { costPublisherSettingsFromJson, parseCostPublisherSettings } from '../../layers/core/cost/cost-publisher-settings.js';
import { costAndFleetPoints, runCostPublisher, type CostPublisherDeps } from '../../layers/core/cost/cost-publisher.js';
import { readFleetState, type FleetStateSource } from '../../layers/core/cost/fleet-state.js';
import { priceBook } from '../../layers/core/cost/catalog.js';
import { priceLiveUsage } from '../../layers/core/cost/live-cost.js';
import { MAX_DATA_PER_CALL, metricPoint, publishPoints, type MetricSink } from '../../layers/core/cost/publisher.js';
import { collectUsage, estimateS3Requests, type FleetReader, type MetricQuery, type MetricSource, type MetricValue, type ObjectStoreReader, type TimeWindow, type UsageTargets } from '../../layers/core/cost/usage.js';
import { ValidationError } from '../../layers/core/errors.js';
import { METRIC_NAMESPACES, METRICS } from '../../layers/core/metrics/catalog.js';
import { initialRing, type RingDocument } from '../../layers/core/ring/document.js';

/**
 * A CloudWatch stand-in for unit tests (no network): stores what is put, answers queries by exact dimension set,
 * aggregating into periods counted from the query's start, as GetMetricData does.
 */
class InMemoryMetrics implements MetricSource, MetricSink {
  readonly data: { namespace: string; name: string; dims: Record<string, string>; value: number; at: Date }[] = [];
  calls: { namespace: string; count: number }[] = [];
  queried: MetricQuery[][] = [];

  add(namespace: string, name: string, dims: Record<string, string>, value: number, at: Date): void {
    this.data.push({ namespace, name, dims, value, at });
  }

  async put(namespace: string, data: readonly MetricDatum[]): Promise<void> {
    this.calls.push({ namespace, count: data.length });
    for (const d of data) this.add(namespace, d.MetricName!, Object.fromEntries((d.Dimensions ?? []).map((x) => [x.Name!, x.Value!])), d.Value!, d.Timestamp as Date);
  }

  async query(queries: readonly MetricQuery[], range: TimeWindow): Promise<ReadonlyMap<string, readonly MetricValue[]>> {
    this.queried.push([...queries]);
    const out = new Map<string, MetricValue[]>();
    for (const q of queries) {
      const buckets = new Map<number, number[]>();
      for (const d of this.data) {
        if (d.namespace !== q.namespace || d.name !== q.metricName || !sameDims(d.dims, q.dimensions)) continue;
        if (d.at < range.start || d.at >= range.end) continue;
        const b = range.start.getTime() + Math.floor((d.at.getTime() - range.start.getTime()) / (q.periodSeconds * 1000)) * q.periodSeconds * 1000;
        buckets.set(b, [...(buckets.get(b) ?? []), d.value]);
      }
      out.set(q.id, [...buckets].map(([t, vs]) => ({ timestamp: new Date(t), value: q.stat === 'Sum' ? vs.reduce((a, b) => a + b, 0) : q.stat === 'Maximum' ? Math.max(...vs) : vs.reduce((a, b) => a + b, 0) / vs.length })));
    }
    return out;
  }
}

function sameDims(a: Record<string, string>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

const noFleet: FleetReader = { instances: async () => [], volumes: async () => [] };
const noObjects: ObjectStoreReader = { list: async () => ({ bytes: 0, objects: 0, truncated: false }) };
const noRing: FleetStateSource = { ring: async () => undefined, nodeStats: async () => ({ fill: 0 }) };

describe('metricPoint', () => {
  it('accepts a catalog metric with one of its declared dimension sets, in any key order', () => {
    expect(metricPoint(METRICS.costPerHour, { Tier: 'hot', Environment: 'dev' }, 0.1).def).toBe(METRICS.costPerHour);
  });

  it.each<[Record<string, string>, string]>([
    [{ Environment: 'dev' }, 'a subset'],
    [{ Environment: 'dev', Tier: 'hot', Tenant: 'web' }, 'a superset'],
    [{ Environment: 'dev', Region: 'x' }, 'an unknown dimension'],
  ])('rejects %j (%s) with VALIDATION_FAILED', (dims) => {
    expect(() => metricPoint(METRICS.costPerHour, dims, 1)).toThrow(ValidationError);
    try {
      metricPoint(METRICS.costPerHour, dims, 1);
    } catch (e) {
      expect((e as ValidationError).code).toBe('VALIDATION_FAILED');
    }
  });

  it('rejects non-finite values and empty dimension values', () => {
    expect(() => metricPoint(METRICS.totalCostPerHour, { Environment: 'dev' }, Number.POSITIVE_INFINITY)).toThrow(ValidationError);
    expect(() => metricPoint(METRICS.totalCostPerHour, { Environment: '' }, 1)).toThrow(ValidationError);
  });
});

describe('publishPoints', () => {
  it('sends one namespace per call, at most 1,000 points a call, with the catalog units', async () => {
    const sink = new InMemoryMetrics();
    const at = new Date('2026-11-10T12:00:00Z');
    const fills = Array.from({ length: 2500 }, (_, i) => metricPoint(METRICS.nodeFill, { Environment: 'dev', Node: `n${i}` }, i % 100));
    const result = await publishPoints(sink, [metricPoint(METRICS.totalCostPerHour, { Environment: 'dev' }, 1), ...fills], at);
    expect(result).toEqual({ calls: 4, points: { [METRIC_NAMESPACES.cost]: 1, [METRIC_NAMESPACES.fleet]: 2500 } });
    expect(sink.calls).toEqual([{ namespace: 'Strata/Cost', count: 1 }, { namespace: 'Strata/Fleet', count: MAX_DATA_PER_CALL }, { namespace: 'Strata/Fleet', count: MAX_DATA_PER_CALL }, { namespace: 'Strata/Fleet', count: 500 }]);
    expect(sink.data.every((d) => d.at === at)).toBe(true);
  });
});

describe('readFleetState', () => {
  const ring = (): RingDocument => {
    const doc = initialRing([{ id: 'a', url: 'http://a:1' }, { id: 'b', url: 'http://b:1' }, { id: 'c', url: 'http://c:1' }], 2);
    doc.version = 5;
    doc.ranges[0]!.pending = { target: 'b', session: 's1' };
    doc.ranges[3]!.pending = { target: 'b', session: 's1' };
    doc.ranges[4]!.pending = { target: 'a', session: 's2', phase: 'handoff' };
    return doc;
  };

  it('counts nodes, distinct pending sessions, and each node\'s fill in percent', async () => {
    const fills: Record<string, number> = { 'http://a:1': 0.5, 'http://b:1': 0.875, 'http://c:1': 0.1 };
    const s = await readFleetState({ ring: async () => ring(), nodeStats: async (url) => ({ fill: fills[url]! }) });
    expect(s).toMatchObject({ ringVersion: 5, nodes: 3, maxFillPercent: 87.5, migrationsInProgress: 2, unreachable: [] });
    expect(s.fills).toEqual([{ node: 'a', percent: 50 }, { node: 'b', percent: 87.5 }, { node: 'c', percent: 10 }]);
  });

  it('reports a node that does not answer and takes the maximum over those that did; unknown when none did', async () => {
    const one = await readFleetState({ ring: async () => ring(), nodeStats: async (url) => { if (url !== 'http://c:1') throw new Error('connect ECONNREFUSED'); return { fill: 0.3 }; } });
    expect(one.maxFillPercent).toBeCloseTo(30, 12);
    expect(one.unreachable).toEqual([{ node: 'a', error: 'connect ECONNREFUSED' }, { node: 'b', error: 'connect ECONNREFUSED' }]);
    const none = await readFleetState({ ring: async () => ring(), nodeStats: async () => { throw new Error('down'); } });
    expect(none.maxFillPercent).toBeUndefined();
  });

  it('is an empty fleet without a ring', async () => {
    expect(await readFleetState(noRing)).toEqual({ ringVersion: null, nodes: 0, fills: [], maxFillPercent: 0, migrationsInProgress: 0, unreachable: [] });
  });
});

describe('collectUsage', () => {
  const window = { start: new Date('2026-11-10T11:00:00Z'), end: new Date('2026-11-10T12:00:00Z') };
  const inWindow = new Date('2026-11-10T11:30:00Z');
  const targets: UsageTargets = {
    environment: 'dev',
    namespaces: ['pages', 'reports'],
    hot: { cacheName: 'strata-dev', dimension: 'clusterId' },
    cold: { bucket: 'tier', prefix: 'v1', maxListedObjects: 10 },
    apiName: 'strata-dev',
    functions: [{ name: 'keys', memoryMb: 2048, tier: 'api' }],
  };

  function requests(m: InMemoryMetrics): void {
    const R = 'Strata/Requests';
    m.add(R, 'Hits', { Environment: 'dev', Namespace: 'pages', Tier: 'hot' }, 70, inWindow);
    m.add(R, 'Hits', { Environment: 'dev', Namespace: 'pages', Tier: 'cold' }, 5, inWindow);
    m.add(R, 'Hits', { Environment: 'dev', Namespace: 'pages', Tier: 'origin' }, 3, inWindow);
    m.add(R, 'Hits', { Environment: 'dev', Namespace: 'other', Tier: 'l1' }, 2, inWindow);
    m.add(R, 'Misses', { Environment: 'dev', Namespace: 'reports' }, 20, inWindow);
    m.add(R, 'BytesOut', { Environment: 'dev', Namespace: 'reports' }, 4000, inWindow);
    m.add(R, 'BytesIn', { Environment: 'dev', Namespace: 'pages' }, 1000, inWindow);
    m.add(R, 'Requests', { Environment: 'dev', Operation: 'put' }, 7, inWindow);
    m.add(R, 'Requests', { Environment: 'dev', Operation: 'delete' }, 1, inWindow);
    // Outside the window: not counted.
    m.add(R, 'Hits', { Environment: 'dev', Namespace: 'pages', Tier: 'hot' }, 1000, new Date('2026-11-10T10:59:00Z'));
    // Another environment: not counted.
    m.add(R, 'Hits', { Environment: 'prod', Namespace: 'pages', Tier: 'hot' }, 1000, inWindow);
  }

  it('sums per-namespace request metrics, counts hits in every tier (origin loads included), and estimates S3 requests without request metrics', async () => {
    const m = new InMemoryMetrics();
    requests(m);
    m.add('AWS/ElastiCache', 'BytesUsedForCache', { clusterId: 'strata-dev' }, 100, new Date('2026-11-10T11:10:00Z'));
    m.add('AWS/ElastiCache', 'BytesUsedForCache', { clusterId: 'strata-dev' }, 300, new Date('2026-11-10T11:20:00Z'));
    m.add('AWS/ElastiCache', 'ElastiCacheProcessingUnits', { clusterId: 'strata-dev' }, 1234, inWindow);
    m.add('AWS/ApiGateway', 'Count', { ApiName: 'strata-dev' }, 99, inWindow);
    m.add('AWS/Lambda', 'Invocations', { FunctionName: 'keys' }, 99, inWindow);
    m.add('AWS/Lambda', 'Duration', { FunctionName: 'keys' }, 5000, inWindow);
    const u = await collectUsage({ fleet: noFleet, objects: { list: async () => ({ bytes: 42, objects: 2, truncated: false }) }, metrics: m }, targets, window);

    expect(u.namespaces).toEqual([
      { namespace: 'pages', requests: 78, bytes: 1000 },
      { namespace: 'reports', requests: 20, bytes: 4000 },
      { namespace: 'other', requests: 2, bytes: 0 },
    ]);
    expect(u.hits).toBe(70 + 5 + 3 + 2);
    expect(u.hot).toEqual({ bytesUsed: 200, ecpus: 1234 });
    expect(u.apiRequests).toBe(99);
    expect(u.functions).toEqual([{ name: 'keys', memoryMb: 2048, tier: 'api', invocations: 99, gbSeconds: 5 * 2 }]);
    expect(u.cold).toEqual({ bytes: 42, objects: 2, storageSource: 'listing', truncated: false, ...toRequests(estimateS3Requests({ coldHits: 5, misses: 20, coldWrites: 8 })), requestSource: 'estimate' });
    expect(u.cold).toMatchObject({ getRequests: 25, putRequests: 8 });
  });

  it('prefers S3 storage and request metrics from CloudWatch when the bucket has them', async () => {
    const m = new InMemoryMetrics();
    requests(m);
    m.add('AWS/S3', 'BucketSizeBytes', { BucketName: 'tier', StorageType: 'StandardStorage' }, 5e9, new Date('2026-11-08T00:00:00Z'));
    m.add('AWS/S3', 'BucketSizeBytes', { BucketName: 'tier', StorageType: 'StandardStorage' }, 6e9, new Date('2026-11-09T00:00:00Z'));
    m.add('AWS/S3', 'NumberOfObjects', { BucketName: 'tier', StorageType: 'AllStorageTypes' }, 600, new Date('2026-11-09T00:00:00Z'));
    m.add('AWS/S3', 'GetRequests', { BucketName: 'tier', FilterId: 'all' }, 11, inWindow);
    m.add('AWS/S3', 'PutRequests', { BucketName: 'tier', FilterId: 'all' }, 3, inWindow);
    const listed: string[] = [];
    const u = await collectUsage({ fleet: noFleet, objects: { list: async (b) => { listed.push(b); return { bytes: 0, objects: 0, truncated: false }; } }, metrics: m }, { ...targets, cold: { ...targets.cold!, requestMetricsFilterId: 'all' } }, window);
    expect(u.cold).toEqual({ bytes: 6e9, objects: 600, storageSource: 'cloudwatch', truncated: false, getRequests: 11, putRequests: 3, requestSource: 'cloudwatch' });
    expect(listed).toEqual([]);
  });

  it('reads nothing for tiers the environment does not have', async () => {
    const m = new InMemoryMetrics();
    const u = await collectUsage({ fleet: noFleet, objects: noObjects, metrics: m }, { environment: 'dev', namespaces: [], functions: [] }, window);
    expect(u).toEqual({ window, fleet: { instances: [], volumes: [] }, apiRequests: 0, functions: [], hits: 0, namespaces: [{ namespace: 'other', requests: 0, bytes: 0 }] });
    expect(m.queried.flat().map((q) => q.namespace)).toEqual(Array(8).fill('Strata/Requests'));
  });
});

function toRequests(x: { get: number; put: number }): { getRequests: number; putRequests: number } {
  return { getRequests: x.get, putRequests: x.put };
}

describe('settings', () => {
  const minimal = { environment: 'dev', fleet: { tags: { 'strata:env': 'dev' } } };

  it('fills defaults', () => {
    expect(parseCostPublisherSettings(minimal)).toMatchObject({ catalogId: 'aws-2026-11', windowMinutes: 60, tenants: [], functions: [], monitoring: { dashboards: 0, alarmMetrics: 0, runsPerHour: 4 } });
  });

  it.each([
    ['', 'is not set'],
    ['{nope', 'is not valid JSON'],
    [JSON.stringify({ ...minimal, fleet: { tags: {} } }), 'fleet.tags: give at least one tag'],
    [JSON.stringify({ ...minimal, functions: [{ name: 'f', memoryMb: 64, tier: 'api' }] }), 'functions.0.memoryMb'],
    [JSON.stringify({ ...minimal, functions: [{ name: 'f', memoryMb: 256, tier: 'edge' }] }), 'functions.0.tier'],
    [JSON.stringify({ ...minimal, surprise: 1 }), 'surprise'],
  ])('rejects %s with a ValidationError naming the problem', (text, message) => {
    expect(() => costPublisherSettingsFromJson(text)).toThrow(ValidationError);
    expect(() => costPublisherSettingsFromJson(text)).toThrow(message);
  });
});

describe('runCostPublisher', () => {
  it('publishes every Strata/Cost and Strata/Fleet metric, and the month projection from the published history', async () => {
    const m = new InMemoryMetrics();
    const at = new Date('2026-11-30T21:40:00Z');
    // Two earlier hours of this month's published rate (and one of last month, which does not count).
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 1, new Date('2026-11-30T19:10:00Z'));
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 3, new Date('2026-11-30T19:40:00Z'));
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 5, new Date('2026-11-30T20:20:00Z'));
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 50, new Date('2026-10-31T20:20:00Z'));
    m.add('Strata/Requests', 'Hits', { Environment: 'dev', Namespace: 'pages', Tier: 'hot' }, 4000, new Date('2026-11-30T21:00:00Z'));
    const deps: CostPublisherDeps = {
      fleet: { instances: async () => [{ id: 'i-1', type: 't4g.small', state: 'running' }], volumes: async () => [{ id: 'v-1', type: 'gp3', sizeGiB: 20, iops: 3000, throughputMiBps: 125 }] },
      objects: noObjects,
      metrics: m,
      fleetState: { ring: async () => initialRing([{ id: 'n1', url: 'http://n1:1' }]), nodeStats: async () => ({ fill: 0.42 }) },
      sink: m,
    };
    const settings = parseCostPublisherSettings({ environment: 'dev', region: 'us-east-1', fleet: { tags: { 'strata:env': 'dev' } }, tenants: [{ name: 'web', namespaces: ['pages'] }] });
    const report = await runCostPublisher(deps, settings, at);

    const published = (name: string, dims: Record<string, string>) => m.data.filter((d) => d.at === at && d.name === name && sameDims(d.dims, dims)).map((d) => d.value);
    const rate = report.costPerHour.total;
    expect(rate).toBeGreaterThan(0);
    expect(published('TotalCostPerHour', { Environment: 'dev' })).toEqual([rate]);
    expect(published('CostPerHour', { Environment: 'dev', Tier: 'warm' })).toEqual([report.costPerHour.tiers.warm]);
    expect(published('CostPerHour', { Environment: 'dev', Tenant: 'web' })[0]).toBeCloseTo(rate, 12);
    // Month-to-date: hour 19 averaged 2, hour 20 averaged 5; 21:00 to midnight is 3 hours at the current rate.
    expect(report.projection).toEqual({ monthToDate: 7, hoursLeft: 3, projected: 7 + 3 * rate });
    expect(published('ProjectedMonthlyCost', { Environment: 'dev' })).toEqual([7 + 3 * rate]);
    expect(published('CostPer1000Hits', { Environment: 'dev' })).toEqual([rate / 4]);
    expect(published('Nodes', { Environment: 'dev' })).toEqual([1]);
    expect(published('NodeFillPercent', { Environment: 'dev', Node: 'n1' })).toEqual([42]);
    expect(published('MaxNodeFillPercent', { Environment: 'dev' })).toEqual([42]);
    expect(published('MigrationsInProgress', { Environment: 'dev' })).toEqual([0]);
    expect(report.published.calls).toBe(2);

    // Every Strata/Cost and Strata/Fleet metric a dashboard draws is among what the run published.
    const names = new Set(m.data.filter((d) => d.at === at).map((d) => d.name));
    for (const key of [...referencedMetricKeys(DASHBOARDS, 'Strata/Cost'), ...referencedMetricKeys(DASHBOARDS, 'Strata/Fleet')]) expect(names).toContain(METRICS[key].name);
  });

  it('publishes no CostPer1000Hits without hits, and no MaxNodeFillPercent when no node answered', () => {
    const cost = priceLiveUsage({ window: { start: new Date(0), end: new Date(3_600_000) }, fleet: { instances: [], volumes: [] }, apiRequests: 0, functions: [], hits: 0, namespaces: [] }, priceBook(), { tenants: [], monitoring: { customMetrics: 1, dashboards: 0, alarmMetrics: 0, putMetricDataCallsPerHour: 0, getMetricDataMetricsPerHour: 0 } });
    const points = costAndFleetPoints('dev', cost, { monthToDate: 0, hoursLeft: 1, projected: cost.total }, undefined, { ringVersion: 3, nodes: 2, fills: [], maxFillPercent: undefined, migrationsInProgress: 0, unreachable: [{ node: 'a', error: 'x' }, { node: 'b', error: 'x' }] });
    const names = points.map((p) => p.def.name);
    expect(names).not.toContain('CostPer1000Hits');
    expect(names).not.toContain('MaxNodeFillPercent');
    expect(names).toEqual(expect.arrayContaining(['CostPerHour', 'TotalCostPerHour', 'ProjectedMonthlyCost', 'Nodes', 'MigrationsInProgress']));
  });
});
