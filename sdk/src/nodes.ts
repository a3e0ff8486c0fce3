/**
 * The admin API's cache nodes (`/v1/admin/nodes...`): list the warm tier's nodes as the ring has them, replace a DOWN
 * node (the `replace-node` workflow), remove a DOWN node without a replacement, pause or resume automatic
 * replacement, and roll a new node version out (`/v1/admin/fleet/upgrade`, the `rolling-upgrade` workflow).
 * Reached as {@link StrataClient.nodes}.
 */
import { invalid, isObject, optionError, readBody, subClientRequest, type SubClientTransport } from './json.js';
import { requestIdOf } from './transport.js';
import { parseExecution, type ReplaceNodeInput, type RollingUpgradeInput, type WorkflowExecution } from './workflows.js';
import {
  CACHE_NODE_STATES,
  type CacheNodeState,
  type CacheNodeWire,
  type NodeListWire,
  type NodeRemovalWire,
  type ReplacementControlsWire,
} from './contract.js';

// Written once in contract.ts, shared with the server. Handed on as they arrive: times stay ISO-8601 strings.
export type { CacheNodeState };
/** One cache node: id, url, state (`down`: when it was marked DOWN and why), where it runs, and the ranges it owns. */
export type CacheNode = CacheNodeWire;
/** The ring's nodes, its version (`null` before there is a ring), and the replacement controls. */
export type NodeList = NodeListWire;
/** Whether automatic replacement is paused, by whom, when and why. */
export type ReplacementControls = ReplacementControlsWire;
/** What a removal did: the ring version without the node, and who took each of its ranges. */
export type NodeRemoval = NodeRemovalWire;
/** The options of a replacement: {@link ReplaceNodeInput} without the node, which is the first argument. */
export type ReplaceNodeOptions = Omit<ReplaceNodeInput, 'nodeId'>;

/** The options of a rolling upgrade (every field optional): {@link RollingUpgradeInput}. */
export type UpgradeOptions = RollingUpgradeInput;

/** Per-call options of the node methods. */
export interface NodeRequestOptions {
  /** Cancels the call; it then rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout of each HTTP request; overrides the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
}

/** Options of {@link NodesClient.replace} and {@link NodesClient.upgrade}. */
export interface NodeReplaceRequestOptions extends NodeRequestOptions {
  /** The execution's name (1-80 of `A-Z a-z 0-9 _ -`); a second start with the same name fails with `ExecutionExistsError`. Default: generated. */
  name?: string | undefined;
}

/** What the client needs from {@link StrataClient}. @internal */
export type NodesTransport = SubClientTransport;

const NODE_ID = /^[A-Za-z0-9_.:-]{1,64}$/;
const EXECUTION_NAME = /^[A-Za-z0-9_-]{1,80}$/;
const STATES: ReadonlySet<string> = new Set(CACHE_NODE_STATES);
/** The server's limit on a reason (code points). */
const MAX_REASON = 200;

function checkNodeId(nodeId: unknown): string {
  if (typeof nodeId !== 'string' || !NODE_ID.test(nodeId))
    throw optionError('nodeId', 'node ids are 1-64 characters of A-Z a-z 0-9 _ . : - (as client.nodes.list() shows them)');
  // `replacement` is the controls' path; `.` and `..` are removed from URLs by every URL parser.
  if (nodeId === 'replacement' || nodeId === '.' || nodeId === '..')
    throw optionError('nodeId', `'${nodeId}' cannot be addressed as a node through the API`);
  return nodeId;
}

function checkReason(reason: unknown): string {
  if (typeof reason !== 'string') throw optionError('reason', 'must be a string');
  const length = [...reason].length;
  if (length > MAX_REASON) throw optionError('reason', `must be at most ${MAX_REASON} characters (${length})`);
  return reason;
}

function parseControls(body: unknown, status: number, requestId: string | undefined): ReplacementControls {
  if (!isObject(body) || typeof body.paused !== 'boolean')
    throw invalid(
      status,
      `expected the replacement controls from the server, got: ${JSON.stringify(body).slice(0, 200)}`,
      requestId,
    );
  return body as unknown as ReplacementControls;
}

function parseNode(n: unknown, status: number, requestId: string | undefined): CacheNode {
  if (
    !isObject(n) ||
    typeof n.id !== 'string' ||
    typeof n.url !== 'string' ||
    typeof n.state !== 'string' ||
    !STATES.has(n.state) ||
    typeof n.ranges !== 'number'
  )
    throw invalid(status, `expected a cache node, got: ${JSON.stringify(n).slice(0, 200)}`, requestId);
  return n as unknown as CacheNode;
}

function parseList(body: unknown, status: number, requestId: string | undefined): NodeList {
  if (!isObject(body) || !Array.isArray(body.nodes) || !(body.ringVersion === null || typeof body.ringVersion === 'number'))
    throw invalid(status, 'expected { ringVersion, nodes: [...], replacement } from the server', requestId);
  return {
    ringVersion: body.ringVersion,
    nodes: body.nodes.map((n) => parseNode(n, status, requestId)),
    replacement: parseControls(body.replacement, status, requestId),
  };
}

function parseRemoval(body: unknown, status: number, requestId: string | undefined): NodeRemoval {
  if (!isObject(body) || typeof body.ringVersion !== 'number' || !Array.isArray(body.moved))
    throw invalid(
      status,
      `expected { ringVersion, moved } from the server, got: ${JSON.stringify(body).slice(0, 200)}`,
      requestId,
    );
  return body as unknown as NodeRemoval;
}

/**
 * The operators' switch over automatic node replacement (`/v1/admin/nodes/replacement`): while paused, the health
 * check probes and reports but marks no node DOWN, so nothing is replaced. Reached as `client.nodes.replacement`.
 */
export class ReplacementControlsClient {
  /** @internal */
  constructor(private readonly t: NodesTransport) {}

