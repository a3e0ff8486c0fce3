/**
 * The SDK's admin workflow methods (`client.workflows`), the progress bar and the `strata workflow` command,
 * against a real local node:http server that scripts responses and records requests as they arrived on the wire.
 */
import {
  ExecutionExistsError,
  NotFoundError,
  StrataClient,
  StrataServerError,
  TimeoutError,
  UnavailableError,
  ValidationError,
  WorkflowsUnavailableError,
  formatBytes,
  renderProgressBar,
  type StrataClientOptions,
  type WorkflowExecutionDetail,
} from '../../sdk/src/index.js';
import { formatDuration, formatExecutionTable, UsageError, workflowCommand, type CliIo } from '../../sdk/src/cli-workflow.js';
import { ProgressReporter } from '../../sdk/src/progress.js';
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

const T0 = '2026-11-21T12:00:00.000Z';
const summary = (execution = 'scale-out-20261121T120000Z-abcdef', status = 'RUNNING', extra: Record<string, unknown> = {}) => ({
  execution,
  workflow: 'scale-out',
  status,
  startedAt: T0,
  ...extra,
});
const progress = (done: number, total: number, phase: string, extra: Record<string, unknown> = {}) => ({
  execution: 'x',
  workflow: 'scale-out',
  phase,
  total,
  done,
  keys: done * 10,
  bytes: done * 1024 * 1024,
  startedAt: T0,
  updatedAt: T0,
  facts: { planId: 'p1' },
  fraction: total ? done / total : 0,
  unit: 'sessions',
  ...extra,
});

describe('client.workflows.start', () => {
  it("POSTs the input as JSON to the workflow's executions, with the name as a query parameter, and parses the summary", async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary('retire-n3', 'RUNNING')));
    const run = await client().workflows.start('scale-in', { nodeId: 'n3', mode: 'parallel' }, { name: 'retire-n3' });
    expect(run).toEqual({
      execution: 'retire-n3',
      workflow: 'scale-out',
      status: 'RUNNING',
      startedAt: new Date(T0),
      stoppedAt: null,
    });
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('POST /v1/admin/workflows/scale-in/executions?name=retire-n3');
    expect(req!.headers).toMatchObject({ 'content-type': 'application/json', 'x-api-key': 'admin-key' });
    expect(JSON.parse(req!.body.toString())).toEqual({ nodeId: 'n3', mode: 'parallel' });
  });

  it('sends an empty object without input and no query without a name', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary()));
    await client().workflows.start('evict-to-s3');
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/workflows/evict-to-s3/executions');
    expect(suite.server.requests[0]!.body.toString()).toBe('{}');
  });

  it('rejects an unknown workflow, a bad name or a non-object input before sending anything', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary()));
    const c = client();
    await expect(c.workflows.start('scale-up' as 'scale-out')).rejects.toMatchObject({
      constructor: ValidationError,
      status: 0,
      field: 'workflow',
      message: expect.stringContaining('scale-out, scale-in, evict-to-s3, tier-migrate'),
    });
    await expect(c.workflows.start('scale-in', {}, { name: 'a b' })).rejects.toMatchObject({
      constructor: ValidationError,
      field: 'name',
    });
    await expect(c.workflows.start('tier-migrate', [] as unknown as Record<string, unknown>)).rejects.toMatchObject({
      field: 'input',
    });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('maps EXECUTION_EXISTS and WORKFLOWS_UNAVAILABLE to their classes; a start is not repeated after a 503, but is after a 429', async () => {
    suite.server.script((_req, res) => sendError(res, 409, 'EXECUTION_EXISTS', 'taken', { execution: 'retire-n3' }));
    const exists = await client()
      .workflows.start('scale-in', {}, { name: 'retire-n3' })
      .catch((e: unknown) => e);
    expect(exists).toBeInstanceOf(ExecutionExistsError);
    expect(exists).toMatchObject({ code: 'EXECUTION_EXISTS', status: 409, execution: 'retire-n3', retryable: false });

    suite.server.script((_req, res) => sendError(res, 503, 'WORKFLOWS_UNAVAILABLE', 'not configured'));
    const down = await client()
      .workflows.start('scale-out')
      .catch((e: unknown) => e);
    expect(down).toBeInstanceOf(WorkflowsUnavailableError);
    expect(down).toBeInstanceOf(UnavailableError);
    expect(suite.server.requests).toHaveLength(1);

    let n = 0;
    suite.server.script((_req, res) =>
      n++ === 0 ? sendError(res, 429, 'RATE_LIMITED', 'slow down') : sendJson(res, 202, summary()),
    );
    await client().workflows.start('scale-out');
    expect(suite.server.requests).toHaveLength(2);
  });
});

