// The shape of the API's route table, and of the documentation each route carries. Types only: the table
// (routes.ts), its documentation (route-docs.ts) and the OpenAPI builder (openapi.ts) all read them.
import type { ErrorCode } from '../errors.js';
import type { ApiEvent, ApiResult } from './http.js';
import type { ApiContext } from './operations.js';

/** A JSON object in the OpenAPI document. */
export type Json = Record<string, unknown>;

/** Lambda functions of the API, each serving a group of routes (one bundle per group). */
export type ApiFunction = 'keys' | 'batch' | 'transfer' | 'service' | 'admin';

/**
 * Who may call a route: `tenant` = any tenant's API key (the default); `admin` = operators only. The API stack
 * must not let tenant keys reach `admin` routes (e.g. IAM authorization on those methods, or a separate admin
 * API key / usage plan that tenants do not hold).
 */
export type RouteAuth = 'tenant' | 'admin';

/** What the OpenAPI document says about one route, besides what the route table already states. */
export interface RouteDoc {
  /** Stable name of the operation (client generators name methods after it). */
  operationId: string;
  summary: string;
  description?: string;
  /** Query and header parameters (path parameters come from the route). */
  parameters?: Json[];
  requestBody?: Json;
  /** Success responses by status. */
  responses: Record<string, Json>;
  /** Error codes this route answers with besides those every route can (see {@link COMMON_ERRORS}). */
  errors?: ErrorCode[];
}

export interface ApiRoute {
  method: 'GET' | 'HEAD' | 'PUT' | 'PATCH' | 'DELETE' | 'POST';
  /** API Gateway resource path; `{name}` is one URL-encoded path segment. */
  resource: string;
  fn: ApiFunction;
  run: (ctx: ApiContext, event: ApiEvent) => Promise<ApiResult>;
  /** @default 'tenant' */
  auth?: RouteAuth;
  /** Its entry in the OpenAPI document (route-docs.ts). */
  doc: RouteDoc;
}