  /**
   * The switch as it is (`GET /v1/admin/nodes/replacement`); `at` is absent when it was never set.
   *
   * @example
   * ```ts
   * const c = await strata.nodes.replacement.get();
   * if (c.paused) console.log(`paused by ${c.by ?? 'someone'} at ${c.at}: ${c.reason ?? 'no reason given'}`);
   * ```
   */
  async get(opts: NodeRequestOptions = {}): Promise<ReplacementControls> {
    const url = `${this.t.endpoint}/v1/admin/nodes/replacement`;
    return this.t.transport.send(subClientRequest(this.t, 'GET', url, opts, 'idempotent'), async (res) =>
      parseControls(await readBody(res), res.status, requestIdOf(res)),
    );
  }

  /**
   * Pauses automatic replacement for every health checker at once (`PUT /v1/admin/nodes/replacement`), e.g. during
   * a network incident or planned maintenance; `reason` (at most 200 characters) is recorded with the caller's name.
   *
   * @example
   * ```ts
   * await strata.nodes.replacement.pause('AZ network incident, INC-4211');
   * ```
   */
  async pause(reason?: string, opts: NodeRequestOptions = {}): Promise<ReplacementControls> {
    return this.set({ paused: true, ...(reason !== undefined ? { reason: checkReason(reason) } : {}) }, opts);
  }

  /**
   * Resumes automatic replacement.
   *
   * @example
   * ```ts
   * await strata.nodes.replacement.resume();
   * ```
   */
  async resume(opts: NodeRequestOptions = {}): Promise<ReplacementControls> {
    return this.set({ paused: false }, opts);
  }

  private async set(body: { paused: boolean; reason?: string }, opts: NodeRequestOptions): Promise<ReplacementControls> {
    const url = `${this.t.endpoint}/v1/admin/nodes/replacement`;
    // Setting the same switch twice leaves it as once: retried like a read.
    return this.t.transport.send(subClientRequest(this.t, 'PUT', url, opts, 'idempotent', body), async (res) =>
      parseControls(await readBody(res), res.status, requestIdOf(res)),
    );
  }
}

/**
 * The warm tier's cache nodes. These routes are for operators: in AWS they need an admin API key (or identity), not
 * a tenant's. A runtime without a warm tier answers `UnavailableError` (503 `TIER_UNAVAILABLE`, `err.permanent`).
 *
 * @example
 * ```ts
 * const admin = new StrataClient({ endpoint: 'http://localhost:8080', apiKey: process.env.STRATA_ADMIN_API_KEY });
 * const { nodes } = await admin.nodes.list();
 * for (const n of nodes.filter((x) => x.state === 'DOWN')) {
 *   const run = await admin.nodes.replace(n.id, { fillNamespaces: ['sessions'] });
 *   await admin.workflows.wait(run.execution);
 * }
 * ```
 */
export class NodesClient {
  /** Pause, resume or read the switch over automatic replacement. */
  readonly replacement: ReplacementControlsClient;

  /** @internal */
  constructor(private readonly t: NodesTransport) {
    this.replacement = new ReplacementControlsClient(t);
  }

  /**
   * The ring's nodes (`GET /v1/admin/nodes`): each with its state (DOWN ones with `down.at` and `down.reason`), url,
   * AZ, instance and the ranges it owns; the ring's version; and the replacement controls.
   *
   * @throws {UnavailableError} (permanent) where the runtime has no warm tier.
   * @example
   * ```ts
   * const { ringVersion, nodes, replacement } = await strata.nodes.list();
   * for (const n of nodes) console.log(n.id, n.state, n.ranges, n.down?.reason ?? '');
   * ```
   */
  async list(opts: NodeRequestOptions = {}): Promise<NodeList> {
    const url = `${this.t.endpoint}/v1/admin/nodes`;
    return this.t.transport.send(subClientRequest(this.t, 'GET', url, opts, 'idempotent'), async (res) =>
      parseList(await readBody(res), res.status, requestIdOf(res)),
    );
  }

