/**
 * The Lambdas' secrets, read at start-up from Secrets Manager (LocalStack) instead of their configuration: the fleet
 * secret (STRATA_WARM_SECRET_ARN), for the API context and the workflow steps, next to a real redis-server whose
 * application user needs a password (given directly here: on AWS the hot tier has no secret, it signs IAM tokens,
 * see redis-iam-auth.test.ts).
 */
import { CreateSecretCommand, DeleteSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { contentHash } from '../../core/model/keys.js';
import { initialRing } from '../../core/ring/document.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { buildApiContext, getApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnvWithSecrets } from '../../core/composition/secrets.js';
import { workflowDepsFromEnv } from '../../core/composition/step-lambda.js';
import type { Tier } from '../../core/tiers/tier.js';
import { startRedis, type RedisHandle } from '../helpers/services.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';
import { resetApiRuntime } from '../helpers/api-runtime.js';

const PASSWORD = 'valkey-app-password-0123456789';
const FLEET_SECRET = 'fleet-secret-0123456789abcdef';

let redis: RedisHandle;
let sm: SecretsManagerClient;
const arns: Record<'fleet', string> = { fleet: '' };
let ringDir: string;
const saved = { ...process.env };

beforeAll(async () => {
  // The application user needs the password; the default user stays open for the helper's readiness probe only.
  redis = await startRedis(['--user', 'app', 'on', `>${PASSWORD}`, '~*', '&*', '+@all']);
  sm = new SecretsManagerClient({
    endpoint: testS3Endpoint(),
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  for (const [k, value] of [['fleet', FLEET_SECRET]] as const) {
    arns[k] = (await sm.send(new CreateSecretCommand({ Name: uniqueName(`strata-${k}`), SecretString: value }))).ARN!;
  }
  ringDir = mkdtempSync(join(tmpdir(), 'strata-ring-'));
  // A ring with a node nobody reaches here: the warm tier is built, not used.
  await new RingStore(new FileCasStore(ringDir)).create(initialRing([{ id: 'n1', url: 'http://127.0.0.1:9' }], 1));
});

afterAll(async () => {
  for (const arn of Object.values(arns))
    if (arn) await sm.send(new DeleteSecretCommand({ SecretId: arn, ForceDeleteWithoutRecovery: true })).catch(() => undefined);
  sm?.destroy();
  await redis?.stop();
  rmSync(ringDir, { recursive: true, force: true });
});

beforeEach(() => {
  // The SDK's own settings (it reads them from the process): LocalStack's endpoint and credentials.
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_ENDPOINT_URL_SECRETS_MANAGER: testS3Endpoint(),
  });
});

afterEach(() => resetApiRuntime(saved));

/** What CDK's bindHotTier and bindRingStore/bindFleet give a function (a folder stands in for the ring bucket). */
const lambdaEnv = (password = PASSWORD) => ({
  STRATA_REDIS_URL: redis.url,
  STRATA_REDIS_USERNAME: 'app',
  STRATA_REDIS_PASSWORD: password,
  STRATA_WARM_RING_DIR: ringDir,
  STRATA_WARM_SECRET_ARN: arns.fleet,
  AWS_REGION: 'us-east-1',
});

const value = Buffer.from('secret-checked');
const entry = (version: number) => ({
  header: { version, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} },
  value,
});

async function roundTrip(hot: Tier | undefined): Promise<string | undefined> {
  await hot!.put('app', 'k', entry(Date.now()));
  return (await hot!.get('app', 'k'))?.value.toString();
}

describe('secrets read at start-up', () => {
  it('gives the API context the fleet secret from Secrets Manager', async () => {
    Object.assign(process.env, lambdaEnv());
    const ctx = (await getApiContext()) as BuiltContext;
    expect(ctx.tiers.map((t) => t.name)).toEqual(['hot', 'warm']);
    expect(await roundTrip(ctx.tiers[0])).toBe('secret-checked');
  });

  it('gives the workflow steps the same, for the tiers an eviction or tier move touches', async () => {
    const env = await loadRuntimeEnvWithSecrets(lambdaEnv());
    expect(env).toMatchObject({ STRATA_REDIS_PASSWORD: PASSWORD, STRATA_WARM_SECRET: FLEET_SECRET });
    const deps = await workflowDepsFromEnv(env);
    try {
      expect(await roundTrip(deps.tiers.hot)).toBe('secret-checked');
    } finally {
      for (const t of [deps.tiers.hot, deps.tiers.warm, deps.tiers.cold]) await t?.close?.();
    }
  });

  it('is the real check: the wrong password is refused by the server', async () => {
    const env = await loadRuntimeEnvWithSecrets(lambdaEnv('not-the-password-0123456789'));
    const ctx = buildApiContext(env, { flushTimer: false, warmTier: () => undefined });
    try {
      await expect(roundTrip(ctx.tiers[0])).rejects.toThrow();
    } finally {
      for (const t of ctx.tiers) await t.close?.();
    }
  });

  it('reads nothing for a tier that is not configured or whose value is given, nor a hot-tier password any more', async () => {
    const { STRATA_WARM_RING_DIR: _dir, ...noWarm } = lambdaEnv();
    const given = await loadRuntimeEnvWithSecrets({ ...noWarm, STRATA_REDIS_PASSWORD: 'given' });
    expect([given.STRATA_REDIS_PASSWORD, given.STRATA_WARM_SECRET]).toEqual(['given', undefined]);
    // The hot tier authenticates with IAM tokens on AWS (STRATA_REDIS_IAM_CACHE): a leftover password ARN is not read.
    const { STRATA_REDIS_PASSWORD: _password, ...noPassword } = noWarm;
    const leftover = await loadRuntimeEnvWithSecrets({ ...noPassword, STRATA_REDIS_PASSWORD_SECRET_ARN: 'not-an-arn' });
    expect(leftover.STRATA_REDIS_PASSWORD).toBeUndefined();
  });
});
