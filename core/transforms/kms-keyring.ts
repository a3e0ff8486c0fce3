import type {
  DecryptCommand,
  DecryptCommandOutput,
  GenerateDataKeyCommand,
  GenerateDataKeyCommandOutput,
} from '@aws-sdk/client-kms';
import { KeyUnavailableError, type Keyring } from './keyring.js';

/**
 * Master keys in AWS KMS: a data key is made by GenerateDataKey (a 256-bit key, its plaintext and its copy wrapped
 * under the KMS key) and unwrapped by Decrypt, pinned to the key the value names and bound to Strata's encryption
 * context. The KMS key never leaves KMS; the data key's plaintext lives in this process only, and is never logged nor
 * carried by an error.
 *
 * The key a policy names (`{ encrypt: { key } }`) is passed to KMS as it is written: a key id, a key ARN, an alias name
 * (`alias/...`) or an alias ARN. Values record that name, and Decrypt is pinned to it, so a value written under an
 * alias reads only while the alias points at the key that wrapped its data key: retarget an alias and those values are
 * unreadable (IncorrectKeyException) until it points back (and the deployment's IAM grant covers only the key the
 * alias pointed at when it was deployed: the CDK stack prop policyEncryptionKeys). Prefer key ARNs in policies, and
 * rotate with KMS's automatic rotation, which keeps the key, its ARN and its earlier key material.
 */

/** The two KMS calls, as the SDK's KMSClient answers them; tests stub it at the SDK boundary. */
export interface KmsClient {
  send(command: GenerateDataKeyCommand): Promise<Pick<GenerateDataKeyCommandOutput, 'Plaintext' | 'CiphertextBlob' | 'KeyId'>>;
  send(command: DecryptCommand): Promise<Pick<DecryptCommandOutput, 'Plaintext' | 'KeyId'>>;
}

export interface KmsKeyringOptions {
  /** A KMSClient (`new KMSClient({ region })`), or anything that answers the two commands like one. */
  readonly client: KmsClient;
}

/**
 * The encryption context of every data key Strata wraps: KMS binds it to the wrapped key (Decrypt needs the same
 * pairs), CloudTrail logs it, and the IAM grant requires it (`kms:EncryptionContext:strata:purpose`), so the
 * functions' permission on a key covers Strata's data keys and nothing else. Plain strings, never secret.
 */
export const KMS_ENCRYPTION_CONTEXT: Readonly<Record<string, string>> = Object.freeze({ 'strata:purpose': 'value-data-key' });

const DATA_KEY_BYTES = 32;

const KEY_ID = String.raw`(?:mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`;
const ALIAS = String.raw`alias/[A-Za-z0-9/_-]{1,250}`;
const ARN = String.raw`arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:`;
const KMS_KEY_NAME = new RegExp(`^(?:${KEY_ID}|${ALIAS}|${ARN}key/${KEY_ID}|${ARN}${ALIAS})$`);

/**
 * Why `name` cannot identify a KMS key, or undefined. KMS takes a key id (`1234abcd-...` or `mrk-...`), a key ARN,
 * an alias name (`alias/...`) or an alias ARN.
 */
export function kmsKeyNameProblem(name: string): string | undefined {
  if (KMS_KEY_NAME.test(name)) return undefined;
  return (
    `'${name}' is not a KMS key identifier: name a key by its key ARN (arn:aws:kms:<region>:<account>:key/<id>), ` +
    'key id, alias name (alias/<name>) or alias ARN'
  );
}

/**
 * KMS errors that last until someone changes the key or its permissions: retrying cannot help (KEY_UNAVAILABLE is
 * then permanent, and clients do not retry). Everything else (throttling, KMSInternalException,
 * DependencyTimeoutException, KeyUnavailableException, network errors, 5xx) may pass and is retried.
 */
const PERMANENT: Readonly<Record<string, string>> = {
  NotFoundException: 'no such key (deleted, or not in this account and region)',
  DisabledException: 'the key is disabled',
  KMSInvalidStateException: 'the key is not usable in its state (pending deletion, or pending import)',
  AccessDeniedException: 'this deployment is not allowed to use the key (IAM policy or key policy)',
  InvalidCiphertextException: 'the stored data key does not decrypt (corrupt, or bound to another encryption context)',
  IncorrectKeyException: 'the stored data key was wrapped by another key (an alias retargeted, or data copied from elsewhere)',
  InvalidKeyUsageException: 'the key is not a symmetric encryption key (ENCRYPT_DECRYPT)',
  InvalidArnException: 'the key ARN is malformed',
  InvalidGrantTokenException: 'a grant token was refused',
  ValidationException: 'KMS refused the request as malformed',
  UnsupportedOperationException: 'the key does not support this operation (a key in a custom key store)',
};

