/**
 * The SDK's admin policy methods (`client.policies`) against a real local node:http server that scripts responses and
 * records requests as they arrived on the wire: paths, methods, if-match and reason headers, bodies, typed results,
 * and how refusals, conflicts and an unavailable policy store surface (and which of them are retried).
 */
import {
  NotFoundError,
  PoliciesClient,
  PoliciesUnavailableError,
  StrataClient,
  StrataServerError,
  UnavailableError,
  ValidationError,
  VersionConflictError,
  errorFromResponse,
  type PolicyDocument,
  type PolicyFiring,
  type PolicyValidation,
  type PolicyVersionSummary,
  type PolicyView,
  type RetryInfo,
  type StrataClientOptions,
} from '../../sdk/src/index.js';
import { scriptedServerForSuite, sendError, sendJson } from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

function client(extra: Partial<StrataClientOptions> = {}): StrataClient {
  return new StrataClient({
    endpoint: suite.server.url,
    apiKey: 'admin-key',
    retryBaseDelayMs: 1,
    retryMaxDelayMs: 5,
    timeoutMs: 2000,
    ...extra,
  });
}

const DOC: PolicyDocument = {
  description: 'nightly flush',
  rules: [{ id: 'flush', on: { timer: { everySeconds: 3600 } }, do: [{ flush: { tier: 'hot' } }] }],
  controls: { maxFleetSize: 8 },
};

const view = (version: number, extra: Partial<PolicyView> = {}): PolicyView => ({
  version,
  source: version === 0 ? 'deployment' : 'runtime',
  document: DOC,
  ...(version === 0 ? {} : { updatedAt: '2026-11-21T12:00:00.000Z', updatedBy: 'alice' }),
  hash: '0123456789abcdef',
  ...extra,
});

const PROBLEMS = [
  { path: 'rules[0].on.timer.everySeconds', rule: 'flush', message: 'must be at least 60' },
  { path: 'controls.maxFleetSize', message: 'must be a whole number' },
];

function refuse(res: Parameters<typeof sendJson>[0]): void {
  sendError(res, 400, 'VALIDATION_FAILED', 'policy: invalid policy document: ...', { field: 'policy', problems: PROBLEMS });
}

describe('client.policies', () => {
  it('is a PoliciesClient on every client', () => {
    expect(client().policies).toBeInstanceOf(PoliciesClient);
  });
});

describe('client.policies.get', () => {
  it('GETs /v1/admin/policy with the API key and resolves the view as the server sent it', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(3, { reason: 'cap' }), { etag: '"3"', 'x-strata-version': '3' }));
    const p = await client().policies.get();
    expect(p).toEqual(view(3, { reason: 'cap' }));
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('GET /v1/admin/policy');
    expect(req!.headers['x-api-key']).toBe('admin-key');
  });

  it('raises INVALID_RESPONSE for a body that is not a policy view', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { version: 1, source: 'elsewhere', document: {}, hash: 'h' }));
    await expect(client().policies.get()).rejects.toMatchObject({ constructor: StrataServerError, code: 'INVALID_RESPONSE' });
    suite.server.script((_req, res) => sendJson(res, 200, { version: '1', source: 'runtime', document: {}, hash: 'h' }));
    await expect(client().policies.get()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });

  it('is retried after a 5xx (a read)', async () => {
    let n = 0;
    suite.server.script((_req, res) =>
      n++ === 0 ? sendError(res, 503, 'POLICIES_UNAVAILABLE', 'store timed out') : sendJson(res, 200, view(2)),
    );
    await expect(client().policies.get()).resolves.toMatchObject({ version: 2 });
    expect(suite.server.requests).toHaveLength(2);
  });
});

