import { Coordinator } from '../coordinator/coordinator.js';
import { type CoordinatorEvent, type CoordinatorOptions } from '../coordinator/types.js';
import { Invalidations, tierInvalidationRegister } from '../coordinator/invalidations.js';
import { HybridLogicalClock } from '../model/hlc.js';
import type { LivePolicy } from '../policy/live.js';
import type { ApiContext } from '../api/operations.js';
import { LocalFolderTier } from '../tiers/local-folder-tier.js';
import { MemoryTier } from '../tiers/memory-tier.js';
import { RedisTier } from '../tiers/redis/redis-tier.js';
import { S3Tier } from '../tiers/s3-tier.js';
import type { Presigning, Tier } from '../tiers/tier.js';
import { supportsPresigning } from '../tiers/tier.js';
import type { RuntimeEnv } from './runtime-env.js';
import { ConfigError } from '../errors.js';
import { ElastiCacheIamAuth } from './elasticache-iam.js';
import { lambdaOriginInvoker } from './lambda-origins.js';
import { policyPartsFromEnv } from './policy-env.js';
import { StoredFiringHistory, type EvaluatorStateStore } from '../policy/evaluator-store.js';
import { JobBoard } from '../policy/jobs.js';
import { ValueCodec } from '../transforms/codec.js';
import { loadRuntimeEnvWithSecrets } from './secrets.js';
import { casStoreFromEnv, warmTierFromEnv } from './warm-tier-env.js';
import { WarmTier } from '../tiers/warm-tier.js';
import { RingStore } from '../ring/store.js';
import { HealthControls } from '../nodes/health-controls.js';
import type { NodeAdmin } from '../api/node-operations.js';
import { parseTenantAccess, type TenantAccess } from '../model/tenancy.js';
import { emfDocument } from '../metrics/emf.js';
import { metricsSink } from '../metrics/sink.js';
import { useDefaultMetricsSink } from './metrics-settings.js';
import {
  ErrorLogLimiter,
  formatErrorLogEntry,
  type ErrorLogEntry,
  type ErrorLogLimiterOptions,
} from '../util/error-log-limiter.js';
import type { MetricKey } from '../metrics/metric-catalog.js';
import { log as processLog, registerSecret, setLogLevel, type LogLevel } from '../util/logger.js';

const MiB = 1024 * 1024;

export interface BuiltContext extends ApiContext {
  /** The tiers, top to bottom (hot, warm if configured, cold if configured), for the workflow steps. */
  tiers: Tier[];
  /** Human-readable description of the tiers, for start-up banners. */
  describe(): string[];
  /** The policy in force, kept fresh from the policy store (absent: no store, STRATA_NAMESPACES is the policy). */
  livePolicy?: LivePolicy;
  /** The scheduled evaluator's memory and history, beside the policy documents (absent: no policy store). */
  evaluatorState?: EvaluatorStateStore;
  /** The scheduled evaluator's background jobs, beside its state (absent: no policy store or no scheduled evaluator). */
  jobBoard?: JobBoard;
}

/** Builds the tiers and coordinator a deployment's configuration asks for. */
export interface BuildOptions {
  /** Start the coordinator's write-back flush timer. @default true */
  flushTimer?: boolean;
  /**
   * Builds the warm tier from STRATA_WARM_* (composition/warm-tier-env.ts `warmTierFromEnv`: the API Lambdas, the workflow
   * steps, the local server). Without it, a configured warm tier is a ConfigError rather than silently ignored.
   */
  warmTier?: (env: RuntimeEnv) => Tier | undefined;
  /** Where the coordinator's background failures go. @default {@link backgroundErrorLog} on stderr */
  onBackgroundError?: (error: unknown, what: string) => void;
  /** What the coordinator does on its own (hot fence, write-back losses). @default {@link coordinatorEventLog} */
  onEvent?: (event: CoordinatorEvent) => void;
  /**
   * Re-read the policy store on a timer (long-lived servers). Lambda re-reads per request instead. @default false
   */
  policyTimer?: boolean;
  /**
   * This runtime ticks a background evaluator (core/policy/evaluator.ts: `npm start`), so policies may use the
   * responses it runs (alert, grow, shrink). @default false: they are refused when a policy is put
   */
  backgroundEvaluator?: boolean;
  /**
   * A `file:` keyring (STRATA_KEYRING) creates the key file of a key a policy names for the first time (`npm start`,
   * so a local policy may name a new key). @default false: a missing key file is a permanent KEY_UNAVAILABLE
   */
  createLocalKeys?: boolean;
}

