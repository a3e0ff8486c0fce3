import type { MetricKey } from '../metrics/catalog.js';
import { RingStore, type CasStore } from '../ring/store.js';
import type { FleetProvider } from '../warm/fleet.js';
import { Migrator } from '../warm/migration.js';
import { NodeClient } from '../warm/node-client.js';
import { LocalWorkflowRunner, type AslDefinition } from './local-runner.js';
import { ProgressStore, ScaleLocks, type WorkflowName } from './progress.js';
import { localFleetIntegration } from './sdk-integrations.js';
import { LocalWorkflowService } from './service.js';
import { stepHandlers, type WorkflowDeps } from './step-handlers.js';

export interface LocalWorkflowsOptions {
  /** The synthesized state machines: `synthesizeWorkflowDefinitions()` of cdk/lib/workflow-definitions.ts. */
  definitions: Record<WorkflowName, AslDefinition>;
  /** The ring's compare-and-set store (locally `new FileCasStore(STRATA_WARM_RING_DIR)`): ring, sessions, progress. */
  cas: CasStore;
  /** Where launched nodes come from (EC2 RunInstances / TerminateInstances stand-in), e.g. the LocalFleet. */
  fleet: FleetProvider;
  /** The fleet's shared secret (STRATA_WARM_SECRET). */
  secret: string;
  /** The local run's tiers, for evict-to-s3 and tier-migrate (the API context's hot, warm and cold tiers). @default none */
  tiers?: WorkflowDeps['tiers'];
  /** Wait states to shorten, ms, by state name. @default { WaitForNode: 1000 } */
  waitOverridesMs?: Record<string, number>;
  /** Where the steps' metrics go. @default dropped */
  metric?: (key: MetricKey, value: number, dims?: Record<string, string>) => void;
}

export interface LocalWorkflows {
  /** For the API context's `workflows` (what the admin routes use). */
  service: LocalWorkflowService;
  runner: LocalWorkflowRunner;
  /** Aborts running executions and closes the node client. */
  close(): Promise<void>;
}

/**
 * The workflows of a local run (`npm start` with a warm tier): the synthesized state machines run in this process
 * by a {@link LocalWorkflowRunner} with the real step handlers over the ring's store, launching and terminating
 * nodes through `fleet`; wrapped in a {@link LocalWorkflowService} for the admin API.
 *
 * @example
 * ```ts
 * const workflows = localWorkflows({ definitions: synthesizeWorkflowDefinitions(), cas: new FileCasStore(env.STRATA_WARM_RING_DIR!), fleet, secret: env.STRATA_WARM_SECRET! });
 * const local = await startLocalServer({ context: { ...ctx, workflows: workflows.service }, port });
 * ```
 */
export function localWorkflows(o: LocalWorkflowsOptions): LocalWorkflows {
  const ring = new RingStore(o.cas);
  const client = new NodeClient({ secret: o.secret });
  const progress = new ProgressStore(o.cas);
  const steps = stepHandlers({
    ring,
    migrator: new Migrator({ ring, docs: o.cas, client }),
    nodes: client,
    progress,
    locks: new ScaleLocks(o.cas),
    nodeUrl: async (n) => (await o.fleet.list()).find((x) => x.nodeId === n.nodeId)?.url,
    metric: o.metric ?? (() => {}),
    now: Date.now,
    tiers: o.tiers ?? {},
  });
  const runner = new LocalWorkflowRunner({ definitions: o.definitions, steps, sdk: localFleetIntegration(o.fleet), waitOverridesMs: o.waitOverridesMs ?? { WaitForNode: 1000 } });
  return {
    service: new LocalWorkflowService({ runner, progress }),
    runner,
    close: async () => {
      await runner.close();
      await client.close();
    },
  };
}
