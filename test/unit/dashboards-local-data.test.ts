import type { DashboardSpec } from '../../dashboards/index.js';
import { add, div, expression, fill0, metric, mul, num, perSecond, ref } from '../../dashboards/index.js';
import { emfDocument } from '../../core/metrics/emf.js';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { LOCAL_NOTES, dashboardData, type DashboardData, type WidgetView } from '../../scripts/local/dashboard/data.js';
import { dashboardResponse } from '../../scripts/local/dashboard/routes.js';
import { mixedTraffic, startTraffic } from './metrics-traffic.js';

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);

function widget(data: DashboardData, id: string): WidgetView {
  const w = data.dashboards.flatMap((d) => d.widgets).find((x) => x.id === id);
  if (!w) throw new Error(`no widget ${id}`);
  return w;
}

function values(w: WidgetView): Record<string, number | undefined> {
  return Object.fromEntries(w.series.map((s) => [s.label, w.view === 'number' ? s.value : s.points.at(-1)?.[1]]));
}

describe('Local dashboard data (the dashboards/ specs over the local metrics)', () => {
  let data: DashboardData;

  beforeAll(async () => {
    const traffic = startTraffic({ namespaces: ['app'] });
    try {
      await mixedTraffic(traffic);
    } finally {
      await traffic.close();
    }
    // The handlers' own documents, pinned to one instant so every value lands in one 10 s point.
    const store = new LocalMetricsStore({ now: () => T0 + 5_000 });
    store.write(traffic.docs.map((d) => ({ ...d, _aws: { ...d._aws, Timestamp: T0 } })));
    // At T0 + 10 s the bucket [T0, T0 + 10 s) has just ended: the latest complete bucket, that numbers show.
    data = dashboardData(store, { environment: 'local', now: T0 + 10_000 });
  });

  it('computes the hit ratio per tier with the specs’ metric math', () => {
    // mixedTraffic looks keys up 9 times: 3 served by hot, 2 by cold, 4 misses.
    const now = values(widget(data, 'performance.hit-ratio-now'));
    expect(now['hit ratio']).toBeCloseTo((5 / 9) * 100, 6);
    const perTier = widget(data, 'performance.hit-ratio');
    expect(perTier.series.every((s) => s.points.length === 1 && s.points[0]![0] === T0)).toBe(true);
    const v = values(perTier);
    expect(v['all tiers']).toBeCloseTo((5 / 9) * 100, 6);
    expect(v.hot).toBeCloseTo((3 / 9) * 100, 6);
    expect(v.cold).toBeCloseTo((2 / 9) * 100, 6);
    expect(v.warm).toBe(0);
  });

  it('computes throughput, error rate and errors by code', () => {
    // 16 requests in the latest complete 10 s bucket.
    expect(values(widget(data, 'performance.throughput-now'))['requests/s']).toBeCloseTo(16 / 10, 6);
    expect(values(widget(data, 'performance.errors-now'))['errors %']).toBeCloseTo(100 / 16, 6);
    expect(values(widget(data, 'performance.errors'))).toEqual({ 'errors VALIDATION_FAILED': 1, '5xx (all codes)': 0 });
    const byOp = values(widget(data, 'performance.throughput'));
    expect(byOp).toMatchObject({
      'requests get': 4,
      'requests put': 4,
      'requests head': 2,
      'requests batch-get': 1,
      'requests stats': 1,
      'requests health': 1,
    });
  });

  it('draws latency percentiles per serving tier from the recorded latencies', () => {
    const p50 = widget(data, 'performance.latency-p50');
    expect(p50.series.map((s) => [s.label, s.points.length])).toEqual([
      ['l1', 0],
      ['hot', 1],
      ['warm', 0],
      ['cold', 1],
      ['origin', 0],
      ['none', 1],
    ]);
    const now = values(widget(data, 'performance.latency-now'));
    expect(now.p50).toBeGreaterThan(0);
    expect(now.p99!).toBeGreaterThanOrEqual(now.p50!);
  });

  it('splits misses and bytes per namespace, with unconfigured namespaces as `other`', () => {
    expect(values(widget(data, 'performance.misses-by-namespace'))).toEqual({ 'misses app': 3, 'misses other': 1 });
    // Bytes read: 'hello' (get + batch), 'cold value', 'c'.
    expect(values(widget(data, 'performance.bytes-out-by-namespace'))).toEqual({ 'bytes out app': 5 + 10 + 5 + 1 });
  });

  it('says why AWS-only widgets are empty instead of drawing nothing', () => {
    const cost = widget(data, 'cost.per-tier');
    expect(cost.series).toEqual([]);
    expect(cost.note).toBe(LOCAL_NOTES['Strata/Cost']);
    expect(widget(data, 'fleet.nodes').note).toBe(LOCAL_NOTES['Strata/Fleet']);
    expect(widget(data, 'fleet.keys-evicted').note).toBe(LOCAL_NOTES['Strata/Workflows']);
    expect(widget(data, 'performance.hit-ratio').note).toBeUndefined();
  });
});