export function buildApiContext(env: RuntimeEnv, opts: BuildOptions = {}): BuiltContext {
  setLogLevel(env.STRATA_LOG_LEVEL);
  registerSecret(env.STRATA_REDIS_PASSWORD); // no log line may carry it (an error message that quotes a URL, ...)
  // Every runtime that builds a context (the API Lambdas, the step Lambda) reports the coordinator's metrics: to
  // stdout in Lambda (EMF), unless a sink is installed (the local server, tests).
  useDefaultMetricsSink();
  const tiers: Tier[] = [];
  const remoteHot = !!env.STRATA_REDIS_URL;
  tiers.push(
    remoteHot
      ? RedisTier.fromUrl(env.STRATA_REDIS_URL!, {
          cluster: env.STRATA_REDIS_CLUSTER,
          username: env.STRATA_REDIS_USERNAME,
          password: env.STRATA_REDIS_PASSWORD,
          // ElastiCache (AWS): IAM tokens signed per connection with the process's own credentials, no password.
          credentials: env.STRATA_REDIS_IAM_CACHE
            ? new ElastiCacheIamAuth({
                cacheName: env.STRATA_REDIS_IAM_CACHE,
                userId: env.STRATA_REDIS_USERNAME!,
                region: env.AWS_REGION,
              })
            : undefined,
          incarnationCheck: env.STRATA_REDIS_INCARNATION,
        })
      : new MemoryTier({ name: 'hot', maxBytes: env.STRATA_HOT_MEMORY_MB * MiB }),
  );
  const wantsWarm = !!(env.STRATA_WARM_RING_BUCKET ?? env.STRATA_WARM_RING_DIR);
  if (wantsWarm && !opts.warmTier)
    throw new ConfigError(
      'STRATA_WARM_*: this runtime was built without the warm tier (pass `warmTier: warmTierFromEnv` from composition/warm-tier-env.ts to buildApiContext); unset STRATA_WARM_RING_BUCKET / STRATA_WARM_RING_DIR',
    );
  const warm = wantsWarm ? opts.warmTier!(env) : undefined;
  if (warm) tiers.push(warm);
  if (env.STRATA_S3_BUCKET) {
    tiers.push(
      new S3Tier({
        bucket: env.STRATA_S3_BUCKET,
        prefix: env.STRATA_S3_PREFIX,
        endpoint: env.STRATA_S3_ENDPOINT,
        region: env.AWS_REGION,
      }),
    );
  } else if (env.STRATA_LOCAL_DIR) {
    tiers.push(new LocalFolderTier({ dir: env.STRATA_LOCAL_DIR, publicBaseUrl: env.STRATA_PUBLIC_URL }));
  }
  // An L1 in front of an in-process hot tier would only copy it.
  const nearCache =
    remoteHot && env.STRATA_NEAR_CACHE_MB > 0
      ? new MemoryTier({ name: 'l1', maxBytes: env.STRATA_NEAR_CACHE_MB * MiB })
      : undefined;
  const policy = policyPartsFromEnv(env, {
    ...(opts.backgroundEvaluator !== undefined ? { backgroundEvaluator: opts.backgroundEvaluator } : {}),
    ...(opts.createLocalKeys !== undefined ? { createLocalKeys: opts.createLocalKeys } : {}),
  });
  const { keys, deployment } = policy;
  const coordinator = new Coordinator({
    tiers,
    nearCache,
    ...invalidationsOf(env),
    policies: deployment.registry,
    flushTimer: opts.flushTimer,
    onBackgroundError: opts.onBackgroundError ?? backgroundErrorLog({ environment: env.STRATA_ENV }),
    onEvent: opts.onEvent ?? coordinatorEventLog({ environment: env.STRATA_ENV }),
    hotFence: env.STRATA_HOT_FENCE_LEASE_MS === undefined ? undefined : { leaseMs: env.STRATA_HOT_FENCE_LEASE_MS },
    codec: new ValueCodec(keys.keyring ? { keyring: keys.keyring } : {}),
    // Only where the deployment declares Lambda origins (STRATA_LAMBDA_ORIGINS): policies may name no others.
    ...(env.STRATA_LAMBDA_ORIGINS?.length ? { invokeLambda: lambdaOriginInvoker() } : {}),
  });
  const nodeAdmin = nodeAdminOf(env, warm instanceof WarmTier ? warm : undefined);
  const presigner = tiers.find(supportsPresigning) as (Tier & Presigning) | undefined;
  const tenantAccess = parseTenantAccess(env.STRATA_TENANT_ACCESS);
  const policyStore = policy.store;
  const policyAdmin = policy.admin;
  const evaluatorState = policy.evaluatorState;
  const livePolicy = policy.live({
    timer: opts.policyTimer ?? false,
    onChange: (next) => coordinator.replacePolicies(next.registry),
  });
  return {
    coordinator,
    tiers,
    presigner,
    ...(policyAdmin ? { policyAdmin, livePolicy } : {}),
    ...(evaluatorState ? { evaluatorState } : {}),
    ...(evaluatorState && policy.scheduled ? { storedFirings: new StoredFiringHistory(evaluatorState) } : {}),
    ...(policyStore && policy.scheduled ? { jobBoard: new JobBoard(policyStore.cas) } : {}),
    ...(nodeAdmin ? { nodeAdmin } : {}),
    inlineLimitBytes: env.STRATA_INLINE_LIMIT_BYTES,
    urlTtlSeconds: env.STRATA_URL_TTL_SECONDS,
    tagSweepWindowMinutes: env.STRATA_TAG_SWEEP_WINDOW_MINUTES,
    asyncCompleteBytes: env.STRATA_ASYNC_COMPLETE_BYTES,
    ...(env.STRATA_UPLOAD_COMMIT_TRIGGER ? { uploadCommitTrigger: env.STRATA_UPLOAD_COMMIT_TRIGGER } : {}),
    ...(env.STRATA_SWEEP_TRIGGER ? { sweepTrigger: env.STRATA_SWEEP_TRIGGER } : {}),
    tenantAccess,
    describe: () => [
      ...(nearCache ? [`l1    memory, ${env.STRATA_NEAR_CACHE_MB} MiB per process`] : []),
      remoteHot
        ? `hot   redis ${redact(env.STRATA_REDIS_URL!)}${env.STRATA_REDIS_CLUSTER ? ' (cluster)' : ''}`
        : `hot   memory, ${env.STRATA_HOT_MEMORY_MB} MiB (embedded; set REDIS_URL for Redis)`,
      ...(warm
        ? [
            `warm  cache nodes, ring in ${env.STRATA_WARM_RING_BUCKET ? `s3://${env.STRATA_WARM_RING_BUCKET}/${env.STRATA_WARM_RING_PREFIX}` : env.STRATA_WARM_RING_DIR}`,
          ]
        : []),
      env.STRATA_S3_BUCKET
        ? `cold  s3://${env.STRATA_S3_BUCKET}/${env.STRATA_S3_PREFIX}${env.STRATA_S3_ENDPOINT ? ` at ${env.STRATA_S3_ENDPOINT}` : ''}`
        : env.STRATA_LOCAL_DIR
          ? `cold  folder ${env.STRATA_LOCAL_DIR} (set STRATA_S3_BUCKET for S3)`
          : 'cold  none',
      policyStore
        ? `policy STRATA_NAMESPACES, replaceable at runtime (strata policy put); edits kept in ${policyStore.describe}`
        : 'policy STRATA_NAMESPACES (set STRATA_POLICY_STORE to edit policies at runtime)',
      keys.describe,
      tenantAccess
        ? `auth  ${tenantAccess.keys} API key(s) mapped to namespaces (STRATA_TENANT_ACCESS), ${admins(tenantAccess)}`
        : NO_AUTH,
    ],
  };
}

