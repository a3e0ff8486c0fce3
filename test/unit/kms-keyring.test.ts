/**
 * The KMS keyring (core/transforms/kms-keyring.ts) against a stub KMS client at the SDK boundary: the stub receives
 * the SDK's own GenerateDataKeyCommand / DecryptCommand objects (their `input` is what the SDK would serialize) and
 * answers or throws the SDK's own exception classes, so everything above `client.send` runs as it does in AWS. The
 * stub emulates the KMS rules the keyring relies on (documented behaviour, cited next to each test): a wrapped data
 * key opens only under the same key (Decrypt's KeyId) and the same encryption context.
 */
import { randomBytes } from 'node:crypto';
import {
  DecryptCommand,
  DependencyTimeoutException,
  DisabledException,
  GenerateDataKeyCommand,
  IncorrectKeyException,
  InvalidCiphertextException,
  InvalidKeyUsageException,
  KeyUnavailableException,
  KMSInternalException,
  KMSInvalidStateException,
  KMSServiceException,
  NotFoundException,
  type DecryptCommandOutput,
  type GenerateDataKeyCommandOutput,
} from '@aws-sdk/client-kms';
import { KeyUnavailableError } from '../../core/transforms/keyring.js';
import { KMS_ENCRYPTION_CONTEXT, KmsKeyring, kmsKeyNameProblem, type KmsClient } from '../../core/transforms/kms-keyring.js';
import { ValueCodec } from '../../core/transforms/codec.js';

const ACCOUNT = '111122223333';
const KEY_ID = '1234abcd-12ab-34cd-56ef-1234567890ab';
const KEY_ARN = `arn:aws:kms:us-east-2:${ACCOUNT}:key/${KEY_ID}`;
const ALIAS = 'alias/ExampleAlias';
const ALIAS_ARN = `arn:aws:kms:us-east-2:${ACCOUNT}:alias/ExampleAlias`;
const OTHER_ARN = `arn:aws:kms:us-east-2:${ACCOUNT}:key/0987dcba-09fe-87dc-65ba-ab0987654321`;

type Command = GenerateDataKeyCommand | DecryptCommand;
type Answer =
  | Pick<GenerateDataKeyCommandOutput, 'Plaintext' | 'CiphertextBlob' | 'KeyId'>
  | Pick<DecryptCommandOutput, 'Plaintext' | 'KeyId'>;

/**
 * KMS as far as the keyring uses it. Keys are known by their ARN; each has its names (key id, ARN, alias, alias ARN).
 * A wrapped data key is an opaque handle to what the stub remembers (the key that wrapped it, the encryption context,
 * the plaintext): any reversible encoding would do, this one cannot be opened without the stub.
 */
class StubKms {
  readonly calls: Command[] = [];
  /** Every plaintext data key handed out (copies: the keyring zeroes the SDK's array). */
  readonly issued: Buffer[] = [];
  /** The arrays the stub returned as Plaintext, to check the keyring wipes them. */
  readonly returned: Uint8Array[] = [];
  private readonly names = new Map<string, string>();
  private readonly disabled = new Set<string>();
  private readonly blobs = new Map<string, { arn: string; context: string; plaintext: Buffer }>();
  /** Thrown by the next call instead of answering. */
  failNext?: unknown;
  /** Replaces the next answer. */
  answerNext?: Answer;

  constructor() {
    this.addKey(KEY_ARN, [KEY_ID, KEY_ARN, ALIAS, ALIAS_ARN]);
    this.addKey(OTHER_ARN, [OTHER_ARN]);
  }

  addKey(arn: string, names: string[]): void {
    for (const n of names) this.names.set(n, arn);
  }

  disable(arn: string): void {
    this.disabled.add(arn);
  }

