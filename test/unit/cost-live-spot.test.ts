import type { MetricDatum } from '@aws-sdk/client-cloudwatch';
import { DescribeInstancesCommand, EC2Client, type DescribeInstancesCommandOutput, type Instance } from '@aws-sdk/client-ec2';
import { CAPACITY_TAG as LAUNCH_CAPACITY_TAG } from '../../cdk/constructs/workflows/fleet-launch.js';
import { CAPACITY_TAG, Ec2FleetReader, instanceLifecycle } from '../../core/cost/publisher/aws-usage-readers.js';
import {
  costAndFleetPoints,
  monitoringUsage,
  runCostPublisher,
  trafficSeries,
  type CostPublisherDeps,
} from '../../core/cost/publisher/publish-cost.js';
import { parseCostPublisherSettings } from '../../core/cost/publisher/settings.js';
import type { MetricSink } from '../../core/cost/publisher/metric-writer.js';
import type { FleetNodeInstance, MetricSource } from '../../core/cost/publisher/usage-reader.js';
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { priceLiveUsage } from '../../core/cost/model/live-cost.js';
import { NO_SPOT, runningSpotCost, spotHourly } from '../../core/cost/model/spot.js';
import { COST_TIERS, METRICS } from '../../core/metrics/metric-catalog.js';
import { DASHBOARDS, referencedMetricKeys } from '../../dashboards/index.js';

/**
 * Spot pricing in the cost publisher: how a running cache node was bought (EC2's InstanceLifecycle, else the
 * launch's strata:capacity tag), spot nodes priced at the assumed spot price (core/cost/model/spot.ts), and the
 * SpotSavingsMonthly and SpotNodes it publishes. EC2 is stubbed at the SDK boundary (the client's `send`): no
 * local EC2 reports InstanceLifecycle for a spot instance (LocalStack starts no Spot capacity).
 */

const book = priceBook(undefined, 'us-east-1');
const od = (type: string) => book.prices.ec2.instances[type]!.hourly;

