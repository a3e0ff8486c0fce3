/**
 * Error mapping of the SDK: every API error code to its class (through a real local node:http server), non-JSON
 * error bodies to typed errors by status, and the error classes' own behaviour.
 */
import {
  AuthenticationError,
  errorFromResponse,
  NetworkError,
  NotFoundError,
  OriginError,
  PayloadTooLargeError,
  RateLimitedError,
  StrataClient,
  StrataError,
  StrataServerError,
  TimeoutError,
  UnavailableError,
  UnsupportedMediaTypeError,
  ValidationError,
  VersionConflictError,
} from '../../sdk/src/index.js';
import { ScriptedServer, scriptedServerForSuite, sendError, sendJson, sendRaw } from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

/** No retries: these tests are about mapping, not the retry policy. */
function client(): StrataClient {
  return new StrataClient({ endpoint: suite.server.url, apiKey: 'k', namespace: 'app', retries: 0 });
}

async function failure(p: Promise<unknown>): Promise<StrataError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof StrataError)) throw new Error(`expected a StrataError, got ${String(err)}`);
  return err;
}

type ErrorClass = abstract new (...args: never[]) => StrataError;

describe('API error codes map to classes', () => {
  const table: Array<[number, string, ErrorClass, Record<string, unknown> | undefined]> = [
    [400, 'VALIDATION_FAILED', ValidationError, { field: 'ttl' }],
    [400, 'MALFORMED_JSON', ValidationError, undefined],
    [404, 'ROUTE_NOT_FOUND', NotFoundError, undefined],
    [405, 'METHOD_NOT_ALLOWED', StrataServerError, undefined],
    [409, 'VERSION_CONFLICT', VersionConflictError, { current: 12 }],
    [413, 'PAYLOAD_TOO_LARGE', PayloadTooLargeError, { limit: 4194304, uploadUrl: '/v1/ns/app/uploads/k' }],
    [415, 'UNSUPPORTED_MEDIA_TYPE', UnsupportedMediaTypeError, undefined],
    [429, 'RATE_LIMITED', RateLimitedError, undefined],
    [502, 'ORIGIN_FAILED', OriginError, { origin: 'https://origin.example' }],
    [503, 'TIER_UNAVAILABLE', UnavailableError, undefined],
    [500, 'INTERNAL', StrataServerError, undefined],
    [418, 'SOMETHING_NEW', StrataServerError, { x: 1 }],
    [503, 'SOMETHING_NEW', UnavailableError, undefined],
  ];

  it.each(table)('%i %s → %p', async (status, code, Cls, details) => {
    suite.server.script((_req, res) =>
      sendError(res, status, code, `message for ${code}`, details, { 'x-request-id': `req-${code}` }),
    );
    // stats() is a plain GET with no special status handling.
    const err = await failure(client().stats());
    expect(err).toBeInstanceOf(Cls);
    expect(err).toBeInstanceOf(StrataError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe(Cls.name);
    expect(err.code).toBe(code);
    expect(err.status).toBe(status);
    expect(err.message).toBe(`message for ${code}`);
    expect(err.details).toEqual(details);
    expect(err.requestId).toBe(`req-${code}`);
  });

  it('NOT_FOUND surfaces as NotFoundError where a miss is not a result (delete)', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no such key'));
    const err = await failure(client().delete('gone'));
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ code: 'NOT_FOUND', status: 404 });
  });

  it('exposes typed accessors for details', async () => {
    suite.server.script((_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'stale', { current: 12 }));
    expect(((await failure(client().put('k', 'v', { ifMatch: 11 }))) as VersionConflictError).current).toBe(12);
    suite.server.script((_req, res) => sendError(res, 400, 'VALIDATION_FAILED', 'bad', { field: 'body.items[3].key' }));
    expect(((await failure(client().putMany([{ key: 'a', value: 1 }]))) as ValidationError).field).toBe('body.items[3].key');
    suite.server.script((_req, res) => sendError(res, 429, 'RATE_LIMITED', 'slow', undefined, { 'retry-after': '7' }));
    expect((await failure(client().get('k'))).retryAfterMs).toBe(7000);
  });
});

