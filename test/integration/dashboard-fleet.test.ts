/**
 * The Fleet dashboard of a local run with a warm tier: a real cache-node process, its ring in a folder, the
 * local server writing through it, and the fleet sampler reading the fleet the way the cost publisher does.
 */
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { loadRuntimeEnv } from '../../core/runtime/config.js';
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
    try {
      const state = await sampler.sample();
      expect(state.nodes).toBe(1);
    } finally {
      await sampler.stop();
    }

    const widgets = new Map<string, WidgetView>(dashboardData(store, { environment: 'local' }).dashboards.find((d) => d.id === 'fleet')!.widgets.map((w) => [w.id, w]));
    expect(widgets.get('fleet.nodes-now')!.series.map((s) => s.value)).toEqual([1]);
    const fill = widgets.get('fleet.fill')!;
    expect(fill.series.map((s) => s.label)).toEqual(['fullest node', 'node n1']);
    const percent = fill.series[1]!.points.at(-1)![1];
    expect(percent).toBeGreaterThan(0); // 160 KiB of values in a 1 MiB node
    expect(percent).toBeLessThan(100);
    expect(widgets.get('fleet.migrations-now')!.series.map((s) => s.value)).toEqual([0]);
    // Workflow metrics come from the state machines, which this run did not start.
    expect(widgets.get('fleet.bytes-moved')!.note).toMatch(/no data locally/);
  });
});
