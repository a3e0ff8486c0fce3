import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { Construct } from 'constructs';
import {
  DASHBOARDS,
  dashboardProblems,
  expressionInputs,
  toMetricMath,
  type DashboardSpec,
  type DisplayUnit,
  type MetricSeries,
  type Series,
  type WidgetSpec,
} from '../../dashboards/index.js';
import { METRICS } from '../../core/metrics/metric-catalog.js';
import { check } from './validation.js';

export interface StrataDashboardsProps {
  /** `Environment` dimension value every metric is drawn for. */
  readonly environment: string;
  /** @default DASHBOARDS (dashboards/index.ts) */
  readonly specs?: readonly DashboardSpec[];
  /**
   * Values of `splitBy` dimensions the stack knows (the configured tenants and namespaces, the API's operations):
   * one line each. Any other split dimension (nodes, error codes, workflows) is drawn with a SEARCH expression.
   * @default - every split is a SEARCH
   */
  readonly splitValues?: Readonly<Record<string, readonly string[]>>;
}

/** CloudWatch's dashboard grid is 24 columns wide. */
const GRID_COLUMNS = 24;

/**
 * The dashboards of dashboards/ (renderer-neutral specs over the metric catalog) as CloudWatch dashboards named
 * `Strata-<env>-<name>`: `number` widgets become SingleValueWidgets, `line` widgets GraphWidgets (stacked when the
 * spec says so), expressions MathExpressions whose hidden inputs are the spec's `visible: false` series, and
 * `splitBy` series one metric per known value or a SEARCH with a dynamic label. Widgets are laid out in rows in
 * spec order. A spec with problems (dashboardProblems) stops the synth.
 */
export class StrataDashboards extends Construct {
  readonly dashboards: Readonly<Record<DashboardSpec['id'], cloudwatch.Dashboard>>;

  constructor(scope: Construct, id: string, props: StrataDashboardsProps) {
    super(scope, id);
    const specs = props.specs ?? DASHBOARDS;
    const out = {} as Record<DashboardSpec['id'], cloudwatch.Dashboard>;
    for (const spec of specs) {
      const problems = dashboardProblems(spec);
      check(this, problems.length === 0, `dashboard '${spec.id}' has problems: ${problems.join('; ')}`);
      const dashboard = new cloudwatch.Dashboard(this, pascal(spec.id), {
        dashboardName: `Strata-${props.environment}-${spec.name}`,
        defaultInterval: Duration.hours(spec.widgets.every((w) => w.periodSeconds >= 3600) ? 24 * 7 : 3),
      });
      dashboard.addWidgets(
        new cloudwatch.TextWidget({
          markdown: `## Strata ${props.environment}: ${spec.name}\n${spec.description}`,
          width: GRID_COLUMNS,
          height: 2,
        }),
      );
      for (const row of rows(spec.widgets)) dashboard.addWidgets(...row.map((w) => renderWidget(w, props)));
      out[spec.id] = dashboard;
    }
    this.dashboards = out;
  }
}

/** Widgets packed left to right into rows of at most 24 columns. */
function rows(widgets: readonly WidgetSpec[]): WidgetSpec[][] {
  const out: WidgetSpec[][] = [];
  let width = GRID_COLUMNS;
  for (const w of widgets) {
    const wWidth = w.width ?? 12;
    if (width + wWidth > GRID_COLUMNS) {
      out.push([]);
      width = 0;
    }
    out[out.length - 1]!.push(w);
    width += wWidth;
  }
  return out;
}

function renderWidget(w: WidgetSpec, props: StrataDashboardsProps): cloudwatch.IWidget {
  const period = Duration.seconds(w.periodSeconds);
  const byId = new Map<string, Series>(w.series.map((s) => [s.id, s]));
  const built = new Map<string, cloudwatch.IMetric>();

  // A series as one IMetric (inputs of expressions, and unsplit visible lines); built once per id so an input
  // shared by several expressions is one metric.
  const single = (id: string): cloudwatch.IMetric => {
    const done = built.get(id);
    if (done) return done;
    const s = byId.get(id)!;
    const m: cloudwatch.IMetric =
      s.kind === 'metric'
        ? catalogMetric(s, props.environment, period, {})
        : new cloudwatch.MathExpression({
            expression: toMetricMath(s.expression),
            usingMetrics: Object.fromEntries(expressionInputs(s.expression).map((i) => [i, single(i)])),
            label: s.label,
            period,
          });
    built.set(id, m);
    return m;
  };

  const lines: cloudwatch.IMetric[] = [];
  for (const s of w.series) {
    if (s.visible === false) continue;
    if (s.kind === 'metric' && s.splitBy) lines.push(...splitMetrics(s, props, period));
    else lines.push(single(s.id));
  }

  const size = { width: w.width ?? 12, height: w.height ?? 6 };
  if (w.view === 'number') {
    return new cloudwatch.SingleValueWidget({ title: w.title, metrics: lines, ...size, period, fullPrecision: w.unit === 'USD' });
  }
  return new cloudwatch.GraphWidget({
    title: w.title,
    left: lines,
    stacked: w.stacked ?? false,
    view: cloudwatch.GraphWidgetView.TIME_SERIES,
    period,
    leftYAxis: {
      label: axisLabel(w.unit),
      showUnits: false,
      ...(w.yMin !== undefined ? { min: w.yMin } : {}),
      ...(w.yMax !== undefined ? { max: w.yMax } : {}),
    },
    ...size,
  });
}

function catalogMetric(
  s: MetricSeries,
  environment: string,
  period: Duration,
  extra: Record<string, string>,
  label = s.label,
): cloudwatch.Metric {
  const def = METRICS[s.metric];
  return new cloudwatch.Metric({
    namespace: def.namespace,
    metricName: def.name,
    dimensionsMap: { Environment: environment, ...s.dimensions, ...extra },
    statistic: s.stat,
    period,
    label,
  });
}

/** A split series: one metric per known value of its dimension, else one SEARCH over all values. */
function splitMetrics(s: MetricSeries, props: StrataDashboardsProps, period: Duration): cloudwatch.IMetric[] {
  const dim = s.splitBy!;
  const known = props.splitValues?.[dim];
  if (known && known.length > 0)
    return known.map((v) => catalogMetric(s, props.environment, period, { [dim]: v }, `${s.label} ${v}`));
  const def = METRICS[s.metric];
  const names = ['Environment', ...Object.keys(s.dimensions ?? {}), dim];
  const filters = [
    `MetricName="${def.name}"`,
    `Environment="${props.environment}"`,
    ...Object.entries(s.dimensions ?? {}).map(([k, v]) => `${k}="${v}"`),
  ];
  return [
    new cloudwatch.MathExpression({
      expression: `SEARCH('{${def.namespace},${names.join(',')}} ${filters.join(' ')}', '${s.stat}', ${period.toSeconds()})`,
      usingMetrics: {},
      label: `${s.label} \${PROP('Dim.${dim}')}`,
      period,
    }),
  ];
}

function axisLabel(unit: DisplayUnit): string {
  return unit === 'Count/Second' ? 'per second' : unit === 'Milliseconds' ? 'ms' : unit === 'Percent' ? '%' : unit;
}

function pascal(id: string): string {
  return id.replace(/(^|[-_.])([a-z0-9])/g, (_m, _s, c: string) => c.toUpperCase());
}
