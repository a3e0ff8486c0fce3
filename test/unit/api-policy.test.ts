/**
 * The policy admin routes (/v1/admin/policy...) through the admin Lambda handler (in-process, API Gateway proxy
 * events) and the real route table, over an in-test PolicyAdmin: the contract of the API layer (headers, status
 * codes, validation, who may call), not of the policy engine (core/policy/admin.ts has its own tests).
 */
import { createHash } from 'node:crypto';
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { handler } from '../../lambdas/api/admin.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { openApiDocument } from '../../core/api/openapi.js';
import { API_ROUTES, matchRoute } from '../../core/api/routes.js';
import { setApiContext } from '../../core/composition/api-context.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { NotFoundError, VersionConflictError } from '../../core/errors.js';
import { parseTenantAccess } from '../../core/model/tenancy.js';
import { parsePolicyDocument, policyDocumentSchema, type PolicyDocumentInput } from '../../core/policy/document.js';
import type { Firing, FiringHistory } from '../../core/policy/evaluator.js';
import type { PolicyAdmin, PolicyVersionSummary, PolicyView, PutPolicyOptions } from '../../core/policy/service.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { PolicyAdministration } from '../../core/policy/admin.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';

const ctx = { awsRequestId: 'req-policy' } as Context;

const POLICY = '/v1/admin/policy';
const VALIDATE = '/v1/admin/policy/validate';
const VERSIONS = '/v1/admin/policy/versions';
const VERSION = '/v1/admin/policy/versions/{version}';
const ROLLBACK = '/v1/admin/policy/rollback';
const FIRINGS = '/v1/admin/policy/firings';

interface Req {
  body?: unknown;
  raw?: string;
  contentType?: string;
  headers?: Record<string, string>;
  query?: Record<string, string>;
  identity?: Record<string, unknown>;
}

function event(method: string, resource: string, path: string, params: Record<string, string> | null, o: Req = {}): ApiEvent {
  const body = o.raw ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
  const headers: Record<string, string> = {
    ...(body === undefined ? {} : { 'content-type': o.contentType ?? 'application/json' }),
    ...o.headers,
  };
  return {
    httpMethod: method,
    resource,
    path,
    pathParameters: params,
    queryStringParameters: o.query ?? null,
    headers,
    body: body ?? null,
    isBase64Encoded: false,
    requestContext: { identity: o.identity ?? {} },
  } as unknown as ApiEvent;
}

const call = async (e: ApiEvent): Promise<ApiResult> => (await handler(e, ctx)) as ApiResult;
const getPolicy = (o?: Req) => call(event('GET', POLICY, POLICY, null, o));
const putPolicy = (body: unknown, o: Req = {}) => call(event('PUT', POLICY, POLICY, null, { body, ...o }));
const validate = (body: unknown, o: Req = {}) => call(event('POST', VALIDATE, VALIDATE, null, { body, ...o }));
const versions = (query?: Record<string, string>, o: Req = {}) => call(event('GET', VERSIONS, VERSIONS, null, { query, ...o }));
const version = (v: string, o: Req = {}) => call(event('GET', VERSION, `${VERSIONS}/${v}`, { version: v }, o));
const rollback = (body: unknown, o: Req = {}) => call(event('POST', ROLLBACK, ROLLBACK, null, { body, ...o }));
const firings = (query?: Record<string, string>, o: Req = {}) => call(event('GET', FIRINGS, FIRINGS, null, { query, ...o }));

type ErrorBody = { error: { code: string; message: string; details?: Record<string, unknown> } };
const body = <T>(r: ApiResult): T => JSON.parse(r.body) as T;
const errorOf = (r: ApiResult) => body<ErrorBody>(r).error;

/** A document with one foreground rule and one background timer rule. */
const DOC: PolicyDocumentInput = {
  description: 'web sessions through the hot tier',
  rules: [
    { id: 'sessions-hot', scope: { namespace: 'sessions' }, on: { action: 'put' }, do: [{ store: { tiers: ['hot'] } }] },
    {
      id: 'flush',
      on: { timer: { everySeconds: 60 } },
      do: [{ copy: { from: 'hot', to: ['cold'], what: [{ object: 'dirty', equals: true }] } }],
    },
  ],
};

const hashOf = (doc: unknown) => createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 16);

/**
 * The smallest PolicyAdmin the routes can be checked against: an in-memory history. It parses documents with
 * parsePolicyDocument (so refusals are the engine's own) and records every call the routes make.
 */
class FakePolicyAdmin implements PolicyAdmin {
  readonly calls: string[] = [];
  private readonly history: (PolicyView & { summary?: PolicyVersionSummary })[];

  constructor(deployment: PolicyDocumentInput = {}) {
    const document = parsePolicyDocument(deployment);
    this.history = [{ version: 0, source: 'deployment', document, hash: hashOf(document) }];
  }