describe('client.workflows.get / list', () => {
  it('parses a detail with dates, error and progress', async () => {
    suite.server.script((_req, res) =>
      sendJson(res, 200, {
        ...summary('e1', 'FAILED', { stoppedAt: '2026-11-21T12:05:00.000Z' }),
        input: { mode: 'incremental' },
        error: { Error: 'NoNodeToRemoveError', Cause: 'node n9 is not in the ring' },
        progress: progress(1, 3, 'rolled back', { outcome: 'rolled-back' }),
      }),
    );
    const d = (await client().workflows.get('e1'))!;
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/workflows/executions/e1');
    expect(d).toMatchObject({
      execution: 'e1',
      status: 'FAILED',
      startedAt: new Date(T0),
      stoppedAt: new Date('2026-11-21T12:05:00.000Z'),
      input: { mode: 'incremental' },
      error: { error: 'NoNodeToRemoveError', cause: 'node n9 is not in the ring' },
    });
    expect(d.progress).toEqual({
      phase: 'rolled back',
      total: 3,
      done: 1,
      unit: 'sessions',
      fraction: 1 / 3,
      keys: 10,
      bytes: 1024 * 1024,
      outcome: 'rolled-back',
      facts: { planId: 'p1' },
      startedAt: new Date(T0),
      updatedAt: new Date(T0),
    });
  });

  it('resolves undefined for an unknown execution, but raises a missing route (a server without the admin API)', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no such execution'));
    await expect(client().workflows.get('nope')).resolves.toBeUndefined();
    suite.server.script((_req, res) => sendError(res, 404, 'ROUTE_NOT_FOUND', 'no route'));
    await expect(client().workflows.get('nope')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('lists with workflow and limit in the query, and validates both first', async () => {
    suite.server.script((_req, res) =>
      sendJson(res, 200, { executions: [summary('b', 'RUNNING'), summary('a', 'SUCCEEDED', { stoppedAt: T0 })] }),
    );
    const rows = await client().workflows.list({ workflow: 'scale-out', limit: 2 });
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/workflows/executions?workflow=scale-out&limit=2');
    expect(rows.map((r) => [r.execution, r.status, r.stoppedAt])).toEqual([
      ['b', 'RUNNING', null],
      ['a', 'SUCCEEDED', new Date(T0)],
    ]);
    await client().workflows.list();
    expect(suite.server.requests[1]!.url).toBe('/v1/admin/workflows/executions');
    await expect(client().workflows.list({ limit: 0 })).rejects.toMatchObject({ field: 'limit' });
    await expect(client().workflows.list({ limit: 2.5 })).rejects.toMatchObject({ field: 'limit' });
    await expect(client().workflows.list({ workflow: 'x' as 'scale-in' })).rejects.toMatchObject({ field: 'workflow' });
    expect(suite.server.requests).toHaveLength(2);
  });

  it('raises INVALID_RESPONSE for bodies that are not what the API answers', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { items: [] }));
    await expect(client().workflows.list()).rejects.toMatchObject({ constructor: StrataServerError, code: 'INVALID_RESPONSE' });
    suite.server.script((_req, res) =>
      sendJson(res, 200, { execution: 'e', workflow: 'scale-out', status: 'SLEEPING', startedAt: T0 }),
    );
    await expect(client().workflows.get('e')).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });
});

