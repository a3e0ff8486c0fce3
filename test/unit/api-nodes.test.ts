/**
 * The node admin routes (/v1/admin/nodes...) through the admin Lambda handler (in-process, API Gateway proxy events)
 * and the real route table, over a real ring store (in memory) with the real replacement controls and node removal;
 * the cache nodes are a recording stand-in for the NodeClient (test/integration/api-nodes.test.ts has real ones), the
 * workflows a recording stand-in for the service.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { handler } from '../../lambdas/api/admin.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import type { NodeAdmin } from '../../core/api/node-operations.js';
import { openApiDocument } from '../../core/api/openapi.js';
import { API_ROUTES, matchRoute } from '../../core/api/routes.js';
import { buildApiContext, setApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { warmTierFromEnv } from '../../core/composition/warm-tier-env.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { parseTenantAccess, type TenantAccess } from '../../core/model/tenancy.js';
import { HealthControls } from '../../core/nodes/health-controls.js';
import { NodeUnavailableError } from '../../core/nodes/node-client-errors.js';
import type { NodeClient } from '../../core/nodes/node-client.js';
import { initialRing, markDown, type RingDocument } from '../../core/ring/document.js';
import { FileCasStore, InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { ExecutionSummary, WorkflowService } from '../../core/workflows/admin-service.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import type { CacheNodeWire, NodeListWire, NodeRemovalWire, ReplacementControlsWire } from '../../sdk/src/contract.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';

const ctx = { awsRequestId: 'req-nodes' } as Context;

const NODES = '/v1/admin/nodes';
const NODE = '/v1/admin/nodes/{node}';
const REPLACE = '/v1/admin/nodes/{node}/replace';
const CONTROLS = '/v1/admin/nodes/replacement';
const START = '/v1/admin/workflows/{workflow}/executions';

interface Req {
  body?: unknown;
  raw?: string;
  query?: Record<string, string>;
  identity?: Record<string, unknown>;
}

function event(method: string, resource: string, path: string, params: Record<string, string> | null, o: Req = {}): ApiEvent {
  const body = o.raw ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
  return {
    httpMethod: method,
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
const list = (o?: Req) => call(event('GET', NODES, NODES, null, o));
const remove = (node: string, o?: Req) => call(event('DELETE', NODE, `${NODES}/${node}`, { node }, o));
const replace = (node: string, o?: Req) => call(event('POST', REPLACE, `${NODES}/${node}/replace`, { node }, o));
const getControls = (o?: Req) => call(event('GET', CONTROLS, CONTROLS, null, o));
const putControls = (body: unknown, o: Req = {}) => call(event('PUT', CONTROLS, CONTROLS, null, { body, ...o }));
const startWorkflow = (workflow: string, o?: Req) =>
  call(event('POST', START, `/v1/admin/workflows/${workflow}/executions`, { workflow }, o));

type ErrorBody = { error: { code: string; message: string; details?: Record<string, unknown> } };
const body = <T>(r: ApiResult): T => JSON.parse(r.body) as T;
const errorOf = (r: ApiResult) => body<ErrorBody>(r).error;

/** The cache nodes as the removal talks to them: each call recorded, `failOn` a URL that cannot be reached. */
class FakeNodes {
  calls: string[] = [];
  failOn: string | undefined;
  async deleteRange(url: string, start: string, end: string | null): Promise<number> {
    if (url === this.failOn) throw new NodeUnavailableError(url, 'connect ECONNREFUSED');
    this.calls.push(`deleteRange ${url} ${start}..${end ?? 'top'}`);
    return 0;
  }
  async pushRing(url: string, doc: RingDocument): Promise<{ installed: boolean; version: number }> {
    this.calls.push(`pushRing ${url} v${doc.version}`);
    return { installed: true, version: doc.version };
  }
}

/** The workflows: every start recorded, answered as the service does. */
class FakeWorkflows implements WorkflowService {
  started: { workflow: WorkflowName; input: Record<string, unknown>; name?: string }[] = [];
  async start(workflow: WorkflowName, input: Record<string, unknown>, name?: string): Promise<ExecutionSummary> {
    this.started.push({ workflow, input, ...(name !== undefined ? { name } : {}) });
    return {
      execution: name ?? `${workflow}-${this.started.length}`,
      workflow,
      status: 'RUNNING',
      startedAt: '2026-11-21T12:00:00.000Z',
    };
  }
  async describe() {
    return undefined;
  }
  async list() {
    return [];
  }
}

