/**
 * The wire contract of the Strata HTTP API that the server and this SDK share, written once here: error codes
 * with their HTTP statuses, workflow names and execution statuses, the workflow progress document, and the
 * policy admin API's answers.
 *
 * Plain data and types only, with no imports: the server imports this file directly (core/errors.ts,
 * core/workflows/progress.ts, core/workflows/admin-service.ts, core/api/node-operations.ts), while the SDK never
 * imports from the server. test/unit/contract-drift.test.ts checks that both sides still agree.
 */

/** HTTP status of every error code the server sends (docs/API.md, the OpenAPI document). */
export const SERVER_ERROR_STATUS = {
  VALIDATION_FAILED: 400,
  MALFORMED_JSON: 400,
  NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  /** The caller's API key is not for this namespace (api/tenant-access.ts). */
  NAMESPACE_FORBIDDEN: 403,
  VERSION_CONFLICT: 409,
  /**
   * The key's policy compresses or encrypts its values (docs/POLICIES.md): their bytes never go through a presigned
   * URL, so uploads and download URLs are refused; the value goes through the API.
   */
  TRANSFORMED_SCOPE: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  /** A byte range (`Range: bytes=...`) that starts at or past the end of the value; `content-range: bytes *\/size`. */
  RANGE_NOT_SATISFIABLE: 416,
  RATE_LIMITED: 429,
  ORIGIN_FAILED: 502,
  TIER_UNAVAILABLE: 503,
  /** A workflow execution with the requested name already exists (admin API). */
  EXECUTION_EXISTS: 409,
  /** The admin API cannot reach the workflows: not configured in this runtime, or Step Functions failed. */
  WORKFLOWS_UNAVAILABLE: 503,
  /** The admin API cannot reach the policy store (where edited policy documents live). */
  POLICIES_UNAVAILABLE: 503,
  /** The encryption key a value needs cannot be used (KMS or the local key file; docs/POLICIES.md, "Encryption"). */
  KEY_UNAVAILABLE: 503,
  INTERNAL: 500,
} as const satisfies Record<string, number>;

/** Error codes defined by the Strata HTTP API (docs/API.md). */
export type ServerErrorCode = keyof typeof SERVER_ERROR_STATUS;

/** Every {@link ServerErrorCode}. */
export const SERVER_ERROR_CODES = Object.keys(SERVER_ERROR_STATUS) as readonly ServerErrorCode[];

/** The workflows a deployment runs, in the API's order. */
export const WORKFLOW_NAMES = [
  'scale-out',
  'scale-in',
  'evict-to-s3',
  'tier-migrate',
  'replace-node',
  'rolling-upgrade',
  'invalidation-sweep',
  'order-markers',
  'upload-commit',
] as const;

/** The workflows a deployment runs. */
export type WorkflowName = (typeof WORKFLOW_NAMES)[number];

/** Step Functions' execution status (`RUNNING` until the execution stops; `PENDING_REDRIVE` is reported as `RUNNING`). */
export const WORKFLOW_EXECUTION_STATUSES = ['RUNNING', 'SUCCEEDED', 'FAILED', 'ABORTED', 'TIMED_OUT'] as const;

/** Step Functions' execution status (`RUNNING` until the execution stops). */
export type WorkflowExecutionStatus = (typeof WORKFLOW_EXECUTION_STATUSES)[number];

/**
 * What a workflow execution has done so far, as its steps write it (JSON, in the document store next to the ring:
 * `workflows/executions/<execution name>`).
 */
export interface WorkflowProgressDocument {
  execution: string;
  workflow: WorkflowName;
  /** What the execution is doing now, in words (`streaming session 2 of 3`). */
  phase: string;
  /** Units of work: migration sessions, nodes evicted from, or batches. */
  total: number;
  done: number;
  /** Keys and bytes moved. */
  keys: number;
  bytes: number;
  /** ISO-8601. */
  startedAt: string;
  /** ISO-8601. */
  updatedAt: string;
  /** Set by the last step (or the rollback). */
  outcome?: 'succeeded' | 'rolled-back' | 'failed';
  /** Workflow-specific facts (plan id, node id, allocation time, ...). */
  facts: Record<string, string | number | boolean | null>;
}