  async send(command: Command): Promise<Answer> {
    this.calls.push(command);
    const fail = this.failNext;
    this.failNext = undefined;
    if (fail) throw fail;
    const answer = this.answerNext;
    this.answerNext = undefined;
    if (answer) return answer;
    const meta = { $metadata: {} };
    if (command instanceof GenerateDataKeyCommand) {
      const arn = this.resolve(command.input.KeyId!);
      const plaintext = randomBytes(command.input.KeySpec === 'AES_256' ? 32 : 16);
      const handle = randomBytes(24);
      this.blobs.set(handle.toString('hex'), { arn, context: contextOf(command.input.EncryptionContext), plaintext });
      this.issued.push(Buffer.from(plaintext));
      const returned = new Uint8Array(plaintext);
      this.returned.push(returned);
      return { Plaintext: returned, CiphertextBlob: new Uint8Array(handle), KeyId: arn };
    }
    const blob = this.blobs.get(Buffer.from(command.input.CiphertextBlob!).toString('hex'));
    if (!blob) throw new InvalidCiphertextException({ message: 'not a ciphertext of this account', ...meta });
    const arn = command.input.KeyId ? this.resolve(command.input.KeyId) : blob.arn;
    if (arn !== blob.arn) throw new IncorrectKeyException({ message: 'the KMS key cannot decrypt the data', ...meta });
    if (contextOf(command.input.EncryptionContext) !== blob.context)
      throw new InvalidCiphertextException({ message: 'encryption context mismatch', ...meta });
    const returned = new Uint8Array(blob.plaintext);
    this.returned.push(returned);
    return { Plaintext: returned, KeyId: arn };
  }

  private resolve(name: string): string {
    const arn = this.names.get(name);
    if (!arn) throw new NotFoundException({ message: `Key '${name}' does not exist`, $metadata: {} });
    if (this.disabled.has(arn)) throw new DisabledException({ message: `${arn} is disabled.`, $metadata: {} });
    return arn;
  }
}

/** The stub as the keyring types its client: a KMSClient-shaped object. */
function setup() {
  const kms = new StubKms();
  const client: KmsClient = kms;
  return { kms, keyring: new KmsKeyring({ client }) };
}

/** An encryption context as one comparable string (order of pairs does not matter to KMS). */
function contextOf(ctx: Record<string, string> | undefined): string {
  return JSON.stringify(Object.entries(ctx ?? {}).sort());
}

async function failure(p: Promise<unknown>): Promise<KeyUnavailableError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(KeyUnavailableError);
    return e as KeyUnavailableError;
  }
  throw new Error('expected a KeyUnavailableError');
}

