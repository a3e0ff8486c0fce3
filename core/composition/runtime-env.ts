import { readFileSync } from 'node:fs';
import * as z from 'zod';
import { defaultRulesOptionsSchema } from '../policy/defaults.js';
import { LAMBDA_FUNCTION_ARN, type NamespaceConfigInput } from '../policy/namespace-settings.js';
import { fleetSubnetsSchema } from '../workflows/steps/fleet-placement.js';
import { ConfigError } from '../errors.js';
import { kmsKeyNameProblem } from '../transforms/kms-keyring.js';
import { LOG_LEVELS } from '../util/logger.js';
import { formatIssues } from '../util/zod-issues.js';
import { DEFAULT_TAG_SWEEP_WINDOW_MINUTES } from '../api/namespace-operations.js';
import { DEFAULT_ASYNC_COMPLETE_BYTES } from '../api/async-complete.js';

const MiB = 1024 * 1024;

/** A comma-separated list: its items trimmed, empty ones and repeats dropped. */
const commaList = (s: string): string[] => [
  ...new Set(
    s
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean),
  ),
];
const bool = z.enum(['1', '0', 'true', 'false', 'yes', 'no', '']).transform((v) => v === '1' || v === 'true' || v === 'yes');

/**
 * Runtime configuration from environment variables (Lambda env, or the shell for `npm start`). Read once per
 * container; a bad value stops start-up with a message naming the variable.
 */
