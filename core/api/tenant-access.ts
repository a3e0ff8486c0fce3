import { createHash } from 'node:crypto';
import { StrataError } from '../errors.js';
import { grants, type TenantAccess } from '../model/tenancy.js';
import type { ApiEvent } from './http.js';

/**
 * Which namespaces each tenant's API key may touch (DESIGN.md, Auth). API Gateway checks that a request carries
 * a valid key and applies the key's usage plan; it puts the key's id into `requestContext.identity.apiKeyId`.
 * This module maps that id to its tenant and refuses a namespaced route (`/v1/ns/{ns}/...`) for a namespace the
 * tenant was not given, with 403 `NAMESPACE_FORBIDDEN`.
 *
 * The map comes from `STRATA_TENANT_ACCESS` (JSON, written by the API stack from the environment's `tenants`,
 * with each key's id): `[{ "keyId": "...", "tenant": "web", "namespaces": ["web-sessions", "web-*"] }]`. A
 * namespace ending in `*` grants every namespace with that prefix. When the variable is unset (a local run
 * without keys) nothing is enforced; when it is set, a request without a known key id is refused (fail closed).
 *
 * Routes without `{ns}` (stats, health, cost) carry no tenant data. Admin routes (`auth: 'admin'`) need an
 * operator: in AWS an IAM identity on top of the key (the API stack gives those methods IAM authorization, and
 * their function no tenant map); where the map is set and no IAM stands in front (`npm start`), a key marked
 * `"admin": true` in it, see {@link checkAdminAccess}.
 */
/** 403 `NAMESPACE_FORBIDDEN`: the caller's API key is not for this namespace (or not known at all). */
export class NamespaceForbiddenError extends StrataError {
  constructor(message: string, details: Record<string, unknown>) {
    super('NAMESPACE_FORBIDDEN', message, details);
  }
}

/**
 * Refuses the request when access is enforced and the route's `{ns}` is not granted to the caller's key. Routes
 * without a namespace pass. Call after the route is matched (so `ns` is the route's parameter).
 */
export function checkNamespaceAccess(
  access: TenantAccess | undefined,
  resource: string,
  event: Pick<ApiEvent, 'pathParameters' | 'requestContext'>,
): void {
  if (!access || !resource.includes('{ns}')) return;
  const ns = event.pathParameters?.ns;
  if (ns === undefined) return; // the route's own validation reports a missing namespace
  const keyId = event.requestContext?.identity?.apiKeyId ?? undefined;
  if (!keyId)
    throw new NamespaceForbiddenError(
      'this request carries no API key id, so its namespaces cannot be checked; send the tenant API key in x-api-key',
      { namespace: ns },
    );
  const grant = access.grantOf(keyId);
  if (!grant)
    throw new NamespaceForbiddenError(
      `the API key is not mapped to any tenant in this deployment; ask the operator to add it to the environment's tenants`,
      { namespace: ns },
    );
  if (!grants(grant.namespaces, ns)) {
    const allowed = grant.namespaces.join(', ') || 'no namespace (an admin-only key)';
    throw new NamespaceForbiddenError(`tenant '${grant.tenant}' may not use namespace '${ns}'; its key is for: ${allowed}`, {
      namespace: ns,
      tenant: grant.tenant,
      allowed: grant.namespaces,
    });
  }
}

const ADMIN_SCOPE = { scope: 'admin' } as const;

/**
 * Refuses an admin route (`auth: 'admin'`) to a caller that is not an operator, when access is enforced: 403
 * `NAMESPACE_FORBIDDEN` with `details.scope: 'admin'` (the admin routes reach every namespace's data, so they are
 * refused like a namespace the key was not given). An operator is a key marked `"admin": true`, or an IAM
 * principal: in AWS those methods use IAM authorization, so API Gateway has checked the caller's SigV4 signature
 * before the function runs and names the principal in `identity.userArn` (which the local server never sets).
 * Without a map nothing is enforced, as for namespaces: the deployed admin function gets none (IAM guards it).
 */
export function checkAdminAccess(access: TenantAccess | undefined, event: Pick<ApiEvent, 'requestContext'>): void {
  if (!access) return;
  const identity = event.requestContext?.identity;
  if (identity?.userArn) return;
  const keyId = identity?.apiKeyId ?? undefined;
  const how = 'send a key marked "admin": true in STRATA_TENANT_ACCESS in x-api-key';
  if (!keyId)
    throw new NamespaceForbiddenError(`the admin routes need an admin API key and this request has none; ${how}`, ADMIN_SCOPE);
  const grant = access.grantOf(keyId);
  if (!grant) {
    const message = `the API key is not mapped to any tenant in this deployment, and the admin routes need an admin key; ${how}`;
    throw new NamespaceForbiddenError(message, ADMIN_SCOPE);
  }
  if (!grant.admin) {
    const message = `tenant '${grant.tenant}' may not use the admin routes: its key is not an admin key; ${how}`;
    throw new NamespaceForbiddenError(message, { scope: 'admin', tenant: grant.tenant });
  }
}

/**
 * The operator calling an admin route, for what it records (the policy's audit trail, the replacement controls):
 * the IAM principal API Gateway authorized (AWS), else the tenant of the admin key (`npm start` with a tenant map);
 * undefined when neither is known (a local run without keys).
 */
export function adminCaller(access: TenantAccess | undefined, event: Pick<ApiEvent, 'requestContext'>): string | undefined {
  const identity = event.requestContext?.identity;
  if (identity?.userArn) return identity.userArn;
  const keyId = identity?.apiKeyId ?? undefined;
  const grant = keyId ? access?.grantOf(keyId) : undefined;
  return grant?.admin ? grant.tenant : undefined;
}

/**
 * Who is calling, for state a request creates and a later one must match (uploads, api/operations.ts): the tenant
 * when access is enforced (any of the tenant's keys is the tenant), else a hash of the API key id (locally the key
 * itself: never stored as is), else null (no key: only the namespace and key bind what was created).
 */
export function callerIdentity(access: TenantAccess | undefined, event: Pick<ApiEvent, 'requestContext'>): string | null {
  const keyId = event.requestContext?.identity?.apiKeyId ?? undefined;
  if (!keyId) return null;
  const grant = access?.grantOf(keyId);
  if (grant) return `tenant:${grant.tenant}`;
  return `key:${createHash('sha256').update(keyId).digest('base64url').slice(0, 22)}`;
}