/** Transient KMS errors, named for the message. */
const TRANSIENT: Readonly<Record<string, string>> = {
  ThrottlingException: 'KMS is throttling this account (request quota)',
  KMSInternalException: 'KMS failed internally',
  DependencyTimeoutException: 'KMS timed out',
  KeyUnavailableException: 'the key is temporarily unavailable',
};

export class KmsKeyring implements Keyring {
  readonly kind = 'kms';
  private sdk?: Promise<typeof import('@aws-sdk/client-kms')>;

  constructor(private readonly opts: KmsKeyringOptions) {}

  async generateDataKey(key: string): Promise<{ plaintext: Buffer; wrapped: Buffer }> {
    this.checkName(key);
    const { GenerateDataKeyCommand } = await this.commands();
    // KeySpec or NumberOfBytes, never both; AES_256 is a 32-byte key.
    const command = new GenerateDataKeyCommand({
      KeyId: key,
      KeySpec: 'AES_256',
      EncryptionContext: { ...KMS_ENCRYPTION_CONTEXT },
    });
    let out: Pick<GenerateDataKeyCommandOutput, 'Plaintext' | 'CiphertextBlob'>;
    try {
      out = await this.opts.client.send(command);
    } catch (e) {
      throw kmsError(key, 'GenerateDataKey', e);
    }
    const plaintext = takeKey(out.Plaintext);
    if (!plaintext || !out.CiphertextBlob?.length)
      throw new KeyUnavailableError(key, 'kms: GenerateDataKey answered without a 32-byte data key and its wrapped copy', {
        permanent: false,
      });
    return { plaintext, wrapped: Buffer.from(out.CiphertextBlob) };
  }

  async unwrapDataKey(key: string, wrapped: Buffer): Promise<Buffer> {
    this.checkName(key);
    const { DecryptCommand } = await this.commands();
    // KeyId pins the key: a data key wrapped by any other key is refused (IncorrectKeyException), whatever the blob says.
    const command = new DecryptCommand({
      CiphertextBlob: new Uint8Array(wrapped),
      KeyId: key,
      EncryptionContext: { ...KMS_ENCRYPTION_CONTEXT },
    });
    let out: Pick<DecryptCommandOutput, 'Plaintext'>;
    try {
      out = await this.opts.client.send(command);
    } catch (e) {
      throw kmsError(key, 'Decrypt', e);
    }
    const plaintext = takeKey(out.Plaintext);
    if (!plaintext)
      throw new KeyUnavailableError(key, 'kms: the stored data key does not decrypt to a 32-byte key', { permanent: true });
    return plaintext;
  }

  private checkName(key: string): void {
    const problem = kmsKeyNameProblem(key);
    if (problem) throw new KeyUnavailableError(key, `kms: ${problem}`, { permanent: true });
  }

  /** The SDK's command classes, loaded on first use: a runtime that never encrypts never loads the KMS client. */
  private commands(): Promise<typeof import('@aws-sdk/client-kms')> {
    if (!this.sdk) {
      const loading = import('@aws-sdk/client-kms');
      this.sdk = loading;
      loading.catch(() => {
        if (this.sdk === loading) this.sdk = undefined;
      });
    }
    return this.sdk;
  }
}

/**
 * The data key as a Buffer of its own, the SDK's copy zeroed; undefined when it is not 32 bytes (its bytes are
 * never put in an error).
 */
function takeKey(bytes: Uint8Array | undefined): Buffer | undefined {
  if (!bytes) return undefined;
  const ok = bytes.length === DATA_KEY_BYTES;
  const copy = ok ? Buffer.from(bytes) : undefined;
  bytes.fill(0);
  return copy;
}

/**
 * A KMS failure as KEY_UNAVAILABLE: permanent for what lasts until the key or its permissions change, else retried.
 * The message names the KMS error, never KMS's own message (it quotes the role's ARN), and never key material;
 * the SDK error stays the cause, for logs.
 */
function kmsError(key: string, operation: string, e: unknown): KeyUnavailableError {
  const name = e instanceof Error ? e.name : typeof e;
  const permanent = PERMANENT[name];
  if (permanent) return new KeyUnavailableError(key, `kms: ${operation}: ${permanent} (${name})`, { permanent: true, cause: e });
  const fault = (e as { $fault?: string } | undefined)?.$fault;
  const status = (e as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
  const why =
    TRANSIENT[name] ??
    (fault === 'server' || (status !== undefined && status >= 500)
      ? `KMS answered ${status ?? 'a server error'}`
      : fault
        ? 'KMS refused the request'
        : 'KMS could not be reached');
  return new KeyUnavailableError(key, `kms: ${operation}: ${why} (${name})`, { permanent: false, cause: e });
}
