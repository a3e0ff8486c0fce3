/**
 * The admin API's workflows (`/v1/admin/workflows/...`): start scale-out, scale-in, evict-to-s3, tier-migrate and
 * replace-node executions, follow their progress, list recent ones. Reached as {@link StrataClient.workflows}.
 */
import { NotFoundError, TimeoutError } from './errors.js';
import { invalid, isObject, optionError, readBody, type Json, type SubClientTransport } from './json.js';
import { missingOrThrow, requestIdOf, sleep, type HttpRequest, type RetryMode } from './transport.js';
import {
  WORKFLOW_EXECUTION_STATUSES,
  WORKFLOW_NAMES as NAMES,
  WORKFLOW_PROGRESS_UNITS as UNITS,
  type WorkflowExecutionStatus,
  type WorkflowName,
  type WorkflowProgressView,
} from './contract.js';

// Written once in contract.ts, shared with the server.
export type { WorkflowExecutionStatus, WorkflowName };

/** Every {@link WorkflowName}, in the API's order. */
export const WORKFLOW_NAMES: readonly WorkflowName[] = NAMES;

/**
 * What each workflow's progress counts (`progress.unit`, `total`, `done`): `sessions` (scale-out, scale-in), `nodes`
 * (evict-to-s3), `batches` (tier-migrate), `phases` (replace-node: launched, took over, filled).
 */
export const WORKFLOW_PROGRESS_UNITS: Readonly<Record<WorkflowName, string>> = UNITS;

/** How a scale workflow moves ranges: one migration session at a time, or all at once. */
export type ScaleMode = 'incremental' | 'parallel';

/** Input of the `scale-out` workflow: add a cache node and move ranges to it. */
export interface ScaleOutInput {
  /** Default `incremental`. */
  mode?: ScaleMode | undefined;
  /** The node whose fill triggered this; at most one scale-out per node runs at a time. */
  forNode?: string | undefined;
  /** Nodes to take ranges from (default: every NORMAL node). */
  sources?: string[] | undefined;
  /** Length of each streaming step, ms (100..600000, default 60000). */
  streamMaxMs?: number | undefined;
  /** Bytes per second asked of each source; 0 = the node's own cap. */
  rateBytesPerSec?: number | undefined;
  /** How long a source keeps a handed-over range, ms (default 60000). */
  graceMs?: number | undefined;
  /** How long the new node may take to become healthy, ms (default 900000). */
  launchTimeoutMs?: number | undefined;
  /** Why (recorded in the progress facts). */
  reason?: string | undefined;
}

/** Input of the `scale-in` workflow: move a node's ranges away and terminate it. */
export interface ScaleInInput {
  /** Default `incremental`. */
  mode?: ScaleMode | undefined;
  /** The node to remove (default: the least loaded of the AZ with the most nodes, so the fleet stays spread). */
  nodeId?: string | undefined;
  streamMaxMs?: number | undefined;
  rateBytesPerSec?: number | undefined;
  graceMs?: number | undefined;
}

/**
 * Input of the `replace-node` workflow: launch a new cache node in place of a DOWN one, hand it the dead node's
 * ranges, and fill it. (`client.nodes.replace(nodeId, input)` starts it with the rest of these fields.)
 */
export interface ReplaceNodeInput {
  /** The DOWN node to replace (marked DOWN by the health check, or by hand). */
  nodeId: string;
  /** Why (recorded in the progress facts). */
  reason?: string | null | undefined;
  /**
   * Namespaces whose entries the new node is filled with from the cold tier in the background (at most 100). Default:
   * every namespace the cold tier holds; `[]`: none, the node fills by read-through only.
   */
  fillNamespaces?: string[] | undefined;
  /** The fill's bandwidth cap, bytes per second (1024..10 GiB, default 8 MiB). */
  rateBytesPerSec?: number | undefined;
  /** Length of each fill step, ms (100..600000, default 60000). */
  fillMaxMs?: number | undefined;
  /** How long the replacement may take to become healthy, ms (1000..3600000, default 900000). */
  launchTimeoutMs?: number | undefined;
  /** Terminate the dead node's instance (and its data volume) once replaced. Default true. */
  terminate?: boolean | undefined;
}

