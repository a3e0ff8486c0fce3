/**
 * The keyring as the composition root builds it (core/composition/keyring-env.ts): STRATA_KEYRING and
 * STRATA_KEYRING_KEYS, validated at start-up, handed to the coordinator's codec and to the policy compiler.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { encryptionCompileOptions, keyringFromEnv } from '../../core/composition/keyring-env.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { ConfigError } from '../../core/errors.js';
import { LocalKeyring } from '../../core/transforms/keyring.js';
import { KmsKeyring, type KmsClient } from '../../core/transforms/kms-keyring.js';

const KEY_ARN = 'arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';

function configError(env: NodeJS.ProcessEnv): string {
  try {
    loadRuntimeEnv(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('STRATA_KEYRING and STRATA_KEYRING_KEYS', () => {
  it('are optional, and parse to a keyring spec and a list of names (trimmed, without repeats)', () => {
    const none = loadRuntimeEnv({});
    expect(none.STRATA_KEYRING).toBeUndefined();
    expect(none.STRATA_KEYRING_KEYS).toBeUndefined();
    const env = loadRuntimeEnv({ STRATA_KEYRING: 'kms', STRATA_KEYRING_KEYS: ` ${KEY_ARN}, alias/orders,,${KEY_ARN}` });
    expect(env.STRATA_KEYRING).toBe('kms');
    expect(env.STRATA_KEYRING_KEYS).toEqual([KEY_ARN, 'alias/orders']);
    expect(loadRuntimeEnv({ STRATA_KEYRING: 'file:/tmp/keys', STRATA_KEYRING_KEYS: 'pii,logs' }).STRATA_KEYRING_KEYS).toEqual([
      'pii',
      'logs',
    ]);
  });

  it.each([
    [{ STRATA_KEYRING: 'vault' }, /STRATA_KEYRING must be 'kms' \(AWS KMS\) or 'file:<dir>' \(a folder of key files\)/],
    [{ STRATA_KEYRING: 'file:' }, /STRATA_KEYRING must be 'kms'/],
    [{ STRATA_KEYRING: 'kms', STRATA_KEYRING_KEYS: ' , ' }, /STRATA_KEYRING_KEYS must list key names, comma-separated/],
    [{ STRATA_KEYRING_KEYS: 'alias/orders' }, /STRATA_KEYRING_KEYS names the keys .* no keyring: set STRATA_KEYRING/],
    [
      { STRATA_KEYRING: 'kms', STRATA_KEYRING_KEYS: `${KEY_ARN},orders` },
      /STRATA_KEYRING_KEYS: 'orders' is not a KMS key identifier: name a key by its key ARN/,
    ],
  ])('refuse %j with a message naming the variable', (env, message) => {
    expect(configError(env)).toMatch(message);
  });

  it('build no keyring, a KMS keyring or a key-file keyring, and the compile options that go with each', () => {
    const none = keyringFromEnv(loadRuntimeEnv({}));
    expect(none.keyring).toBeUndefined();
    expect(encryptionCompileOptions(none)).toBeUndefined();
    expect(none.describe).toMatch(/encrypt rules are refused \(set STRATA_KEYRING\)/);

    const aws = keyringFromEnv(loadRuntimeEnv({ STRATA_KEYRING: 'kms', STRATA_KEYRING_KEYS: KEY_ARN, AWS_REGION: 'eu-west-1' }));
    expect(aws.keyring).toBeInstanceOf(KmsKeyring);
    expect(encryptionCompileOptions(aws)).toEqual({ keyring: 'kms', keys: [KEY_ARN] });
    expect(aws.describe).toBe(`keys  AWS KMS in eu-west-1 (policies may use ${KEY_ARN})`);

    const local = keyringFromEnv(loadRuntimeEnv({ STRATA_KEYRING: 'file:/tmp/k' }), { createLocalKeys: true });
    expect(local.keyring).toBeInstanceOf(LocalKeyring);
    expect(encryptionCompileOptions(local)).toEqual({ keyring: 'local key files' });
    expect(local.describe).toBe('keys  key files in /tmp/k, created on first use');
  });

  it('a kms keyring calls the client it is given (the real one is made on the first call)', async () => {
    const sent: unknown[] = [];
    const client = {
      send: async (c: { input: unknown }) => {
        sent.push(c.input);
        return { Plaintext: new Uint8Array(32).fill(1), CiphertextBlob: new Uint8Array([1, 2, 3]) };
      },
    } as unknown as KmsClient;
    const { keyring } = keyringFromEnv(loadRuntimeEnv({ STRATA_KEYRING: 'kms' }), { kmsClient: client });
    await keyring!.generateDataKey(KEY_ARN);
    expect(sent).toEqual([expect.objectContaining({ KeyId: KEY_ARN, KeySpec: 'AES_256' })]);
  });
});

describe('buildApiContext with a keyring', () => {
  let dir: string;
  let ctx: BuiltContext | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'strata-keyring-'));
  });
  afterEach(async () => {
    ctx?.livePolicy?.stop();
    await ctx?.coordinator.close();
    ctx = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const seal = (key: string) => ({
    rules: [{ id: 'seal', scope: { namespace: 'vault' }, on: { action: 'put' }, do: [{ encrypt: { key } }] }],
  });
  const build = (env: NodeJS.ProcessEnv, createLocalKeys = false) =>
    (ctx = buildApiContext(
      loadRuntimeEnv({ STRATA_LOCAL_DIR: join(dir, 'data'), STRATA_POLICY_STORE: `file:${join(dir, 'policies')}`, ...env }),
      { flushTimer: false, createLocalKeys },
    ));

  it('refuses encrypt rules without one, and keys outside STRATA_KEYRING_KEYS', async () => {
    await expect(build({}).policyAdmin!.validate(seal('pii'))).rejects.toThrow(
      /no keyring for encryption keys: set STRATA_KEYRING/,
    );
    await ctx!.coordinator.close();
    const keys = { STRATA_KEYRING: `file:${join(dir, 'keys')}`, STRATA_KEYRING_KEYS: 'pii' };
    await expect(build(keys).policyAdmin!.validate(seal('other'))).rejects.toThrow(
      /key 'other' is not one this deployment may use \(local key files: pii\)/,
    );
    await expect(ctx!.policyAdmin!.validate(seal('pii'))).resolves.toMatchObject({ valid: true });
    expect(ctx!.describe()).toContain(`keys  key files in ${join(dir, 'keys')} (policies may use pii)`);
  });

  it('encrypts what an encrypt rule covers before any tier holds it, under a key file created on first use (npm start)', async () => {
    const keysDir = join(dir, 'keys');
    const c = build({ STRATA_KEYRING: `file:${keysDir}` }, true);
    await c.policyAdmin!.put(seal('pii'), { ifVersion: 0, author: 'test' });
    await c.livePolicy!.refresh();
    const secret = Buffer.from('card 4111 1111 1111 1111');
    await c.coordinator.put('vault', 'card', secret);
    expect(readdirSync(keysDir)).toEqual(['pii.key']);
    const stored = await c.tiers[0]!.get('vault', 'card');
    expect(stored!.header.encoding?.aes).toEqual({ key: 'pii', dataKey: expect.any(String) });
    expect(stored!.value.includes(secret)).toBe(false);
    const read = await c.coordinator.get('vault', 'card');
    expect(read!.entry.value.equals(secret)).toBe(true);
    expect(read!.transformed).toBe(true);
  });
});