describe('non-JSON error bodies still map to typed errors (by status, code HTTP_ERROR)', () => {
  const table: Array<[number, string, string, ErrorClass]> = [
    [502, 'text/html', '<html><body><h1>502 Bad Gateway</h1></body></html>', UnavailableError],
    [504, 'text/html', '<html>Gateway Timeout</html>', UnavailableError],
    [503, 'text/plain', 'Service Unavailable', UnavailableError],
    [500, 'text/plain', '', StrataServerError],
    [429, 'text/plain', 'Too Many Requests', RateLimitedError],
    [400, 'text/html', '<html>Bad Request</html>', ValidationError],
    [413, 'text/html', '<html>Request Entity Too Large</html>', PayloadTooLargeError],
    [401, 'application/json', '{"message":"Unauthorized"}', AuthenticationError],
    [403, 'application/json', '{"message":"Forbidden"}', AuthenticationError],
    [404, 'text/html', '<html>Not Found</html>', NotFoundError],
    [409, 'application/json', '{"unexpected":true}', VersionConflictError],
    [418, 'text/plain', "I'm a teapot", StrataServerError],
  ];

  it.each(table)('%i %s → %p', async (status, contentType, body, Cls) => {
    suite.server.script((_req, res) =>
      sendRaw(res, status, body, { 'content-type': contentType, 'x-amzn-requestid': 'aws-req-1' }),
    );
    const err = await failure(client().stats());
    expect(err).toBeInstanceOf(Cls);
    expect(err.code).toBe('HTTP_ERROR');
    expect(err.status).toBe(status);
    expect(err.requestId).toBe('aws-req-1');
    expect(err.message).toBeTruthy();
    if (body) expect(err.details).toEqual({ body });
  });

  it("uses API Gateway's { message } as the message", async () => {
    suite.server.script((_req, res) => sendJson(res, 403, { message: 'Forbidden' }));
    const err = await failure(client().get('k'));
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err.message).toBe('Forbidden');
  });

  it('a success status with an unparseable body is StrataServerError INVALID_RESPONSE', async () => {
    suite.server.script((_req, res) => sendRaw(res, 200, '<html>captive portal</html>', { 'content-type': 'text/html' }));
    const err = await failure(client().put('k', 'v'));
    expect(err).toBeInstanceOf(StrataServerError);
    expect(err).toMatchObject({ code: 'INVALID_RESPONSE', status: 200, retryable: false });
  });
});

describe('client-side errors', () => {
  it('TimeoutError and NetworkError carry status 0 and a cause', async () => {
    suite.server.script(() => {
      /* never answer */
    });
    const t = await failure(new StrataClient({ endpoint: suite.server.url, timeoutMs: 30, retries: 0 }).get('k'));
    expect(t).toBeInstanceOf(TimeoutError);
    expect(t).toMatchObject({ code: 'TIMEOUT', status: 0 });
    expect(t.cause).toBeDefined();

    const dead = await ScriptedServer.start();
    const endpoint = dead.url;
    await dead.close();
    const n = await failure(new StrataClient({ endpoint, retries: 0 }).get('k'));
    expect(n).toBeInstanceOf(NetworkError);
    expect(n).toMatchObject({ code: 'NETWORK_ERROR', status: 0, connectFailed: true, details: { errno: 'ECONNREFUSED' } });
    expect(n.cause).toHaveProperty('message'); // fetch's TypeError (from another realm under Jest)
  });

  it('ValidationError for invalid input has status 0 and names the field', async () => {
    const err = await failure(client().get('k', { ns: 'UPPER' }));
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', status: 0, details: { field: 'ns' } });
    expect((err as ValidationError).field).toBe('ns');
  });
});

describe('error classes', () => {
  it('retryable follows the retry policy', () => {
    const make = (Cls: new (init: ConstructorParameters<typeof StrataError>[0]) => StrataError, status: number): StrataError =>
      new Cls({ code: 'X', status, message: 'm' });
    expect(make(RateLimitedError, 429).retryable).toBe(true);
    expect(make(UnavailableError, 503).retryable).toBe(true);
    expect(make(OriginError, 502).retryable).toBe(true);
    expect(make(TimeoutError, 0).retryable).toBe(true);
    expect(make(NetworkError, 0).retryable).toBe(true);
    expect(make(StrataServerError, 500).retryable).toBe(true);
    expect(make(StrataServerError, 405).retryable).toBe(false);
    expect(make(ValidationError, 400).retryable).toBe(false);
    expect(make(VersionConflictError, 409).retryable).toBe(false);
    expect(make(NotFoundError, 404).retryable).toBe(false);
  });

  it('toJSON is a plain loggable object', () => {
    const err = new VersionConflictError({
      code: 'VERSION_CONFLICT',
      status: 409,
      message: 'stale',
      details: { current: 3 },
      requestId: 'r1',
    });
    expect(JSON.parse(JSON.stringify(err))).toEqual({
      name: 'VersionConflictError',
      code: 'VERSION_CONFLICT',
      status: 409,
      message: 'stale',
      details: { current: 3 },
      requestId: 'r1',
    });
    expect(err.stack).toContain('VersionConflictError');
  });

  it('errorFromResponse maps envelopes by code and anything else by status', () => {
    const byCode = errorFromResponse({
      status: 400,
      body: JSON.stringify({ error: { code: 'MALFORMED_JSON', message: 'bad json' } }),
    });
    expect(byCode).toBeInstanceOf(ValidationError);
    expect(byCode.code).toBe('MALFORMED_JSON');
    const html = errorFromResponse({ status: 502, body: '<html>\n  <b>Bad   Gateway</b>\n</html>', context: 'GET /v1/stats' });
    expect(html).toBeInstanceOf(UnavailableError);
    expect(html.message).toBe('HTTP 502 for GET /v1/stats: <html> <b>Bad Gateway</b> </html>');
    const empty = errorFromResponse({ status: 503, body: '' });
    expect(empty).toBeInstanceOf(UnavailableError);
    expect(empty.details).toBeUndefined();
    const noMessage = errorFromResponse({ status: 409, body: JSON.stringify({ error: { code: 'VERSION_CONFLICT' } }) });
    expect(noMessage.message).toBe('VERSION_CONFLICT (HTTP 409)');
  });
});
