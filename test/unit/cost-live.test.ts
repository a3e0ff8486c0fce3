import fc from 'fast-check';
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { aws202611Catalog } from '../../core/cost/model/catalogs/aws-2026-11.js';
import { apportion, priceLiveUsage, type MonitoringUsage } from '../../core/cost/model/live-cost.js';
import { breakdown } from '../../core/cost/model/formulas.js';
import { costPer1000Hits, hoursLeftInMonth, projectMonthlyCost } from '../../core/cost/model/projection.js';
import type { LiveUsage } from '../../core/cost/model/usage.js';
import { COST_TIERS, OTHER, type CostTier } from '../../core/metrics/metric-catalog.js';

// Prices read straight from the catalog data, so the expectations below are the formulas written out by hand.
const P = aws202611Catalog.regions['us-east-1']!;
const H = aws202611Catalog.hoursPerMonth;
const GiB = 1024 ** 3;
const book = priceBook('aws-2026-11', 'us-east-1');
const noMonitoring: MonitoringUsage = {
  customMetrics: 0,
  dashboards: 0,
  alarmMetrics: 0,
  putMetricDataCallsPerHour: 0,
  getMetricDataMetricsPerHour: 0,
};

const hour = { start: new Date('2026-11-10T11:00:00Z'), end: new Date('2026-11-10T12:00:00Z') };

function usage(over: Partial<LiveUsage> = {}): LiveUsage {
  return { window: hour, fleet: { instances: [], volumes: [] }, apiRequests: 0, functions: [], hits: 0, namespaces: [], ...over };
}

