import type { Context } from 'aws-lambda';
import { apiHandler } from '../../core/composition/api-handler.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { callerIdentity, checkAdminAccess, checkNamespaceAccess } from '../../core/api/tenant-access.js';
import { grants, parseTenantAccess } from '../../core/model/tenancy.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { ConfigError } from '../../core/errors.js';
import { buildApiContext, setApiContext } from '../../core/composition/api-context.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';

const ACCESS = JSON.stringify([
  { keyId: 'k-web', tenant: 'web', namespaces: ['web-sessions', 'pages-*'] },
  { keyId: 'k-ops', tenant: 'ops', namespaces: ['*'] },
]);

function event(method: string, resource: string, params: Record<string, string> | null, keyId?: string, body?: string): ApiEvent {
  return {
    httpMethod: method,
    resource,
    path: resource,
    pathParameters: params,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ?? null,
    isBase64Encoded: false,
    requestContext: { identity: keyId ? { apiKeyId: keyId } : {} },
  } as unknown as ApiEvent;
}

const ctx = { awsRequestId: 'req-t' } as Context;

describe('tenant access: API keys mapped to namespaces', () => {
  it('reads STRATA_TENANT_ACCESS: unset or empty enforces nothing, bad values fail start-up with the variable named', () => {
    expect(parseTenantAccess(undefined)).toBeUndefined();
    expect(parseTenantAccess('  ')).toBeUndefined();
    expect(parseTenantAccess(ACCESS)!.keys).toBe(2);
    expect(() => parseTenantAccess('{nope')).toThrow(ConfigError);
    expect(() => parseTenantAccess('{nope')).toThrow(/STRATA_TENANT_ACCESS is not valid JSON/);
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: [] }]))).toThrow(
      /\[0\]\.\[namespaces\].*at least one namespace/,
    );
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: ['Bad NS'] }]))).toThrow(
      /namespaces\]\.\[0\]/,
    );
    expect(() =>
      parseTenantAccess(
        JSON.stringify([
          { keyId: 'a', tenant: 't', namespaces: ['x'] },
          { keyId: 'a', tenant: 'u', namespaces: ['y'] },
        ]),
      ),
    ).toThrow(/key id 'a' is listed twice/);
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: ['x'], extra: 1 }]))).toThrow(
      ConfigError,
    );
  });

  it('grants exact names, prefixes ending in * and * for all', () => {
    expect(grants(['web-sessions'], 'web-sessions')).toBe(true);
    expect(grants(['web-sessions'], 'web-sessions2')).toBe(false);
    expect(grants(['pages-*'], 'pages-home')).toBe(true);
    expect(grants(['pages-*'], 'pages')).toBe(false);
    expect(grants(['*'], 'anything')).toBe(true);
    expect(grants([], 'anything')).toBe(false);
  });

  it('checks only namespaced routes, and fails closed for a request without a known key', () => {
    const access = parseTenantAccess(ACCESS);
    const keyRoute = '/v1/ns/{ns}/keys/{key}';
    expect(() =>
      checkNamespaceAccess(access, keyRoute, event('GET', keyRoute, { ns: 'web-sessions', key: 'k' }, 'k-web')),
    ).not.toThrow();
    expect(() => checkNamespaceAccess(access, '/v1/stats', event('GET', '/v1/stats', null))).not.toThrow();
    expect(() => checkNamespaceAccess(undefined, keyRoute, event('GET', keyRoute, { ns: 'other', key: 'k' }))).not.toThrow();
    for (const [keyId, message] of [
      [undefined, /carries no API key id/],
      ['k-unknown', /not mapped to any tenant/],
      ['k-web', /tenant 'web' may not use namespace 'other'; its key is for: web-sessions, pages-\*/],
    ] as const) {
      expect(() => checkNamespaceAccess(access, keyRoute, event('GET', keyRoute, { ns: 'other', key: 'k' }, keyId))).toThrow(
        expect.objectContaining({ code: 'NAMESPACE_FORBIDDEN', status: 403, message: expect.stringMatching(message) }),
      );
    }
  });

  describe('through the Lambda handlers', () => {
    beforeEach(() =>
      setApiContext({
        coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
        inlineLimitBytes: 1024,
        urlTtlSeconds: 60,
        tenantAccess: parseTenantAccess(ACCESS),
      }),
    );
    afterEach(() => setApiContext(undefined));
    const keys = apiHandler('keys');
    const batch = apiHandler('batch');
    const service = apiHandler('service');
    const call = async (h: ReturnType<typeof apiHandler>, e: ApiEvent) => (await h(e, ctx)) as ApiResult;

    it("serves a key's own namespaces and refuses others with 403 NAMESPACE_FORBIDDEN, without touching the data", async () => {
      const route = '/v1/ns/{ns}/keys/{key}';
      const put = {
        ...event('PUT', route, { ns: 'pages-home', key: 'a' }, 'k-web'),
        body: Buffer.from('v').toString('base64'),
        isBase64Encoded: true,
      };
      expect((await call(keys, put)).statusCode).toBe(200);
      expect((await call(keys, event('GET', route, { ns: 'pages-home', key: 'a' }, 'k-web'))).statusCode).toBe(200);

      const refusedPut = { ...put, pathParameters: { ns: 'billing', key: 'a' } };
      const refused = await call(keys, refusedPut);
      expect(refused.statusCode).toBe(403);
      expect(JSON.parse(refused.body)).toEqual({
        error: {
          code: 'NAMESPACE_FORBIDDEN',
          message: expect.stringContaining("tenant 'web' may not use namespace 'billing'"),
          details: { namespace: 'billing', tenant: 'web', allowed: ['web-sessions', 'pages-*'] },
        },
      });
      // The refused write did not land: the all-namespaces key reads a miss there.
      expect((await call(keys, event('GET', route, { ns: 'billing', key: 'a' }, 'k-ops'))).statusCode).toBe(404);
      expect((await call(keys, event('GET', route, { ns: 'pages-home', key: 'a' }))).statusCode).toBe(403);
    });

    it('applies to batch routes and leaves service routes open', async () => {
      const body = JSON.stringify({ keys: ['a'] });
      expect((await call(batch, event('POST', '/v1/ns/{ns}/batch/get', { ns: 'web-sessions' }, 'k-web', body))).statusCode).toBe(
        200,
      );
      const refused = await call(batch, event('POST', '/v1/ns/{ns}/batch/get', { ns: 'reports' }, 'k-web', body));
      expect(refused.statusCode).toBe(403);
      expect(JSON.parse(refused.body).error.code).toBe('NAMESPACE_FORBIDDEN');
      expect((await call(service, event('GET', '/v1/stats', null))).statusCode).toBe(200);
    });
  });
});

