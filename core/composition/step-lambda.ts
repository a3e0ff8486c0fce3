import { emfDocument, serializeEmf } from '../metrics/emf.js';
import { NodeClient } from '../nodes/node-client.js';
import { stepHandlers, workflowDeps, type WorkflowDeps } from '../workflows/steps/handlers.js';
import type { StepHandlers } from '../workflows/steps/registry.js';
import { buildApiContext, type BuiltContext } from './api-context.js';
import { type RuntimeEnv } from './runtime-env.js';
import { ConfigError } from '../errors.js';
import { loadRuntimeEnvWithSecrets } from './secrets.js';
import { casStoreFromEnv, readFleetSecret, warmTierFromEnv } from './warm-tier-env.js';
import { logLine } from '../util/logger.js';

/**
 * The workflow steps as the step Lambda runs them: the ring and migration documents in the ring store
 * (STRATA_WARM_RING_*), the fleet secret (the ring store's `fleet/secret` with STRATA_WARM_SECRET_FROM_RING, created
 * here when missing; or STRATA_WARM_SECRET, or STRATA_WARM_SECRET_ARN from Secrets Manager),
 * nodes launched into the subnets of STRATA_FLEET_SUBNETS and reached at http://<private IP>:STRATA_NODE_PORT,
 * the tiers for eviction and tier moves as the API builds them, and progress metrics as EMF lines on stdout.
 */
export async function workflowDepsFromEnv(env: RuntimeEnv, secret?: string): Promise<WorkflowDeps> {
  const cas = casStoreFromEnv(env);
  if (!cas)
    throw new ConfigError('the workflow steps need the ring store: set STRATA_WARM_RING_BUCKET (or STRATA_WARM_RING_DIR)');
  // Created here if missing, before any step runs: every node this Lambda launches waits for this secret at boot,
  // and the build (so this) runs at the first step a container serves, ScaleOut's launch included.
  const nodeSecret = secret ?? (await readFleetSecret(env, { create: true }));
  // The tiers (a Redis connection, S3 clients) only when an eviction or tier-migration step first needs them.
  let ctx: BuiltContext | undefined;
  const context = () =>
    (ctx ??= buildApiContext({ ...env, STRATA_WARM_SECRET: nodeSecret }, { flushTimer: false, warmTier: warmTierFromEnv }));
  const tier = (name: string) => context().tiers.find((t) => t.name === name);
  return workflowDeps({
    cas,
    nodes: new NodeClient({ secret: nodeSecret, timeoutMs: env.STRATA_WARM_TIMEOUT_MS }),
    onWarning: (m) => log('warn', m),
    nodeUrl: async (n) => (n.privateIp ? `http://${n.privateIp}:${env.STRATA_NODE_PORT}` : undefined),
    fleetSubnets: env.STRATA_FLEET_SUBNETS ?? [],
    metric: (key, value, dims) =>
      process.stdout.write(
        serializeEmf([
          emfDocument({ timestamp: Date.now(), dimensions: { Environment: env.STRATA_ENV, ...dims }, values: { [key]: value } }),
        ]),
      ),
    // The upload-commit workflow commits with the coordinator, exactly as the API's synchronous completion does.
    uploads: () => {
      const built = context();
      return { coordinator: built.coordinator, ...(built.presigner ? { presigner: built.presigner } : {}) };
    },
    tiers: {
      get hot() {
        return tier('hot');
      },
      get warm() {
        return tier('warm');
      },
      get cold() {
        return tier('cold');
      },
    },
  });
}

function log(level: string, msg: string): void {
  logLine({ level, msg });
}

let current: Promise<StepHandlers> | undefined;

/**
 * The container's step handlers, built from the environment on first use, the fleet secret read (or created) then
 * (composition/secrets.ts): once per container, at the start of its first step. A build that fails is not kept: the
 * next step retries it.
 */
export function getStepHandlers(): Promise<StepHandlers> {
  if (!current) {
    const building = loadRuntimeEnvWithSecrets().then(workflowDepsFromEnv).then(stepHandlers);
    current = building;
    building.catch(() => {
      if (current === building) current = undefined;
    });
  }
  return current;
}