/**
 * Input of the `rolling-upgrade` workflow: replace running cache nodes one at a time with freshly launched ones (the
 * launch template's current version), each handing its ranges over before it is terminated.
 * (`client.nodes.upgrade(input)` starts it.)
 */
export interface RollingUpgradeInput {
  /**
   * The nodes to replace, in this order. Default: every NORMAL node; or, when the last rolling upgrade stopped part
   * way, the nodes it had not replaced yet.
   */
  nodes?: string[] | null | undefined;
  /** Default `incremental`: the new node serves range by range. */
  mode?: ScaleMode | undefined;
  /** Length of each streaming step, ms (100..600000, default 60000). */
  streamMaxMs?: number | undefined;
  /** Bytes per second asked of each node handing over; 0 = the node's own cap. */
  rateBytesPerSec?: number | undefined;
  /** How long an old node stays up after handing over (routers refresh), ms (default 60000). */
  graceMs?: number | undefined;
  /** How long each new node may take to become healthy, ms (1000..3600000, default 900000). */
  launchTimeoutMs?: number | undefined;
  /** Start although the record says another upgrade runs (one whose execution was aborted). Default false. */
  force?: boolean | undefined;
  /** Why (recorded in the progress facts). */
  reason?: string | null | undefined;
}

/** The input type of each workflow; `evict-to-s3` and `tier-migrate` are validated by the server's first step. */
export interface WorkflowInputs {
  'scale-out': ScaleOutInput;
  'scale-in': ScaleInInput;
  'evict-to-s3': Record<string, unknown>;
  'tier-migrate': Record<string, unknown>;
  'replace-node': ReplaceNodeInput;
  'rolling-upgrade': RollingUpgradeInput;
  'invalidation-sweep': InvalidationSweepInput;
  'order-markers': OrderMarkersInput;
  'upload-commit': UploadCommitInput;
}

/**
 * Input of the `invalidation-sweep` workflow: remove from every tier the entries of `ns` that invalidations cover
 * (a flush or a prefix invalidation starts one itself).
 */
export interface InvalidationSweepInput {
  ns: string;
  /** Only keys under this prefix. */
  prefix?: string | undefined;
  /** Entries per batch (1-5000, default 500). */
  limit?: number | undefined;
}

/**
 * Input of the `order-markers` workflow: upkeep of the S3 tier's key-order markers (GET /v1/ns/{ns}/keys reads them).
 * `prune` deletes the markers of objects gone for good (the deployment runs it weekly on its own); `backfill` gives
 * objects written before markers existed one, so ordered listings find them (started by hand, once).
 *
 * @example
 * ```ts
 * const run = await strata.workflows.start('order-markers', { mode: 'backfill' });
 * ```
 */
export interface OrderMarkersInput {
  mode: 'prune' | 'backfill';
  /** One namespace; absent: every namespace of the cold tier. */
  ns?: string | undefined;
  /** Markers (prune) or objects (backfill) per batch (1-1000, default 1000). */
  limit?: number | undefined;
}

/**
 * Input of the `upload-commit` workflow: the asynchronous commit of one upload, which the API starts itself when a
 * large upload is completed (docs/API.md, "Multipart uploads"). It commits only the upload's current claim, so
 * starting it by hand commits nothing the owner did not complete.
 */
export interface UploadCommitInput {
  ns: string;
  key: string;
  uploadId: string;
  owner: string | null;
  claimId: string;
}

/** One execution as listed or started. */
export interface WorkflowExecution {
  /** The execution's name: its id in the admin API. */
  execution: string;
  workflow: WorkflowName;
  status: WorkflowExecutionStatus;
  startedAt: Date;
  /** `null` while running. */
  stoppedAt: Date | null;
}

/**
 * What an execution has done so far, as its steps recorded it: the server's progress document (contract.ts)
 * without the execution and workflow (the detail has them), with dates parsed.
 */
export interface WorkflowProgress extends Omit<WorkflowProgressView, 'execution' | 'workflow' | 'startedAt' | 'updatedAt'> {
  startedAt: Date;
  updatedAt: Date;
}

