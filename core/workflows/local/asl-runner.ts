import { randomBytes } from 'node:crypto';
import { StateMachine, type RunOptions } from 'aws-local-stepfunctions';
import { ValidationError } from '../../errors.js';
import type { WorkflowName } from '../progress.js';
import { runStep, type StepHandlers } from '../steps/registry.js';

/** An Amazon States Language document (as synthesized from the CDK constructs). */
export type AslDefinition = { StartAt: string; States: Record<string, unknown>; [k: string]: unknown };

/** Runs one SDK-integration Task (`arn:aws:states:::aws-sdk:<service>:<action>`) locally. */
export type SdkIntegration = (service: string, action: string, input: Record<string, unknown>) => Promise<unknown>;

export interface LocalWorkflowRunnerOptions {
  /** The synthesized definitions (cdk/lib/workflow-definitions.ts). */
  definitions: Record<WorkflowName, AslDefinition>;
  /** What the step Lambda runs (core/workflows/steps/handlers.ts). */
  steps: StepHandlers;
  /** Stand-in for the Step Functions SDK integrations (EC2 launch/terminate: the local fleet, or LocalStack). */
  sdk: SdkIntegration;
  /** Wait states to shorten, by state name, in ms (e.g. `WaitForNode`); others wait as defined. */
  waitOverridesMs?: Record<string, number>;
  /** Pause between retries, ms (the definitions' back-off is for AWS). @default 50 */
  retryIntervalMs?: number;
  /** Executions kept in the list. @default 50 */
  keep?: number;
}

export type ExecutionStatus = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'ABORTED';

export interface LocalExecution {
  name: string;
  workflow: WorkflowName;
  status: ExecutionStatus;
  input: unknown;
  startedAt: string;
  stoppedAt?: string;
  output?: unknown;
  error?: { Error: string; Cause: string };
  /** Names of the states entered so far, in order (the execution history, condensed). */
  states: string[];
}

interface TaskState {
  Type: 'Task';
  Resource: string;
}

/** Every state of a definition, nested Map/Parallel states included, as [name, state]. */
export function allStates(def: { States: Record<string, unknown> }): [string, Record<string, unknown>][] {
  const out: [string, Record<string, unknown>][] = [];
  for (const [name, s] of Object.entries(def.States) as [string, Record<string, unknown>][]) {
    out.push([name, s]);
    const nested = (s.ItemProcessor ?? s.Iterator) as { States: Record<string, unknown> } | undefined;
    if (nested) out.push(...allStates(nested));
    for (const b of (s.Branches as { States: Record<string, unknown> }[] | undefined) ?? []) out.push(...allStates(b));
  }
  return out;
}

const SDK_RESOURCE = /^arn:aws[a-z-]*:states:::aws-sdk:([a-z0-9]+):([A-Za-z0-9]+)$/;
const LAMBDA_RESOURCE = /^arn:aws[a-z-]*:lambda:/;

/**
 * Runs the workflows' synthesized state machines in this process with aws-local-stepfunctions: every Task that
 * calls the step Lambda runs the real step handler in-process, every SDK-integration Task goes to `sdk`. Keeps
 * a list of recent executions with their status and the states they went through (the admin API's source).
 */
export class LocalWorkflowRunner {
  private readonly machines = new Map<WorkflowName, StateMachine>();
  private readonly overrides = new Map<WorkflowName, NonNullable<RunOptions['overrides']>>();
  private readonly executions = new Map<string, LocalExecution & { abort: () => void; done: Promise<unknown> }>();

  constructor(private readonly o: LocalWorkflowRunnerOptions) {
    for (const [workflow, def] of Object.entries(o.definitions) as [WorkflowName, AslDefinition][]) {
      this.machines.set(workflow, new StateMachine(def as never, { validationOptions: { checkPaths: true, checkArn: true } }));
      const tasks: NonNullable<NonNullable<RunOptions['overrides']>['taskResourceLocalHandlers']> = {};
      const waits: Record<string, number> = {};
      const retries: Record<string, number> = {};
      for (const [name, s] of allStates(def)) {
        if (s.Retry) retries[name] = o.retryIntervalMs ?? 50;
        if (s.Type === 'Wait' && o.waitOverridesMs?.[name] !== undefined) waits[name] = o.waitOverridesMs[name];
        if (s.Type !== 'Task') continue;
        const resource = (s as unknown as TaskState).Resource;
        const sdk = SDK_RESOURCE.exec(resource);
        if (sdk) tasks[name] = ((input: Record<string, unknown>) => o.sdk(sdk[1]!, sdk[2]!, input)) as never;
        else if (LAMBDA_RESOURCE.test(resource)) tasks[name] = ((input: unknown) => runStep(o.steps, input)) as never;
        else throw new Error(`${workflow}: state '${name}' calls ${resource}, which a local run cannot stand in for`);
      }
      this.overrides.set(workflow, {
        taskResourceLocalHandlers: tasks,
        waitTimeOverrides: waits,
        retryIntervalOverrides: retries,
      });
    }
  }

