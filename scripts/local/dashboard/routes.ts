/**
 * The local dashboard: `GET /dashboard` (the page) and `GET /dashboard/data` (the dashboards of dashboards/
 * evaluated over the local run's metrics, with the local-only lists of workflow executions and policy firings, as
 * JSON). `?minutes=` sets the history of line charts, `?until=<epoch ms>` shows the dashboards as they were then (a
 * link to a moment; the page passes both on).
 */
import { readFileSync } from 'node:fs';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { ValidationError } from '../../../core/errors.js';
import { errorResult } from '../../../core/api/http.js';
import { methodNotAllowed } from '../../../core/api/routes.js';
import type { LocalMetricsStore } from '../../../core/metrics/local-store.js';
import type { CompiledPolicy } from '../../../core/policy/compile.js';
import type { FiringHistory } from '../../../core/policy/evaluator.js';
import type { PolicyView } from '../../../core/policy/service.js';
import { dashboardData, type DashboardCaption, type DashboardDataOptions, type ExecutionRow } from './data.js';
import { firingRows, policyInForce } from './policy.js';

const PAGE = readFileSync(new URL('./page.html', import.meta.url), 'utf8');

export interface DashboardRouteOptions {
  store: LocalMetricsStore;
  environment: string;
  /** Notes for empty widgets, per namespace (what this local run does not have). */
  notes?: DashboardDataOptions['notes'];
  /** Per dashboard id (e.g. that the Cost dashboard's values are modelled). */
  captions?: Partial<Record<string, DashboardCaption>>;
  /** The recent workflow executions, newest first; absent when the run has no workflows. */
  executions?: () => ExecutionRow[] | undefined;
  /**
   * The background evaluator's firing history (the context's `policyFirings`, what `GET /v1/admin/policy/firings`
   * serves); absent: no evaluator runs in this runtime, and the Policy firings panel says so.
   */
  firings?: FiringHistory;
  /** The policy in force (the live policy's current copy), named by the Policy firings panel; absent: no policy store. */
  policy?: () => { readonly view: PolicyView; readonly compiled: CompiledPolicy };
  /**
   * Brings derived metrics up to date before `/dashboard/data` is computed (modelled cost of the buckets that
   * ended, workflow executions); the server awaits it.
   */
  refresh?: () => Promise<void>;
}

/** Whether `path` is the dashboard's. */
export function isDashboardPath(path: string): boolean {
  return path === '/dashboard' || path === '/dashboard/' || path === '/dashboard/data';
}

/** Answers a dashboard request (GET/HEAD only). `minutes` (1-60) sets how much history line charts show. */
export function dashboardResponse(
  method: string,
  path: string,
  query: URLSearchParams,
  opts: DashboardRouteOptions,
): APIGatewayProxyResult {
  if (method !== 'GET' && method !== 'HEAD') {
    const r = errorResult(methodNotAllowed(method, path, ['GET', 'HEAD']));
    return { ...r, headers: { ...r.headers, allow: 'GET, HEAD' } };
  }
  if (path !== '/dashboard/data')
    return { statusCode: 200, headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }, body: PAGE };
  const minutesRaw = query.get('minutes');
  const minutes = minutesRaw === null ? 15 : Number(minutesRaw);
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 60)
    return errorResult(new ValidationError('minutes', 'must be an integer from 1 to 60'));
  const untilRaw = query.get('until');
  const until = untilRaw === null || untilRaw === '' ? undefined : Number(untilRaw);
  if (until !== undefined && !(Number.isSafeInteger(until) && until > 0)) {
    return errorResult(new ValidationError('until', 'must be a time in epoch milliseconds'));
  }
  const executions = opts.executions?.();
  const firings = opts.firings ? firingRows(opts.firings, until) : undefined;
  const policy = opts.policy ? policyInForce(opts.policy()) : undefined;
  const data = dashboardData(opts.store, {
    environment: opts.environment,
    windowMs: minutes * 60_000,
    ...(until !== undefined ? { until } : {}),
    ...(opts.notes ? { notes: opts.notes } : {}),
    ...(opts.captions ? { captions: opts.captions } : {}),
    ...(executions ? { executions } : {}),
    ...(firings ? { firings } : {}),
    ...(policy ? { policy } : {}),
  });
  return {
    statusCode: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
    body: JSON.stringify(data),
  };
}
