import { CasConflictError, JsonDocStore, type CasStore } from '../ring/store.js';
import type { WorkflowName, WorkflowProgressDocument } from '../../sdk/src/contract.js';

// Workflow names and the progress document are written once, in the SDK's contract (plain data and types).
export { WORKFLOW_NAMES, type WorkflowName } from '../../sdk/src/contract.js';

/**
 * What a workflow execution has done so far, written by its steps into the CAS document store next to the ring
 * (`workflows/executions/<execution name>`). The admin API and the CLI's progress bar read it: it is the same
 * on AWS (Step Functions) and locally (aws-local-stepfunctions), and it survives the step Lambdas.
 */
export type WorkflowProgress = WorkflowProgressDocument;

export class ProgressStore {
  private readonly docs: JsonDocStore<WorkflowProgress>;

  constructor(
    cas: CasStore,
    private readonly now: () => number = Date.now,
  ) {
    this.docs = new JsonDocStore(cas, 'workflows/executions/');
  }

  get(execution: string): Promise<WorkflowProgress | undefined> {
    return this.docs.get(execution);
  }

  /** Applies `edit` to the execution's document, creating it first if needed. */
  async update(execution: string, workflow: WorkflowName, edit: (p: WorkflowProgress) => void): Promise<WorkflowProgress> {
    const at = new Date(this.now()).toISOString();
    if (!(await this.docs.get(execution))) {
      const fresh: WorkflowProgress = {
        execution,
        workflow,
        phase: 'starting',
        total: 0,
        done: 0,
        keys: 0,
        bytes: 0,
        startedAt: at,
        updatedAt: at,
        facts: {},
      };
      try {
        await this.docs.create(execution, fresh);
      } catch (e) {
        if (!(e instanceof CasConflictError)) throw e; // a concurrent step created it
      }
    }
    return this.docs.update(execution, (p) => {
      edit(p);
      p.updatedAt = at;
      return p;
    });
  }
}

/**
 * At most one scale-out per node in flight (paper 000): a lock document per node, created with
 * "must not exist" and removed (tombstoned) when the execution ends. A lock older than `staleMs` belongs to an
 * execution that died without releasing it and may be taken over.
 */
export class ScaleLocks {
  private readonly docs: JsonDocStore<{ node: string; execution: string; at: number; released?: boolean }>;

  constructor(
    cas: CasStore,
    private readonly staleMs = 6 * 3600_000,
    private readonly now: () => number = Date.now,
  ) {
    this.docs = new JsonDocStore(cas, 'workflows/scale-locks/');
  }

  /** Takes the lock on `node` for `execution`; false when another live execution holds it. */
  async acquire(node: string, execution: string): Promise<boolean> {
    const cur = await this.docs.get(node);
    if (!cur) {
      try {
        await this.docs.create(node, { node, execution, at: this.now() });
        return true;
      } catch (e) {
        if (e instanceof CasConflictError) return false;
        throw e;
      }
    }
    let won = false;
    await this.docs.update(node, (d) => {
      won = false; // the edit re-runs after a lost race
      if (d.execution === execution && !d.released) {
        won = true;
        return undefined;
      }
      if (!d.released && this.now() - d.at < this.staleMs) return undefined;
      won = true;
      return { node, execution, at: this.now() };
    });
    return won;
  }

  async release(node: string, execution: string): Promise<void> {
    if (!(await this.docs.get(node))) return;
    await this.docs.update(node, (d) => (d.execution === execution && !d.released ? { ...d, released: true } : undefined));
  }

  /** Nodes with a live lock (for the trigger's "in flight" set). */
  async held(nodes: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const n of nodes) {
      const d = await this.docs.get(n);
      if (d && !d.released && this.now() - d.at < this.staleMs) out.add(n);
    }
    return out;
  }
}
