/**
 * Evaluates the dashboards of dashboards/ against the local run's metrics (LocalMetricsStore): the same widgets,
 * series and metric-math expressions the Monitoring stack gives CloudWatch, computed here point by point, as JSON
 * for the /dashboard page.
 *
 * Every number is about complete buckets of the store's resolution (10 s by default): a line ends with the last
 * bucket that is over, a number widget shows that same bucket, and a legend shows each line's value in it, so the
 * headline and the legend are the same quantity. A bucket still filling would read low (half a bucket of requests
 * as a rate for the whole bucket), so it is left out until it ends.
 */
import type { DisplayUnit, Expr } from '../../../dashboards/index.js';
import { IMPLIED_DIMENSION } from '../../../dashboards/index.js';
import { METRICS, METRIC_NAMESPACES, type MetricKey, type MetricNamespace } from '../../../core/metrics/metric-catalog.js';
import type { LocalMetricsStore, LocalStat } from '../../../core/metrics/local-store.js';
import { LOCAL_DASHBOARDS, LOCAL_METRICS, LOCAL_WORKFLOWS_NAMESPACE } from './local-widgets.js';
import type { AnyMetricSeries, LocalDashboardSpec, LocalMetricKey, LocalWidgetSpec } from './local-widgets.js';
import type { FiringRow, PolicyInForce } from './policy.js';

export type { FiringRow, PolicyInForce } from './policy.js';

export interface SeriesView {
  label: string;
  /** `[start of bucket (epoch ms), value]`, oldest first, buckets without a value left out (line widgets). */
  points: [number, number][];
  /** The value in the latest complete bucket (the number of a number widget, the legend of a line); absent: none. */
  latest?: number;
  /** Sum over the points drawn, for per-bucket counts and bytes (the legend's "N in the window"). */
  total?: number;
  /** Same as `latest`, for number widgets (kept for readers of the JSON). */
  value?: number;
}

/** One row of the recent-executions list. */
export interface ExecutionRow {
  execution: string;
  workflow: string;
  status: string;
  startedAt: string;
  stoppedAt?: string;
  /** Percent done (0-100), when the steps have written progress. */
  percent?: number;
  done?: number;
  total?: number;
  unit?: string;
}

export interface WidgetView {
  id: string;
  title: string;
  view: 'line' | 'number' | 'executions' | 'firings';
  unit: DisplayUnit;
  stacked: boolean;
  yMin?: number;
  yMax?: number;
  width: number;
  series: SeriesView[];
  /**
   * Set when each value is a Sum per bucket (counts, bytes): the bucket width in seconds, so values read
   * "N per 10 s". Absent for rates, percentages, latencies and gauges.
   */
  perSeconds?: number;
  /** Values come from the cost model, not from a bill (the Cost dashboard locally). */
  modelled?: boolean;
  /** `executions` widgets: newest first. */
  executions?: ExecutionRow[];
  /** `firings` widgets: the background evaluator's firings, newest first. */
  firings?: FiringRow[];
  /** `firings` widgets: the policy in force, when this run has a policy store. */
  policy?: PolicyInForce;
  /** Why nothing is drawn, when nothing is. */
  note?: string;
  /** What to know about the values drawn, shown under them (e.g. that a local run has no spot capacity). */
  footnote?: string;
}

export interface DashboardView {
  id: string;
  name: string;
  description: string;
  /** What the local values of this dashboard are (e.g. modelled costs), shown above its widgets. */
  caption?: string;
  widgets: WidgetView[];
}

export interface DashboardData {
  environment: string;
  generatedAt: number;
  /** Width of a bucket: the resolution of every local value (CloudWatch uses each widget's period). */
  resolutionMs: number;
  /** The line widgets' range: from the first bucket drawn to the end of the latest complete one. */
  fromMs: number;
  toMs: number;
  /** The latest complete bucket, `[start, end)`: what number widgets and legends show; absent before one ended. */
  latest?: { fromMs: number; toMs: number };
  dashboards: DashboardView[];
}

