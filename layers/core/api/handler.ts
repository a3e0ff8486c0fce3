import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { getApiContext } from '../runtime/context.js';
import type { ApiEvent, ApiResult } from './http.js';
import { errorResponder, requestIdHeader, writeBackFlush } from './middleware.js';
import type { ApiFunction } from './routes.js';
import { API_ROUTES, methodNotAllowed, routeNotFound } from './routes.js';

/**
 * Builds the Lambda handler of one API function: picks the route by API Gateway `resource` and method, runs its
 * operation against the container's shared context. The local server calls exactly these handlers.
 */
export function apiHandler(fn: ApiFunction) {
  const routes = API_ROUTES.filter((r) => r.fn === fn);
  const dispatch = async (event: ApiEvent): Promise<ApiResult> => {
    const forResource = routes.filter((r) => r.resource === event.resource);
    if (forResource.length === 0) throw routeNotFound(event.httpMethod, event.path);
    const route = forResource.find((r) => r.method === event.httpMethod);
    if (!route) throw methodNotAllowed(event.httpMethod, event.resource, forResource.map((r) => r.method));
    const ctx = await getApiContext();
    return route.run(ctx, event);
  };
  return middy<ApiEvent, ApiResult, Error, Context>(dispatch)
    .use(requestIdHeader())
    .use(writeBackFlush(getApiContext))
    .use(errorResponder());
}