describe('client.workflows.wait', () => {
  /** Answers each poll with the next of `states` (the last one repeats). */
  function scriptPolls(states: object[]): void {
    let i = 0;
    suite.server.script((_req, res) => sendJson(res, 200, states[Math.min(i++, states.length - 1)]));
  }

  it('polls until the execution stops, reporting every answer, and resolves the final detail', async () => {
    scriptPolls([
      { ...summary(), progress: progress(0, 3, 'launching a node') },
      { ...summary(), progress: progress(2, 3, 'streaming session 3 of 3') },
      {
        ...summary(undefined, 'SUCCEEDED', { stoppedAt: T0 }),
        output: { ok: true },
        progress: progress(3, 3, 'done', { fraction: 1 }),
      },
    ]);
    const seen: string[] = [];
    const done = await client().workflows.wait('scale-out-20261121T120000Z-abcdef', {
      intervalMs: 1,
      onProgress: (d) => seen.push(`${d.status} ${d.progress?.done}/${d.progress?.total}`),
    });
    expect(seen).toEqual(['RUNNING 0/3', 'RUNNING 2/3', 'SUCCEEDED 3/3']);
    expect(done).toMatchObject({ status: 'SUCCEEDED', output: { ok: true } });
    expect(suite.server.requests).toHaveLength(3);
  });

  it('resolves (does not throw) a failed execution', async () => {
    scriptPolls([{ ...summary(undefined, 'FAILED', { stoppedAt: T0 }), error: { Error: 'States.Timeout', Cause: '' } }]);
    await expect(client().workflows.wait('e', { intervalMs: 1 })).resolves.toMatchObject({
      status: 'FAILED',
      error: { error: 'States.Timeout' },
    });
  });

  it('gives up after timeoutMs with a TimeoutError, and stops when its signal aborts', async () => {
    scriptPolls([summary()]);
    const started = Date.now();
    const err = await client()
      .workflows.wait('e', { intervalMs: 20, timeoutMs: 100 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ code: 'TIMEOUT', status: 0, details: { execution: 'e' } });
    expect(Date.now() - started).toBeLessThan(10_000); // gave up rather than polling on (timeoutMs is 100)
    expect(suite.server.requests.length).toBeGreaterThanOrEqual(2);

    const ac = new AbortController();
    const reason = new Error('user stopped waiting');
    const waiting = client().workflows.wait('e', { intervalMs: 10_000, signal: ac.signal, onProgress: () => ac.abort(reason) });
    await expect(waiting).rejects.toBe(reason);
  });

  it('raises NotFoundError when the execution does not exist', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no such execution'));
    await expect(client().workflows.wait('gone')).rejects.toMatchObject({
      constructor: NotFoundError,
      code: 'NOT_FOUND',
      details: { execution: 'gone' },
    });
  });
});

