import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MetricDatum } from '@aws-sdk/client-cloudwatch';
import { DASHBOARDS, referencedMetricKeys } from '../../dashboards/index.js';
import { costPublisherSettingsFromJson, parseCostPublisherSettings } from '../../core/cost/publisher/settings.js';
import { costAndFleetPoints, runCostPublisher, type CostPublisherDeps } from '../../core/cost/publisher/publish-cost.js';
import { readFleetState, ringStoreFleetSource, type FleetStateSource } from '../../core/cost/publisher/fleet-state.js';
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { priceLiveUsage } from '../../core/cost/model/live-cost.js';
import { MAX_DATA_PER_CALL, metricPoint, publishPoints, type MetricSink } from '../../core/cost/publisher/metric-writer.js';
import {
  collectUsage,
  estimateS3Requests,
  type FleetReader,
  type MetricQuery,
  type MetricSource,
  type MetricValue,
  type ObjectStoreReader,
  type UsageTargets,
} from '../../core/cost/publisher/usage-reader.js';
import { type TimeWindow } from '../../core/cost/model/usage.js';
import { ValidationError } from '../../core/errors.js';
import { METRIC_NAMESPACES, METRICS } from '../../core/metrics/metric-catalog.js';
import { initialRing, type RingDocument } from '../../core/ring/document.js';
import { MAX_TRUSTED_INTERVAL_MS } from '../../core/ring/node-report-reader.js';
import { nodeStatsKey, SILENT_AFTER_INTERVALS } from '../../core/ring/node-reports.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';

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
    for (const d of data)
      this.add(
        namespace,
        d.MetricName!,
        Object.fromEntries((d.Dimensions ?? []).map((x) => [x.Name!, x.Value!])),
        d.Value!,
        d.Timestamp as Date,
      );
  }

  async query(queries: readonly MetricQuery[], range: TimeWindow): Promise<ReadonlyMap<string, readonly MetricValue[]>> {
    this.queried.push([...queries]);
    const out = new Map<string, MetricValue[]>();
    for (const q of queries) {
      const buckets = new Map<number, number[]>();
      for (const d of this.data) {
        if (d.namespace !== q.namespace || d.name !== q.metricName || !sameDims(d.dims, q.dimensions)) continue;
        if (d.at < range.start || d.at >= range.end) continue;
        const b =
          range.start.getTime() +
          Math.floor((d.at.getTime() - range.start.getTime()) / (q.periodSeconds * 1000)) * q.periodSeconds * 1000;
        buckets.set(b, [...(buckets.get(b) ?? []), d.value]);
      }
      out.set(
        q.id,
        [...buckets].map(([t, vs]) => ({
          timestamp: new Date(t),
          value:
            q.stat === 'Sum'
              ? vs.reduce((a, b) => a + b, 0)
              : q.stat === 'Maximum'
                ? Math.max(...vs)
                : vs.reduce((a, b) => a + b, 0) / vs.length,
        })),
      );
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
const noRing: FleetStateSource = { ring: async () => undefined, nodeReport: async () => undefined };

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
    expect(() => metricPoint(METRICS.totalCostPerHour, { Environment: 'dev' }, Number.POSITIVE_INFINITY)).toThrow(
      ValidationError,
    );
    expect(() => metricPoint(METRICS.totalCostPerHour, { Environment: '' }, 1)).toThrow(ValidationError);
  });
});

describe('publishPoints', () => {
  it('sends one namespace per call, at most 1,000 points a call, with the catalog units', async () => {
    const sink = new InMemoryMetrics();
    const at = new Date('2026-11-10T12:00:00Z');
    const fills = Array.from({ length: 2500 }, (_, i) =>
      metricPoint(METRICS.nodeFill, { Environment: 'dev', Node: `n${i}` }, i % 100),
    );
    const result = await publishPoints(sink, [metricPoint(METRICS.totalCostPerHour, { Environment: 'dev' }, 1), ...fills], at);
    expect(result).toEqual({ calls: 4, points: { [METRIC_NAMESPACES.cost]: 1, [METRIC_NAMESPACES.fleet]: 2500 } });
    expect(sink.calls).toEqual([
      { namespace: 'Strata/Cost', count: 1 },
      { namespace: 'Strata/Fleet', count: MAX_DATA_PER_CALL },
      { namespace: 'Strata/Fleet', count: MAX_DATA_PER_CALL },
      { namespace: 'Strata/Fleet', count: 500 },
    ]);
    expect(sink.data.every((d) => d.at === at)).toBe(true);
  });
});