const url = (id: string) => `http://127.0.0.1:9/${id}`;

let cas: InMemoryCasStore;
let ring: RingStore;
let nodes: FakeNodes;
let workflows: FakeWorkflows;
let nodeAdmin: NodeAdmin;

function useContext(
  extra: { tenantAccess?: TenantAccess; nodeAdmin?: NodeAdmin | null; workflows?: WorkflowService | null } = {},
) {
  setApiContext({
    coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
    inlineLimitBytes: 1024,
    urlTtlSeconds: 60,
    ...(extra.workflows === null ? {} : { workflows: extra.workflows ?? workflows }),
    ...(extra.nodeAdmin === null ? {} : { nodeAdmin: extra.nodeAdmin ?? nodeAdmin }),
    ...(extra.tenantAccess ? { tenantAccess: extra.tenantAccess } : {}),
  });
}

async function markNodeDown(id: string, reason = 'test'): Promise<RingDocument> {
  return ring.update((d, next) => markDown(d, id, next, reason, Date.parse('2026-11-21T11:59:00.000Z')));
}

beforeEach(async () => {
  cas = new InMemoryCasStore();
  ring = new RingStore(cas);
  await ring.create(
    initialRing(
      ['n1', 'n2', 'n3'].map((id) => ({ id, url: url(id), instance: `i-${id}` })),
      2,
    ),
  );
  nodes = new FakeNodes();
  workflows = new FakeWorkflows();
  nodeAdmin = { ring, controls: new HealthControls(cas), nodes: nodes as unknown as NodeClient };
  useContext();
});

afterAll(() => setApiContext(undefined));

describe('GET /v1/admin/nodes', () => {
  it("lists the ring's nodes with the ranges each owns, the ring's version and the replacement controls", async () => {
    const res = await list();
    expect(res.statusCode).toBe(200);
    const got = body<NodeListWire>(res);
    expect(got.ringVersion).toBe(1);
    expect(got.replacement).toEqual({ paused: false });
    expect(got.nodes).toEqual(
      ['n1', 'n2', 'n3'].map((id) => ({
        id,
        url: url(id),
        state: 'NORMAL',
        instance: `i-${id}`,
        addedAt: expect.any(String),
        ranges: 2,
      })),
    );
  });

  it('shows a DOWN node with when (ISO-8601) and why it was marked', async () => {
    const doc = await markNodeDown('n3', 'health check: 3 failed probes');
    const got = body<NodeListWire>(await list());
    expect(got.ringVersion).toBe(doc.version);
    expect(got.nodes.find((n) => n.id === 'n3')).toMatchObject({
      state: 'DOWN',
      down: { at: '2026-11-21T11:59:00.000Z', reason: 'health check: 3 failed probes' },
      ranges: 2,
    } satisfies Partial<CacheNodeWire>);
    expect(got.nodes.find((n) => n.id === 'n1')!.down).toBeUndefined();
  });

  it('answers ringVersion null and no nodes before there is a ring', async () => {
    const empty = new InMemoryCasStore();
    useContext({ nodeAdmin: { ring: new RingStore(empty), controls: new HealthControls(empty), nodes: nodeAdmin.nodes } });
    expect(body(await list())).toEqual({ ringVersion: null, nodes: [], replacement: { paused: false } });
  });
});

