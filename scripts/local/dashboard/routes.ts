/**
 * The local dashboard: `GET /dashboard` (the page) and `GET /dashboard/data` (the dashboards of dashboards/
 * evaluated over the local run's metrics, as JSON).
 */
import { readFileSync } from 'node:fs';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { ValidationError } from '../../../core/errors.js';
import { errorResult } from '../../../core/api/http.js';
import { methodNotAllowed } from '../../../core/api/routes.js';
import type { LocalMetricsStore } from '../../../core/metrics/local-store.js';
import type { MetricNamespace } from '../../../core/metrics/catalog.js';
import { dashboardData } from './data.js';

const PAGE = readFileSync(new URL('./page.html', import.meta.url), 'utf8');

export interface DashboardRouteOptions {
  store: LocalMetricsStore;
  environment: string;
  /** Notes for empty widgets, per namespace (what this local run does not have). */
  notes?: Partial<Record<MetricNamespace, string>>;
}

/** Whether `path` is the dashboard's. */
export function isDashboardPath(path: string): boolean {
  return path === '/dashboard' || path === '/dashboard/' || path === '/dashboard/data';
}

/** Answers a dashboard request (GET/HEAD only). `minutes` (1-60) sets how much history line charts show. */
export function dashboardResponse(method: string, path: string, query: URLSearchParams, opts: DashboardRouteOptions): APIGatewayProxyResult {
  if (method !== 'GET' && method !== 'HEAD') {
    const r = errorResult(methodNotAllowed(method, path, ['GET', 'HEAD']));
    return { ...r, headers: { ...r.headers, allow: 'GET, HEAD' } };
  }
  if (path !== '/dashboard/data') return { statusCode: 200, headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }, body: PAGE };
  const minutesRaw = query.get('minutes');
  const minutes = minutesRaw === null ? 15 : Number(minutesRaw);
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 60) return errorResult(new ValidationError('minutes', 'must be an integer from 1 to 60'));
  const data = dashboardData(opts.store, { environment: opts.environment, windowMs: minutes * 60_000, notes: opts.notes });
  return { statusCode: 200, headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }, body: JSON.stringify(data) };
}