/**
 * What each workflow's progress counts (`total` and `done`): migration sessions (scale-out, scale-in), nodes evicted
 * from (evict-to-s3), batches (tier-migrate), for replace-node its phases (3: launched, took over, filled), and for
 * rolling-upgrade the nodes replaced; invalidation-sweep and order-markers count batches (one page of one tier each),
 * upload-commit the one upload it commits.
 */
export const WORKFLOW_PROGRESS_UNITS = {
  'scale-out': 'sessions',
  'scale-in': 'sessions',
  'evict-to-s3': 'nodes',
  'tier-migrate': 'batches',
  'replace-node': 'phases',
  'rolling-upgrade': 'nodes',
  'invalidation-sweep': 'batches',
  'order-markers': 'batches',
  'upload-commit': 'uploads',
} as const satisfies Record<WorkflowName, string>;

/** The progress document as the admin API returns it, with what a progress bar needs computed. */
export interface WorkflowProgressView extends WorkflowProgressDocument {
  /** `done / total` in [0, 1]; 1 once the execution succeeded, 0 while nothing is planned yet. */
  fraction: number;
  /** What `total` and `done` count: the workflow's entry of {@link WORKFLOW_PROGRESS_UNITS}. */
  unit: string;
}

/**
 * The `error.details` flag of a permanent error: `{ "permanent": true }` on a 5xx says that the condition lasts until
 * the deployment's configuration changes (no workflows configured in this runtime, no tier that presigns URLs), so a
 * retry cannot succeed and clients do not retry it. Without it the status decides: 429 and 5xx are retried.
 */
export const PERMANENT_ERROR_DETAIL = 'permanent';

/**
 * Facts of a scale workflow's progress document while it waits out its grace period (after the ring changed, before
 * the sources drop what they handed over, or before the drained node is terminated): when the wait ends (ISO-8601)
 * and how long it is (ms). Progress bars count down to it instead of sitting at 100%.
 */
export const GRACE_FACTS = { until: 'graceUntil', ms: 'graceMs' } as const;

// ------------------------------------------------------------------------------------------ policy admin API

/**
 * A policy document on the wire (docs/POLICIES.md; its JSON Schema is `PolicyDocument` in the OpenAPI document).
 * Loosely typed here: the server validates every field and answers 400 VALIDATION_FAILED naming the rule and field.
 */
export interface PolicyDocumentWire {
  description?: string;
  namespaces?: Record<string, { preset?: string; with?: Record<string, number | string | boolean>; settings?: object }>;
  rules?: Array<{ id: string; on: object; do: object[]; [field: string]: unknown }>;
  budgets?: Array<{ id: string; monthlyUsd: number; [field: string]: unknown }>;
  controls?: Record<string, unknown>;
}

/** Where the policy in force comes from: the deployment's configuration (version 0, or a reset to it), or an edit. */
export type PolicySource = 'deployment' | 'runtime';

/** The policy in force, or one version of it (`GET /v1/admin/policy`). */
export interface PolicyViewWire<D = PolicyDocumentWire> {
  /** 0: the deployment's configuration, never edited at runtime; then +1 per change. */
  version: number;
  source: PolicySource;
  /** The document with its defaults applied. */
  document: D;
  /** When this version was written (ISO-8601); absent for version 0. */
  updatedAt?: string;
  /** Who wrote it (the caller's identity); absent for version 0. */
  updatedBy?: string;
  reason?: string;
  /** SHA-256 of the canonical document (hex, 16 characters): equal documents have equal hashes. */
  hash: string;
}

/** One entry of the audit trail (`GET /v1/admin/policy/versions`): who changed the policy, when, and what. */
export interface PolicyVersionSummaryWire {
  version: number;
  source: PolicySource;
  updatedAt: string;
  updatedBy: string;
  reason?: string;
  hash: string;
  /** The version this one replaced. */
  previous: number;
  /** For a rollback: the version it restored (0: the deployment's configuration). */
  restoredFrom?: number;
  /** What changed from `previous`: one line per path (`+ rules[flush]`, `~ controls.maxFleetSize: 16 -> 8`). */
  diff: string[];
}

