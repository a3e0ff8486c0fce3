/**
 * Strata's CloudWatch dashboards as data. The Monitoring stack renders {@link DASHBOARDS} as `cloudwatch.Dashboard`s;
 * `npm start` draws the same widgets at `/dashboard` from the local run's metrics. See dashboards/README.md.
 */
import type { MetricDef, MetricKey, MetricNamespace } from '../core/metrics/metric-catalog.js';
import { METRICS } from '../core/metrics/metric-catalog.js';
import { COST_DASHBOARD } from './cost.js';
import { FLEET_DASHBOARD } from './fleet.js';
import { PERFORMANCE_DASHBOARD } from './performance.js';
import type { DashboardSpec, MetricSeries, WidgetSpec } from './spec.js';
import { IMPLIED_DIMENSION, STATS, expressionInputs } from './spec.js';

export * from './spec.js';
export { COST_DASHBOARD, FLEET_DASHBOARD, PERFORMANCE_DASHBOARD };

/** Every dashboard, in the order they are listed. */
export const DASHBOARDS: readonly DashboardSpec[] = [PERFORMANCE_DASHBOARD, COST_DASHBOARD, FLEET_DASHBOARD];

/** The metric series of a widget (expressions left out). */
export function metricSeries(widget: WidgetSpec): MetricSeries[] {
  return widget.series.filter((s): s is MetricSeries => s.kind === 'metric');
}

/**
 * The catalog keys some widget references, sorted; optionally only those of one metric namespace
 * (`Strata/Cost`, ...). Publishers' tests check that they emit each of theirs.
 *
 * @example
 * ```ts
 * for (const key of referencedMetricKeys(DASHBOARDS, 'Strata/Cost')) expect(published).toContain(METRICS[key].name);
 * ```
 */
export function referencedMetricKeys(
  dashboards: readonly DashboardSpec[] = DASHBOARDS,
  namespace?: MetricNamespace,
): MetricKey[] {
  const keys = new Set<MetricKey>();
  for (const d of dashboards)
    for (const w of d.widgets)
      for (const s of metricSeries(w)) if (!namespace || METRICS[s.metric].namespace === namespace) keys.add(s.metric);
  return [...keys].sort();
}

/** The dimension names a series queries: `Environment`, its fixed dimensions and its `splitBy`, sorted. */
export function seriesDimensionNames(s: MetricSeries): string[] {
  return [IMPLIED_DIMENSION, ...Object.keys(s.dimensions ?? {}), ...(s.splitBy ? [s.splitBy] : [])].sort();
}

function publishedWith(def: MetricDef, names: readonly string[]): boolean {
  const want = names.join('\u0000');
  return def.dimensions.some((set) => [...set].sort().join('\u0000') === want);
}

const ID = /^[a-z][a-zA-Z0-9_]*$/;

/**
 * Everything wrong with a dashboard spec, as messages (empty when it is sound): ids (unique, metric-math-safe),
 * metrics that name no dimension set of the catalog, expressions reading unknown or split series, bad stats.
 * Renderers may call it before drawing; the tests call it on every dashboard.
 */
export function dashboardProblems(d: DashboardSpec): string[] {
  const problems: string[] = [];
  const widgetIds = new Set<string>();
  for (const w of d.widgets) {
    const where = `${d.id}/${w.id}`;
    if (!w.id.startsWith(`${d.id}.`)) problems.push(`${where}: widget ids start with '${d.id}.'`);
    if (widgetIds.has(w.id)) problems.push(`${where}: duplicate widget id`);
    widgetIds.add(w.id);
    if (!(
      w.periodSeconds === 1 ||
      w.periodSeconds === 5 ||
      w.periodSeconds === 10 ||
      w.periodSeconds === 30 ||
      (w.periodSeconds >= 60 && w.periodSeconds % 60 === 0)
    )) {
      problems.push(`${where}: period ${w.periodSeconds}s is not one CloudWatch accepts (1, 5, 10, 30 or a multiple of 60)`);
    }
    if (!w.series.some((s) => s.visible !== false)) problems.push(`${where}: no visible series`);
    const ids = new Map<string, (typeof w.series)[number]>();
    for (const s of w.series) {
      if (!ID.test(s.id)) problems.push(`${where}: series id '${s.id}' must match ${ID.source}`);
      if (ids.has(s.id)) problems.push(`${where}: duplicate series id '${s.id}'`);
      ids.set(s.id, s);
    }
    for (const s of w.series) {
      if (s.kind === 'metric') {
        const def = METRICS[s.metric] as MetricDef | undefined;
        if (!def) {
          problems.push(`${where}/${s.id}: '${s.metric}' is not in the metric catalog`);
          continue;
        }
        if (!(STATS as readonly string[]).includes(s.stat)) problems.push(`${where}/${s.id}: unknown stat '${s.stat}'`);
        if (s.dimensions && IMPLIED_DIMENSION in s.dimensions)
          problems.push(`${where}/${s.id}: names ${IMPLIED_DIMENSION}, which the renderer sets`);
        if (s.splitBy && s.dimensions && s.splitBy in s.dimensions)
          problems.push(`${where}/${s.id}: splits by ${s.splitBy} and fixes it too`);
        const names = seriesDimensionNames(s);
        if (!publishedWith(def, names))
          problems.push(
            `${where}/${s.id}: ${def.name} is not published with dimensions [${names.join(', ')}] (catalog: ${def.dimensions.map((x) => `[${x.join(', ')}]`).join(' ')})`,
          );
      } else {
        for (const input of expressionInputs(s.expression)) {
          const target = ids.get(input);
          if (!target) problems.push(`${where}/${s.id}: reads unknown series '${input}'`);
          else if (target.kind === 'metric' && target.splitBy)
            problems.push(`${where}/${s.id}: reads '${input}', which is split by ${target.splitBy}`);
          else if (target === s) problems.push(`${where}/${s.id}: reads itself`);
        }
      }
    }
  }
  return problems;
}