describe('KmsKeyring requests', () => {
  // GenerateDataKey: "You must specify either the KeySpec or the NumberOfBytes parameter (but not both) in every
  // GenerateDataKey request"; AES_256 "to generate a 256-bit symmetric key".
  // https://docs.aws.amazon.com/kms/latest/APIReference/API_GenerateDataKey.html
  // https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/kms/aws.sdk.kotlin.services.kms.model/-generate-data-key-request/key-spec.html
  it('asks GenerateDataKey for an AES_256 key by KeySpec alone (never NumberOfBytes), under the named key and context', async () => {
    const { kms, keyring } = setup();
    const { plaintext, wrapped } = await keyring.generateDataKey(KEY_ARN);
    expect(kms.calls).toHaveLength(1);
    expect(kms.calls[0]).toBeInstanceOf(GenerateDataKeyCommand);
    expect(kms.calls[0]!.input).toEqual({
      KeyId: KEY_ARN,
      KeySpec: 'AES_256',
      EncryptionContext: { 'strata:purpose': 'value-data-key' },
    });
    expect('NumberOfBytes' in kms.calls[0]!.input).toBe(false);
    expect(plaintext).toHaveLength(32);
    expect(plaintext.equals(kms.issued[0]!)).toBe(true);
    expect(wrapped.length).toBeGreaterThan(0);
  });

  // KeyId: "To specify a KMS key, use its key ID, key ARN, alias name, or alias ARN. When using an alias name, prefix
  // it with "alias/"." (the four example formats below are the documentation's own).
  // https://docs.aws.amazon.com/kms/latest/developerguide/find-cmk-id-arn.html
  // https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/kms/aws.sdk.kotlin.services.kms.model/-encrypt-request/key-id.html
  it.each([
    ['a key id', KEY_ID],
    ['a key ARN', KEY_ARN],
    ['an alias name', ALIAS],
    ['an alias ARN', ALIAS_ARN],
  ])('passes %s through unchanged as KeyId, on GenerateDataKey and on Decrypt', async (_what, name) => {
    const { kms, keyring } = setup();
    const { plaintext, wrapped } = await keyring.generateDataKey(name);
    expect((await keyring.unwrapDataKey(name, wrapped)).equals(plaintext)).toBe(true);
    expect(kms.calls.map((c) => c.input.KeyId)).toEqual([name, name]);
    expect(kmsKeyNameProblem(name)).toBeUndefined();
  });

  // Encryption context: "The key and value in an encryption context pair must be simple literal strings", and the
  // same context (an exact, case-sensitive match) is required to decrypt.
  // https://docs.aws.amazon.com/kms/latest/developerguide/encrypt_context.html (Encryption context rules)
  it('sends the same encryption context, string keys and string values, on both calls', async () => {
    const { kms, keyring } = setup();
    const { wrapped } = await keyring.generateDataKey(KEY_ARN);
    await keyring.unwrapDataKey(KEY_ARN, wrapped);
    const [generate, decrypt] = kms.calls.map((c) => c.input.EncryptionContext);
    expect(decrypt).toEqual(generate);
    expect(generate).toEqual(KMS_ENCRYPTION_CONTEXT);
    for (const [k, v] of Object.entries(generate!)) {
      expect(typeof k).toBe('string');
      expect(typeof v).toBe('string');
    }
    // Each call gets its own copy: nothing downstream can change the constant every later call sends.
    expect(generate).not.toBe(KMS_ENCRYPTION_CONTEXT);
    expect(Object.isFrozen(KMS_ENCRYPTION_CONTEXT)).toBe(true);
  });

  // Decrypt: "specifying the KMS key is always recommended as a best practice. When you use the KeyId parameter to
  // specify a KMS key, AWS KMS only uses the KMS key you specify. If the ciphertext was encrypted under a different
  // KMS key, the Decrypt operation fails."  IncorrectKeyException: "The KeyId in a Decrypt request ... must identify
  // the same KMS key that was used to encrypt the ciphertext."
  // https://docs.aws.amazon.com/kms/latest/APIReference/API_Decrypt.html
  // https://docs.aws.amazon.com/botocore/latest/reference/services/kms/client/exceptions/IncorrectKeyException.html
  it('passes KeyId and the wrapped bytes to Decrypt, so a data key wrapped by another key is refused', async () => {
    const { kms, keyring } = setup();
    const { wrapped } = await keyring.generateDataKey(KEY_ARN);
    await keyring.unwrapDataKey(KEY_ARN, wrapped);
    const decrypt = kms.calls[1]!;
    expect(decrypt).toBeInstanceOf(DecryptCommand);
    expect(decrypt.input).toEqual({
      CiphertextBlob: new Uint8Array(wrapped),
      KeyId: KEY_ARN,
      EncryptionContext: KMS_ENCRYPTION_CONTEXT,
    });
    const e = await failure(keyring.unwrapDataKey(OTHER_ARN, wrapped));
    expect(e.permanent).toBe(true);
    expect(e.message).toMatch(/IncorrectKeyException/);
  });

  it('refuses a name that cannot identify a KMS key without calling KMS (permanent)', async () => {
    const { kms, keyring } = setup();
    for (const name of ['orders', 'alias/', `arn:aws:kms:us-east-2:${ACCOUNT}:bucket/x`, ` ${KEY_ID}`]) {
      const e = await failure(keyring.generateDataKey(name));
      expect(e.permanent).toBe(true);
      expect(e.message).toMatch(/is not a KMS key identifier/);
      expect(e.details).toMatchObject({ key: name, keyring: 'kms' });
      expect(kmsKeyNameProblem(name)).toBeDefined();
    }
    expect(kms.calls).toEqual([]);
  });
});