  get workflows(): WorkflowName[] {
    return [...this.machines.keys()];
  }

  /** Starts an execution; resolves its record at once (poll {@link describe}, or await {@link wait}). */
  start(workflow: WorkflowName, input: Record<string, unknown> = {}, name?: string): LocalExecution {
    const machine = this.machines.get(workflow);
    if (!machine)
      throw new ValidationError('workflow', `unknown workflow '${workflow}' (workflows: ${this.workflows.join(', ')})`);
    const execName = name ?? `${workflow}-${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}`;
    if (this.executions.has(execName)) throw new ValidationError('name', `an execution named '${execName}' already exists`);
    const startedAt = new Date().toISOString();
    const run = machine.run(input as never, {
      overrides: this.overrides.get(workflow)!,
      context: {
        Execution: { Id: `local:${workflow}:${execName}`, Name: execName, Input: input as never, StartTime: startedAt },
      },
    });
    const rec: LocalExecution & { abort: () => void; done: Promise<unknown> } = {
      name: execName,
      workflow,
      status: 'RUNNING',
      input,
      startedAt,
      states: [],
      abort: run.abort,
      done: Promise.resolve(),
    };
    // The event log drives the condensed history; the result settles the status.
    void (async () => {
      try {
        for await (const e of run.eventLogs)
          if (e.type === 'StateEntered') rec.states.push((e as { state: { name: string } }).state.name);
      } catch {
        /* the result reports failures */
      }
    })();
    rec.done = run.result
      .then(
        (output) => {
          rec.status = 'SUCCEEDED';
          rec.output = output;
        },
        (e: unknown) => {
          const err = e as { name?: string; message?: string; cause?: { name?: string; message?: string } };
          rec.status = err.name === 'ExecutionAbortedError' ? 'ABORTED' : 'FAILED';
          rec.error = { Error: err.cause?.name ?? err.name ?? 'Error', Cause: err.cause?.message ?? err.message ?? String(e) };
        },
      )
      .finally(() => {
        rec.stoppedAt = new Date().toISOString();
      });
    this.executions.set(execName, rec);
    this.trim();
    return this.view(rec);
  }

  /** Waits for the execution to stop and returns its final record. */
  async wait(name: string): Promise<LocalExecution> {
    const rec = this.executions.get(name);
    if (!rec) throw new ValidationError('execution', `no execution named '${name}'`);
    await rec.done;
    return this.view(rec);
  }

  describe(name: string): LocalExecution | undefined {
    const rec = this.executions.get(name);
    return rec && this.view(rec);
  }

  /** Newest first. */
  list(workflow?: WorkflowName): LocalExecution[] {
    return [...this.executions.values()]
      .filter((e) => !workflow || e.workflow === workflow)
      .reverse()
      .map((e) => this.view(e));
  }

  abort(name: string): void {
    this.executions.get(name)?.abort();
  }

  /** Aborts what is still running and waits for it to stop. */
  async close(): Promise<void> {
    const running = [...this.executions.values()].filter((e) => e.status === 'RUNNING');
    for (const e of running) e.abort();
    await Promise.all(running.map((e) => e.done));
  }

  private view(rec: LocalExecution): LocalExecution {
    const { name, workflow, status, input, startedAt, stoppedAt, output, error, states } = rec;
    return {
      name,
      workflow,
      status,
      input,
      startedAt,
      ...(stoppedAt ? { stoppedAt } : {}),
      ...(output !== undefined ? { output } : {}),
      ...(error ? { error } : {}),
      states: [...states],
    };
  }

  private trim(): void {
    const keep = this.o.keep ?? 50;
    for (const [name, e] of this.executions) {
      if (this.executions.size <= keep) break;
      if (e.status !== 'RUNNING') this.executions.delete(name);
    }
  }
}
