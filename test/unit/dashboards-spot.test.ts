import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { StrataDashboards } from '../../cdk/constructs/strata-dashboards.js';
import {
  COST_DASHBOARD,
  dashboardProblems,
  toMetricMath,
  type ExpressionSeries,
  type WidgetSpec,
} from '../../dashboards/index.js';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { METRICS } from '../../core/metrics/metric-catalog.js';
import { LOCAL_FOOTNOTES, dashboardData, type WidgetView } from '../../scripts/local/dashboard/data.js';

/**
 * The Cost dashboard's spot widgets ("Spot savings", "Spot nodes"): the spec, its CloudWatch rendering (the
 * StrataDashboards construct alone, in a bare stack) and the local dashboard's values.
 *
 * AWS rules used here, from CloudWatch's documentation:
 * - metric math `FILL(m, value)` fills the missing values of a series with `value`, and an id (of a metric or an
 *   expression) starts with a lower-case letter and holds letters, digits and underscores
 *   (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html);
 * - in a dashboard body, a metric that only feeds an expression carries `"visible": false` and the expression is a
 *   row `[{ "expression": ..., "id": ..., "label": ... }]`; widths are on a 24-column grid
 *   (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html).
 */

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);
const spotWidgets = (): WidgetSpec[] => COST_DASHBOARD.widgets.filter((w) => w.id.startsWith('cost.spot-'));

describe('Cost dashboard: spot widgets (spec)', () => {
  it('draws spot savings in USD a month and the spot node count, each as FILL(..., 0) of the published metric', () => {
    expect(dashboardProblems(COST_DASHBOARD)).toEqual([]);
    const [savings, nodes] = spotWidgets();
    expect([savings!.id, savings!.title, savings!.unit]).toEqual(['cost.spot-savings', 'Spot savings (USD / month)', 'USD']);
    expect([nodes!.id, nodes!.title, nodes!.unit]).toEqual(['cost.spot-nodes', 'Spot nodes', 'Count']);
    for (const [w, key] of [
      [savings!, 'spotSavingsMonthly'],
      [nodes!, 'spotNodes'],
    ] as const) {
      const input = w.series.find((s) => s.kind === 'metric')!;
      expect(input).toMatchObject({ metric: key, visible: false });
      const line = w.series.find((s): s is ExpressionSeries => s.kind === 'expression')!;
      expect(toMetricMath(line.expression)).toBe(`FILL(${input.id},0)`);
      expect([w.width, w.yMin, w.periodSeconds]).toEqual([12, 0, 3600]);
    }
  });
});

describe('Cost dashboard: spot widgets in CloudWatch (StrataDashboards)', () => {
  const stack = new Stack(new App(), 'Dashboards');
  new StrataDashboards(stack, 'Dashboards', { environment: 'dev', specs: [COST_DASHBOARD] });
  const [board] = Object.values(Template.fromStack(stack).findResources('AWS::CloudWatch::Dashboard')) as {
    Properties: { DashboardName: string; DashboardBody: unknown };
  }[];
  // The body is a Fn::Join (the region is a token): joined here with a placeholder for each intrinsic.
  const raw = board!.Properties.DashboardBody as string | { 'Fn::Join': [string, unknown[]] };
  const text =
    typeof raw === 'string' ? raw : raw['Fn::Join'][1].map((p) => (typeof p === 'string' ? p : 'TOKEN')).join(raw['Fn::Join'][0]);
  const body = JSON.parse(text) as {
    widgets: { type: string; width: number; properties: { title?: string; metrics?: unknown[][] } }[];
  };

  it('renders each spot widget as a graph of the hidden metric and its FILL', () => {
    expect(board!.Properties.DashboardName).toBe('Strata-dev-Cost');
    for (const [title, def] of [
      ['Spot savings (USD / month)', METRICS.spotSavingsMonthly],
      ['Spot nodes', METRICS.spotNodes],
    ] as const) {
      const w = body.widgets.find((x) => x.properties.title === title)!;
      expect(w.type).toBe('metric');
      expect(w.width).toBe(12);
      const rows = w.properties.metrics!;
      const expr = rows.find((r) => typeof r[0] === 'object')![0] as { expression: string; id: string; label: string };
      expect(expr.expression).toMatch(/^FILL\([a-z][a-zA-Z0-9_]*,0\)$/);
      const hidden = rows.find((r) => r[0] === def.namespace)!;
      expect(hidden.slice(0, 4)).toEqual([def.namespace, def.name, 'Environment', 'dev']);
      const opts = hidden.at(-1) as { visible?: boolean; id?: string };
      expect(opts.visible).toBe(false);
      expect(expr.expression).toBe(`FILL(${opts.id},0)`);
    }
  });
});

describe('Cost dashboard: spot widgets locally', () => {
  const widget = (id: string, data: ReturnType<typeof dashboardData>): WidgetView =>
    data.dashboards.flatMap((d) => d.widgets).find((w) => w.id === id)!;

  it('shows 0 with a note that a local run has no spot capacity', () => {
    const store = new LocalMetricsStore({ now: () => T0 + 5_000 });
    // A local run's modelled cost, as scripts/local/cost-model.ts records it (no spot figure: it prices on demand).
    store.record(
      { namespace: 'Strata/Cost', name: 'TotalCostPerHour', unit: 'None', dimensions: { Environment: 'local' } },
      0.2,
      T0,
    );
    const data = dashboardData(store, { environment: 'local', now: T0 + 30_000 });
    for (const id of ['cost.spot-savings', 'cost.spot-nodes']) {
      const w = widget(id, data);
      expect(w.note).toBeUndefined();
      expect(w.footnote).toBe(LOCAL_FOOTNOTES[id]);
      expect(w.footnote).toMatch(/^no spot capacity locally: 0\./);
      expect(w.series).toHaveLength(1);
      expect(w.series[0]!.points.length).toBeGreaterThan(0);
      expect(w.series[0]!.points.every(([, v]) => v === 0)).toBe(true);
      expect(w.series[0]!.latest).toBe(0);
    }
    // Other widgets carry no footnote.
    expect(widget('cost.per-tier', data).footnote).toBeUndefined();
  });

  it('draws a recorded value where there is one (a run that did record spot figures)', () => {
    const store = new LocalMetricsStore({ now: () => T0 + 5_000 });
    const def = METRICS.spotSavingsMonthly;
    store.record({ namespace: def.namespace, name: def.name, unit: def.unit, dimensions: { Environment: 'local' } }, 42, T0);
    const w = widget('cost.spot-savings', dashboardData(store, { environment: 'local', now: T0 + 10_000 }));
    expect(w.series[0]!.points).toEqual([[T0, 42]]);
  });
});
