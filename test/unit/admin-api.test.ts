/**
 * The admin routes through the admin Lambda handler (in-process, API Gateway proxy events), over a
 * LocalWorkflowService whose LocalWorkflowRunner really runs small state machines with aws-local-stepfunctions:
 * Task states call step handlers that write progress documents, one of them waiting on a gate the test opens.
 */
import type { Context } from 'aws-lambda';
import { handler } from '../../lambdas/api/admin.js';
import { setWorkflowServiceFactory } from '../../core/api/admin-operations.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { API_ROUTES, matchRoute } from '../../core/api/routes.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { ValidationError } from '../../core/errors.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { ConfigError } from '../../core/errors.js';
import { setApiContext } from '../../core/composition/api-context.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { LocalWorkflowRunner, type AslDefinition } from '../../core/workflows/local/asl-runner.js';
import { ProgressStore, type WorkflowName } from '../../core/workflows/progress.js';
import { type ExecutionDetail, type ExecutionSummary, type WorkflowService } from '../../core/workflows/admin-service.js';
import { LocalWorkflowService } from '../../core/workflows/local/local-workflow-service.js';
import type { StepHandlers } from '../../core/workflows/steps/registry.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';

const STEP_LAMBDA = 'arn:aws:lambda:us-east-1:000000000000:function:strata-test-steps';
const task = (step: string, next?: string, resultPath = '$.result') => ({
  Type: 'Task',
  Resource: STEP_LAMBDA,
  Parameters: { step, 'execution.$': '$$.Execution.Name', 'request.$': '$' },
  ResultPath: resultPath,
  ...(next ? { Next: next } : { End: true }),
});

/** scale-out: plan (total 2), then a stream step that waits for the gate, then done. scale-in: fails at once. */
const DEFINITIONS = {
  'scale-out': {
    StartAt: 'Plan',
    States: {
      Plan: task('scale-out.plan', 'Stream'),
      Stream: task('migrate.stream', 'Finish'),
      Finish: { Type: 'Pass', Result: { joined: 'n4' }, End: true },
    },
  },
  'scale-in': { StartAt: 'Begin', States: { Begin: task('scale-in.begin') } },
} as unknown as Record<WorkflowName, AslDefinition>;

const ctx = { awsRequestId: 'req-admin' } as Context;

function event(
  method: string,
  resource: string,
  path: string,
  params: Record<string, string> | null,
  o: { body?: string; contentType?: string; query?: Record<string, string> } = {},
): ApiEvent {
  const body = o.body === undefined ? null : Buffer.from(o.body).toString('base64');
  const headers = o.body === undefined ? {} : { 'content-type': o.contentType ?? 'application/json' };
  return {
    httpMethod: method,
    resource,
    path,
    pathParameters: params,
    queryStringParameters: o.query ?? null,
    headers,
    body,
    isBase64Encoded: !!body,
  } as unknown as ApiEvent;
}

const START = '/v1/admin/workflows/{workflow}/executions';
const LIST = '/v1/admin/workflows/executions';
const GET = '/v1/admin/workflows/executions/{execution}';

const start = (
  workflow: string,
  body?: unknown,
  o: { query?: Record<string, string>; raw?: string; contentType?: string } = {},
) =>
  handler(
    event(
      'POST',
      START,
      `/v1/admin/workflows/${workflow}/executions`,
      { workflow },
      { body: o.raw ?? (body === undefined ? undefined : JSON.stringify(body)), contentType: o.contentType, query: o.query },
    ),
    ctx,
  ) as Promise<ApiResult>;
const list = (query?: Record<string, string>) => handler(event('GET', LIST, LIST, null, { query }), ctx) as Promise<ApiResult>;
const get = (execution: string) =>
  handler(event('GET', GET, `/v1/admin/workflows/executions/${execution}`, { execution }), ctx) as Promise<ApiResult>;
const body = <T>(r: ApiResult): T => JSON.parse(r.body) as T;

let gate: { open: () => void; promise: Promise<void> };
function newGate(): void {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  gate = { open, promise };
}

let progress: ProgressStore;
let runner: LocalWorkflowRunner;
let service: LocalWorkflowService;

