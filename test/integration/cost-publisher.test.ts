import { CloudWatchClient, GetMetricDataCommand, PutMetricDataCommand, type MetricDatum } from '@aws-sdk/client-cloudwatch';
import {
  CreateLaunchTemplateCommand,
  CreateVolumeCommand,
  DeleteLaunchTemplateCommand,
  DeleteVolumeCommand,
  DescribeInstancesCommand,
  EC2Client,
  RunInstancesCommand,
  StopInstancesCommand,
  TerminateInstancesCommand,
  type _InstanceType,
} from '@aws-sdk/client-ec2';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { Context } from 'aws-lambda';
import { handler } from '../../lambdas/ops/cost-publisher.js';
import { aws202611Catalog } from '../../core/cost/model/catalogs/aws-2026-11.js';
import { costPublisherFromEnv } from '../../core/composition/cost-publisher-lambda.js';
import { runCostPublisher, type CostPublisherReport } from '../../core/cost/publisher/publish-cost.js';
import { initialRing } from '../../core/ring/document.js';
import { nodeStatsKey, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { RingStore, S3CasStore, type CasStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';
import { entry, localFleet, SECRET } from './warm-fixtures.js';

/**
 * The cost publisher's handler against LocalStack (EC2, S3, CloudWatch) and two real cache-node processes: the
 * test creates tagged instances and volumes, objects in the cold-tier bucket, a ring document in S3 with a
 * migration in progress, each node's statistics report in the ring store (from the node's own /stats, under the
 * fleet's report id prefix, as the node writes it on EC2), and the CloudWatch datapoints the AWS services and
 * Strata's request recorder would have published over the last hour; runs the handler (with no fleet secret: it
 * never calls a node); then reads Strata/Cost and Strata/Fleet back from CloudWatch and compares them with the
 * cost model computed here, by hand, from the catalog's prices.
 *
 * ElastiCache is not in LocalStack's community edition: the AWS/ElastiCache datapoints put here stand in for the
 * ones a serverless cache publishes (the publisher only ever reads them through CloudWatch).
 */

const P = aws202611Catalog.regions['us-east-1']!;
const H = aws202611Catalog.hoursPerMonth;
const GiB = 1024 ** 3;
const HOUR = 3_600_000;

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
/** What precedes a node's id in its report's key on EC2 (CacheNodeFleet.statsReportIdPrefix: the fleet role's id). */
const REPORT_ID_PREFIX = 'AROATESTFLEETROLE:';
const perRequest = (n: number, price: { usd: number; per: number }) => (n * price.usd) / price.per;

describe('cost publisher (LocalStack EC2, S3, CloudWatch; real cache nodes)', () => {
  const env = uniqueName('cost');
  const bucket = uniqueName('strata-cold');
  const fleet = localFleet({ capacityBytes: 2_000_000 });
  const tags = [
    { Key: 'strata:env', Value: env },
    { Key: 'strata:role', Value: 'cachenode' },
  ];
  let ec2: EC2Client;
  let s3: S3Client;
  let cw: CloudWatchClient;
  let templateId: string;
  const instanceIds: string[] = [];
  const volumeIds: string[] = [];
  const saved: Record<string, string | undefined> = {};
  let now: Date;
  let urls: Record<string, string>;
  let ringCas: CasStore;

  /** Writes node `id`'s report as its stats reporter does; `at` on the node's clock. */
  async function writeReport(id: string, stats: Record<string, unknown>, at = Date.now()): Promise<void> {
    const key = nodeStatsKey(REPORT_ID_PREFIX + id);
    const body: NodeStatsReport = { nodeId: id, at, intervalMs: 30_000, stats };
    await ringCas.put(key, JSON.stringify(body), (await ringCas.get(key))?.etag ?? null);
  }

  // What the test puts in, from which it computes what the publisher should report.
  const objectSizes = [1000, 250_000, 4096, 777];
  const hits = {
    pages: { hot: 600, l1: 300, cold: 40, origin: 10 },
    reports: { warm: 200, cold: 50 },
    other: { hot: 5 },
  } as const;
  const misses = { pages: 30, reports: 20 };
  const bytes = {
    pages: { in: 2_000_000, out: 6_000_000 },
    reports: { in: 1_000_000, out: 31_000_000 },
    other: { in: 0, out: 1000 },
  };
  const writes = { put: 120, delete: 8 };
  const apiCount = 1_285;
  const lambda = { invocations: 1_285, durationMs: 64_250 };
  const ecpus = 3_000_000;

  function put(namespace: string, data: MetricDatum[]): Promise<unknown> {
    return cw.send(new PutMetricDataCommand({ Namespace: namespace, MetricData: data }));
  }

  async function waitRunning(ids: string[]): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await ec2.send(new DescribeInstancesCommand({ InstanceIds: ids }));
      const states = (res.Reservations ?? []).flatMap((r) => r.Instances ?? []).map((i) => i.State?.Name);
      if (states.every((s) => s === 'running')) return;
      if (Date.now() > deadline) throw new Error(`instances not running: ${states.join(', ')}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function runInstances(type: string, count: number, withTags: boolean): Promise<string[]> {
    const res = await ec2.send(
      new RunInstancesCommand({
        MinCount: count,
        MaxCount: count,
        LaunchTemplate: { LaunchTemplateId: templateId },
        InstanceType: type as _InstanceType,
        ...(withTags ? { TagSpecifications: [{ ResourceType: 'instance', Tags: tags }] } : {}),
      }),
    );
    const ids = (res.Instances ?? []).map((i) => i.InstanceId!);
    instanceIds.push(...ids);
    return ids;
  }

  beforeAll(async () => {
    const endpoint = testS3Endpoint();
    ec2 = new EC2Client({ endpoint, region: 'us-east-1', credentials });
    s3 = new S3Client({ endpoint, region: 'us-east-1', credentials, forcePathStyle: true });
    cw = new CloudWatchClient({ endpoint, region: 'us-east-1', credentials });
    now = new Date();

    // Warm tier, EC2 side: two running t4g.small nodes, one stopped r7g.large node, an untagged instance
    // (not Strata's), a 20 GiB baseline gp3 volume and a 100 GiB one with 4,000 IOPS and 200 MiB/s.
    const lt = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: uniqueName('strata-cost'),
        LaunchTemplateData: { ImageId: 'ami-12345678' },
      }),
    );
    templateId = lt.LaunchTemplate!.LaunchTemplateId!;
    const running = await runInstances('t4g.small', 2, true);
    const stopped = await runInstances('r7g.large', 1, true);
    await runInstances('t4g.medium', 1, false);
    await waitRunning([...running, ...stopped]);
    await ec2.send(new StopInstancesCommand({ InstanceIds: stopped }));
    for (const v of [{ Size: 20 }, { Size: 100, Iops: 4000, Throughput: 200 }]) {
      const vol = await ec2.send(
        new CreateVolumeCommand({
          AvailabilityZone: 'us-east-1a',
          VolumeType: 'gp3',
          Encrypted: true,
          ...v,
          TagSpecifications: [{ ResourceType: 'volume', Tags: tags }],
        }),
      );
      volumeIds.push(vol.VolumeId!);
    }

    // Cold tier: objects under the tier's prefix, and one outside it.
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await Promise.all(
      objectSizes.map((n, i) =>
        s3.send(new PutObjectCommand({ Bucket: bucket, Key: `v1/pages/0${i}/key-${i}`, Body: Buffer.alloc(n, 1) })),
      ),
    );
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'elsewhere/not-the-tier', Body: Buffer.alloc(9999) }));

    // Warm tier, ring side: two real cache nodes, the ring in the bucket, some data, a migration in progress.
    const launched = await Promise.all(['n1', 'n2'].map((id) => fleet.launch(id)));
    urls = Object.fromEntries(launched.map((n) => [n.nodeId, n.url]));
    ringCas = new S3CasStore({ bucket, prefix: 'strata-ring', client: s3 });
    const store = new RingStore(ringCas);
    const ring = await store.create(
      initialRing(
        launched.map((n) => ({ id: n.nodeId, url: n.url })),
        2,
      ),
    );
    const admin = new NodeClient({ secret: SECRET });
    await Promise.all(Object.values(urls).map((u) => admin.pushRing(u, ring)));
    const warm = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET });
    await warm.putMany(
      'pages',
      Array.from({ length: 40 }, (_, i) => ({ key: `k${i}`, entry: entry(1, Buffer.alloc(5000 + i * 100, 7)) })),
    );
    await warm.close();
    // Each node's report, from its /stats after the writes (what its reporter would write next).
    for (const [id, url] of Object.entries(urls)) await writeReport(id, await admin.stats(url));
    await admin.close();
    await store.update((d) => {
      d.ranges[0]!.pending = { target: d.ranges[1]!.owner, session: 'session-a' };
    });

    // CloudWatch: what the AWS services and the request recorder would have published in the last hour.
    const t1 = new Date(now.getTime() - 20 * 60_000);
    const t2 = new Date(now.getTime() - 10 * 60_000);
    const cache = [{ Name: 'clusterId', Value: `strata-${env}` }];
    await put('AWS/ElastiCache', [
      { MetricName: 'BytesUsedForCache', Dimensions: cache, Value: 2 * GiB, Unit: 'Bytes', Timestamp: t1 },
      { MetricName: 'BytesUsedForCache', Dimensions: cache, Value: 4 * GiB, Unit: 'Bytes', Timestamp: t2 },
      { MetricName: 'ElastiCacheProcessingUnits', Dimensions: cache, Value: ecpus, Unit: 'Count', Timestamp: t2 },
    ]);
    await put('AWS/ApiGateway', [
      {
        MetricName: 'Count',
        Dimensions: [{ Name: 'ApiName', Value: `strata-${env}` }],
        Value: apiCount,
        Unit: 'Count',
        Timestamp: t2,
      },
    ]);
    const fn = [{ Name: 'FunctionName', Value: `${env}-keys` }];
    await put('AWS/Lambda', [
      { MetricName: 'Invocations', Dimensions: fn, Value: lambda.invocations, Unit: 'Count', Timestamp: t2 },
      {
        MetricName: 'Duration',
        Dimensions: fn,
        StatisticValues: { SampleCount: lambda.invocations, Sum: lambda.durationMs, Minimum: 20, Maximum: 120 },
        Unit: 'Milliseconds',
        Timestamp: t2,
      },
    ]);
    const E = { Name: 'Environment', Value: env };
    const requests: MetricDatum[] = [];
    for (const [ns, byTier] of Object.entries(hits)) {
      for (const [tier, n] of Object.entries(byTier))
        requests.push({
          MetricName: 'Hits',
          Dimensions: [E, { Name: 'Namespace', Value: ns }, { Name: 'Tier', Value: tier }],
          Value: n,
          Unit: 'Count',
          Timestamp: t2,
        });
    }
    for (const [ns, n] of Object.entries(misses))
      requests.push({
        MetricName: 'Misses',
        Dimensions: [E, { Name: 'Namespace', Value: ns }],
        Value: n,
        Unit: 'Count',
        Timestamp: t2,
      });
    for (const [ns, b] of Object.entries(bytes)) {
      requests.push({
        MetricName: 'BytesIn',
        Dimensions: [E, { Name: 'Namespace', Value: ns }],
        Value: b.in,
        Unit: 'Bytes',
        Timestamp: t2,
      });
      requests.push({
        MetricName: 'BytesOut',
        Dimensions: [E, { Name: 'Namespace', Value: ns }],
        Value: b.out,
        Unit: 'Bytes',
        Timestamp: t2,
      });
    }
    for (const [op, n] of Object.entries(writes))
      requests.push({
        MetricName: 'Requests',
        Dimensions: [E, { Name: 'Operation', Value: op }],
        Value: n,
        Unit: 'Count',
        Timestamp: t2,
      });
    // An hour older than the window: must not count.
    requests.push({
      MetricName: 'Hits',
      Dimensions: [E, { Name: 'Namespace', Value: 'pages' }, { Name: 'Tier', Value: 'hot' }],
      Value: 1e6,
      Unit: 'Count',
      Timestamp: new Date(now.getTime() - 2 * HOUR),
    });
    await put('Strata/Requests', requests);

    // Earlier runs of this month (the month-to-date), when the month has completed hours before this one.
    await Promise.all(
      history().map((h) =>
        put(
          'Strata/Cost',
          h.points.map((v, i) => ({
            MetricName: 'TotalCostPerHour',
            Dimensions: [E],
            Value: v,
            Unit: 'None',
            Timestamp: new Date(h.hour.getTime() + (10 + 30 * i) * 60_000),
          })),
        ),
      ),
    );
  }, 300_000);

  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await fleet.closeAll();
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: instanceIds })).catch(() => undefined);
    for (const id of volumeIds) await ec2.send(new DeleteVolumeCommand({ VolumeId: id })).catch(() => undefined);
    await ec2.send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: templateId })).catch(() => undefined);
    const list = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    if (list.Contents?.length)
      await s3.send(
        new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: list.Contents.map((o) => ({ Key: o.Key! })) } }),
      );
    await s3.send(new DeleteBucketCommand({ Bucket: bucket })).catch(() => undefined);
    ec2.destroy();
    s3.destroy();
    cw.destroy();
  });

  /** Up to two completed hours of this month, with the rates "published" in each (averages 1.5 and 4). */
  function history(): { hour: Date; points: number[] }[] {
    const hourStart = Math.floor(now.getTime() / HOUR) * HOUR;
    const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    return [
      { hour: new Date(hourStart - HOUR), points: [1, 2] },
      { hour: new Date(hourStart - 3 * HOUR), points: [4] },
    ].filter((h) => h.hour.getTime() >= monthStart);
  }

  function settings() {
    return {
      environment: env,
      region: 'us-east-1',
      tenants: [
        { name: 'web', namespaces: ['pages', 'sessions'] },
        { name: 'analytics', namespaces: ['reports'] },
      ],
      fleet: { tags: { 'strata:env': env, 'strata:role': 'cachenode' } },
      hot: { cacheName: `strata-${env}` },
      cold: { bucket, prefix: 'v1' },
      apiName: `strata-${env}`,
      functions: [{ name: `${env}-keys`, memoryMb: 1024, tier: 'api' }],
      monitoring: { dashboards: 3, alarmMetrics: 12, runsPerHour: 4 },
    };
  }

  function setEnv(vars: Record<string, string>): void {
    for (const [k, v] of Object.entries(vars)) {
      if (!(k in saved)) saved[k] = process.env[k];
      process.env[k] = v;
    }
  }

  async function readBack(namespace: string, name: string, dims: Record<string, string>): Promise<number[]> {
    const res = await cw.send(
      new GetMetricDataCommand({
        StartTime: new Date(now.getTime() - 60_000),
        EndTime: new Date(now.getTime() + 60_000),
        MetricDataQueries: [
          {
            Id: 'm',
            ReturnData: true,
            MetricStat: {
              Metric: {
                Namespace: namespace,
                MetricName: name,
                Dimensions: Object.entries(dims).map(([Name, Value]) => ({ Name, Value })),
              },
              Period: 60,
              Stat: 'Maximum',
            },
          },
        ],
      }),
    );
    return res.MetricDataResults?.[0]?.Values ?? [];
  }

  /** The cost model of this usage, written out from the catalog's prices. */
  function expected() {
    const gp3 = P.ebs.gp3!;
    const s3 = P.s3.classes.STANDARD!;
    const sl = P.elasticache!.serverless!;
    const cw$ = P.cloudWatch!;
    const warm =
      2 * P.ec2.instances['t4g.small']!.hourly +
      ((20 + 100) * gp3.perGBMonth + (4000 - 3000) * gp3.perIopsMonth + (200 - 125) * gp3.perMBpsMonth) / H;
    const hot = 3 * sl.perGBHour + perRequest(ecpus, sl.ecpu);
    const coldHits = hits.pages.cold + hits.reports.cold;
    const allMisses = misses.pages + misses.reports;
    const storedGB = objectSizes.reduce((a, b) => a + b, 0) / GiB;
    // Without S3 request metrics: GETs = cold hits + misses; PUTs = puts + deletes (the documented estimate).
    const cold =
      (storedGB * s3.perGBMonth) / H + perRequest(coldHits + allMisses, s3.get) + perRequest(writes.put + writes.delete, s3.put);
    const api =
      perRequest(apiCount, P.apiGateway!.restRequests) +
      perRequest(lambda.invocations, P.lambda!.requests) +
      (lambda.durationMs / 1000) * (1024 / 1024) * P.lambda!.perGBSecondArm64;
    // Monitoring: series = 6 tiers + 2 tenants + other + 4 (total, projected, per 1,000 hits, spot savings) in
    // Strata/Cost and 5 (with spot nodes) + 2 nodes in Strata/Fleet; 2 PutMetricData calls a run; GetMetricData metrics
    // a run: 8 per namespace
    // (pages, sessions, reports, other), 4 cold-tier write operations, 2 ElastiCache, 1 API Gateway,
    // 2 per function, 2 S3 storage, 1 month-to-date: 32 + 4 + 2 + 1 + 2 + 2 + 1 = 44; 4 runs an hour.
    const series = 6 + 3 + 4 + (5 + 2);
    const monitoring =
      (series * cw$.customMetricPerMonth + 3 * cw$.dashboardPerMonth + 12 * cw$.alarmStandardPerMonth) / H +
      perRequest(2 * 4, cw$.putMetricData) +
      perRequest(44 * 4, cw$.getMetricDataMetrics);
    const tiers = { hot, warm, cold, api, workflows: 0, monitoring };
    const total = hot + warm + cold + api + monitoring;

    // Tenants: storage tiers by bytes moved, the API and monitoring by lookups.
    const b = {
      web: bytes.pages.in + bytes.pages.out,
      analytics: bytes.reports.in + bytes.reports.out,
      other: bytes.other.in + bytes.other.out,
    };
    const sumOf = (h: Record<string, number>) => Object.values(h).reduce((x, y) => x + y, 0);
    const r = {
      web: sumOf(hits.pages) + misses.pages,
      analytics: sumOf(hits.reports) + misses.reports,
      other: sumOf(hits.other),
    };
    const byBytes = hot + warm + cold;
    const byRequests = api + monitoring;
    const tenant = (k: 'web' | 'analytics' | 'other') => (byBytes * b[k]) / sumOf(b) + (byRequests * r[k]) / sumOf(r);

    const allHits =
      hits.pages.hot +
      hits.pages.l1 +
      hits.pages.cold +
      hits.pages.origin +
      hits.reports.warm +
      hits.reports.cold +
      hits.other.hot;
    const monthToDate = history().reduce((a, h) => a + h.points.reduce((x, y) => x + y, 0) / h.points.length, 0);
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    const hoursLeft = (nextMonth - Math.floor(now.getTime() / HOUR) * HOUR) / HOUR;
    return {
      tiers,
      total,
      tenants: { web: tenant('web'), analytics: tenant('analytics'), other: tenant('other') },
      projected: monthToDate + total * hoursLeft,
      per1000: total / (allHits / 1000),
    };
  }

  let report: CostPublisherReport;

  it('runs as the scheduled Lambda and publishes Strata/Cost equal to the cost model of the usage', async () => {
    setEnv({
      STRATA_COST_SETTINGS: JSON.stringify(settings()),
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL: testS3Endpoint(),
      STRATA_S3_ENDPOINT: testS3Endpoint(),
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      STRATA_WARM_RING_BUCKET: bucket,
      STRATA_WARM_RING_PREFIX: 'strata-ring',
      STRATA_NODE_STATS_ID_PREFIX: REPORT_ID_PREFIX,
    });
    // No fleet secret in its environment: the publisher reads reports, it never calls a node.
    for (const k of ['STRATA_WARM_SECRET', 'STRATA_WARM_SECRET_ARN']) expect(process.env[k]).toBeUndefined();
    report = await handler({ 'detail-type': 'Scheduled Event', source: 'aws.events', time: now.toISOString() }, {} as Context);
    expect(report.usage).toEqual({
      runningInstances: 2,
      volumes: 2,
      cold: {
        bytes: objectSizes.reduce((a, b) => a + b, 0),
        objects: objectSizes.length,
        storageSource: 'listing',
        requestSource: 'estimate',
        truncated: false,
      },
    });
    expect(report.unpriced).toEqual([]);

    const want = expected();
    const E = { Environment: env };
    for (const [tier, usd] of Object.entries(want.tiers)) {
      const got = await readBack('Strata/Cost', 'CostPerHour', { ...E, Tier: tier });
      expect({ tier, n: got.length }).toEqual({ tier, n: 1 });
      expect({ tier, usd: got[0] }).toEqual({ tier, usd: expect.closeTo(usd, 10) });
    }
    for (const [tenant, usd] of Object.entries(want.tenants)) {
      const got = await readBack('Strata/Cost', 'CostPerHour', { ...E, Tenant: tenant });
      expect({ tenant, usd: got[0] }).toEqual({ tenant, usd: expect.closeTo(usd, 10) });
    }
    expect((await readBack('Strata/Cost', 'TotalCostPerHour', E))[0]).toBeCloseTo(want.total, 10);
    expect((await readBack('Strata/Cost', 'ProjectedMonthlyCost', E))[0]).toBeCloseTo(want.projected, 8);
    expect((await readBack('Strata/Cost', 'CostPer1000Hits', E))[0]).toBeCloseTo(want.per1000, 10);
  });

  it("publishes Strata/Fleet from the ring and the nodes' reports in S3, which carry the nodes' own stats", async () => {
    const admin = new NodeClient({ secret: SECRET });
    const fillOf = async (url: string) => (await admin.stats(url)).fill * 100;
    const live: Record<string, number> = {};
    for (const [id, url] of Object.entries(urls)) live[id] = await fillOf(url);
    await admin.close();
    const reportOf = async (id: string) =>
      JSON.parse((await ringCas.get(nodeStatsKey(REPORT_ID_PREFIX + id)))!.body) as NodeStatsReport;
    const reportedFill = async (id: string) => ((await reportOf(id)).stats.fill as number) * 100;
    const reported: Record<string, number> = {};
    for (const id of Object.keys(urls)) reported[id] = await reportedFill(id);
    expect(reported).toEqual(live);
    expect(Math.max(...Object.values(reported))).toBeGreaterThan(0);
    const E = { Environment: env };
    expect(await readBack('Strata/Fleet', 'Nodes', E)).toEqual([2]);
    expect(await readBack('Strata/Fleet', 'MigrationsInProgress', E)).toEqual([1]);
    expect(await readBack('Strata/Fleet', 'SilentNodes', E)).toEqual([0]);
    for (const [node, percent] of Object.entries(reported)) {
      expect((await readBack('Strata/Fleet', 'NodeFillPercent', { ...E, Node: node }))[0]).toBeCloseTo(percent, 10);
    }
    expect((await readBack('Strata/Fleet', 'MaxNodeFillPercent', E))[0]).toBeCloseTo(Math.max(...Object.values(reported)), 10);
    expect(report.fleet).toMatchObject({ nodes: 2, migrationsInProgress: 1, silent: [] });
  });

  it('counts a node whose report went stale as silent and publishes no fill for it', async () => {
    const [quiet, loud] = Object.keys(urls) as [string, string];
    const admin = new NodeClient({ secret: SECRET });
    const stats = await admin.stats(urls[quiet]!);
    await admin.close();
    // Its last report, four intervals old: the node stopped writing (or cannot reach S3).
    await writeReport(quiet, stats, Date.now() - 4 * 30_000);
    const envC = `${env}-c`;
    const runtime = costPublisherFromEnv({
      ...process.env,
      STRATA_COST_SETTINGS: JSON.stringify({ ...settings(), environment: envC }),
    });
    try {
      const r = await runCostPublisher(runtime.deps, runtime.settings, now);
      expect(r.fleet.silent).toEqual([{ node: quiet, reason: expect.stringMatching(/old \(silent after 90 s\)/) }]);
      expect(r.fleet.fills.map((f) => f.node)).toEqual([loud]);
      const E = { Environment: envC };
      expect(await readBack('Strata/Fleet', 'SilentNodes', E)).toEqual([1]);
      expect(await readBack('Strata/Fleet', 'NodeFillPercent', { ...E, Node: quiet })).toEqual([]);
    } finally {
      await runtime.close();
      await writeReport(quiet, stats);
    }
  });

  it("prefers S3's daily storage metrics over listing the bucket when CloudWatch has them", async () => {
    const E = [{ Name: 'BucketName', Value: bucket }];
    await put('AWS/S3', [
      {
        MetricName: 'BucketSizeBytes',
        Dimensions: [...E, { Name: 'StorageType', Value: 'StandardStorage' }],
        Value: 50 * GiB,
        Unit: 'Bytes',
        Timestamp: new Date(now.getTime() - 20 * HOUR),
      },
      {
        MetricName: 'NumberOfObjects',
        Dimensions: [...E, { Name: 'StorageType', Value: 'AllStorageTypes' }],
        Value: 12_345,
        Unit: 'Count',
        Timestamp: new Date(now.getTime() - 20 * HOUR),
      },
    ]);
    const runtime = costPublisherFromEnv({
      ...process.env,
      STRATA_COST_SETTINGS: JSON.stringify({ ...settings(), environment: `${env}-b` }),
    });
    try {
      const later = new Date(now.getTime() + 1000);
      const r = await runCostPublisher(runtime.deps, runtime.settings, later);
      expect(r.usage.cold).toMatchObject({ bytes: 50 * GiB, objects: 12_345, storageSource: 'cloudwatch' });
      const s3 = P.s3.classes.STANDARD!;
      expect(r.costPerHour.tiers.cold).toBeCloseTo((50 * s3.perGBMonth) / H, 10);
    } finally {
      await runtime.close();
    }
  });
});
