import { randomBytes } from 'node:crypto';
import { DescribeExecutionCommand, ListExecutionsCommand, StartExecutionCommand, type SFNClient } from '@aws-sdk/client-sfn';
import { permanentDetails, StrataError, ValidationError } from '../errors.js';
import { WORKFLOW_NAMES, type ProgressStore, type WorkflowName, type WorkflowProgress } from './progress.js';
import {
  WORKFLOW_EXECUTION_STATUSES,
  WORKFLOW_PROGRESS_UNITS,
  type WorkflowExecutionStatus,
  type WorkflowProgressView,
} from '../../sdk/src/contract.js';
import { log } from '../util/logger.js';

/**
 * What the admin API (and through it the SDK and the `strata workflow` CLI) can do with the workflows: start an
 * execution, describe one with its progress, list recent ones. Two implementations: {@link SfnWorkflowService}
 * (AWS Step Functions) and {@link LocalWorkflowService} (the in-process runner of local runs and tests). Both
 * read the progress documents the steps write ({@link ProgressStore}), so the answers look the same.
 */
export interface WorkflowService {
  /**
   * Starts `workflow` with `input` (the workflow's request, validated by its first step). `name` (1-80 of
   * `A-Z a-z 0-9 _ -`) makes the call idempotent-ish: a second start with the same name fails with 409
   * `EXECUTION_EXISTS`. Without one a name like `scale-out-20261121T120000Z-a1b2c3` is generated.
   */
  start(workflow: WorkflowName, input: Record<string, unknown>, name?: string): Promise<ExecutionSummary>;
  /** The execution named `execution`, with its progress document; undefined when no workflow has one. */
  describe(execution: string): Promise<ExecutionDetail | undefined>;
  /** Recent executions, newest first (at most `limit`, default {@link DEFAULT_LIST_LIMIT}). */
  list(o?: ListExecutionsOptions): Promise<ExecutionSummary[]>;
  /** Whether `workflow` can be started here (absent: every workflow can; a start then says why not). */
  runs?(workflow: WorkflowName): boolean;
}

/** Status of an execution (Step Functions' own, `PENDING_REDRIVE` reported as `RUNNING`). */
export type ExecutionStatus = WorkflowExecutionStatus;
export const EXECUTION_STATUSES: readonly ExecutionStatus[] = WORKFLOW_EXECUTION_STATUSES;

export interface ExecutionSummary {
  /** The execution's name: its id in the admin API. */
  execution: string;
  workflow: WorkflowName;
  status: ExecutionStatus;
  /** ISO-8601. */
  startedAt: string;
  /** ISO-8601, once the execution stopped. */
  stoppedAt?: string;
}

/** The progress document with what a progress bar needs computed (`fraction`, `unit`): sdk/src/contract.ts. */
export type ExecutionProgress = WorkflowProgressView;

export interface ExecutionDetail extends ExecutionSummary {
  /** The execution's input, as started. */
  input?: unknown;
  /** The execution's output, once it succeeded. */
  output?: unknown;
  /** Why it failed (Step Functions' `error` and `cause`). */
  error?: { Error: string; Cause: string };
  /** The progress document the steps wrote, absent before the first step ran (or when it cannot be read). */
  progress?: ExecutionProgress;
}

export interface ListExecutionsOptions {
  /** Only this workflow's executions. */
  workflow?: WorkflowName;
  /** @default DEFAULT_LIST_LIMIT; at most MAX_LIST_LIMIT */
  limit?: number;
}

export const DEFAULT_LIST_LIMIT = 20;
export const MAX_LIST_LIMIT = 100;

/** What each workflow's `total`/`done` count: the SDK contract's units (replace-node: its phases). */
export const PROGRESS_UNITS: Readonly<Record<WorkflowName, string>> = WORKFLOW_PROGRESS_UNITS;

/** Step Functions execution names; stricter than the service (no characters that need escaping anywhere). */
export const EXECUTION_NAME = /^[A-Za-z0-9_-]{1,80}$/;

/** 409 `EXECUTION_EXISTS`: an execution with this name was already started. */
export class ExecutionExistsError extends StrataError {
  constructor(execution: string) {
    super('EXECUTION_EXISTS', `an execution named '${execution}' already exists; choose another name or omit it`, { execution });
  }
}

/** 503 `WORKFLOWS_UNAVAILABLE`: the workflows are not configured here, or Step Functions could not be reached. */
export class WorkflowsUnavailableError extends StrataError {
  constructor(message: string, details?: Record<string, unknown>, cause?: unknown) {
    super('WORKFLOWS_UNAVAILABLE', message, details, cause === undefined ? undefined : { cause });
  }
}

export function isWorkflowName(v: unknown): v is WorkflowName {
  return typeof v === 'string' && (WORKFLOW_NAMES as readonly string[]).includes(v);
}

