/**
 * What only the local dashboard draws: the workflow executions of a local run, and what the policy engine's
 * background rules did. In AWS, Step Functions counts executions itself (`AWS/States` ExecutionsStarted, ...),
 * outside Strata's metric catalog, so the dashboards of dashboards/ have no widget for them; locally,
 * scripts/local/workflow-sampler.ts records the same counts (and each running execution's progress) in the local
 * metrics store under {@link LOCAL_WORKFLOWS_NAMESPACE}, and these widgets, appended to the Fleet dashboard, draw
 * them. The policy firings are the background evaluator's own history (`GET /v1/admin/policy/firings`), listed
 * after them: its grow and shrink responses start those workflows, and its PolicyFirings metric is a
 * `Strata/Workflows` one.
 */
import type { DashboardSpec, DisplayUnit, ExpressionSeries, MetricSeries, Stat, WidgetSpec } from '../../../dashboards/index.js';
import { DASHBOARDS } from '../../../dashboards/index.js';
import type { MetricKey, MetricUnit } from '../../../core/metrics/metric-catalog.js';

/** Namespace of the local-only metrics (never published to CloudWatch). */
export const LOCAL_WORKFLOWS_NAMESPACE = 'Strata/LocalWorkflows';

export interface LocalMetricDef {
  namespace: typeof LOCAL_WORKFLOWS_NAMESPACE;
  name: string;
  unit: MetricUnit;
}

const def = (name: string, unit: MetricUnit): LocalMetricDef => ({ namespace: LOCAL_WORKFLOWS_NAMESPACE, name, unit });

/** Recorded with `[Environment]` and `[Environment, Workflow]` (the counts) or `[Environment, Execution]` (progress). */
export const LOCAL_METRICS = {
  executionsStarted: def('ExecutionsStarted', 'Count'),
  executionsSucceeded: def('ExecutionsSucceeded', 'Count'),
  executionsFailed: def('ExecutionsFailed', 'Count'),
  executionsAborted: def('ExecutionsAborted', 'Count'),
  executionsRunning: def('ExecutionsRunning', 'Count'),
  executionProgress: def('ExecutionProgressPercent', 'Percent'),
} as const satisfies Record<string, LocalMetricDef>;

export type LocalMetricKey = keyof typeof LOCAL_METRICS;

/** A series of a catalog metric or of a local-only one. */
export interface AnyMetricSeries extends Omit<MetricSeries, 'metric'> {
  readonly metric: MetricKey | LocalMetricKey;
}

/**
 * A widget the local dashboard can draw: a dashboards/ widget, or a local one, which may also be a list of the
 * recent executions (`executions`, from the workflow service rather than from metrics) or of the background
 * evaluator's firings (`firings`, from its history).
 */
export interface LocalWidgetSpec extends Omit<WidgetSpec, 'series' | 'view'> {
  readonly view: WidgetSpec['view'] | 'executions' | 'firings';
  readonly series: readonly (AnyMetricSeries | ExpressionSeries)[];
}

export interface LocalDashboardSpec extends Omit<DashboardSpec, 'widgets'> {
  readonly widgets: readonly LocalWidgetSpec[];
}

function local(id: string, key: LocalMetricKey, stat: Stat, label: string, opts: { splitBy?: string } = {}): AnyMetricSeries {
  return { kind: 'metric', id, metric: key, stat, label, ...opts };
}

function widget(
  id: string,
  title: string,
  view: LocalWidgetSpec['view'],
  unit: DisplayUnit,
  series: AnyMetricSeries[],
  extra: Partial<LocalWidgetSpec> = {},
): LocalWidgetSpec {
  return { id, title, view, unit, periodSeconds: 60, width: 12, series, ...extra };
}

/** The local run's workflow widgets (ids start with `fleet.local-`). */
export const LOCAL_WORKFLOW_WIDGETS: readonly LocalWidgetSpec[] = [
  widget(
    'fleet.local-executions-now',
    'Workflow executions running',
    'number',
    'Count',
    [local('running', 'executionsRunning', 'Maximum', 'running')],
    { width: 8 },
  ),
  widget(
    'fleet.local-executions',
    'Workflow executions started, succeeded and failed',
    'line',
    'Count',
    [
      local('started', 'executionsStarted', 'Sum', 'started'),
      local('succeeded', 'executionsSucceeded', 'Sum', 'succeeded'),
      local('failed', 'executionsFailed', 'Sum', 'failed'),
      local('aborted', 'executionsAborted', 'Sum', 'aborted'),
    ],
    { yMin: 0 },
  ),
  widget(
    'fleet.local-progress',
    'Progress of each execution (% done)',
    'line',
    'Percent',
    [local('progress', 'executionProgress', 'Maximum', '', { splitBy: 'Execution' })],
    { yMin: 0, yMax: 100 },
  ),
  widget('fleet.local-executions-list', 'Recent workflow executions', 'executions', 'Percent', [], { width: 24 }),
];

/** The background evaluator's firings, newest first, and the policy in force (`fleet.local-policy-firings`). */
export const LOCAL_POLICY_WIDGETS: readonly LocalWidgetSpec[] = [
  widget('fleet.local-policy-firings', 'Policy firings', 'firings', 'Count', [], { width: 24 }),
];

/** The dashboards of dashboards/, with the local-only widgets appended to Fleet. */
export const LOCAL_DASHBOARDS: readonly LocalDashboardSpec[] = DASHBOARDS.map((d) =>
  d.id === 'fleet' ? { ...d, widgets: [...d.widgets, ...LOCAL_WORKFLOW_WIDGETS, ...LOCAL_POLICY_WIDGETS] } : d,
);