describe('priceLiveUsage', () => {
  it('prices running cache nodes and their gp3 volumes per hour (stopped instances cost nothing, volumes always do)', () => {
    const u = usage({
      fleet: {
        instances: [
          { id: 'i-1', type: 't4g.small', state: 'running' },
          { id: 'i-2', type: 'r7g.large', state: 'running' },
          { id: 'i-3', type: 'r7g.large', state: 'stopped' },
        ],
        volumes: [
          { id: 'vol-root', type: 'gp3', sizeGiB: 10, iops: 3000, throughputMiBps: 125 },
          { id: 'vol-data', type: 'gp3', sizeGiB: 500, iops: 6000, throughputMiBps: 250 },
        ],
      },
    });
    const c = priceLiveUsage(u, book, { tenants: [], monitoring: noMonitoring });
    const gp3 = P.ebs.gp3!;
    expect(c.tiers.warm.alloc).toBeCloseTo(P.ec2.instances['t4g.small']!.hourly + P.ec2.instances['r7g.large']!.hourly, 12);
    expect(c.tiers.warm.store).toBeCloseTo(((10 + 500) * gp3.perGBMonth) / H, 12);
    expect(c.tiers.warm.req).toBeCloseTo(((6000 - 3000) * gp3.perIopsMonth + (250 - 125) * gp3.perMBpsMonth) / H, 12);
    expect(c.total).toBeCloseTo(c.tiers.warm.total, 12);
    expect(c.unpriced).toEqual([]);
  });

  it("matches the README's monthly figure for a prod cache node ($138.98 a month)", () => {
    const u = usage({
      fleet: {
        instances: [{ id: 'i-1', type: 'r7g.large', state: 'running' }],
        volumes: [
          { id: 'root', type: 'gp3', sizeGiB: 10, iops: 3000, throughputMiBps: 125 },
          { id: 'data', type: 'gp3', sizeGiB: 500, iops: 6000, throughputMiBps: 250 },
        ],
      },
    });
    expect(priceLiveUsage(u, book, { tenants: [], monitoring: noMonitoring }).tiers.warm.total * H).toBeCloseTo(138.98, 1);
  });

  it('reports instance types and volume types the catalog does not price instead of guessing', () => {
    const u = usage({
      fleet: {
        instances: [{ id: 'i-9', type: 'x2gd.large', state: 'running' }],
        volumes: [{ id: 'vol-9', type: 'io2', sizeGiB: 8, iops: 100, throughputMiBps: 0 }],
      },
    });
    const c = priceLiveUsage(u, book, { tenants: [], monitoring: noMonitoring });
    expect(c.total).toBe(0);
    expect(c.unpriced.map((x) => [x.tier, x.item])).toEqual([
      ['warm', 'instance i-9'],
      ['warm', 'volume vol-9'],
    ]);
  });

  it('prices ElastiCache Serverless GB-hours (with the 100 MB minimum) and ECPUs', () => {
    const sl = P.elasticache!.serverless!;
    const small = priceLiveUsage(usage({ hot: { bytesUsed: 10 * 1024 * 1024, ecpus: 2_000_000 } }), book, {
      tenants: [],
      monitoring: noMonitoring,
    });
    expect(small.tiers.hot.store).toBeCloseTo(sl.minGB * sl.perGBHour, 12);
    expect(small.tiers.hot.req).toBeCloseTo(2 * sl.ecpu.usd, 12);
    const big = priceLiveUsage(usage({ hot: { bytesUsed: 3 * GiB, ecpus: 0 } }), book, { tenants: [], monitoring: noMonitoring });
    expect(big.tiers.hot.total).toBeCloseTo(3 * sl.perGBHour, 12);
  });

  it("prices S3 storage per hour and the window's requests; a 30-minute window doubles request charges into a rate", () => {
    const s3 = P.s3.classes.STANDARD!;
    const cold = {
      bytes: 10 * GiB,
      objects: 5,
      storageSource: 'listing' as const,
      truncated: false,
      getRequests: 10_000,
      putRequests: 1_000,
      requestSource: 'estimate' as const,
    };
    const c = priceLiveUsage(usage({ cold }), book, { tenants: [], monitoring: noMonitoring });
    expect(c.tiers.cold.store).toBeCloseTo((10 * s3.perGBMonth) / H, 12);
    expect(c.tiers.cold.req).toBeCloseTo((1000 * s3.put.usd) / s3.put.per + (10_000 * s3.get.usd) / s3.get.per, 12);
    const half = priceLiveUsage(usage({ cold, window: { start: new Date('2026-11-10T11:30:00Z'), end: hour.end } }), book, {
      tenants: [],
      monitoring: noMonitoring,
    });
    expect(half.tiers.cold.req).toBeCloseTo(2 * c.tiers.cold.req, 12);
    expect(half.tiers.cold.store).toBeCloseTo(c.tiers.cold.store, 12);
  });

  it('bills API Gateway and Lambda to the tier each function serves', () => {
    const u = usage({
      apiRequests: 1_000_000,
      functions: [
        { name: 'keys', memoryMb: 1024, tier: 'api', invocations: 1_000_000, gbSeconds: 50_000 },
        { name: 'step', memoryMb: 512, tier: 'workflows', invocations: 100, gbSeconds: 10 },
        { name: 'publisher', memoryMb: 256, tier: 'monitoring', invocations: 4, gbSeconds: 2 },
      ],
    });
    const c = priceLiveUsage(u, book, { tenants: [], monitoring: noMonitoring });
    const lambda = P.lambda!;
    expect(c.tiers.api.total).toBeCloseTo(
      P.apiGateway!.restRequests.usd + lambda.requests.usd + 50_000 * lambda.perGBSecondArm64,
      10,
    );
    expect(c.tiers.workflows.total).toBeCloseTo(
      (100 * lambda.requests.usd) / lambda.requests.per + 10 * lambda.perGBSecondArm64,
      12,
    );
    expect(c.tiers.monitoring.total).toBeCloseTo(
      (4 * lambda.requests.usd) / lambda.requests.per + 2 * lambda.perGBSecondArm64,
      12,
    );
  });

  it('prices CloudWatch metrics, dashboards and alarms per hour, and the API calls of the hour', () => {
    const cw = P.cloudWatch!;
    const c = priceLiveUsage(usage(), book, {
      tenants: [],
      monitoring: {
        customMetrics: 20,
        dashboards: 3,
        alarmMetrics: 12,
        putMetricDataCallsPerHour: 8,
        getMetricDataMetricsPerHour: 400,
      },
    });
    expect(c.tiers.monitoring.total).toBeCloseTo(
      (20 * cw.customMetricPerMonth + 3 * cw.dashboardPerMonth + 12 * cw.alarmStandardPerMonth) / H +
        (8 * cw.putMetricData.usd) / cw.putMetricData.per +
        (400 * cw.getMetricDataMetrics.usd) / cw.getMetricDataMetrics.per,
      12,
    );
  });

  it("adds up: the tenants' shares equal the total", () => {
    const u = usage({
      fleet: { instances: [{ id: 'i-1', type: 't4g.small', state: 'running' }], volumes: [] },
      apiRequests: 5000,
      namespaces: [
        { namespace: 'pages', requests: 4000, bytes: 1e6 },
        { namespace: 'reports', requests: 1000, bytes: 9e6 },
      ],
    });
    const c = priceLiveUsage(u, book, {
      tenants: [
        { name: 'web', namespaces: ['pages'] },
        { name: 'analytics', namespaces: ['reports'] },
      ],
      monitoring: noMonitoring,
    });
    const sum = Object.values(c.tenants).reduce((a, b) => a + b, 0);
    expect(sum).toBeCloseTo(c.total, 12);
    // The node (bytes-driven) is 10% web; the API (request-driven) is 80% web.
    expect(c.tenants.web).toBeCloseTo(0.1 * c.tiers.warm.total + 0.8 * c.tiers.api.total, 12);
  });
});

