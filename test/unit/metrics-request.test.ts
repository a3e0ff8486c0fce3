import fc from 'fast-check';
import type { Context } from 'aws-lambda';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { requestMetrics } from '../../core/api/middleware.js';
import { API_ROUTES } from '../../core/api/routes.js';
import { OPERATIONS } from '../../core/metrics/metric-catalog.js';
import type { EmfDocument } from '../../core/metrics/emf.js';
import { emfDocument, emfDocumentSchema } from '../../core/metrics/emf.js';
import { metricsSettings } from '../../core/composition/metrics-settings.js';
import {
  discardSink,
  metricsSink,
  setDefaultMetricsSink,
  setMetricsSink,
  stdoutSink,
  type MetricsSink,
} from '../../core/metrics/sink.js';
import { defaultMetricsSink } from '../../core/composition/metrics-settings.js';
import {
  OPERATION_BY_ROUTE,
  base64DecodedLength,
  requestOutcome,
  tallyBatchGetBody,
} from '../../core/metrics/request-outcome.js';
import { requestMetricDocuments } from '../../core/metrics/request-metrics.js';
import { BATCH_GET, JSON_HEADERS, KEY, mixedTraffic, startTraffic, type Traffic } from './metrics-traffic.js';
import { captureLog } from '../helpers/log-capture.js';
import { buildApiContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';

/** The names of the metrics a document declares. */
function metricNames(doc: EmfDocument): string[] {
  return doc._aws.CloudWatchMetrics.flatMap((d) => d.Metrics.map((m) => m.Name)).sort();
}

function only(docs: EmfDocument[]): EmfDocument {
  expect(docs).toHaveLength(1);
  return docs[0]!;
}

describe('Request metrics from the API handlers', () => {
  let t: Traffic;
  beforeEach(() => {
    t = startTraffic({ namespaces: ['app'] });
  });
  afterEach(async () => {
    await t.close();
  });

  it('records a hit with the tier that served it, the value bytes and the latency', async () => {
    await t.call('PUT', KEY, { ns: 'app', key: 'k' }, { body: 'hello world' });
    const { res, docs } = await t.call('GET', KEY, { ns: 'app', key: 'k' });

    expect(res.headers!['x-strata-tier']).toBe('hot');
    const doc = only(docs);
    expect(doc).toMatchObject({
      Environment: 'local',
      Operation: 'get',
      Namespace: 'app',
      Tier: 'hot',
      Requests: 1,
      Hits: 1,
      Misses: 0,
      BytesOut: 11,
      Errors: 0,
      ServerErrors: 0,
      statusCode: 200,
    });
    expect(doc.Latency).toEqual(expect.any(Number));
    expect(doc.Latency as number).toBeGreaterThanOrEqual(0);
    expect(doc.requestId).toMatch(/^req-/);
    const hits = doc._aws.CloudWatchMetrics.find((d) => d.Metrics.some((m) => m.Name === 'Hits'))!;
    expect(hits.Dimensions).toEqual([
      ['Environment', 'Tier'],
      ['Environment', 'Namespace', 'Tier'],
    ]);
  });

  it('records a hit on a lower tier under that tier', async () => {
    await t.call('PUT', KEY, { ns: 'app', key: 'k' }, { body: 'v' });
    await t.hot.delete('app', 'k');
    const doc = only((await t.call('GET', KEY, { ns: 'app', key: 'k' })).docs);
    expect(doc).toMatchObject({ Tier: 'cold', Hits: 1 });
  });

  it('records a miss as a miss served by no tier, not as an error', async () => {
    const { res, docs } = await t.call('GET', KEY, { ns: 'app', key: 'nothing' });
    expect(res.statusCode).toBe(404);
    const doc = only(docs);
    expect(doc).toMatchObject({ Tier: 'none', Misses: 1, Errors: 0, statusCode: 404 });
    expect(doc.Hits).toBeUndefined();
    expect(doc.ErrorCode).toBeUndefined();
    // Latency by tier 'none' is how the dashboards show what a miss costs.
    expect(doc._aws.CloudWatchMetrics.find((d) => d.Metrics.some((m) => m.Name === 'Latency'))!.Dimensions).toContainEqual([
      'Environment',
      'Tier',
    ]);
  });

  it('treats HEAD like GET: hit with its tier, or miss on a bare 404', async () => {
    await t.call('PUT', KEY, { ns: 'app', key: 'k' }, { body: 'v' });
    expect(only((await t.call('HEAD', KEY, { ns: 'app', key: 'k' })).docs)).toMatchObject({
      Operation: 'head',
      Tier: 'hot',
      Hits: 1,
      Misses: 0,
    });
    expect(only((await t.call('HEAD', KEY, { ns: 'app', key: 'gone' })).docs)).toMatchObject({
      Operation: 'head',
      Tier: 'none',
      Misses: 1,
      Errors: 0,
    });
  });

  it('reports a namespace that is not configured as `other`, a configured one by name', async () => {
    const other = only((await t.call('GET', KEY, { ns: 'some-tenant-namespace', key: 'k' })).docs);
    expect(other.Namespace).toBe('other');
    const own = only((await t.call('GET', KEY, { ns: 'app', key: 'k' })).docs);
    expect(own.Namespace).toBe('app');
  });

  it('records the bytes written by a put', async () => {
    const doc = only((await t.call('PUT', KEY, { ns: 'app', key: 'k' }, { body: Buffer.alloc(1234, 7) })).docs);
    expect(doc).toMatchObject({ Operation: 'put', BytesIn: 1234, Errors: 0 });
    expect(doc.Hits).toBeUndefined();
    expect(doc.Misses).toBeUndefined();
    expect(doc.Tier).toBeUndefined();
  });

  it('records the error code of a rejected request, and 5xx as server errors', async () => {
    const bad = only(
      (await t.call('PUT', KEY, { ns: 'app', key: 'k' }, { body: 'v', headers: { 'x-strata-ttl': 'tomorrow' } })).docs,
    );
    expect(bad).toMatchObject({ ErrorCode: 'VALIDATION_FAILED', Errors: 1, ServerErrors: 0, statusCode: 400 });
    const errors = bad._aws.CloudWatchMetrics.find((d) => d.Metrics.some((m) => m.Name === 'Errors'))!;
    expect(errors.Dimensions).toEqual([['Environment'], ['Environment', 'ErrorCode']]);

    const json = only((await t.call('POST', BATCH_GET, { ns: 'app' }, { body: '{"keys": [', headers: JSON_HEADERS })).docs);
    expect(json).toMatchObject({ Operation: 'batch-get', ErrorCode: 'MALFORMED_JSON', Errors: 1 });

    t.hot.get = async () => {
      throw new Error('connection reset');
    };
    t.cold.get = t.hot.get;
    const log = captureLog();
    const down = await t.call('GET', KEY, { ns: 'app', key: 'k' }).finally(() => log.restore());
    expect(log.lines()).toHaveLength(1); // the error responder's log line
    expect(only(down.docs)).toMatchObject({ ErrorCode: 'TIER_UNAVAILABLE', Errors: 1, ServerErrors: 1, statusCode: 503 });
  });

  it('counts a batch get per key: one document per serving tier, misses and bytes on the request document', async () => {
    await t.call('PUT', KEY, { ns: 'app', key: 'h' }, { body: 'hot!' });
    await t.call('PUT', KEY, { ns: 'app', key: 'c1' }, { body: 'cold-1' });
    await t.call('PUT', KEY, { ns: 'app', key: 'c2' }, { body: 'cold-22' });
    await t.hot.delete('app', 'c1');
    await t.hot.delete('app', 'c2');

    const { res, docs } = await t.call(
      'POST',
      BATCH_GET,
      { ns: 'app' },
      { body: JSON.stringify({ keys: ['h', 'c1', 'c2', 'x', 'y'] }), headers: JSON_HEADERS },
    );

    expect(res.statusCode).toBe(200);
    const [main, ...perTier] = docs;
    expect(main).toMatchObject({
      Operation: 'batch-get',
      Namespace: 'app',
      Requests: 1,
      Misses: 2,
      BytesOut: 4 + 6 + 7,
      Errors: 0,
    });
    expect(main!.Tier).toBeUndefined();
    expect(main!.Hits).toBeUndefined();
    expect(perTier.map((d) => [d.Tier, d.Hits, d.Namespace]).sort()).toEqual([
      ['cold', 2, 'app'],
      ['hot', 1, 'app'],
    ]);
    for (const d of perTier) expect(metricNames(d)).toEqual(['Hits']);
  });

  it('writes only valid EMF (every metric has a value, dimensions are strings, within the limits)', async () => {
    await mixedTraffic(t);
    expect(t.docs.length).toBeGreaterThan(15);
    for (const doc of t.docs) {
      const r = emfDocumentSchema.safeParse(doc);
      expect(r.success ? [] : r.error.issues).toEqual([]);
      for (const d of doc._aws.CloudWatchMetrics) expect(d.Namespace).toBe('Strata/Requests');
    }
  });

  it('hands each request to the sink once: one stdout write, one line per document', async () => {
    const writes: string[] = [];
    setMetricsSink(stdoutSink((text) => writes.push(text)));
    await t.call('PUT', KEY, { ns: 'app', key: 'k' }, { body: 'v' });
    await t.call('GET', KEY, { ns: 'app', key: 'k' });
    expect(writes).toHaveLength(2);
    expect(writes.map((w) => w.trimEnd().split('\n').length)).toEqual([1, 1]);
    expect(JSON.parse(writes[0]!)).toMatchObject({ Operation: 'put', Requests: 1, BytesIn: 1 });
    expect(JSON.parse(writes[1]!)).toMatchObject({ Operation: 'get', Hits: 1, Tier: 'hot' });
  });
});

describe('Default metrics sink', () => {
  const doc = emfDocument({ timestamp: 1, dimensions: { Environment: 'dev' }, values: { requests: 1 } });

  function stdoutWrites(sink: MetricsSink): string[] {
    const writes: string[] = [];
    const original = process.stdout.write;
    process.stdout.write = ((chunk: string) => writes.push(String(chunk)) > 0) as typeof process.stdout.write;
    try {
      sink.write([doc]);
    } finally {
      process.stdout.write = original;
    }
    return writes;
  }

  it('is stdout in Lambda', () => {
    expect(stdoutWrites(defaultMetricsSink({ AWS_LAMBDA_FUNCTION_NAME: 'strata-dev-keys', STRATA_ENV: 'dev' }))).toEqual([
      `${JSON.stringify(doc)}\n`,
    ]);
  });

  it('is silent elsewhere unless STRATA_METRICS_STDOUT=1', () => {
    expect(stdoutWrites(defaultMetricsSink({}))).toEqual([]);
    expect(stdoutWrites(defaultMetricsSink({ STRATA_METRICS_STDOUT: '1' }))).toHaveLength(1);
  });

  it('stops start-up on a bad STRATA_ENV, naming it', () => {
    expect(() => metricsSettings({ STRATA_ENV: 'Prod Env' })).toThrow(/STRATA_ENV/);
    expect(metricsSettings({}).environment).toBe('local');
  });
});

describe('Request metrics middleware', () => {
  const event = {
    httpMethod: 'GET',
    resource: '/v1/stats',
    path: '/v1/stats',
    pathParameters: null,
    headers: {},
    body: null,
    isBase64Encoded: false,
  } as unknown as ApiEvent;
  const response: ApiResult = { statusCode: 200, headers: {}, body: '{}' };

  it('measures latency from before to after with the given clock', () => {
    let clock = 100;
    const docs: EmfDocument[] = [];
    const mw = requestMetrics({
      environment: () => 'dev',
      namespaces: () => new Set(),
      sink: () => ({ write: (d) => docs.push(...d) }),
      now: () => clock,
    });
    const request = {
      event,
      context: { awsRequestId: 'r' } as Context,
      response: undefined as ApiResult | undefined,
      error: undefined,
      internal: {},
    };
    void mw.before!(request as never);
    clock = 142.5;
    request.response = response;
    void mw.after!(request as never);
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ Environment: 'dev', Operation: 'stats', Latency: 42.5 });
  });

  it('never fails the request when the sink throws, and logs only the first failures', () => {
    const log = captureLog();
    try {
      const mw = requestMetrics({
        environment: () => 'dev',
        namespaces: () => new Set(),
        sink: () => ({
          write: () => {
            throw new Error('disk full');
          },
        }),
      });
      for (let i = 0; i < 10; i++) {
        const request = { event, context: {} as Context, response, error: undefined, internal: {} };
        expect(() => mw.after!(request as never)).not.toThrow();
      }
    } finally {
      log.restore();
    }
    expect(log.lines()).toHaveLength(3);
    expect(log.lines()[0]).toMatchObject({
      level: 'error',
      msg: 'request metrics not recorded',
      error: expect.stringMatching(/disk full/),
    });
  });
});