describe('Expression evaluation', () => {
  const spec: DashboardSpec = {
    id: 'performance',
    name: 'Test',
    description: '',
    widgets: [
      {
        id: 'performance.math',
        title: 'math',
        view: 'line',
        periodSeconds: 60,
        unit: 'Count',
        series: [
          metric('req', 'requests', 'Sum', 'req', { visible: false }),
          metric('err', 'errors', 'Sum', 'err', { visible: false }),
          expression('rate', mul(num(100), div(ref('err'), ref('req'))), 'error % (no FILL)'),
          expression('rate_filled', mul(num(100), div(fill0('err'), ref('req'))), 'error % (FILL)'),
          expression('rps', perSecond('req'), 'rps'),
          expression('ratio_of_expr', div(ref('rps'), add(ref('rps'), num(0))), 'expression of an expression'),
        ],
      },
    ],
  };

  it('leaves a point out where an input has none, fills where asked, and rates per step', () => {
    const store = new LocalMetricsStore({ now: () => T0 + 30_000 });
    for (let i = 0; i < 4; i++)
      store.write([emfDocument({ timestamp: T0, dimensions: { Environment: 'local' }, values: { requests: 1 } })]);
    store.write([emfDocument({ timestamp: T0 + 10_000, dimensions: { Environment: 'local' }, values: { requests: 5 } })]);
    store.record({ namespace: 'Strata/Requests', name: 'Errors', unit: 'Count', dimensions: { Environment: 'local' } }, 1, T0);
    const w = dashboardData(store, { environment: 'local', now: T0 + 20_000 }, [spec]).dashboards[0]!.widgets[0]!;
    const byLabel = Object.fromEntries(w.series.map((s) => [s.label, s.points]));
    expect(byLabel['error % (no FILL)']).toEqual([[T0, 25]]);
    expect(byLabel['error % (FILL)']).toEqual([
      [T0, 25],
      [T0 + 10_000, 0],
    ]);
    expect(byLabel.rps).toEqual([
      [T0, 0.4],
      [T0 + 10_000, 0.5],
    ]);
    expect(byLabel['expression of an expression']).toEqual([
      [T0, 1],
      [T0 + 10_000, 1],
    ]);
  });

  it('gives no point for a division by zero', () => {
    const store = new LocalMetricsStore({ now: () => T0 });
    store.record({ namespace: 'Strata/Requests', name: 'Requests', unit: 'Count', dimensions: { Environment: 'local' } }, 0, T0);
    const w = dashboardData(store, { environment: 'local', now: T0 + 10_000 }, [spec]).dashboards[0]!.widgets[0]!;
    expect(w.series.find((s) => s.label === 'error % (FILL)')!.points).toEqual([]);
  });

  it('reads only the environment it is asked for', () => {
    const store = new LocalMetricsStore({ now: () => T0 });
    store.write([emfDocument({ timestamp: T0, dimensions: { Environment: 'dev' }, values: { requests: 3 } })]);
    const w = dashboardData(store, { environment: 'local', now: T0 + 1 }, [spec]).dashboards[0]!.widgets[0]!;
    expect(w.series).toEqual([]);
    expect(w.note).toBe(LOCAL_NOTES['Strata/Requests']);
  });
});

describe('Dashboard routes', () => {
  const opts = { store: new LocalMetricsStore(), environment: 'local' };

  it('serves the page and the data', () => {
    const page = dashboardResponse('GET', '/dashboard', new URLSearchParams(), opts);
    expect(page.statusCode).toBe(200);
    expect(page.headers!['content-type']).toMatch(/text\/html/);
    expect(page.body).toMatch(/<svg|SVG/);
    const json = dashboardResponse('GET', '/dashboard/data', new URLSearchParams('minutes=5'), opts);
    expect(JSON.parse(json.body)).toMatchObject({
      environment: 'local',
      dashboards: [{ id: 'performance' }, { id: 'cost' }, { id: 'fleet' }],
    });
  });

  it('answers bad input with typed errors', () => {
    const bad = dashboardResponse('GET', '/dashboard/data', new URLSearchParams('minutes=0'), opts);
    expect([bad.statusCode, JSON.parse(bad.body).error.code]).toEqual([400, 'VALIDATION_FAILED']);
    const post = dashboardResponse('POST', '/dashboard/data', new URLSearchParams(), opts);
    expect([post.statusCode, JSON.parse(post.body).error.code, post.headers!.allow]).toEqual([
      405,
      'METHOD_NOT_ALLOWED',
      'GET, HEAD',
    ]);
  });
});
