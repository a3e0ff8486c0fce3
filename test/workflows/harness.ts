/**
 * Runs the synthesized workflow definitions under aws-local-stepfunctions against real local parts: cache-node
 * processes (the local fleet stands in for EC2 RunInstances/TerminateInstances), the ring and migration
 * documents in a CAS store, and the real step handlers.
 */
import { initialRing } from '../../core/ring/document.js';
import { InMemoryCasStore, type CasStore, type RingStore } from '../../core/ring/store.js';
import type { LocalExecution, LocalWorkflowRunner, SdkIntegration } from '../../core/workflows/local/asl-runner.js';
import { localWorkflows } from '../../core/workflows/local/local-workflows.js';
import type { ProgressStore } from '../../core/workflows/progress.js';
import type { StepHandlers } from '../../core/workflows/steps/registry.js';
import type { WorkflowDeps } from '../../core/workflows/steps/handlers.js';
import type { Migrator } from '../../core/nodes/migration.js';
import type { NodeClient } from '../../core/nodes/node-client.js';
import { synthesizeWorkflowDefinitions, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { localFleet, SECRET } from '../integration/warm-fixtures.js';
import { Workload } from '../integration/warm-workload.js';

let cachedDefinitions: Record<WorkflowName, AslDefinition> | undefined;
/** Synthesized once per test file (about a second). */
export function definitions(): Record<WorkflowName, AslDefinition> {
  cachedDefinitions ??= synthesizeWorkflowDefinitions();
  return cachedDefinitions;
}

export interface Harness {
  fleet: ReturnType<typeof localFleet>;
  cas: CasStore;
  ring: RingStore;
  client: NodeClient;
  migrator: Migrator;
  progress: ProgressStore;
  deps: WorkflowDeps;
  runner: LocalWorkflowRunner;
  metrics: { key: string; value: number; dims?: Record<string, string> }[];
  /** Workloads closed by close(). */
  workloads: Workload[];
  urls(): Promise<Record<string, string>>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  tiers?: WorkflowDeps['tiers'];
  fleet?: Parameters<typeof localFleet>[0];
  nodes?: string[];
  rangesPerNode?: number;
  sdk?: (fleetSdk: SdkIntegration) => SdkIntegration;
  wrapSteps?: (h: StepHandlers) => StepHandlers;
  /** The ring store (default: in memory), e.g. a FileCasStore where a test writes the nodes' reports as they would. */
  cas?: CasStore;
  /** The state machines to run (default: the on-demand fleet's, {@link definitions}). */
  definitions?: Record<WorkflowName, AslDefinition>;
}

export async function harness(o: HarnessOptions = {}): Promise<Harness> {
  const fleet = localFleet(o.fleet);
  const ids = o.nodes ?? ['n1', 'n2', 'n3'];
  const launched = await Promise.all(ids.map((id) => fleet.launch(id)));
  const cas = o.cas ?? new InMemoryCasStore();
  const metrics: Harness['metrics'] = [];
  const workloads: Workload[] = [];
  const local = localWorkflows({
    definitions: o.definitions ?? definitions(),
    cas,
    fleet,
    secret: SECRET,
    tiers: o.tiers ?? {},
    nodeTimeoutMs: 5000,
    metric: (key, value, dims) => metrics.push({ key, value, ...(dims ? { dims } : {}) }),
    waitOverridesMs: { WaitForNode: 100 },
    retryIntervalMs: 20,
    ...(o.wrapSteps ? { wrapSteps: o.wrapSteps } : {}),
    ...(o.sdk ? { wrapSdk: o.sdk } : {}),
  });
  const { deps, runner } = local;
  const doc = await deps.ring.create(
    initialRing(
      launched.map((n) => ({ id: n.nodeId, url: n.url, instance: n.nodeId })),
      o.rangesPerNode ?? 2,
    ),
  );
  await Promise.all(launched.map((n) => deps.nodes.pushRing(n.url, doc)));
  return {
    fleet,
    cas,
    ring: deps.ring,
    client: deps.nodes,
    migrator: deps.migrator,
    progress: deps.progress,
    deps,
    runner,
    metrics,
    workloads,
    urls: async () => Object.fromEntries((await fleet.list()).map((n) => [n.nodeId, n.url])),
    close: async () => {
      await Promise.all(workloads.map((w) => w.close()));
      await local.close();
      await fleet.closeAll();
    },
  };
}

/**
 * Loads the workload's keys, runs `workflow` to its end under concurrent read/write load, and stops the load.
 * The workload stays open for verification (`w.verify`); `h.close()` closes it.
 */
export async function runUnderLoad(
  h: Harness,
  workflow: WorkflowName,
  input: Record<string, unknown>,
  concurrency = 4,
): Promise<{ w: Workload; done: LocalExecution; name: string }> {
  const w = new Workload(h.ring);
  h.workloads.push(w);
  await w.load();
  w.start(concurrency);
  try {
    const exec = h.runner.start(workflow, input);
    return { w, done: await h.runner.wait(exec.name), name: exec.name };
  } finally {
    await w.stop();
  }
}
