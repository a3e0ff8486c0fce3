import type { Context } from 'aws-lambda';
import { apiHandler } from '../../layers/core/api/handler.js';
import type { ApiEvent, ApiResult } from '../../layers/core/api/http.js';
import { checkNamespaceAccess, grants, parseTenantAccess } from '../../layers/core/api/tenant-access.js';
import { Coordinator } from '../../layers/core/coordinator/coordinator.js';
import { ConfigError } from '../../layers/core/runtime/config.js';
import { setApiContext } from '../../layers/core/runtime/context.js';
import { MemoryTier } from '../../layers/core/tiers/memory-tier.js';

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
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: [] }]))).toThrow(/\[0\]\.\[namespaces\].*at least one namespace/);
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: ['Bad NS'] }]))).toThrow(/namespaces\]\.\[0\]/);
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: ['x'] }, { keyId: 'a', tenant: 'u', namespaces: ['y'] }]))).toThrow(/key id 'a' is listed twice/);
    expect(() => parseTenantAccess(JSON.stringify([{ keyId: 'a', tenant: 't', namespaces: ['x'], extra: 1 }]))).toThrow(ConfigError);
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
    expect(() => checkNamespaceAccess(access, keyRoute, event('GET', keyRoute, { ns: 'web-sessions', key: 'k' }, 'k-web'))).not.toThrow();
    expect(() => checkNamespaceAccess(access, '/v1/stats', event('GET', '/v1/stats', null))).not.toThrow();
    expect(() => checkNamespaceAccess(undefined, keyRoute, event('GET', keyRoute, { ns: 'other', key: 'k' }))).not.toThrow();
    for (const [keyId, message] of [
      [undefined, /carries no API key id/],
      ['k-unknown', /not mapped to any tenant/],
      ['k-web', /tenant 'web' may not use namespace 'other'; its key is for: web-sessions, pages-\*/],
    ] as const) {
      expect(() => checkNamespaceAccess(access, keyRoute, event('GET', keyRoute, { ns: 'other', key: 'k' }, keyId))).toThrow(expect.objectContaining({ code: 'NAMESPACE_FORBIDDEN', status: 403, message: expect.stringMatching(message) }));
    }
  });

  describe('through the Lambda handlers', () => {
    beforeEach(() => setApiContext({ coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }), inlineLimitBytes: 1024, urlTtlSeconds: 60, tenantAccess: parseTenantAccess(ACCESS) }));
    afterEach(() => setApiContext(undefined));
    const keys = apiHandler('keys');
    const batch = apiHandler('batch');
    const service = apiHandler('service');
    const call = async (h: ReturnType<typeof apiHandler>, e: ApiEvent) => (await h(e, ctx)) as ApiResult;

    it("serves a key's own namespaces and refuses others with 403 NAMESPACE_FORBIDDEN, without touching the data", async () => {
      const route = '/v1/ns/{ns}/keys/{key}';
      const put = { ...event('PUT', route, { ns: 'pages-home', key: 'a' }, 'k-web'), body: Buffer.from('v').toString('base64'), isBase64Encoded: true };
      expect((await call(keys, put)).statusCode).toBe(200);
      expect((await call(keys, event('GET', route, { ns: 'pages-home', key: 'a' }, 'k-web'))).statusCode).toBe(200);

      const refusedPut = { ...put, pathParameters: { ns: 'billing', key: 'a' } };
      const refused = await call(keys, refusedPut);
      expect(refused.statusCode).toBe(403);
      expect(JSON.parse(refused.body)).toEqual({ error: { code: 'NAMESPACE_FORBIDDEN', message: expect.stringContaining("tenant 'web' may not use namespace 'billing'"), details: { namespace: 'billing', tenant: 'web', allowed: ['web-sessions', 'pages-*'] } } });
      // The refused write did not land: the all-namespaces key reads a miss there.
      expect((await call(keys, event('GET', route, { ns: 'billing', key: 'a' }, 'k-ops'))).statusCode).toBe(404);
      expect((await call(keys, event('GET', route, { ns: 'pages-home', key: 'a' }))).statusCode).toBe(403);
    });

    it('applies to batch routes and leaves service routes open', async () => {
      const body = JSON.stringify({ keys: ['a'] });
      expect((await call(batch, event('POST', '/v1/ns/{ns}/batch/get', { ns: 'web-sessions' }, 'k-web', body))).statusCode).toBe(200);
      const refused = await call(batch, event('POST', '/v1/ns/{ns}/batch/get', { ns: 'reports' }, 'k-web', body));
      expect(refused.statusCode).toBe(403);
      expect(JSON.parse(refused.body).error.code).toBe('NAMESPACE_FORBIDDEN');
      expect((await call(service, event('GET', '/v1/stats', null))).statusCode).toBe(200);
    });
  });
});
