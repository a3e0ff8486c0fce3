/**
 * Starting a rolling upgrade by hand: `POST /v1/admin/fleet/upgrade` through the admin Lambda handler and the real
 * route table (the workflows a recording stand-in), `client.nodes.upgrade` and `strata node upgrade` against a
 * scripted server. The workflow itself runs in test/workflows/rolling-upgrade*.test.ts.
 */
import type { Context } from 'aws-lambda';
import { handler } from '../../lambdas/api/admin.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { openApiDocument } from '../../core/api/openapi.js';
import { API_ROUTES } from '../../core/api/routes.js';
import { setApiContext } from '../../core/composition/api-context.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { parseTenantAccess, type TenantAccess } from '../../core/model/tenancy.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { ExecutionSummary, WorkflowService } from '../../core/workflows/admin-service.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { StrataClient, ValidationError, type UpgradeOptions } from '../../sdk/src/index.js';
import { runCli, type CliContext } from '../../sdk/src/cli-run.js';
import { scriptedServerForSuite, sendJson } from '../../sdk/test/scripted-server.js';

const ctx = { awsRequestId: 'req-upgrade' } as Context;
const UPGRADE = '/v1/admin/fleet/upgrade';
const START = '/v1/admin/workflows/{workflow}/executions';

interface Req {
  body?: unknown;
  query?: Record<string, string>;
  identity?: Record<string, unknown>;
}

function event(resource: string, path: string, params: Record<string, string> | null, o: Req = {}): ApiEvent {
  const body = o.body === undefined ? undefined : JSON.stringify(o.body);
  return {
    httpMethod: 'POST',
    resource,
    path,
    pathParameters: params,
    queryStringParameters: o.query ?? null,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body ?? null,
    isBase64Encoded: false,
    requestContext: { identity: o.identity ?? {} },
  } as unknown as ApiEvent;
}

const call = async (e: ApiEvent): Promise<ApiResult> => (await handler(e, ctx)) as ApiResult;
const upgrade = (o?: Req) => call(event(UPGRADE, UPGRADE, null, o));
const startWorkflow = (workflow: string, o?: Req) =>
  call(event(START, `/v1/admin/workflows/${workflow}/executions`, { workflow }, o));
const body = <T>(r: ApiResult): T => JSON.parse(r.body) as T;
const errorOf = (r: ApiResult) => body<{ error: { code: string; details?: Record<string, unknown> } }>(r).error;

class FakeWorkflows implements WorkflowService {
  started: { workflow: WorkflowName; input: Record<string, unknown>; name?: string }[] = [];
  async start(workflow: WorkflowName, input: Record<string, unknown>, name?: string): Promise<ExecutionSummary> {
    this.started.push({ workflow, input, ...(name !== undefined ? { name } : {}) });
    return { execution: name ?? `${workflow}-1`, workflow, status: 'RUNNING', startedAt: '2026-11-21T12:00:00.000Z' };
  }
  async describe() {
    return undefined;
  }
  async list() {
    return [];
  }
}

let workflows: FakeWorkflows;
function useContext(extra: { tenantAccess?: TenantAccess } = {}) {
  setApiContext({
    coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
    inlineLimitBytes: 1024,
    urlTtlSeconds: 60,
    workflows,
    ...(extra.tenantAccess ? { tenantAccess: extra.tenantAccess } : {}),
  });
}

beforeEach(() => {
  workflows = new FakeWorkflows();
  useContext();
});
afterAll(() => setApiContext(undefined));

describe('POST /v1/admin/fleet/upgrade', () => {
  it('starts rolling-upgrade with the body as its input, as the workflow route does (same summary, same name)', async () => {
    const input = { nodes: ['n1', 'n2'], mode: 'incremental', graceMs: 30_000, reason: 'cache node 1.4.2' };
    const res = await upgrade({ body: input, query: { name: 'upgrade-1-4-2' } });
    expect(res.statusCode).toBe(202);
    expect(body<ExecutionSummary>(res)).toEqual({
      execution: 'upgrade-1-4-2',
      workflow: 'rolling-upgrade',
      status: 'RUNNING',
      startedAt: '2026-11-21T12:00:00.000Z',
    });
    const location = res.headers!.location as string;
    expect(new URL(location, 'https://api.example/dev/v1/admin/fleet/upgrade').pathname).toBe(
      '/dev/v1/admin/workflows/executions/upgrade-1-4-2',
    );
    expect((await startWorkflow('rolling-upgrade', { body: input })).statusCode).toBe(202);
    expect(workflows.started).toEqual([
      { workflow: 'rolling-upgrade', input, name: 'upgrade-1-4-2' },
      { workflow: 'rolling-upgrade', input },
    ]);
  });

  it('takes no body at all: every NORMAL node, with the defaults', async () => {
    expect((await upgrade()).statusCode).toBe(202);
    expect(workflows.started).toEqual([{ workflow: 'rolling-upgrade', input: {} }]);
  });

  it('refuses bad options with 400 naming the field before anything starts, here and on the workflow route', async () => {
    const cases: [unknown, string][] = [
      [{ nodes: [] }, 'body.nodes'],
      [{ nodes: ['bad id'] }, 'body.nodes[0]'],
      [{ mode: 'all-at-once' }, 'body.mode'],
      [{ graceMs: -1 }, 'body.graceMs'],
      [{ launchTemplateVersion: '7' }, 'body'],
      [['n1'], 'body'],
    ];
    for (const [input, field] of cases) {
      const res = await upgrade({ body: input });
      expect([input, res.statusCode, errorOf(res).details?.field]).toEqual([input, 400, field]);
      const direct = await startWorkflow('rolling-upgrade', { body: input });
      expect([input, direct.statusCode]).toEqual([input, 400]);
    }
    expect(workflows.started).toEqual([]);
  });

  it('refuses a tenant key, an unknown key and none with 403 NAMESPACE_FORBIDDEN, starting nothing; serves the admin key', async () => {
    useContext({
      tenantAccess: parseTenantAccess(
        JSON.stringify([
          { keyId: 'k-web', tenant: 'web', namespaces: ['*'] },
          { keyId: 'k-admin', tenant: 'ops', admin: true },
        ]),
      ),
    });
    for (const identity of [{ apiKeyId: 'k-web' }, { apiKeyId: 'k-nobody' }, {}]) {
      const res = await upgrade({ identity, body: {} });
      expect([identity, res.statusCode, errorOf(res).code]).toEqual([identity, 403, 'NAMESPACE_FORBIDDEN']);
    }
    expect(workflows.started).toEqual([]);
    expect((await upgrade({ identity: { apiKeyId: 'k-admin' } })).statusCode).toBe(202);
  });

  it('is an admin-only route of the admin function, documented in the OpenAPI document', () => {
    const route = API_ROUTES.find((r) => r.resource === UPGRADE)!;
    expect(route).toMatchObject({ method: 'POST', fn: 'admin', auth: 'admin' });
    const doc = openApiDocument(API_ROUTES) as { paths: Record<string, Record<string, { operationId: string }>> };
    expect(doc.paths[UPGRADE]!.post!.operationId).toBe('upgradeFleet');
  });
});