describe('KmsKeyring errors', () => {
  const meta = { $metadata: { httpStatusCode: 400 } };
  // What KMS says (AccessDenied quotes the caller's role): kept in the cause, never in the API's answer.
  const SAID = 'User: arn:aws:sts::111122223333:assumed-role/strata-api/fn is not authorized to perform: kms:Decrypt';
  const serviceError = (name: string, fault: 'client' | 'server', status: number) =>
    new KMSServiceException({ name, $fault: fault, $metadata: { httpStatusCode: status }, message: SAID });

  // Permanent: the key or the permissions must change first.
  //  NotFoundException, DisabledException ("the specified KMS key is not enabled"), KMSInvalidStateException
  //  (disabled / pending deletion, https://docs.aws.amazon.com/kms/latest/developerguide/key-state.html),
  //  InvalidKeyUsageException: the GenerateDataKey errors, https://docs.aws.amazon.com/kms/latest/APIReference/API_GenerateDataKey.html
  //  InvalidCiphertextException ("the specified ciphertext, or additional authenticated data incorporated into the
  //  ciphertext, such as the encryption context, is corrupted, missing, or otherwise invalid"),
  //  https://docs.aws.amazon.com/botocore/latest/reference/services/kms/client/exceptions/InvalidCiphertextException.html
  //  IncorrectKeyException: https://docs.aws.amazon.com/botocore/latest/reference/services/kms/client/exceptions/IncorrectKeyException.html
  //  AccessDeniedException: IAM / key policy (https://docs.aws.amazon.com/kms/latest/developerguide/kms-api-permissions-reference.html)
  // Transient ("You can retry the request"):
  //  KeyUnavailableException: https://docs.aws.amazon.com/sdk-for-python/v4/reference/clients/kms/errors/KeyUnavailableException/
  //  DependencyTimeoutException: https://docs.aws.amazon.com/botocore/latest/reference/services/kms/client/exceptions/DependencyTimeoutException.html
  //  KMSInternalException ("The request can be retried"), in the GenerateDataKey / Decrypt error lists
  //  ThrottlingException: https://aws.amazon.com/premiumsupport/knowledge-center/kms-throttlingexception-error/
  it.each([
    ['NotFoundException', true, new NotFoundException({ message: SAID, ...meta })],
    ['DisabledException', true, new DisabledException({ message: SAID, ...meta })],
    ['KMSInvalidStateException', true, new KMSInvalidStateException({ message: SAID, ...meta })],
    ['AccessDeniedException', true, serviceError('AccessDeniedException', 'client', 400)],
    ['InvalidCiphertextException', true, new InvalidCiphertextException({ message: SAID, ...meta })],
    ['IncorrectKeyException', true, new IncorrectKeyException({ message: SAID, ...meta })],
    ['InvalidKeyUsageException', true, new InvalidKeyUsageException({ message: SAID, ...meta })],
    ['KeyUnavailableException', false, new KeyUnavailableException({ message: SAID, $metadata: { httpStatusCode: 500 } })],
    ['KMSInternalException', false, new KMSInternalException({ message: SAID, $metadata: { httpStatusCode: 500 } })],
    ['DependencyTimeoutException', false, new DependencyTimeoutException({ message: SAID, $metadata: { httpStatusCode: 500 } })],
    ['ThrottlingException', false, serviceError('ThrottlingException', 'client', 400)],
    ['an unmodelled 503', false, serviceError('ServiceUnavailable', 'server', 503)],
    ['a network error', false, Object.assign(new Error(SAID), { code: 'ECONNRESET' })],
    ['a timeout', false, Object.assign(new Error(SAID), { name: 'TimeoutError' })],
  ] as const)('maps %s to KEY_UNAVAILABLE (permanent: %s)', async (_what, permanent, error) => {
    for (const op of ['generate', 'unwrap'] as const) {
      const { kms, keyring } = setup();
      const { wrapped } = await keyring.generateDataKey(KEY_ARN);
      kms.failNext = error;
      const e = await failure(op === 'generate' ? keyring.generateDataKey(KEY_ARN) : keyring.unwrapDataKey(KEY_ARN, wrapped));
      expect(e.code).toBe('KEY_UNAVAILABLE');
      expect(e.status).toBe(503);
      expect(e.permanent).toBe(permanent);
      expect(e.details).toMatchObject({ key: KEY_ARN, keyring: 'kms' });
      expect(e.cause).toBe(error);
      expect(e.message).toContain((error as Error).name);
      expect(e.message).not.toContain(SAID);
      expect(JSON.stringify(e.toJSON())).not.toContain('assumed-role');
    }
  });

  it('maps a GenerateDataKey answer without a 32-byte key and its wrapped copy to a transient KEY_UNAVAILABLE', async () => {
    const { kms, keyring } = setup();
    kms.answerNext = { Plaintext: new Uint8Array(16).fill(7), CiphertextBlob: new Uint8Array(8) };
    expect((await failure(keyring.generateDataKey(KEY_ARN))).permanent).toBe(false);
    kms.answerNext = { Plaintext: new Uint8Array(32).fill(7) };
    expect((await failure(keyring.generateDataKey(KEY_ARN))).permanent).toBe(false);
  });

  it('maps a Decrypt answer that is not a 32-byte key to a permanent KEY_UNAVAILABLE', async () => {
    const { kms, keyring } = setup();
    const { wrapped } = await keyring.generateDataKey(KEY_ARN);
    kms.answerNext = { Plaintext: new Uint8Array(31).fill(9) };
    expect((await failure(keyring.unwrapDataKey(KEY_ARN, wrapped))).permanent).toBe(true);
  });
});

