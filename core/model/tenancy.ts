// Tenancy: which namespaces each API key may touch, parsed from STRATA_TENANT_ACCESS. Definitions only; the API's
// checks (403 NAMESPACE_FORBIDDEN, admin routes) are in api/tenant-access.ts, and the live cost view groups
// namespaces by tenant with the same rule.
import * as z from 'zod';
import { ConfigError } from '../errors.js';

export interface TenantGrant {
  keyId: string;
  tenant: string;
  namespaces: string[];
  /** The key may call the admin routes (`"admin": true`; an admin-only key may list no namespace). */
  admin: boolean;
}

export interface TenantAccess {
  /** How many API keys are mapped. */
  readonly keys: number;
  /** How many of them are admin keys. */
  readonly adminKeys: number;
  /** The grant of an API key id, or undefined for a key the map does not know. */
  grantOf(keyId: string): TenantGrant | undefined;
}

const NAMESPACE_GRANT = /^[a-z0-9][a-z0-9_-]{0,62}\*?$|^\*$/;

const grantsSchema = z
  .array(
    z.strictObject({
      keyId: z.string().min(1, 'keyId must not be empty'),
      tenant: z.string().min(1, 'tenant must not be empty'),
      namespaces: z.array(z.string().regex(NAMESPACE_GRANT, 'a namespace, or a prefix followed by "*"')).default([]),
      admin: z.boolean({ error: '"admin" must be true or false' }).default(false),
    }),
  )
  .superRefine((grants, ctx) => {
    const seen = new Set<string>();
    grants.forEach((g, i) => {
      if (seen.has(g.keyId)) ctx.addIssue({ code: 'custom', path: [i, 'keyId'], message: `key id '${g.keyId}' is listed twice` });
      seen.add(g.keyId);
      if (g.namespaces.length === 0 && !g.admin) {
        const message = 'a tenant needs at least one namespace (an operator key with none: "admin": true)';
        ctx.addIssue({ code: 'custom', path: [i, 'namespaces'], message });
      }
    });
  });

/** Parses `STRATA_TENANT_ACCESS`; undefined when unset or empty (nothing enforced). Throws ConfigError when bad. */
export function parseTenantAccess(raw: string | undefined): TenantAccess | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch (e) {
    throw new ConfigError(`STRATA_TENANT_ACCESS is not valid JSON: ${(e as Error).message}`);
  }
  const r = grantsSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const expected = '(expected [{ "keyId", "tenant", "namespaces": [...], "admin"?: true }])';
    throw new ConfigError(`invalid STRATA_TENANT_ACCESS at [${issue.path.join('].[')}]: ${issue.message} ${expected}`);
  }
  const byKey = new Map(r.data.map((g) => [g.keyId, g]));
  return { keys: byKey.size, adminKeys: r.data.filter((g) => g.admin).length, grantOf: (keyId) => byKey.get(keyId) };
}

/**
 * How closely one grant (a name, `prefix*`, or `*`) covers `ns`: -1 not at all, the prefix's length for a prefix
 * grant, Infinity for the name itself. The most specific grant decides which tenant a namespace belongs to.
 */
export function grantSpecificity(grant: string, ns: string): number {
  if (!grant.endsWith('*')) return grant === ns ? Number.POSITIVE_INFINITY : -1;
  const prefix = grant.slice(0, -1);
  return ns.startsWith(prefix) ? prefix.length : -1;
}

/** Whether a grant list covers `ns` (exact names, `prefix*`, or `*`). */
export function grants(namespaces: readonly string[], ns: string): boolean {
  return namespaces.some((g) => grantSpecificity(g, ns) >= 0);
}