/** An EC2 client whose DescribeInstances answers `pages` in turn (NextToken-chained), recording the requests. */
function ec2With(pages: Instance[][]): { client: EC2Client; requests: unknown[] } {
  const client = new EC2Client({ region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  const requests: unknown[] = [];
  // The SDK boundary: every command goes through `send`.
  Object.assign(client, {
    send: async (command: unknown) => {
      if (!(command instanceof DescribeInstancesCommand)) throw new Error(`unexpected ${String(command)}`);
      requests.push(command.input);
      const i = command.input.NextToken ? Number(command.input.NextToken) : 0;
      const out: Partial<DescribeInstancesCommandOutput> = {
        Reservations: [{ Instances: pages[i] ?? [] }],
        ...(i + 1 < pages.length ? { NextToken: String(i + 1) } : {}),
      };
      return out;
    },
  });
  return { client, requests };
}

const running = { State: { Name: 'running' as const } };

class Recorder implements MetricSink, MetricSource {
  readonly data: { namespace: string; name: string; dims: Record<string, string>; value: number }[] = [];
  async put(namespace: string, data: readonly MetricDatum[]): Promise<void> {
    for (const d of data)
      this.data.push({
        namespace,
        name: d.MetricName!,
        dims: Object.fromEntries((d.Dimensions ?? []).map((x) => [x.Name!, x.Value!])),
        value: d.Value!,
      });
  }
  async query(): Promise<ReadonlyMap<string, never[]>> {
    return new Map();
  }
  value(name: string, dims: Record<string, string> = { Environment: 'dev' }): number[] {
    return this.data
      .filter(
        (d) => d.name === name && JSON.stringify(Object.entries(d.dims).sort()) === JSON.stringify(Object.entries(dims).sort()),
      )
      .map((d) => d.value);
  }
}

function deps(instances: FleetNodeInstance[], m: Recorder): CostPublisherDeps {
  return {
    fleet: { instances: async () => instances, volumes: async () => [] },
    objects: { list: async () => ({ bytes: 0, objects: 0, truncated: false }) },
    metrics: m,
    fleetState: { ring: async () => undefined, nodeReport: async () => undefined },
    sink: m,
  };
}

const settings = parseCostPublisherSettings({
  environment: 'dev',
  region: 'us-east-1',
  fleet: { tags: { 'strata:env': 'dev' } },
  tenants: [
    { name: 'web', namespaces: ['pages'] },
    { name: 'batch', namespaces: ['reports'] },
  ],
});
const at = new Date('2026-11-30T21:40:00Z');

describe('Ec2FleetReader: how each instance was bought', () => {
  it("takes EC2's InstanceLifecycle, falls back to the strata:capacity tag, and calls everything else on demand", async () => {
    const { client, requests } = ec2With([
      [
        { InstanceId: 'i-spot', InstanceType: 'r7g.large', InstanceLifecycle: 'spot', ...running },
        { InstanceId: 'i-od', InstanceType: 'r7g.large', ...running, Tags: [{ Key: CAPACITY_TAG, Value: 'on-demand' }] },
        { InstanceId: 'i-tagged', InstanceType: 'r7g.large', ...running, Tags: [{ Key: CAPACITY_TAG, Value: 'spot' }] },
      ],
      [
        { InstanceId: 'i-untagged', InstanceType: 't4g.small', ...running },
        // EC2 says how it was bought: a capacity block is not spot, whatever the tag says.
        {
          InstanceId: 'i-block',
          InstanceType: 't4g.small',
          InstanceLifecycle: 'capacity-block',
          ...running,
          Tags: [{ Key: CAPACITY_TAG, Value: 'spot' }],
        },
      ],
    ]);
    const got = await new Ec2FleetReader(client, { 'strata:env': 'dev' }).instances();
    expect(got.map((i) => [i.id, i.lifecycle])).toEqual([
      ['i-spot', 'spot'],
      ['i-od', 'on-demand'],
      ['i-tagged', 'spot'],
      ['i-untagged', 'on-demand'],
      ['i-block', 'on-demand'],
    ]);
    // Both pages, filtered by the fleet's tag.
    expect(requests).toHaveLength(2);
    expect(requests[0]).toMatchObject({ Filters: expect.arrayContaining([{ Name: 'tag:strata:env', Values: ['dev'] }]) });
  });

  it('reads the tag the launch workflow writes', () => {
    expect(CAPACITY_TAG).toBe(LAUNCH_CAPACITY_TAG);
    expect(instanceLifecycle({ Tags: [{ Key: LAUNCH_CAPACITY_TAG, Value: 'spot' }] })).toBe('spot');
    expect(instanceLifecycle({})).toBe('on-demand');
  });
});

describe('runCostPublisher with spot nodes', () => {
  it('prices spot nodes at the assumed spot price and publishes what they save per month and how many run', async () => {
    const m = new Recorder();
    const { client } = ec2With([
      [
        { InstanceId: 'i-1', InstanceType: 'r7g.large', ...running, Tags: [{ Key: CAPACITY_TAG, Value: 'on-demand' }] },
        { InstanceId: 'i-2', InstanceType: 'r7g.large', InstanceLifecycle: 'spot', ...running },
        { InstanceId: 'i-3', InstanceType: 'm7g.large', InstanceLifecycle: 'spot', ...running },
        // Not running: not billed, not counted.
        { InstanceId: 'i-4', InstanceType: 'r7g.large', InstanceLifecycle: 'spot', State: { Name: 'stopped' } },
      ],
    ]);
    const fleet = new Ec2FleetReader(client, { 'strata:env': 'dev' });
    const report = await runCostPublisher(
      { ...deps([], m), fleet: { instances: () => fleet.instances(), volumes: async () => [] } },
      settings,
      at,
    );

    const spotPerHour = spotHourly(book, 'r7g.large') + spotHourly(book, 'm7g.large');
    const onDemandPerHour = od('r7g.large') + od('m7g.large');
    // The warm tier costs what the fleet costs: one node on demand, two at their spot price.
    expect(report.costPerHour.tiers.warm).toBeCloseTo(od('r7g.large') + spotPerHour, 12);
    expect(report.spot).toEqual({
      spotNodes: 2,
      onDemandPerHour: expect.closeTo(onDemandPerHour, 12),
      spotPerHour: expect.closeTo(spotPerHour, 12),
      savingsMonthly: expect.closeTo((onDemandPerHour - spotPerHour) * book.hoursPerMonth, 9),
    });
    expect(report.usage.runningInstances).toBe(3);
    // 60 % off on-demand for both families (SPOT_DISCOUNT_BY_FAMILY): the savings are 0.6 of their on-demand month.
    expect(m.value('SpotSavingsMonthly')).toEqual([expect.closeTo(0.6 * onDemandPerHour * book.hoursPerMonth, 9)]);
    expect(m.value('SpotNodes')).toEqual([2]);
    // The totals and the tenants' shares follow the corrected warm tier.
    const tiers = COST_TIERS.reduce((a, t) => a + report.costPerHour.tiers[t], 0);
    expect(report.costPerHour.total).toBeCloseTo(tiers, 12);
    expect(m.value('TotalCostPerHour')).toEqual([report.costPerHour.total]);
    expect(m.value('CostPerHour', { Environment: 'dev', Tier: 'warm' })).toEqual([report.costPerHour.tiers.warm]);
    const shares = Object.values(report.costPerHour.tenants).reduce((a, b) => a + b, 0);
    expect(shares).toBeCloseTo(report.costPerHour.total, 12);
  });

  it('publishes 0 savings and 0 spot nodes with an on-demand fleet, and with no fleet at all', async () => {
    for (const instances of [[{ id: 'i-1', type: 'r7g.large', state: 'running', lifecycle: 'on-demand' as const }], []]) {
      const m = new Recorder();
      const report = await runCostPublisher(deps(instances, m), settings, at);
      expect(report.spot).toEqual(NO_SPOT);
      expect(report.costPerHour.tiers.warm).toBeCloseTo(instances.length * od('r7g.large'), 12);
      expect(m.value('SpotSavingsMonthly')).toEqual([0]);
      expect(m.value('SpotNodes')).toEqual([0]);
      // The spot figures the Cost dashboard draws are published on every run (no hits here: no CostPer1000Hits).
      const drawn = referencedMetricKeys(DASHBOARDS);
      for (const key of ['spotSavingsMonthly', 'spotNodes'] as const) {
        expect(drawn).toContain(key);
        expect(m.data.map((d) => d.name)).toContain(METRICS[key].name);
      }
    }
  });

  it('counts a spot node of a type the catalog lacks, and leaves its price out (the live cost lists it unpriced)', () => {
    const spot = runningSpotCost(book, [
      { type: 'x9z.huge', state: 'running', lifecycle: 'spot' },
      { type: 't4g.small', state: 'running', lifecycle: 'spot' },
    ]);
    expect(spot.spotNodes).toBe(2);
    expect(spot.onDemandPerHour).toBeCloseTo(od('t4g.small'), 12);
  });
});

describe('What the publisher bills itself for its series', () => {
  const targets = { environment: 'dev', namespaces: [], functions: [] };
  const cost = priceLiveUsage(
    {
      window: { start: new Date(0), end: new Date(3_600_000) },
      fleet: { instances: [], volumes: [] },
      apiRequests: 0,
      functions: [],
      hits: 0,
      namespaces: [
        { namespace: 'pages', requests: 0, bytes: 0 },
        { namespace: 'other', requests: 0, bytes: 0 },
      ],
    },
    book,
    { tenants: settings.tenants, monitoring: monitoringUsage(settings, targets, 0) },
  );

  it('counts exactly the series an idle run publishes (no hits, no traffic), the spot figures included', () => {
    const points = costAndFleetPoints('dev', cost, { monthToDate: 0, hoursLeft: 1, projected: 1 }, undefined, {
      ringVersion: null,
      nodes: 0,
      fills: [],
      maxFillPercent: 0,
      migrationsInProgress: 0,
      silent: [],
    });
    const idle = monitoringUsage(settings, targets, 0, trafficSeries({ hits: 0, namespaces: [] }, settings.tenants.length));
    expect(points.map((p) => p.def.name)).toEqual(expect.arrayContaining(['SpotSavingsMonthly', 'SpotNodes']));
    expect(idle.customMetrics).toBe(points.length);
  });

  it('counts CostPer1000Hits and the `other` tenant once the window has traffic, and both when not told', () => {
    const idle = monitoringUsage(settings, targets, 0, trafficSeries({ hits: 0, namespaces: [] }, 2)).customMetrics;
    const busy = trafficSeries({ hits: 5, namespaces: [{ namespace: 'x', requests: 5, bytes: 0 }] }, 2);
    expect(busy).toEqual({ costPer1000Hits: true, otherTenant: true });
    expect(monitoringUsage(settings, targets, 0, busy).customMetrics).toBe(idle + 2);
    expect(monitoringUsage(settings, targets, 0).customMetrics).toBe(idle + 2);
    // With no tenant configured, all cost goes to `other`, traffic or not.
    expect(trafficSeries({ hits: 0, namespaces: [] }, 0).otherTenant).toBe(true);
    expect(
      costAndFleetPoints(
        'dev',
        cost,
        { monthToDate: 0, hoursLeft: 1, projected: 1 },
        undefined,
        {
          ringVersion: null,
          nodes: 0,
          fills: [],
          maxFillPercent: 0,
          migrationsInProgress: 0,
          silent: [],
        },
        { ...NO_SPOT, spotNodes: 3, savingsMonthly: 12.5 },
      )
        .filter((p) => p.def.name.startsWith('Spot'))
        .map((p) => [p.def.name, p.value]),
    ).toEqual([
      ['SpotSavingsMonthly', 12.5],
      ['SpotNodes', 3],
    ]);
  });
});
