/**
 * The warm tier in the API Lambdas' runtime (composition/warm-tier-env.ts, getApiContext): the fleet secret read once from
 * Secrets Manager (STRATA_WARM_SECRET_ARN; here a local stand-in speaking its JSON protocol), the context built
 * with the warm tier, and clear errors when the secret is missing or cannot be read.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { ConfigError } from '../../core/errors.js';
import { buildApiContext, getApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnvWithSecrets } from '../../core/composition/secrets.js';
import { readFleetSecret, warmTierFromEnv } from '../../core/composition/warm-tier-env.js';
import { resetApiRuntime } from '../helpers/api-runtime.js';

const SECRET = 'fleet-secret-0123456789abcdef';
const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:strata-fleet-AbCdEf';

let server: Server;
let endpoint: string;
/** GetSecretValue calls seen, and what the next one answers. */
const calls: { target: string; secretId: string }[] = [];
let answer: { status: number; body: unknown } = { status: 200, body: { ARN, Name: 'strata-fleet', SecretString: SECRET } };
let ringDir: string;
const saved = { ...process.env };

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { SecretId?: string };
      calls.push({ target: String(req.headers['x-amz-target']), secretId: body.SecretId ?? '' });
      res.writeHead(answer.status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  ringDir = mkdtempSync(join(tmpdir(), 'strata-ring-'));
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  rmSync(ringDir, { recursive: true, force: true });
});

beforeEach(() => {
  calls.length = 0;
  answer = { status: 200, body: { ARN, Name: 'strata-fleet', SecretString: SECRET } };
  // The SDK's own settings for the stand-in: fixed credentials, the service endpoint, no retries to wait for.
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
    AWS_MAX_ATTEMPTS: '1',
  });
});

afterEach(() => resetApiRuntime(saved));

/** What CDK's bindRingStore/bindFleet give an API function (a folder stands in for the ring bucket). */
const lambdaEnv = () => ({
  STRATA_WARM_RING_DIR: ringDir,
  STRATA_WARM_SECRET_ARN: ARN,
  AWS_REGION: 'eu-west-1',
  STRATA_NODE_PORT: '7070',
});

describe('warm tier in the API runtime', () => {
  it('reads the fleet secret named by STRATA_WARM_SECRET_ARN, once, and builds the context with the warm tier', async () => {
    Object.assign(process.env, lambdaEnv());
    delete process.env.STRATA_WARM_SECRET;
    const ctx = (await getApiContext()) as BuiltContext;
    expect(await getApiContext()).toBe(ctx);
    expect(calls).toEqual([{ target: 'secretsmanager.GetSecretValue', secretId: ARN }]);
    expect(ctx.tiers.map((t) => t.name)).toEqual(['hot', 'warm']);
    expect(ctx.describe()).toContain(`warm  cache nodes, ring in ${ringDir}`);
  });

  it('does not keep a failed build: a Secrets Manager failure at a cold start is retried by the next request', async () => {
    Object.assign(process.env, lambdaEnv());
    answer = {
      status: 400,
      body: { __type: 'ResourceNotFoundException', message: 'Secrets Manager can’t find the specified secret.' },
    };
    await expect(getApiContext()).rejects.toThrow(/can’t find the specified secret/);
    answer = { status: 200, body: { ARN, Name: 'strata-fleet', SecretString: SECRET } };
    const ctx = (await getApiContext()) as BuiltContext;
    expect(ctx.tiers.map((t) => t.name)).toEqual(['hot', 'warm']);
    expect(calls).toHaveLength(2);
  });

  it('validates what it reads and what it is given', async () => {
    answer = { status: 200, body: { ARN, Name: 'strata-fleet', SecretString: 'short' } };
    await expect(loadRuntimeEnvWithSecrets(lambdaEnv())).rejects.toThrow(
      /STRATA_WARM_SECRET: the fleet secret must be at least 16 characters/,
    );
    answer = { status: 200, body: { ARN, Name: 'strata-fleet', SecretBinary: 'AAAA' } };
    await expect(loadRuntimeEnvWithSecrets(lambdaEnv())).rejects.toThrow(new ConfigError(`secret ${ARN} has no string value`));
    await expect(loadRuntimeEnvWithSecrets({ ...lambdaEnv(), STRATA_WARM_SECRET_ARN: 'strata-fleet' })).rejects.toThrow(
      /STRATA_WARM_SECRET_ARN must be a secret ARN/,
    );
    await expect(readFleetSecret(loadRuntimeEnv({}))).rejects.toThrow(
      /set STRATA_WARM_SECRET_FROM_RING=1 \(or STRATA_WARM_SECRET\)/,
    );
    expect(calls).toHaveLength(2);
  });

  it('leaves Secrets Manager alone when the secret is given, or there is no warm tier', async () => {
    await expect(loadRuntimeEnvWithSecrets({ ...lambdaEnv(), STRATA_WARM_SECRET: SECRET })).resolves.toMatchObject({
      STRATA_WARM_SECRET: SECRET,
    });
    await expect(loadRuntimeEnvWithSecrets({ STRATA_WARM_SECRET_ARN: ARN })).resolves.toMatchObject({
      STRATA_WARM_SECRET_ARN: ARN,
    });
    await expect(
      readFleetSecret({ STRATA_WARM_SECRET: SECRET, STRATA_WARM_SECRET_ARN: ARN, AWS_REGION: 'eu-west-1' }),
    ).resolves.toBe(SECRET);
    expect(calls).toHaveLength(0);
  });

  it('fails clearly when the warm tier is built from an environment whose secret was not read', () => {
    const env = {
      ...loadRuntimeEnv({ STRATA_WARM_SECRET: SECRET }),
      STRATA_WARM_RING_DIR: ringDir,
      STRATA_WARM_SECRET: undefined,
      STRATA_WARM_SECRET_ARN: ARN,
    };
    expect(() => buildApiContext(env, { warmTier: warmTierFromEnv })).toThrow(/loadRuntimeEnvWithSecrets/);
    expect(() => buildApiContext(env)).toThrow(/built without the warm tier/);
  });
});
