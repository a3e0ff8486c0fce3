/**
 * StrataClient's HTTP behaviour against a real local node:http server that scripts responses and records requests
 * exactly as they arrived on the wire.
 */
import {
  NetworkError,
  NotFoundError,
  RateLimitedError,
  StrataClient,
  TimeoutError,
  UnavailableError,
  ValidationError,
  VersionConflictError,
  WorkflowsUnavailableError,
  type RetryInfo,
  type StrataClientOptions,
} from '../../sdk/src/index.js';
import {
  ScriptedServer,
  scriptedServerForSuite,
  sendError,
  sendJson,
  sendRaw,
  type RecordedRequest,
} from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

function client(extra: Partial<StrataClientOptions> = {}): StrataClient {
  return new StrataClient({
    endpoint: suite.server.url,
    apiKey: 'test-key',
    namespace: 'app',
    retryBaseDelayMs: 1,
    retryMaxDelayMs: 5,
    timeoutMs: 2000,
    ...extra,
  });
}

function putResponse(req: RecordedRequest, version = 7): Record<string, unknown> {
  const key = decodeURIComponent(req.path.split('/').pop()!);
  return { ns: 'app', key, version, expiresAt: null, size: req.body.length, tiers: ['hot', 'cold'] };
}

const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64');

describe('key encoding on the wire', () => {
  const cases: Array<[string, string]> = [
    ['plain', 'plain'],
    ['a/b', 'a%2Fb'],
    ['a/../b', 'a%2F%2E%2E%2Fb'],
    ['..hidden', '%2E%2Ehidden'],
    ['x.y', 'x%2Ey'],
    ['100%', '100%25'],
    ['%2E', '%252E'],
    ['with space', 'with%20space'],
    ['café/ü', 'caf%C3%A9%2F%C3%BC'],
    ['🔑', '%F0%9F%94%91'],
    ['q?x=1#f&y', 'q%3Fx%3D1%23f%26y'],
  ];

  it.each(cases)('GET %j is sent as /keys/%s', async (key, wire) => {
    suite.server.script((_req, res) => sendRaw(res, 200, 'v', { 'x-strata-version': '1' }));
    const item = await client().get(key);
    expect(item?.text()).toBe('v');
    expect(suite.server.requests).toHaveLength(1);
    expect(suite.server.requests[0]!.url).toBe(`/v1/ns/app/keys/${wire}`);
    expect(decodeURIComponent(wire)).toBe(key);
  });

  it('uses the same encoding for PUT, HEAD, DELETE and uploads', async () => {
    suite.server.script((req, res) => {
      if (req.method === 'PUT') return sendJson(res, 200, putResponse(req));
      if (req.method === 'DELETE') return sendRaw(res, 204, '', { 'x-strata-version': '9' });
      if (req.path.endsWith('/complete'))
        return sendJson(res, 200, { ns: 'app', key: 'a/b c', version: 3, expiresAt: null, size: 10, tiers: ['cold'] });
      if (req.method === 'POST') return sendJson(res, 200, { uploadId: 'u1', url: '/upload-target', method: 'PUT', headers: {} });
      return sendRaw(res, 200, '');
    });
    const c = client({ inlineLimitBytes: 4 });
    await c.put('a/b c', 'v');
    await c.has('a/b c');
    await c.delete('a/b c');
    await c.put('a/b c', '0123456789');
    expect(suite.server.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'PUT /v1/ns/app/keys/a%2Fb%20c',
      'HEAD /v1/ns/app/keys/a%2Fb%20c',
      'DELETE /v1/ns/app/keys/a%2Fb%20c',
      'POST /v1/ns/app/uploads/a%2Fb%20c',
      'PUT /upload-target',
      'POST /v1/ns/app/uploads/a%2Fb%20c/complete',
    ]);
  });

  it('documents why "." and ".." cannot go in the path: fetch normalises %2E%2E segments away', async () => {
    suite.server.script((_req, res) => sendRaw(res, 200, ''));
    await fetch(`${suite.server.url}/v1/ns/app/keys/%2E%2E`);
    await fetch(`${suite.server.url}/v1/ns/app/keys/%2E`);
    expect(suite.server.requests.map((r) => r.url)).toEqual(['/v1/ns/app/', '/v1/ns/app/keys/']);
  });

  it('routes the keys "." and ".." through the batch endpoints, where keys travel in the JSON body', async () => {
    suite.server.script((req, res) => {
      const body = JSON.parse(req.body.toString()) as { keys?: string[]; items?: Array<{ key: string; value: string }> };
      if (req.path.endsWith('/batch/get'))
        return sendJson(res, 200, {
          items: body.keys!.map((key) => ({
            key,
            found: true,
            value: b64(`v${key}`),
            version: 4,
            expiresAt: null,
            tier: 'hot',
            tags: [],
          })),
        });
      if (req.path.endsWith('/batch/put'))
        return sendJson(res, 200, { items: body.items!.map((it) => ({ key: it.key, version: 5, expiresAt: null, size: 1 })) });
      return sendJson(res, 200, { items: body.keys!.map((key) => ({ key, version: 6 })) });
    });
    const c = client();
    expect((await c.get('..'))?.text()).toBe('v..');
    expect(await c.has('.')).toBe(true);
    expect(await c.put('..', 'x')).toMatchObject({ key: '..', version: 5 });
    expect(await c.delete('.')).toEqual({ version: 6 });
    expect(suite.server.requests.map((r) => `${r.method} ${r.path} ${r.body.toString()}`)).toEqual([
      'POST /v1/ns/app/batch/get {"keys":[".."]}',
      'POST /v1/ns/app/batch/get {"keys":["."]}',
      `POST /v1/ns/app/batch/put {"items":[{"key":"..","value":"${b64('x')}","contentType":"text/plain; charset=utf-8"}]}`,
      'POST /v1/ns/app/batch/delete {"keys":["."]}',
    ]);
    await expect(c.put('.', 'x', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(ValidationError);
  });

  it('rejects invalid keys, namespaces and tags before sending anything', async () => {
    suite.server.script((_req, res) => sendRaw(res, 200, ''));
    const c = client();
    for (const p of [
      c.get(''),
      c.get('x'.repeat(513)),
      c.get('\uD800'),
      c.get('k', { ns: 'Bad NS' }),
      c.put('k', 'v', { tags: ['a,b'] }),
    ]) {
      await expect(p).rejects.toMatchObject({ name: 'ValidationError', code: 'VALIDATION_FAILED', status: 0 });
    }
    expect(() => new StrataClient({ endpoint: 'not a url' })).toThrow(ValidationError);
    expect(suite.server.requests).toHaveLength(0);
    await client().get('é'.repeat(256)); // 512 bytes: accepted
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('requests and values', () => {
  it('says when a write is not durable yet (write-back, held by the hot tier alone)', async () => {
    suite.server.script((req, res) => sendJson(res, 200, { ...putResponse(req, 3), tiers: ['hot'], durable: false }));
    expect(await client().put('k', 'v')).toMatchObject({ tiers: ['hot'], durable: false });
  });

  it('sends the api key, ttl, tags, preconditions, content type and user agent on PUT', async () => {
    suite.server.script((req, res) => sendJson(res, 200, { ...putResponse(req, 12), expiresAt: '2030-01-02T03:04:05.000Z' }));
    const res = await client().put('k', 'hello', { ns: 'other', ttl: 60, tags: ['a', 'b:c'], ifMatch: 11 });
    const req = suite.server.requests[0]!;
    expect(req.method).toBe('PUT');
    expect(req.url).toBe('/v1/ns/other/keys/k');
    expect(req.headers['x-api-key']).toBe('test-key');
    expect(req.headers['x-strata-ttl']).toBe('60');
    expect(req.headers['x-strata-tags']).toBe('a,b:c');
    expect(req.headers['if-match']).toBe('11');
    expect(req.headers['if-none-match']).toBeUndefined();
    expect(req.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(req.headers['user-agent']).toMatch(/^strata-sdk-js\/0\.1\.0/);
    expect(req.body.toString()).toBe('hello');
    expect(res).toEqual({
      ns: 'app',
      key: 'k',
      version: 12,
      expiresAt: new Date('2030-01-02T03:04:05.000Z'),
      size: 5,
      tiers: ['hot', 'cold'],
      durable: true,
    });

    await client({ apiKey: undefined, userAgent: 'custom/1' }).put('k', 'v', { ifNoneMatch: '*' });
    const second = suite.server.requests[1]!;
    expect(second.headers['if-none-match']).toBe('*');
    expect(second.headers['x-api-key']).toBeUndefined();
    expect(second.headers['x-strata-ttl']).toBeUndefined();
    expect(second.headers['x-strata-tags']).toBeUndefined();
    expect(second.headers['user-agent']).toBe('custom/1');
  });

  it('encodes bytes, strings, JSON values and honours contentType', async () => {
    suite.server.script((req, res) => sendJson(res, 200, putResponse(req)));
    const c = client();
    await c.put('bytes', new Uint8Array([0, 255, 1]));
    await c.put('buffer', Buffer.from('buf'));
    await c.put('arraybuffer', new Uint8Array([9, 8]).buffer);
    await c.put('text', 'héllo');
    await c.put('obj', { a: 1, nested: [true, null] });
    await c.put('num', 42);
    await c.put('custom', '<b/>', { contentType: 'text/html' });
    const seen = suite.server.requests.map((r) => [r.headers['content-type'], [...r.body]]);
    expect(seen).toEqual([
      ['application/octet-stream', [0, 255, 1]],
      ['application/octet-stream', [...Buffer.from('buf')]],
      ['application/octet-stream', [9, 8]],
      ['text/plain; charset=utf-8', [...Buffer.from('héllo')]],
      ['application/json', [...Buffer.from('{"a":1,"nested":[true,null]}')]],
      ['application/json', [...Buffer.from('42')]],
      ['text/html', [...Buffer.from('<b/>')]],
    ]);
    await expect(c.put('u', undefined as unknown as string)).rejects.toBeInstanceOf(ValidationError);
  });

  it('get returns the bytes and metadata; 404 NOT_FOUND resolves undefined', async () => {
    suite.server.script((req, res) => {
      if (req.path.endsWith('/hit')) {
        return sendRaw(res, 200, '{"n":1}', {
          'content-type': 'application/json',
          'x-strata-version': '123',
          etag: '"123"',
          'x-strata-tier': 'warm',
          'x-strata-expires-at': '2031-05-06T07:08:09.000Z',
          'x-strata-tags': 'x,y',
        });
      }
      if (req.path.endsWith('/noexp'))
        return sendRaw(res, 200, Buffer.from([1, 2, 3]), { 'x-strata-version': '5', 'x-strata-tier': 'l1' });
      return sendError(res, 404, 'NOT_FOUND', 'no such key');
    });
    const c = client();
    const item = (await c.get('hit'))!;
    expect(item).toMatchObject({ key: 'hit', version: 123, tier: 'warm', contentType: 'application/json', tags: ['x', 'y'] });
    expect(item.expiresAt).toEqual(new Date('2031-05-06T07:08:09.000Z'));
    expect(item.json()).toEqual({ n: 1 });
    expect(item.text()).toBe('{"n":1}');
    const bin = (await c.get('noexp'))!;
    expect([...bin.value]).toEqual([1, 2, 3]);
    expect(bin.expiresAt).toBeNull();
    expect(bin.tags).toEqual([]);
    expect(await c.get('missing')).toBeUndefined();
    expect(suite.server.requests[0]!.headers['x-api-key']).toBe('test-key');
  });

  it('get does not mistake ROUTE_NOT_FOUND or a non-JSON 404 for a miss', async () => {
    suite.server.script((req, res) =>
      req.path.includes('route')
        ? sendError(res, 404, 'ROUTE_NOT_FOUND', 'no route')
        : sendRaw(res, 404, '<html>nginx</html>', { 'content-type': 'text/html' }),
    );
    await expect(client().get('route')).rejects.toMatchObject({ name: 'NotFoundError', code: 'ROUTE_NOT_FOUND', status: 404 });
    await expect(client().get('html')).rejects.toMatchObject({ name: 'NotFoundError', code: 'HTTP_ERROR', status: 404 });
  });

  it('has() uses HEAD: 200 → true, 404 → false', async () => {
    suite.server.script((req, res) =>
      req.path.endsWith('/yes') ? sendRaw(res, 200, '', { 'x-strata-version': '1' }) : sendRaw(res, 404, ''),
    );
    expect(await client().has('yes')).toBe(true);
    expect(await client().has('no')).toBe(false);
    expect(suite.server.requests.map((r) => r.method)).toEqual(['HEAD', 'HEAD']);
  });

  it('delete() returns the tombstone version and sends if-match', async () => {
    suite.server.script((_req, res) => sendRaw(res, 204, '', { 'x-strata-version': '42' }));
    expect(await client().delete('k', { ifMatch: 41 })).toEqual({ version: 42 });
    expect(suite.server.requests[0]!.method).toBe('DELETE');
    expect(suite.server.requests[0]!.headers['if-match']).toBe('41');
  });

  it('stats() and health(), including a 503 health report', async () => {
    suite.server.script((req, res) => {
      // The shape core/coordinator's stats() answers (docs/API.md, "Service").
      const tiers = [
        { name: 'hot', kind: 'redis', mode: 'standalone', entries: 3, bytes: 90, hits: 1, misses: 2, errors: 0, ok: true },
      ];
      if (req.path === '/v1/stats') return sendJson(res, 200, { uptimeSeconds: 5, tiers, promotions: 0, flushed: 0 });
      return sendJson(res, 503, { status: 'down', tiers: { hot: { kind: 'redis', ok: false } } });
    });
    const c = client();
    const stats = await c.stats();
    expect(stats.tiers[0]).toMatchObject({ name: 'hot', hits: 1, ok: true });
    expect(stats).toMatchObject({ promotions: 0, flushed: 0 });
    expect(await c.health()).toEqual({ status: 'down', tiers: { hot: { kind: 'redis', ok: false } } });
    expect(suite.server.count('GET', '/v1/health')).toBe(1);
  });
});

describe('retries', () => {
  it('retries 503 and succeeds, counting attempts', async () => {
    let n = 0;
    suite.server.script((_req, res) =>
      ++n <= 2 ? sendError(res, 503, 'TIER_UNAVAILABLE', 'all tiers down') : sendRaw(res, 200, 'ok', { 'x-strata-version': '1' }),
    );
    const retries: RetryInfo[] = [];
    const item = await client({ onRetry: (i) => retries.push(i) }).get('k');
    expect(item?.text()).toBe('ok');
    expect(suite.server.requests).toHaveLength(3);
    expect(retries.map((r) => [r.attempt, r.error.code])).toEqual([
      [1, 'TIER_UNAVAILABLE'],
      [2, 'TIER_UNAVAILABLE'],
    ]);
    for (const r of retries) expect(r.delayMs).toBeLessThanOrEqual(5);
  });

  it('retries 429 honouring retry-after, capped by maxRetryAfterMs', async () => {
    let n = 0;
    suite.server.script((req, res) =>
      ++n === 1
        ? sendError(res, 429, 'RATE_LIMITED', 'slow down', undefined, { 'retry-after': '1' })
        : sendJson(res, 200, putResponse(req)),
    );
    const retries: RetryInfo[] = [];
    const started = Date.now();
    await client({ onRetry: (i) => retries.push(i) }).put('k', 'v');
    expect(suite.server.requests).toHaveLength(2);
    expect(retries).toHaveLength(1);
    expect(retries[0]!.delayMs).toBe(1000);
    expect(retries[0]!.error).toBeInstanceOf(RateLimitedError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);

    n = 0;
    suite.server.script((req, res) =>
      ++n === 1
        ? sendError(res, 429, 'RATE_LIMITED', 'slow down', undefined, { 'retry-after': '120' })
        : sendJson(res, 200, putResponse(req)),
    );
    retries.length = 0;
    await client({ onRetry: (i) => retries.push(i), maxRetryAfterMs: 20 }).put('k', 'v');
    expect(retries.map((r) => r.delayMs)).toEqual([20]);
  });

  it('does not retry 400 or 409', async () => {
    suite.server.script((_req, res) => sendError(res, 400, 'VALIDATION_FAILED', 'ttl: bad', { field: 'ttl' }));
    await expect(client().put('k', 'v', { ttl: -1 })).rejects.toMatchObject({ name: 'ValidationError', field: 'ttl' });
    expect(suite.server.requests).toHaveLength(1);
    suite.server.script((_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'stale', { current: 8 }));
    const err = await client()
      .put('k', 'v', { ifMatch: 7 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VersionConflictError);
    expect((err as VersionConflictError).current).toBe(8);
    expect(suite.server.requests).toHaveLength(1);
  });

  // A 503 the server marks permanent (details.permanent: this runtime has no workflows, no presigning tier) cannot
  // succeed on a retry: the caller gets it at once. Unmarked, the same code is a transient failure and is retried.
  it('does not retry a 503 whose details mark it permanent, on reads, admin reads or writes', async () => {
    const permanent = { permanent: true, requestId: 'r1' };
    const message = 'the workflows are not configured in this runtime';
    suite.server.script((_req, res) => sendError(res, 503, 'WORKFLOWS_UNAVAILABLE', message, permanent));
    const retries: RetryInfo[] = [];
    const err = await client({ onRetry: (i) => retries.push(i) })
      .workflows.list()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowsUnavailableError);
    expect(err).toMatchObject({ code: 'WORKFLOWS_UNAVAILABLE', status: 503, permanent: true, retryable: false });
    expect([suite.server.requests.length, retries.length]).toEqual([1, 0]);

    const retryAfter = { 'retry-after': '1' };
    const noUploads = 'no tier supports uploads';
    suite.server.script((_req, res) => sendError(res, 503, 'TIER_UNAVAILABLE', noUploads, { permanent: true }, retryAfter));
    await expect(client().get('k')).rejects.toMatchObject({ constructor: UnavailableError, permanent: true, retryable: false });
    await expect(client().put('k', 'v')).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE', permanent: true });
    expect(suite.server.requests).toHaveLength(2);
  });

  it('retries the same 503 codes when they are not marked permanent (a failed Step Functions call, a tier down)', async () => {
    const message = 'Step Functions ListExecutions failed (ThrottlingException)';
    suite.server.script((_req, res) =>
      sendError(res, 503, 'WORKFLOWS_UNAVAILABLE', message, { sfnError: 'ThrottlingException' }),
    );
    const err = await client({ retries: 2 })
      .workflows.list()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ constructor: WorkflowsUnavailableError, permanent: false, retryable: true });
    expect(suite.server.requests).toHaveLength(3);
    // `permanent` must be exactly true: anything else the server might put there leaves the status in charge.
    suite.server.script((_req, res) => sendError(res, 503, 'TIER_UNAVAILABLE', 'down', { permanent: 'yes' }));
    await expect(client({ retries: 1 }).get('k')).rejects.toMatchObject({ permanent: false });
    expect(suite.server.requests).toHaveLength(2);
  });

  it('gives up after `retries` with the last error', async () => {
    suite.server.script((_req, res) => sendRaw(res, 502, '<html>Bad Gateway</html>', { 'content-type': 'text/html' }));
    await expect(client({ retries: 2 }).get('k')).rejects.toMatchObject({
      name: 'UnavailableError',
      code: 'HTTP_ERROR',
      status: 502,
    });
    expect(suite.server.requests).toHaveLength(3);
  });

  it('times out each attempt and raises TimeoutError after the retries', async () => {
    suite.server.script(() => {
      /* never answer */
    });
    const err = await client({ timeoutMs: 50, retries: 2 })
      .get('slow')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ code: 'TIMEOUT', status: 0, retryable: true });
    expect(suite.server.requests).toHaveLength(3);
  });

  it('raises NetworkError when nothing listens (after retrying)', async () => {
    const dead = await ScriptedServer.start();
    const endpoint = dead.url;
    await dead.close();
    const retries: RetryInfo[] = [];
    const err = await new StrataClient({ endpoint, retries: 2, retryBaseDelayMs: 1, onRetry: (i) => retries.push(i) })
      .get('k')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: 0, connectFailed: true });
    expect(retries).toHaveLength(2);
  });

  it('retries a conditional write only when the server certainly did not process it', async () => {
    // 503 after a conditional PUT: ambiguous, not retried.
    suite.server.script((_req, res) => sendError(res, 503, 'TIER_UNAVAILABLE', 'down'));
    await expect(client().put('k', 'v', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(UnavailableError);
    expect(suite.server.requests).toHaveLength(1);
    // Connection reset after the request was sent: ambiguous, not retried.
    suite.server.script((_req, _res, raw) => void raw.socket.destroy());
    await expect(client().delete('k', { ifMatch: 3 })).rejects.toMatchObject({ name: 'NetworkError', connectFailed: false });
    expect(suite.server.requests).toHaveLength(1);
    // ... while the unconditional write is retried.
    let n = 0;
    suite.server.script((req, res, raw) => (++n === 1 ? void raw.socket.destroy() : sendJson(res, 200, putResponse(req))));
    await client().put('k', 'v');
    expect(suite.server.requests).toHaveLength(2);
    // 429 is throttling before the handler: retried even for conditional writes.
    n = 0;
    suite.server.script((req, res) =>
      ++n === 1
        ? sendError(res, 429, 'RATE_LIMITED', 'slow', undefined, { 'retry-after': '0' })
        : sendJson(res, 200, putResponse(req)),
    );
    await client().put('k', 'v', { ifMatch: 1 });
    expect(suite.server.requests).toHaveLength(2);
  });

  it('a caller abort rejects with the signal reason and stops retrying', async () => {
    const ac = new AbortController();
    // Never answers; the caller gives up once the server holds the request (not after a fixed delay, which a loaded
    // machine can outrun before the request is even sent).
    suite.server.script(() => void setImmediate(() => ac.abort(new Error('caller gave up'))));
    const p = client({ timeoutMs: 10_000 }).get('k', { signal: ac.signal });
    await expect(p).rejects.toThrow('caller gave up');
    // A retry would have arrived by now if the abort had not stopped it (retry delays are at most 5 ms here).
    await new Promise((r) => setTimeout(r, 50));
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('getOrSet', () => {
  it('coalesces 10 concurrent calls into one GET, one loader call and one PUT', async () => {
    const stored = new Map<string, Buffer>();
    suite.server.script(async (req, res) => {
      if (req.method === 'GET') {
        await new Promise((r) => setTimeout(r, 20));
        const v = stored.get(req.path);
        return v
          ? sendRaw(res, 200, v, { 'x-strata-version': '2', 'x-strata-tier': 'hot' })
          : sendError(res, 404, 'NOT_FOUND', 'miss');
      }
      stored.set(req.path, req.body);
      return sendJson(res, 200, putResponse(req, 2));
    });
    const c = client();
    let loads = 0;
    const loader = async (): Promise<object> => {
      loads++;
      await new Promise((r) => setTimeout(r, 20));
      return { answer: 42 };
    };
    const items = await Promise.all(Array.from({ length: 10 }, () => c.getOrSet('user:1', loader, { ttl: 30 })));
    expect(loads).toBe(1);
    expect(suite.server.count('GET')).toBe(1);
    expect(suite.server.count('PUT')).toBe(1);
    expect(suite.server.requests.find((r) => r.method === 'PUT')!.headers['x-strata-ttl']).toBe('30');
    for (const it of items)
      expect(it).toMatchObject({ key: 'user:1', version: 2, tier: 'loader', contentType: 'application/json' });
    expect(items[0]!.json()).toEqual({ answer: 42 });

    // Afterwards: a hit, served by the server without the loader. Different keys/namespaces are not coalesced.
    const hit = await c.getOrSet('user:1', loader);
    expect(hit.tier).toBe('hot');
    expect(hit.json()).toEqual({ answer: 42 });
    await Promise.all([c.getOrSet('user:1', loader, { ns: 'other' }), c.getOrSet('user:2', loader)]);
    expect(loads).toBe(3);
  });

  it("with ifNoneMatch, losing the race to another writer returns the winner's entry", async () => {
    let gets = 0;
    suite.server.script((req, res) => {
      if (req.method === 'PUT') return sendError(res, 409, 'VERSION_CONFLICT', 'exists', { current: 4 });
      return ++gets === 1
        ? sendError(res, 404, 'NOT_FOUND', 'miss')
        : sendRaw(res, 200, 'winner', { 'x-strata-version': '4', 'x-strata-tier': 'hot' });
    });
    const item = await client().getOrSet('k', () => 'loser', { ifNoneMatch: '*' });
    expect(item).toMatchObject({ version: 4, tier: 'hot' });
    expect(item.text()).toBe('winner');
    expect(suite.server.requests.map((r) => r.method)).toEqual(['GET', 'PUT', 'GET']);
    expect(suite.server.requests[1]!.headers['if-none-match']).toBe('*');
  });

  it('propagates a loader failure to every waiter and does not cache it', async () => {
    suite.server.script((req, res) =>
      req.method === 'GET' ? sendError(res, 404, 'NOT_FOUND', 'miss') : sendJson(res, 200, putResponse(req)),
    );
    let loads = 0;
    const c = client();
    const all = await Promise.allSettled(
      Array.from({ length: 3 }, () =>
        c.getOrSet('k', async () => {
          loads++;
          throw new Error('db down');
        }),
      ),
    );
    expect(all.every((r) => r.status === 'rejected')).toBe(true);
    expect(loads).toBe(1);
    expect(suite.server.count('PUT')).toBe(0);
    // The failure is not remembered: the next call loads again.
    expect((await c.getOrSet('k', () => 'ok')).text()).toBe('ok');
    expect(suite.server.count('GET')).toBe(2);
    expect(suite.server.count('PUT')).toBe(1);
  });
});

describe('batches', () => {
  const keys = Array.from({ length: 250 }, (_, i) => `k${i}`);

  it('getMany chunks 250 keys into 3 requests and leaves missing keys out', async () => {
    suite.server.script((req, res) => {
      const { keys: asked } = JSON.parse(req.body.toString()) as { keys: string[] };
      const items = asked.map((key) =>
        Number(key.slice(1)) % 2 === 0
          ? {
              key,
              found: true,
              value: b64(`val-${key}`),
              version: 1,
              expiresAt: '2030-01-01T00:00:00.000Z',
              tier: 'hot',
              contentType: 'text/plain',
              tags: ['t'],
            }
          : { key, found: false },
      );
      sendJson(res, 200, { items });
    });
    const items = await client().getMany(keys);
    expect(suite.server.requests.map((r) => `${r.method} ${r.path} ${r.headers['content-type']}`)).toEqual(
      Array(3).fill('POST /v1/ns/app/batch/get application/json'),
    );
    expect(suite.server.requests.map((r) => (JSON.parse(r.body.toString()) as { keys: string[] }).keys.length).sort()).toEqual([
      100, 100, 50,
    ]);
    expect(items.size).toBe(125);
    expect(items.has('k1')).toBe(false);
    const k4 = items.get('k4')!;
    expect(k4.text()).toBe('val-k4');
    expect(k4).toMatchObject({ version: 1, tier: 'hot', contentType: 'text/plain', tags: ['t'] });
    expect(k4.expiresAt).toEqual(new Date('2030-01-01T00:00:00.000Z'));
  });

  it('putMany chunks 250 items into 3 requests with base64 values and keeps input order', async () => {
    suite.server.script((req, res) => {
      const { items } = JSON.parse(req.body.toString()) as { items: Array<{ key: string; value: string }> };
      sendJson(res, 200, {
        items: items.map((it) => ({
          key: it.key,
          version: Number(it.key.slice(1)) + 1000,
          expiresAt: null,
          size: Buffer.from(it.value, 'base64').length,
        })),
      });
    });
    const results = await client().putMany(
      keys.map((key, i) => ({ key, value: i % 2 ? { i } : `v${i}`, ...(i === 3 ? { ttl: 5, tags: ['own'] } : {}) })),
      { ttl: 60 },
    );
    expect(suite.server.requests).toHaveLength(3);
    const sent = suite.server.requests.flatMap(
      (r) => (JSON.parse(r.body.toString()) as { items: Array<Record<string, unknown>> }).items,
    );
    expect(sent).toHaveLength(250);
    const byKey = new Map(sent.map((it) => [it.key, it]));
    expect(byKey.get('k0')).toEqual({ key: 'k0', value: b64('v0'), ttl: 60, contentType: 'text/plain; charset=utf-8' });
    expect(byKey.get('k3')).toEqual({ key: 'k3', value: b64('{"i":3}'), ttl: 5, tags: ['own'], contentType: 'application/json' });
    expect(results.map((r) => r.key)).toEqual(keys);
    expect(results[249]).toEqual({ key: 'k249', version: 1249, expiresAt: null, size: 9 });
  });

  it('deleteMany chunks 250 keys into 3 requests', async () => {
    suite.server.script((req, res) => {
      const { keys: asked } = JSON.parse(req.body.toString()) as { keys: string[] };
      sendJson(res, 200, { items: asked.map((key) => ({ key, version: 9 })) });
    });
    const results = await client().deleteMany(keys);
    expect(suite.server.requests.map((r) => r.path)).toEqual(Array(3).fill('/v1/ns/app/batch/delete'));
    expect(results).toHaveLength(250);
    expect(results[0]).toEqual({ key: 'k0', version: 9 });
  });
});

describe('large values', () => {
  it('uploads values above inlineLimitBytes through upload URL → presigned PUT → complete', async () => {
    const big = Buffer.alloc(5000, 7);
    suite.server.script((req, res) => {
      if (req.method === 'POST' && req.path === '/v1/ns/app/uploads/big%2Fone') {
        return sendJson(res, 200, {
          uploadId: 'up-1',
          url: `${suite.server.url}/fake-s3/obj?X-Amz-Signature=abc`,
          method: 'PUT',
          headers: { 'content-type': 'application/octet-stream', 'x-amz-meta-k': 'v' },
          expiresAt: '2030-01-01T00:00:00Z',
        });
      }
      if (req.method === 'PUT' && req.path === '/fake-s3/obj') return sendRaw(res, 200, '');
      if (req.method === 'POST' && req.path === '/v1/ns/app/uploads/big%2Fone/complete') {
        return sendJson(res, 200, { ns: 'app', key: 'big/one', version: 77, expiresAt: null, size: 5000, tiers: ['cold'] });
      }
      return sendError(res, 500, 'INTERNAL', `unexpected ${req.method} ${req.url}`);
    });
    const res = await client({ inlineLimitBytes: 1024 }).put('big/one', big, { ttl: 600, tags: ['big'] });
    expect(res).toEqual({ ns: 'app', key: 'big/one', version: 77, expiresAt: null, size: 5000, tiers: ['cold'], durable: true });
    const [ticket, upload, complete] = suite.server.requests;
    expect(suite.server.requests).toHaveLength(3);
    expect(JSON.parse(ticket!.body.toString())).toEqual({ contentType: 'application/octet-stream', ttl: 600, tags: ['big'] });
    expect(ticket!.headers['x-api-key']).toBe('test-key');
    expect(upload!.url).toBe('/fake-s3/obj?X-Amz-Signature=abc');
    expect(upload!.headers['x-api-key']).toBeUndefined();
    expect(upload!.headers['x-amz-meta-k']).toBe('v');
    expect(upload!.body.equals(big)).toBe(true);
    expect(JSON.parse(complete!.body.toString())).toEqual({ uploadId: 'up-1' });
    expect(complete!.headers['x-api-key']).toBe('test-key');
  });

  it("waits for an upload's completion as long as for a transfer, not the per-request timeout", async () => {
    // Completing copies the whole value into place server-side: a large one takes longer than a small request may.
    suite.server.script((req, res) => {
      if (req.path === '/v1/ns/app/uploads/slow')
        return sendJson(res, 200, { uploadId: 'u', url: '/fake-s3/slow', method: 'PUT', headers: {} });
      if (req.method === 'PUT') return sendRaw(res, 200, '');
      setTimeout(
        () => sendJson(res, 200, { ns: 'app', key: 'slow', version: 5, expiresAt: null, size: 64, tiers: ['cold'] }),
        300,
      );
    });
    const c = client({ inlineLimitBytes: 16, timeoutMs: 100, transferTimeoutMs: 5000, retries: 0 });
    await expect(c.put('slow', Buffer.alloc(64))).resolves.toMatchObject({ version: 5 });
  });

  it('switches to the upload flow when the server answers 413 and remembers the lower limit', async () => {
    suite.server.script((req, res) => {
      if (req.method === 'PUT' && req.path.startsWith('/v1/'))
        return sendError(res, 413, 'PAYLOAD_TOO_LARGE', 'too big', { limit: 10, uploadUrl: '/v1/ns/app/uploads/k' });
      if (req.path.endsWith('/complete'))
        return sendJson(res, 200, { ns: 'app', key: 'k', version: 5, expiresAt: null, size: 20, tiers: ['cold'] });
      if (req.method === 'POST') return sendJson(res, 200, { uploadId: 'u', url: '/fake-s3/k', method: 'PUT', headers: {} });
      return sendRaw(res, 200, '');
    });
    const c = client();
    await c.put('k', 'x'.repeat(20));
    expect(suite.server.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'PUT /v1/ns/app/keys/k',
      'POST /v1/ns/app/uploads/k',
      'PUT /fake-s3/k',
      'POST /v1/ns/app/uploads/k/complete',
    ]);
    suite.server.requests.length = 0;
    await c.put('k', 'y'.repeat(20));
    expect(suite.server.requests.map((r) => `${r.method} ${r.path}`)[0]).toBe('POST /v1/ns/app/uploads/k');
    // Conditional writes cannot use the upload flow: rejected before sending.
    await expect(c.put('k', 'z'.repeat(20), { ifMatch: 5 })).rejects.toMatchObject({
      name: 'ValidationError',
      field: 'if-match',
    });
  });

  it('follows a 303 to the presigned download URL without the api key', async () => {
    const big = Buffer.alloc(3000, 1);
    suite.server.script((req, res) => {
      if (req.path === '/v1/ns/app/keys/big') {
        return sendRaw(res, 303, '', {
          location: '/fake-s3/big?X-Amz-Signature=sig',
          'x-strata-version': '31',
          'x-strata-tier': 'cold',
          'x-strata-expires-at': '2032-01-01T00:00:00.000Z',
          'x-strata-tags': 'large',
        });
      }
      if (req.path === '/fake-s3/big') return sendRaw(res, 200, big, { 'content-type': 'application/x-big' });
      if (req.path === '/fake-s3/gone')
        return sendRaw(res, 404, '<Error><Code>NoSuchKey</Code></Error>', { 'content-type': 'application/xml' });
      return sendRaw(res, 303, '', { location: `${suite.server.url}/fake-s3/gone` });
    });
    const item = (await client().get('big'))!;
    expect(Buffer.from(item.value).equals(big)).toBe(true);
    expect(item).toMatchObject({ version: 31, tier: 'cold', contentType: 'application/x-big', tags: ['large'] });
    expect(item.expiresAt).toEqual(new Date('2032-01-01T00:00:00.000Z'));
    expect(suite.server.requests.map((r) => r.url)).toEqual(['/v1/ns/app/keys/big', '/fake-s3/big?X-Amz-Signature=sig']);
    expect(suite.server.requests[1]!.headers['x-api-key']).toBeUndefined();
    // The object vanished between redirect and download: a miss.
    expect(await client().get('vanished')).toBeUndefined();
  });

  it('sends the headers a 303 names for its location, and asks again when the location answers 412 (replaced meanwhile)', async () => {
    let version = 40;
    suite.server.script((req, res) => {
      if (req.path === '/v1/ns/app/keys/raced') {
        version++;
        const headers = { location: `/fake-s3/raced-${version}`, 'x-strata-version': `${version}` };
        return sendRaw(res, 303, '', { ...headers, 'x-strata-location-if-match': `"etag-${version}"` });
      }
      // The first download finds the key replaced (S3: If-Match fails), the second one the version it asks for.
      if (req.path === '/fake-s3/raced-41') {
        return sendRaw(res, 412, '<Error><Code>PreconditionFailed</Code></Error>', { 'content-type': 'application/xml' });
      }
      return sendRaw(res, 200, `bytes of ${req.headers['if-match']}`);
    });
    const item = (await client().get('raced'))!;
    expect(item.version).toBe(42);
    expect(item.text()).toBe('bytes of "etag-42"');
    const urls = ['/v1/ns/app/keys/raced', '/fake-s3/raced-41', '/v1/ns/app/keys/raced', '/fake-s3/raced-42'];
    expect(suite.server.requests.map((r) => r.url)).toEqual(urls);
    expect(suite.server.requests[1]!.headers['if-match']).toBe('"etag-41"');
  });

  it('never repeats the PUT of an upload URL or its completion after an ambiguous failure: a fresh upload is made', async () => {
    let tickets = 0;
    let completes = 0;
    suite.server.script((req, res) => {
      if (req.path.endsWith('/complete')) {
        completes++;
        // The first completion fails after the server may have acted on it.
        if (completes === 1) return sendError(res, 503, 'TIER_UNAVAILABLE', 'tier down');
        return sendJson(res, 200, { ns: 'app', key: 'k', version: 9, expiresAt: null, size: 20, tiers: ['cold'] });
      }
      if (req.method === 'POST') {
        tickets++;
        const ticket = { uploadId: `u${tickets}`, url: `/fake-s3/u${tickets}`, method: 'PUT', headers: { 'if-none-match': '*' } };
        return sendJson(res, 200, ticket);
      }
      // The first upload URL fails once with a 500 (did the bytes land? the URL would refuse a second PUT).
      if (req.path === '/fake-s3/u1') return sendRaw(res, 500, 'InternalError');
      return sendRaw(res, 200, '');
    });
    const res = await client({ inlineLimitBytes: 10 }).put('k', 'x'.repeat(20));
    expect(res.version).toBe(9);
    expect(suite.server.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /v1/ns/app/uploads/k',
      'PUT /fake-s3/u1',
      'POST /v1/ns/app/uploads/k',
      'PUT /fake-s3/u2',
      'POST /v1/ns/app/uploads/k/complete',
      'POST /v1/ns/app/uploads/k',
      'PUT /fake-s3/u3',
      'POST /v1/ns/app/uploads/k/complete',
    ]);
    expect(suite.server.requests[3]!.headers['if-none-match']).toBe('*');
    expect(JSON.parse(suite.server.requests[7]!.body.toString())).toEqual({ uploadId: 'u3' });
  });
});

describe('not found on writes', () => {
  it('delete of a missing key raises NotFoundError when the server says NOT_FOUND', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no such key'));
    await expect(client().delete('nope')).rejects.toBeInstanceOf(NotFoundError);
  });
});
