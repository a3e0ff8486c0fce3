/**
 * Evaluates the dashboards of dashboards/ against the local run's metrics (LocalMetricsStore): the same widgets,
 * series and metric-math expressions the Monitoring stack gives CloudWatch, computed here point by point, as JSON
 * for the /dashboard page.
 */
import type { DashboardSpec, DisplayUnit, Expr, MetricSeries, Series, WidgetSpec } from '../../../dashboards/index.js';
import { DASHBOARDS, IMPLIED_DIMENSION } from '../../../dashboards/index.js';
import { METRICS, METRIC_NAMESPACES, type MetricNamespace } from '../../../core/metrics/catalog.js';
import type { LocalMetricsStore, LocalStat } from '../../../core/metrics/local-store.js';

export interface SeriesView {
  label: string;
  /** `[epoch ms, value]`, oldest first (line widgets). */
  points: [number, number][];
  /** The value over the widget's period (number widgets). */
  value?: number;
}

export interface WidgetView {
  id: string;
  title: string;
  view: 'line' | 'number';
  unit: DisplayUnit;
  stacked: boolean;
  yMin?: number;
  yMax?: number;
  width: number;
  series: SeriesView[];
  /** Why nothing is drawn, when nothing is. */
  note?: string;
}

export interface DashboardView {
  id: string;
  name: string;
  description: string;
  widgets: WidgetView[];
}

export interface DashboardData {
  environment: string;
  generatedAt: number;
  /** Resolution of line widgets locally (CloudWatch uses each widget's period). */
  resolutionMs: number;
  fromMs: number;
  toMs: number;
  dashboards: DashboardView[];
}

export interface DashboardDataOptions {
  environment: string;
  /** @default Date.now() */
  now?: number;
  /** Line widgets show at most this much history (less when the run is younger). @default 15 minutes */
  windowMs?: number;
  /** Extra words for widgets without data, per metric namespace (e.g. "no warm tier configured"). */
  notes?: Partial<Record<MetricNamespace, string>>;
}

/** Why a widget of each namespace may be empty in a local run. */
export const LOCAL_NOTES: Readonly<Record<MetricNamespace, string>> = {
  [METRIC_NAMESPACES.requests]: 'no data yet: send some requests',
  [METRIC_NAMESPACES.cost]: 'no data locally: the cost publisher (lambdas/ops) prices AWS usage, and a local run has none',
  [METRIC_NAMESPACES.fleet]: 'no data locally: start with a warm tier (STRATA_WARM_RING_DIR) to see its cache nodes',
  [METRIC_NAMESPACES.workflows]: 'no data locally: published by the Step Functions workflows when they run',
};

interface Timeline {
  steps: number[];
  stepMs: number;
}

type Values = Map<number, number>;

/** The dashboards with every widget evaluated over the local store. */
export function dashboardData(store: LocalMetricsStore, opts: DashboardDataOptions, dashboards: readonly DashboardSpec[] = DASHBOARDS): DashboardData {
  const now = opts.now ?? Date.now();
  const res = store.resolutionMs;
  const oldest = store.oldestPointMs() ?? now;
  const fromMs = Math.floor(Math.max(now - (opts.windowMs ?? 15 * 60_000), oldest) / res) * res;
  const steps: number[] = [];
  for (let t = fromMs; t <= now; t += res) steps.push(t);
  const line: Timeline = { steps, stepMs: res };
  const notes = { ...LOCAL_NOTES, ...opts.notes };
  return {
    environment: opts.environment,
    generatedAt: now,
    resolutionMs: res,
    fromMs,
    toMs: now,
    dashboards: dashboards.map((d) => ({
      id: d.id,
      name: d.name,
      description: d.description,
      widgets: d.widgets.map((w) => widgetView(store, w, opts.environment, w.view === 'line' ? line : numberTimeline(w, now, oldest, res), notes)),
    })),
  };
}

/** A number widget is one step: the widget's period, or the run so far when it is shorter. */
function numberTimeline(w: WidgetSpec, now: number, oldest: number, res: number): Timeline {
  const start = Math.floor(Math.max(now - w.periodSeconds * 1000, oldest) / res) * res;
  return { steps: [start], stepMs: Math.max(res, now - start) };
}

