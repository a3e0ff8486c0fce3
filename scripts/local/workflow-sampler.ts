/**
 * Workflow executions for the local dashboard. In AWS, Step Functions counts executions itself (`AWS/States`); a
 * local run's executions live in its in-process runner, so this sampler reads them through the workflow service
 * (the same `list`/`describe` the admin API answers with) and records, in the local metrics store
 * (LOCAL_METRICS of dashboard/local-widgets.ts): each start at its start time, each end at its stop time (by
 * outcome), how many run, and each running execution's progress (percent of its sessions, nodes or batches done).
 */
import type { LocalMetricsStore } from '../../core/metrics/local-store.js';
import type { ExecutionSummary, WorkflowService } from '../../core/workflows/admin-service.js';
import type { ExecutionRow } from './dashboard/data.js';
import { LOCAL_METRICS, type LocalMetricDef } from './dashboard/local-widgets.js';

export interface WorkflowSamplerOptions {
  service: WorkflowService;
  store: LocalMetricsStore;
  /** `Environment` dimension value. */
  environment: string;
  /** Also sample on a timer (running count and progress between page loads). @default the store's resolution; 0: only on demand */
  intervalMs?: number;
}

export interface WorkflowSampler {
  /** Reads the executions now, records what changed, and returns the recent ones (newest first). */
  sample(): Promise<ExecutionRow[]>;
  stop(): Promise<void>;
}

const ENDED: Partial<Record<ExecutionSummary['status'], LocalMetricDef>> = {
  SUCCEEDED: LOCAL_METRICS.executionsSucceeded,
  FAILED: LOCAL_METRICS.executionsFailed,
  TIMED_OUT: LOCAL_METRICS.executionsFailed,
  ABORTED: LOCAL_METRICS.executionsAborted,
};

export function startWorkflowSampler(o: WorkflowSamplerOptions): WorkflowSampler {
  const { store, environment } = o;
  const record = (def: LocalMetricDef, value: number, at: number, dims: Record<string, string> = {}) => {
    const dimensions = { Environment: environment, ...dims };
    store.record({ namespace: def.namespace, name: def.name, unit: def.unit, dimensions }, value, at);
  };
  /** Executions already counted as started, and those counted as ended. */
  const started = new Set<string>();
  const ended = new Set<string>();
  let rows: ExecutionRow[] = [];
  let warned = false;

  const read = async (): Promise<ExecutionRow[]> => {
    const now = Date.now();
    const list = await o.service.list({ limit: 100 });
    const out: ExecutionRow[] = [];
    let running = 0;
    for (const e of list) {
      const workflow = { Workflow: e.workflow };
      if (!started.has(e.execution)) {
        started.add(e.execution);
        // Counted at its start time, once: the same count whichever sample sees it first.
        record(LOCAL_METRICS.executionsStarted, 1, Date.parse(e.startedAt));
        record(LOCAL_METRICS.executionsStarted, 1, Date.parse(e.startedAt), workflow);
      }
      const finished = e.status !== 'RUNNING';
      if (!finished) running++;
      const row: ExecutionRow = {
        execution: e.execution,
        workflow: e.workflow,
        status: e.status,
        startedAt: e.startedAt,
        ...(e.stoppedAt ? { stoppedAt: e.stoppedAt } : {}),
      };
      // Progress documents are read for what is running, and once more when an execution ends (its last value).
      if (!finished || !ended.has(e.execution)) {
        const detail = await o.service.describe(e.execution);
        const p = detail?.progress;
        if (p) {
          const percent = 100 * p.fraction;
          const at = finished && e.stoppedAt ? Date.parse(e.stoppedAt) : now;
          record(LOCAL_METRICS.executionProgress, percent, at, { Execution: e.execution });
          Object.assign(row, { percent, done: p.done, total: p.total, unit: p.unit });
        }
      } else {
        const prev = rows.find((r) => r.execution === e.execution);
        if (prev?.percent !== undefined)
          Object.assign(row, { percent: prev.percent, done: prev.done, total: prev.total, unit: prev.unit });
      }
      if (finished && !ended.has(e.execution)) {
        ended.add(e.execution);
        const def = ENDED[e.status];
        const at = e.stoppedAt ? Date.parse(e.stoppedAt) : now;
        if (def) {
          record(def, 1, at);
          record(def, 1, at, workflow);
        }
      }
      out.push(row);
    }
    record(LOCAL_METRICS.executionsRunning, running, now);
    rows = out;
    return out;
  };

  // One read at a time: a timer tick and a page load must not count the same start twice.
  let chain: Promise<ExecutionRow[]> = Promise.resolve([]);
  const sample = (): Promise<ExecutionRow[]> => {
    chain = chain.then(read, read).catch((e: unknown) => {
      if (!warned) console.warn(`strata: workflow executions not sampled: ${e instanceof Error ? e.message : String(e)}`);
      warned = true;
      return rows;
    });
    return chain;
  };
  const interval = o.intervalMs ?? store.resolutionMs;
  const timer = interval > 0 ? setInterval(() => void sample(), interval) : undefined;
  timer?.unref();
  return {
    sample,
    stop: async () => {
      if (timer) clearInterval(timer);
      await chain;
    },
  };
}