beforeAll(() => {
  progress = new ProgressStore(new InMemoryCasStore());
  const steps = {
    'scale-out.plan': async (i: Record<string, unknown>) => {
      await progress.update(String(i.execution), 'scale-out', (p) => {
        p.total = 2;
        p.done = 1;
        p.bytes = 3 * 1024 * 1024;
        p.phase = 'streaming session 2 of 2';
      });
      return {};
    },
    'migrate.stream': async (i: Record<string, unknown>) => {
      await gate.promise;
      await progress.update(String(i.execution), 'scale-out', (p) => {
        p.done = 2;
        p.phase = 'done';
        p.outcome = 'succeeded';
      });
      return {};
    },
    'scale-in.begin': async (i: Record<string, unknown>) => {
      throw new ValidationError('nodeId', `node '${String(i.nodeId)}' is not in the ring`);
    },
  } as unknown as StepHandlers;
  runner = new LocalWorkflowRunner({ definitions: DEFINITIONS, steps, sdk: async () => ({}) });
  service = new LocalWorkflowService({ runner, progress });
});

beforeEach(() => {
  newGate();
  setApiContext({
    coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
    inlineLimitBytes: 1024,
    urlTtlSeconds: 60,
    workflows: service,
  });
});

afterEach(() => gate.open());

afterAll(async () => {
  setApiContext(undefined);
  await runner.close();
});

