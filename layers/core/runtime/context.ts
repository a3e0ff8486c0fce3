import { Coordinator } from '../coordinator/coordinator.js';
import { PolicyRegistry } from '../coordinator/policy.js';
import type { ApiContext } from '../api/operations.js';
import { LocalFolderTier } from '../tiers/local-folder-tier.js';
import { MemoryTier } from '../tiers/memory-tier.js';
import { RedisTier } from '../tiers/redis-tier.js';
import { S3Tier } from '../tiers/s3-tier.js';
import type { Presigning, Tier } from '../tiers/tier.js';
import { supportsPresigning } from '../tiers/tier.js';
import type { RuntimeEnv } from './config.js';
import { ConfigError, namespaceConfigFrom } from './config.js';
import { loadRuntimeEnvWithSecrets } from './secrets.js';
import { warmTierFromEnv } from './warm.js';
import { parseTenantAccess } from '../api/tenant-access.js';

const MiB = 1024 * 1024;

export interface BuiltContext extends ApiContext {
  /** The tiers, top to bottom (hot, warm if configured, cold if configured), for the workflow steps. */
  tiers: Tier[];
  /** Human-readable description of the tiers, for start-up banners. */
  describe(): string[];
}

/** Builds the tiers and coordinator a deployment's configuration asks for. */
export interface BuildOptions {
  /** Start the coordinator's write-back flush timer. @default true */
  flushTimer?: boolean;
  /**
   * Builds the warm tier from STRATA_WARM_* (runtime/warm.ts `warmTierFromEnv`: the API Lambdas, the workflow
   * steps, the local server). Without it, a configured warm tier is a ConfigError rather than silently ignored.
   */
  warmTier?: (env: RuntimeEnv) => Tier | undefined;
}

export function buildApiContext(env: RuntimeEnv, opts: BuildOptions = {}): BuiltContext {
  const tiers: Tier[] = [];
  const remoteHot = !!env.STRATA_REDIS_URL;
  if (remoteHot && env.STRATA_REDIS_PASSWORD === undefined && env.STRATA_REDIS_PASSWORD_SECRET_ARN) {
    throw new ConfigError('the hot tier needs its password: STRATA_REDIS_PASSWORD_SECRET_ARN is read at start-up by loadRuntimeEnvWithSecrets (runtime/secrets.ts), which this runtime did not use');
  }
  tiers.push(
    remoteHot
      ? RedisTier.fromUrl(env.STRATA_REDIS_URL!, { cluster: env.STRATA_REDIS_CLUSTER, username: env.STRATA_REDIS_USERNAME, password: env.STRATA_REDIS_PASSWORD })
      : new MemoryTier({ name: 'hot', maxBytes: env.STRATA_HOT_MEMORY_MB * MiB }),
  );
  const wantsWarm = !!(env.STRATA_WARM_RING_BUCKET ?? env.STRATA_WARM_RING_DIR);
  if (wantsWarm && !opts.warmTier) throw new ConfigError('STRATA_WARM_*: this runtime was built without the warm tier (pass `warmTier: warmTierFromEnv` from runtime/warm.ts to buildApiContext); unset STRATA_WARM_RING_BUCKET / STRATA_WARM_RING_DIR');
  const warm = wantsWarm ? opts.warmTier!(env) : undefined;
  if (warm) tiers.push(warm);
  if (env.STRATA_S3_BUCKET) {
    tiers.push(new S3Tier({ bucket: env.STRATA_S3_BUCKET, prefix: env.STRATA_S3_PREFIX, endpoint: env.STRATA_S3_ENDPOINT, region: env.AWS_REGION }));
  } else if (env.STRATA_LOCAL_DIR) {
    tiers.push(new LocalFolderTier({ dir: env.STRATA_LOCAL_DIR, publicBaseUrl: env.STRATA_PUBLIC_URL }));
  }
  // An L1 in front of an in-process hot tier would only copy it.
  const nearCache = remoteHot && env.STRATA_NEAR_CACHE_MB > 0 ? new MemoryTier({ name: 'l1', maxBytes: env.STRATA_NEAR_CACHE_MB * MiB }) : undefined;
  const coordinator = new Coordinator({ tiers, nearCache, policies: new PolicyRegistry(namespaceConfigFrom(env)), flushTimer: opts.flushTimer });
  const presigner = tiers.find(supportsPresigning) as (Tier & Presigning) | undefined;
  const tenantAccess = parseTenantAccess(env.STRATA_TENANT_ACCESS);
  return {
    coordinator,
    tiers,
    presigner,
    inlineLimitBytes: env.STRATA_INLINE_LIMIT_BYTES,
    urlTtlSeconds: env.STRATA_URL_TTL_SECONDS,
    tenantAccess,
    describe: () => [
      ...(nearCache ? [`l1    memory, ${env.STRATA_NEAR_CACHE_MB} MiB per process`] : []),
      remoteHot ? `hot   redis ${redact(env.STRATA_REDIS_URL!)}${env.STRATA_REDIS_CLUSTER ? ' (cluster)' : ''}` : `hot   memory, ${env.STRATA_HOT_MEMORY_MB} MiB (embedded; set REDIS_URL for Redis)`,
      ...(warm ? [`warm  cache nodes, ring in ${env.STRATA_WARM_RING_BUCKET ? `s3://${env.STRATA_WARM_RING_BUCKET}/${env.STRATA_WARM_RING_PREFIX}` : env.STRATA_WARM_RING_DIR}`] : []),
      env.STRATA_S3_BUCKET
        ? `cold  s3://${env.STRATA_S3_BUCKET}/${env.STRATA_S3_PREFIX}${env.STRATA_S3_ENDPOINT ? ` at ${env.STRATA_S3_ENDPOINT}` : ''}`
        : env.STRATA_LOCAL_DIR
          ? `cold  folder ${env.STRATA_LOCAL_DIR} (set STRATA_S3_BUCKET for S3)`
          : 'cold  none',
      tenantAccess ? `auth  ${tenantAccess.keys} API key(s) mapped to their namespaces (STRATA_TENANT_ACCESS)` : 'auth  none: every namespace open (set STRATA_TENANT_ACCESS to map API keys to namespaces)',
    ],
  };
}

function redact(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}

let current: Promise<ApiContext> | undefined;

/**
 * The container's context: built from the environment on first use, unless one was installed. With a ring store
 * configured (STRATA_WARM_RING_BUCKET) it includes the warm tier; the fleet secret (STRATA_WARM_SECRET_ARN) and
 * the hot tier's password (STRATA_REDIS_PASSWORD_SECRET_ARN) are read from Secrets Manager here, once per
 * container. A build that fails is not kept: the next call retries (a Secrets Manager or S3 hiccup at a cold
 * start does not poison the container).
 */
export function getApiContext(): Promise<ApiContext> {
  // Lambda: no flush timer (frozen between invocations); the handler flushes when due.
  if (!current) {
    const building: Promise<ApiContext> = loadRuntimeEnvWithSecrets().then((env) => buildApiContext(env, { flushTimer: false, warmTier: warmTierFromEnv }));
    current = building;
    building.catch(() => {
      if (current === building) current = undefined;
    });
  }
  return current;
}

/** Installs a context (local server, tests). */
export function setApiContext(ctx: ApiContext | undefined): void {
  current = ctx ? Promise.resolve(ctx) : undefined;
}
