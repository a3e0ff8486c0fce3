import { randomBytes } from 'node:crypto';
import { existsSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { initialRing } from '../../core/ring/document.js';
import { RingView } from '../../core/ring/view.js';
import { NodeHealthChecker } from '../../core/nodes/health-check.js';
import { httpProbe } from '../../core/nodes/health-probe.js';
import { type MarkedDown } from '../../core/nodes/health-snapshot.js';
import { HealthControls } from '../../core/nodes/health-controls.js';
import type { WorkflowService } from '../../core/workflows/admin-service.js';
import type { WarmTier } from '../../core/tiers/warm-tier.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { LOCAL_WARM_FOLDER } from '../../core/tiers/storage-key.js';
import type { Tier } from '../../core/tiers/tier.js';
import { LocalFleet } from '../../core/nodes/local-fleet.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { localWorkflows, type LocalWorkflows, type LocalWorkflowsOptions } from '../../core/workflows/local/local-workflows.js';
import { METRICS } from '../../core/metrics/metric-catalog.js';
import type { LocalMetricsStore } from '../../core/metrics/local-store.js';

/**
 * The warm tier of `npm start` when STRATA_LOCAL_NODES=N: N cache-node processes (the local fleet provider) with
 * their data under `<dataDir>/_warm/nodes`, a ring over them in `<dataDir>/_warm/ring`, and the shared secret —
 * started fresh on every run. The same fleet then stands in for EC2 in the workflows, so the admin API can
 * scale the local warm tier out and in. `<dataDir>` is also the folder tier's, one folder per namespace: the
 * warm tier's folder starts with '_' (LOCAL_WARM_FOLDER), so it is never a namespace's.
 */
export interface LocalWarm {
  fleet: LocalFleet;
  ringDir: string;
  secret: string;
  urls: string[];
  close(): Promise<void>;
}

export async function startLocalWarm(o: {
  nodes: number;
  dataDir: string;
  capacityBytes?: number;
  log?: (line: string) => void;
}): Promise<LocalWarm> {
  const root = join(o.dataDir, LOCAL_WARM_FOLDER);
  rmSync(root, { recursive: true, force: true });
  const secret = randomBytes(24).toString('hex');
  const ringDir = join(root, 'ring');
  const fleet = new LocalFleet({
    rootDir: join(root, 'nodes'),
    secret,
    // The nodes read the ring folder every second, so each serves on a lease (LOCAL_LEASE_MS) and a node marked
    // DOWN, or cut off from the folder, stops serving by itself (see cachenode/src/ownership.ts).
    env: { STRATA_NODE_RING_STORE: `file:${ringDir}`, STRATA_NODE_RING_POLL_MS: '1000' },
    ...(o.capacityBytes ? { capacityBytes: o.capacityBytes } : {}),
  });
  try {
    const launched = await Promise.all(Array.from({ length: o.nodes }, (_, i) => fleet.launch(`n${i + 1}`)));
    const ring = initialRing(
      launched.map((n) => ({ id: n.nodeId, url: n.url, instance: n.nodeId })),
      2,
    );
    const doc = await new RingStore(new FileCasStore(ringDir)).create({ ...ring, leaseMs: LOCAL_LEASE_MS });
    const client = new NodeClient({ secret });
    await Promise.all(launched.map((n) => client.pushRing(n.url, doc)));
    await client.close();
    o.log?.(`started ${launched.length} cache node(s): ${launched.map((n) => `${n.nodeId} ${n.url}`).join(', ')}`);
    return { fleet, ringDir, secret, urls: launched.map((n) => n.url), close: () => fleet.close() };
  } catch (e) {
    await fleet.close();
    throw e;
  }
}

/** The local ring's lease: five of the local nodes' 1 s reads of the ring folder. */
const LOCAL_LEASE_MS = 5000;

/**
 * The failure detector of the local warm tier (core/nodes/health-check.ts), ticking every second: the API's warm
 * tier reports each node call's reach (suspicion), the checker probes suspects over HTTP and marks a node DOWN in
 * the ring folder once confirmed. Then reads of its ranges go to the next tier, and writes skip it once its lease
 * has run out. With `replace`, each node marked DOWN is replaced by the ReplaceNode workflow. Marking (so
 * replacement) is paused by the admin API's replacement switch, or from the start with STRATA_NODE_REPLACEMENT=paused;
 * the checker still probes and reports.
 */
export function startLocalHealthCheck(
  warm: LocalWarm,
  tier: WarmTier,
  log: (line: string) => void,
  replace?: { workflows: WorkflowService },
): { checker: NodeHealthChecker; stop(): Promise<void> } {
  const cas = new FileCasStore(warm.ringDir);
  const store = new RingStore(cas);
  const view = new RingView({ store, refreshIntervalMs: 1000 });
  const checker = new NodeHealthChecker({
    ring: store,
    probe: httpProbe(tier.client, 1000),
    paused: process.env.STRATA_NODE_REPLACEMENT === 'paused',
    controls: new HealthControls(cas),
    log: (level, message, fields) => level !== 'debug' && log(`${message} ${JSON.stringify(fields)}`),
    // A node marked DOWN is replaced at once; with no fillNamespaces, the replacement is filled with every namespace
    // the cold tier (the data folder) holds, as the detector in AWS starts it.
    ...(replace
      ? {
          onMarked: async (m: MarkedDown) => {
            const input = { nodeId: m.node, reason: 'health check' };
            const run = await replace.workflows.start('replace-node', input);
            log(`started ${run.execution} to replace cache node ${m.node}`);
          },
        }
      : {}),
  });
  const unobserve = tier.client.observe((url, ok) => {
    const node = view.current()?.doc.nodes.find((n) => n.url === url);
    if (node) checker.report(node.id, ok);
  });
  checker.start(1000);
  return {
    checker,
    stop: async () => {
      unobserve();
      view.close();
      await checker.stop();
    },
  };
}

/**
 * Removes what local warm tiers before this layout left in `<dataDir>/warm` (its `nodes` and `ring` folders, and
 * the folder itself when nothing else is in it); returns whether there was anything. Those runs wiped the whole
 * folder at every start, with the entries of a namespace named `warm` in it; now that namespace's folder is its
 * own. Its entries live in two-hex-digit shard folders, never in `nodes` or `ring`, so they stay.
 */
export function removeLegacyWarmFolders(dataDir: string): boolean {
  const legacy = join(dataDir, 'warm');
  const leftovers = ['nodes', 'ring'].map((f) => join(legacy, f)).filter((p) => existsSync(p));
  for (const p of leftovers) rmSync(p, { recursive: true, force: true });
  if (leftovers.length > 0) {
    try {
      rmdirSync(legacy);
    } catch {
      // Not empty: the namespace `warm` has entries there.
    }
  }
  return leftovers.length > 0;
}

/**
 * The workflows of the local run, over the local fleet: the state machines are synthesized from the CDK
 * constructs (about a second, once) and run in-process by aws-local-stepfunctions. With `metrics`, the steps'
 * Strata/Workflows metrics (sessions, bytes moved, keys evicted, node allocation time), which their Lambdas
 * publish in AWS, go to the local store for the dashboard.
 */
export async function startLocalWorkflows(
  warm: LocalWarm,
  tiers: Tier[],
  metrics?: { store: LocalMetricsStore; environment: string },
  uploads?: LocalWorkflowsOptions['uploads'],
): Promise<LocalWorkflows> {
  const { synthesizeWorkflowDefinitions } = await import('../../cdk/lib/workflow-definitions.js');
  const byName = (n: string) => tiers.find((t) => t.name === n);
  return localWorkflows({
    definitions: synthesizeWorkflowDefinitions(),
    cas: new FileCasStore(warm.ringDir),
    fleet: warm.fleet,
    secret: warm.secret,
    tiers: { hot: byName('hot'), warm: byName('warm'), cold: byName('cold') },
    ...(uploads ? { uploads } : {}),
    ...(metrics ? { metric: storeMetric(metrics.store, metrics.environment) } : {}),
  });
}

/** A workflow steps' `metric` callback that records into the local store (catalog metrics, as the steps name them). */
export function storeMetric(
  store: LocalMetricsStore,
  environment: string,
): (key: keyof typeof METRICS, value: number, dims?: Record<string, string>) => void {
  return (key, value, dims = {}) => {
    const def = METRICS[key];
    store.record(
      { namespace: def.namespace, name: def.name, unit: def.unit, dimensions: { Environment: environment, ...dims } },
      value,
    );
  };
}