/** Extra, per-dashboard, wording for the local page (e.g. that costs are modelled). */
export interface DashboardCaption {
  caption: string;
  /** Marks the dashboard's widgets as modelled. */
  modelled?: boolean;
}

export interface DashboardDataOptions {
  environment: string;
  /** @default Date.now() */
  now?: number;
  /** Show the dashboards as they were at this time (only buckets that ended by then). @default now */
  until?: number;
  /** Line widgets show at most this much history (less when the run is younger). @default 15 minutes */
  windowMs?: number;
  /** Extra words for widgets without data, per metric namespace (e.g. "no warm tier configured"). */
  notes?: Partial<Record<MetricNamespace | typeof LOCAL_WORKFLOWS_NAMESPACE, string>>;
  /** Per dashboard id. */
  captions?: Partial<Record<string, DashboardCaption>>;
  /** Footnotes per widget id, over {@link LOCAL_FOOTNOTES}. */
  footnotes?: Partial<Record<string, string>>;
  /** Rows of `executions` widgets (newest first); absent: the run has no workflows. */
  executions?: ExecutionRow[];
  /** Rows of `firings` widgets (newest first); absent: no background evaluator runs in this runtime. */
  firings?: FiringRow[];
  /** The policy in force, named by `firings` widgets; absent: the run has no policy store. */
  policy?: PolicyInForce;
}

/** Why a widget of each namespace may be empty in a local run. */
export const LOCAL_NOTES: Readonly<Record<MetricNamespace | typeof LOCAL_WORKFLOWS_NAMESPACE, string>> = {
  [METRIC_NAMESPACES.requests]: 'no data yet: send some requests (values appear once their bucket is over)',
  [METRIC_NAMESPACES.cost]: 'no data locally: this run has no cost model attached',
  [METRIC_NAMESPACES.fleet]:
    'no data locally: start with a warm tier (STRATA_LOCAL_NODES=3, or STRATA_WARM_RING_DIR) to see its nodes',
  [METRIC_NAMESPACES.workflows]:
    'no data yet: published by the workflow steps as they run (STRATA_LOCAL_NODES=3 npm start runs them)',
  [LOCAL_WORKFLOWS_NAMESPACE]:
    'no workflow executions yet (STRATA_LOCAL_NODES=3 npm start, then npx strata workflow start scale-out)',
};

/**
 * What the local values of some widgets are, shown under them. A local run buys no capacity: every node it prices
 * (scripts/local/cost-model.ts) is on demand, so spot saves nothing here and the spot widgets draw their FILL of 0.
 */
export const LOCAL_FOOTNOTES: Readonly<Record<string, string>> = {
  'cost.spot-savings':
    'no spot capacity locally: 0. In AWS: what the running spot nodes would cost on demand minus their assumed spot price (docs/COST.md, "Spot")',
  'cost.spot-nodes': 'no spot capacity locally: 0. In AWS: running cache nodes EC2 reports as spot instances',
};

/** What a `firings` widget says when it lists nothing. */
export const FIRINGS_NOTES = {
  noEvaluator: 'no background evaluator runs in this runtime, so no background rule fires here (npm start runs one)',
  none: 'no background rule has fired yet',
} as const;

interface Timeline {
  steps: number[];
  stepMs: number;
}

type Values = Map<number, number>;

interface MetricRef {
  namespace: string;
  name: string;
}

function metricRef(key: MetricKey | LocalMetricKey): MetricRef {
  return (METRICS as Record<string, MetricRef>)[key] ?? LOCAL_METRICS[key as LocalMetricKey];
}

