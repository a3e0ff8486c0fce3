import { FileCasStore, RingStore, S3CasStore, type CasStore } from '../ring/store.js';
import { RingView } from '../ring/view.js';
import { WarmTier } from '../tiers/warm-tier.js';
import { ConfigError, type RuntimeEnv } from './config.js';
import { readSecret } from './secrets.js';

/** The ring's compare-and-set store: an S3 prefix (AWS) or a folder (local runs); undefined when neither is set. */
export function casStoreFromEnv(env: RuntimeEnv): CasStore | undefined {
  if (env.STRATA_WARM_RING_BUCKET) {
    return new S3CasStore({ bucket: env.STRATA_WARM_RING_BUCKET, prefix: env.STRATA_WARM_RING_PREFIX, clientConfig: { region: env.AWS_REGION, ...(env.STRATA_S3_ENDPOINT ? { endpoint: env.STRATA_S3_ENDPOINT, forcePathStyle: true } : {}) } });
  }
  return env.STRATA_WARM_RING_DIR ? new FileCasStore(env.STRATA_WARM_RING_DIR) : undefined;
}

/**
 * The warm tier when a ring store is configured (STRATA_WARM_RING_BUCKET in AWS, STRATA_WARM_RING_DIR locally):
 * routes by the cached ring, refreshed from its compare-and-set store. Pass to buildApiContext as `warmTier`.
 * Needs the fleet secret in STRATA_WARM_SECRET: where only its ARN is configured (AWS), load the environment
 * with loadRuntimeEnvWithSecrets (runtime/secrets.ts).
 */
export function warmTierFromEnv(env: RuntimeEnv): WarmTier | undefined {
  const cas = casStoreFromEnv(env);
  if (!cas) return undefined;
  if (!env.STRATA_WARM_SECRET) {
    throw new ConfigError(
      env.STRATA_WARM_SECRET_ARN
        ? 'the warm tier needs the fleet secret: STRATA_WARM_SECRET_ARN is read at start-up by loadRuntimeEnvWithSecrets (runtime/secrets.ts), which this runtime did not use'
        : 'the warm tier needs the fleet secret: set STRATA_WARM_SECRET_ARN (or STRATA_WARM_SECRET)',
    );
  }
  const ring = new RingView({ store: new RingStore(cas), onError: (e) => console.error(JSON.stringify({ level: 'warn', msg: 'ring refresh failed', error: String(e) })) });
  return new WarmTier({ ring, ownsRing: true, secret: env.STRATA_WARM_SECRET, timeoutMs: env.STRATA_WARM_TIMEOUT_MS });
}

/** The fleet secret: STRATA_WARM_SECRET, or the Secrets Manager secret STRATA_WARM_SECRET_ARN names. */
export async function readFleetSecret(env: Pick<RuntimeEnv, 'STRATA_WARM_SECRET' | 'STRATA_WARM_SECRET_ARN' | 'AWS_REGION'>): Promise<string> {
  const secret = env.STRATA_WARM_SECRET ?? (env.STRATA_WARM_SECRET_ARN ? await readSecret(env.STRATA_WARM_SECRET_ARN, env.AWS_REGION) : undefined);
  if (!secret) throw new ConfigError('the fleet secret is needed: set STRATA_WARM_SECRET_ARN (or STRATA_WARM_SECRET)');
  return secret;
}