describe('client.nodes.upgrade and strata node upgrade', () => {
  const suite = scriptedServerForSuite();
  const summary = {
    execution: 'upgrade-1',
    workflow: 'rolling-upgrade',
    status: 'RUNNING',
    startedAt: '2026-11-21T12:00:00.000Z',
  };
  const client = () =>
    new StrataClient({ endpoint: suite.server.url, apiKey: 'admin-key', retryBaseDelayMs: 1, timeoutMs: 2000 });
  const sent = () => suite.server.requests.map((r) => `${r.method} ${r.url}`);
  const sentBody = (i = 0): unknown => JSON.parse(suite.server.requests[i]!.body.toString());

  async function strata(args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const cli: CliContext = {
      stdout: { write: (c: string | Uint8Array) => void (out += typeof c === 'string' ? c : Buffer.from(c).toString('utf8')) },
      stderr: { write: (t: string) => void (err += t) },
      env: { STRATA_ENDPOINT: suite.server.url },
    };
    return { code: await runCli(args, cli), out, err };
  }

  it('POSTs the options to /v1/admin/fleet/upgrade, the name in the query, and resolves the execution', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary));
    const options: UpgradeOptions = { nodes: ['n1', 'i-0abc:7070'], mode: 'parallel', rateBytesPerSec: 1 << 20 };
    const run = await client().nodes.upgrade(options, { name: 'upgrade-1' });
    expect(run).toMatchObject({ execution: 'upgrade-1', workflow: 'rolling-upgrade', status: 'RUNNING' });
    expect(sent()).toEqual(['POST /v1/admin/fleet/upgrade?name=upgrade-1']);
    expect(sentBody()).toEqual(options);
  });

  it('refuses bad node ids, an empty node list and a bad name before sending', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary));
    const c = client();
    await expect(c.nodes.upgrade({ nodes: ['a b'] })).rejects.toMatchObject({ constructor: ValidationError, field: 'nodeId' });
    await expect(c.nodes.upgrade({ nodes: [] })).rejects.toMatchObject({ field: 'input.nodes' });
    await expect(c.nodes.upgrade({}, { name: 'a b' })).rejects.toMatchObject({ field: 'name' });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('strata node upgrade sends the node ids, --mode, --rate and --reason, and prints the execution', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary));
    const r = await strata(['node', 'upgrade', 'n1', 'n2', '--mode', 'incremental', '--rate', '1048576', '--reason', 'v2']);
    expect([r.code, r.err]).toEqual([0, '']);
    expect(sent()).toEqual(['POST /v1/admin/fleet/upgrade']);
    expect(sentBody()).toEqual({ nodes: ['n1', 'n2'], mode: 'incremental', rateBytesPerSec: 1048576, reason: 'v2' });
    expect(JSON.parse(r.out)).toMatchObject({ execution: 'upgrade-1', workflow: 'rolling-upgrade' });
    const all = await strata(['node', 'upgrade']);
    expect(all.code).toBe(0);
    expect(sentBody(1)).toEqual({});
  });

  it('strata node upgrade refuses a bad mode, a bad node id and options of other subcommands, sending nothing', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary));
    for (const args of [
      ['node', 'upgrade', '--mode', 'fast'],
      ['node', 'upgrade', 'bad/id'],
      ['node', 'upgrade', '--fill', 'sessions'],
      ['node', 'upgrade', '--interval', '100'],
    ]) {
      const r = await strata(args);
      expect([args, r.code]).toEqual([args, 2]);
    }
    expect(suite.server.requests).toHaveLength(0);
    const help = await strata(['help', 'node']);
    expect(help.out).toContain('node upgrade [<node> ...]');
  });
});