describe('KmsKeyring through ValueCodec', () => {
  const transform = { encrypt: { key: KEY_ARN } };

  it('encrypts values under one data key and decodes them, in this process and in another one (Decrypt)', async () => {
    const { kms, keyring } = setup();
    const writer = new ValueCodec({ keyring });
    const values = ['first', 'second', 'x'.repeat(10_000)].map((v) => Buffer.from(v));
    const stored = [];
    for (const [i, v] of values.entries()) stored.push(await writer.encode('orders', `k${i}`, v, transform));
    // One GenerateDataKey for the three values (the codec reuses a data key), no Decrypt for the writer's own reads.
    expect(kms.calls.map((c) => c.constructor.name)).toEqual(['GenerateDataKeyCommand']);
    for (const [i, s] of stored.entries()) {
      expect(s.encoding?.aes).toEqual({ key: KEY_ARN, dataKey: expect.any(String) });
      expect(s.value.includes(values[i]!)).toBe(false);
      expect((await writer.decode('orders', `k${i}`, s.value, s.encoding!)).equals(values[i]!)).toBe(true);
    }
    expect(kms.calls).toHaveLength(1);
    // Another process (a new codec, same KMS): one Decrypt for the shared data key, then every value reads.
    const reader = new ValueCodec({ keyring });
    for (const [i, s] of stored.entries())
      expect((await reader.decode('orders', `k${i}`, s.value, s.encoding!)).equals(values[i]!)).toBe(true);
    expect(kms.calls.map((c) => c.constructor.name)).toEqual(['GenerateDataKeyCommand', 'DecryptCommand']);
    expect(kms.calls[1]!.input).toMatchObject({ KeyId: KEY_ARN });
  });

  it('fails reads with a permanent KEY_UNAVAILABLE once the key is disabled (no cached data key)', async () => {
    const { kms, keyring } = setup();
    const s = await new ValueCodec({ keyring }).encode('orders', 'k', Buffer.from('secret value'), transform);
    kms.disable(KEY_ARN);
    const e = await failure(new ValueCodec({ keyring }).decode('orders', 'k', s.value, s.encoding!));
    expect(e.permanent).toBe(true);
    expect(e.message).toMatch(/disabled \(DisabledException\)/);
    expect(e.toJSON().error).toMatchObject({
      code: 'KEY_UNAVAILABLE',
      details: { key: KEY_ARN, keyring: 'kms', permanent: true },
    });
  });

  it('refuses a value whose header is rewritten to name another key (Decrypt is pinned to the key it names)', async () => {
    const { keyring } = setup();
    const s = await new ValueCodec({ keyring }).encode('orders', 'k', Buffer.from('v'), transform);
    const forged = { ...s.encoding!, aes: { ...s.encoding!.aes!, key: OTHER_ARN } };
    const e = await failure(new ValueCodec({ keyring }).decode('orders', 'k', s.value, forged));
    expect(e.permanent).toBe(true);
    expect(e.message).toMatch(/IncorrectKeyException/);
  });
});

