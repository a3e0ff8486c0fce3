import * as z from 'zod';
import { NotFoundError, permanentDetails, StrataError, ValidationError } from '../errors.js';
import type { HealthControls, HealthControlsDocument } from '../nodes/health-controls.js';
import type { NodeClient } from '../nodes/node-client.js';
import { NodeRequestError, NodeUnavailableError } from '../nodes/node-client-errors.js';
import { removeDownNode } from '../nodes/node-removal.js';
import { findNode, RingDocumentError, type RingDocument, type RingNode } from '../ring/document.js';
import { CasConflictError, RingPreconditionError, type RingStore } from '../ring/store.js';
import { replaceNodeRequest } from '../workflows/steps/replace-steps.js';
import { rollingUpgradeRequest } from '../workflows/steps/upgrade-steps.js';
import type { CacheNodeWire, NodeListWire, NodeRemovalWire, ReplacementControlsWire } from '../../sdk/src/contract.js';
import { startWorkflow } from './admin-operations.js';
import type { ApiEvent, ApiResult } from './http.js';
import { json } from './http.js';
import type { ApiContext } from './operations.js';
import { reasonSchema } from './policy-operations.js';
import { adminCaller } from './tenant-access.js';
import { jsonBody } from './validation.js';

/**
 * The admin API's routes for the warm tier's cache nodes (`/v1/admin/nodes...`): list the ring's nodes, replace a
 * DOWN node (the `replace-node` workflow), remove a DOWN node without a replacement, and the operators' switch over
 * automatic replacement. They run against `ctx.nodeAdmin` (the ring store and a node client with the fleet secret,
 * built by the composition root where the runtime has a warm tier), else answer 503 `TIER_UNAVAILABLE` (permanent).
 * Replacing goes through the workflows like `POST /v1/admin/workflows/replace-node/executions`. Admin-only like the
 * workflow routes (`auth: 'admin'` in routes.ts).
 */

/** What the node routes need from the runtime: the ring and the documents beside it, and the nodes themselves. */
export interface NodeAdmin {
  /** The ring document's compare-and-set store. */
  readonly ring: RingStore;
  /** The operators' switch over automatic replacement (`health/controls` beside the ring). */
  readonly controls: Pick<HealthControls, 'get' | 'set'>;
  /**
   * Calls the cache nodes (the fleet secret): a removal clears what the receivers hold in the spans they take.
   * Absent where the runtime reaches no node (the deployed admin function, outside the VPC): removals are refused.
   */
  readonly nodes?: NodeClient;
}

/** Node ids as the ring document takes them (core/ring/document.ts). */
export const NODE_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * The one id the `{node}` routes refuse: `/v1/admin/nodes/replacement` is the replacement controls, so a node of
 * that name could not be told from them (API Gateway routes the literal path to the controls).
 */
export const RESERVED_NODE_ID = 'replacement';

function nodeAdmin(ctx: ApiContext): NodeAdmin {
  if (ctx.nodeAdmin) return ctx.nodeAdmin;
  // Permanent: whether a runtime has the warm tier is a matter of its configuration, not of the moment.
  throw new StrataError(
    'TIER_UNAVAILABLE',
    'this runtime has no warm tier, so the node routes cannot reach the ring: they need the ring store ' +
      '(STRATA_WARM_RING_BUCKET, or STRATA_WARM_RING_DIR locally) and the fleet secret; locally, start the server with ' +
      'cache nodes: STRATA_LOCAL_NODES=3 npm start',
    permanentDetails({ tier: 'warm' }),
  );
}

/** The `{node}` path parameter: a node id, not the reserved `replacement`. */
function nodeParam(event: ApiEvent): string {
  const id = event.pathParameters?.node ?? '';
  if (!NODE_ID_PATTERN.test(id))
    throw new ValidationError('node', 'node ids are 1-64 characters of A-Z a-z 0-9 _ . : -', { value: id.slice(0, 100) });
  if (id === RESERVED_NODE_ID) {
    throw new ValidationError(
      'node',
      `'${RESERVED_NODE_ID}' is not a node id here: /v1/admin/nodes/${RESERVED_NODE_ID} is the replacement controls ` +
        '(GET reads them, PUT pauses or resumes automatic replacement)',
      { value: id },
    );
  }
  return id;
}

/**
 * Runs a ring store call: a document changed by others on every attempt is a 409 (try again), any other failure of
 * the store a 503 TIER_UNAVAILABLE (retried by clients); typed errors and refusals of the ring pass as they are.
 */
