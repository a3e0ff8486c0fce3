import * as op from './operations.js';
import * as multipart from './multipart-operations.js';
import * as admin from './admin-operations.js';
import * as policy from './policy-operations.js';
import * as cost from './cost-operations.js';
import * as nodes from './node-operations.js';
import * as namespaces from './namespace-operations.js';
import * as listing from './list-operations.js';
import { StrataError } from '../errors.js';
import { openApiResult } from './openapi.js';
import { ROUTE_DOCS as doc } from './route-docs.js';
import type { ApiRoute } from './route-types.js';

/** The API surface, shared by the Lambda handlers, the local server and the CDK API stack. */
export const API_ROUTES: readonly ApiRoute[] = [
  { method: 'GET', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.getKey, doc: doc.getKey },
  { method: 'HEAD', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.headKey, doc: doc.headKey },
  { method: 'PUT', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.putKey, doc: doc.putKey },
  { method: 'PATCH', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.touchKey, doc: doc.touchKey },
  { method: 'DELETE', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys', run: op.deleteKey, doc: doc.deleteKey },
  { method: 'GET', resource: '/v1/ns/{ns}/keys', fn: 'batch', run: listing.listKeys, doc: doc.listKeys },
  { method: 'POST', resource: '/v1/ns/{ns}/batch/get', fn: 'batch', run: op.batchGet, doc: doc.batchGet },
  { method: 'POST', resource: '/v1/ns/{ns}/batch/put', fn: 'batch', run: op.batchPut, doc: doc.batchPut },
  { method: 'POST', resource: '/v1/ns/{ns}/batch/delete', fn: 'batch', run: op.batchDelete, doc: doc.batchDelete },
  { method: 'POST', resource: '/v1/ns/{ns}/invalidate', fn: 'batch', run: namespaces.invalidate, doc: doc.invalidate },
  { method: 'DELETE', resource: '/v1/ns/{ns}', fn: 'batch', run: namespaces.flushNamespace, doc: doc.flushNamespace },
  { method: 'POST', resource: '/v1/ns/{ns}/uploads/{key}', fn: 'transfer', run: op.createUpload, doc: doc.createUpload },
  {
    method: 'POST',
    resource: '/v1/ns/{ns}/uploads/{key}/complete',
    fn: 'transfer',
    run: op.completeUpload,
    doc: doc.completeUpload,
  },
  { method: 'POST', resource: '/v1/ns/{ns}/uploads/{key}/parts', fn: 'transfer', run: multipart.partUrls, doc: doc.partUrls },
  {
    method: 'POST',
    resource: '/v1/ns/{ns}/uploads/{key}/abort',
    fn: 'transfer',
    run: multipart.abortUpload,
    doc: doc.abortUpload,
  },
  { method: 'GET', resource: '/v1/ns/{ns}/downloads/{key}', fn: 'transfer', run: op.downloadUrl, doc: doc.downloadUrl },
  { method: 'GET', resource: '/v1/stats', fn: 'service', run: (ctx) => op.stats(ctx), doc: doc.stats },
  { method: 'GET', resource: '/v1/health', fn: 'service', run: (ctx) => op.health(ctx), doc: doc.health },
  {
    method: 'GET',
    resource: '/v1/cost/placements',
    fn: 'service',
    run: (_ctx, event) => cost.placements(event),
    doc: doc.costPlacements,
  },
  { method: 'GET', resource: '/v1/cost/paper-2010', fn: 'service', run: () => cost.paper2010(), doc: doc.costPaper2010 },
  { method: 'GET', resource: '/v1/cost/catalogs', fn: 'service', run: () => cost.catalogs(), doc: doc.costCatalogs },
  { method: 'GET', resource: '/v1/openapi.json', fn: 'service', run: () => openApiResult(API_ROUTES), doc: doc.openApi },
  {
    method: 'POST',
    resource: '/v1/admin/workflows/{workflow}/executions',
    fn: 'admin',
    auth: 'admin',
    run: admin.startExecution,
    doc: doc.startExecution,
  },
  {
    method: 'GET',
    resource: '/v1/admin/workflows/executions',
    fn: 'admin',
    auth: 'admin',
    run: admin.listExecutions,
    doc: doc.listExecutions,
  },
  {
    method: 'GET',
    resource: '/v1/admin/workflows/executions/{execution}',
    fn: 'admin',
    auth: 'admin',
    run: admin.getExecution,
    doc: doc.getExecution,
  },
  {
    method: 'GET',
    resource: '/v1/admin/policy',
    fn: 'admin',
    auth: 'admin',
    run: (ctx) => policy.getPolicy(ctx),
    doc: doc.getPolicy,
  },
  { method: 'PUT', resource: '/v1/admin/policy', fn: 'admin', auth: 'admin', run: policy.putPolicy, doc: doc.putPolicy },
  {
    method: 'POST',
    resource: '/v1/admin/policy/validate',
    fn: 'admin',
    auth: 'admin',
    run: policy.validatePolicy,
    doc: doc.validatePolicy,
  },
  {
    method: 'GET',
    resource: '/v1/admin/policy/versions',
    fn: 'admin',
    auth: 'admin',
    run: policy.listPolicyVersions,
    doc: doc.listPolicyVersions,
  },
  {
    method: 'GET',
    resource: '/v1/admin/policy/versions/{version}',
    fn: 'admin',
    auth: 'admin',
    run: policy.getPolicyVersion,
    doc: doc.getPolicyVersion,
  },
  {
    method: 'POST',
    resource: '/v1/admin/policy/rollback',
    fn: 'admin',
    auth: 'admin',
    run: policy.rollbackPolicy,
    doc: doc.rollbackPolicy,
  },
  {
    method: 'GET',
    resource: '/v1/admin/policy/firings',
    fn: 'admin',
    auth: 'admin',
    run: policy.listPolicyFirings,
    doc: doc.listPolicyFirings,
  },
  {
    method: 'GET',
    resource: '/v1/admin/nodes',
    fn: 'admin',
    auth: 'admin',
    run: (ctx) => nodes.listNodes(ctx),
    doc: doc.listNodes,
  },
  // The literal `replacement` before `{node}`: matchRoute takes the first route that matches (and the `{node}` routes
  // refuse that id besides, for the methods only they serve).
  {
    method: 'GET',
    resource: '/v1/admin/nodes/replacement',
    fn: 'admin',
    auth: 'admin',
    run: (ctx) => nodes.getReplacementControls(ctx),
    doc: doc.getReplacementControls,
  },
  {
    method: 'PUT',
    resource: '/v1/admin/nodes/replacement',
    fn: 'admin',
    auth: 'admin',
    run: nodes.putReplacementControls,
    doc: doc.putReplacementControls,
  },
  {
    method: 'POST',
    resource: '/v1/admin/nodes/{node}/replace',
    fn: 'admin',
    auth: 'admin',
    run: nodes.replaceNode,
    doc: doc.replaceNode,
  },
  {
    method: 'POST',
    resource: '/v1/admin/fleet/upgrade',
    fn: 'admin',
    auth: 'admin',
    run: nodes.upgradeFleet,
    doc: doc.upgradeFleet,
  },
  {
    method: 'DELETE',
    resource: '/v1/admin/nodes/{node}',
    fn: 'admin',
    auth: 'admin',
    run: nodes.removeNode,
    doc: doc.removeNode,
  },
  {
    method: 'DELETE',
    resource: '/v1/admin/namespaces/{namespace}',
    fn: 'admin',
    auth: 'admin',
    run: namespaces.adminFlushNamespace,
    doc: doc.adminFlushNamespace,
  },
  {
    method: 'GET',
    resource: '/v1/admin/invalidations',
    fn: 'admin',
    auth: 'admin',
    run: namespaces.invalidationLog,
    doc: doc.invalidationLog,
  },
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
    if (
      route.method === method ||
      (method === 'HEAD' && route.method === 'GET' && !routes.some((r) => r.resource === route.resource && r.method === 'HEAD'))
    ) {
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