describe('key material', () => {
  /** Every way an error can reach a caller or a log line. */
  function renderings(e: KeyUnavailableError): string[] {
    return [e.message, String(e), e.stack ?? '', JSON.stringify(e), JSON.stringify(e.toJSON()), JSON.stringify(e.details)];
  }
  /** The encodings a key could be written in. */
  function encodings(key: Buffer): string[] {
    return [
      key.toString('hex'),
      key.toString('base64'),
      key.toString('base64url'),
      key.toJSON().data.join(','),
      key.toString('latin1'),
    ];
  }

  it('never appears in a thrown error, and the SDK copy of every data key is wiped', async () => {
    const { kms, keyring } = setup();
    const codec = new ValueCodec({ keyring });
    const s = await codec.encode('orders', 'k', Buffer.from('value'), { encrypt: { key: KEY_ARN } });
    const { wrapped } = await keyring.generateDataKey(ALIAS);
    const errors: KeyUnavailableError[] = [];
    // A malformed answer that carries key bytes (too short to be a data key): they are dropped, not quoted.
    kms.answerNext = { Plaintext: new Uint8Array(kms.issued[0]!.subarray(0, 31)) };
    errors.push(await failure(keyring.unwrapDataKey(KEY_ARN, wrapped)));
    kms.answerNext = { Plaintext: new Uint8Array(kms.issued[1]!.subarray(0, 16)), CiphertextBlob: new Uint8Array(4) };
    errors.push(await failure(keyring.generateDataKey(KEY_ARN)));
    errors.push(await failure(keyring.unwrapDataKey(OTHER_ARN, wrapped)));
    kms.failNext = new KMSInternalException({ message: 'internal', $metadata: {} });
    errors.push(await failure(keyring.unwrapDataKey(ALIAS, wrapped)));
    kms.disable(KEY_ARN);
    errors.push(await failure(new ValueCodec({ keyring }).decode('orders', 'k', s.value, s.encoding!)));
    errors.push(await failure(keyring.generateDataKey('not-a-key')));
    expect(errors).toHaveLength(6);
    expect(kms.issued.length).toBeGreaterThanOrEqual(2);
    for (const e of errors)
      for (const text of renderings(e))
        for (const key of kms.issued) for (const enc of encodings(key)) expect(text).not.toContain(enc);
    // The keyring keeps its own copy and zeroes the array the SDK returned.
    expect(kms.returned.length).toBeGreaterThanOrEqual(2);
    for (const a of kms.returned) expect(a.every((b) => b === 0)).toBe(true);
  });
});
