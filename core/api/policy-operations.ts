import * as z from 'zod';
import { NotFoundError, permanentDetails, StrataError, ValidationError } from '../errors.js';
import { parseWith } from '../model/schemas.js';
import { parsePolicyDocument } from '../policy/document.js';
import type { FiringHistory } from '../policy/evaluator.js';
import type { StoredFiringHistory } from '../policy/evaluator-store.js';
import type { PolicyAdmin, PolicyView } from '../policy/service.js';
import type { ApiEvent, ApiResult } from './http.js';
import { header, json } from './http.js';
import type { ApiContext } from './operations.js';
import { adminCaller } from './tenant-access.js';
import { dropEmpty, ifMatchHeader, jsonBody } from './validation.js';

/**
 * The admin API's policy operations (Tiera, paper 003): read the policy in force, check a candidate document,
 * replace it by compare-and-set, read its history and roll back. They run against `ctx.policyAdmin`, else answer
 * 503 `POLICIES_UNAVAILABLE`. The firings of background rules are read from `ctx.policyFirings` (the background
 * evaluator of this runtime), likewise 503 without one. Admin-only like the workflow routes (`auth: 'admin'` in
 * routes.ts).
 */

export const DEFAULT_VERSIONS_LIMIT = 20;
export const MAX_VERSIONS_LIMIT = 100;
/** `GET /v1/admin/policy/firings?limit=`: the default, and the most (the evaluator keeps 200 by default). */
export const DEFAULT_FIRINGS_LIMIT = 50;
export const MAX_FIRINGS_LIMIT = 200;
/** Longest `x-strata-reason` (or rollback `reason`): a line in the audit trail, not a document. */
export const MAX_REASON_LENGTH = 200;
/**
 * If-Match of `PUT /v1/admin/policy`: one version, bare or as the etag GET answered (`3`, `"3"`, `W/"3"`). Unlike
 * the key routes, `*` is refused: the policy always exists, so `*` would be an unconditional write in disguise.
 */
export const POLICY_IF_MATCH_PATTERN = /^\s*(?:(?:W\/)?"(\d{1,16})"|(\d{1,16}))\s*$/;

function policyAdmin(ctx: ApiContext): PolicyAdmin {
  if (ctx.policyAdmin) return ctx.policyAdmin;
  // Permanent: the store is missing from this runtime's wiring, so retrying cannot help until it is deployed. (A store
  // that is configured but cannot be reached is the service's own 503 POLICIES_UNAVAILABLE, which clients retry.)
  throw new StrataError(
    'POLICIES_UNAVAILABLE',
    'this deployment has no policy store, so its policy is STRATA_NAMESPACES and cannot be changed at runtime: set ' +
      'STRATA_POLICY_STORE (file:<dir> or s3://<bucket>/<prefix>) or configure the warm tier, whose ring store holds policies',
    permanentDetails(),
  );
}

function policyFirings(ctx: ApiContext): FiringHistory | StoredFiringHistory {
  if (ctx.policyFirings) return ctx.policyFirings;
  if (ctx.storedFirings) return ctx.storedFirings;
  // Permanent as well: whether a runtime runs an evaluator is a matter of its wiring, not of the moment.
  throw new StrataError(
    'POLICIES_UNAVAILABLE',
    'no background evaluator runs for this deployment: `npm start` runs one; in AWS the scheduled evaluator (the ' +
      "policy ticker) is switched off in this environment's configuration, so background rules are refused when a " +
      'policy is put',
    permanentDetails(),
  );
}

/** The current policy's version as an entity tag, so clients can send it back as If-Match like a key's etag. */
function versionHeaders(view: PolicyView): Record<string, string> {
  return { etag: `"${view.version}"`, 'x-strata-version': String(view.version) };
}

/**
 * Who changes the policy, for the audit trail: the IAM principal API Gateway authorized (AWS), else the tenant of
 * the admin key (`npm start` with a tenant map), else `admin` (no identity at all: a local run without keys).
 */
function author(ctx: ApiContext, event: ApiEvent): string {
  return adminCaller(ctx.tenantAccess, event) ?? 'admin';
}

/** Counted in code points, as JSON Schema's maxLength (which the OpenAPI document states) counts them. */
export const reasonSchema = z
  .string()
  .refine(
    (s) => [...s].length <= MAX_REASON_LENGTH,
    `a reason is at most ${MAX_REASON_LENGTH} characters (a line in the audit trail)`,
  )
  .meta({ maxLength: MAX_REASON_LENGTH });

function reasonHeader(event: ApiEvent): string | undefined {
  const raw = header(event, 'x-strata-reason')?.trim();
  if (raw === undefined || raw === '') return undefined;
  return parseWith(reasonSchema, raw, 'x-strata-reason');
}

/**
 * The document of a PUT or validate body. Checked here before the service is asked, so a bad document is a 400 in
 * every runtime (also one without a policy store); the service checks it again, as the authority on what it stores.
 */
function documentBody(event: ApiEvent): unknown {
  const input: unknown = jsonBody(event, z.unknown());
  parsePolicyDocument(input);
  return input;
}

/** `GET /v1/admin/policy`: the policy in force, with its version as `etag` (send it back as If-Match to change it). */
export async function getPolicy(ctx: ApiContext): Promise<ApiResult> {
  const view = await policyAdmin(ctx).current();
  return json(200, view, versionHeaders(view));
}