describe('DELETE /v1/admin/nodes/{node}', () => {
  it('removes a DOWN node: its ranges go to NORMAL nodes, each receiver cleared first, then told of the new ring', async () => {
    const down = await markNodeDown('n3');
    const owned = down.ranges.filter((r) => r.owner === 'n3').map((r) => r.start);
    const res = await remove('n3');
    expect(res.statusCode).toBe(200);
    const removed = body<NodeRemovalWire>(res);
    expect(removed.ringVersion).toBe(down.version + 1);
    expect(removed.moved.map((m) => m.start)).toEqual(owned);
    for (const m of removed.moved) expect(['n1', 'n2']).toContain(m.to);
    // The receivers dropped what they held in those spans before the ring changed, then got the new ring.
    const deletes = nodes.calls.filter((c) => c.startsWith('deleteRange'));
    expect(deletes).toEqual(removed.moved.map((m) => `deleteRange ${url(m.to)} ${m.start}..${m.end ?? 'top'}`));
    expect(
      nodes.calls.slice(deletes.length).every((c) => c.startsWith('pushRing') && c.endsWith(`v${removed.ringVersion}`)),
    ).toBe(true);
    const after = (await ring.load())!;
    expect(after.version).toBe(removed.ringVersion);
    expect(after.nodes.map((n) => n.id)).toEqual(['n1', 'n2']);
    expect(after.ranges.every((r) => r.owner !== 'n3')).toBe(true);
    // Adjacent ranges of one owner are merged: what each owns is counted from the ring as it is now.
    const owns = (id: string) => after.ranges.filter((r) => r.owner === id).length;
    expect(body<NodeListWire>(await list()).nodes.map((n) => [n.id, n.ranges])).toEqual([
      ['n1', owns('n1')],
      ['n2', owns('n2')],
    ]);
  });

  it('answers 404 NOT_FOUND for a node that is not in the ring (also once removed)', async () => {
    const res = await remove('n9');
    expect(res.statusCode).toBe(404);
    expect(errorOf(res)).toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringContaining("node 'n9' is not in ring version 1"),
      details: { node: 'n9', ringVersion: 1 },
    });
    await markNodeDown('n3');
    expect((await remove('n3')).statusCode).toBe(200);
    expect((await remove('n3')).statusCode).toBe(404);
    expect(nodes.calls.filter((c) => c.startsWith('deleteRange'))).toHaveLength(2);
  });

  it("answers 409 VERSION_CONFLICT with the ring's reason for a node that is not DOWN, and changes nothing", async () => {
    const res = await remove('n1');
    expect(res.statusCode).toBe(409);
    expect(errorOf(res)).toEqual({
      code: 'VERSION_CONFLICT',
      message: "node 'n1' is NORMAL, not DOWN: only a DOWN node is replaced or removed this way",
      details: { node: 'n1', state: 'NORMAL', ringVersion: 1 },
    });
    expect((await ring.load())!.version).toBe(1);
    expect(nodes.calls).toEqual([]);
  });

  it('answers 409 VERSION_CONFLICT while a migration involves the DOWN node', async () => {
    await ring.update((d) => {
      const r = d.ranges.find((x) => x.owner === 'n1')!;
      r.pending = { target: 'n3', session: 'mig-1' };
    });
    const down = await markNodeDown('n3');
    const res = await remove('n3');
    expect(res.statusCode).toBe(409);
    expect(errorOf(res)).toMatchObject({
      code: 'VERSION_CONFLICT',
      message: expect.stringMatching(
        /is migrating \(session mig-1\) to node 'n3': that migration must finish or roll back first/,
      ),
      details: { node: 'n3', state: 'DOWN', ringVersion: down.version },
    });
    expect((await ring.load())!.version).toBe(down.version);
  });

  it('answers 503 TIER_UNAVAILABLE (retryable) when a receiver cannot be reached, and leaves the ring as it was', async () => {
    const log = captureLog();
    try {
      const down = await markNodeDown('n3');
      nodes.failOn = url('n1');
      const res = await remove('n3');
      expect(res.statusCode).toBe(503);
      expect(errorOf(res)).toMatchObject({
        code: 'TIER_UNAVAILABLE',
        message: expect.stringMatching(/node 'n3' was not removed: .*ECONNREFUSED.*the ring is unchanged, try again/),
        details: { tier: 'warm', node: 'n3' },
      });
      expect(errorOf(res).details?.permanent).toBeUndefined();
      expect((await ring.load())!.version).toBe(down.version);
    } finally {
      log.restore();
    }
  });
});

