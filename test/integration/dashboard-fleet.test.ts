/**
 * The Fleet dashboard of a local run with a warm tier: a real cache-node process, its ring in a folder, the
 * local server writing through it, and the fleet sampler reading the fleet the way the cost publisher does.
 */
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { priceBook } from '../../core/cost/model/price-catalog.js';
import { dev } from '../../cdk/config/dev.js';
import { localCostModel } from '../../scripts/local/cost-model.js';
import { dashboardData, type WidgetView } from '../../scripts/local/dashboard/data.js';
import { startFleetSampler } from '../../scripts/local/fleet-sampler.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { localFleet, SECRET, singleNodeRing, tempDir } from './warm-fixtures.js';

describe('Local Fleet dashboard with a warm tier', () => {
  const fleet = localFleet({ capacityBytes: 1024 * 1024 });
  const ringDir = tempDir('strata-ring-');
  const warmEnv = { STRATA_WARM_RING_DIR: ringDir.dir, STRATA_WARM_SECRET: SECRET };
  let api: TestApi;

  beforeAll(async () => {
    const node = await fleet.launch('n1');
    await new RingStore(new FileCasStore(ringDir.dir)).create(singleNodeRing('n1', node.url));
    api = await startTestApi('embedded', warmEnv);
  });

  afterAll(async () => {
    await api?.close();
    await fleet.closeAll();
    ringDir.remove();
  });

  it('is absent without a warm tier', () => {
    expect(startFleetSampler({ env: loadRuntimeEnv({}), store: new LocalMetricsStore(), environment: 'local' })).toBeUndefined();
  });

  it('draws the nodes of the ring, their fill and the migrations in progress', async () => {
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${api.url}/v1/ns/app/keys/k${i}`, { method: 'PUT', body: Buffer.alloc(8 * 1024, i) });
      expect(res.status).toBe(200);
    }
    const store = new LocalMetricsStore();
    const sampler = startFleetSampler({ env: loadRuntimeEnv(warmEnv), store, environment: 'local', intervalMs: 60_000 })!;
    let sampledAt: number;
    try {
      const state = await sampler.sample();
      sampledAt = Date.now();
      expect(state.nodes).toBe(1);
    } finally {
      await sampler.stop();
    }

    // Numbers show the latest complete bucket: read the dashboards as of the end of the bucket the sample went into.
    const asOf = Math.floor(sampledAt / store.resolutionMs) * store.resolutionMs + store.resolutionMs;
    const data = dashboardData(store, { environment: 'local', now: asOf });
    const widgets = new Map<string, WidgetView>(data.dashboards.find((d) => d.id === 'fleet')!.widgets.map((w) => [w.id, w]));
    expect(widgets.get('fleet.nodes-now')!.series.map((s) => s.value)).toEqual([1]);
    const fill = widgets.get('fleet.fill')!;
    expect(fill.series.map((s) => s.label)).toEqual(['fullest node', 'node n1']);
    const percent = fill.series[1]!.points.at(-1)![1];
    expect(percent).toBeGreaterThan(0); // 160 KiB of values in a 1 MiB node
    expect(percent).toBeLessThan(100);
    expect(widgets.get('fleet.migrations-now')!.series.map((s) => s.value)).toEqual([0]);
    // Workflow metrics come from the workflow steps, which this run did not start.
    expect(widgets.get('fleet.bytes-moved')!.note).toMatch(/published by the workflow steps/);
    expect(widgets.get('fleet.local-executions-list')!.note).toMatch(/no workflow executions yet/);

    // The modelled cost of the warm tier: one dev instance and its gp3 volume per node, per hour.
    localCostModel({ store, environment: 'local', startMs: asOf - store.resolutionMs, now: () => asOf }).catchUp();
    const costData = dashboardData(store, { environment: 'local', now: asOf }).dashboards.find((d) => d.id === 'cost')!;
    const warm = costData.widgets.find((w) => w.id === 'cost.per-tier')!.series.find((s) => s.label === 'warm')!;
    const book = priceBook(undefined, dev.region);
    const volume = dev.fleet.dataVolume!.sizeGiB * book.prices.ebs.gp3!.perGBMonth;
    expect(warm.latest).toBeCloseTo(book.prices.ec2.instances[dev.fleet.instanceType]!.hourly + volume / book.hoursPerMonth, 12);
  });
});