/** One execution with its input, result and progress. */
export interface WorkflowExecutionDetail extends WorkflowExecution {
  input?: unknown;
  /** The result, once `SUCCEEDED`. */
  output?: unknown;
  /** Why it stopped, once `FAILED` / `ABORTED` / `TIMED_OUT` (Step Functions' error name and cause). */
  error?: { error: string; cause: string };
  /** Absent until the first step has run. */
  progress?: WorkflowProgress;
}

/** Per-call options of the workflow methods. */
export interface WorkflowRequestOptions {
  /** Cancels the call; it then rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout of each HTTP request; overrides the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
}

/** Options of {@link WorkflowsClient.start}. */
export interface WorkflowStartOptions extends WorkflowRequestOptions {
  /** The execution's name (1-80 of `A-Z a-z 0-9 _ -`); a second start with the same name fails with `ExecutionExistsError`. Default: generated. */
  name?: string | undefined;
}

/** Options of {@link WorkflowsClient.list}. */
export interface WorkflowListOptions extends WorkflowRequestOptions {
  /** Only this workflow's executions. */
  workflow?: WorkflowName | undefined;
  /** At most this many (1..100, default 20). */
  limit?: number | undefined;
}

/** Options of {@link WorkflowsClient.wait}. */
export interface WorkflowWaitOptions {
  /** Called with every poll's answer (the last call sees the final status). */
  onProgress?: ((detail: WorkflowExecutionDetail) => void) | undefined;
  /** Pause between polls, ms. Default 2000. */
  intervalMs?: number | undefined;
  /** Give up after this long, ms, with a `TimeoutError` (the execution keeps running). Default: no limit. */
  timeoutMs?: number | undefined;
  /** Cancels the wait; it then rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout of each poll. Default: the client's `timeoutMs`. */
  requestTimeoutMs?: number | undefined;
}

/** What the workflows client needs from {@link StrataClient}. @internal */
export type WorkflowsTransport = SubClientTransport;

const STATUSES: ReadonlySet<string> = new Set(WORKFLOW_EXECUTION_STATUSES);
const EXECUTION_NAME = /^[A-Za-z0-9_-]{1,80}$/;

function checkWorkflow(workflow: string, field = 'workflow'): WorkflowName {
  if (!(WORKFLOW_NAMES as readonly string[]).includes(workflow))
    throw optionError(field, `unknown workflow '${workflow}'; workflows: ${WORKFLOW_NAMES.join(', ')}`);
  return workflow as WorkflowName;
}

function checkExecution(execution: string, field = 'execution'): string {
  if (typeof execution !== 'string' || !EXECUTION_NAME.test(execution))
    throw optionError(field, 'execution names are 1-80 characters of A-Z, a-z, 0-9, "_" and "-"');
  return execution;
}

function date(v: unknown): Date | null {
  if (typeof v !== 'string') return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/** An execution summary from the server (`INVALID_RESPONSE` when it is not one). @internal */
export function parseExecution(body: unknown, status: number): WorkflowExecution {
  if (
    !isObject(body) ||
    typeof body.execution !== 'string' ||
    typeof body.workflow !== 'string' ||
    typeof body.status !== 'string' ||
    !STATUSES.has(body.status)
  ) {
    throw invalid(status, `expected a workflow execution from the server, got: ${JSON.stringify(body).slice(0, 200)}`);
  }
  const startedAt = date(body.startedAt);
  if (!startedAt) throw invalid(status, `execution '${body.execution}' without a valid startedAt`);
  return {
    execution: body.execution,
    workflow: body.workflow as WorkflowName,
    status: body.status as WorkflowExecutionStatus,
    startedAt,
    stoppedAt: date(body.stoppedAt),
  };
}

function parseProgress(p: unknown): WorkflowProgress | undefined {
  if (!isObject(p)) return undefined;
  const now = new Date();
  const facts: WorkflowProgress['facts'] = {};
  if (isObject(p.facts))
    for (const [k, v] of Object.entries(p.facts))
      if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) facts[k] = v as string | number | boolean | null;
  return {
    phase: typeof p.phase === 'string' ? p.phase : '',
    total: num(p.total),
    done: num(p.done),
    // A server that sends no unit (older than the field): the contract's, by the workflow the document names.
    unit: typeof p.unit === 'string' ? p.unit : (WORKFLOW_PROGRESS_UNITS[p.workflow as WorkflowName] ?? 'steps'),
    fraction: Math.min(1, Math.max(0, num(p.fraction))),
    keys: num(p.keys),
    bytes: num(p.bytes),
    ...(p.outcome === 'succeeded' || p.outcome === 'rolled-back' || p.outcome === 'failed' ? { outcome: p.outcome } : {}),
    facts,
    startedAt: date(p.startedAt) ?? now,
    updatedAt: date(p.updatedAt) ?? now,
  };
}

function parseDetail(body: unknown, status: number): WorkflowExecutionDetail {
  const base = parseExecution(body, status);
  const b = body as Json;
  const detail: WorkflowExecutionDetail = { ...base };
  if ('input' in b) detail.input = b.input;
  if ('output' in b) detail.output = b.output;
  if (isObject(b.error))
    detail.error = {
      error: String(b.error.Error ?? b.error.error ?? 'Error'),
      cause: String(b.error.Cause ?? b.error.cause ?? ''),
    };
  const progress = parseProgress(b.progress);
  if (progress) detail.progress = progress;
  return detail;
}

/**
 * The admin API's workflow executions. These routes are for operators: in AWS they need an admin API key (or
 * identity), not a tenant's.
 *
 * @example
 * ```ts
 * const admin = new StrataClient({ endpoint: 'http://localhost:8080', apiKey: process.env.STRATA_ADMIN_API_KEY });
 * const run = await admin.workflows.start('scale-out', { mode: 'incremental' });
 * const done = await admin.workflows.wait(run.execution, { onProgress: (d) => console.log(d.progress?.phase) });
 * if (done.status !== 'SUCCEEDED') throw new Error(`${done.error?.error}: ${done.error?.cause}`);
 * ```
 */
export class WorkflowsClient {
  /** @internal */
  constructor(private readonly t: WorkflowsTransport) {}

