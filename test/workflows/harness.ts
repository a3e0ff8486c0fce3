/**
 * Runs the synthesized workflow definitions under aws-local-stepfunctions against real local parts: cache-node
 * processes (the local fleet stands in for EC2 RunInstances/TerminateInstances), the ring and migration
 * documents in a CAS store, and the real step handlers.
 */
import { initialRing } from '../../layers/core/ring/document.js';
import { InMemoryCasStore, RingStore, type CasStore } from '../../layers/core/ring/store.js';
import { LocalWorkflowRunner, type SdkIntegration } from '../../layers/core/workflows/local-runner.js';
import { ProgressStore, ScaleLocks } from '../../layers/core/workflows/progress.js';
import { localFleetIntegration } from '../../layers/core/workflows/sdk-integrations.js';
import { stepHandlers, type WorkflowDeps } from '../../layers/core/workflows/step-handlers.js';
import { Migrator } from '../../layers/core/warm/migration.js';
import { NodeClient } from '../../layers/core/warm/node-client.js';
import { synthesizeWorkflowDefinitions, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import type { WorkflowName } from '../../layers/core/workflows/progress.js';
import { localFleet, SECRET } from '../integration/warm-fixtures.js';

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
  urls(): Promise<Record<string, string>>;
  close(): Promise<void>;
}

export async function harness(o: { nodes?: string[]; rangesPerNode?: number; sdk?: (fleetSdk: SdkIntegration) => SdkIntegration; wrapSteps?: (h: ReturnType<typeof stepHandlers>) => ReturnType<typeof stepHandlers> } = {}): Promise<Harness> {
  const fleet = localFleet();
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
  const deps: WorkflowDeps = {
    ring,
    migrator,
    nodes: client,
    progress,
    locks: new ScaleLocks(cas),
    nodeUrl: async (n) => (await fleet.list()).find((x) => x.nodeId === n.nodeId)?.url,
    metric: (key, value, dims) => metrics.push({ key, value, ...(dims ? { dims } : {}) }),
    now: Date.now,
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
    urls: async () => Object.fromEntries((await fleet.list()).map((n) => [n.nodeId, n.url])),
    close: async () => {
      await runner.close();
      await client.close();
      await fleet.closeAll();
    },
  };
}