  private get latest(): PolicyView & { summary?: PolicyVersionSummary } {
    return this.history[this.history.length - 1]!;
  }

  private write(view: Omit<PolicyView, 'version' | 'hash' | 'updatedAt'>, restoredFrom?: number): PolicyView {
    const previous = this.latest.version;
    const next: PolicyView = {
      ...view,
      version: previous + 1,
      hash: hashOf(view.document),
      updatedAt: new Date().toISOString(),
    };
    const summary: PolicyVersionSummary = {
      version: next.version,
      source: next.source,
      updatedAt: next.updatedAt!,
      updatedBy: next.updatedBy!,
      ...(next.reason ? { reason: next.reason } : {}),
      hash: next.hash,
      previous,
      ...(restoredFrom === undefined ? {} : { restoredFrom }),
      diff: [],
    };
    this.history.push({ ...next, summary });
    return next;
  }

  private check(ifVersion: number | undefined): void {
    if (ifVersion !== undefined && ifVersion !== this.latest.version)
      throw new VersionConflictError(`the policy is at version ${this.latest.version}, not ${ifVersion}`, {
        expected: ifVersion,
        current: this.latest.version,
      });
  }

  async current(): Promise<PolicyView> {
    this.calls.push('current');
    const { summary: _s, ...view } = this.latest;
    return view;
  }

  async validate(input: unknown) {
    this.calls.push('validate');
    const document = parsePolicyDocument(input);
    return { valid: true as const, document, hash: hashOf(document), namespaces: {}, wouldFire: [], warnings: [] };
  }

  async put(input: unknown, opts: PutPolicyOptions): Promise<PolicyView> {
    this.calls.push(`put ${JSON.stringify(opts)}`);
    const document = parsePolicyDocument(input);
    this.check(opts.ifVersion);
    return this.write({ source: 'runtime', document, updatedBy: opts.author, ...(opts.reason ? { reason: opts.reason } : {}) });
  }

  async versions(opts: { limit: number; before?: number }): Promise<PolicyVersionSummary[]> {
    this.calls.push(`versions ${JSON.stringify(opts)}`);
    return this.history
      .flatMap((v) => (v.summary ? [v.summary] : []))
      .filter((s) => opts.before === undefined || s.version < opts.before)
      .reverse()
      .slice(0, opts.limit);
  }

  async version(n: number): Promise<PolicyView | undefined> {
    this.calls.push(`version ${n}`);
    const found = this.history.find((v) => v.version === n);
    if (!found) return undefined;
    const { summary: _s, ...view } = found;
    return view;
  }

  async rollback(to: number, opts: Omit<PutPolicyOptions, 'ifVersion'> & { ifVersion?: number }): Promise<PolicyView> {
    this.calls.push(`rollback ${to} ${JSON.stringify(opts)}`);
    this.check(opts.ifVersion);
    const target = this.history.find((v) => v.version === to);
    if (!target) throw new NotFoundError(`no policy version ${to}`, { version: to });
    const source = to === 0 ? 'deployment' : 'runtime';
    const reason = opts.reason ? { reason: opts.reason } : {};
    return this.write({ source, document: target.document, updatedBy: opts.author, ...reason }, to);
  }
}

/** Firings as the background evaluator records them, oldest first (the history answers them newest first). */
const FIRED: Firing[] = [
  {
    at: '2026-11-21T12:00:00.000Z',
    rule: 'grow-hot',
    response: 'grow',
    outcome: 'done',
    detail: 'ScaleOut by 1 (execution e-1)',
  },
  { at: '2026-11-21T12:00:30.000Z', rule: 'page-ops', response: 'alert', outcome: 'done', detail: 'the hot tier is filling' },
  {
    at: '2026-11-21T12:01:00.000Z',
    rule: 'grow-hot',
    response: 'grow',
    outcome: 'suppressed',
    detail: 'at most 6 background actions a minute (controls)',
  },
];

/** The evaluator's side the route reads: a bounded history, newest first, recording the limits it was asked for. */
class FakeFiringHistory implements FiringHistory {
  readonly calls: string[] = [];
  constructor(private readonly fired: readonly Firing[] = FIRED) {}
  firings(limit = 50): Firing[] {
    this.calls.push(`firings ${limit}`);
    return this.fired.slice(-limit).reverse();
  }
}

const coordinator = () => new Coordinator({ tiers: [new MemoryTier()], flushTimer: false });
let service: FakePolicyAdmin;
let fired: FakeFiringHistory;

function useContext(extra: Record<string, unknown> = {}): void {
  service = new FakePolicyAdmin();
  fired = new FakeFiringHistory();
  setApiContext({
    coordinator: coordinator(),
    inlineLimitBytes: 64 * 1024,
    urlTtlSeconds: 60,
    policyAdmin: service,
    policyFirings: fired,
    ...extra,
  });
}

