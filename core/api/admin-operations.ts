import * as z from 'zod';
import { NotFoundError, permanentDetails, ValidationError } from '../errors.js';
import { WORKFLOW_NAMES, type WorkflowName } from '../workflows/progress.js';
import { scaleInBeginInput, scaleOutBeginInput } from '../workflows/steps/scale-steps.js';
import { replaceNodeRequest } from '../workflows/steps/replace-steps.js';
import { rollingUpgradeRequest } from '../workflows/steps/upgrade-steps.js';
import { orderMarkersRequest } from '../workflows/steps/order-marker-steps.js';
import { sweepRequest } from '../workflows/steps/sweep-steps.js';
import { uploadCommitRequest } from '../workflows/steps/upload-commit-steps.js';
import {
  DEFAULT_LIST_LIMIT,
  EXECUTION_NAME,
  MAX_LIST_LIMIT,
  WorkflowsUnavailableError,
  checkExecutionName,
  isWorkflowName,
  type ExecutionSummary,
  type WorkflowService,
} from '../workflows/admin-service.js';
import type { ApiEvent, ApiResult } from './http.js';
import { json } from './http.js';
import type { ApiContext } from './operations.js';
import { dropEmpty, jsonBody, limitParam } from './validation.js';
import { parseWith } from '../model/schemas.js';

/**
 * The admin API's operations: start a workflow execution, list recent ones, describe one with its progress.
 * They run against `ctx.workflows` (the local run's, or a test's), else the runtime's service registered with
 * {@link setWorkflowServiceFactory} (the admin Lambda registers Step Functions from its environment), else they
 * answer 503 `WORKFLOWS_UNAVAILABLE`.
 */

type Factory = () => WorkflowService | undefined;
let factory: Factory | undefined;
let built: { service: WorkflowService | undefined; error?: unknown } | undefined;

/**
 * Registers how this runtime builds its workflow service when the API context carries none (called once per
 * container on first use; the result, or its failure, is kept). `undefined` unregisters.
 */
export function setWorkflowServiceFactory(f: Factory | undefined): void {
  factory = f;
  built = undefined;
}

function workflowService(ctx: ApiContext): WorkflowService {
  if (ctx.workflows) return ctx.workflows;
  if (factory && !built) {
    try {
      built = { service: factory() };
    } catch (error) {
      built = { service: undefined, error };
    }
  }
  if (built?.error !== undefined) {
    const msg = built.error instanceof Error ? built.error.message : String(built.error);
    throw new WorkflowsUnavailableError(
      `the workflows are misconfigured in this deployment: ${msg}`,
      permanentDetails(),
      built.error,
    );
  }
  if (built?.service) return built.service;
  throw new WorkflowsUnavailableError(
    'the workflows are not configured in this runtime (Step Functions state machine ARNs in STRATA_WORKFLOW_ARNS, or a local run with a warm tier)',
    permanentDetails(),
  );
}

function workflowParam(raw: string | undefined, field: string): WorkflowName {
  if (!isWorkflowName(raw)) {
    throw new ValidationError(
      field,
      `unknown workflow '${String(raw ?? '').slice(0, 64)}'; workflows: ${WORKFLOW_NAMES.join(', ')}`,
      { valid: [...WORKFLOW_NAMES] },
    );
  }
  return raw;
}

/**
 * What the API checks before starting an execution. ScaleOut, ScaleIn, ReplaceNode and RollingUpgrade: their begin step's own
 * schemas (so a bad request is a 400 now, not a failed execution later); the other workflows validate their input
 * in their first step, so any JSON object passes here.
 */
const INPUT_SCHEMAS: Readonly<Record<WorkflowName, z.ZodType<Record<string, unknown>>>> = {
  'scale-out': scaleOutBeginInput.omit({ execution: true, workflow: true }),
  'scale-in': scaleInBeginInput.omit({ execution: true, workflow: true }),
  'evict-to-s3': z.record(z.string(), z.unknown()),
  'tier-migrate': z.record(z.string(), z.unknown()),
  'replace-node': replaceNodeRequest,
  'rolling-upgrade': rollingUpgradeRequest,
  'invalidation-sweep': sweepRequest,
  'order-markers': orderMarkersRequest,
  'upload-commit': uploadCommitRequest,
};

/**
 * Whether this runtime can start `workflow`: false where no workflows are configured (or misconfigured: the admin
 * routes report that), or where this deployment left that one out.
 */
export function canStartWorkflow(ctx: ApiContext, workflow: WorkflowName): boolean {
  let service: WorkflowService;
  try {
    service = workflowService(ctx);
  } catch {
    return false;
  }
  return service.runs ? service.runs(workflow) : true;
}

/**
 * Checks `input` against the workflow's schema (400 naming `body.<field>`) and the caller's execution name (`?name=`,
 * empty = generated), then starts the execution with the input as given: the first step applies the defaults.
 */
export async function startWorkflow(
  ctx: ApiContext,
  workflow: WorkflowName,
  input: Record<string, unknown>,
  name: string | undefined,
): Promise<ExecutionSummary> {
  parseWith(INPUT_SCHEMAS[workflow], input, 'body');
  const service = workflowService(ctx);
  return service.start(workflow, input, name === undefined || name === '' ? undefined : checkExecutionName(name));
}

/**
 * `POST /v1/admin/workflows/{workflow}/executions`: body = the workflow's input (JSON object, may be empty);
 * `?name=` names the execution. 202 with the execution summary.
 */
export async function startExecution(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const workflow = workflowParam(event.pathParameters?.workflow, 'workflow');
  const input = jsonBody(
    event,
    z.record(z.string(), z.unknown(), { error: "the body must be a JSON object (the workflow's input)" }),
    { optional: true },
  );
  const summary = await startWorkflow(ctx, workflow, input, event.queryStringParameters?.name);
  // Relative to the request's URL, so it holds behind any stage path or base path mapping.
  return json(202, summary, { location: `../executions/${summary.execution}` });
}

const listQuery = z.strictObject({
  workflow: z.string().optional(),
  limit: limitParam(MAX_LIST_LIMIT).optional(),
});

/** `GET /v1/admin/workflows/executions?workflow=&limit=`: recent executions, newest first. */
export async function listExecutions(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const q = parseWith(listQuery, dropEmpty(event.queryStringParameters), 'query');
  const workflow = q.workflow === undefined ? undefined : workflowParam(q.workflow, 'query.workflow');
  const limit = q.limit ?? DEFAULT_LIST_LIMIT;
  const executions = await workflowService(ctx).list({ ...(workflow ? { workflow } : {}), limit });
  return json(200, { executions });
}

/** `GET /v1/admin/workflows/executions/{execution}`: status, error, output and progress; 404 when unknown. */
export async function getExecution(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const execution = event.pathParameters?.execution ?? '';
  if (!EXECUTION_NAME.test(execution)) checkExecutionName(execution, 'execution');
  const detail = await workflowService(ctx).describe(execution);
  if (!detail) throw new NotFoundError(`no workflow execution named '${execution}'`, { execution });
  return json(200, detail);
}