describe('progress bar', () => {
  const detail = (
    status: WorkflowExecutionDetail['status'],
    p?: Partial<NonNullable<WorkflowExecutionDetail['progress']>>,
  ): Pick<WorkflowExecutionDetail, 'status' | 'progress'> => ({
    status,
    ...(p
      ? {
          progress: {
            phase: '',
            total: 0,
            done: 0,
            unit: 'sessions',
            fraction: 0,
            keys: 0,
            bytes: 0,
            facts: {},
            startedAt: new Date(T0),
            updatedAt: new Date(T0),
            ...p,
          },
        }
      : {}),
  });

  it('renders done/total, bytes and the phase after a bar of the fraction', () => {
    expect(
      renderProgressBar(
        detail('RUNNING', { total: 5, done: 3, fraction: 0.6, bytes: 13_002_342, phase: 'streaming session 4 of 5' }),
        { width: 20 },
      ),
    ).toBe('[############--------] 3/5 sessions · 12.4 MiB · streaming session 4 of 5');
    expect(renderProgressBar(detail('RUNNING'), { width: 10 })).toBe('[----------] starting');
    expect(renderProgressBar(detail('RUNNING', { phase: 'launching a node' }), { width: 4 })).toBe('[----] launching a node');
    // 99.9 % is not done: the bar keeps a dash until it is.
    expect(renderProgressBar(detail('RUNNING', { total: 1000, done: 999, fraction: 0.999, phase: 'p' }), { width: 10 })).toBe(
      '[#########-] 999/1000 sessions · 0 B · p',
    );
    expect(
      renderProgressBar(detail('SUCCEEDED', { total: 3, done: 2, fraction: 2 / 3, bytes: 2048, phase: 'done' }), { width: 6 }),
    ).toBe('[######] 2/3 sessions · 2.0 KiB · done');
    expect(renderProgressBar(detail('FAILED', { total: 4, done: 1, fraction: 0.25, phase: 'rolled back' }), { width: 8 })).toBe(
      '[##------] FAILED · 1/4 sessions · 0 B · rolled back',
    );
    expect(renderProgressBar(detail('ABORTED'), { width: 2 })).toBe('[--] ABORTED · aborted');
  });

  it('truncates to the terminal width', () => {
    const line = renderProgressBar(detail('RUNNING', { total: 5, done: 1, fraction: 0.2, phase: 'x'.repeat(200) }), {
      columns: 60,
    });
    expect(line).toHaveLength(60);
    expect(line.endsWith('…')).toBe(true);
  });

  it('formats bytes in binary units', () => {
    expect([0, 1, 1023, 1024, 1536, 13_002_342, 5 * 1024 ** 3, -1, NaN].map(formatBytes)).toEqual([
      '0 B',
      '1 B',
      '1023 B',
      '1.0 KiB',
      '1.5 KiB',
      '12.4 MiB',
      '5.0 GiB',
      '0 B',
      '0 B',
    ]);
  });

  it('redraws one line in place on a terminal and finishes it with a newline', () => {
    const out: string[] = [];
    const r = new ProgressReporter({ write: (s) => out.push(s), isTTY: true, columns: 80 }, { width: 4 });
    r.update(detail('RUNNING', { total: 2, done: 0, phase: 'a' }));
    r.update(detail('RUNNING', { total: 2, done: 0, phase: 'a' })); // unchanged: not redrawn
    r.update(detail('RUNNING', { total: 2, done: 1, fraction: 0.5, phase: 'b' }));
    r.finish();
    expect(out).toEqual(['\r[----] 0/2 sessions · 0 B · a\x1b[K', '\r[##--] 1/2 sessions · 0 B · b\x1b[K', '\n']);
  });

  it('prints plain lines elsewhere: on every change, and a heartbeat while nothing changes', () => {
    const out: string[] = [];
    let now = 0;
    const r = new ProgressReporter({ write: (s) => out.push(s) }, { width: 4, heartbeatMs: 1000, now: () => now });
    const a = detail('RUNNING', { total: 2, done: 0, phase: 'a' });
    r.update(a);
    now = 500;
    r.update(a);
    now = 1600;
    r.update(a);
    r.update(detail('SUCCEEDED', { total: 2, done: 2, fraction: 1, phase: 'done' }));
    r.finish();
    expect(out).toEqual([
      '[----] 0/2 sessions · 0 B · a\n',
      '[----] 0/2 sessions · 0 B · a\n',
      '[####] 2/2 sessions · 0 B · done\n',
    ]);
    expect(out.join('')).not.toContain('\r');
  });
});

