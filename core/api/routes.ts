import type { ApiContext } from './operations.js';
import * as op from './operations.js';
import * as admin from './admin-operations.js';
import * as cost from './cost-operations.js';
import type { ApiEvent, ApiResult } from './http.js';
import { StrataError } from '../errors.js';

/** Lambda functions of the API, each serving a group of routes (one bundle per group). */
export type ApiFunction = 'keys' | 'batch' | 'transfer' | 'service' | 'admin';

/**
 * Who may call a route: `tenant` = any tenant's API key (the default); `admin` = operators only. The API stack
 * must not let tenant keys reach `admin` routes (e.g. IAM authorization on those methods, or a separate admin
 * API key / usage plan that tenants do not hold).
 */
export type RouteAuth = 'tenant' | 'admin';

export interface ApiRoute {
  method: 'GET' | 'HEAD' | 'PUT' | 'DELETE' | 'POST';
  /** API Gateway resource path; `{name}` is one URL-encoded path segment. */
  resource: string;
  fn: ApiFunction;
  run: (ctx: ApiContext, event: ApiEvent) => Promise<ApiResult>;
  /** @default 'tenant' */
  auth?: RouteAuth;
}

/** The API surface, shared by the Lambda handlers, the local server and the CDK API stack. */
export const API_ROUTES: readonly ApiRoute[] = [
  { method: 'GET', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.getKey },
  { method: 'HEAD', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.headKey },
  { method: 'PUT', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.putKey },
  { method: 'DELETE', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.deleteKey },
  { method: 'POST', resource: '/v1/ns/{ns}/batch/get', fn: 'batch', run: op.batchGet },
  { method: 'POST', resource: '/v1/ns/{ns}/batch/put', fn: 'batch', run: op.batchPut },
  { method: 'POST', resource: '/v1/ns/{ns}/batch/delete', fn: 'batch', run: op.batchDelete },
  { method: 'POST', resource: '/v1/ns/{ns}/uploads/{key}', fn: 'transfer', run: op.createUpload },
  { method: 'POST', resource: '/v1/ns/{ns}/uploads/{key}/complete', fn: 'transfer', run: op.completeUpload },
  { method: 'GET', resource: '/v1/ns/{ns}/downloads/{key}', fn: 'transfer', run: op.downloadUrl },
  { method: 'GET', resource: '/v1/stats', fn: 'service', run: (ctx) => op.stats(ctx) },
  { method: 'GET', resource: '/v1/health', fn: 'service', run: (ctx) => op.health(ctx) },
  { method: 'GET', resource: '/v1/cost/placements', fn: 'service', run: (_ctx, event) => cost.placements(event) },
  { method: 'GET', resource: '/v1/cost/paper-2010', fn: 'service', run: () => cost.paper2010() },
  { method: 'GET', resource: '/v1/cost/catalogs', fn: 'service', run: () => cost.catalogs() },
  // Loaded on first use: the document module reads this table (no import cycle at load time).
  { method: 'GET', resource: '/v1/openapi.json', fn: 'service', run: () => import('./openapi.js').then((m) => m.openApiResult()) },
  { method: 'POST', resource: '/v1/admin/workflows/{workflow}/executions', fn: 'admin', auth: 'admin', run: admin.startExecution },
  { method: 'GET', resource: '/v1/admin/workflows/executions', fn: 'admin', auth: 'admin', run: admin.listExecutions },
  { method: 'GET', resource: '/v1/admin/workflows/executions/{execution}', fn: 'admin', auth: 'admin', run: admin.getExecution },
];

export interface RouteMatch {
  route?: ApiRoute;
  resource?: string;
  pathParameters: Record<string, string>;
  /** Methods the matched resource does support (for 405). */
  allowed: string[];
  /** A path parameter that is not valid percent-encoding. */
  badParam?: string;
}

/** Matches a raw (still percent-encoded) path against the route table, decoding each parameter. */
export function matchRoute(method: string, rawPath: string, routes: readonly ApiRoute[] = API_ROUTES): RouteMatch {
  const segments = rawPath.split('/');
  let best: RouteMatch = { pathParameters: {}, allowed: [] };
  for (const route of routes) {
    const tpl = route.resource.split('/');
    if (tpl.length !== segments.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    let badParam: string | undefined;
    for (let i = 0; i < tpl.length && ok; i++) {
      const t = tpl[i]!;
      const s = segments[i]!;
      if (t.startsWith('{')) {
        const name = t.slice(1, -1);
        if (s === '') ok = false;
        else {
          try {
            params[name] = decodeURIComponent(s);
          } catch {
            badParam = name;
            params[name] = s;
          }
        }
      } else if (t !== s) ok = false;
    }
    if (!ok) continue;
    if (route.method === method || (method === 'HEAD' && route.method === 'GET' && !routes.some((r) => r.resource === route.resource && r.method === 'HEAD'))) {
      return { route, resource: route.resource, pathParameters: params, allowed: [], badParam };
    }
    best = { resource: route.resource, pathParameters: params, allowed: [...best.allowed, route.method], badParam };
  }
  return best;
}

/** 404 for a path no route serves (the same answer from API Gateway's Lambdas and the local server). */
export function routeNotFound(method: string, path: string): StrataError {
  return new StrataError('ROUTE_NOT_FOUND', `no route ${method} ${path}; see docs/API.md`);
}

/** 405 naming the methods the resource does support. */
export function methodNotAllowed(method: string, resource: string, allowed: string[]): StrataError {
  return new StrataError('METHOD_NOT_ALLOWED', `${method} is not supported on ${resource}; use ${allowed.join(', ')}`);
}