afterAll(() => setApiContext(undefined));

describe('policy admin API (admin Lambda handler, in-test PolicyAdmin)', () => {
  beforeEach(() => useContext());

  it('GET answers the policy in force with its version as etag and x-strata-version', async () => {
    const res = await getPolicy();
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({ etag: '"0"', 'x-strata-version': '0', 'x-request-id': 'req-policy' });
    expect(body<PolicyView>(res)).toMatchObject({ version: 0, source: 'deployment', document: { rules: [], budgets: [] } });
  });

  it('PUT replaces the policy given the version GET read (bare, quoted or weak), with the reason and author', async () => {
    const etag = (await getPolicy()).headers!.etag as string;
    const res = await putPolicy(DOC, { headers: { 'if-match': etag, 'x-strata-reason': '  sessions go hot  ' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({ etag: '"1"', 'x-strata-version': '1' });
    const view = body<PolicyView>(res);
    expect(view).toMatchObject({ version: 1, source: 'runtime', updatedBy: 'admin', reason: 'sessions go hot' });
    // The document with its defaults applied (the service's answer, passed through).
    expect(view.document.rules.map((r) => [r.id, r.enabled])).toEqual([
      ['sessions-hot', true],
      ['flush', true],
    ]);
    expect(service.calls).toContain(`put ${JSON.stringify({ ifVersion: 0, author: 'admin', reason: 'sessions go hot' })}`);
    expect(body<PolicyView>(await getPolicy()).version).toBe(1);

    // The other spellings of a version, as the key routes take them; the IAM principal is the author in AWS.
    const userArn = 'arn:aws:iam::123456789012:user/ops';
    expect((await putPolicy(DOC, { headers: { 'if-match': '1' }, identity: { userArn } })).statusCode).toBe(200);
    const weak = await putPolicy({}, { headers: { 'if-match': 'W/"2"' } });
    expect([weak.statusCode, body<PolicyView>(weak).version]).toEqual([200, 3]);
    expect(service.calls).toContain(`put ${JSON.stringify({ ifVersion: 1, author: userArn })}`);
  });

  it('PUT without if-match is 400 telling the caller to send the version GET read; * and lists are 400 too', async () => {
    const missing = await putPolicy(DOC);
    expect(missing.statusCode).toBe(400);
    expect(errorOf(missing)).toMatchObject({
      code: 'VALIDATION_FAILED',
      message: expect.stringMatching(/if-match.*version read by GET \/v1\/admin\/policy/),
      details: { field: 'if-match' },
    });
    for (const bad of ['*', '"0", "1"', 'v1', '   ']) {
      const res = await putPolicy(DOC, { headers: { 'if-match': bad } });
      expect([bad, res.statusCode, errorOf(res).details?.field]).toEqual([bad, 400, 'if-match']);
    }
    expect(service.calls.filter((c) => c.startsWith('put'))).toEqual([]);
  });

  it('PUT with a stale if-match is 409 VERSION_CONFLICT naming the current version, and changes nothing', async () => {
    await putPolicy(DOC, { headers: { 'if-match': '"0"' } });
    const stale = await putPolicy({}, { headers: { 'if-match': '"0"' } });
    expect(stale.statusCode).toBe(409);
    expect(errorOf(stale)).toMatchObject({ code: 'VERSION_CONFLICT', details: { expected: 0, current: 1 } });
    expect(body<PolicyView>(await getPolicy())).toMatchObject({ version: 1, document: { description: DOC.description } });
  });

  it('refuses a document with a bad rule field: 400 whose details.problems name the rule id and the path', async () => {
    const bad = structuredClone(DOC);
    (bad.rules![1]!.on as { timer: { everySeconds: unknown } }).timer.everySeconds = '60';
    for (const res of [await putPolicy(bad, { headers: { 'if-match': '0' } }), await validate(bad)]) {
      expect(res.statusCode).toBe(400);
      const err = errorOf(res);
      expect(err.code).toBe('VALIDATION_FAILED');
      expect(err.details?.problems).toEqual([
        { path: 'rules[1].on.timer.everySeconds', rule: 'flush', message: expect.any(String) },
      ]);
      expect(err.message).toContain("rules[1].on.timer.everySeconds (rule 'flush')");
    }
    // Across rules too (the schema alone would take it): a timer rule cannot run in the foreground.
    const foreground = structuredClone(DOC);
    foreground.rules![1]!.mode = 'foreground';
    const res = await validate(foreground);
    expect(errorOf(res).details?.problems).toContainEqual(expect.objectContaining({ path: 'rules[1].mode', rule: 'flush' }));
    // Nothing of a refused document is stored.
    expect(body<PolicyView>(await getPolicy()).version).toBe(0);
  });

  it('answers 400 MALFORMED_JSON, 415 for another content type, and 400 for a reason above 200 characters', async () => {
    const ifMatch = { 'if-match': '0' };
    expect(errorOf(await putPolicy(undefined, { raw: '{"rules":', headers: ifMatch })).code).toBe('MALFORMED_JSON');
    expect((await putPolicy(undefined, { raw: 'rules=1', contentType: 'text/plain', headers: ifMatch })).statusCode).toBe(415);
    // An empty body is not a document (no default to fall back to, unlike a workflow's input).
    expect(errorOf(await validate(undefined, { raw: '' })).code).toBe('MALFORMED_JSON');
    const nonObject = await validate(['rules']);
    expect([nonObject.statusCode, errorOf(nonObject).details?.problems]).toEqual([
      400,
      [{ path: '(document)', message: expect.any(String) }],
    ]);
    const long = await putPolicy(DOC, { headers: { ...ifMatch, 'x-strata-reason': 'x'.repeat(201) } });
    expect([long.statusCode, errorOf(long).details?.field]).toEqual([400, 'x-strata-reason']);
    expect((await putPolicy(DOC, { headers: { ...ifMatch, 'x-strata-reason': 'x'.repeat(200) } })).statusCode).toBe(200);
  });

  it('POST validate answers what the service makes of the document and stores nothing', async () => {
    const res = await validate(DOC);
    expect(res.statusCode).toBe(200);
    expect(body(res)).toMatchObject({ valid: true, warnings: [], wouldFire: [], document: { description: DOC.description } });
    expect(res.headers?.etag).toBeUndefined();
    expect(body<PolicyView>(await getPolicy()).version).toBe(0);
  });

  it('GET versions lists the audit trail newest first, limited (default 20) and paged with before', async () => {
    for (let v = 0; v < 3; v++) await putPolicy({ description: `v${v + 1}` }, { headers: { 'if-match': String(v) } });
    const all = await versions();
    expect(all.statusCode).toBe(200);
    expect(body<{ versions: PolicyVersionSummary[] }>(all).versions.map((s) => [s.version, s.previous])).toEqual([
      [3, 2],
      [2, 1],
      [1, 0],
    ]);
    expect(service.calls).toContain(`versions ${JSON.stringify({ limit: 20 })}`);
    const page = body<{ versions: PolicyVersionSummary[] }>(await versions({ limit: '1', before: '3' })).versions;
    expect(page.map((s) => s.version)).toEqual([2]);
    // Empty values are as good as absent (a form left blank).
    expect((await versions({ limit: '', before: '' })).statusCode).toBe(200);
  });

  it('answers 400 for a bad versions query, naming the parameter', async () => {
    for (const [query, field] of [
      [{ limit: '0' }, 'query.limit'],
      [{ limit: '101' }, 'query.limit'],
      [{ limit: 'ten' }, 'query.limit'],
      [{ before: '-1' }, 'query.before'],
      [{ before: '1.5' }, 'query.before'],
      [{ before: '9007199254740992' }, 'query.before'],
      [{ after: '3' }, 'query'],
    ] as const) {
      const res = await versions(query);
      expect([query, res.statusCode, errorOf(res).details?.field]).toEqual([query, 400, field]);
    }
  });

  it('GET versions/{version} answers one version, 404 NOT_FOUND for one there is not, 400 for a non-number', async () => {
    await putPolicy(DOC, { headers: { 'if-match': '0' } });
    const one = await version('1');
    expect([one.statusCode, body<PolicyView>(one)]).toEqual([200, expect.objectContaining({ version: 1, updatedBy: 'admin' })]);
    expect(body<PolicyView>(await version('0'))).toMatchObject({ version: 0, source: 'deployment' });
    const missing = await version('7');
    expect(missing.statusCode).toBe(404);
    expect(errorOf(missing)).toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringContaining('GET /v1/admin/policy/versions'),
      details: { version: 7 },
    });
    // A version no policy can reach is not found either (not an error of the request), without asking the store.
    expect((await version('9999999999999999')).statusCode).toBe(404);
    expect(service.calls).not.toContain('version 10000000000000000');
    for (const bad of ['abc', '-1', '1.0', '12345678901234567']) {
      const res = await version(bad);
      expect([bad, res.statusCode, errorOf(res).details?.field]).toEqual([bad, 400, 'version']);
    }
  });

  it('POST rollback restores a version as a new one, with an optional if-match and reason', async () => {
    await putPolicy(DOC, { headers: { 'if-match': '0' } });
    const res = await rollback({ version: 0, reason: 'back to the deployment' });
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({ etag: '"2"', 'x-strata-version': '2' });
    expect(body<PolicyView>(res)).toMatchObject({ version: 2, source: 'deployment', reason: 'back to the deployment' });
    expect(service.calls).toContain(`rollback 0 ${JSON.stringify({ author: 'admin', reason: 'back to the deployment' })}`);
    const summary = body<{ versions: PolicyVersionSummary[] }>(await versions({ limit: '1' })).versions[0];
    expect(summary).toMatchObject({ version: 2, previous: 1, restoredFrom: 0 });

    // With if-match: only from that version; `*` is any version.
    const stale = await rollback({ version: 1 }, { headers: { 'if-match': '"1"' } });
    expect([stale.statusCode, errorOf(stale).code]).toEqual([409, 'VERSION_CONFLICT']);
    expect((await rollback({ version: 1 }, { headers: { 'if-match': '"2"' } })).statusCode).toBe(200);
    expect((await rollback({ version: 1 }, { headers: { 'if-match': '*' } })).statusCode).toBe(200);
    expect(service.calls).toContain(`rollback 1 ${JSON.stringify({ author: 'admin', ifVersion: 2 })}`);
  });

  it('answers 400 for a bad rollback body, naming the field', async () => {
    for (const [input, field] of [
      [{ version: -1 }, 'body.version'],
      [{ version: 1.5 }, 'body.version'],
      [{ version: '1' }, 'body.version'],
      [{}, 'body.version'],
      [{ version: 0, reason: 'x'.repeat(201) }, 'body.reason'],
      [{ version: 0, why: 'typo' }, 'body'],
    ] as const) {
      const res = await rollback(input);
      expect([input, res.statusCode, errorOf(res).details?.field]).toEqual([input, 400, field]);
    }
    expect((await rollback(undefined, { raw: '{"version":' })).statusCode).toBe(400);
    expect(service.calls.filter((c) => c.startsWith('rollback'))).toEqual([]);
  });

  it("GET firings answers the evaluator's firings newest first, limited (default 50)", async () => {
    const all = await firings();
    expect(all.statusCode).toBe(200);
    expect(all.headers).toMatchObject({ 'content-type': expect.stringMatching(/^application\/json/) });
    expect(body(all)).toEqual({ firings: [...FIRED].reverse() });
    expect(fired.calls).toEqual(['firings 50']);
    const two = body<{ firings: Firing[] }>(await firings({ limit: '2' })).firings;
    expect(two.map((f) => [f.at, f.outcome])).toEqual([
      ['2026-11-21T12:01:00.000Z', 'suppressed'],
      ['2026-11-21T12:00:30.000Z', 'done'],
    ]);
    expect((await firings({ limit: '200' })).statusCode).toBe(200);
    // Empty values are as good as absent (a form left blank).
    expect((await firings({ limit: '' })).statusCode).toBe(200);
    expect(fired.calls).toEqual(['firings 50', 'firings 2', 'firings 200', 'firings 50']);
    // None yet is an empty list, not an error; the policy store is not asked.
    useContext({ policyFirings: new FakeFiringHistory([]) });
    expect(body(await firings())).toEqual({ firings: [] });
    expect(service.calls).toEqual([]);
  });

  it('answers 400 for a bad firings query, naming the parameter, without asking the evaluator', async () => {
    for (const [query, field] of [
      [{ limit: '0' }, 'query.limit'],
      [{ limit: '201' }, 'query.limit'],
      [{ limit: '1.5' }, 'query.limit'],
      [{ limit: '-1' }, 'query.limit'],
      [{ limit: 'ten' }, 'query.limit'],
      [{ limit: '99999' }, 'query.limit'],
      [{ before: '3' }, 'query'],
    ] as const) {
      const res = await firings(query);
      expect([query, res.statusCode, errorOf(res).code, errorOf(res).details?.field]).toEqual([
        query,
        400,
        'VALIDATION_FAILED',
        field,
      ]);
    }
    expect(fired.calls).toEqual([]);
  });

  it('answers 405 naming the methods a policy resource serves', async () => {
    const res = await call(event('DELETE', POLICY, POLICY, null));
    expect(res.statusCode).toBe(405);
    expect(errorOf(res)).toMatchObject({ code: 'METHOD_NOT_ALLOWED', message: expect.stringContaining('use GET, PUT') });
  });
});

describe('policy admin API over the real PolicyAdministration (in-memory document store)', () => {
  let cas: InMemoryCasStore;
  // Its log lines ("policy replaced") stay off the test output.
  let log: CapturedLog;
  beforeAll(() => {
    log = captureLog();
  });
  afterAll(() => log.restore());
  beforeEach(() => {
    cas = new InMemoryCasStore();
    const policyAdmin = new PolicyAdministration({ cas, deployment: parsePolicyDocument({ description: 'as deployed' }) });
    setApiContext({ coordinator: coordinator(), inlineLimitBytes: 64 * 1024, urlTtlSeconds: 60, policyAdmin });
  });

  it('reads, validates, replaces (compare-and-set), lists, reads back and rolls back the policy', async () => {
    const v0 = await getPolicy();
    expect([v0.statusCode, v0.headers?.etag]).toEqual([200, '"0"']);
    expect(body<PolicyView>(v0)).toMatchObject({ version: 0, source: 'deployment', document: { description: 'as deployed' } });

    const checked = await validate(DOC);
    expect(checked.statusCode).toBe(200);
    expect(body(checked)).toMatchObject({ valid: true, document: { description: DOC.description } });
    expect(cas.writes).toBe(0);

    const userArn = 'arn:aws:iam::123456789012:role/ops';
    const put = await putPolicy(DOC, {
      headers: { 'if-match': '"0"', 'x-strata-reason': 'sessions go hot' },
      identity: { userArn },
    });
    expect(put.statusCode).toBe(200);
    expect(put.headers).toMatchObject({ etag: '"1"', 'x-strata-version': '1' });
    expect(body<PolicyView>(put)).toMatchObject({ version: 1, source: 'runtime', updatedBy: userArn, reason: 'sessions go hot' });

    // Another operator who read version 0 does not overwrite it.
    const stale = await putPolicy({}, { headers: { 'if-match': '"0"' } });
    expect([stale.statusCode, errorOf(stale)]).toEqual([
      409,
      expect.objectContaining({ code: 'VERSION_CONFLICT', details: { expected: 0, current: 1 } }),
    ]);

    const trail = body<{ versions: PolicyVersionSummary[] }>(await versions()).versions;
    expect(trail).toEqual([expect.objectContaining({ version: 1, previous: 0, updatedBy: userArn, reason: 'sessions go hot' })]);
    expect(trail[0]!.diff.length).toBeGreaterThan(0);
    expect(body<PolicyView>(await version('1'))).toMatchObject({ version: 1, document: { description: DOC.description } });
    expect(body<PolicyView>(await version('0'))).toMatchObject({ version: 0, document: { description: 'as deployed' } });
    expect(errorOf(await version('5')).code).toBe('NOT_FOUND');

    const back = await rollback({ version: 0, reason: 'undo' }, { headers: { 'if-match': '1' } });
    expect([back.statusCode, back.headers?.etag]).toEqual([200, '"2"']);
    expect(body<PolicyView>(back)).toMatchObject({ version: 2, source: 'deployment', document: { description: 'as deployed' } });
    const newest = body<{ versions: PolicyVersionSummary[] }>(await versions({ limit: '1' })).versions;
    expect(newest).toEqual([
      expect.objectContaining({ version: 2, previous: 1, restoredFrom: 0, updatedBy: 'admin', reason: 'undo' }),
    ]);
    expect(body<PolicyView>(await getPolicy()).version).toBe(2);

    // Rolling back to a version there never was.
    const missing = await rollback({ version: 9 });
    expect([missing.statusCode, errorOf(missing).code]).toEqual([404, 'NOT_FOUND']);
  });

  it('refuses what the engine refuses beyond the schema with the same 400 shape, naming the rule', async () => {
    // Valid by the schema (and the route's own check), but the engine refuses it: a transform on one tier only.
    const compress: PolicyDocumentInput = {
      rules: [{ id: 'squeeze', on: { action: 'put', tier: 'cold' }, do: [{ compress: {} }] }],
    };
    for (const res of [await validate(compress), await putPolicy(compress, { headers: { 'if-match': '0' } })]) {
      expect(res.statusCode).toBe(400);
      expect(errorOf(res)).toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'policy' } });
      expect(errorOf(res).details?.problems).toContainEqual(expect.objectContaining({ path: 'rules[0]', rule: 'squeeze' }));
    }
    expect(body<PolicyView>(await getPolicy()).version).toBe(0);
  });
});