  /**
   * Starts an execution of `workflow` with `input` (`POST /v1/admin/workflows/{workflow}/executions`) and resolves
   * its summary (status `RUNNING`). Not retried after an ambiguous failure (it could start a second execution):
   * name the execution to make a retry safe (it then fails with `ExecutionExistsError` if the first one started).
   *
   * @throws {ValidationError} for an unknown workflow or input the server rejects (`err.field` names it).
   * @throws {ExecutionExistsError} when `opts.name` is taken.
   * @throws {WorkflowsUnavailableError} when the deployment has no workflows configured.
   * @example
   * ```ts
   * const { execution } = await strata.workflows.start('scale-in', { nodeId: 'n3' }, { name: 'retire-n3' });
   * ```
   */
  async start<W extends WorkflowName>(
    workflow: W,
    input: WorkflowInputs[W] = {} as WorkflowInputs[W],
    opts: WorkflowStartOptions = {},
  ): Promise<WorkflowExecution> {
    checkWorkflow(workflow);
    if (!isObject(input)) throw optionError('input', "must be an object (the workflow's input)");
    const query = opts.name === undefined ? '' : `?name=${encodeURIComponent(checkExecution(opts.name, 'name'))}`;
    const url = `${this.t.endpoint}/v1/admin/workflows/${workflow}/executions${query}`;
    return this.t.transport.send(
      {
        ...this.req('POST', url, opts, 'conditional'),
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(input),
      },
      async (res) => parseExecution(await readBody(res), res.status),
    );
  }