export const runtimeEnvSchema = z.object({
  /** Hot tier: Redis/Valkey URL (`rediss://` for TLS). Absent = embedded in-process memory tier. */
  STRATA_REDIS_URL: z.string().url().optional(),
  STRATA_REDIS_CLUSTER: bool.default(false),
  /**
   * How the hot fence tells a restarted or failed-over Redis (docs/API.md, Consistency): `run-id` (every master's
   * INFO run_id) or `reconnect` (every lost connection fences the hot tier once: for proxies that hide run_ids).
   */
  STRATA_REDIS_INCARNATION: z.enum(['run-id', 'reconnect']).default('run-id'),
  STRATA_REDIS_USERNAME: z.string().optional(),
  STRATA_REDIS_PASSWORD: z.string().optional(),
  /**
   * ElastiCache IAM authentication (AWS): the serverless cache's name. Each connection then authenticates as
   * STRATA_REDIS_USERNAME with a token signed with the process's own AWS credentials (composition/elasticache-iam.ts),
   * and re-authenticates before ElastiCache's 12-hour limit; no password exists. Takes the place of
   * STRATA_REDIS_PASSWORD, which stays for local and self-managed Redis.
   */
  STRATA_REDIS_IAM_CACHE: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,39}$/, 'STRATA_REDIS_IAM_CACHE must be a serverless cache name')
    .optional(),
  /** Embedded hot tier size when no Redis is configured. */
  /**
   * The hot tier's ElastiCache Serverless cache, by name, for the scheduled evaluator's grow and shrink of its usage
   * limits (composition/hot-tier-limits.ts). Unset: a hot-tier grow or shrink is skipped.
   */
  STRATA_HOT_CACHE_NAME: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,39}$/, 'STRATA_HOT_CACHE_NAME must be a serverless cache name')
    .optional(),
  STRATA_HOT_MEMORY_MB: z.coerce.number().int().min(1).max(65536).default(256),
  /** Per-container near cache (L1) size; 0 turns it off. Only used above a remote hot tier. */
  STRATA_NEAR_CACHE_MB: z.coerce.number().int().min(0).max(4096).default(64),
  /**
   * Hot fence lease (coordinator/hot-fence.ts): how long a container trusts the epochs it read, and how long a
   * write whose hot copy failed waits after fencing it before it is acknowledged. Absent = 2000 ms.
   */
  STRATA_HOT_FENCE_LEASE_MS: z.coerce.number().int().min(100).max(60_000).optional(),
  /**
   * Warm tier (EC2 cache nodes): where the ring document lives — an S3 bucket (AWS; with STRATA_WARM_RING_PREFIX)
   * or a folder (local runs) — and the fleet's shared secret. Absent = no warm tier.
   */
  STRATA_WARM_RING_BUCKET: z.string().min(3).optional(),
  STRATA_WARM_RING_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._/-]+$/)
    .default('strata-ring'),
  STRATA_WARM_RING_DIR: z.string().optional(),
  /**
   * The node admin routes' ring store (/v1/admin/nodes...) for a runtime without the warm tier: the deployed admin
   * function runs outside the VPC, reaches no cache node, and reads the ring, replaces nodes and flips the
   * replacement switch through the ring store alone (StrataFunction.bindNodeAdmin). Prefix as STRATA_WARM_RING_PREFIX.
   */
  STRATA_NODE_ADMIN_RING_BUCKET: z.string().min(3).optional(),
  STRATA_WARM_SECRET: z.string().min(16, 'the fleet secret must be at least 16 characters').optional(),
  /** The fleet secret as a Secrets Manager secret (AWS); read at start-up. Takes the place of STRATA_WARM_SECRET. */
  STRATA_WARM_SECRET_ARN: z.string().startsWith('arn:', 'STRATA_WARM_SECRET_ARN must be a secret ARN').optional(),
  /**
   * `1`: the fleet secret is the ring store's `fleet/secret` document (ring/fleet-secret.ts), read at start-up and
   * created (conditional create: one secret whoever creates it) when it does not exist yet. How deployments get it
   * (StrataFunction.bindFleet): through the S3 gateway endpoint, no Secrets Manager endpoint. Needs a ring store;
   * STRATA_WARM_SECRET, when given too, wins (local runs and tests keep passing it).
   */
  STRATA_WARM_SECRET_FROM_RING: bool.default(false),
  /** Port of the cachenode daemon on the fleet's instances (workflow steps reach launched nodes on it). */
  STRATA_NODE_PORT: z.coerce.number().int().min(1).max(65535).default(7070),
  STRATA_WARM_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2000),
  /** The cache-node fleet's subnets, JSON `[{"subnetId": "...", "availabilityZone": "..."}]`: where ScaleOut launches. */
  STRATA_FLEET_SUBNETS: z
    .string()
    .transform((s, ctx) => {
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON: [{"subnetId": "subnet-...", "availabilityZone": "..."}]' });
        return z.NEVER;
      }
    })
    .pipe(fleetSubnetsSchema)
    .optional(),
  /** Cold tier: S3 bucket. */
  STRATA_S3_BUCKET: z.string().min(3).optional(),
  STRATA_S3_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/)
    .default('v1'),
  /**
   * Where the invalidations document lives for a runtime without the cold tier (the admin function, outside the VPC:
   * its namespace flushes and the invalidation log): the cold tier's bucket, with STRATA_S3_PREFIX's default unless
   * STRATA_INVALIDATIONS_PREFIX is set. Ignored when STRATA_S3_BUCKET is set (the cold tier holds it).
   */
  STRATA_INVALIDATIONS_BUCKET: z.string().min(3).optional(),
  STRATA_INVALIDATIONS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/)
    .optional(),
  /** S3 endpoint override (LocalStack). Also read from AWS_ENDPOINT_URL_S3. */
  STRATA_S3_ENDPOINT: z.string().url().optional(),
  /** Cold tier for the embedded local run: a folder. Ignored when a bucket is set. */
  STRATA_LOCAL_DIR: z.string().optional(),
  /** Base URL the local server is reachable at (for local presigned URLs). */
  STRATA_PUBLIC_URL: z.string().url().optional(),
  /**
   * Where policy documents edited at runtime live (core/policy/admin.ts): `file:<dir>` or `s3://<bucket>/<prefix>`.
   * Absent: the ring store (next to the ring document) when the warm tier is configured; otherwise there is none,
   * the deployment's STRATA_NAMESPACES is the policy and the policy admin routes answer 503 POLICIES_UNAVAILABLE.
   */
  STRATA_POLICY_STORE: z
    .string()
    .regex(/^(file:.+|s3:\/\/[^/]+(\/.*)?)$/, 'file:<dir> or s3://<bucket>/<prefix>')
    .optional(),
  /**
   * How often a process re-reads the policy in force (ms). A Lambda container re-reads at most this often while it
   * serves requests, and makes a request wait for the read once its copy is 4 times older (docs/POLICIES.md).
   */
  STRATA_POLICY_REFRESH_MS: z.coerce.number().int().min(100).max(600_000).default(15_000),
  /**
   * A scheduled evaluator runs this deployment's background rules (AWS: the policy ticker, lambdas/policy): policies
   * may then have alert, grow and shrink rules, and the firing history is read from the policy store.
   */
  STRATA_POLICY_EVALUATOR: bool.default(false),
  /**
   * The deployment's settings of the policies' default rules (core/policy/defaults.ts DefaultRulesOptions), as JSON:
   * `{"nodeFill": "evict"|"grow"|"off", "nodeFillPercent": 85, "evictEveryHours": 6, "prelaunch": {"unit", "capacity",
   * "lowRate", "highRate", "mode"}}`, every field optional. The CDK stacks give every function that compiles policies
   * the same, from cdk/config's `workflows` section. Unset: the node-fill eviction at 85%, no eviction schedule, no
   * pre-launch.
   */
  STRATA_POLICY_DEFAULTS: z
    .string()
    .transform((s, ctx) => {
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({
          code: 'custom',
          message: 'must be JSON: {"nodeFill": "evict", "nodeFillPercent": 85, "evictEveryHours": 6, "prelaunch": {...}}',
        });
        return z.NEVER;
      }
    })
    .pipe(defaultRulesOptionsSchema)
    .optional(),
  /**
   * Where the master keys of the policies' encrypt rules live (composition/keyring-env.ts): `kms` (AWS KMS, in
   * AWS_REGION; the API functions get it with the stack prop policyEncryptionKeys) or `file:<dir>` (key files, for
   * local runs; `npm start` uses `<data dir>/_keys`). Absent: no keyring, and encrypt rules are refused.
   */
  STRATA_KEYRING: z
    .string()
    .regex(/^(kms|file:.+)$/, "STRATA_KEYRING must be 'kms' (AWS KMS) or 'file:<dir>' (a folder of key files)")
    .optional(),
  /**
   * The key names policies may encrypt with, comma-separated (in AWS the KMS key ARNs the deployment was granted).
   * Absent: any name the keyring has.
   */
  STRATA_KEYRING_KEYS: z
    .string()
    .transform(commaList)
    .refine((keys) => keys.length > 0, 'STRATA_KEYRING_KEYS must list key names, comma-separated (or be unset: any key)')
    .optional(),
  /**
   * The Lambda functions policies may read through (origin.lambda), comma-separated ARNs: the environment config's
   * api.lambdaOrigins, which the API functions are granted lambda:InvokeFunction on. Absent: none.
   */
  STRATA_LAMBDA_ORIGINS: z
    .string()
    .transform(commaList)
    .refine(
      (arns) => arns.every((a) => LAMBDA_FUNCTION_ARN.test(a)),
      'STRATA_LAMBDA_ORIGINS must list Lambda function ARNs (arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]), comma-separated',
    )
    .optional(),
  /** Namespace policies as JSON (see NamespaceConfigInput), or a path to a JSON file. */
  STRATA_NAMESPACES: z.string().optional(),
  /** Which namespaces each API key may use (JSON; api/tenant-access.ts). Unset: not enforced. */
  STRATA_TENANT_ACCESS: z.string().optional(),
  STRATA_NAMESPACES_FILE: z.string().optional(),
  STRATA_INLINE_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(6 * MiB)
    .default(4 * MiB),
  // At most 12 h: a presigned URL dies with the role session that signed it (cdk/config/schema.ts urlTtlSeconds).
  STRATA_URL_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(12 * 3600)
    .default(900),
  /**
   * Tag invalidations of a namespace within one window of this many minutes share one sweep of the whole namespace,
   * started once the window is over (api/namespace-operations.ts); 0: no tag sweeps. At most 12 h: the sweep's state
   * machine stops after 24 (cdk/config/schema.ts workflows.tagSweepWindowMinutes).
   */
  STRATA_TAG_SWEEP_WINDOW_MINUTES: z.coerce.number().int().min(0).max(720).default(DEFAULT_TAG_SWEEP_WINDOW_MINUTES),
  /**
   * Uploads whose staged object has at least this many bytes complete asynchronously (202 and polling) where the
   * upload-commit workflow runs (api/async-complete.ts); 0: never. At most S3's largest object (10,000 parts of 5 GiB).
   */
  STRATA_ASYNC_COMPLETE_BYTES: z.coerce
    .number({ error: 'STRATA_ASYNC_COMPLETE_BYTES must be a number of bytes (e.g. 1073741824 for 1 GiB), or 0 for never' })
    .int('STRATA_ASYNC_COMPLETE_BYTES must be a whole number of bytes')
    .refine(
      (n) => n === 0 || (n >= 1024 && n <= 10_000 * 5 * 1024 ** 3),
      'STRATA_ASYNC_COMPLETE_BYTES must be 0 (never asynchronous) or from 1024 bytes to 48.8 TiB (the largest S3 object)',
    )
    .default(DEFAULT_ASYNC_COMPLETE_BYTES),
  /**
   * `s3-event`: an asynchronous completion writes the upload's commit request (`_uploads/<id>.commit`) and an
   * EventBridge rule on its S3 event starts the upload-commit workflow (set by the CDK stacks on the transfer function,
   * which runs in a VPC without a route to Step Functions). Unset: the workflow service starts it (`npm start`).
   */
  STRATA_UPLOAD_COMMIT_TRIGGER: z.enum(['s3-event']).optional(),
  /**
   * `s3-event`: a flush or an invalidation writes its sweep request (`_sweeps/<name>.sweep`, in the S3 tier) and an
   * EventBridge rule on its S3 event starts the invalidation-sweep workflow (set by the CDK stacks on the data
   * functions, which run in a VPC without a route to Step Functions). Unset: the workflow service starts it.
   */
  STRATA_SWEEP_TRIGGER: z.enum(['s3-event']).optional(),
  AWS_REGION: z.string().default('us-east-1'),
  /** Deployment environment (`dev`, `staging`, `prod`): the `Environment` dimension of every metric. */
  STRATA_ENV: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,31}$/, 'lowercase letters, digits and dashes, at most 32')
    .default('local'),
  /** `1`: also print request metrics (EMF lines) on stdout outside Lambda (in Lambda they always go there). */
  STRATA_METRICS_STDOUT: bool.default(false),
  /** Lowest level of log lines (JSON on stderr: time, level, msg, fields; secrets redacted). */
  STRATA_LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
});