describe('progress bar during the grace period', () => {
  // The ring change is done (every session counted) but a scale workflow still waits `graceMs` (60 s by default)
  // before the sources drop what they handed over (scale-out) or the node is terminated (scale-in).
  type Subject = Parameters<typeof renderProgressBar>[0];
  const at = (iso: string): number => Date.parse(iso);
  const inGrace = (
    workflow: 'scale-in' | 'scale-out',
    facts: Record<string, string | number> = {},
    input: unknown = {},
  ): Subject => ({
    status: 'RUNNING',
    workflow,
    input,
    progress: {
      phase: workflow === 'scale-in' ? 'node n3 left the ring' : 'node n4 is NORMAL',
      total: 3,
      done: 3,
      unit: 'sessions',
      fraction: 1,
      keys: 30,
      bytes: 3072,
      facts,
      startedAt: new Date(T0),
      updatedAt: new Date('2026-11-21T12:01:00.000Z'),
    },
  });
  const bar = (d: Subject, now: string): string => renderProgressBar(d, { width: 4, now: at(now) });

  it('counts down to the graceUntil fact the server writes', () => {
    const d = inGrace('scale-in', { graceUntil: '2026-11-21T12:02:00.000Z', graceMs: 60_000 });
    const head = '[####] 3/3 sessions · 3.0 KiB · node n3 left the ring · ';
    expect(bar(d, '2026-11-21T12:01:37.000Z')).toBe(`${head}waiting 60 s grace before terminating the node, 23 s left`);
    expect(bar(d, '2026-11-21T12:02:01.000Z')).toBe(`${head}grace period over, finishing`);
  });

  it("infers the wait from the last update and the input's graceMs (default 60 s) when the server writes no such fact", () => {
    const now = '2026-11-21T12:01:37.400Z';
    expect(bar(inGrace('scale-out'), now)).toBe(
      '[####] 3/3 sessions · 3.0 KiB · node n4 is NORMAL · waiting 60 s grace before the sources drop the moved ranges, 23 s left',
    );
    const shorter = inGrace('scale-in', {}, { graceMs: 30_000 });
    expect(bar(shorter, '2026-11-21T12:01:10.000Z')).toMatch(/waiting 30 s grace before terminating the node, 20 s left$/);
    // Not waiting: sessions still moving, the execution over, or a workflow without a grace period.
    const moving = inGrace('scale-in');
    moving.progress = { ...moving.progress!, done: 2 };
    expect(bar(moving, now)).not.toContain('grace');
    expect(bar({ ...inGrace('scale-in'), status: 'SUCCEEDED' }, now)).not.toContain('grace');
    expect(bar({ ...inGrace('scale-in'), workflow: 'evict-to-s3' }, now)).not.toContain('grace');
  });

  it('in a log, counts down in 10 s steps so that a minute of grace is a few lines, not sixty', () => {
    const out: string[] = [];
    let now = at('2026-11-21T12:01:00.000Z');
    const r = new ProgressReporter({ write: (s) => out.push(s) }, { width: 4, now: () => now });
    const d = inGrace('scale-in');
    for (; now < at('2026-11-21T12:02:00.000Z'); now += 1000) r.update(d);
    expect(out.map((l) => /(\d+) s left/.exec(l)?.[1])).toEqual(['60', '50', '40', '30', '20', '10']);
  });
});

