import type { CompileOptions } from '../policy/compile.js';
import { LocalKeyring, type Keyring } from '../transforms/keyring.js';
import { KmsKeyring, type KmsClient } from '../transforms/kms-keyring.js';
import type { RuntimeEnv } from './runtime-env.js';

/**
 * The runtime's keyring, from STRATA_KEYRING: `kms` (AWS KMS, a KMSClient in AWS_REGION: what the API functions get
 * when the stack prop policyEncryptionKeys is set), `file:<dir>` (key files in a folder: `npm start` uses
 * `<data dir>/_keys`), absent = none (encrypt rules are refused when a policy is put). STRATA_KEYRING_KEYS, when set,
 * is the list of key names a policy may encrypt with (in AWS, the KMS key ARNs the deployment was granted).
 */
export interface KeyringSetup {
  readonly keyring?: Keyring;
  /** The names policies may use; absent = any. */
  readonly keys?: readonly string[];
  /** For start-up banners. */
  readonly describe: string;
}

export interface KeyringEnvOptions {
  /** `file:` keyrings create a key file a policy names for the first time (`npm start`). @default false */
  readonly createLocalKeys?: boolean;
  /** The KMS client of a `kms` keyring. @default a KMSClient in AWS_REGION, created on the first KMS call */
  readonly kmsClient?: KmsClient;
}

export function keyringFromEnv(
  env: Pick<RuntimeEnv, 'STRATA_KEYRING' | 'STRATA_KEYRING_KEYS' | 'AWS_REGION'>,
  opts: KeyringEnvOptions = {},
): KeyringSetup {
  const spec = env.STRATA_KEYRING;
  const keys = env.STRATA_KEYRING_KEYS;
  const listed = keys ? ` (policies may use ${keys.length ? keys.join(', ') : 'no key'})` : '';
  if (!spec) return { describe: 'keys  none: encrypt rules are refused (set STRATA_KEYRING)' };
  if (spec === 'kms') {
    const keyring = new KmsKeyring({ client: opts.kmsClient ?? lazyKmsClient(env.AWS_REGION) });
    return { keyring, ...(keys ? { keys } : {}), describe: `keys  AWS KMS in ${env.AWS_REGION}${listed}` };
  }
  const dir = spec.slice('file:'.length);
  const keyring = new LocalKeyring({ dir, create: opts.createLocalKeys ?? false });
  const create = opts.createLocalKeys ? ', created on first use' : '';
  return { keyring, ...(keys ? { keys } : {}), describe: `keys  key files in ${dir}${create}${listed}` };
}

/** What the policy compiler needs to know of the keyring (CompileOptions.encryption): undefined without one. */
export function encryptionCompileOptions(setup: KeyringSetup): CompileOptions['encryption'] {
  if (!setup.keyring) return undefined;
  return { keyring: setup.keyring.kind, ...(setup.keys ? { keys: setup.keys } : {}) };
}

/**
 * A KMSClient made on the first KMS call: the SDK's KMS client is loaded only by a process that encrypts or decrypts
 * (every API function has the keyring once keys are granted; the admin function only checks policies against it).
 */
function lazyKmsClient(region: string): KmsClient {
  let client: Promise<KmsClient> | undefined;
  const get = (): Promise<KmsClient> => {
    if (!client) {
      const loading: Promise<KmsClient> = import('@aws-sdk/client-kms').then((m) => new m.KMSClient({ region }));
      client = loading;
      loading.catch(() => {
        if (client === loading) client = undefined;
      });
    }
    return client;
  };
  return { send: async (command: never) => (await get()).send(command) } as KmsClient;
}
