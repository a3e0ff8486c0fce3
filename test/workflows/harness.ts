/**
 * Runs the synthesized workflow definitions under aws-local-stepfunctions against real local parts: cache-node
 * processes (the local fleet stands in for EC2 RunInstances/TerminateInstances), the ring and migration
 * documents in a CAS store, and the real step handlers.
 */
import { initialRing } from '../../layers/core/ring/document.js';
import { InMemoryCasStore, RingStore, type CasStore } from '../../layers/core/ring/store.js';
import { LocalWorkflowRunner, type LocalExecution, type SdkIntegration } from '../../layers/core/workflows/local-runner.js';
import { ProgressStore, ScaleLocks } from '../../layers/core/workflows/progress.js';
import { localFleetIntegration } from '../../layers/core/workflows/sdk-integrations.js';
import { stepHandlers, type WorkflowDeps } from '../../layers/core/workflows/step-handlers.js';
import { Migrator } from '../../layers/core/warm/migration.js';
import { NodeClient } from '../../layers/core/warm/node-client.js';
import { synthesizeWorkflowDefinitions, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import type { WorkflowName } from '../../layers/core/workflows/progress.js';
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

export async function harness(o: { tiers?: WorkflowDeps['tiers']; fleet?: Parameters<typeof localFleet>[0]; nodes?: string[]; rangesPerNode?: number; sdk?: (fleetSdk: SdkIntegration) => SdkIntegration; wrapSteps?: (h: ReturnType<typeof stepHandlers>) => ReturnType<typeof stepHandlers> } = {}): Promise<Harness> {
  const fleet = localFleet(o.fleet);
  const ids = o.nodes ?? ['n1', 'n2', 'n3'];
  const launched = await Promise.all(ids.map((id) => fleet.launch(id)));
  const cas = new InMemoryCasStore();
  const ring = new RingStore(cas);
  const doc = await ring.create(initialRing(launched.map((n) => ({ id: n.nodeId, url: n.url, instance: n.nodeId })), o.rangesPerNode ?? 2));
  const client = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  await Promise.all(launched.map((n) => client.pushRing(n.url, doc)));
  const migrator = new Migrator({ ring, docs: cas, client });
  const progress = new ProgressStore(cas);
  const metrics: Harness['metrics'] = [];
  const workloads: Workload[] = [];
  const deps: WorkflowDeps = {
    ring,
    migrator,
    nodes: client,
    progress,
    locks: new ScaleLocks(cas),
    nodeUrl: async (n) => (await fleet.list()).find((x) => x.nodeId === n.nodeId)?.url,
    metric: (key, value, dims) => metrics.push({ key, value, ...(dims ? { dims } : {}) }),
    now: Date.now,
    tiers: o.tiers ?? {},
  };
  const steps = stepHandlers(deps);
  const fleetSdk = localFleetIntegration(fleet);
  const runner = new LocalWorkflowRunner({
    definitions: definitions(),
    steps: o.wrapSteps ? o.wrapSteps(steps) : steps,
    sdk: o.sdk ? o.sdk(fleetSdk) : fleetSdk,
    waitOverridesMs: { WaitForNode: 100 },
    retryIntervalMs: 20,
  });
  return {
    fleet,
    cas,
    ring,
    client,
    migrator,
    progress,
    deps,
    runner,
    metrics,
    workloads,
    urls: async () => Object.fromEntries((await fleet.list()).map((n) => [n.nodeId, n.url])),
    close: async () => {
      await Promise.all(workloads.map((w) => w.close()));
      await runner.close();
      await client.close();
      await fleet.closeAll();
    },
  };
}

/**
 * Loads the workload's keys, runs `workflow` to its end under concurrent read/write load, and stops the load.
 * The workload stays open for verification (`w.verify`); `h.close()` closes it.
 */
export async function runUnderLoad(h: Harness, workflow: WorkflowName, input: Record<string, unknown>, concurrency = 4): Promise<{ w: Workload; done: LocalExecution; name: string }> {
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