  /**
   * One execution with its status, error, output and progress (`GET /v1/admin/workflows/executions/{execution}`);
   * `undefined` when there is no execution of that name.
   *
   * @example
   * ```ts
   * const d = await strata.workflows.get('scale-out-20261121T120000Z-a1b2c3');
   * if (d?.progress) console.log(`${d.progress.done}/${d.progress.total} ${d.progress.unit}: ${d.progress.phase}`);
   * ```
   */
  async get(execution: string, opts: WorkflowRequestOptions = {}): Promise<WorkflowExecutionDetail | undefined> {
    checkExecution(execution);
    const url = `${this.t.endpoint}/v1/admin/workflows/executions/${encodeURIComponent(execution)}`;
    return this.t.transport.send({ ...this.req('GET', url, opts, 'idempotent'), accept: [404] }, async (res) => {
      if (res.status === 404) return missingOrThrow(res, `GET ${url}`);
      return parseDetail(await readBody(res), res.status);
    });
  }

  /**
   * Recent executions, newest first (`GET /v1/admin/workflows/executions?workflow=&limit=`).
   *
   * @example
   * ```ts
   * for (const e of await strata.workflows.list({ workflow: 'scale-out', limit: 5 })) console.log(e.execution, e.status);
   * ```
   */
  async list(opts: WorkflowListOptions = {}): Promise<WorkflowExecution[]> {
    const q = new URLSearchParams();
    if (opts.workflow !== undefined) q.set('workflow', checkWorkflow(opts.workflow));
    if (opts.limit !== undefined) {
      if (!Number.isInteger(opts.limit) || opts.limit < 1 || opts.limit > 100)
        throw optionError('limit', 'must be a whole number from 1 to 100');
      q.set('limit', String(opts.limit));
    }
    const url = `${this.t.endpoint}/v1/admin/workflows/executions${q.size ? `?${q}` : ''}`;
    return this.t.transport.send(this.req('GET', url, opts, 'idempotent'), async (res) => {
      const body = await readBody(res);
      if (!isObject(body) || !Array.isArray(body.executions))
        throw invalid(res.status, 'expected { executions: [...] } from the server', requestIdOf(res));
      return body.executions.map((e) => parseExecution(e, res.status));
    });
  }

  /**
   * Polls an execution until it stops and resolves its final detail, whatever the outcome: check `status`
   * (`SUCCEEDED`, `FAILED`, `ABORTED`, `TIMED_OUT`) and `error`. `onProgress` sees every poll.
   *
   * @throws {NotFoundError} when there is no execution of that name.
   * @throws {TimeoutError} when `timeoutMs` passes first (the execution keeps running).
   * @example
   * ```ts
   * const done = await strata.workflows.wait(execution, {
   *   intervalMs: 1000,
   *   timeoutMs: 30 * 60_000,
   *   onProgress: (d) => process.stderr.write(`\r${Math.round((d.progress?.fraction ?? 0) * 100)}% ${d.progress?.phase ?? ''}`),
   * });
   * ```
   */
  async wait(execution: string, opts: WorkflowWaitOptions = {}): Promise<WorkflowExecutionDetail> {
    checkExecution(execution);
    const interval = opts.intervalMs ?? 2000;
    if (!Number.isFinite(interval) || interval < 0) throw optionError('intervalMs', 'must be a finite number >= 0');
    if (opts.timeoutMs !== undefined && (!Number.isFinite(opts.timeoutMs) || opts.timeoutMs < 0))
      throw optionError('timeoutMs', 'must be a finite number >= 0');
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    const reqOpts: WorkflowRequestOptions = {
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.requestTimeoutMs !== undefined ? { timeoutMs: opts.requestTimeoutMs } : {}),
    };
    for (;;) {
      const d = await this.get(execution, reqOpts);
      if (!d)
        throw new NotFoundError({
          code: 'NOT_FOUND',
          status: 404,
          message: `no workflow execution named '${execution}'`,
          details: { execution },
        });
      opts.onProgress?.(d);
      if (d.status !== 'RUNNING') return d;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new TimeoutError({
          code: 'TIMEOUT',
          status: 0,
          message: `execution '${execution}' is still RUNNING after ${opts.timeoutMs} ms`,
          details: { execution, phase: d.progress?.phase },
        });
      }
      await sleep(Math.min(interval, left), opts.signal);
    }
  }

  private req(method: string, url: string, opts: WorkflowRequestOptions, retryMode: RetryMode): HttpRequest {
    return {
      method,
      url,
      auth: true,
      retryMode,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? this.t.timeoutMs,
      headers: {},
    };
  }
}