describe("readFleetState (from the nodes' reports in a real ring store)", () => {
  const NOW = Date.parse('2026-11-10T12:00:00Z');
  const INTERVAL = 30_000;
  let dir: string;
  let cas: FileCasStore;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'strata-fleet-'));
    cas = new FileCasStore(dir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const ring = (): RingDocument => {
    const doc = initialRing(
      [
        { id: 'a', url: 'http://a:1' },
        { id: 'b', url: 'http://b:1' },
        { id: 'c', url: 'http://c:1' },
      ],
      2,
    );
    doc.version = 5;
    doc.ranges[0]!.pending = { target: 'b', session: 's1' };
    doc.ranges[3]!.pending = { target: 'b', session: 's1' };
    doc.ranges[4]!.pending = { target: 'a', session: 's2', phase: 'handoff' };
    return doc;
  };
  /** Writes node `id`'s report as the node does (its key, its shape), `ageMs` old by the publisher's clock. */
  async function report(id: string, fill: number, ageMs = 1000, o: { intervalMs?: number; prefix?: string } = {}): Promise<void> {
    const stats = { nodeId: id, keys: 10, bytes: 100, capacityBytes: 1000, fill };
    const body = { nodeId: id, at: NOW - ageMs, intervalMs: o.intervalMs ?? INTERVAL, stats };
    await cas.put(nodeStatsKey(`${o.prefix ?? ''}${id}`), JSON.stringify(body), null);
  }
  const read = (o: { reportIdPrefix?: string } = {}) => readFleetState(ringStoreFleetSource(cas, { now: () => NOW, ...o }));

  it("counts nodes, distinct pending sessions, and each reporting node's fill in percent", async () => {
    await new RingStore(cas).create(ring());
    await report('a', 0.5);
    await report('b', 0.875);
    await report('c', 0.1);
    const s = await read();
    expect(s).toMatchObject({ ringVersion: 5, nodes: 3, maxFillPercent: 87.5, migrationsInProgress: 2, silent: [] });
    expect(s.fills).toEqual([
      { node: 'a', percent: 50 },
      { node: 'b', percent: 87.5 },
      { node: 'c', percent: 10 },
    ]);
  });

  it('counts a node silent when its report is missing or older than SILENT_AFTER_INTERVALS intervals, and drops its fill', async () => {
    await new RingStore(cas).create(ring());
    await report('a', 0.3, SILENT_AFTER_INTERVALS * INTERVAL); // exactly at the bound: still fresh
    await report('b', 0.9, SILENT_AFTER_INTERVALS * INTERVAL + 1);
    const s = await read();
    expect(s.fills).toEqual([{ node: 'a', percent: 30 }]);
    expect(s.maxFillPercent).toBe(30);
    expect(s.silent.map((x) => x.node)).toEqual(['b', 'c']);
    expect(s.silent[0]!.reason).toMatch(/old \(silent after 90 s\)/);
    expect(s.silent[1]!.reason).toBe('no stats report in the ring store');
  });

  it("takes the staleness bound from each node's own interval, up to a ceiling a broken node cannot raise", async () => {
    await new RingStore(cas).create(ring());
    await report('a', 0.1, 4 * 60_000, { intervalMs: 120_000 }); // 4 min old, 6 min allowed
    await report('b', 0.1, 4 * 60_000); // 4 min old, 90 s allowed
    await report('c', 0.1, 2 * 3600_000, { intervalMs: 24 * 3600_000 }); // claims a day-long interval
    const s = await read();
    expect(s.fills.map((f) => f.node)).toEqual(['a']);
    expect(s.silent.map((x) => x.node)).toEqual(['b', 'c']);
    expect(2 * 3600_000).toBeGreaterThan(SILENT_AFTER_INTERVALS * MAX_TRUSTED_INTERVAL_MS);
  });

  it("tolerates a node clock ahead of the publisher's up to the staleness bound, and counts a clock further ahead as silent", async () => {
    await new RingStore(cas).create(ring());
    await report('a', 0.2, -20_000); // dated 20 s in the future: skew, not silence
    await report('b', 0.2, -(SILENT_AFTER_INTERVALS * INTERVAL + 1000)); // would stay "fresh" long after the node died
    await report('c', 0.2);
    const s = await read();
    expect(s.fills.map((f) => f.node)).toEqual(['a', 'c']);
    expect(s.silent).toEqual([
      { node: 'b', reason: expect.stringMatching(/ahead of this reader's clock.*the node's clock is wrong/) },
    ]);
  });

  it('counts an unreadable, malformed, misaddressed or fill-less report as silent', async () => {
    await new RingStore(cas).create(ring());
    await cas.put(nodeStatsKey('a'), '{not json', null);
    await cas.put(nodeStatsKey('b'), JSON.stringify({ nodeId: 'c', at: NOW, intervalMs: INTERVAL, stats: { fill: 0.1 } }), null);
    await cas.put(nodeStatsKey('c'), JSON.stringify({ nodeId: 'c', at: NOW, intervalMs: INTERVAL, stats: { keys: 1 } }), null);
    const s = await read();
    expect(s.maxFillPercent).toBeUndefined();
    expect(s.silent).toEqual([
      { node: 'a', reason: expect.stringMatching(/^stats report unreadable: .*JSON/) },
      { node: 'b', reason: "the stats report names node 'c'" },
      { node: 'c', reason: 'stats report has no usable fill (undefined)' },
    ]);
  });

  it("reads each report under the report id prefix (the fleet role's id on EC2)", async () => {
    await new RingStore(cas).create(ring());
    for (const id of ['a', 'b', 'c']) await report(id, 0.25, 1000, { prefix: 'AROAEXAMPLE:' });
    expect((await read({ reportIdPrefix: 'AROAEXAMPLE:' })).fills).toHaveLength(3);
    expect((await read()).silent).toHaveLength(3);
  });

  it('is an empty fleet without a ring', async () => {
    expect(await read()).toEqual({
      ringVersion: null,
      nodes: 0,
      fills: [],
      maxFillPercent: 0,
      migrationsInProgress: 0,
      silent: [],
    });
    const empty = { ringVersion: null, nodes: 0, fills: [], maxFillPercent: 0, migrationsInProgress: 0, silent: [] };
    expect(await readFleetState(noRing)).toEqual(empty);
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
    const u = await collectUsage(
      { fleet: noFleet, objects: { list: async () => ({ bytes: 42, objects: 2, truncated: false }) }, metrics: m },
      targets,
      window,
    );

    expect(u.namespaces).toEqual([
      { namespace: 'pages', requests: 78, bytes: 1000 },
      { namespace: 'reports', requests: 20, bytes: 4000 },
      { namespace: 'other', requests: 2, bytes: 0 },
    ]);
    expect(u.hits).toBe(70 + 5 + 3 + 2);
    expect(u.hot).toEqual({ bytesUsed: 200, ecpus: 1234 });
    expect(u.apiRequests).toBe(99);
    expect(u.functions).toEqual([{ name: 'keys', memoryMb: 2048, tier: 'api', invocations: 99, gbSeconds: 5 * 2 }]);
    expect(u.cold).toEqual({
      bytes: 42,
      objects: 2,
      storageSource: 'listing',
      truncated: false,
      ...toRequests(estimateS3Requests({ coldHits: 5, misses: 20, coldWrites: 8 })),
      requestSource: 'estimate',
    });
    expect(u.cold).toMatchObject({ getRequests: 25, putRequests: 8 });
  });

  it('prefers S3 storage and request metrics from CloudWatch when the bucket has them', async () => {
    const m = new InMemoryMetrics();
    requests(m);
    m.add(
      'AWS/S3',
      'BucketSizeBytes',
      { BucketName: 'tier', StorageType: 'StandardStorage' },
      5e9,
      new Date('2026-11-08T00:00:00Z'),
    );
    m.add(
      'AWS/S3',
      'BucketSizeBytes',
      { BucketName: 'tier', StorageType: 'StandardStorage' },
      6e9,
      new Date('2026-11-09T00:00:00Z'),
    );
    m.add(
      'AWS/S3',
      'NumberOfObjects',
      { BucketName: 'tier', StorageType: 'AllStorageTypes' },
      600,
      new Date('2026-11-09T00:00:00Z'),
    );
    m.add('AWS/S3', 'GetRequests', { BucketName: 'tier', FilterId: 'all' }, 11, inWindow);
    m.add('AWS/S3', 'PutRequests', { BucketName: 'tier', FilterId: 'all' }, 3, inWindow);
    const listed: string[] = [];
    const u = await collectUsage(
      {
        fleet: noFleet,
        objects: {
          list: async (b) => {
            listed.push(b);
            return { bytes: 0, objects: 0, truncated: false };
          },
        },
        metrics: m,
      },
      { ...targets, cold: { ...targets.cold!, requestMetricsFilterId: 'all' } },
      window,
    );
    expect(u.cold).toEqual({
      bytes: 6e9,
      objects: 600,
      storageSource: 'cloudwatch',
      truncated: false,
      getRequests: 11,
      putRequests: 3,
      requestSource: 'cloudwatch',
    });
    expect(listed).toEqual([]);
  });

  it('reads nothing for tiers the environment does not have', async () => {
    const m = new InMemoryMetrics();
    const u = await collectUsage(
      { fleet: noFleet, objects: noObjects, metrics: m },
      { environment: 'dev', namespaces: [], functions: [] },
      window,
    );
    expect(u).toEqual({
      window,
      fleet: { instances: [], volumes: [] },
      apiRequests: 0,
      functions: [],
      hits: 0,
      namespaces: [{ namespace: 'other', requests: 0, bytes: 0 }],
    });
    expect(m.queried.flat().map((q) => q.namespace)).toEqual(Array(8).fill('Strata/Requests'));
  });
});