/** A background rule and whether it would fire on the current state (`POST /v1/admin/policy/validate`). */
export interface FiringPreviewWire {
  rule: string;
  mode: 'foreground' | 'background';
  fires: boolean;
  /** Why it would fire (the conditions that hold), or why not. */
  reason: string;
}

/** What `POST /v1/admin/policy/validate` answers for a valid document (an invalid one is a 400). */
export interface PolicyValidationWire<D = PolicyDocumentWire> {
  valid: true;
  document: D;
  hash: string;
  /** Per namespace (and `*`), the placement its foreground rules compile to. */
  namespaces: Record<string, unknown>;
  wouldFire: FiringPreviewWire[];
  /** Notes that do not refuse the document. */
  warnings: string[];
}

/** One problem of a refused document, in `error.details.problems` of its 400 VALIDATION_FAILED. */
export interface PolicyProblemWire {
  /** Where: `rules[2].on.timer.everySeconds`. */
  path: string;
  /** The rule's id, when the problem is inside one. */
  rule?: string;
  message: string;
}

/** What became of a background rule's response when it fired. */
export type FiringOutcomeWire = 'done' | 'suppressed' | 'skipped' | 'failed';

/** One firing of a background rule (`GET /v1/admin/policy/firings`), newest first. */
export interface FiringWire {
  /** When it fired (ISO-8601). */
  at: string;
  rule: string;
  /** The response's kind: `alert`, `grow`, `shrink`, ... */
  response: string;
  /** done: carried out; suppressed: a control stopped it (kill switch, rate cap, cost cap); skipped: nothing to do. */
  outcome: FiringOutcomeWire;
  /** What happened, in words (the execution started, or why nothing did). */
  detail: string;
}

// ------------------------------------------------------------------------------------------ node admin API

/** A cache node's state in the ring (core/ring/document.ts `NODE_STATES`). DOWN: marked dead, its ranges fenced. */
export const CACHE_NODE_STATES = ['JOINING', 'PARTIAL', 'NORMAL', 'LEAVING', 'DOWN'] as const;

/** A cache node's state in the ring. */
export type CacheNodeState = (typeof CACHE_NODE_STATES)[number];

/** One cache node of the fleet as `GET /v1/admin/nodes` lists it: its ring entry, and how many ranges it owns. */
export interface CacheNodeWire {
  /** 1-64 of `A-Z a-z 0-9 _ . : -`. */
  id: string;
  /** Base URL of the node's HTTP API (inside the fleet's network). */
  url: string;
  state: CacheNodeState;
  /** Availability Zone, when recorded. */
  az?: string;
  /** Provider reference (EC2 instance id, local process tag). */
  instance?: string;
  /** When it joined the ring (ISO-8601). */
  addedAt: string;
  /** With state DOWN: when it was marked (ISO-8601) and why. */
  down?: { at: string; reason: string };
  /** Ranges of the ring it owns. */
  ranges: number;
}

/**
 * The operators' switch over automatic node replacement (`GET`/`PUT /v1/admin/nodes/replacement`): while `paused`,
 * the health check probes and reports but marks no node DOWN, so nothing is replaced.
 */
export interface ReplacementControlsWire {
  paused: boolean;
  /** Who set it: the admin key's tenant, or the IAM principal; absent when the caller is not known. */
  by?: string;
  reason?: string;
  /** When it was set (ISO-8601); absent when it never was. */
  at?: string;
}

/** `GET /v1/admin/nodes`: the ring's nodes, its version, and the replacement controls. */
export interface NodeListWire {
  /** The ring document's version; `null` when there is no ring yet. */
  ringVersion: number | null;
  nodes: CacheNodeWire[];
  replacement: ReplacementControlsWire;
}

/** `DELETE /v1/admin/nodes/{node}`: the ring version that no longer has the node, and who took each of its ranges. */
export interface NodeRemovalWire {
  ringVersion: number;
  /** Each range the node owned (`end` null: the top of the hash space) and the node that took it. */
  moved: { start: string; end: string | null; to: string }[];
}
