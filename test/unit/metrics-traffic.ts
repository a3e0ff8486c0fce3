/**
 * Drives the real API Lambda handlers in-process (real coordinator over real memory tiers) and captures the EMF
 * documents their metrics middleware hands to the process's sink. Shared by the metrics and dashboards tests.
 */
import type { Context } from 'aws-lambda';
import { handler as batch } from '../../lambdas/api/batch.js';
import { handler as keys } from '../../lambdas/api/keys.js';
import { handler as service } from '../../lambdas/api/service.js';
import { handler as transfer } from '../../lambdas/api/transfer.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { API_ROUTES } from '../../core/api/routes.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import type { EmfDocument } from '../../core/metrics/emf.js';
import { setMetricsSink } from '../../core/metrics/sink.js';
import { setApiContext } from '../../core/composition/api-context.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';

type Handler = (event: ApiEvent, context: Context) => Promise<ApiResult>;
const HANDLERS = { keys, batch, transfer, service } as unknown as Record<string, Handler>;

export interface Traffic {
  hot: MemoryTier;
  cold: MemoryTier;
  /** Every document recorded so far. */
  docs: EmfDocument[];
  /** Calls the handler that serves `method resource`, as API Gateway would; returns the response and its documents. */
  call(
    method: string,
    resource: string,
    params: Record<string, string> | null,
    opts?: { body?: Buffer | string; headers?: Record<string, string> },
  ): Promise<{ res: ApiResult; docs: EmfDocument[] }>;
  close(): Promise<void>;
}

let requestNo = 0;

/** A context with a hot and a cold memory tier and the namespace `app` configured; metrics captured. */
export function startTraffic(opts: { namespaces?: string[] } = {}): Traffic {
  const hot = new MemoryTier({ name: 'hot' });
  const cold = new MemoryTier({ name: 'cold' });
  const policies = new PolicyRegistry({ namespaces: Object.fromEntries((opts.namespaces ?? ['app']).map((n) => [n, {}])) });
  const coordinator = new Coordinator({ tiers: [hot, cold], policies, flushTimer: false });
  setApiContext({ coordinator, inlineLimitBytes: 64 * 1024, urlTtlSeconds: 60 });
  const docs: EmfDocument[] = [];
  setMetricsSink({ write: (d) => docs.push(...d) });
  return {
    hot,
    cold,
    docs,
    async call(method, resource, params, o = {}) {
      const route = API_ROUTES.find((r) => r.resource === resource);
      if (!route) throw new Error(`no route ${resource}`);
      const body = o.body === undefined ? null : Buffer.from(o.body);
      const event = {
        httpMethod: method,
        resource,
        path: resource,
        pathParameters: params,
        headers: o.headers ?? {},
        body: body ? body.toString('base64') : null,
        isBase64Encoded: !!body,
      } as unknown as ApiEvent;
      const before = docs.length;
      const res = await HANDLERS[route.fn]!(event, { awsRequestId: `req-${++requestNo}` } as Context);
      return { res, docs: docs.slice(before) };
    },
    async close() {
      setMetricsSink(undefined);
      setApiContext(undefined);
      await coordinator.close();
    },
  };
}

export const KEY = '/v1/ns/{ns}/keys/{key}';
export const BATCH_GET = '/v1/ns/{ns}/batch/get';
export const BATCH_PUT = '/v1/ns/{ns}/batch/put';
export const BATCH_DELETE = '/v1/ns/{ns}/batch/delete';
export const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * A mix of every kind of request the API meters: writes, hits on two tiers, misses, a batch across tiers, errors,
 * service endpoints, and a namespace that is not configured.
 */
export async function mixedTraffic(t: Traffic): Promise<void> {
  await t.call('PUT', KEY, { ns: 'app', key: 'a' }, { body: 'hello' });
  await t.call('PUT', KEY, { ns: 'app', key: 'b' }, { body: 'cold value' });
  await t.hot.delete('app', 'b'); // only the cold tier holds b now
  await t.call('GET', KEY, { ns: 'app', key: 'a' });
  await t.call('GET', KEY, { ns: 'app', key: 'b' });
  await t.call('GET', KEY, { ns: 'app', key: 'missing' });
  await t.call('HEAD', KEY, { ns: 'app', key: 'a' });
  await t.call('HEAD', KEY, { ns: 'app', key: 'missing' });
  await t.call('PUT', KEY, { ns: 'app', key: 'c' }, { body: 'c' });
  await t.hot.delete('app', 'c');
  await t.call('POST', BATCH_GET, { ns: 'app' }, { body: JSON.stringify({ keys: ['a', 'c', 'nope'] }), headers: JSON_HEADERS });
  await t.call(
    'POST',
    BATCH_PUT,
    { ns: 'app' },
    { body: JSON.stringify({ items: [{ key: 'x', value: Buffer.from('xyz').toString('base64') }] }), headers: JSON_HEADERS },
  );
  await t.call('POST', BATCH_DELETE, { ns: 'app' }, { body: JSON.stringify({ keys: ['x'] }), headers: JSON_HEADERS });
  await t.call('DELETE', KEY, { ns: 'app', key: 'a' });
  await t.call('GET', KEY, { ns: 'tenant-x', key: 'a' });
  await t.call('PUT', KEY, { ns: 'app', key: 'bad-ttl' }, { body: 'v', headers: { 'x-strata-ttl': 'soon' } });
  await t.call('GET', '/v1/stats', null);
  await t.call('GET', '/v1/health', null);
}