  /**
   * Replaces a DOWN node (`POST /v1/admin/nodes/{node}/replace`): starts the `replace-node` workflow for it and
   * resolves the execution (status `RUNNING`); follow it with `client.workflows.wait(execution)`. The same as
   * `workflows.start('replace-node', { nodeId, ...input })`. Not retried after an ambiguous failure (it could start a
   * second execution): name the execution to make a retry safe.
   *
   * @throws {ValidationError} for a bad node id or options the server rejects (`err.field` names it).
   * @throws {ExecutionExistsError} when `opts.name` is taken.
   * @throws {WorkflowsUnavailableError} when the deployment has no workflows configured.
   * @example
   * ```ts
   * const run = await strata.nodes.replace('n3', { fillNamespaces: ['sessions'], rateBytesPerSec: 16 << 20 }, { name: 'replace-n3' });
   * const done = await strata.workflows.wait(run.execution);
   * ```
   */
  async replace(
    nodeId: string,
    input: ReplaceNodeOptions = {},
    opts: NodeReplaceRequestOptions = {},
  ): Promise<WorkflowExecution> {
    const id = checkNodeId(nodeId);
    if (!isObject(input)) throw optionError('input', "must be an object (the replacement's options)");
    if ('nodeId' in input) throw optionError('input.nodeId', 'the node to replace is the first argument; leave nodeId out');
    const url = `${this.t.endpoint}/v1/admin/nodes/${encodeURIComponent(id)}/replace${nameQuery(opts.name)}`;
    return this.t.transport.send(subClientRequest(this.t, 'POST', url, opts, 'conditional', input), async (res) =>
      parseExecution(await readBody(res), res.status),
    );
  }

  /**
   * Rolls a new cache-node version out (`POST /v1/admin/fleet/upgrade`): starts the `rolling-upgrade` workflow, which
   * replaces running nodes one at a time with nodes launched now (on AWS from the launch template's `$Latest` version:
   * create the new version first), each handing all its ranges over under load before it is terminated, and resolves
   * the execution (status `RUNNING`); follow it with `client.workflows.wait(execution)`. The same as
   * `workflows.start('rolling-upgrade', input)`. A failure rolls back the node being replaced and stops; starting it
   * again without `nodes` continues with the nodes not yet replaced. Not retried after an ambiguous failure (it could
   * start a second execution, which the workflow refuses while one runs): name the execution to make a retry safe.
   *
   * @throws {ValidationError} for options the server rejects (`err.field` names it).
   * @throws {ExecutionExistsError} when `opts.name` is taken.
   * @throws {WorkflowsUnavailableError} when the deployment has no workflows configured.
   * @example
   * ```ts
   * const run = await strata.nodes.upgrade({ reason: 'cache node 1.4.2' }, { name: 'upgrade-1-4-2' });
   * const done = await strata.workflows.wait(run.execution);
   * ```
   */
  async upgrade(input: UpgradeOptions = {}, opts: NodeReplaceRequestOptions = {}): Promise<WorkflowExecution> {
    if (!isObject(input)) throw optionError('input', "must be an object (the upgrade's options)");
    if (input.nodes !== undefined && input.nodes !== null) {
      if (!Array.isArray(input.nodes) || input.nodes.length === 0)
        throw optionError('input.nodes', 'must be a non-empty array of node ids, or left out (every NORMAL node)');
      input.nodes.forEach((n) => checkNodeId(n));
    }
    const url = `${this.t.endpoint}/v1/admin/fleet/upgrade${nameQuery(opts.name)}`;
    return this.t.transport.send(subClientRequest(this.t, 'POST', url, opts, 'conditional', input), async (res) =>
      parseExecution(await readBody(res), res.status),
    );
  }

  /**
   * Removes a DOWN node without a replacement (`DELETE /v1/admin/nodes/{node}`): its ranges go, empty, to the next
   * NORMAL node clockwise and fill by read-through. Not retried after an ambiguous failure (a repeat of a removal
   * that went through would answer `NotFoundError`): list the nodes to find out.
   *
   * @throws {NotFoundError} when the node is not in the ring.
   * @throws {VersionConflictError} when it is not DOWN, a migration involves it, or no NORMAL node is left
   * (`err.details.state` is its state).
   * @throws {UnavailableError} when a node that is to take its ranges could not be reached (the ring is unchanged),
   * or (permanent) where the runtime has no warm tier.
   * @example
   * ```ts
   * const { ringVersion, moved } = await strata.nodes.remove('n3');
   * for (const m of moved) console.log(`${m.start}..${m.end ?? 'end'} -> ${m.to}`);
   * ```
   */
  async remove(nodeId: string, opts: NodeRequestOptions = {}): Promise<NodeRemoval> {
    const url = `${this.t.endpoint}/v1/admin/nodes/${encodeURIComponent(checkNodeId(nodeId))}`;
    return this.t.transport.send(subClientRequest(this.t, 'DELETE', url, opts, 'conditional'), async (res) =>
      parseRemoval(await readBody(res), res.status, requestIdOf(res)),
    );
  }
}

/** `?name=<execution name>`, or nothing when no name is given. */
function nameQuery(name: string | undefined): string {
  if (name === undefined) return '';
  if (typeof name !== 'string' || !EXECUTION_NAME.test(name))
    throw optionError('name', 'execution names are 1-80 characters of A-Z, a-z, 0-9, "_" and "-"');
  return `?name=${encodeURIComponent(name)}`;
}
