/**
 * SfnWorkflowService and the admin Lambda against LocalStack's Step Functions API. LocalStack cannot run Lambda
 * functions (no Docker), so the state machines created here have the workflows' real names
 * (`<prefix>-<workflow>`) but simple Wait / Pass / Fail definitions: what is tested is the service's use of
 * StartExecution, DescribeExecution and ListExecutions (ARNs, names, statuses, errors, ordering), not the
 * workflows' steps (test/workflows runs those with aws-local-stepfunctions).
 */
import type { Context } from 'aws-lambda';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateStateMachineCommand, DeleteStateMachineCommand, SFNClient } from '@aws-sdk/client-sfn';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { InMemoryCasStore, S3CasStore } from '../../core/ring/store.js';
import { ProgressStore, type WorkflowName } from '../../core/workflows/progress.js';
import { SfnWorkflowService, type ExecutionDetail } from '../../core/workflows/admin-service.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';

const ROLE = 'arn:aws:iam::000000000000:role/strata-test-workflows';
const prefix = uniqueName('strata-admin').toLowerCase();

/** Stand-in definitions under the real state machine names. */
const DEFINITIONS: Partial<Record<WorkflowName, object>> = {
  // Runs for a moment, then succeeds with an output.
  'scale-out': {
    StartAt: 'Work',
    States: { Work: { Type: 'Wait', Seconds: 2, Next: 'Done' }, Done: { Type: 'Pass', Result: { joined: 'n4' }, End: true } },
  },
  // Fails at once, the way a rolled-back scale-in ends.
  'scale-in': {
    StartAt: 'Boom',
    States: { Boom: { Type: 'Fail', Error: 'NoNodeToRemoveError', Cause: 'node n9 is not in the ring' } },
  },
  'evict-to-s3': { StartAt: 'Done', States: { Done: { Type: 'Pass', End: true } } },
};

let sfn: SFNClient;
const arns: Partial<Record<WorkflowName, string>> = {};