/** One valid request per policy route. */
const EVERY_ROUTE: [string, (o?: Req) => Promise<ApiResult>][] = [
  ['GET policy', (o) => getPolicy(o)],
  ['PUT policy', (o) => putPolicy(DOC, { ...o, headers: { 'if-match': '0', ...o?.headers } })],
  ['POST validate', (o) => validate(DOC, o)],
  ['GET versions', (o) => versions(undefined, o)],
  ['GET version', (o) => version('0', o)],
  ['POST rollback', (o) => rollback({ version: 0 }, o)],
  ['GET firings', (o) => firings(undefined, o)],
];

const NO_EVALUATOR =
  'no background evaluator runs for this deployment: `npm start` runs one; in AWS the scheduled evaluator (the policy ' +
  "ticker) is switched off in this environment's configuration, so background rules are refused when a policy is put";

describe('policy admin API without a policy store', () => {
  // 5xx answers are logged with their cause (middleware.errorResponder): keep them off the test output.
  let log: CapturedLog;
  beforeAll(() => {
    log = captureLog();
  });
  afterAll(() => log.restore());
  beforeEach(() => setApiContext({ coordinator: coordinator(), inlineLimitBytes: 1024, urlTtlSeconds: 60 }));

  it.each(EVERY_ROUTE)('%s answers 503 POLICIES_UNAVAILABLE, permanent, naming what is missing', async (name, send) => {
    const res = await send();
    expect(res.statusCode).toBe(503);
    expect(errorOf(res)).toEqual({
      code: 'POLICIES_UNAVAILABLE',
      // The firings come from the background evaluator, not from the policy store.
      message: name === 'GET firings' ? NO_EVALUATOR : expect.stringContaining('set STRATA_POLICY_STORE'),
      details: { permanent: true, requestId: 'req-policy' },
    });
    // Permanent: retrying cannot help, so the SDK does not retry it and no retry-after invites one.
    expect(res.headers?.['retry-after']).toBeUndefined();
  });

  it('GET firings needs the evaluator alone: 503 with a policy store but no evaluator (AWS), 200 the other way', async () => {
    setApiContext({
      coordinator: coordinator(),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
      policyAdmin: new FakePolicyAdmin(),
    });
    const res = await firings();
    expect([res.statusCode, errorOf(res)]).toEqual([
      503,
      { code: 'POLICIES_UNAVAILABLE', message: NO_EVALUATOR, details: { permanent: true, requestId: 'req-policy' } },
    ]);
    expect((await getPolicy()).statusCode).toBe(200);
    setApiContext({
      coordinator: coordinator(),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
      policyFirings: new FakeFiringHistory(),
    });
    expect((await firings()).statusCode).toBe(200);
    expect((await getPolicy()).statusCode).toBe(503);
  });

  it('still refuses a bad firings limit with 400 (checked before the evaluator is needed)', async () => {
    const res = await firings({ limit: '0' });
    expect([res.statusCode, errorOf(res).details?.field]).toEqual([400, 'query.limit']);
  });

  it('still refuses a bad document with 400 (checked before the store is needed)', async () => {
    const res = await validate({ rules: [{ id: 'Bad Id', on: { action: 'get' }, do: [{ alert: { message: 'x' } }] }] });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details?.problems).toContainEqual(expect.objectContaining({ path: 'rules[0].id', rule: 'Bad Id' }));
  });
});