/**
 * The node admin routes' access to the warm tier (api/node-operations.ts): the ring store the tier reads
 * (STRATA_WARM_RING_BUCKET or _DIR), its replacement controls beside the ring, and the tier's own node client (the
 * fleet secret). Without a warm tier, STRATA_NODE_ADMIN_RING_BUCKET names the ring store alone (the deployed admin
 * function, outside the VPC): every node route but a removal works from the store. The store is opened on first
 * use, so runtimes that never serve those routes (the key functions) make no client for it.
 */
function nodeAdminOf(env: RuntimeEnv, warm: WarmTier | undefined): NodeAdmin | undefined {
  const ringEnv = warm
    ? env
    : env.STRATA_NODE_ADMIN_RING_BUCKET
      ? { ...env, STRATA_WARM_RING_BUCKET: env.STRATA_NODE_ADMIN_RING_BUCKET, STRATA_WARM_RING_DIR: undefined }
      : undefined;
  if (!ringEnv || !(ringEnv.STRATA_WARM_RING_BUCKET ?? ringEnv.STRATA_WARM_RING_DIR)) return undefined;
  let parts: { ring: RingStore; controls: HealthControls } | undefined;
  const built = () => {
    if (!parts) {
      const cas = casStoreFromEnv(ringEnv)!;
      parts = { ring: new RingStore(cas), controls: new HealthControls(cas) };
    }
    return parts;
  };
  return {
    get ring() {
      return built().ring;
    },
    get controls() {
      return built().controls;
    },
    ...(warm ? { nodes: warm.client } : {}),
  };
}

