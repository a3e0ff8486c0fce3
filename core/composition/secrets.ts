import { loadRuntimeEnv, runtimeEnvSchema, type RuntimeEnv } from './runtime-env.js';
import { ConfigError } from '../errors.js';
import { formatIssues } from '../util/zod-issues.js';

/**
 * Secrets a Lambda reads at start-up instead of holding them in its configuration (which anyone with
 * lambda:GetFunctionConfiguration can read): the cache-node fleet's shared secret (STRATA_WARM_SECRET_ARN), read
 * only when the warm tier is configured and the value itself is not given (local runs and tests pass
 * STRATA_WARM_SECRET directly). The hot tier has no secret: on AWS it authenticates with IAM tokens the process
 * signs itself (STRATA_REDIS_IAM_CACHE, composition/elasticache-iam.ts), which needs neither a Secrets Manager read at
 * start-up nor, for the API functions, a Secrets Manager endpoint.
 */
const SECRETS = [
  {
    arn: 'STRATA_WARM_SECRET_ARN',
    value: 'STRATA_WARM_SECRET',
    needed: (raw: NodeJS.ProcessEnv) => !!(raw.STRATA_WARM_RING_BUCKET || raw.STRATA_WARM_RING_DIR),
  },
] as const;

/**
 * loadRuntimeEnv for a Lambda: first reads, from Secrets Manager and in parallel, every secret whose tier is
 * configured and whose value is named only by ARN, and passes it on as the value variable. Call it once per
 * container (nothing is re-read).
 */
export async function loadRuntimeEnvWithSecrets(raw: NodeJS.ProcessEnv = process.env): Promise<RuntimeEnv> {
  const wanted = SECRETS.filter((s) => s.needed(raw) && !raw[s.value] && raw[s.arn]);
  if (wanted.length === 0) return withRingFleetSecret(loadRuntimeEnv(raw));
  const shape = Object.fromEntries(wanted.map((s) => [s.arn, true])) as Record<(typeof wanted)[number]['arn'], true>;
  const fields = runtimeEnvSchema
    .pick({ ...shape, AWS_REGION: true })
    .safeParse({ ...Object.fromEntries(wanted.map((s) => [s.arn, raw[s.arn]])), AWS_REGION: raw.AWS_REGION || undefined });
  if (!fields.success) throw new ConfigError(`invalid configuration: ${formatIssues(fields.error.issues, { root: '' })}`);
  const region = fields.data.AWS_REGION;
  const values = await Promise.all(wanted.map((s) => readSecret(raw[s.arn]!, region)));
  return withRingFleetSecret(loadRuntimeEnv({ ...raw, ...Object.fromEntries(wanted.map((s, i) => [s.value, values[i]])) }));
}

/**
 * With STRATA_WARM_SECRET_FROM_RING (what StrataFunction.bindFleet sets), the fleet secret is the ring store's
 * `fleet/secret` document, read through the S3 gateway endpoint: created when missing (composition/warm-tier-env.ts
 * readFleetSecret), so an API container that starts before any workflow ran still gets the secret the nodes will.
 */
async function withRingFleetSecret(env: RuntimeEnv): Promise<RuntimeEnv> {
  if (!env.STRATA_WARM_SECRET_FROM_RING || env.STRATA_WARM_SECRET) return env;
  // Imported here: warm.ts imports this module (readSecret).
  const { readFleetSecret } = await import('./warm-tier-env.js');
  return { ...env, STRATA_WARM_SECRET: await readFleetSecret(env, { create: true }) };
}

/** A Secrets Manager secret's string value. */
export async function readSecret(arn: string, region: string): Promise<string> {
  // Loaded only here: the Lambda runtime provides the SDK, and processes given the secret itself never load it.
  const { SecretsManagerClient, GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
  const client = new SecretsManagerClient({ region });
  try {
    const r = await client.send(new GetSecretValueCommand({ SecretId: arn }));
    if (!r.SecretString) throw new ConfigError(`secret ${arn} has no string value`);
    return r.SecretString;
  } finally {
    client.destroy();
  }
}
