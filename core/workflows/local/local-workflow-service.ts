import { permanentDetails } from '../../errors.js';
import {
  checkExecutionName,
  ExecutionExistsError,
  limitOf,
  newestFirst,
  newExecutionName,
  readProgress,
  WorkflowsUnavailableError,
  type ExecutionDetail,
  type ExecutionSummary,
  type ListExecutionsOptions,
  type WorkflowService,
} from '../admin-service.js';
import type { ProgressStore, WorkflowName } from '../progress.js';
import type { LocalExecution, LocalWorkflowRunner } from './asl-runner.js';

export interface LocalWorkflowServiceOptions {
  /** The runner that executes the synthesized state machines in this process. */
  runner: Pick<LocalWorkflowRunner, 'workflows' | 'start' | 'describe' | 'list'>;
  /** Where the steps write their progress (the runner's CAS store). */
  progress?: ProgressStore;
}

/** {@link WorkflowService} over a {@link LocalWorkflowRunner} (local runs, tests). */
export class LocalWorkflowService implements WorkflowService {
  constructor(private readonly o: LocalWorkflowServiceOptions) {}

  runs(workflow: WorkflowName): boolean {
    return this.o.runner.workflows.includes(workflow);
  }

  async start(workflow: WorkflowName, input: Record<string, unknown>, name?: string): Promise<ExecutionSummary> {
    if (!this.o.runner.workflows.includes(workflow))
      throw new WorkflowsUnavailableError(
        `workflow '${workflow}' is not available in this local run (available: ${this.o.runner.workflows.join(', ') || 'none'})`,
        permanentDetails({ workflow }),
      );
    const execution = name === undefined ? newExecutionName(workflow) : checkExecutionName(name);
    if (this.o.runner.describe(execution)) throw new ExecutionExistsError(execution);
    return summaryOf(this.o.runner.start(workflow, input, execution));
  }

  async describe(execution: string): Promise<ExecutionDetail | undefined> {
    const e = this.o.runner.describe(execution);
    if (!e) return undefined;
    const detail: ExecutionDetail = { ...summaryOf(e), input: e.input };
    if (e.output !== undefined) detail.output = e.output;
    if (e.error) detail.error = e.error;
    const progress = await readProgress(this.o.progress, execution, detail.status);
    if (progress) detail.progress = progress;
    return detail;
  }

  async list(o?: ListExecutionsOptions): Promise<ExecutionSummary[]> {
    return this.o.runner.list(o?.workflow).map(summaryOf).sort(newestFirst).slice(0, limitOf(o));
  }
}

function summaryOf(e: LocalExecution): ExecutionSummary {
  return {
    execution: e.name,
    workflow: e.workflow,
    status: e.status,
    startedAt: e.startedAt,
    ...(e.stoppedAt ? { stoppedAt: e.stoppedAt } : {}),
  };
}