const NO_AUTH = 'auth  none: every namespace and the admin routes open (set STRATA_TENANT_ACCESS to map API keys to namespaces)';

function admins(access: TenantAccess): string {
  if (access.adminKeys > 0) return `${access.adminKeys} of them admin keys`;
  return 'no admin key: the admin routes refuse every request (mark one "admin": true)';
}

/**
 * The coordinator's `onBackgroundError`: background work (a promotion per read, the write-back flush) fails once
 * per attempt while a tier is down, so each failure is not logged whole. The first of a kind is logged with its
 * stack, then one line per kind per 10 s with the count ({@link ErrorLogLimiter}), and each line publishes its
 * count as `BackgroundErrors` by `Activity` (one EMF document per log line: the metric costs no more than the log).
 */
export function backgroundErrorLog(o: CoordinatorLogOptions): (error: unknown, what: string) => void {
  const { log, publish, limiter } = coordinatorLog(o, (entry) => {
    log(formatErrorLogEntry(entry), 'error');
    publish({ backgroundErrors: entry.count }, { Activity: entry.what });
  });
  return (error, what) => limiter.report(error, what);
}

/** Options of the coordinator's logs: the environment (metric dimension), and a log line sink, clock and timer for tests. */
type CoordinatorLogOptions = { environment: string; log?: (line: string, level?: LogLevel) => void } & Pick<
  ErrorLogLimiterOptions,
  'now' | 'schedule' | 'intervalMs'
>;

/**
 * What both coordinator logs are built on: the line sink, a metric publisher that never throws (the log line is
 * written; a failing metrics sink must not fail the request or the background work that reported), and an
 * {@link ErrorLogLimiter} writing through `write`.
 */
function coordinatorLog(o: CoordinatorLogOptions, write: (entry: ErrorLogEntry) => void) {
  const log = o.log ?? ((line: string, level: LogLevel = 'warn') => processLog[level](line));
  const now = o.now ?? Date.now;
  const publish = (values: Partial<Record<MetricKey, number>>, dimensions: Record<string, string> = {}): void => {
    try {
      metricsSink().write([emfDocument({ timestamp: now(), dimensions: { Environment: o.environment, ...dimensions }, values })]);
    } catch {
      // The log line is written; a metrics sink that fails must not turn what it reports into a thrown error.
    }
  };
  const limiter = new ErrorLogLimiter({
    now,
    ...(o.schedule !== undefined ? { schedule: o.schedule } : {}),
    ...(o.intervalMs !== undefined ? { intervalMs: o.intervalMs } : {}),
    write,
  });
  return { log, publish, limiter };
}

/**
 * The coordinator's `onEvent`: a log line and a metric for what it does on its own. Hot copies whose outcome was
 * unknown come one per write during an outage, so they go through an {@link ErrorLogLimiter} like background
 * errors (first with its stack, then a count per 10 s); fence bumps come at most one per lease per process.
 */