describe('policy admin API: tenant keys are refused like on the workflow admin routes', () => {
  const ACCESS = parseTenantAccess(
    JSON.stringify([
      { keyId: 'k-web', tenant: 'web', namespaces: ['*'] },
      { keyId: 'k-admin', tenant: 'ops', admin: true },
    ]),
  );
  beforeEach(() => useContext({ tenantAccess: ACCESS }));

  it.each(EVERY_ROUTE)(
    '%s: 403 NAMESPACE_FORBIDDEN to a tenant key, an unknown key and none; the service is not asked',
    async (_, send) => {
      for (const [identity, details] of [
        [{ apiKeyId: 'k-web' }, { scope: 'admin', tenant: 'web' }],
        [{ apiKeyId: 'k-nobody' }, { scope: 'admin' }],
        [{}, { scope: 'admin' }],
      ] as const) {
        const res = await send({ identity });
        expect([identity, res.statusCode, errorOf(res).code, errorOf(res).details]).toEqual([
          identity,
          403,
          'NAMESPACE_FORBIDDEN',
          details,
        ]);
      }
      expect(service.calls).toEqual([]);
      expect(fired.calls).toEqual([]);
      // The workflow admin routes answer the tenant key the same.
      const LIST = '/v1/admin/workflows/executions';
      const workflows = await call(event('GET', LIST, LIST, null, { identity: { apiKeyId: 'k-web' } }));
      expect([workflows.statusCode, errorOf(workflows).details]).toEqual([403, { scope: 'admin', tenant: 'web' }]);
    },
  );

  it.each(EVERY_ROUTE)('%s: served to the admin key and to an IAM principal', async (_, send) => {
    expect((await send({ identity: { apiKeyId: 'k-admin' } })).statusCode).toBe(200);
    // A second write names the version the first one made.
    const next = { 'if-match': (await getPolicy({ identity: { apiKeyId: 'k-admin' } })).headers!.etag as string };
    const userArn = 'arn:aws:iam::123456789012:role/ops';
    expect((await send({ identity: { userArn }, headers: next })).statusCode).toBe(200);
  });

  it("records the admin key's tenant as the author where no IAM principal is named", async () => {
    await putPolicy(DOC, { headers: { 'if-match': '0' }, identity: { apiKeyId: 'k-admin' } });
    expect(body<PolicyView>(await getPolicy({ identity: { apiKeyId: 'k-admin' } })).updatedBy).toBe('ops');
  });
});