/**
 * `PUT /v1/admin/policy`: body = a policy document; `if-match` = the version read by GET (required: two operators
 * editing at once must not silently overwrite each other); `x-strata-reason` goes into the audit trail. 200 with
 * the new policy; 409 VERSION_CONFLICT (from the service) when another change came first.
 */
export async function putPolicy(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const raw = header(event, 'if-match');
  const ifMatch = raw?.trim() ? ifMatchHeader(event) : undefined;
  if (ifMatch === undefined) {
    throw new ValidationError(
      'if-match',
      'missing; send if-match with the version read by GET /v1/admin/policy (its etag), ' +
        'so a concurrent change is not overwritten',
    );
  }
  if (ifMatch === '*') {
    throw new ValidationError(
      'if-match',
      'if-match must be the version read by GET /v1/admin/policy (its etag, e.g. "3"), not *: the policy always exists',
      { value: '*' },
    );
  }
  const reason = reasonHeader(event);
  const input = documentBody(event);
  const view = await policyAdmin(ctx).put(input, {
    ifVersion: ifMatch,
    author: author(ctx, event),
    ...(reason === undefined ? {} : { reason }),
  });
  return json(200, view, versionHeaders(view));
}

/**
 * `POST /v1/admin/policy/validate`: body = a candidate document. 200 with what it compiles to and which rules would
 * fire now; 400 VALIDATION_FAILED with `details.problems` (each with its path and rule) when it is refused.
 */
export async function validatePolicy(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const input = documentBody(event);
  return json(200, await policyAdmin(ctx).validate(input));
}

/**
 * A version in a path or query: up to 16 digits, like If-Match. In the path, one above 2^53-1 is a version there is
 * not (404, as for any unknown version), not an error of the request.
 */
const versionNumber = (field: string) =>
  z
    .string()
    .regex(/^\d{1,16}$/, `${field} must be a version: a whole number (0 or more)`)
    .transform(Number);

/** A `limit` in a query: a whole number from 1 to `max`. */
const limitParam = (max: number) =>
  z
    .string()
    .regex(/^\d{1,4}$/, `limit must be a whole number from 1 to ${max}`)
    .transform(Number)
    .pipe(z.number().int().min(1, `limit must be from 1 to ${max}`).max(max, `limit must be from 1 to ${max}`));

const versionsQuery = z.strictObject({
  limit: limitParam(MAX_VERSIONS_LIMIT).optional(),
  // Above 2^53-1 a number is no longer exact: refused, as the document states (`maximum`).
  before: versionNumber('before')
    .pipe(z.number().max(Number.MAX_SAFE_INTEGER, `before must be at most ${Number.MAX_SAFE_INTEGER}`))
    .optional(),
});

/** `GET /v1/admin/policy/versions?limit=&before=`: the audit trail, newest first; `before` pages back through it. */
export async function listPolicyVersions(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const q = parseWith(versionsQuery, dropEmpty(event.queryStringParameters), 'query');
  const limit = q.limit ?? DEFAULT_VERSIONS_LIMIT;
  const versions = await policyAdmin(ctx).versions({ limit, ...(q.before === undefined ? {} : { before: q.before }) });
  return json(200, { versions });
}

/** `GET /v1/admin/policy/versions/{version}`: one version's document and who wrote it; 404 when there is none. */
export async function getPolicyVersion(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const version = parseWith(versionNumber('version'), event.pathParameters?.version ?? '', 'version');
  const service = policyAdmin(ctx);
  const view = Number.isSafeInteger(version) ? await service.version(version) : undefined;
  if (!view) {
    throw new NotFoundError(`no policy version ${version}; GET /v1/admin/policy/versions lists the versions there are`, {
      version,
    });
  }
  return json(200, view);
}

const firingsQuery = z.strictObject({ limit: limitParam(MAX_FIRINGS_LIMIT).optional() });

/**
 * `GET /v1/admin/policy/firings?limit=`: what the background rules did, newest first: the bounded history of this
 * runtime's evaluator (`npm start`), or the one the scheduled evaluator keeps in the policy store (AWS).
 */
export async function listPolicyFirings(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const q = parseWith(firingsQuery, dropEmpty(event.queryStringParameters), 'query');
  const firings = await policyFirings(ctx).firings(q.limit ?? DEFAULT_FIRINGS_LIMIT);
  return json(200, { firings });
}

export const rollbackBodySchema = z.strictObject({
  /** The version to restore; 0 = back to the deployment's configuration. */
  version: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  reason: reasonSchema.optional(),
});

/**
 * `POST /v1/admin/policy/rollback`: body `{ "version": n, "reason"? }` makes version n's document current again, as
 * a new version (0: follow the deployment's configuration again). `if-match` is optional here: restoring a known
 * version is safe to repeat; with it, the rollback applies only if the policy is still at that version.
 */
export async function rollbackPolicy(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  // `*` matches any version: the policy always exists.
  const ifMatch = ifMatchHeader(event);
  const body = jsonBody(event, rollbackBodySchema);
  const reason = body.reason?.trim();
  const view = await policyAdmin(ctx).rollback(body.version, {
    author: author(ctx, event),
    ...(reason ? { reason } : {}),
    ...(typeof ifMatch === 'number' ? { ifVersion: ifMatch } : {}),
  });
  return json(200, view, versionHeaders(view));
}