describe('Request outcome', () => {
  it('knows the operation of every API route, each one of the catalog', () => {
    for (const r of API_ROUTES) {
      const op = OPERATION_BY_ROUTE[`${r.method} ${r.resource}`];
      expect([`${r.method} ${r.resource}`, op && (OPERATIONS as readonly string[]).includes(op)]).toEqual([
        `${r.method} ${r.resource}`,
        true,
      ]);
    }
  });

  it('reports a request no route serves without an operation (only the environment-wide series)', () => {
    const outcome = requestOutcome(
      { httpMethod: 'GET', resource: '/v2/other', pathParameters: null, body: null, isBase64Encoded: false },
      { statusCode: 404, body: '' },
      Object.assign(new Error('x'), {}),
    );
    expect(outcome.operation).toBeUndefined();
    const [doc] = requestMetricDocuments(outcome, { environment: 'dev', namespaces: new Set(), timestamp: 1, latencyMs: 1 });
    expect(doc!.Operation).toBeUndefined();
    expect(doc).toMatchObject({ Requests: 1, Errors: 1, ErrorCode: 'INTERNAL' });
  });

  it('computes decoded sizes from base64 lengths', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(base64DecodedLength(Buffer.from(bytes).toString('base64'))).toBe(bytes.length);
      }),
    );
  });

  it('tallies a batch-get body exactly as parsing it would, whatever the keys, tags and content types hold', () => {
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    const item = fc.oneof(
      fc.record({ key: text, found: fc.constant(false) }),
      fc.record({
        key: text,
        found: fc.constant(true),
        value: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString('base64')),
        version: fc.nat(),
        expiresAt: fc.constant(null),
        tier: fc.constantFrom('l1', 'hot', 'warm', 'cold', 'origin'),
        contentType: text,
        tags: fc.array(text, { maxLength: 3 }),
      }),
      fc.record({
        key: text,
        found: fc.constant(true),
        version: fc.nat(),
        expiresAt: fc.constant(null),
        tier: fc.constantFrom('hot', 'cold'),
        size: fc.nat(),
        tooLarge: fc.constant(true),
        downloadUrl: text,
      }),
    );
    fc.assert(
      fc.property(fc.array(item, { maxLength: 8 }), (items) => {
        const body = JSON.stringify({ items });
        const parsed = JSON.parse(body) as { items: { found: boolean; tier?: string; value?: string }[] };
        const hits: Record<string, number> = {};
        for (const i of parsed.items) if (i.found && i.tier) hits[i.tier] = (hits[i.tier] ?? 0) + 1;
        expect(tallyBatchGetBody(body)).toEqual({
          hits,
          misses: parsed.items.filter((i) => !i.found).length,
          valueBytes: parsed.items.reduce((n, i) => n + (i.value ? Buffer.from(i.value, 'base64').length : 0), 0),
        });
      }),
      { numRuns: 300 },
    );
  });
});

describe('the default metrics sink', () => {
  it('is stdout in Lambda for any runtime that builds a context (the step Lambda too), not nothing', async () => {
    setMetricsSink(undefined);
    setDefaultMetricsSink(() => discardSink); // as in a process where no API handler was made (the step Lambda)
    const before = process.env.AWS_LAMBDA_FUNCTION_NAME;
    process.env.AWS_LAMBDA_FUNCTION_NAME = 'strata-dev-steps';
    const ctx = buildApiContext(loadRuntimeEnv({}), { flushTimer: false });
    try {
      expect(metricsSink()).not.toBe(discardSink);
    } finally {
      if (before === undefined) delete process.env.AWS_LAMBDA_FUNCTION_NAME;
      else process.env.AWS_LAMBDA_FUNCTION_NAME = before;
      setDefaultMetricsSink(() => discardSink);
      await ctx.coordinator.close();
    }
  });
});
