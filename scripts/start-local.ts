/**
 * `npm start`: Strata's HTTP API on http://localhost:$PORT (default 8080) with embedded defaults — an in-process
 * memory hot tier and a local-folder cold tier under .strata-data/ — so no AWS account, Docker or Redis is
 * needed. REDIS_URL switches the hot tier to Redis; STRATA_S3_BUCKET (+ STRATA_S3_ENDPOINT for LocalStack)
 * switches the cold tier to S3. STRATA_LOCAL_NODES=N adds a warm tier of N local cache-node processes, and with
 * it the workflows (scale-out/in, evict to S3, tier migration) behind the admin API.
 */
import { join, resolve } from 'node:path';
import { loadRuntimeEnv } from '../core/composition/runtime-env.js';
import { ConfigError } from '../core/errors.js';
import { buildApiContext } from '../core/composition/api-context.js';
import { warmTierFromEnv } from '../core/composition/warm-tier-env.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { WarmTier } from '../core/tiers/warm-tier.js';
import { LOCAL_KEYS_FOLDER, LOCAL_POLICY_FOLDER, LOCAL_WARM_FOLDER } from '../core/tiers/storage-key.js';
import { LocalMetricsStore } from '../core/metrics/local-store.js';
import { startFleetSampler } from './local/fleet-sampler.js';
import { removeLegacyWarmFolders, startLocalHealthCheck, startLocalWarm, startLocalWorkflows } from './local/local-warm.js';
import { startLocalPolicyEvaluator } from './local/policy-evaluator.js';
import { startLocalServer } from './local/server.js';

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 8080);
  const host = process.env.HOST ?? '127.0.0.1';
  const dataDir = process.env.STRATA_LOCAL_DIR ?? resolve('.strata-data');
  const localNodes = Number(process.env.STRATA_LOCAL_NODES ?? 0);
  if (!Number.isInteger(localNodes) || localNodes < 0 || localNodes > 16)
    throw new ConfigError(`STRATA_LOCAL_NODES must be a whole number from 0 to 16 (got '${process.env.STRATA_LOCAL_NODES}')`);
  if (localNodes > 0 && (process.env.STRATA_WARM_RING_DIR || process.env.STRATA_WARM_RING_BUCKET))
    throw new ConfigError(
      'STRATA_LOCAL_NODES starts its own cache nodes and ring: unset STRATA_WARM_RING_DIR / STRATA_WARM_RING_BUCKET',
    );
  // Earlier versions kept the local warm tier in <dataDir>/warm, the folder of a namespace named `warm`.
  if (removeLegacyWarmFolders(dataDir)) {
    console.log(
      `strata: removed an earlier version's local warm tier from ${join(dataDir, 'warm')} (now in ${LOCAL_WARM_FOLDER}/)`,
    );
  }
  const warm =
    localNodes > 0 ? await startLocalWarm({ nodes: localNodes, dataDir, log: (l) => console.log(`strata: ${l}`) }) : undefined;
  // STRATA_PUBLIC_URL names where clients reach this server (a proxy, another host name): presigned upload and
  // download URLs are built on it. Unset, they are built on http://localhost:<port> and the server answers each
  // request with them on the host the request came to, when that host is this machine (see requestBaseUrl).
  const configuredPublicUrl = process.env.STRATA_PUBLIC_URL || undefined;
  const env = loadRuntimeEnv({
    ...process.env,
    STRATA_LOCAL_DIR: dataDir,
    STRATA_PUBLIC_URL: configuredPublicUrl ?? `http://localhost:${port}`,
    ...(warm ? { STRATA_WARM_RING_DIR: warm.ringDir, STRATA_WARM_SECRET: warm.secret } : {}),
    // Policies edited at runtime outlive the run (the warm tier's ring folder is wiped at every start); a second
    // server on the same data folder picks them up within a second.
    STRATA_POLICY_STORE: process.env.STRATA_POLICY_STORE || `file:${join(dataDir, LOCAL_POLICY_FOLDER)}`,
    STRATA_POLICY_REFRESH_MS: process.env.STRATA_POLICY_REFRESH_MS || '1000',
    // Encrypt rules' master keys: one file per key, created the first time a policy names it, kept across restarts
    // (values encrypted under a key are lost with its file).
    STRATA_KEYRING: process.env.STRATA_KEYRING || `file:${join(dataDir, LOCAL_KEYS_FOLDER)}`,
  });
  const ctx = buildApiContext(env, {
    warmTier: warmTierFromEnv,
    policyTimer: true,
    backgroundEvaluator: true,
    createLocalKeys: true,
  });
  // One store for everything the dashboard draws: the handlers' request metrics, the workflow steps' metrics, the fleet.
  const metrics = new LocalMetricsStore();
  const workflows = warm
    ? await startLocalWorkflows(warm, ctx.tiers, { store: metrics, environment: env.STRATA_ENV }, () => ({
        coordinator: ctx.coordinator,
        ...(ctx.presigner ? { presigner: ctx.presigner } : {}),
      }))
    : undefined;
  const warmTier = ctx.tiers.find((t): t is WarmTier => t instanceof WarmTier);
  const replace = workflows ? { workflows: workflows.service } : undefined;
  const healthCheck =
    warm && warmTier ? startLocalHealthCheck(warm, warmTier, (l) => console.log(`strata: ${l}`), replace) : undefined;
  // Leftovers of a crashed run (temp files, abandoned uploads) in the folder tier.
  if (ctx.presigner instanceof LocalFolderTier)
    await ctx.presigner.sweep().catch((e) => console.warn(`strata: could not clean ${env.STRATA_LOCAL_DIR}: ${e}`));
  const fleetSampler = startFleetSampler({ env, store: metrics, environment: env.STRATA_ENV });
  // The policy's background rules (alert, grow, shrink, copy, move, delete), every second, against the tiers' state.
  const policyEvaluator = ctx.livePolicy
    ? startLocalPolicyEvaluator({
        live: ctx.livePolicy,
        ...(workflows ? { workflows: workflows.service } : {}),
        ...(fleetSampler ? { fleet: fleetSampler.sample } : {}),
        tiers: ctx.coordinator.tierList(),
        metrics,
        environment: env.STRATA_ENV,
      })
    : undefined;
  const local = await startLocalServer({
    context: {
      ...ctx,
      ...(workflows ? { workflows: workflows.service } : {}),
      ...(policyEvaluator ? { policyFirings: policyEvaluator.evaluator } : {}),
    },
    port,
    host,
    metrics,
    publicUrl: env.STRATA_PUBLIC_URL,
    hostUrls: configuredPublicUrl === undefined,
  });
  const url = (configuredPublicUrl ?? `http://localhost:${port}`).replace(/\/+$/, '');
  // One write: whoever watches for the serving line (a test, a supervisor) gets the tiers it serves with it.
  const tiers = ctx.describe().map((line) => `  ${line}`);
  console.log([`\nStrata is serving its API on ${url} (dashboard: ${url}/dashboard)\n`, ...tiers].join('\n'));
  console.log(
    `\nTry it:\n  curl -X PUT --data-binary 'hello' ${url}/v1/ns/demo/keys/greeting\n  curl -i ${url}/v1/ns/demo/keys/greeting\n  curl ${url}/v1/stats`,
  );
  if (workflows)
    console.log(`  npx strata workflow start scale-out --wait --endpoint ${url}    # grow the local warm tier by a node`);
  else console.log('  (STRATA_LOCAL_NODES=3 npm start adds a warm tier of local cache nodes and the scaling workflows)');
  console.log('\nCtrl-C stops it (write-back data is flushed first).');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${signal}: stopping`);
    await policyEvaluator?.stop();
    await healthCheck?.stop();
    await fleetSampler?.stop();
    await local.close();
    await workflows?.close();
    ctx.livePolicy?.stop();
    await ctx.coordinator.close();
    await warm?.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((e) => {
  console.error(e instanceof ConfigError ? `strata: ${e.message}` : e);
  process.exit(1);
});
