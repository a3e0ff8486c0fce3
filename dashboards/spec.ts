/**
 * The vocabulary of Strata's dashboards as data: a dashboard is a list of widgets, a widget a list of series, a
 * series either a metric of the catalog (core/metrics/metric-catalog.ts) with a statistic, or a metric-math
 * expression over other series of the same widget. Nothing here knows CloudWatch's or the browser's drawing API:
 * the Monitoring stack turns these specs into `cloudwatch.Dashboard` widgets, the local server draws them as SVG.
 */
import type { MetricKey } from '../core/metrics/metric-catalog.js';

/** Statistics a series may ask for (CloudWatch names; the local dashboard computes the same ones). */
export const STATS = ['Sum', 'Average', 'Minimum', 'Maximum', 'SampleCount', 'p50', 'p90', 'p99'] as const;
export type Stat = (typeof STATS)[number];

/**
 * Every Strata metric carries an `Environment` dimension; a spec never names it. The renderer adds it with the
 * environment it draws (`dev`/`staging`/`prod` in AWS, `local` for `npm start`).
 */
export const IMPLIED_DIMENSION = 'Environment';

/** A metric of the catalog, drawn with one statistic. */
export interface MetricSeries {
  readonly kind: 'metric';
  /** Id that expressions use; matches `^[a-z][a-zA-Z0-9_]*$` (CloudWatch metric-math rule), unique in its widget. */
  readonly id: string;
  readonly metric: MetricKey;
  readonly stat: Stat;
  /**
   * Fixed dimension values besides `Environment`. Together with `Environment` (and `splitBy`) they name exactly
   * one of the metric's dimension sets in the catalog (a test checks it).
   * @default - none: the metric's `[Environment]` set
   */
  readonly dimensions?: Readonly<Record<string, string>>;
  /**
   * One line per value of this dimension (`Tenant`, `Node`, `Operation`, ...), for dimensions whose values are
   * not known when the spec is written. A CloudWatch renderer uses a `SEARCH` expression or the values it knows
   * (e.g. the configured tenants); the local dashboard draws every value it has seen. Such a series cannot be an
   * input of an expression.
   * @default - one line
   */
  readonly splitBy?: string;
  /** Legend text; with `splitBy`, the dimension value is appended. */
  readonly label: string;
  /** `false` for a series that only feeds an expression. @default true */
  readonly visible?: boolean;
}

/**
 * Metric-math expression tree. `toMetricMath` prints it in CloudWatch syntax; the local dashboard evaluates it
 * point by point. Division by zero gives no point (as in CloudWatch).
 */
export type Expr =
  | { readonly kind: 'ref'; readonly id: string }
  | { readonly kind: 'const'; readonly value: number }
  | { readonly kind: 'op'; readonly op: '+' | '-' | '*' | '/'; readonly args: readonly Expr[] }
  /** `FILL(id, value)`: a period without data counts as `value` (sums over tiers that saw no traffic). */
  | { readonly kind: 'fill'; readonly id: string; readonly value: number }
  /** `id / PERIOD(id)`: a per-period Sum as a rate per second, whatever the period. */
  | { readonly kind: 'perSecond'; readonly id: string };

/** A derived line (hit ratio, error rate, requests per second). */
export interface ExpressionSeries {
  readonly kind: 'expression';
  readonly id: string;
  readonly expression: Expr;
  readonly label: string;
  /** `false` for an intermediate result other expressions use. @default true */
  readonly visible?: boolean;
}

export type Series = MetricSeries | ExpressionSeries;

/** What the y axis (or the number) shows; `USD` for the cost metrics, whose catalog unit is `None`. */
export type DisplayUnit = 'Count' | 'Count/Second' | 'Percent' | 'Milliseconds' | 'Bytes' | 'USD';

export interface WidgetSpec {
  /** Stable id, `<dashboard>.<widget>` (renderers may derive construct ids from it: do not rename lightly). */
  readonly id: string;
  readonly title: string;
  /** `line`: a time series chart; `number`: the latest value of each visible series. */
  readonly view: 'line' | 'number';
  /** Lines stacked as areas (parts of a total, e.g. cost per tier). @default false */
  readonly stacked?: boolean;
  /** CloudWatch period of every series. The local dashboard uses its own, shorter, resolution. */
  readonly periodSeconds: number;
  readonly unit: DisplayUnit;
  /** Y axis bounds for line widgets. @default - automatic */
  readonly yMin?: number;
  readonly yMax?: number;
  /** Width on CloudWatch's 24-column grid. @default 12 */
  readonly width?: number;
  /** Height in grid rows. @default 6 */
  readonly height?: number;
  readonly series: readonly Series[];
}

export interface DashboardSpec {
  /** Stable id; the CloudWatch dashboard is named `Strata-<env>-<name>`. */
  readonly id: 'performance' | 'cost' | 'fleet';
  readonly name: string;
  readonly description: string;
  readonly widgets: readonly WidgetSpec[];
}

// ---------------------------------------------------------------- builders (keep the dashboards readable)

/** A catalog metric with a statistic. */
export function metric(
  id: string,
  key: MetricKey,
  stat: Stat,
  label: string,
  opts: { dimensions?: Record<string, string>; splitBy?: string; visible?: boolean } = {},
): MetricSeries {
  return { kind: 'metric', id, metric: key, stat, label, ...opts };
}

export function expression(id: string, expr: Expr, label: string, opts: { visible?: boolean } = {}): ExpressionSeries {
  return { kind: 'expression', id, expression: expr, label, ...opts };
}

export const ref = (id: string): Expr => ({ kind: 'ref', id });
export const num = (value: number): Expr => ({ kind: 'const', value });
export const add = (...args: Expr[]): Expr => ({ kind: 'op', op: '+', args });
export const sub = (a: Expr, b: Expr): Expr => ({ kind: 'op', op: '-', args: [a, b] });
export const mul = (...args: Expr[]): Expr => ({ kind: 'op', op: '*', args });
export const div = (a: Expr, b: Expr): Expr => ({ kind: 'op', op: '/', args: [a, b] });
export const fill0 = (id: string): Expr => ({ kind: 'fill', id, value: 0 });
export const perSecond = (id: string): Expr => ({ kind: 'perSecond', id });

/** Prints an expression in CloudWatch metric-math syntax, e.g. `100*FILL(hot,0)/(FILL(hot,0)+FILL(misses,0))`. */
export function toMetricMath(e: Expr): string {
  switch (e.kind) {
    case 'ref':
      return e.id;
    case 'const':
      return String(e.value);
    case 'fill':
      return `FILL(${e.id},${e.value})`;
    case 'perSecond':
      return `${e.id}/PERIOD(${e.id})`;
    case 'op':
      return e.args.map((a) => (a.kind === 'op' || a.kind === 'perSecond' ? `(${toMetricMath(a)})` : toMetricMath(a))).join(e.op);
  }
}

/** Ids of the series an expression reads. */
export function expressionInputs(e: Expr): string[] {
  switch (e.kind) {
    case 'ref':
    case 'fill':
    case 'perSecond':
      return [e.id];
    case 'const':
      return [];
    case 'op':
      return [...new Set(e.args.flatMap(expressionInputs))];
  }
}