describe('apportion', () => {
  const tiers = (costs: Partial<Record<CostTier, number>>) =>
    Object.fromEntries(COST_TIERS.map((t) => [t, breakdown({ alloc: costs[t] ?? 0 })])) as Record<
      CostTier,
      ReturnType<typeof breakdown>
    >;
  const tenants = [
    { name: 'web', namespaces: ['pages', 'sessions'] },
    { name: 'analytics', namespaces: ['reports'] },
  ];

  it("shares storage tiers by bytes and the API by requests, summing each tenant's namespaces", () => {
    const out = apportion(
      tiers({ warm: 10, api: 4 }),
      [
        { namespace: 'pages', requests: 1, bytes: 100 },
        { namespace: 'sessions', requests: 2, bytes: 100 },
        { namespace: 'reports', requests: 1, bytes: 800 },
      ],
      tenants,
    );
    expect(out.web).toBeCloseTo(10 * 0.2 + 4 * 0.75, 12);
    expect(out.analytics).toBeCloseTo(10 * 0.8 + 4 * 0.25, 12);
    expect(out).not.toHaveProperty(OTHER);
  });

  it('puts namespaces no tenant lists under "other"', () => {
    const out = apportion(
      tiers({ cold: 6 }),
      [
        { namespace: 'pages', requests: 0, bytes: 1 },
        { namespace: OTHER, requests: 0, bytes: 2 },
      ],
      tenants,
    );
    expect(out).toEqual({ web: 2, analytics: 0, [OTHER]: 4 });
  });

  it('follows prefix grants as the API enforces them: a listed name first, then the longest matching prefix', () => {
    const grants = [
      { name: 'web', namespaces: ['web-*'] },
      { name: 'sessions', namespaces: ['web-sessions-*'] },
      { name: 'ops', namespaces: ['web-admin', 'ops-*'] },
    ];
    const out = apportion(
      tiers({ cold: 10 }),
      [
        { namespace: 'web-pages', requests: 0, bytes: 1 },
        { namespace: 'web-sessions-eu', requests: 0, bytes: 2 },
        { namespace: 'web-admin', requests: 0, bytes: 3 },
        { namespace: 'billing', requests: 0, bytes: 4 },
      ],
      grants,
    );
    expect(out).toEqual({ web: 1, sessions: 2, ops: 3, [OTHER]: 4 });
  });

  it('falls back to the other driver, then to an even split when nothing happened', () => {
    expect(apportion(tiers({ hot: 9 }), [{ namespace: 'reports', requests: 3, bytes: 0 }], tenants)).toEqual({
      web: 0,
      analytics: 9,
    });
    expect(apportion(tiers({ hot: 9, api: 1 }), [], tenants)).toEqual({ web: 5, analytics: 5 });
  });

  it('always adds up to the total (any costs, any traffic)', () => {
    const cost = fc.record(
      Object.fromEntries(COST_TIERS.map((t) => [t, fc.double({ min: 0, max: 1000, noNaN: true })])) as Record<
        CostTier,
        fc.Arbitrary<number>
      >,
    );
    const ns = fc.array(
      fc.record({
        namespace: fc.constantFrom('pages', 'sessions', 'reports', OTHER, 'stray'),
        requests: fc.nat(1e6),
        bytes: fc.nat(1e9),
      }),
      { maxLength: 8 },
    );
    fc.assert(
      fc.property(cost, ns, (costs, namespaces) => {
        const out = apportion(tiers(costs), namespaces, tenants);
        const total = COST_TIERS.reduce((a, t) => a + costs[t], 0);
        const shared = Object.values(out).reduce((a, b) => a + b, 0);
        expect(Math.abs(shared - total)).toBeLessThanOrEqual(1e-9 * Math.max(1, total));
        for (const v of Object.values(out)) expect(v).toBeGreaterThanOrEqual(0);
      }),
    );
  });
});

describe('projection', () => {
  it('counts hours from the start of the current hour to the end of the UTC month', () => {
    expect(hoursLeftInMonth(new Date('2026-11-30T23:59:00Z'))).toBe(1);
    expect(hoursLeftInMonth(new Date('2026-11-01T00:00:00Z'))).toBe(30 * 24);
    expect(hoursLeftInMonth(new Date('2026-02-01T00:30:00Z'))).toBe(28 * 24);
  });

  it('adds the month-to-date of completed hours to the current rate over the hours left', () => {
    const at = new Date('2026-11-30T21:40:00Z');
    const history = [
      { timestamp: new Date('2026-10-31T23:00:00Z'), value: 100 }, // last month: ignored
      { timestamp: new Date('2026-11-01T00:00:00Z'), value: 1.5 },
      { timestamp: new Date('2026-11-30T20:00:00Z'), value: 2.5 },
      { timestamp: new Date('2026-11-30T21:00:00Z'), value: 100 }, // the current hour: charged at the rate instead
    ];
    const p = projectMonthlyCost(at, 2, history);
    expect(p).toEqual({ monthToDate: 4, hoursLeft: 3, projected: 4 + 2 * 3 });
  });

  it('rejects a negative or non-finite rate', () => {
    expect(() => projectMonthlyCost(new Date(), -1, [])).toThrow(RangeError);
    expect(() => projectMonthlyCost(new Date(), Number.NaN, [])).toThrow(RangeError);
  });

  it('gives $ per 1,000 hits, and nothing without hits', () => {
    expect(costPer1000Hits(0.5, 2000)).toBeCloseTo(0.25, 12);
    expect(costPer1000Hits(0.5, 0)).toBeUndefined();
  });
});