export type RuntimeEnv = z.infer<typeof runtimeEnvSchema>;

export function loadRuntimeEnv(env: NodeJS.ProcessEnv = process.env): RuntimeEnv {
  const input = {
    ...env,
    STRATA_REDIS_URL: env.STRATA_REDIS_URL ?? env.REDIS_URL,
    STRATA_S3_ENDPOINT: env.STRATA_S3_ENDPOINT ?? env.AWS_ENDPOINT_URL_S3,
  };
  for (const k of Object.keys(input) as (keyof typeof input)[]) if (input[k] === '') delete input[k];
  const r = runtimeEnvSchema.safeParse(input);
  if (!r.success) {
    throw new ConfigError(`invalid configuration: ${formatIssues(r.error.issues, { root: '' })}`);
  }
  if (r.data.STRATA_REDIS_IAM_CACHE && (!r.data.STRATA_REDIS_USERNAME || r.data.STRATA_REDIS_PASSWORD !== undefined)) {
    throw new ConfigError(
      'invalid configuration: STRATA_REDIS_IAM_CACHE (IAM authentication) needs STRATA_REDIS_USERNAME, the IAM user, ' +
        'and no STRATA_REDIS_PASSWORD',
    );
  }
  const warm = r.data.STRATA_WARM_RING_BUCKET ?? r.data.STRATA_WARM_RING_DIR;
  if (r.data.STRATA_WARM_SECRET_FROM_RING && !warm) {
    throw new ConfigError(
      'invalid configuration: STRATA_WARM_SECRET_FROM_RING needs the ring store the secret is in ' +
        '(STRATA_WARM_RING_BUCKET or STRATA_WARM_RING_DIR)',
    );
  }
  if (warm && !r.data.STRATA_WARM_SECRET && !r.data.STRATA_WARM_SECRET_ARN && !r.data.STRATA_WARM_SECRET_FROM_RING) {
    throw new ConfigError(
      'invalid configuration: STRATA_WARM_SECRET (or STRATA_WARM_SECRET_FROM_RING=1, or STRATA_WARM_SECRET_ARN): ' +
        'required with a warm tier (the cache nodes refuse requests without it)',
    );
  }
  if (r.data.STRATA_KEYRING_KEYS && !r.data.STRATA_KEYRING) {
    throw new ConfigError(
      'invalid configuration: STRATA_KEYRING_KEYS names the keys policies may encrypt with, but there is no keyring: ' +
        "set STRATA_KEYRING ('kms' or 'file:<dir>')",
    );
  }
  if (r.data.STRATA_KEYRING === 'kms') {
    const problems = (r.data.STRATA_KEYRING_KEYS ?? []).map(kmsKeyNameProblem).filter((p) => p !== undefined);
    if (problems.length) throw new ConfigError(`invalid configuration: STRATA_KEYRING_KEYS: ${problems.join('; ')}`);
  }
  return r.data;
}

export function namespaceConfigFrom(env: RuntimeEnv): NamespaceConfigInput {
  const raw =
    env.STRATA_NAMESPACES ?? (env.STRATA_NAMESPACES_FILE ? readFileSync(env.STRATA_NAMESPACES_FILE, 'utf8') : undefined);
  if (!raw) return {};
  try {
    return JSON.parse(raw) as NamespaceConfigInput;
  } catch (e) {
    throw new ConfigError(`STRATA_NAMESPACES${env.STRATA_NAMESPACES ? '' : '_FILE'} is not valid JSON: ${(e as Error).message}`);
  }
}