export function coordinatorEventLog(o: CoordinatorLogOptions): (event: CoordinatorEvent) => void {
  const { log, publish, limiter } = coordinatorLog(o, (entry) => {
    log(formatErrorLogEntry(entry, '[strata] hot fence:'));
    if (entry.what === HOT_COPY) publish({ hotCopiesUnknown: entry.count });
  });
  return (e) => {
    switch (e.type) {
      case 'hot-copy-unknown':
        return limiter.report(e.error, HOT_COPY);
      case 'refresh-failed':
        return limiter.report(e.error, 'reading the fence document');
      case 'incarnation-check-failed':
        return limiter.report(e.error, 'checking the hot tier incarnation');
      case 'bump': {
        const why = [
          e.writes > 0 ? `${e.writes} write(s) whose hot copy failed` : '',
          e.incarnation ? 'a new hot-tier incarnation' : '',
        ]
          .filter(Boolean)
          .join(' and ');
        log(`[strata] hot fence: raised the epoch of ${e.shards} shard(s) for ${why} (fence document v${e.version})`);
        return publish({ hotFenceBumps: 1 });
      }
      case 'incarnation':
        if (e.first)
          return log(
            '[strata] hot fence: first use of this hot tier recorded (its incarnation is checked after every reconnect)',
          );
        return log(
          '[strata] hot fence: the hot tier is a new incarnation (restarted or failed over): every shard was fenced; write-back entries it had not flushed are lost',
        );
      case 'invalidated': {
        const r = e.record;
        const what =
          r.kind === 'flush' ? 'the whole namespace' : r.kind === 'tags' ? `tags ${r.tags!.join(', ')}` : `prefix '${r.prefix}'`;
        log(
          `[strata] invalidation #${r.id} by ${r.by}: ${what} of namespace '${r.ns}' (generation ${r.generation}) in force after ${e.waitedMs} ms`,
        );
        return publish({ invalidations: 1 });
      }
      case 'invalidation-refresh-failed':
        return limiter.report(e.error, 'reading the invalidations document (reads and writes fail closed meanwhile)');
      case 'write-back-lost':
        log(
          `[strata] write-back: ${e.count} dirty entr${e.count === 1 ? 'y was' : 'ies were'} gone from the hot tier before their flush (evicted or expired)`,
        );
        return publish({ writeBackLost: e.count });
    }
  };
}

const HOT_COPY = 'hot copy of an acknowledged write (fenced before the ack)';

function redact(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}

let current: Promise<ApiContext> | undefined;

/**
 * The container's context: built from the environment on first use, unless one was installed. With a ring store
 * configured (STRATA_WARM_RING_BUCKET) it includes the warm tier; the fleet secret (STRATA_WARM_SECRET_ARN) is
 * read from Secrets Manager here, once per container (the hot tier needs no secret: STRATA_REDIS_IAM_CACHE). A
 * build that fails is not kept: the next call retries (a Secrets Manager or S3 hiccup at a cold start does not
 * poison the container).
 */
export function getApiContext(): Promise<ApiContext> {
  // Lambda: no flush timer (frozen between invocations); the handler flushes when due.
  if (!current) {
    const building: Promise<ApiContext> = loadRuntimeEnvWithSecrets().then((env) =>
      buildApiContext(env, { flushTimer: false, warmTier: warmTierFromEnv }),
    );
    current = building;
    building.catch(() => {
      if (current === building) current = undefined;
    });
  }
  return current;
}

/** Installs the process's context (tests of the Lambda handlers; the local server passes each server its own). */
export function setApiContext(ctx: ApiContext | undefined): void {
  current = ctx ? Promise.resolve(ctx) : undefined;
}

/**
 * The invalidations document's place (coordinator/invalidations.ts). The coordinator keeps it in its lowest tier; a
 * runtime whose lowest tier is not the deployment's durable one (the admin function: no cold tier, an embedded hot
 * tier) names the cold tier's bucket in STRATA_INVALIDATIONS_BUCKET, so its flushes and log read and write the same
 * document as the data functions (and never one in its own memory, which no reader would see).
 */
function invalidationsOf(env: RuntimeEnv): Pick<CoordinatorOptions, 'clock' | 'invalidations'> | Record<string, never> {
  if (env.STRATA_S3_BUCKET || !env.STRATA_INVALIDATIONS_BUCKET) return {};
  const holder = new S3Tier({
    bucket: env.STRATA_INVALIDATIONS_BUCKET,
    prefix: env.STRATA_INVALIDATIONS_PREFIX ?? env.STRATA_S3_PREFIX,
    endpoint: env.STRATA_S3_ENDPOINT,
    region: env.AWS_REGION,
  });
  const clock = new HybridLogicalClock();
  return { clock, invalidations: new Invalidations({ register: tierInvalidationRegister(holder), clock }) };
}