/** The dashboards with every widget evaluated over the local store. */
export function dashboardData(
  store: LocalMetricsStore,
  opts: DashboardDataOptions,
  dashboards: readonly LocalDashboardSpec[] = LOCAL_DASHBOARDS,
): DashboardData {
  const now = opts.now ?? Date.now();
  const res = store.resolutionMs;
  // End of the latest complete bucket: `until` (or now) rounded down to a bucket boundary.
  const endMs = Math.floor(Math.min(opts.until ?? now, now) / res) * res;
  const oldest = store.oldestPointMs();
  const fromMs = Math.min(endMs, Math.floor(Math.max(endMs - (opts.windowMs ?? 15 * 60_000), oldest ?? endMs) / res) * res);
  const steps: number[] = [];
  for (let t = fromMs; t + res <= endMs; t += res) steps.push(t);
  const line: Timeline = { steps, stepMs: res };
  const latest: Timeline = { steps: steps.length ? [steps.at(-1)!] : [], stepMs: res };
  const notes = { ...LOCAL_NOTES, ...opts.notes };
  const footnotes: Partial<Record<string, string>> = { ...LOCAL_FOOTNOTES, ...opts.footnotes };
  return {
    environment: opts.environment,
    generatedAt: now,
    resolutionMs: res,
    fromMs,
    toMs: endMs,
    ...(steps.length ? { latest: { fromMs: endMs - res, toMs: endMs } } : {}),
    dashboards: dashboards.map((d) => {
      const caption = opts.captions?.[d.id];
      return {
        id: d.id,
        name: d.name,
        description: d.description,
        ...(caption ? { caption: caption.caption } : {}),
        widgets: d.widgets.map((w) => {
          const v =
            w.view === 'executions'
              ? executionsView(w, opts.executions, notes)
              : w.view === 'firings'
                ? firingsView(w, opts.firings, opts.policy)
                : widgetView(store, w, opts.environment, w.view === 'line' ? line : latest, notes);
          const footnote = footnotes[w.id];
          return { ...v, ...(caption?.modelled ? { modelled: true } : {}), ...(footnote ? { footnote } : {}) };
        }),
      };
    }),
  };
}

function baseView(w: LocalWidgetSpec): WidgetView {
  return {
    id: w.id,
    title: w.title,
    view: w.view,
    unit: w.unit,
    stacked: !!w.stacked,
    width: w.width ?? 12,
    series: [],
    ...(w.yMin !== undefined ? { yMin: w.yMin } : {}),
    ...(w.yMax !== undefined ? { yMax: w.yMax } : {}),
  };
}

function executionsView(w: LocalWidgetSpec, rows: ExecutionRow[] | undefined, notes: Record<string, string>): WidgetView {
  const base = baseView(w);
  return rows?.length ? { ...base, executions: rows } : { ...base, note: notes[LOCAL_WORKFLOWS_NAMESPACE] };
}

function firingsView(w: LocalWidgetSpec, rows: FiringRow[] | undefined, policy: PolicyInForce | undefined): WidgetView {
  const base = { ...baseView(w), ...(policy ? { policy } : {}) };
  if (rows?.length) return { ...base, firings: rows };
  if (!rows) return { ...base, note: FIRINGS_NOTES.noEvaluator };
  const n = policy?.backgroundRules;
  const rules =
    n === undefined
      ? ''
      : n === 0
        ? ' (the policy in force has no timer or threshold rules)'
        : ` (the policy in force has ${n} background rule${n === 1 ? '' : 's'})`;
  return { ...base, note: `${FIRINGS_NOTES.none}${rules}` };
}

/** Whether every visible series is a Sum of counts or bytes: its values are per bucket. */
function isPerBucket(w: LocalWidgetSpec): boolean {
  if (w.unit !== 'Count' && w.unit !== 'Bytes') return false;
  const visible = w.series.filter((s) => s.visible !== false);
  return visible.length > 0 && visible.every((s) => s.kind === 'metric' && s.stat === 'Sum');
}

