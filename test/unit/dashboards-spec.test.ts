import type { DashboardSpec, MetricSeries } from '../../dashboards/index.js';
import {
  COST_DASHBOARD,
  DASHBOARDS,
  FLEET_DASHBOARD,
  PERFORMANCE_DASHBOARD,
  add,
  dashboardProblems,
  div,
  expressionInputs,
  fill0,
  metric,
  metricSeries,
  mul,
  num,
  perSecond,
  ref,
  referencedMetricKeys,
  seriesDimensionNames,
  sub,
  toMetricMath,
} from '../../dashboards/index.js';
import { METRICS, METRIC_NAMESPACES, SERVED_TIERS, type MetricKey } from '../../core/metrics/metric-catalog.js';
import { backgroundErrorLog, coordinatorEventLog } from '../../core/composition/api-context.js';
import { mixedTraffic, startTraffic } from './metrics-traffic.js';

function allMetricSeries(dashboards: readonly DashboardSpec[] = DASHBOARDS): { widget: string; s: MetricSeries }[] {
  return dashboards.flatMap((d) => d.widgets.flatMap((w) => metricSeries(w).map((s) => ({ widget: w.id, s }))));
}

describe('Dashboards as data', () => {
  it('are sound: catalog metrics with published dimension sets, valid ids, periods and expressions', () => {
    for (const d of DASHBOARDS) expect([d.id, dashboardProblems(d)]).toEqual([d.id, []]);
  });

  it('reference only catalog metrics', () => {
    const keys = referencedMetricKeys();
    expect(keys.length).toBeGreaterThan(10);
    for (const k of keys) expect(METRICS[k]).toBeDefined();
  });

  it('reference every Strata/Requests metric with a dimension set the API handlers actually emit', async () => {
    // The publisher of Strata/Requests is the API handlers' metrics middleware: drive it and collect what it emits.
    const traffic = startTraffic({ namespaces: ['app'] });
    try {
      await mixedTraffic(traffic);
      // The coordinator's own records (not per request) go to the same sink: one event of each kind.
      const events = coordinatorEventLog({ environment: 'test', log: () => {}, schedule: null, intervalMs: 1 });
      events({ type: 'hot-copy-unknown', ns: 'app', error: new Error('stalled') });
      events({ type: 'bump', shards: 1, writes: 1, incarnation: false, version: 2 });
      events({ type: 'write-back-lost', count: 1 });
      backgroundErrorLog({ environment: 'test', log: () => {}, schedule: null })(new Error('down'), 'promotion');
    } finally {
      await traffic.close();
    }
    const emitted = new Set<string>();
    for (const doc of traffic.docs) {
      for (const d of doc._aws.CloudWatchMetrics)
        for (const m of d.Metrics)
          for (const set of d.Dimensions) emitted.add(`${d.Namespace} ${m.Name} [${[...set].sort().join(',')}]`);
    }
    const wanted = allMetricSeries().filter(({ s }) => METRICS[s.metric].namespace === METRIC_NAMESPACES.requests);
    expect(wanted.length).toBeGreaterThan(20);
    for (const { widget, s } of wanted) {
      const def = METRICS[s.metric];
      const key = `${def.namespace} ${def.name} [${seriesDimensionNames(s).join(',')}]`;
      expect([widget, s.id, emitted.has(key) ? 'emitted' : key]).toEqual([widget, s.id, 'emitted']);
    }
    // The tiers the widgets name are the catalog's, and those this traffic reaches (no L1, warm tier or origin
    // here) really appear as the Tier of the metric in question.
    for (const { s } of wanted) {
      const tier = s.dimensions?.Tier;
      if (tier === undefined) continue;
      expect(SERVED_TIERS).toContain(tier);
      if (['hot', 'cold', 'none'].includes(tier))
        expect([s.id, traffic.docs.some((doc) => doc.Tier === tier && doc[METRICS[s.metric].name] !== undefined)]).toEqual([
          s.id,
          true,
        ]);
    }
  });

  it('leave the other namespaces to their publishers, listing what each must emit', () => {
    // Strata/Cost and Strata/Fleet: the cost publisher's tests; Strata/Workflows: the workflow steps'.
    const cost = referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.cost);
    const fleet = referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.fleet);
    const workflows = referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.workflows);
    expect(cost).toEqual(expect.arrayContaining<MetricKey>(['costPerHour', 'projectedMonthlyCost', 'costPer1000Hits']));
    expect(fleet).toEqual(expect.arrayContaining<MetricKey>(['nodes', 'nodeFill', 'migrationsInProgress']));
    for (const k of [...cost, ...fleet, ...workflows]) expect(Object.keys(METRICS)).toContain(k);
    expect(new Set([...cost, ...fleet, ...workflows, ...referencedMetricKeys(DASHBOARDS, METRIC_NAMESPACES.requests)])).toEqual(
      new Set(referencedMetricKeys()),
    );
  });

  it('Performance shows hit ratio per tier, p50 and p99 per tier, throughput and errors', () => {
    const widgets = PERFORMANCE_DASHBOARD.widgets;
    const hitRatio = widgets.find((w) => w.id === 'performance.hit-ratio')!;
    const ratioLines = hitRatio.series.filter((s) => s.kind === 'expression' && s.visible !== false).map((s) => s.label);
    expect(ratioLines).toEqual(['all tiers', 'l1', 'hot', 'warm', 'cold', 'origin']);
    for (const p of ['p50', 'p99']) {
      const w = widgets.find((x) => x.id === `performance.latency-${p}`)!;
      expect(metricSeries(w).map((s) => [s.metric, s.stat, s.dimensions?.Tier])).toEqual(
        ['l1', 'hot', 'warm', 'cold', 'origin', 'none'].map((t) => ['latency', p, t]),
      );
    }
    expect(metricSeries(widgets.find((w) => w.id === 'performance.throughput')!)[0]).toMatchObject({
      metric: 'requests',
      stat: 'Sum',
      splitBy: 'Operation',
    });
    expect(metricSeries(widgets.find((w) => w.id === 'performance.errors')!)[0]).toMatchObject({
      metric: 'errors',
      stat: 'Sum',
      splitBy: 'ErrorCode',
    });
  });

  it('Cost shows cost per tier and per tenant, the projected month and $ per 1,000 hits', () => {
    const series = allMetricSeries([COST_DASHBOARD]).map(({ s }) => s);
    expect(series.filter((s) => s.metric === 'costPerHour' && s.dimensions?.Tier).map((s) => s.dimensions!.Tier)).toEqual([
      'hot',
      'warm',
      'cold',
      'api',
      'workflows',
      'monitoring',
    ]);
    expect(series.some((s) => s.metric === 'costPerHour' && s.splitBy === 'Tenant')).toBe(true);
    expect(series.some((s) => s.metric === 'projectedMonthlyCost')).toBe(true);
    expect(series.some((s) => s.metric === 'costPer1000Hits')).toBe(true);
  });

  it('Fleet shows nodes, fill per node and migrations in progress', () => {
    const series = allMetricSeries([FLEET_DASHBOARD]).map(({ s }) => s);
    expect(series.some((s) => s.metric === 'nodes')).toBe(true);
    expect(series.some((s) => s.metric === 'nodeFill' && s.splitBy === 'Node')).toBe(true);
    expect(series.some((s) => s.metric === 'migrationsInProgress')).toBe(true);
  });

  it('have stable, unique widget ids across dashboards', () => {
    const ids = DASHBOARDS.flatMap((d) => d.widgets.map((w) => w.id));
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('dashboardProblems', () => {
  const base = { id: 'performance' as const, name: 'P', description: '' };

  it('flags a dimension combination the catalog does not publish', () => {
    const d: DashboardSpec = {
      ...base,
      widgets: [
        {
          id: 'performance.x',
          title: 'x',
          view: 'line',
          periodSeconds: 60,
          unit: 'Count',
          series: [metric('m', 'misses', 'Sum', 'm', { dimensions: { Tier: 'hot' } })],
        },
      ],
    };
    expect(dashboardProblems(d).join('\n')).toMatch(/Misses is not published with dimensions \[Environment, Tier\]/);
  });

  it('flags a series that names Environment or fixes the dimension it splits by', () => {
    const d: DashboardSpec = {
      ...base,
      widgets: [
        {
          id: 'performance.x',
          title: 'x',
          view: 'line',
          periodSeconds: 60,
          unit: 'Count',
          series: [
            metric('a', 'requests', 'Sum', 'a', { dimensions: { Environment: 'prod' } }),
            metric('b', 'requests', 'Sum', 'b', { dimensions: { Operation: 'get' }, splitBy: 'Operation' }),
          ],
        },
      ],
    };
    const problems = dashboardProblems(d).join('\n');
    expect(problems).toMatch(/a: names Environment/);
    expect(problems).toMatch(/b: splits by Operation and fixes it too/);
  });

  it('flags expressions that read unknown or split series, bad ids and periods', () => {
    const d: DashboardSpec = {
      ...base,
      widgets: [
        {
          id: 'performance.x',
          title: 'x',
          view: 'line',
          periodSeconds: 90,
          unit: 'Count',
          series: [
            metric('split', 'requests', 'Sum', 'r', { splitBy: 'Operation' }),
            metric('Bad-Id', 'requests', 'Sum', 'r'),
            { kind: 'expression', id: 'e', expression: add(ref('split'), ref('ghost')), label: 'e' },
          ],
        },
        {
          id: 'wrong.prefix',
          title: 'y',
          view: 'number',
          periodSeconds: 60,
          unit: 'Count',
          series: [metric('r', 'requests', 'Sum', 'r', { visible: false })],
        },
      ],
    };
    const problems = dashboardProblems(d).join('\n');
    expect(problems).toMatch(/period 90s/);
    expect(problems).toMatch(/series id 'Bad-Id'/);
    expect(problems).toMatch(/reads unknown series 'ghost'/);
    expect(problems).toMatch(/reads 'split', which is split by Operation/);
    expect(problems).toMatch(/widget ids start with 'performance.'/);
    expect(problems).toMatch(/no visible series/);
  });
});

describe('Metric math', () => {
  it('prints expressions in CloudWatch syntax', () => {
    const lookups = add(fill0('hits'), fill0('misses'));
    expect(toMetricMath(mul(num(100), div(sub(ref('lookups'), fill0('misses')), ref('lookups'))))).toBe(
      '100*((lookups-FILL(misses,0))/lookups)',
    );
    expect(toMetricMath(mul(num(100), div(fill0('hits'), lookups)))).toBe('100*(FILL(hits,0)/(FILL(hits,0)+FILL(misses,0)))');
    expect(toMetricMath(perSecond('requests'))).toBe('requests/PERIOD(requests)');
    expect(toMetricMath(div(perSecond('a'), num(2)))).toBe('(a/PERIOD(a))/2');
  });

  it('lists the inputs of an expression once each', () => {
    expect(expressionInputs(add(fill0('a'), ref('b'), div(ref('a'), perSecond('c'))))).toEqual(['a', 'b', 'c']);
  });
});