describe('policy admin routes in the route table and the OpenAPI document', () => {
  const ROUTES = [
    `GET ${POLICY}`,
    `PUT ${POLICY}`,
    `POST ${VALIDATE}`,
    `GET ${VERSIONS}`,
    `GET ${VERSION}`,
    `POST ${ROLLBACK}`,
    `GET ${FIRINGS}`,
  ];
  const doc = openApiDocument(API_ROUTES) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

  it('serves the seven routes from the admin function, admin-only', () => {
    const policy = API_ROUTES.filter((r) => r.resource.startsWith('/v1/admin/policy'));
    expect(policy.map((r) => `${r.method} ${r.resource}`).sort()).toEqual([...ROUTES].sort());
    expect(policy.every((r) => r.fn === 'admin' && r.auth === 'admin')).toBe(true);
    expect(policy.map((r) => r.doc.operationId).sort()).toEqual(
      [
        'getPolicy',
        'putPolicy',
        'validatePolicy',
        'listPolicyVersions',
        'getPolicyVersion',
        'rollbackPolicy',
        'listPolicyFirings',
      ].sort(),
    );
  });

  it('matches the policy paths (a literal segment wins over a parameter)', () => {
    expect(matchRoute('GET', '/v1/admin/policy/versions')).toMatchObject({ resource: VERSIONS });
    expect(matchRoute('GET', '/v1/admin/policy/versions/3')).toMatchObject({
      resource: VERSION,
      pathParameters: { version: '3' },
    });
    expect(matchRoute('POST', '/v1/admin/policy/validate')).toMatchObject({ resource: VALIDATE });
    expect(matchRoute('GET', '/v1/admin/policy/firings')).toMatchObject({ resource: FIRINGS });
    expect(matchRoute('POST', '/v1/admin/policy/firings')).toMatchObject({ resource: FIRINGS, allowed: ['GET'] });
    expect(matchRoute('DELETE', POLICY)).toMatchObject({ resource: POLICY, allowed: ['GET', 'PUT'] });
  });

  it("describes PUT and validate bodies with the policy document's own JSON Schema (component PolicyDocument)", () => {
    const { $schema: _d, ...schema } = z.toJSONSchema(policyDocumentSchema, { io: 'input' }) as Record<string, unknown>;
    expect(doc.components.schemas.PolicyDocument).toEqual({ ...schema, description: expect.any(String) });
    for (const [path, method] of [
      [POLICY, 'put'],
      [VALIDATE, 'post'],
    ] as const)
      expect(doc.paths[path][method].requestBody).toEqual({
        required: true,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/PolicyDocument' } } },
      });
    const put = doc.paths[POLICY].put;
    expect(put.parameters).toContainEqual(expect.objectContaining({ name: 'if-match', in: 'header', required: true }));
    expect(put.responses['409'].description).toContain('VERSION_CONFLICT');
    for (const [method, path] of ROUTES.map((r) => r.split(' ')))
      expect(doc.paths[path!][method!.toLowerCase()].responses['503'].description).toContain('POLICIES_UNAVAILABLE');
    expect(doc.paths[VERSION].get.responses['404'].description).toContain('NOT_FOUND');
  });

  it('describes the firings: their limit, and each firing as component PolicyFiring with the four outcomes', () => {
    const get = doc.paths[FIRINGS].get;
    expect(get.operationId).toBe('listPolicyFirings');
    expect(get.parameters).toEqual([
      expect.objectContaining({ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }),
    ]);
    expect(get.responses['200'].content['application/json'].schema).toEqual({
      type: 'object',
      required: ['firings'],
      properties: { firings: { type: 'array', items: { $ref: '#/components/schemas/PolicyFiring' } } },
    });
    expect(get.responses['400'].description).toContain('VALIDATION_FAILED');
    const firing = doc.components.schemas.PolicyFiring;
    expect(firing.required).toEqual(['at', 'rule', 'response', 'outcome', 'detail']);
    expect(firing.properties.outcome.enum).toEqual(['done', 'suppressed', 'skipped', 'failed']);
  });

  it('states the if-match PUT takes as a pattern that accepts the etags the routes send, and not *', () => {
    const pattern = new RegExp(
      doc.paths[POLICY].put.parameters.find((p: { name: string }) => p.name === 'if-match').schema.pattern as string,
    );
    for (const ok of ['0', '"12"', 'W/"3"', ' 4 ']) expect([ok, pattern.test(ok)]).toEqual([ok, true]);
    for (const bad of ['*', '"1", "2"', 'v1']) expect([bad, pattern.test(bad)]).toEqual([bad, false]);
  });
});