/** A fresh execution name: `<workflow>-<UTC timestamp>-<6 hex>`, sortable by start time per workflow. */
export function newExecutionName(workflow: WorkflowName, now: Date = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${workflow}-${stamp}-${randomBytes(3).toString('hex')}`;
}

/** Validates a caller-chosen execution name (400 naming `field`). */
export function checkExecutionName(name: string, field = 'name'): string {
  if (!EXECUTION_NAME.test(name))
    throw new ValidationError(field, 'execution names are 1-80 characters of A-Z, a-z, 0-9, "_" and "-"', {
      value: name.slice(0, 100),
    });
  return name;
}

/** The progress document with its fraction and unit; `status` settles the fraction of a finished execution. */
export function progressView(p: WorkflowProgress, status?: ExecutionStatus): ExecutionProgress {
  let fraction: number;
  if (status === 'SUCCEEDED' || (p.outcome === 'succeeded' && p.total === 0)) fraction = 1;
  else if (p.total > 0) fraction = Math.min(1, Math.max(0, p.done / p.total));
  else fraction = 0;
  return { ...p, fraction, unit: PROGRESS_UNITS[p.workflow] ?? 'steps' };
}

export function limitOf(o: ListExecutionsOptions | undefined): number {
  const n = o?.limit ?? DEFAULT_LIST_LIMIT;
  return Math.max(1, Math.min(MAX_LIST_LIMIT, Math.floor(n)));
}

/** Newest first; ties by name (descending) so that the order is stable. */
export function newestFirst(a: ExecutionSummary, b: ExecutionSummary): number {
  return b.startedAt.localeCompare(a.startedAt) || b.execution.localeCompare(a.execution);
}

/** Reads the progress document; a store that cannot be read leaves the detail without progress (logged). */
export async function readProgress(
  store: ProgressStore | undefined,
  execution: string,
  status: ExecutionStatus,
): Promise<ExecutionProgress | undefined> {
  if (!store) return undefined;
  try {
    const p = await store.get(execution);
    return p && progressView(p, status);
  } catch (e) {
    log.warn('workflow progress not readable', { execution, error: e });
    return undefined;
  }
}

// ------------------------------------------------------------------------------------------ AWS Step Functions

export interface SfnWorkflowServiceOptions {
  /** An SFN client (region, credentials, endpoint as the runtime needs). */
  client: Pick<SFNClient, 'send'>;
  /** The deployed state machines' ARNs by workflow (`<prefix>-<workflow>`); workflows left out are unavailable. */
  stateMachines: Partial<Record<WorkflowName, string>>;
  /** Where the steps write their progress (the CAS store next to the ring). */
  progress?: ProgressStore;
}

const STATE_MACHINE_ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$/;

/**
 * {@link WorkflowService} over AWS Step Functions: StartExecution, DescribeExecution and ListExecutions on the
 * workflows' state machines. Execution ids in the API are execution names; the ARN of one is its state
 * machine's ARN with `:stateMachine:` turned into `:execution:` and `:<name>` appended.
 */
export class SfnWorkflowService implements WorkflowService {
  private readonly machines: Map<WorkflowName, string>;

  constructor(private readonly o: SfnWorkflowServiceOptions) {
    this.machines = new Map();
    for (const [workflow, arn] of Object.entries(o.stateMachines) as [string, string | undefined][]) {
      if (arn === undefined) continue;
      if (!isWorkflowName(workflow))
        throw new Error(`unknown workflow '${workflow}' in the state machine map (workflows: ${WORKFLOW_NAMES.join(', ')})`);
      if (!STATE_MACHINE_ARN.test(arn))
        throw new Error(
          `'${arn}' (workflow ${workflow}) is not a state machine ARN (arn:aws:states:<region>:<account>:stateMachine:<name>)`,
        );
      this.machines.set(workflow, arn);
    }
  }

  /** The workflows this service can start. */
  get workflows(): WorkflowName[] {
    return [...this.machines.keys()];
  }

  runs(workflow: WorkflowName): boolean {
    return this.machines.has(workflow);
  }

  /** The ARN of the execution `name` of `workflow`. */
  executionArn(workflow: WorkflowName, name: string): string {
    return `${this.machineOf(workflow).replace(':stateMachine:', ':execution:')}:${name}`;
  }

  async start(workflow: WorkflowName, input: Record<string, unknown>, name?: string): Promise<ExecutionSummary> {
    const stateMachineArn = this.machineOf(workflow);
    const execution = name === undefined ? newExecutionName(workflow) : checkExecutionName(name);
    try {
      const r = await this.o.client.send(
        new StartExecutionCommand({ stateMachineArn, name: execution, input: JSON.stringify(input) }),
      );
      return { execution, workflow, status: 'RUNNING', startedAt: (r.startDate ?? new Date()).toISOString() };
    } catch (e) {
      throw sfnError(e, 'StartExecution', { workflow, execution });
    }
  }

  async describe(execution: string): Promise<ExecutionDetail | undefined> {
    if (!EXECUTION_NAME.test(execution)) return undefined;
    for (const workflow of await this.candidates(execution)) {
      let r;
      try {
        r = await this.o.client.send(new DescribeExecutionCommand({ executionArn: this.executionArn(workflow, execution) }));
      } catch (e) {
        if (errorName(e) === 'ExecutionDoesNotExist') continue;
        throw sfnError(e, 'DescribeExecution', { workflow, execution });
      }
      const detail: ExecutionDetail = {
        execution,
        workflow,
        status: statusOf(r.status),
        startedAt: (r.startDate ?? new Date(0)).toISOString(),
      };
      if (r.stopDate) detail.stoppedAt = r.stopDate.toISOString();
      if (r.input !== undefined) detail.input = parseJson(r.input);
      if (r.output !== undefined) detail.output = parseJson(r.output);
      if (r.error !== undefined || r.cause !== undefined) detail.error = { Error: r.error ?? 'Error', Cause: r.cause ?? '' };
      const progress = await readProgress(this.o.progress, execution, detail.status);
      if (progress) detail.progress = progress;
      return detail;
    }
    return undefined;
  }

  async list(o?: ListExecutionsOptions): Promise<ExecutionSummary[]> {
    const limit = limitOf(o);
    const workflows = o?.workflow ? [o.workflow] : this.workflows;
    if (o?.workflow) this.machineOf(o.workflow);
    const lists = await Promise.all(
      workflows.map(async (workflow) => {
        try {
          const r = await this.o.client.send(
            new ListExecutionsCommand({ stateMachineArn: this.machineOf(workflow), maxResults: limit }),
          );
          return (r.executions ?? []).map((x): ExecutionSummary => ({
            execution: x.name ?? '',
            workflow,
            status: statusOf(x.status),
            startedAt: (x.startDate ?? new Date(0)).toISOString(),
            ...(x.stopDate ? { stoppedAt: x.stopDate.toISOString() } : {}),
          }));
        } catch (e) {
          throw sfnError(e, 'ListExecutions', { workflow });
        }
      }),
    );
    return lists.flat().sort(newestFirst).slice(0, limit);
  }

  private machineOf(workflow: WorkflowName): string {
    const arn = this.machines.get(workflow);
    if (!arn)
      throw new WorkflowsUnavailableError(
        `workflow '${workflow}' has no state machine configured here (configured: ${this.workflows.join(', ') || 'none'})`,
        permanentDetails({ workflow }),
      );
    return arn;
  }

  /**
   * The workflows that may own `execution`, likeliest first: the one its name starts with (generated names do),
   * then the one its progress document names, then the rest.
   */
  private async candidates(execution: string): Promise<WorkflowName[]> {
    const order: WorkflowName[] = [];
    const byPrefix = [...this.machines.keys()].filter((w) => execution.startsWith(`${w}-`)).sort((a, b) => b.length - a.length);
    order.push(...byPrefix);
    if (order.length === 0 && this.o.progress) {
      const p = await this.o.progress.get(execution).catch(() => undefined);
      if (p && this.machines.has(p.workflow)) order.push(p.workflow);
    }
    for (const w of this.machines.keys()) if (!order.includes(w)) order.push(w);
    return order;
  }
}

function statusOf(s: string | undefined): ExecutionStatus {
  return (EXECUTION_STATUSES as readonly string[]).includes(s ?? '') ? (s as ExecutionStatus) : 'RUNNING';
}

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

function errorName(e: unknown): string | undefined {
  return (e as { name?: string } | undefined)?.name;
}

/** Maps a Step Functions API error to a typed error (messages name the call, never credentials or endpoints). */
function sfnError(e: unknown, call: string, details: Record<string, unknown>): StrataError {
  const name = errorName(e) ?? 'Error';
  switch (name) {
    case 'ExecutionAlreadyExists':
      return new ExecutionExistsError(String(details.execution));
    case 'InvalidName':
      return new ValidationError('name', 'Step Functions rejected the execution name', details);
    case 'InvalidExecutionInput':
      return new ValidationError('body', 'Step Functions rejected the execution input (at most 256 KiB of JSON)', details);
    case 'ExecutionLimitExceeded':
      return new WorkflowsUnavailableError('too many executions are running; try again when some have finished', details, e);
    case 'StateMachineDoesNotExist':
    case 'StateMachineDeleting':
      return new WorkflowsUnavailableError(
        `the state machine of workflow '${String(details.workflow)}' does not exist (${name}); check the deployment`,
        permanentDetails(details),
        e,
      );
    default:
      return new WorkflowsUnavailableError(`Step Functions ${call} failed (${name})`, { ...details, sfnError: name }, e);
  }
}