describe('the `replacement` path segment is the controls, never a node', () => {
  it('routes GET and PUT /v1/admin/nodes/replacement to the controls, the other methods to no node', async () => {
    expect(matchRoute('GET', CONTROLS)).toMatchObject({ resource: CONTROLS });
    expect(matchRoute('PUT', CONTROLS)).toMatchObject({ resource: CONTROLS });
    expect(matchRoute('DELETE', `${NODES}/n1`)).toMatchObject({ resource: NODE, pathParameters: { node: 'n1' } });
    // The local router finds DELETE on the `{node}` route for it (API Gateway does not): the route refuses the id.
    const del = matchRoute('DELETE', CONTROLS);
    expect(del).toMatchObject({ resource: NODE, pathParameters: { node: 'replacement' } });
    for (const res of [await remove('replacement'), await replace('replacement')]) {
      expect(res.statusCode).toBe(400);
      expect(errorOf(res)).toMatchObject({
        code: 'VALIDATION_FAILED',
        message: expect.stringContaining(
          "'replacement' is not a node id here: /v1/admin/nodes/replacement is the replacement controls",
        ),
        details: { field: 'node' },
      });
    }
    expect(workflows.started).toEqual([]);
    expect(nodes.calls).toEqual([]);
  });

  it('refuses a node id the ring could not hold with 400 naming `node`', async () => {
    for (const bad of ['a b', 'x'.repeat(65), 'n1/2']) {
      const res = await remove(bad);
      expect([bad, res.statusCode, errorOf(res).details?.field]).toEqual([bad, 400, 'node']);
    }
  });
});

describe('POST /v1/admin/nodes/{node}/replace', () => {
  it('starts replace-node for the node, as the workflow route does with { nodeId, ...body } (same summary, same name)', async () => {
    const res = await replace('n3', { body: { fillNamespaces: ['sessions'], terminate: false }, query: { name: 'replace-n3' } });
    expect(res.statusCode).toBe(202);
    expect(body<ExecutionSummary>(res)).toEqual({
      execution: 'replace-n3',
      workflow: 'replace-node',
      status: 'RUNNING',
      startedAt: '2026-11-21T12:00:00.000Z',
    });
    // The execution's URL, relative to the request's.
    const location = res.headers!.location as string;
    expect(new URL(location, 'https://api.example/dev/v1/admin/nodes/n3/replace').pathname).toBe(
      '/dev/v1/admin/workflows/executions/replace-n3',
    );
    const direct = await startWorkflow('replace-node', {
      body: { nodeId: 'n3', fillNamespaces: ['sessions'], terminate: false },
      query: { name: 'replace-n3-direct' },
    });
    expect(direct.statusCode).toBe(202);
    expect(workflows.started).toEqual([
      { workflow: 'replace-node', input: { nodeId: 'n3', fillNamespaces: ['sessions'], terminate: false }, name: 'replace-n3' },
      {
        workflow: 'replace-node',
        input: { nodeId: 'n3', fillNamespaces: ['sessions'], terminate: false },
        name: 'replace-n3-direct',
      },
    ]);
  });

  it('takes no body at all (every option has its default)', async () => {
    expect((await replace('n3')).statusCode).toBe(202);
    expect(workflows.started).toEqual([{ workflow: 'replace-node', input: { nodeId: 'n3' } }]);
  });

  it('refuses bad options with 400 before anything starts, here and on the workflow route', async () => {
    const cases: [unknown, string][] = [
      [{ rateBytesPerSec: 5 }, 'body.rateBytesPerSec'],
      [{ fillNamespaces: 'sessions' }, 'body.fillNamespaces'],
      [{ fillMaxMs: 1.5 }, 'body.fillMaxMs'],
      [{ terminate: 'no' }, 'body.terminate'],
      [{ fill: ['typo'] }, 'body'],
      [{ nodeId: 'n2' }, 'body.nodeId'],
      [['n3'], 'body'],
    ];
    for (const [input, field] of cases) {
      const res = await replace('n3', { body: input });
      expect([input, res.statusCode, errorOf(res).details?.field]).toEqual([input, 400, field]);
    }
    // The workflow route checks replace-node's input with the same schema: no execution for a bad one either.
    for (const [input, field] of [
      [{}, 'body.nodeId'],
      [{ nodeId: 'bad id' }, 'body.nodeId'],
      [{ nodeId: 'n3', rateBytesPerSec: 5 }, 'body.rateBytesPerSec'],
      [{ nodeId: 'n3', fillNamespaces: Array.from({ length: 101 }, (_, i) => `ns${i}`) }, 'body.fillNamespaces'],
    ] as const) {
      const res = await startWorkflow('replace-node', { body: input });
      expect([input, res.statusCode, errorOf(res).details?.field]).toEqual([input, 400, field]);
    }
    const badName = await replace('n3', { query: { name: 'a b' } });
    expect([badName.statusCode, errorOf(badName).details?.field]).toEqual([400, 'name']);
    expect(workflows.started).toEqual([]);
  });

  it('needs only the workflows (not the warm tier): 503 WORKFLOWS_UNAVAILABLE without them', async () => {
    useContext({ nodeAdmin: null });
    expect((await replace('n3')).statusCode).toBe(202);
    const log = captureLog();
    try {
      useContext({ workflows: null });
      const res = await replace('n3');
      expect([res.statusCode, errorOf(res).code]).toEqual([503, 'WORKFLOWS_UNAVAILABLE']);
    } finally {
      log.restore();
    }
  });
});

