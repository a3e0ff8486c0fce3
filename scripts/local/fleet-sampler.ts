/**
 * Strata/Fleet for the local dashboard. In AWS the cost publisher reads the fleet (ring document and each node's
 * /stats) and publishes it; locally, when a warm tier is configured, this sampler reads the same fleet state with
 * the publisher's own reader and records it in the local metrics store every resolution step.
 */
import { readFleetState, type FleetState } from '../../core/cost/publisher/fleet-state.js';
import { METRICS, type MetricDef } from '../../core/metrics/metric-catalog.js';
import type { LocalMetricsStore } from '../../core/metrics/local-store.js';
import type { RuntimeEnv } from '../../core/composition/runtime-env.js';
import { DEFAULT_NODE_STATS_INTERVAL_MS } from '../../core/ring/node-reports.js';
import { RingStore, S3CasStore } from '../../core/ring/store.js';
import { casStoreFromEnv } from '../../core/composition/warm-tier-env.js';
import { NodeClient } from '../../core/nodes/node-client.js';

export interface FleetSamplerOptions {
  env: RuntimeEnv;
  store: LocalMetricsStore;
  /** `Environment` dimension value. */
  environment: string;
  /** @default the store's resolution */
  intervalMs?: number;
}

export interface FleetSampler {
  /** Reads the fleet now and records it. */
  sample(): Promise<FleetState>;
  stop(): Promise<void>;
}

/** Records a fleet state as the Strata/Fleet points the cost publisher would publish. */
export function recordFleetState(store: LocalMetricsStore, environment: string, state: FleetState, at: number): void {
  const put = (def: MetricDef, value: number, extra: Record<string, string> = {}) =>
    store.record(
      { namespace: def.namespace, name: def.name, unit: def.unit, dimensions: { Environment: environment, ...extra } },
      value,
      at,
    );
  put(METRICS.nodes, state.nodes);
  for (const f of state.fills) put(METRICS.nodeFill, f.percent, { Node: f.node });
  if (state.maxFillPercent !== undefined) put(METRICS.maxNodeFill, state.maxFillPercent);
  put(METRICS.migrationsInProgress, state.migrationsInProgress);
  put(METRICS.silentNodes, state.silent.length);
}

/** Starts sampling when the configuration has a warm tier (STRATA_WARM_RING_DIR or _BUCKET); else undefined. */
export function startFleetSampler(opts: FleetSamplerOptions): FleetSampler | undefined {
  const { env } = opts;
  const cas = casStoreFromEnv(env);
  if (!cas) return undefined;
  const ring = new RingStore(cas);
  const client = new NodeClient({ secret: env.STRATA_WARM_SECRET!, timeoutMs: env.STRATA_WARM_TIMEOUT_MS });
  let warned = false;
  let running: Promise<unknown> = Promise.resolve();

  const sample = async (): Promise<FleetState> => {
    // The nodes run on this machine: ask each for its /stats and read it as a report written just now, so the
    // local dashboard does not depend on the nodes writing reports to the local ring store.
    const nodeReport = async (n: { id: string; url: string }) => {
      const stats = await client.stats(n.url);
      return { nodeId: n.id, at: Date.now(), intervalMs: DEFAULT_NODE_STATS_INTERVAL_MS, stats };
    };
    const state = await readFleetState({ ring: () => ring.load(), nodeReport });
    recordFleetState(opts.store, opts.environment, state, Date.now());
    return state;
  };
  const tick = () => {
    running = sample().catch((e: unknown) => {
      // The dashboard shows the gap; one line in the console is enough.
      if (!warned) console.warn(`strata: fleet metrics not sampled: ${e instanceof Error ? e.message : String(e)}`);
      warned = true;
    });
  };
  const timer = setInterval(tick, opts.intervalMs ?? opts.store.resolutionMs);
  timer.unref();
  tick();
  return {
    sample,
    stop: async () => {
      clearInterval(timer);
      await running;
      await client.close();
      if (cas instanceof S3CasStore) cas.close();
    },
  };
}