async function eventually<T>(probe: () => Promise<T | undefined>, what: string, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const stopped = (svc: SfnWorkflowService, name: string) =>
  eventually(async () => {
    const d = await svc.describe(name);
    return d && d.status !== 'RUNNING' ? d : undefined;
  }, `${name} stopped`);

beforeAll(async () => {
  sfn = new SFNClient({ endpoint: testS3Endpoint(), region: 'us-east-1' });
  for (const [workflow, def] of Object.entries(DEFINITIONS)) {
    const r = await sfn.send(
      new CreateStateMachineCommand({
        name: `${prefix}-${workflow}`,
        definition: JSON.stringify(def),
        roleArn: ROLE,
        type: 'STANDARD',
      }),
    );
    arns[workflow as WorkflowName] = r.stateMachineArn!;
  }
});

afterAll(async () => {
  for (const arn of Object.values(arns))
    await sfn.send(new DeleteStateMachineCommand({ stateMachineArn: arn })).catch(() => undefined);
  sfn.destroy();
});

describe('SfnWorkflowService (LocalStack Step Functions API)', () => {
  it('starts, describes (running, then succeeded with output and progress) and names the state machine ARN', async () => {
    const progress = new ProgressStore(new InMemoryCasStore());
    const svc = new SfnWorkflowService({ client: sfn, stateMachines: arns, progress });
    expect(arns['scale-out']).toMatch(new RegExp(`:stateMachine:${prefix}-scale-out$`));

    const started = await svc.start('scale-out', { mode: 'parallel' });
    expect(started).toMatchObject({ workflow: 'scale-out', status: 'RUNNING' });
    expect(started.execution).toMatch(/^scale-out-\d{8}T\d{6}Z-[0-9a-f]{6}$/);
    expect(svc.executionArn('scale-out', started.execution)).toBe(
      `${arns['scale-out']!.replace(':stateMachine:', ':execution:')}:${started.execution}`,
    );

    // What the steps would have written: 2 of 5 sessions.
    await progress.update(started.execution, 'scale-out', (p) => {
      p.total = 5;
      p.done = 2;
      p.bytes = 1234;
      p.phase = 'streaming session 3 of 5';
    });
    const running = (await svc.describe(started.execution))!;
    expect(running).toMatchObject({
      execution: started.execution,
      workflow: 'scale-out',
      status: 'RUNNING',
      input: { mode: 'parallel' },
    });
    expect(running.progress).toMatchObject({
      total: 5,
      done: 2,
      fraction: 0.4,
      unit: 'sessions',
      phase: 'streaming session 3 of 5',
    });
    expect(running.stoppedAt).toBeUndefined();

    const done = await stopped(svc, started.execution);
    expect(done).toMatchObject({ status: 'SUCCEEDED', output: { joined: 'n4' } });
    expect(Date.parse(done.stoppedAt!)).toBeGreaterThanOrEqual(Date.parse(done.startedAt));
    // A succeeded execution shows a full bar even if its last progress write was not the final one.
    expect(done.progress!.fraction).toBe(1);
  }, 300_000);

  it("reports a failed execution with Step Functions' error and cause", async () => {
    const svc = new SfnWorkflowService({ client: sfn, stateMachines: arns });
    const { execution } = await svc.start('scale-in', { nodeId: 'n9' });
    const d: ExecutionDetail = await stopped(svc, execution);
    expect(d).toMatchObject({
      workflow: 'scale-in',
      status: 'FAILED',
      error: { Error: 'NoNodeToRemoveError', Cause: 'node n9 is not in the ring' },
    });
    expect(d.progress).toBeUndefined();
  }, 300_000);

  it('finds an execution with a caller-chosen name under any workflow, and refuses a second start with that name', async () => {
    const svc = new SfnWorkflowService({ client: sfn, stateMachines: arns });
    const name = uniqueName('nightly');
    await svc.start('evict-to-s3', { targetFraction: 0.5 }, name);
    const d = await stopped(svc, name);
    expect(d).toMatchObject({ execution: name, workflow: 'evict-to-s3', status: 'SUCCEEDED', input: { targetFraction: 0.5 } });
    await expect(svc.start('evict-to-s3', { other: true }, name)).rejects.toMatchObject({
      code: 'EXECUTION_EXISTS',
      status: 409,
      details: { execution: name },
    });
    await expect(svc.describe(uniqueName('never-started'))).resolves.toBeUndefined();
    // Not a valid execution name: nobody can have one.
    await expect(svc.describe('a:b')).resolves.toBeUndefined();
  }, 300_000);

  it('lists newest first, across workflows or for one, at most `limit`', async () => {
    const svc = new SfnWorkflowService({ client: sfn, stateMachines: arns });
    const a = await svc.start('evict-to-s3', {});
    await new Promise((r) => setTimeout(r, 1100)); // start dates have a resolution of a second or worse
    const b = await svc.start('scale-out', {});
    const all = await svc.list({ limit: 100 });
    const names = all.map((e) => e.execution);
    expect(names.indexOf(b.execution)).toBeGreaterThanOrEqual(0);
    expect(names.indexOf(b.execution)).toBeLessThan(names.indexOf(a.execution));
    for (let i = 1; i < all.length; i++) expect(all[i - 1]!.startedAt >= all[i]!.startedAt).toBe(true);
    expect(new Set(all.map((e) => e.workflow))).toEqual(new Set(['scale-out', 'scale-in', 'evict-to-s3']));

    const scaleOuts = await svc.list({ workflow: 'scale-out' });
    expect(scaleOuts.length).toBeGreaterThan(0);
    expect(scaleOuts.every((e) => e.workflow === 'scale-out')).toBe(true);
    expect(scaleOuts[0]!.execution).toBe(b.execution);
    expect(await svc.list({ limit: 2 })).toHaveLength(2);
  }, 300_000);

  it('answers 503 WORKFLOWS_UNAVAILABLE for a workflow without a state machine, or one that does not exist', async () => {
    const svc = new SfnWorkflowService({ client: sfn, stateMachines: arns });
    await expect(svc.start('tier-migrate', {})).rejects.toMatchObject({ code: 'WORKFLOWS_UNAVAILABLE', status: 503 });
    await expect(svc.list({ workflow: 'tier-migrate' })).rejects.toMatchObject({ code: 'WORKFLOWS_UNAVAILABLE' });
    const gone = new SfnWorkflowService({
      client: sfn,
      stateMachines: { 'tier-migrate': `${arns['scale-out']!.split(':stateMachine:')[0]}:stateMachine:${prefix}-missing` },
    });
    await expect(gone.start('tier-migrate', {})).rejects.toMatchObject({ code: 'WORKFLOWS_UNAVAILABLE', status: 503 });
    expect(() => new SfnWorkflowService({ client: sfn, stateMachines: { 'scale-out': 'not-an-arn' } })).toThrow(
      /not a state machine ARN/,
    );
  });
});

describe('admin Lambda (lambdas/api/admin.ts) with Step Functions and progress in S3 from its environment', () => {
  const ctx = { awsRequestId: 'req-admin' } as Context;
  const bucket = uniqueName('strata-admin').toLowerCase();
  const saved = { ...process.env };
  let handler: (e: ApiEvent, c: Context) => Promise<ApiResult>;

  function event(
    method: string,
    resource: string,
    path: string,
    params: Record<string, string> | null,
    o: { body?: unknown; query?: Record<string, string> } = {},
  ): ApiEvent {
    const body = o.body === undefined ? null : Buffer.from(JSON.stringify(o.body)).toString('base64');
    return {
      httpMethod: method,
      resource,
      path,
      pathParameters: params,
      queryStringParameters: o.query ?? null,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body,
      isBase64Encoded: !!body,
    } as unknown as ApiEvent;
  }

  beforeAll(async () => {
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
    Object.assign(process.env, {
      STRATA_WORKFLOW_ARNS: JSON.stringify(arns),
      STRATA_SFN_ENDPOINT: testS3Endpoint(),
      STRATA_WORKFLOW_DOCS_BUCKET: bucket,
      STRATA_WORKFLOW_DOCS_PREFIX: 'ring',
      STRATA_S3_ENDPOINT: testS3Endpoint(),
    });
    ({ handler } = await import('../../lambdas/api/admin.js'));
  });

  afterAll(() => {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  });

  it('starts (202), lists and describes with the progress document read from the bucket next to the ring', async () => {
    const start = await handler(
      event(
        'POST',
        '/v1/admin/workflows/{workflow}/executions',
        '/v1/admin/workflows/scale-out/executions',
        { workflow: 'scale-out' },
        { body: { mode: 'incremental', graceMs: 0 } },
      ),
      ctx,
    );
    expect(start.statusCode).toBe(202);
    const summary = JSON.parse(start.body) as { execution: string };
    expect(summary).toMatchObject({ workflow: 'scale-out', status: 'RUNNING' });
    expect(start.headers).toMatchObject({ location: `../executions/${summary.execution}`, 'x-request-id': 'req-admin' });

    // The progress document as a step Lambda writes it: into the ring's bucket and prefix.
    const progress = new ProgressStore(
      new S3CasStore({
        bucket,
        prefix: 'ring',
        clientConfig: { endpoint: testS3Endpoint(), region: 'us-east-1', forcePathStyle: true },
      }),
    );
    await progress.update(summary.execution, 'scale-out', (p) => {
      p.total = 3;
      p.done = 1;
      p.phase = 'published 1 of 3 sessions';
    });
    const get = await handler(
      event('GET', '/v1/admin/workflows/executions/{execution}', `/v1/admin/workflows/executions/${summary.execution}`, {
        execution: summary.execution,
      }),
      ctx,
    );
    expect(get.statusCode).toBe(200);
    const detail = JSON.parse(get.body) as ExecutionDetail;
    expect(detail).toMatchObject({
      execution: summary.execution,
      workflow: 'scale-out',
      input: { mode: 'incremental', graceMs: 0 },
    });
    expect(detail.progress).toMatchObject({ total: 3, done: 1, unit: 'sessions', phase: 'published 1 of 3 sessions' });
    expect(detail.progress!.fraction).toBeCloseTo(1 / 3);

    const list = await handler(
      event('GET', '/v1/admin/workflows/executions', '/v1/admin/workflows/executions', null, {
        query: { workflow: 'scale-out', limit: '3' },
      }),
      ctx,
    );
    expect(list.statusCode).toBe(200);
    const { executions } = JSON.parse(list.body) as { executions: { execution: string; workflow: string }[] };
    expect(executions.length).toBeLessThanOrEqual(3);
    expect(executions[0]!.execution).toBe(summary.execution);
    expect(executions.every((e) => e.workflow === 'scale-out')).toBe(true);

    const missing = await handler(
      event('GET', '/v1/admin/workflows/executions/{execution}', '/v1/admin/workflows/executions/nope', { execution: 'nope' }),
      ctx,
    );
    expect(missing.statusCode).toBe(404);
    expect(JSON.parse(missing.body)).toMatchObject({ error: { code: 'NOT_FOUND' } });
  }, 300_000);

  it('rejects a scale-out request its begin step would reject, before starting anything', async () => {
    const before = (
      await new SfnWorkflowService({ client: sfn, stateMachines: arns }).list({ workflow: 'scale-out', limit: 100 })
    ).length;
    const bad = await handler(
      event(
        'POST',
        '/v1/admin/workflows/{workflow}/executions',
        '/v1/admin/workflows/scale-out/executions',
        { workflow: 'scale-out' },
        { body: { mode: 'sideways' } },
      ),
      ctx,
    );
    expect(bad.statusCode).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'body.mode' } } });
    expect(
      (await new SfnWorkflowService({ client: sfn, stateMachines: arns }).list({ workflow: 'scale-out', limit: 100 })).length,
    ).toBe(before);
  });
});