describe('GET and PUT /v1/admin/nodes/replacement', () => {
  it('reads "not paused" before anything was set; pauses with a reason, resumes; the health check reads the same switch', async () => {
    expect(body(await getControls())).toEqual({ paused: false });
    const paused = await putControls({ paused: true, reason: 'network incident INC-42' });
    expect(paused.statusCode).toBe(200);
    expect(body<ReplacementControlsWire>(paused)).toEqual({
      paused: true,
      reason: 'network incident INC-42',
      at: expect.any(String),
    });
    expect(body(await getControls())).toEqual(body(paused));
    // What the health checkers read (core/nodes/health-check.ts `controls`).
    expect(await new HealthControls(cas).get()).toMatchObject({ paused: true, reason: 'network incident INC-42' });
    expect(body<NodeListWire>(await list()).replacement).toEqual(body(paused));

    const resumed = body<ReplacementControlsWire>(await putControls({ paused: false }));
    expect(resumed).toEqual({ paused: false, at: expect.any(String) });
    expect(Date.parse(resumed.at!)).toBeGreaterThanOrEqual(Date.parse(body<ReplacementControlsWire>(paused).at!));
    expect((await new HealthControls(cas).get()).paused).toBe(false);
  });

  it('refuses a body that is not { paused, reason? } with 400 and changes nothing', async () => {
    for (const [input, field] of [
      [{}, 'body.paused'],
      [{ paused: 'yes' }, 'body.paused'],
      [{ paused: true, reason: 'x'.repeat(201) }, 'body.reason'],
      [{ paused: true, by: 'me' }, 'body'],
    ] as const) {
      const res = await putControls(input);
      expect([input, res.statusCode, errorOf(res).details?.field]).toEqual([input, 400, field]);
    }
    expect((await putControls(undefined, { raw: '{"paused":' })).statusCode).toBe(400);
    expect(body(await getControls())).toEqual({ paused: false });
  });
});