async function store<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof StrataError || e instanceof RingDocumentError) throw e;
    if (e instanceof CasConflictError)
      throw new StrataError('VERSION_CONFLICT', `${what}: the document kept changing under other writers; try again`);
    throw new StrataError(
      'TIER_UNAVAILABLE',
      `${what}: the ring store could not be reached; try again`,
      { tier: 'warm' },
      { cause: e },
    );
  }
}

function notInRing(id: string, doc: RingDocument | undefined): NotFoundError {
  const where = doc ? `ring version ${doc.version}` : 'the ring (there is no ring yet)';
  return new NotFoundError(`node '${id}' is not in ${where}; GET /v1/admin/nodes lists the nodes`, {
    node: id,
    ...(doc ? { ringVersion: doc.version } : {}),
  });
}

function nodeView(doc: RingDocument, n: RingNode): CacheNodeWire {
  return {
    id: n.id,
    url: n.url,
    state: n.state,
    ...(n.az !== undefined ? { az: n.az } : {}),
    ...(n.instance !== undefined ? { instance: n.instance } : {}),
    addedAt: n.addedAt,
    ...(n.down ? { down: { at: new Date(n.down.at).toISOString(), reason: n.down.reason } } : {}),
    ranges: doc.ranges.filter((r) => r.owner === n.id).length,
  };
}

/** The stored switch as the API answers it: the contract's fields, nothing else the document may hold. */
function controlsView(c: HealthControlsDocument): ReplacementControlsWire {
  return {
    paused: c.paused === true,
    ...(typeof c.by === 'string' ? { by: c.by } : {}),
    ...(typeof c.reason === 'string' ? { reason: c.reason } : {}),
    ...(typeof c.at === 'string' ? { at: c.at } : {}),
  };
}

/** `GET /v1/admin/nodes`: the ring's nodes with the ranges each owns, the ring's version, the replacement controls. */
export async function listNodes(ctx: ApiContext): Promise<ApiResult> {
  const admin = nodeAdmin(ctx);
  const [doc, controls] = await store('reading the ring and the replacement controls', () =>
    Promise.all([admin.ring.load(), admin.controls.get()]),
  );
  const body: NodeListWire = {
    ringVersion: doc?.version ?? null,
    nodes: doc ? doc.nodes.map((n) => nodeView(doc, n)) : [],
    replacement: controlsView(controls),
  };
  return json(200, body);
}

/** The body of `POST /v1/admin/nodes/{node}/replace`: the replacement's options (the node comes from the path). */
export const replaceNodeBodySchema = replaceNodeRequest.omit({ nodeId: true });

/**
 * `POST /v1/admin/nodes/{node}/replace`: starts the `replace-node` workflow for the node, as
 * `POST /v1/admin/workflows/replace-node/executions` with `{ "nodeId": node, ...body }` does (same checks, same
 * `?name=`, same 202 with the execution summary); `location` is the execution's URL.
 */
export async function replaceNode(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const node = nodeParam(event);
  const body = jsonBody(
    event,
    z.record(z.string(), z.unknown(), { error: "the body must be a JSON object (the replacement's options), or empty" }),
    { optional: true },
  );
  if ('nodeId' in body) {
    throw new ValidationError(
      'body.nodeId',
      `the node to replace is the one in the path ('${node}'); leave nodeId out of the body`,
    );
  }
  const summary = await startWorkflow(ctx, 'replace-node', { nodeId: node, ...body }, event.queryStringParameters?.name);
  // Relative to the request's URL (/v1/admin/nodes/{node}/replace), like the workflow start route's.
  return json(202, summary, { location: `../../workflows/executions/${summary.execution}` });
}

/** The body of `POST /v1/admin/fleet/upgrade`: the rolling upgrade's input, every field optional. */
export const upgradeFleetBodySchema = rollingUpgradeRequest;

/**
 * `POST /v1/admin/fleet/upgrade`: starts the `rolling-upgrade` workflow (every running cache node replaced, one at a
 * time, by a node launched from the launch template as it is now), as `POST /v1/admin/workflows/rolling-upgrade/
 * executions` with the body does (same checks, same `?name=`, same 202 with the execution summary); `location` is the
 * execution's URL. Under `/fleet`, not `/nodes`: there every other path segment is a node id (`{node}`), and a node
 * named `upgrade` could then not be addressed.
 */