function widgetView(
  store: LocalMetricsStore,
  w: LocalWidgetSpec,
  environment: string,
  tl: Timeline,
  notes: Record<string, string>,
): WidgetView {
  const perBucket = isPerBucket(w);
  const base: WidgetView = { ...baseView(w), ...(perBucket ? { perSeconds: tl.stepMs / 1000 } : {}) };
  const note = notes[widgetNamespace(w)];
  if (tl.steps.length === 0) return { ...base, note: note ?? '' };
  const values = new Map<string, Values>();
  const out: SeriesView[] = [];
  const byId = new Map(w.series.map((s) => [s.id, s] as const));
  const window = { fromMs: tl.steps[0]!, toMs: tl.steps.at(-1)! + tl.stepMs - 1, stepMs: tl.stepMs };
  const last = tl.steps.at(-1)!;
  // A Sum with nothing recorded in a bucket is zero things counted (once the run has this namespace's metrics at
  // all): a number widget says "0/s", not "–". Lines still break there, as in CloudWatch.
  const zeroSums = namespaceHasData(store, w, environment);

  const metricValues = (s: AnyMetricSeries) => {
    const m = metricRef(s.metric);
    const dimensions = { [IMPLIED_DIMENSION]: environment, ...s.dimensions };
    return store.query({ namespace: m.namespace, name: m.name, dimensions, splitBy: s.splitBy }, s.stat as LocalStat, window);
  };

  const resolve = (id: string, seen: Set<string> = new Set()): Values => {
    const known = values.get(id);
    if (known) return known;
    const s = byId.get(id);
    let v: Values = new Map();
    if (s && !seen.has(id)) {
      seen.add(id);
      if (s.kind === 'metric') {
        v = new Map(metricValues(s)[0]?.points ?? []);
        if (w.view === 'number' && s.stat === 'Sum' && zeroSums && !v.has(last)) v.set(last, 0);
      } else
        for (const t of tl.steps) {
          const x = evaluate(s.expression, t, tl.stepMs, (ref) => resolve(ref, seen));
          if (x !== undefined) v.set(t, x);
        }
    }
    values.set(id, v);
    return v;
  };

  const view = (label: string, v: Values): SeriesView => {
    const points = [...v.entries()].sort((a, b) => a[0] - b[0]);
    const at = v.get(last) ?? (perBucket && zeroSums && points.length ? 0 : undefined);
    const latest = at !== undefined ? { latest: at } : {};
    if (w.view === 'number') return { label, points, ...latest, ...(at !== undefined ? { value: at } : {}) };
    return { label, points, ...latest, ...(perBucket ? { total: points.reduce((a, p) => a + p[1], 0) } : {}) };
  };

  for (const s of w.series) {
    if (s.visible === false) continue;
    if (s.kind === 'metric' && s.splitBy) {
      for (const r of metricValues(s)) out.push(view([s.label, r.split].filter(Boolean).join(' '), new Map(r.points)));
    } else {
      out.push(view(s.label, resolve(s.id)));
    }
  }
  // A number widget whose series have no value in the latest bucket still shows its labels (with "–"), once the
  // run has data of its namespace at all: "nothing in the last 10 s" is an answer, not a missing widget.
  const hasData =
    w.view === 'number'
      ? out.length > 0 && (out.some((s) => s.latest !== undefined) || zeroSums)
      : out.some((s) => s.points.length > 0);
  return hasData ? { ...base, series: out } : { ...base, note };
}

function namespaceHasData(store: LocalMetricsStore, w: LocalWidgetSpec, environment: string): boolean {
  const ns = widgetNamespace(w);
  return store.knownSeries().some((s) => s.namespace === ns && s.dimensions[IMPLIED_DIMENSION] === environment);
}

/** The namespace of a widget's first metric (a widget draws one namespace). */
function widgetNamespace(w: LocalWidgetSpec): string {
  const first = w.series.find((s): s is AnyMetricSeries => s.kind === 'metric');
  return first ? metricRef(first.metric).namespace : METRIC_NAMESPACES.requests;
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