describe('client.policies.put', () => {
  it('PUTs the document as JSON with if-match and x-strata-reason, and resolves the new version', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(4, { reason: 'freeze' })));
    const next = await client().policies.put(DOC, { ifVersion: 3, reason: 'freeze' });
    expect(next).toMatchObject({ version: 4, source: 'runtime', reason: 'freeze', updatedBy: 'alice' });
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('PUT /v1/admin/policy');
    expect(req!.headers).toMatchObject({
      'content-type': 'application/json',
      'if-match': '3',
      'x-strata-reason': 'freeze',
      'x-api-key': 'admin-key',
    });
    expect(JSON.parse(req!.body.toString())).toEqual(DOC);
  });

  it('sends if-match 0 (over the deployment configuration) and no reason header without a reason', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(1)));
    await client().policies.put(DOC, { ifVersion: 0 });
    expect(suite.server.requests[0]!.headers['if-match']).toBe('0');
    expect(suite.server.requests[0]!.headers).not.toHaveProperty('x-strata-reason');
  });

  it('refuses a missing or bad ifVersion, a non-object document and a reason a header cannot carry, before sending', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(1)));
    const c = client();
    const put = (doc: unknown, opts: unknown) => c.policies.put(doc as PolicyDocument, opts as { ifVersion: number });
    await expect(put(DOC, undefined)).rejects.toMatchObject({ constructor: ValidationError, status: 0, field: 'ifVersion' });
    await expect(put(DOC, {})).rejects.toMatchObject({ field: 'ifVersion' });
    await expect(put(DOC, { ifVersion: -1 })).rejects.toMatchObject({ field: 'ifVersion' });
    await expect(put(DOC, { ifVersion: 1.5 })).rejects.toMatchObject({ field: 'ifVersion' });
    await expect(put([], { ifVersion: 1 })).rejects.toMatchObject({ field: 'document' });
    await expect(put(null, { ifVersion: 1 })).rejects.toMatchObject({ field: 'document' });
    await expect(put(DOC, { ifVersion: 1, reason: 'x'.repeat(201) })).rejects.toMatchObject({
      field: 'reason',
      message: expect.stringContaining('200'),
    });
    await expect(put(DOC, { ifVersion: 1, reason: 'two\nlines' })).rejects.toMatchObject({ field: 'reason' });
    await expect(put(DOC, { ifVersion: 1, reason: 'emoji \u{1F600}' })).rejects.toMatchObject({ field: 'reason' });
    expect(suite.server.requests).toHaveLength(0);
    // 200 characters of Latin-1 are fine.
    await put(DOC, { ifVersion: 1, reason: 'é'.repeat(200) });
    expect(suite.server.requests).toHaveLength(1);
  });

  it('raises VersionConflictError on a 409 with the current version, without retrying', async () => {
    suite.server.script((_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'stale', { expected: 3, current: 5 }));
    const err = await client()
      .policies.put(DOC, { ifVersion: 3 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VersionConflictError);
    expect(err).toMatchObject({ code: 'VERSION_CONFLICT', status: 409, current: 5, retryable: false });
    expect(suite.server.requests).toHaveLength(1);
  });

  it('raises ValidationError whose problems name each problem of a refused document', async () => {
    suite.server.script((_req, res) => refuse(res));
    const err = (await client()
      .policies.put(DOC, { ifVersion: 3 })
      .catch((e: unknown) => e)) as ValidationError;
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', status: 400, field: 'policy' });
    expect(err.problems).toEqual(PROBLEMS);
  });

  it('is not repeated after an ambiguous failure (a 5xx may have been applied), but is after a 429', async () => {
    const retries: RetryInfo[] = [];
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'boom'));
    await expect(client({ onRetry: (r) => retries.push(r) }).policies.put(DOC, { ifVersion: 3 })).rejects.toBeInstanceOf(
      StrataServerError,
    );
    expect(suite.server.requests).toHaveLength(1);
    expect(retries).toHaveLength(0);

    let n = 0;
    suite.server.script((_req, res) =>
      n++ === 0 ? sendError(res, 429, 'RATE_LIMITED', 'slow down') : sendJson(res, 200, view(4)),
    );
    await expect(client().policies.put(DOC, { ifVersion: 3 })).resolves.toMatchObject({ version: 4 });
    expect(suite.server.requests).toHaveLength(2);
    expect(suite.server.requests.map((r) => r.headers['if-match'])).toEqual(['3', '3']);
  });
});

describe('client.policies.validate', () => {
  const validation: PolicyValidation = {
    valid: true,
    document: DOC,
    hash: '0123456789abcdef',
    namespaces: { '*': { tiers: ['hot', 'cold'] } },
    wouldFire: [{ rule: 'flush', mode: 'background', fires: true, reason: 'the timer is due' }],
    warnings: ['rule flush runs every hour'],
  };

  it('POSTs the document to /v1/admin/policy/validate and resolves the validation', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, validation));
    await expect(client().policies.validate(DOC)).resolves.toEqual(validation);
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('POST /v1/admin/policy/validate');
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers).not.toHaveProperty('if-match');
    expect(JSON.parse(req!.body.toString())).toEqual(DOC);
  });

  it('raises ValidationError with the problems for an invalid document', async () => {
    suite.server.script((_req, res) => refuse(res));
    const err = (await client()
      .policies.validate(DOC)
      .catch((e: unknown) => e)) as ValidationError;
    expect(err).toBeInstanceOf(ValidationError);
    expect(err.problems).toEqual(PROBLEMS);
  });

  it('is retried after a 5xx: it changes nothing', async () => {
    let n = 0;
    suite.server.script((_req, res) => (n++ === 0 ? sendError(res, 500, 'INTERNAL', 'boom') : sendJson(res, 200, validation)));
    await expect(client().policies.validate(DOC)).resolves.toMatchObject({ valid: true });
    expect(suite.server.requests).toHaveLength(2);
  });

  it('raises INVALID_RESPONSE for a body that is not a validation', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { valid: false }));
    await expect(client().policies.validate(DOC)).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });
});

