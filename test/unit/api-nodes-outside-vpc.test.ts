/**
 * The node admin routes as the deployed admin function serves them: outside the VPC, with the ring store
 * (STRATA_NODE_ADMIN_RING_BUCKET) and no cache node in reach. Listing, the replacement switch and a replacement work
 * from the store and the workflows; a removal, which must first clear what the receiving nodes hold, is refused
 * with what to do instead. In-process admin handler and route table over an in-memory ring store; the workflows are
 * a recording stand-in (Step Functions is AWS's).
 */
import type { Context } from 'aws-lambda';
import { handler } from '../../lambdas/api/admin.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { buildApiContext, setApiContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { HealthControls } from '../../core/nodes/health-controls.js';
import { initialRing, markDown } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { ExecutionSummary, WorkflowService } from '../../core/workflows/admin-service.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { captureLog } from '../helpers/log-capture.js';

const ctx = { awsRequestId: 'req-nodes-outside-vpc' } as Context;

function event(method: string, resource: string, path: string, params: Record<string, string> | null): ApiEvent {
  return {
    httpMethod: method,
    resource,
    path,
    pathParameters: params,
    queryStringParameters: null,
    headers: {},
    body: null,
    isBase64Encoded: false,
    requestContext: { identity: {} },
  } as unknown as ApiEvent;
}
const call = async (e: ApiEvent): Promise<ApiResult> => (await handler(e, ctx)) as ApiResult;

const started: { workflow: WorkflowName; input: Record<string, unknown> }[] = [];
const workflows: WorkflowService = {
  async start(workflow, input, name): Promise<ExecutionSummary> {
    started.push({ workflow, input });
    return { execution: name ?? workflow, workflow, status: 'RUNNING', startedAt: '2026-11-26T12:00:00.000Z' };
  },
  describe: async () => undefined,
  list: async () => [],
};

describe('node routes in the admin function (ring store only, no cache node in reach)', () => {
  afterAll(() => setApiContext(undefined));

  it('are wired from STRATA_NODE_ADMIN_RING_BUCKET without a warm tier, and without a node client', () => {
    const built = buildApiContext(loadRuntimeEnv({ STRATA_NODE_ADMIN_RING_BUCKET: 'ring-bucket', AWS_REGION: 'us-east-1' }));
    expect(built.nodeAdmin).toBeDefined();
    expect(built.nodeAdmin!.nodes).toBeUndefined();
    expect(built.tiers.map((t) => t.name)).not.toContain('warm');
  });

  it('list and replace from the store, and refuse a removal (permanent 503) naming the replacement instead', async () => {
    const log = captureLog();
    try {
      const cas = new InMemoryCasStore();
      const ring = new RingStore(cas);
      await ring.create(
        initialRing(
          ['n1', 'n2', 'n3'].map((id) => ({ id, url: `http://127.0.0.1:9/${id}` })),
          2,
        ),
      );
      await ring.update((d, next) => markDown(d, 'n3', next, 'test'));
      setApiContext({
        coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
        inlineLimitBytes: 1024,
        urlTtlSeconds: 60,
        workflows,
        nodeAdmin: { ring, controls: new HealthControls(cas) },
      });
      const listed = await call(event('GET', '/v1/admin/nodes', '/v1/admin/nodes', null));
      expect(listed.statusCode).toBe(200);
      const replaced = await call(event('POST', '/v1/admin/nodes/{node}/replace', '/v1/admin/nodes/n3/replace', { node: 'n3' }));
      expect(replaced.statusCode).toBe(202);
      expect(started).toEqual([expect.objectContaining({ workflow: 'replace-node' })]);
      const before = (await ring.load())!.version;
      const removed = await call(event('DELETE', '/v1/admin/nodes/{node}', '/v1/admin/nodes/n3', { node: 'n3' }));
      expect(removed.statusCode).toBe(503);
      expect(JSON.parse(removed.body).error).toMatchObject({
        code: 'TIER_UNAVAILABLE',
        message: expect.stringMatching(/reaches no cache node.*strata node replace n3/),
        details: { tier: 'warm', node: 'n3', permanent: true },
      });
      expect((await ring.load())!.version).toBe(before);
    } finally {
      log.restore();
    }
  });
});
