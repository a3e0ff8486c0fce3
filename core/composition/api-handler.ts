import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import type { PolicyRegistry } from '../policy/namespace-settings.js';
import { metricsSettings, useDefaultMetricsSink } from './metrics-settings.js';
import { getApiContext, type BuiltContext } from './api-context.js';
import type { ApiEvent, ApiResult } from '../api/http.js';
import { errorResponder, requestIdHeader, requestMetrics, writeBackFlush } from '../api/middleware.js';
import type { ApiContext } from '../api/operations.js';
import type { ApiFunction } from '../api/route-types.js';
import { API_ROUTES, methodNotAllowed, routeNotFound } from '../api/routes.js';
import { checkAdminAccess, checkNamespaceAccess } from '../api/tenant-access.js';

/**
 * Builds the Lambda handler of one API function: picks the route by API Gateway `resource` and method, runs its
 * operation against the container's shared context. The local server builds exactly these handlers, over its own
 * context (`context`), so that two servers in one process (a test's two containers) each serve theirs.
 */
export function apiHandler(fn: ApiFunction, context: () => Promise<ApiContext> = getApiContext) {
  useDefaultMetricsSink();
  const routes = API_ROUTES.filter((r) => r.fn === fn);
  // The context of the latest request, so the metrics middleware can read the configured namespaces without
  // awaiting anything.
  let ctx: ApiContext | undefined;
  let environment: string | undefined;
  const dispatch = async (event: ApiEvent): Promise<ApiResult> => {
    const forResource = routes.filter((r) => r.resource === event.resource);
    if (forResource.length === 0) throw routeNotFound(event.httpMethod, event.path);
    const route = forResource.find((r) => r.method === event.httpMethod);
    if (!route)
      throw methodNotAllowed(
        event.httpMethod,
        event.resource,
        forResource.map((r) => r.method),
      );
    ctx = await context();
    // A policy replaced at runtime reaches this container within its refresh bound (core/policy/live.ts).
    await (ctx as Partial<BuiltContext>).livePolicy?.refreshIfStale();
    checkNamespaceAccess(ctx.tenantAccess, route.resource, event);
    if (route.auth === 'admin') checkAdminAccess(ctx.tenantAccess, event);
    return route.run(ctx, event);
  };
  return middy<ApiEvent, ApiResult, Error, Context>(dispatch)
    .use(
      requestMetrics({
        environment: () => (environment ??= metricsSettings().environment),
        namespaces: () => configuredNamespaces(ctx?.coordinator.policies),
      }),
    )
    .use(requestIdHeader())
    .use(writeBackFlush(context))
    .use(errorResponder());
}

const namespaceSets = new WeakMap<PolicyRegistry, ReadonlySet<string>>();
const NONE: ReadonlySet<string> = new Set();

/** The namespaces with their own policy (metrics report every other one as `other`), cached per registry. */
function configuredNamespaces(policies: PolicyRegistry | undefined): ReadonlySet<string> {
  if (!policies) return NONE;
  let set = namespaceSets.get(policies);
  if (!set) namespaceSets.set(policies, (set = new Set(policies.configured())));
  return set;
}