function toRequests(x: { get: number; put: number }): { getRequests: number; putRequests: number } {
  return { getRequests: x.get, putRequests: x.put };
}

describe('settings', () => {
  const minimal = { environment: 'dev', fleet: { tags: { 'strata:env': 'dev' } } };

  it('fills defaults', () => {
    expect(parseCostPublisherSettings(minimal)).toMatchObject({
      catalogId: 'aws-2026-11',
      windowMinutes: 60,
      tenants: [],
      functions: [],
      monitoring: { dashboards: 0, alarmMetrics: 0, runsPerHour: 4 },
    });
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
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'strata-publisher-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('publishes every Strata/Cost and Strata/Fleet metric, and the month projection from the published history', async () => {
    const m = new InMemoryMetrics();
    const at = new Date('2026-11-30T21:40:00Z');
    // The fleet in a ring store: n1 reported 5 s ago, n2 never did.
    const cas = new FileCasStore(dir);
    await new RingStore(cas).create(
      initialRing([
        { id: 'n1', url: 'http://n1:1' },
        { id: 'n2', url: 'http://n2:1' },
      ]),
    );
    const n1 = { nodeId: 'n1', at: at.getTime() - 5000, intervalMs: 30_000, stats: { fill: 0.42 } };
    await cas.put(nodeStatsKey('n1'), JSON.stringify(n1), null);
    // Two earlier hours of this month's published rate (and one of last month, which does not count).
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 1, new Date('2026-11-30T19:10:00Z'));
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 3, new Date('2026-11-30T19:40:00Z'));
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 5, new Date('2026-11-30T20:20:00Z'));
    m.add('Strata/Cost', 'TotalCostPerHour', { Environment: 'dev' }, 50, new Date('2026-10-31T20:20:00Z'));
    m.add(
      'Strata/Requests',
      'Hits',
      { Environment: 'dev', Namespace: 'pages', Tier: 'hot' },
      4000,
      new Date('2026-11-30T21:00:00Z'),
    );
    const deps: CostPublisherDeps = {
      fleet: {
        instances: async () => [{ id: 'i-1', type: 't4g.small', state: 'running' }],
        volumes: async () => [{ id: 'v-1', type: 'gp3', sizeGiB: 20, iops: 3000, throughputMiBps: 125 }],
      },
      objects: noObjects,
      metrics: m,
      fleetState: ringStoreFleetSource(cas, { now: () => at.getTime() }),
      sink: m,
    };
    const settings = parseCostPublisherSettings({
      environment: 'dev',
      region: 'us-east-1',
      fleet: { tags: { 'strata:env': 'dev' } },
      tenants: [{ name: 'web', namespaces: ['pages'] }],
    });
    const report = await runCostPublisher(deps, settings, at);

    const published = (name: string, dims: Record<string, string>) =>
      m.data.filter((d) => d.at === at && d.name === name && sameDims(d.dims, dims)).map((d) => d.value);
    const rate = report.costPerHour.total;
    expect(rate).toBeGreaterThan(0);
    expect(published('TotalCostPerHour', { Environment: 'dev' })).toEqual([rate]);
    expect(published('CostPerHour', { Environment: 'dev', Tier: 'warm' })).toEqual([report.costPerHour.tiers.warm]);
    expect(published('CostPerHour', { Environment: 'dev', Tenant: 'web' })[0]).toBeCloseTo(rate, 12);
    // Month-to-date: hour 19 averaged 2, hour 20 averaged 5; 21:00 to midnight is 3 hours at the current rate.
    expect(report.projection).toEqual({ monthToDate: 7, hoursLeft: 3, projected: 7 + 3 * rate });
    expect(published('ProjectedMonthlyCost', { Environment: 'dev' })).toEqual([7 + 3 * rate]);
    expect(published('CostPer1000Hits', { Environment: 'dev' })).toEqual([rate / 4]);
    expect(published('Nodes', { Environment: 'dev' })).toEqual([2]);
    expect(published('NodeFillPercent', { Environment: 'dev', Node: 'n1' })).toEqual([42]);
    expect(published('NodeFillPercent', { Environment: 'dev', Node: 'n2' })).toEqual([]);
    expect(published('MaxNodeFillPercent', { Environment: 'dev' })).toEqual([42]);
    expect(published('MigrationsInProgress', { Environment: 'dev' })).toEqual([0]);
    expect(published('SilentNodes', { Environment: 'dev' })).toEqual([1]);
    expect(report.fleet.silent).toEqual([{ node: 'n2', reason: 'no stats report in the ring store' }]);
    expect(report.published.calls).toBe(2);

    // Every Strata/Cost and Strata/Fleet metric a dashboard draws is among what the run published.
    const names = new Set(m.data.filter((d) => d.at === at).map((d) => d.name));
    for (const key of [...referencedMetricKeys(DASHBOARDS, 'Strata/Cost'), ...referencedMetricKeys(DASHBOARDS, 'Strata/Fleet')])
      expect(names).toContain(METRICS[key].name);
  });

  it('publishes no CostPer1000Hits without hits, and no MaxNodeFillPercent but SilentNodes when no node reported', () => {
    const cost = priceLiveUsage(
      {
        window: { start: new Date(0), end: new Date(3_600_000) },
        fleet: { instances: [], volumes: [] },
        apiRequests: 0,
        functions: [],
        hits: 0,
        namespaces: [],
      },
      priceBook(),
      {
        tenants: [],
        monitoring: {
          customMetrics: 1,
          dashboards: 0,
          alarmMetrics: 0,
          putMetricDataCallsPerHour: 0,
          getMetricDataMetricsPerHour: 0,
        },
      },
    );
    const silent = [
      { node: 'a', reason: 'x' },
      { node: 'b', reason: 'x' },
    ];
    const fleet = { ringVersion: 3, nodes: 2, fills: [], maxFillPercent: undefined, migrationsInProgress: 0, silent };
    const points = costAndFleetPoints('dev', cost, { monthToDate: 0, hoursLeft: 1, projected: cost.total }, undefined, fleet);
    const names = points.map((p) => p.def.name);
    expect(names).not.toContain('CostPer1000Hits');
    expect(names).not.toContain('MaxNodeFillPercent');
    expect(names).toEqual(
      expect.arrayContaining(['CostPerHour', 'TotalCostPerHour', 'ProjectedMonthlyCost', 'Nodes', 'MigrationsInProgress']),
    );
    expect(names).toContain('SilentNodes');
    expect(points.find((p) => p.def === METRICS.silentNodes)!.value).toBe(2);
  });
});