export async function upgradeFleet(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const body = jsonBody(
    event,
    z.record(z.string(), z.unknown(), { error: "the body must be a JSON object (the upgrade's options), or empty" }),
    { optional: true },
  );
  const summary = await startWorkflow(ctx, 'rolling-upgrade', body, event.queryStringParameters?.name);
  // Relative to the request's URL (/v1/admin/fleet/upgrade), like the workflow start route's.
  return json(202, summary, { location: `../workflows/executions/${summary.execution}` });
}

/**
 * `DELETE /v1/admin/nodes/{node}`: removes a DOWN node without a replacement; its ranges go to the next NORMAL node
 * clockwise (removeDownNode). 200 `{ ringVersion, moved }`; 404 when the node is not in the ring; 409
 * VERSION_CONFLICT (the ring's own message) when it is not DOWN or a migration involves it.
 */
export async function removeNode(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const id = nodeParam(event);
  const admin = nodeAdmin(ctx);
  const doc = await store('reading the ring', () => admin.ring.load());
  if (!doc || !findNode(doc, id)) throw notInRing(id, doc);
  const nodes = admin.nodes;
  // Permanent, like a runtime without the warm tier: it is where this runtime runs, not the moment.
  if (!nodes)
    throw new StrataError(
      'TIER_UNAVAILABLE',
      `node '${id}' was not removed: a removal first clears what the receiving cache nodes hold in its spans, and ` +
        'this runtime reaches no cache node (the deployed admin function runs outside the VPC). Replace the node ' +
        `instead (POST /v1/admin/nodes/${id}/replace, strata node replace ${id}), which needs no node to answer`,
      permanentDetails({ tier: 'warm', node: id }),
    );
  let removed: NodeRemovalWire;
  try {
    removed = await removeDownNode({ ring: admin.ring, nodes }, id);
  } catch (e) {
    if (e instanceof RingDocumentError) {
      // Refused by the ring: gone meanwhile (another removal, a replacement) is a 404, anything else a conflict.
      const now = await store('reading the ring', () => admin.ring.load());
      const node = now && findNode(now, id);
      if (!now || !node) throw notInRing(id, now);
      throw new StrataError('VERSION_CONFLICT', e.message, { node: id, state: node.state, ringVersion: now.version });
    }
    if (e instanceof NodeUnavailableError || e instanceof NodeRequestError) {
      throw new StrataError(
        'TIER_UNAVAILABLE',
        `node '${id}' was not removed: a cache node that is to take its ranges did not clear them first ` +
          `(${e.message}); the ring is unchanged, try again`,
        { tier: 'warm', node: id },
        { cause: e },
      );
    }
    // removeDownNode gives up (RingPreconditionError) when the ring moved on between its plan and its edit, four
    // times; the store does when its compare-and-set lost every attempt.
    if (e instanceof CasConflictError || e instanceof RingPreconditionError)
      throw new StrataError('VERSION_CONFLICT', `node '${id}' was not removed: the ring kept changing; try again`, { node: id });
    throw e;
  }
  const body: NodeRemovalWire = {
    ringVersion: removed.ringVersion,
    moved: removed.moved.map((m) => ({ start: m.start, end: m.end, to: m.to })),
  };
  return json(200, body);
}

/** `GET /v1/admin/nodes/replacement`: whether automatic replacement is paused, by whom, when and why. */
export async function getReplacementControls(ctx: ApiContext): Promise<ApiResult> {
  const admin = nodeAdmin(ctx);
  return json(200, controlsView(await store('reading the replacement controls', () => admin.controls.get())));
}

export const replacementControlsBodySchema = z.strictObject({
  /** true: the health check marks no node DOWN (so nothing is replaced) until resumed. */
  paused: z.boolean({ error: 'paused must be true (pause automatic replacement) or false (resume it)' }),
  /** Why, recorded with the switch. */
  reason: reasonSchema.optional(),
});

/**
 * `PUT /v1/admin/nodes/replacement`: body `{ "paused": boolean, "reason"? }` pauses or resumes automatic replacement
 * for every health checker at once; the caller's name (admin key's tenant, IAM principal) is recorded as `by`.
 */
export async function putReplacementControls(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const body = jsonBody(event, replacementControlsBodySchema);
  const admin = nodeAdmin(ctx);
  const by = adminCaller(ctx.tenantAccess, event);
  const reason = body.reason?.trim();
  const set = await store('changing the replacement controls', () =>
    admin.controls.set(body.paused, { ...(by !== undefined ? { by } : {}), ...(reason ? { reason } : {}) }),
  );
  return json(200, controlsView(set));
}