describe('node routes without a warm tier', () => {
  let log: CapturedLog;
  beforeAll(() => {
    log = captureLog();
  });
  afterAll(() => log.restore());

  it('answer 503 TIER_UNAVAILABLE, permanent, saying what the runtime lacks', async () => {
    useContext({ nodeAdmin: null });
    for (const res of [await list(), await remove('n3'), await getControls(), await putControls({ paused: true })]) {
      expect(res.statusCode).toBe(503);
      expect(errorOf(res)).toMatchObject({
        code: 'TIER_UNAVAILABLE',
        message: expect.stringContaining('this runtime has no warm tier'),
        details: { tier: 'warm', permanent: true },
      });
      expect(res.headers?.['retry-after']).toBeUndefined();
    }
  });

  it('are wired by the composition root where the runtime has a warm tier (STRATA_WARM_RING_DIR)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-nodes-ring-'));
    let built: BuiltContext | undefined;
    try {
      await new RingStore(new FileCasStore(dir)).create(initialRing([{ id: 'w1', url: url('w1') }]));
      built = buildApiContext(loadRuntimeEnv({ STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET: 'test-secret-0123456789' }), {
        warmTier: warmTierFromEnv,
        flushTimer: false,
      });
      expect(built.nodeAdmin).toBeDefined();
      setApiContext(built);
      const got = body<NodeListWire>(await list());
      expect([got.ringVersion, got.nodes.map((n) => n.id)]).toEqual([1, ['w1']]);
      expect(body(await putControls({ paused: true }))).toMatchObject({ paused: true });
      expect((await new HealthControls(new FileCasStore(dir)).get()).paused).toBe(true);
      // Without a warm tier the context has none.
      expect(buildApiContext(loadRuntimeEnv({})).nodeAdmin).toBeUndefined();
    } finally {
      for (const t of built?.tiers ?? []) await t.close?.();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('node routes: tenant keys are refused like on the other admin routes', () => {
  const ACCESS = parseTenantAccess(
    JSON.stringify([
      { keyId: 'k-web', tenant: 'web', namespaces: ['*'] },
      { keyId: 'k-admin', tenant: 'ops', admin: true },
    ]),
  );
  const EVERY_ROUTE: [string, (o: Req) => Promise<ApiResult>][] = [
    ['GET /v1/admin/nodes', (o) => list(o)],
    ['POST /v1/admin/nodes/{node}/replace', (o) => replace('n3', { ...o, body: {} })],
    ['DELETE /v1/admin/nodes/{node}', (o) => remove('n3', o)],
    ['GET /v1/admin/nodes/replacement', (o) => getControls(o)],
    ['PUT /v1/admin/nodes/replacement', (o) => putControls({ paused: true, reason: 'intruder' }, o)],
  ];
  beforeEach(async () => {
    await markNodeDown('n3');
    useContext({ tenantAccess: ACCESS });
  });

  it('covers every node route of the table', () => {
    const routes = API_ROUTES.filter((r) => r.resource.startsWith(NODES)).map((r) => `${r.method} ${r.resource}`);
    expect(routes.sort()).toEqual(EVERY_ROUTE.map(([name]) => name).sort());
  });

  it.each(EVERY_ROUTE)(
    '%s: 403 NAMESPACE_FORBIDDEN to a tenant key, an unknown key and none; nothing is read or changed',
    async (_, send) => {
      const before = (await ring.load())!.version;
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
      expect(workflows.started).toEqual([]);
      expect(nodes.calls).toEqual([]);
      expect((await ring.load())!.version).toBe(before);
      expect(await new HealthControls(cas).get()).toEqual({ paused: false });
    },
  );

  it.each(EVERY_ROUTE)('%s: served to the admin key', async (_, send) => {
    const res = await send({ identity: { apiKeyId: 'k-admin' } });
    expect([200, 202]).toContain(res.statusCode);
  });

  it("records the admin key's tenant, or the IAM principal, as who set the replacement controls", async () => {
    const byKey = body<ReplacementControlsWire>(await putControls({ paused: true }, { identity: { apiKeyId: 'k-admin' } }));
    expect(byKey).toMatchObject({ paused: true, by: 'ops' });
    const userArn = 'arn:aws:iam::123456789012:role/ops';
    const byIam = body<ReplacementControlsWire>(await putControls({ paused: false }, { identity: { userArn } }));
    expect(byIam).toMatchObject({ paused: false, by: userArn });
    expect((await new HealthControls(cas).get()).by).toBe(userArn);
  });
});

describe('node routes in the route table and the OpenAPI document', () => {
  const doc = openApiDocument(API_ROUTES) as {
    paths: Record<string, Record<string, { operationId: string; parameters: unknown[] }>>;
  };

  it('serves them from the admin function, admin-only, with the `replacement` routes before the `{node}` ones', () => {
    const routes = API_ROUTES.filter((r) => r.resource.startsWith(NODES));
    expect(routes.every((r) => r.fn === 'admin' && r.auth === 'admin')).toBe(true);
    const index = (resource: string) => API_ROUTES.findIndex((r) => r.resource === resource);
    expect(index(CONTROLS)).toBeLessThan(index(NODE));
    expect(index(CONTROLS)).toBeLessThan(index(REPLACE));
  });

  it('documents each, with the node parameter refusing `replacement`', () => {
    expect(doc.paths[NODES]!.get!.operationId).toBe('listNodes');
    expect(doc.paths[NODE]!.delete!.operationId).toBe('removeNode');
    expect(doc.paths[REPLACE]!.post!.operationId).toBe('replaceNode');
    expect(doc.paths[CONTROLS]!.get!.operationId).toBe('getReplacementControls');
    expect(doc.paths[CONTROLS]!.put!.operationId).toBe('putReplacementControls');
    expect(doc.paths[NODE]!.delete!.parameters).toContainEqual(
      expect.objectContaining({ name: 'node', in: 'path', schema: expect.objectContaining({ not: { enum: ['replacement'] } }) }),
    );
  });
});
