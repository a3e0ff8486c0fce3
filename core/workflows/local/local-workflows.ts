import type { MetricKey } from '../../metrics/metric-catalog.js';
import type { CasStore } from '../../ring/store.js';
import type { FleetProvider } from '../../nodes/fleet.js';
import { NodeClient } from '../../nodes/node-client.js';
import { LocalWorkflowRunner, type AslDefinition, type SdkIntegration } from './asl-runner.js';
import type { WorkflowName } from '../progress.js';
import { LOCAL_FLEET_SUBNETS, type FleetSubnet } from '../steps/fleet-placement.js';
import { localFleetIntegration } from './sdk-integrations.js';
import { LocalWorkflowService } from './local-workflow-service.js';
import { stepHandlers, workflowDeps, type WorkflowDeps } from '../steps/handlers.js';
import type { StepHandlers } from '../steps/registry.js';

export interface LocalWorkflowsOptions {
  /** The synthesized state machines: `synthesizeWorkflowDefinitions()` of cdk/lib/workflow-definitions.ts. */
  definitions: Record<WorkflowName, AslDefinition>;
  /** The ring's compare-and-set store (locally `new FileCasStore(STRATA_WARM_RING_DIR)`): ring, sessions, progress. */
  cas: CasStore;
  /** Where launched nodes come from (EC2 RunInstances / TerminateInstances stand-in), e.g. the LocalFleet. */
  fleet: FleetProvider;
  /** The fleet's shared secret (STRATA_WARM_SECRET). */
  secret: string;
  /**
   * The local run's tiers, for evict-to-s3, tier-migrate and replace-node's fill (the API context's hot, warm and cold
   * tiers). @default none
   */
  tiers?: WorkflowDeps['tiers'];
  /**
   * The coordinator and presigning tier the upload-commit workflow commits uploads with (the API context's: the same
   * commit the synchronous completion runs), built on first use. @default none (that workflow then fails)
   */
  uploads?: WorkflowDeps['uploads'];
  /** Wait states to shorten, ms, by state name. @default { WaitForNode: 1000 } */
  waitOverridesMs?: Record<string, number>;
  /** Where the steps' metrics go. @default dropped */
  metric?: (key: MetricKey, value: number, dims?: Record<string, string>) => void;
  /**
   * The "subnets" ScaleOut and ReplaceNode launch nodes into (the local fleet ignores them; the ring records their AZs).
   * @default {@link LOCAL_FLEET_SUBNETS}
   */
  fleetSubnets?: readonly FleetSubnet[];
  /** Timeout of each cache-node call. @default NodeClient's */
  nodeTimeoutMs?: number;
  /** Pause between retries, ms. @default LocalWorkflowRunner's */
  retryIntervalMs?: number;
  /** Wraps the step handlers (tests inject failures here). */
  wrapSteps?: (steps: StepHandlers) => StepHandlers;
  /** Wraps the local fleet's stand-in for the EC2 SDK integrations (e.g. to call LocalStack instead). */
  wrapSdk?: (fleetSdk: SdkIntegration) => SdkIntegration;
}

export interface LocalWorkflows {
  /** For the API context's `workflows` (what the admin routes use). */
  service: LocalWorkflowService;
  runner: LocalWorkflowRunner;
  /** What the steps run with (the ring, the node client, the progress records, ...). */
  deps: WorkflowDeps;
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
  const client = new NodeClient({ secret: o.secret, ...(o.nodeTimeoutMs ? { timeoutMs: o.nodeTimeoutMs } : {}) });
  const deps = workflowDeps({
    cas: o.cas,
    nodes: client,
    nodeUrl: async (n) => (await o.fleet.list()).find((x) => x.nodeId === n.nodeId)?.url,
    metric: o.metric ?? (() => {}),
    tiers: o.tiers ?? {},
    fleetSubnets: o.fleetSubnets ?? LOCAL_FLEET_SUBNETS,
    ...(o.uploads ? { uploads: o.uploads } : {}),
  });
  const steps = stepHandlers(deps);
  const fleetSdk = localFleetIntegration(o.fleet);
  const runner = new LocalWorkflowRunner({
    definitions: o.definitions,
    steps: o.wrapSteps ? o.wrapSteps(steps) : steps,
    sdk: o.wrapSdk ? o.wrapSdk(fleetSdk) : fleetSdk,
    waitOverridesMs: o.waitOverridesMs ?? { WaitForNode: 1000 },
    ...(o.retryIntervalMs !== undefined ? { retryIntervalMs: o.retryIntervalMs } : {}),
  });
  return {
    service: new LocalWorkflowService({ runner, progress: deps.progress }),
    runner,
    deps,
    close: async () => {
      await runner.close();
      await client.close();
    },
  };
}
