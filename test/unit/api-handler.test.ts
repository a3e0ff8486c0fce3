import type { Context } from 'aws-lambda';
import { handler as keys } from '../../lambdas/api/keys.js';
import { handler as service } from '../../lambdas/api/service.js';
import { setApiContext } from '../../core/composition/api-context.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import type { Tier } from '../../core/tiers/tier.js';
import { captureLog } from '../helpers/log-capture.js';

const ctx = { awsRequestId: 'req-1' } as Context;

function event(
  method: string,
  resource: string,
  params: Record<string, string> | null,
  body?: Buffer,
  headers: Record<string, string> = {},
): ApiEvent {
  return {
    httpMethod: method,
    resource,
    path: resource,
    pathParameters: params,
    headers,
    body: body ? body.toString('base64') : null,
    isBase64Encoded: !!body,
  } as unknown as ApiEvent;
}

describe('API Lambda handlers (in-process, API Gateway proxy events)', () => {
  afterEach(() => setApiContext(undefined));

  it('serves a put and a get with tier, version and expiry headers', async () => {
    setApiContext({
      coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    });
    const put = (await keys(
      event('PUT', '/v1/ns/{ns}/keys/{key}', { ns: 'app', key: 'k' }, Buffer.from('v'), { 'x-strata-ttl': '30' }),
      ctx,
    )) as ApiResult;
    expect(put.statusCode).toBe(200);
    const get = (await keys(event('GET', '/v1/ns/{ns}/keys/{key}', { ns: 'app', key: 'k' }), ctx)) as ApiResult;
    expect(get.statusCode).toBe(200);
    expect(Buffer.from(get.body, 'base64').toString()).toBe('v');
    expect(get.headers).toMatchObject({
      'x-strata-tier': 'hot',
      'x-strata-version': JSON.parse(put.body).version.toString(),
      'x-request-id': 'req-1',
    });
    expect(get.headers!['x-strata-expires-at']).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('refuses the namespace Strata keeps its own records in (the hot-fence document), so no tenant can touch them', async () => {
    setApiContext({
      coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    });
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = (await keys(
        event(
          method,
          '/v1/ns/{ns}/keys/{key}',
          { ns: 'strata-system', key: 'hot-fence' },
          method === 'PUT' ? Buffer.from('[]') : undefined,
        ),
        ctx,
      )) as ApiResult;
      expect(res.statusCode).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'ns' } } });
    }
  });

  it('turns a failing tier into a typed error that leaks none of the failure details', async () => {
    const broken = new MemoryTier();
    broken.get = async () => {
      throw new Error('ECONNRESET at 10.0.3.7:6379 password=hunter2');
    };
    setApiContext({
      coordinator: new Coordinator({ tiers: [broken as Tier], flushTimer: false }),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    });
    const log = captureLog();
    try {
      const res = (await keys(event('GET', '/v1/ns/{ns}/keys/{key}', { ns: 'app', key: 'k' }), ctx)) as ApiResult;
      // A raw Error from a tier is not a typed tier failure: the coordinator counts it as a failed tier -> 503.
      expect([500, 503]).toContain(res.statusCode);
      expect(res.body).not.toMatch(/10\.0\.3\.7|hunter2|ECONNRESET|at /);
      expect(JSON.parse(res.body)).toMatchObject({
        error: { code: expect.any(String), message: expect.any(String), details: { requestId: 'req-1' } },
      });
      // The log has the details the answer hides, but not the password in the tier's message.
      const logged = JSON.stringify(log.lines());
      expect(logged).toMatch(/10\.0\.3\.7/);
      expect(logged).not.toMatch(/hunter2/);
    } finally {
      log.restore();
    }
  });

  it('answers a programming error with a bare INTERNAL 500 and logs the details instead', async () => {
    setApiContext({
      coordinator: {
        stats: async () => {
          throw new TypeError('cannot read x of undefined in /var/task/index.mjs');
        },
      } as unknown as Coordinator,
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    });
    const log = captureLog();
    try {
      const res = (await service(event('GET', '/v1/stats', null), ctx)) as ApiResult;
      expect(res.statusCode).toBe(500);
      expect(JSON.parse(res.body)).toEqual({
        error: {
          code: 'INTERNAL',
          message: 'internal error; quote the requestId when reporting it',
          details: { requestId: 'req-1' },
        },
      });
      expect(JSON.stringify(log.lines())).toMatch(/cannot read x of undefined/);
    } finally {
      log.restore();
    }
  });

  it('rejects a method the resource does not support with 405', async () => {
    setApiContext({
      coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    });
    const res = (await keys(event('POST', '/v1/ns/{ns}/keys/{key}', { ns: 'app', key: 'k' }), ctx)) as ApiResult;
    expect(res.statusCode).toBe(405);
    expect(JSON.parse(res.body).error.code).toBe('METHOD_NOT_ALLOWED');
  });
});