describe('strata workflow (CLI command, in-process)', () => {
  function io(tty = false): CliIo & { out: string; err: string } {
    const o = { out: '', err: '' } as CliIo & { out: string; err: string };
    o.stdout = { write: (s: string) => (o.out += s) };
    o.stderr = { write: (s: string) => (o.err += s), isTTY: tty, columns: 100 };
    return o;
  }

  it('start prints the execution; --mode and --input make the input', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary()));
    const t = io();
    expect(await workflowCommand(client(), ['start', 'scale-out'], { mode: 'parallel', input: '{"graceMs":0}' }, t)).toBe(0);
    expect(JSON.parse(suite.server.requests[0]!.body.toString())).toEqual({ graceMs: 0, mode: 'parallel' });
    expect(JSON.parse(t.out)).toMatchObject({ execution: 'scale-out-20261121T120000Z-abcdef', status: 'RUNNING' });
  });

  it('start --wait shows progress and exits 0 when it succeeded, 1 (with the error) when it failed', async () => {
    for (const [final, code] of [
      [
        {
          ...summary(undefined, 'SUCCEEDED', { stoppedAt: '2026-11-21T12:00:42.000Z' }),
          progress: progress(3, 3, 'done', { fraction: 1 }),
        },
        0,
      ],
      [
        {
          ...summary(undefined, 'FAILED', { stoppedAt: T0 }),
          error: { Error: 'NoNodeToRemoveError', Cause: 'node n9 is not in the ring' },
        },
        1,
      ],
    ] as const) {
      let polls = 0;
      suite.server.script((req, res) => {
        if (req.method === 'POST') return sendJson(res, 202, summary());
        return sendJson(res, 200, polls++ === 0 ? { ...summary(), progress: progress(1, 3, 'streaming session 2 of 3') } : final);
      });
      const t = io(true);
      expect(await workflowCommand(client(), ['start', 'scale-out'], { wait: true, interval: '1' }, t)).toBe(code);
      expect(t.err).toContain('started scale-out-20261121T120000Z-abcdef\n');
      expect(t.err).toContain('\r[########----------------] 1/3 sessions · 1.0 MiB · streaming session 2 of 3\x1b[K');
      expect(JSON.parse(t.out)).toMatchObject({ status: final.status });
      if (code === 0) expect(t.err).toContain('SUCCEEDED in 42.0 s');
      else
        expect(t.err).toContain(
          'strata: scale-out-20261121T120000Z-abcdef FAILED after 0.0 s: NoNodeToRemoveError: node n9 is not in the ring',
        );
    }
  });

  it('status prints the execution, exits 1 for an unknown one; list prints a table or JSON', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { ...summary(), progress: progress(1, 2, 'p') }));
    const t = io();
    expect(await workflowCommand(client(), ['status', 'e1'], {}, t)).toBe(0);
    expect(JSON.parse(t.out)).toMatchObject({ progress: { done: 1, total: 2 } });

    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', 'no'));
    const missing = io();
    expect(await workflowCommand(client(), ['status', 'e1'], {}, missing)).toBe(1);
    expect(missing.err).toContain("no workflow execution named 'e1'");

    suite.server.script((_req, res) =>
      sendJson(res, 200, { executions: [summary('b', 'SUCCEEDED', { stoppedAt: '2026-11-21T12:04:05.000Z' })] }),
    );
    const table = io();
    expect(await workflowCommand(client(), ['list'], { workflow: 'scale-out', limit: '5' }, table)).toBe(0);
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/workflows/executions?workflow=scale-out&limit=5');
    expect(table.out).toBe(
      'EXECUTION  WORKFLOW   STATUS     STARTED               DURATION\nb          scale-out  SUCCEEDED  2026-11-21T12:00:00Z  4 min 05 s\n',
    );
    const asJson = io();
    await workflowCommand(client(), ['list'], { json: true }, asJson);
    expect(JSON.parse(asJson.out)).toEqual([expect.objectContaining({ execution: 'b', status: 'SUCCEEDED' })]);
  });

  it('rejects bad arguments with a usage error, before any request', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary()));
    const cases: [string[], object, RegExp][] = [
      [['start'], {}, /needs a workflow name/],
      [['start', 'scale-up'], {}, /unknown workflow 'scale-up'; workflows: scale-out, scale-in, evict-to-s3, tier-migrate/],
      [['start', 'scale-out'], { mode: 'sideways' }, /--mode of scale-out is incremental or parallel/],
      [['start', 'scale-out'], { input: '{bad' }, /--input is not valid JSON/],
      [['start', 'scale-out'], { input: '[1]' }, /--input must be a JSON object/],
      [['status'], {}, /needs an execution name/],
      [['list'], { limit: '0' }, /--limit must be a whole number/],
      [['list'], { workflow: 'nope' }, /unknown workflow 'nope'/],
      [['frobnicate'], {}, /unknown workflow command 'frobnicate'/],
      [[], {}, /start, status or list/],
    ];
    for (const [args, opts, msg] of cases) await expect(workflowCommand(client(), args, opts, io())).rejects.toThrow(msg);
    await expect(workflowCommand(client(), [], {}, io())).rejects.toBeInstanceOf(UsageError);
    expect(suite.server.requests).toHaveLength(0);
  });

  it('formats durations and an empty table', () => {
    expect([0, 1234, 59_949, 60_000, 245_000, 3_600_000, 7_380_000, -1].map(formatDuration)).toEqual([
      '0.0 s',
      '1.2 s',
      '59.9 s',
      '1 min 00 s',
      '4 min 05 s',
      '1 h 00 min',
      '2 h 03 min',
      '-',
    ]);
    expect(formatExecutionTable([])).toBe('no executions\n');
  });
});