describe('tenant access: the admin routes', () => {
  const ADMIN_ACCESS = JSON.stringify([
    { keyId: 'k-web', tenant: 'web', namespaces: ['*'] },
    { keyId: 'k-admin', tenant: 'ops', admin: true },
    { keyId: 'k-both', tenant: 'ops2', namespaces: ['ops-*'], admin: true },
  ]);
  const LIST = '/v1/admin/workflows/executions';
  const listEvent = (keyId?: string, identity: Record<string, unknown> = {}) => {
    const e = event('GET', LIST, null, keyId);
    return { ...e, requestContext: { identity: { ...e.requestContext.identity, ...identity } } } as unknown as ApiEvent;
  };

  it('reads "admin": true from STRATA_TENANT_ACCESS (an admin-only key needs no namespace) and checks it at start-up', () => {
    const access = parseTenantAccess(ADMIN_ACCESS)!;
    expect([access.keys, access.adminKeys]).toEqual([3, 2]);
    expect(access.grantOf('k-admin')).toEqual({ keyId: 'k-admin', tenant: 'ops', namespaces: [], admin: true });
    expect(access.grantOf('k-web')!.admin).toBe(false);
    const parse = (grant: Record<string, unknown>) => () => parseTenantAccess(JSON.stringify([grant]));
    expect(parse({ keyId: 'a', tenant: 't', admin: 'yes' })).toThrow(/\[0\]\.\[admin\]: "admin" must be true or false/);
    expect(parse({ keyId: 'a', tenant: 't', admin: false })).toThrow(
      /\[0\]\.\[namespaces\]: a tenant needs at least one namespace \(an/,
    );
    expect(parse({ keyId: 'a', tenant: 't' })).toThrow(ConfigError);
    // The start-up banner says whether the admin routes can be reached at all.
    const banner = (raw: string) => {
      const ctx = buildApiContext(loadRuntimeEnv({ STRATA_TENANT_ACCESS: raw }));
      return ctx.describe().find((l) => l.startsWith('auth'));
    };
    expect(banner(ADMIN_ACCESS)).toMatch(/3 API key\(s\).*2 of them admin keys/);
    expect(banner(ACCESS)).toMatch(/no admin key: the admin routes refuse every request/);
  });

  it('refuses every caller but an admin key or an IAM principal while access is enforced, and nobody without a map', () => {
    const access = parseTenantAccess(ADMIN_ACCESS);
    expect(() => checkAdminAccess(access, listEvent('k-admin'))).not.toThrow();
    expect(() => checkAdminAccess(access, listEvent('k-both'))).not.toThrow();
    // API Gateway names the IAM principal it authorized (the admin methods use IAM authorization in AWS).
    expect(() => checkAdminAccess(access, listEvent('k-web', { userArn: 'arn:aws:iam::123456789012:user/ops' }))).not.toThrow();
    expect(() => checkAdminAccess(undefined, listEvent())).not.toThrow();
    for (const [keyId, message] of [
      ['k-web', /tenant 'web' may not use the admin routes: its key is not an admin key/],
      ['k-unknown', /not mapped to any tenant/],
      [undefined, /need an admin API key and this request has none/],
    ] as const) {
      const refused = expect.objectContaining({
        code: 'NAMESPACE_FORBIDDEN',
        status: 403,
        message: expect.stringMatching(message),
      });
      expect(() => checkAdminAccess(access, listEvent(keyId))).toThrow(refused);
    }
  });

  describe('through the admin Lambda handler', () => {
    const workflows = {
      start: async () => ({ execution: 'x', workflow: 'scale-out' as const, status: 'RUNNING' as const, startedAt: '' }),
      describe: async () => undefined,
      list: async () => [],
    };
    const coordinator = () => new Coordinator({ tiers: [new MemoryTier()], flushTimer: false });
    const tenantAccess = parseTenantAccess(ADMIN_ACCESS);
    beforeEach(() =>
      setApiContext({ coordinator: coordinator(), inlineLimitBytes: 1024, urlTtlSeconds: 60, tenantAccess, workflows }),
    );
    afterEach(() => setApiContext(undefined));
    const admin = apiHandler('admin');

    it('answers 403 NAMESPACE_FORBIDDEN to a tenant key and serves the admin key', async () => {
      const refused = (await admin(listEvent('k-web'), ctx)) as ApiResult;
      expect(refused.statusCode).toBe(403);
      const message = expect.stringContaining("tenant 'web' may not use the admin routes");
      const details = { scope: 'admin', tenant: 'web' };
      expect(JSON.parse(refused.body)).toEqual({ error: { code: 'NAMESPACE_FORBIDDEN', message, details } });
      const served = (await admin(listEvent('k-admin'), ctx)) as ApiResult;
      expect([served.statusCode, JSON.parse(served.body)]).toEqual([200, { executions: [] }]);
    });
  });
});

describe('callerIdentity (what an upload is bound to)', () => {
  const byKey = (apiKeyId?: string) => ({ requestContext: { identity: apiKeyId ? { apiKeyId } : {} } }) as unknown as ApiEvent;

  it('is the tenant when access is enforced, so any of its keys is the same caller', () => {
    const access = parseTenantAccess(
      JSON.stringify([
        { keyId: 'k1', tenant: 'web', namespaces: ['web-*'] },
        { keyId: 'k2', tenant: 'web', namespaces: ['web-*'] },
        { keyId: 'k3', tenant: 'reports', namespaces: ['reports'] },
      ]),
    );
    expect(callerIdentity(access, byKey('k1'))).toBe('tenant:web');
    expect(callerIdentity(access, byKey('k2'))).toBe('tenant:web');
    expect(callerIdentity(access, byKey('k3'))).toBe('tenant:reports');
  });

  it('is a hash of the key id without a tenant map (locally the key itself, never stored), and null without a key', () => {
    const id = callerIdentity(undefined, byKey('secret-local-key'))!;
    expect(id).toMatch(/^key:[A-Za-z0-9_-]{22}$/);
    expect(id).not.toContain('secret');
    expect(callerIdentity(undefined, byKey('other-key'))).not.toBe(id);
    expect(callerIdentity(undefined, byKey())).toBeNull();
  });
});