function widgetView(store: LocalMetricsStore, w: WidgetSpec, environment: string, tl: Timeline, notes: Record<MetricNamespace, string>): WidgetView {
  const values = new Map<string, Values>();
  const out: SeriesView[] = [];
  const byId = new Map(w.series.map((s) => [s.id, s] as const));
  const window = { fromMs: tl.steps[0]!, toMs: tl.steps.at(-1)! + tl.stepMs - 1, stepMs: tl.stepMs };

  const metricValues = (s: MetricSeries) => {
    const def = METRICS[s.metric];
    return store.query({ namespace: def.namespace, name: def.name, dimensions: { [IMPLIED_DIMENSION]: environment, ...s.dimensions }, splitBy: s.splitBy }, s.stat as LocalStat, window);
  };

  const resolve = (id: string, seen: Set<string> = new Set()): Values => {
    const known = values.get(id);
    if (known) return known;
    const s = byId.get(id);
    let v: Values = new Map();
    if (s && !seen.has(id)) {
      seen.add(id);
      if (s.kind === 'metric') v = new Map(metricValues(s)[0]?.points ?? []);
      else for (const t of tl.steps) {
        const x = evaluate(s.expression, t, tl.stepMs, (ref) => resolve(ref, seen));
        if (x !== undefined) v.set(t, x);
      }
    }
    values.set(id, v);
    return v;
  };

  for (const s of w.series) {
    if (s.visible === false) continue;
    if (s.kind === 'metric' && s.splitBy) {
      for (const r of metricValues(s)) out.push(view(w, `${s.label} ${r.split}`, new Map(r.points)));
    } else {
      out.push(view(w, s.label, resolve(s.id)));
    }
  }
  const hasData = out.some((s) => s.points.length > 0);
  const base: WidgetView = { id: w.id, title: w.title, view: w.view, unit: w.unit, stacked: !!w.stacked, width: w.width ?? 12, series: hasData ? out : [], ...(w.yMin !== undefined ? { yMin: w.yMin } : {}), ...(w.yMax !== undefined ? { yMax: w.yMax } : {}) };
  return hasData ? base : { ...base, note: notes[widgetNamespace(w)] };
}

function view(w: WidgetSpec, label: string, v: Values): SeriesView {
  const points = [...v.entries()].sort((a, b) => a[0] - b[0]);
  return w.view === 'number' ? { label, points, ...(points.length ? { value: points.at(-1)![1] } : {}) } : { label, points };
}

/** The namespace of a widget's first metric (a widget draws one namespace). */
function widgetNamespace(w: WidgetSpec): MetricNamespace {
  const first = w.series.find((s: Series): s is MetricSeries => s.kind === 'metric');
  return first ? METRICS[first.metric].namespace : METRIC_NAMESPACES.requests;
}

/** One point of an expression; undefined where an input has no point, or on division by zero (as CloudWatch). */
export function evaluate(e: Expr, t: number, stepMs: number, input: (id: string) => Values): number | undefined {
  switch (e.kind) {
    case 'ref':
      return input(e.id).get(t);
    case 'const':
      return e.value;
    case 'fill':
      return input(e.id).get(t) ?? e.value;
    case 'perSecond': {
      const v = input(e.id).get(t);
      return v === undefined ? undefined : v / (stepMs / 1000);
    }
    case 'op': {
      const args = e.args.map((a) => evaluate(a, t, stepMs, input));
      if (args.some((a) => a === undefined)) return undefined;
      const nums = args as number[];
      switch (e.op) {
        case '+':
          return nums.reduce((a, b) => a + b, 0);
        case '*':
          return nums.reduce((a, b) => a * b, 1);
        case '-':
          return nums.slice(1).reduce((a, b) => a - b, nums[0]!);
        case '/': {
          let acc = nums[0]!;
          for (const d of nums.slice(1)) {
            if (d === 0) return undefined;
            acc /= d;
          }
          return acc;
        }
      }
    }
  }
}