describe('client.policies.versions / version', () => {
  const summary = (version: number, extra: Partial<PolicyVersionSummary> = {}): PolicyVersionSummary => ({
    version,
    source: 'runtime',
    updatedAt: '2026-11-21T12:00:00.000Z',
    updatedBy: 'alice',
    hash: 'h',
    previous: version - 1,
    diff: ['~ controls.maxFleetSize: 16 -> 8'],
    ...extra,
  });

  it('GETs the audit trail with limit and before in the query, and validates both first', async () => {
    const rows = [summary(5, { restoredFrom: 2, reason: 'undo' }), summary(4)];
    suite.server.script((_req, res) => sendJson(res, 200, { versions: rows }));
    await expect(client().policies.versions({ limit: 2, before: 6 })).resolves.toEqual(rows);
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/policy/versions?limit=2&before=6');
    await client().policies.versions();
    expect(suite.server.requests[1]!.url).toBe('/v1/admin/policy/versions');
    for (const limit of [0, 101, 2.5])
      await expect(client().policies.versions({ limit })).rejects.toMatchObject({ field: 'limit' });
    await expect(client().policies.versions({ before: -1 })).rejects.toMatchObject({ field: 'before' });
    expect(suite.server.requests).toHaveLength(2);
  });

  it('raises INVALID_RESPONSE for a list that is not one', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { executions: [] }));
    await expect(client().policies.versions()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
    suite.server.script((_req, res) => sendJson(res, 200, { versions: [{ version: 1 }] }));
    await expect(client().policies.versions()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });

  it('GETs one version; undefined on 404 NOT_FOUND, but a missing route is raised', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(3)));
    await expect(client().policies.version(3)).resolves.toEqual(view(3));
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/policy/versions/3');
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no version 9'));
    await expect(client().policies.version(9)).resolves.toBeUndefined();
    suite.server.script((_req, res) => sendError(res, 404, 'ROUTE_NOT_FOUND', 'no route'));
    await expect(client().policies.version(9)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client().policies.version(-1)).rejects.toMatchObject({ field: 'version' });
    await expect(client().policies.version(1.5)).rejects.toMatchObject({ field: 'version' });
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('client.policies.rollback', () => {
  it('POSTs { version, reason } to /v1/admin/policy/rollback with if-match when given', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(6, { reason: 'undo' })));
    await expect(client().policies.rollback(2, { ifVersion: 5, reason: 'undo' })).resolves.toMatchObject({ version: 6 });
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('POST /v1/admin/policy/rollback');
    expect(req!.headers).toMatchObject({ 'content-type': 'application/json', 'if-match': '5' });
    expect(JSON.parse(req!.body.toString())).toEqual({ version: 2, reason: 'undo' });
  });

  it('rolls back to 0 (the deployment configuration) without if-match or reason', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(7, { source: 'deployment' })));
    await expect(client().policies.rollback(0)).resolves.toMatchObject({ version: 7, source: 'deployment' });
    const [req] = suite.server.requests;
    expect(req!.headers).not.toHaveProperty('if-match');
    expect(JSON.parse(req!.body.toString())).toEqual({ version: 0 });
  });

  it('refuses a bad version before sending', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, view(7)));
    await expect(client().policies.rollback(-1)).rejects.toMatchObject({ field: 'version' });
    await expect(client().policies.rollback(Number.NaN)).rejects.toMatchObject({ field: 'version' });
    await expect(client().policies.rollback(1, { ifVersion: 0.5 })).rejects.toMatchObject({ field: 'ifVersion' });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('is not repeated after an ambiguous failure (a repeat would record a second rollback); a 409 is a conflict', async () => {
    suite.server.script((_req, res) => sendError(res, 502, 'ORIGIN_FAILED', 'proxy'));
    await expect(client().policies.rollback(2)).rejects.toMatchObject({ status: 502 });
    expect(suite.server.requests).toHaveLength(1);
    suite.server.script((_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'stale', { current: 8 }));
    await expect(client().policies.rollback(2, { ifVersion: 6 })).rejects.toMatchObject({
      constructor: VersionConflictError,
      current: 8,
    });
  });

  it('raises NotFoundError for a version that does not exist', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no version 42'));
    await expect(client().policies.rollback(42)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('client.policies.firings', () => {
  const FIRINGS: PolicyFiring[] = [
    { at: '2026-11-21T12:01:00.000Z', rule: 'grow-hot', response: 'grow', outcome: 'suppressed', detail: 'at most 6 a minute' },
    {
      at: '2026-11-21T12:00:00.000Z',
      rule: 'grow-hot',
      response: 'grow',
      outcome: 'done',
      detail: 'ScaleOut by 1 (execution e-1)',
    },
  ];

  it('GETs /v1/admin/policy/firings with the limit in the query and resolves the firings as the server sent them', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { firings: FIRINGS }));
    await expect(client().policies.firings({ limit: 2 })).resolves.toEqual(FIRINGS);
    await expect(client().policies.firings()).resolves.toEqual(FIRINGS);
    expect(suite.server.requests.map((r) => `${r.method} ${r.url} ${r.headers['x-api-key']}`)).toEqual([
      'GET /v1/admin/policy/firings?limit=2 admin-key',
      'GET /v1/admin/policy/firings admin-key',
    ]);
  });

  it('refuses a limit outside 1..200 before sending', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { firings: [] }));
    for (const limit of [0, 201, 2.5, Number.NaN])
      await expect(client().policies.firings({ limit })).rejects.toMatchObject({
        constructor: ValidationError,
        field: 'limit',
        message: expect.stringContaining('from 1 to 200'),
      });
    await expect(client().policies.firings({ limit: 200 })).resolves.toEqual([]);
    expect(suite.server.requests.map((r) => r.url)).toEqual(['/v1/admin/policy/firings?limit=200']);
  });

  it('raises INVALID_RESPONSE for a list that is not one, or a firing without its fields', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { versions: [] }));
    await expect(client().policies.firings()).rejects.toMatchObject({ constructor: StrataServerError, code: 'INVALID_RESPONSE' });
    suite.server.script((_req, res) => sendJson(res, 200, { firings: [{ at: '2026-11-21T12:00:00.000Z', rule: 'r' }] }));
    await expect(client().policies.firings()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });

  it('is retried after a 5xx (a read); POLICIES_UNAVAILABLE marked permanent (no evaluator) is not', async () => {
    let n = 0;
    suite.server.script((_req, res) =>
      n++ === 0 ? sendError(res, 502, 'ORIGIN_FAILED', 'proxy') : sendJson(res, 200, { firings: FIRINGS }),
    );
    await expect(client().policies.firings()).resolves.toEqual(FIRINGS);
    expect(suite.server.requests).toHaveLength(2);

    const message = 'no background evaluator runs in this runtime';
    suite.server.script((_req, res) => sendError(res, 503, 'POLICIES_UNAVAILABLE', message, { permanent: true }));
    await expect(client().policies.firings()).rejects.toMatchObject({
      constructor: PoliciesUnavailableError,
      message: expect.stringContaining(message),
      permanent: true,
    });
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('POLICIES_UNAVAILABLE', () => {
  it('is a PoliciesUnavailableError, an UnavailableError, not retried when permanent', async () => {
    const retries: RetryInfo[] = [];
    suite.server.script((_req, res) =>
      sendError(res, 503, 'POLICIES_UNAVAILABLE', 'no policy store in this deployment', { permanent: true }),
    );
    const err = await client({ onRetry: (r) => retries.push(r) })
      .policies.get()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoliciesUnavailableError);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(err).toMatchObject({ code: 'POLICIES_UNAVAILABLE', status: 503, permanent: true, retryable: false });
    expect(suite.server.requests).toHaveLength(1);
    expect(retries).toHaveLength(0);
  });

  it('is retried when not permanent (the store failed), with every method that may be retried', async () => {
    suite.server.script((_req, res) => sendError(res, 503, 'POLICIES_UNAVAILABLE', 'store timed out'));
    const err = await client({ retries: 2 })
      .policies.versions()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ constructor: PoliciesUnavailableError, retryable: true, permanent: false });
    expect(suite.server.requests).toHaveLength(3);
  });
});

describe('ValidationError.problems', () => {
  it('is undefined without details.problems, and leaves out entries it cannot show', () => {
    const plain = errorFromResponse({
      status: 400,
      body: JSON.stringify({ error: { code: 'VALIDATION_FAILED', message: 'ttl: bad', details: { field: 'ttl' } } }),
    }) as ValidationError;
    expect(plain.problems).toBeUndefined();
    const mixed = errorFromResponse({
      status: 400,
      body: JSON.stringify({
        error: {
          code: 'VALIDATION_FAILED',
          message: 'policy: invalid',
          details: {
            problems: [{ path: 'a', message: 'm', rule: 7 }, { path: 'b' }, 'c', { path: 'd', rule: 'r', message: 'n' }],
          },
        },
      }),
    }) as ValidationError;
    expect(mixed.problems).toEqual([
      { path: 'a', message: 'm' },
      { path: 'd', rule: 'r', message: 'n' },
    ]);
  });
});
