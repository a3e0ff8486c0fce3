import { ensureFleetSecret, readStoredFleetSecret } from '../ring/fleet-secret.js';
import { FLEET_SECRET_KEY } from '../ring/node-reports.js';
import { FileCasStore, RingStore, S3CasStore, type CasStore } from '../ring/store.js';
import { RingView } from '../ring/view.js';
import { WarmTier } from '../tiers/warm-tier.js';
import { type RuntimeEnv } from './runtime-env.js';
import { ConfigError } from '../errors.js';
import { readSecret } from './secrets.js';
import { log, registerSecret } from '../util/logger.js';

/** What reaching the ring store takes. */
type RingStoreEnv = Pick<RuntimeEnv, 'STRATA_WARM_RING_BUCKET' | 'STRATA_WARM_RING_PREFIX' | 'STRATA_WARM_RING_DIR'> &
  Pick<RuntimeEnv, 'STRATA_S3_ENDPOINT' | 'AWS_REGION'>;

/** The ring's compare-and-set store: an S3 prefix (AWS) or a folder (local runs); undefined when neither is set. */
export function casStoreFromEnv(env: RingStoreEnv): CasStore | undefined {
  if (env.STRATA_WARM_RING_BUCKET) {
    return new S3CasStore({
      bucket: env.STRATA_WARM_RING_BUCKET,
      prefix: env.STRATA_WARM_RING_PREFIX,
      clientConfig: {
        region: env.AWS_REGION,
        ...(env.STRATA_S3_ENDPOINT ? { endpoint: env.STRATA_S3_ENDPOINT, forcePathStyle: true } : {}),
      },
    });
  }
  return env.STRATA_WARM_RING_DIR ? new FileCasStore(env.STRATA_WARM_RING_DIR) : undefined;
}

/**
 * The warm tier when a ring store is configured (STRATA_WARM_RING_BUCKET in AWS, STRATA_WARM_RING_DIR locally):
 * routes by the cached ring, refreshed from its compare-and-set store. Pass to buildApiContext as `warmTier`.
 * Needs the fleet secret in STRATA_WARM_SECRET: where it is to be read (AWS: STRATA_WARM_SECRET_FROM_RING, or
 * STRATA_WARM_SECRET_ARN), load the environment with loadRuntimeEnvWithSecrets (composition/secrets.ts).
 */
export function warmTierFromEnv(env: RuntimeEnv): WarmTier | undefined {
  const cas = casStoreFromEnv(env);
  if (!cas) return undefined;
  if (!env.STRATA_WARM_SECRET) {
    const sources = ['STRATA_WARM_SECRET_FROM_RING', 'STRATA_WARM_SECRET_ARN'] as const;
    const where = sources.find((k) => env[k]);
    throw new ConfigError(
      where
        ? `the warm tier needs the fleet secret: ${where} is read at start-up by loadRuntimeEnvWithSecrets (composition/secrets.ts), ` +
            'which this runtime did not use'
        : 'the warm tier needs the fleet secret: set STRATA_WARM_SECRET_FROM_RING=1 (or STRATA_WARM_SECRET)',
    );
  }
  const ring = new RingView({ store: new RingStore(cas), onError: (e) => log.warn('ring refresh failed', { error: e }) });
  registerSecret(env.STRATA_WARM_SECRET); // no log line may carry it
  return new WarmTier({ ring, ownsRing: true, secret: env.STRATA_WARM_SECRET, timeoutMs: env.STRATA_WARM_TIMEOUT_MS });
}

type FleetSecretEnv = Pick<RuntimeEnv, 'STRATA_WARM_SECRET' | 'STRATA_WARM_SECRET_ARN' | 'AWS_REGION'> &
  Partial<Pick<RuntimeEnv, 'STRATA_WARM_SECRET_FROM_RING'> & RingStoreEnv>;

/** The ring store does not hold the fleet secret (yet), and this caller may not create it. */
export class FleetSecretMissingError extends ConfigError {
  constructor(where: string) {
    super(
      `the fleet secret does not exist yet at ${where}: the workflow steps (or the API) create it before any node is launched`,
    );
    this.name = 'FleetSecretMissingError';
  }
}

/**
 * The fleet secret: STRATA_WARM_SECRET; else, with STRATA_WARM_SECRET_FROM_RING, the ring store's `fleet/secret`
 * document; else the Secrets Manager secret STRATA_WARM_SECRET_ARN names.
 *
 * From the ring, `create` makes it when it does not exist yet (ring/fleet-secret.ts: conditional create, so
 * concurrent creators end with the same secret). The workflow steps create (they launch the nodes, which wait for
 * it); so does the API, whose container would otherwise fail every request until a workflow ran. Read-only
 * callers get FleetSecretMissingError.
 */
export async function readFleetSecret(env: FleetSecretEnv, opts: { create?: boolean } = {}): Promise<string> {
  if (env.STRATA_WARM_SECRET) return env.STRATA_WARM_SECRET;
  if (env.STRATA_WARM_SECRET_FROM_RING) {
    const cas = casStoreFromEnv({ ...env, STRATA_WARM_RING_PREFIX: env.STRATA_WARM_RING_PREFIX ?? 'strata-ring' });
    if (!cas) {
      throw new ConfigError(
        'STRATA_WARM_SECRET_FROM_RING needs the ring store holding the secret (STRATA_WARM_RING_BUCKET or _DIR)',
      );
    }
    try {
      if (opts.create) return (await ensureFleetSecret(cas)).secret;
      const secret = await readStoredFleetSecret(cas);
      if (!secret) {
        const bucket = env.STRATA_WARM_RING_BUCKET;
        const store = bucket ? `s3://${bucket}/${env.STRATA_WARM_RING_PREFIX ?? 'strata-ring'}` : env.STRATA_WARM_RING_DIR;
        throw new FleetSecretMissingError(`${store}/${FLEET_SECRET_KEY}`);
      }
      return secret;
    } finally {
      cas.close?.();
    }
  }
  const secret = env.STRATA_WARM_SECRET_ARN ? await readSecret(env.STRATA_WARM_SECRET_ARN, env.AWS_REGION) : undefined;
  if (!secret) throw new ConfigError('the fleet secret is needed: set STRATA_WARM_SECRET_FROM_RING=1 (or STRATA_WARM_SECRET)');
  return secret;
}