async function until(name: string, status: string): Promise<ExecutionDetail> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const d = body<ExecutionDetail>(await get(name));
    if (d.status === status) return d;
    if (Date.now() > deadline) throw new Error(`${name} is ${d.status}, not ${status}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('admin API: workflow executions (admin Lambda handler, LocalWorkflowService, real local runner)', () => {
  it('starts an execution (202 + location) and reports its progress while running and once it succeeded', async () => {
    const res = await start('scale-out', { mode: 'parallel' });
    expect(res.statusCode).toBe(202);
    const summary = body<ExecutionSummary>(res);
    expect(summary).toMatchObject({ workflow: 'scale-out', status: 'RUNNING' });
    expect(summary.execution).toMatch(/^scale-out-\d{8}T\d{6}Z-[0-9a-f]{6}$/);
    expect(res.headers).toMatchObject({ location: `../executions/${summary.execution}`, 'x-request-id': 'req-admin' });

    // Blocked in the stream step: half done.
    const deadline = Date.now() + 10_000;
    let running: ExecutionDetail;
    do running = body<ExecutionDetail>(await get(summary.execution));
    while (running.progress === undefined && Date.now() < deadline);
    expect(running).toMatchObject({ status: 'RUNNING', input: { mode: 'parallel' } });
    expect(running.progress).toMatchObject({
      total: 2,
      done: 1,
      fraction: 0.5,
      unit: 'sessions',
      bytes: 3 * 1024 * 1024,
      phase: 'streaming session 2 of 2',
    });

    gate.open();
    const done = await until(summary.execution, 'SUCCEEDED');
    expect(done).toMatchObject({ output: { joined: 'n4' }, progress: { done: 2, fraction: 1, outcome: 'succeeded' } });
    expect(Date.parse(done.stoppedAt!)).toBeGreaterThanOrEqual(Date.parse(done.startedAt));
  });

  it('reports a failed execution with the error its step raised', async () => {
    const { execution } = body<ExecutionSummary>(await start('scale-in', { nodeId: 'n9' }));
    const failed = await until(execution, 'FAILED');
    expect(failed.error).toEqual({ Error: 'ValidationError', Cause: expect.stringContaining("node 'n9' is not in the ring") });
  });

  it('takes a caller-chosen name, refuses it twice (409 EXECUTION_EXISTS) and rejects names Step Functions would not take', async () => {
    const named = await start('scale-in', {}, { query: { name: 'retire-n3' } });
    expect(named.statusCode).toBe(202);
    expect(body<ExecutionSummary>(named).execution).toBe('retire-n3');
    const again = await start('scale-in', {}, { query: { name: 'retire-n3' } });
    expect(again.statusCode).toBe(409);
    expect(body(again)).toMatchObject({ error: { code: 'EXECUTION_EXISTS', details: { execution: 'retire-n3' } } });
    const bad = await start('scale-in', {}, { query: { name: 'a b:c' } });
    expect(bad.statusCode).toBe(400);
    expect(body(bad)).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'name' } } });
  });

  it('answers 400 for an unknown workflow, naming the valid ones', async () => {
    const res = await start('scale-sideways', {});
    expect(res.statusCode).toBe(400);
    const err = body<{ error: { code: string; message: string; details: { field: string; valid: string[] } } }>(res).error;
    expect(err.code).toBe('VALIDATION_FAILED');
    const valid = [
      'scale-out',
      'scale-in',
      'evict-to-s3',
      'tier-migrate',
      'replace-node',
      'rolling-upgrade',
      'invalidation-sweep',
      'order-markers',
      'upload-commit',
    ];
    expect(err.details).toEqual({ field: 'workflow', valid });
    expect(err.message).toContain(valid.join(', '));
  });

  it("validates scale-out and scale-in input with their begin steps' schemas; an empty body is an empty input", async () => {
    const cases: [unknown, string][] = [
      [{ mode: 'sideways' }, 'body.mode'],
      [{ streamMaxMs: 5 }, 'body.streamMaxMs'],
      [{ sources: [] }, 'body.sources'],
      [{ nodeID: 'typo' }, 'body'],
    ];
    for (const [input, field] of cases) {
      const res = await start('scale-out', input);
      expect([input, res.statusCode, body<{ error: { details: { field: string } } }>(res).error.details.field]).toEqual([
        input,
        400,
        field,
      ]);
    }
    const scaleIn = await start('scale-in', { nodeId: 'bad id!' });
    expect(body(scaleIn)).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'body.nodeId' } } });
    expect((await start('scale-in', undefined)).statusCode).toBe(202);
    expect(runner.list('scale-out').every((e) => (e.input as Record<string, unknown>).mode !== 'sideways')).toBe(true);
  });

  it('answers 400 MALFORMED_JSON, 400 for a non-object body and 415 for another content type', async () => {
    expect(body(await start('scale-in', undefined, { raw: '{"nodeId":' }))).toMatchObject({ error: { code: 'MALFORMED_JSON' } });
    expect(body(await start('scale-in', undefined, { raw: '["n1"]' }))).toMatchObject({
      error: { code: 'VALIDATION_FAILED', details: { field: 'body' } },
    });
    const text = await start('scale-in', undefined, { raw: 'nodeId=n1', contentType: 'text/plain' });
    expect(text.statusCode).toBe(415);
  });

  it('lists executions newest first, filtered by workflow and limited', async () => {
    const a = body<ExecutionSummary>(await start('scale-in', {}));
    await new Promise((r) => setTimeout(r, 5));
    const b = body<ExecutionSummary>(await start('scale-in', {}));
    const all = body<{ executions: ExecutionSummary[] }>(await list()).executions;
    expect(all.findIndex((e) => e.execution === b.execution)).toBeLessThan(all.findIndex((e) => e.execution === a.execution));
    for (let i = 1; i < all.length; i++) expect(all[i - 1]!.startedAt >= all[i]!.startedAt).toBe(true);
    expect(all.some((e) => e.workflow === 'scale-out')).toBe(true);
    const scaleIns = body<{ executions: ExecutionSummary[] }>(await list({ workflow: 'scale-in', limit: '2' })).executions;
    expect(scaleIns.map((e) => e.execution)).toEqual([b.execution, a.execution]);
  });

  it('answers 400 for a bad list query', async () => {
    for (const [query, field] of [
      [{ limit: '0' }, 'query.limit'],
      [{ limit: '101' }, 'query.limit'],
      [{ limit: 'ten' }, 'query.limit'],
      [{ workflow: 'nope' }, 'query.workflow'],
      [{ wrkflow: 'scale-in' }, 'query'],
    ] as const) {
      const res = await list(query);
      expect([query, res.statusCode, body<{ error: { details: { field: string } } }>(res).error.details.field]).toEqual([
        query,
        400,
        field,
      ]);
    }
  });

  it('answers 404 NOT_FOUND for an unknown execution and 400 for an impossible name', async () => {
    const res = await get('scale-out-never');
    expect(res.statusCode).toBe(404);
    expect(body(res)).toMatchObject({ error: { code: 'NOT_FOUND', details: { execution: 'scale-out-never' } } });
    const bad = await get('x'.repeat(81));
    expect(bad.statusCode).toBe(400);
    expect(body(bad)).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'execution' } } });
  });

  it('answers 405 for a method the admin resources do not serve', async () => {
    const res = (await handler(event('DELETE', GET, '/v1/admin/workflows/executions/x', { execution: 'x' }), ctx)) as ApiResult;
    expect(res.statusCode).toBe(405);
    expect(body(res)).toMatchObject({ error: { code: 'METHOD_NOT_ALLOWED' } });
  });
});

describe('admin API without workflows', () => {
  // 5xx answers are logged with their cause (middleware.errorResponder): keep them off the test output.
  let log: CapturedLog;
  beforeAll(() => {
    log = captureLog();
  });
  beforeEach(() =>
    setApiContext({
      coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    }),
  );
  afterAll(() => {
    log.restore();
    setWorkflowServiceFactory(undefined);
  });

  it('answers 503 WORKFLOWS_UNAVAILABLE with a clear message when nothing is configured', async () => {
    // The admin Lambda module registered the Step Functions factory; this environment has no STRATA_WORKFLOW_ARNS.
    expect(process.env.STRATA_WORKFLOW_ARNS).toBeUndefined();
    for (const res of [await start('scale-out', {}), await list(), await get('scale-out-x')]) {
      expect(res.statusCode).toBe(503);
      expect(body(res)).toMatchObject({
        error: { code: 'WORKFLOWS_UNAVAILABLE', message: expect.stringContaining('STRATA_WORKFLOW_ARNS') },
      });
      // Permanent: retrying cannot help, so the SDK does not retry it and no retry-after invites one.
      expect(body(res)).toMatchObject({ error: { details: { permanent: true } } });
      expect(res.headers?.['retry-after']).toBeUndefined();
    }
  });

  it("answers 503 naming the configuration problem when the runtime's service cannot be built, and builds it once", async () => {
    let calls = 0;
    setWorkflowServiceFactory(() => {
      calls++;
      throw new ConfigError("STRATA_WORKFLOW_ARNS: unknown workflow 'scale-up'");
    });
    const res = await list();
    expect(res.statusCode).toBe(503);
    expect(body(res)).toMatchObject({
      error: { code: 'WORKFLOWS_UNAVAILABLE', message: expect.stringContaining("unknown workflow 'scale-up'") },
    });
    await list();
    expect(calls).toBe(1);
  });

  it("uses the runtime's service when the context has none", async () => {
    const seen: string[] = [];
    const fake: WorkflowService = {
      start: async () => {
        throw new Error('not called');
      },
      describe: async () => undefined,
      list: async (o) => {
        seen.push(`${o?.workflow}:${o?.limit}`);
        return [];
      },
    };
    setWorkflowServiceFactory(() => fake);
    expect(body(await list({ workflow: 'scale-in' }))).toEqual({ executions: [] });
    expect(seen).toEqual(['scale-in:20']);
  });
});

describe('route table', () => {
  it('serves the admin routes from the admin function, marked admin-only; no other route is', () => {
    const admin = API_ROUTES.filter((r) => r.fn === 'admin');
    // The workflow routes, the policy routes (test/unit/api-policy.test.ts), the node routes (api-nodes.test.ts,
    // fleet-upgrade.test.ts) and the namespace routes (api-invalidate.test.ts).
    const nodes = [
      'GET /v1/admin/nodes',
      'GET /v1/admin/nodes/replacement',
      'PUT /v1/admin/nodes/replacement',
      'POST /v1/admin/nodes/{node}/replace',
      'DELETE /v1/admin/nodes/{node}',
      'POST /v1/admin/fleet/upgrade',
    ];
    const namespaces = ['DELETE /v1/admin/namespaces/{namespace}', 'GET /v1/admin/invalidations'];
    const policy = [
      'GET /v1/admin/policy',
      'PUT /v1/admin/policy',
      'POST /v1/admin/policy/validate',
      'GET /v1/admin/policy/versions',
      'GET /v1/admin/policy/versions/{version}',
      'POST /v1/admin/policy/rollback',
      'GET /v1/admin/policy/firings',
    ];
    expect(admin.map((r) => `${r.method} ${r.resource}`).sort()).toEqual(
      [`GET ${LIST}`, `GET ${GET}`, `POST ${START}`, ...policy, ...nodes, ...namespaces].sort(),
    );
    expect(admin.every((r) => r.auth === 'admin')).toBe(true);
    expect(API_ROUTES.filter((r) => r.fn !== 'admin').every((r) => r.auth === undefined)).toBe(true);
  });

  it('matches the admin paths (a literal segment wins over a parameter)', () => {
    expect(matchRoute('GET', '/v1/admin/workflows/executions')).toMatchObject({ resource: LIST });
    expect(matchRoute('GET', '/v1/admin/workflows/executions/scale-out-1')).toMatchObject({
      resource: GET,
      pathParameters: { execution: 'scale-out-1' },
    });
    expect(matchRoute('POST', '/v1/admin/workflows/scale-in/executions')).toMatchObject({
      resource: START,
      pathParameters: { workflow: 'scale-in' },
    });
    const wrongMethod = matchRoute('GET', '/v1/admin/workflows/scale-in/executions');
    expect(wrongMethod.route).toBeUndefined();
    expect(wrongMethod).toMatchObject({ resource: START, allowed: ['POST'] });
  });
});
