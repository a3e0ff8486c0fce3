import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { permanentDetails, StrataError } from '../errors.js';
import { log } from '../util/logger.js';

/**
 * Where the master keys of envelope encryption live: they wrap the data keys that encrypt values (codec.ts) and
 * never leave it. AWS: KMS (kms-keyring.ts). Locally: key files (this file). A keyring never logs key material and
 * its errors never carry any.
 */
export interface Keyring {
  /** What the keyring is, for errors and logs ('kms', 'local key files'). */
  readonly kind: string;
  /** A new 256-bit data key under the master key `key`: its plaintext, and its wrapped form to store. */
  generateDataKey(key: string): Promise<{ plaintext: Buffer; wrapped: Buffer }>;
  /** The plaintext of a data key this keyring wrapped under `key`. */
  unwrapDataKey(key: string, wrapped: Buffer): Promise<Buffer>;
}

/**
 * 503 KEY_UNAVAILABLE: the master key a value needs cannot be used. Retried by clients unless `permanent` (the key
 * is gone or disabled: values encrypted under it stay unreadable until it is back; docs/POLICIES.md, "Encryption").
 */
export class KeyUnavailableError extends StrataError {
  constructor(key: string, reason: string, opts: { permanent: boolean; cause?: unknown }) {
    const details = { key, keyring: reason.split(':')[0] };
    super(
      'KEY_UNAVAILABLE',
      `the encryption key '${key}' cannot be used (${reason}); values encrypted under it cannot be read or written ` +
        'until it is available again',
      opts.permanent ? permanentDetails(details) : details,
      { cause: opts.cause },
    );
  }
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A key name as a file name: letters, digits, `.`, `_` and `-` kept, anything else percent-encoded. */
export function keyFileName(key: string): string {
  return `${key.replace(/[^A-Za-z0-9._-]/g, (c) => '%' + c.charCodeAt(0).toString(16).padStart(2, '0'))}.key`;
}

export interface LocalKeyringOptions {
  /** The folder of key files: `<key name>.key`, 32 random bytes in base64. */
  readonly dir: string;
  /**
   * Create a key file that does not exist yet (`npm start`, so a policy can name a new key). Off: a missing file is
   * a permanent KEY_UNAVAILABLE. @default false
   */
  readonly create?: boolean;
}

/**
 * Master keys in local files, for runs without AWS. A data key is wrapped with AES-256-GCM under the file's key,
 * bound to the key's name. Losing a file loses every value encrypted under it (there is no copy anywhere else).
 */
export class LocalKeyring implements Keyring {
  readonly kind = 'local key files';
  private readonly keys = new Map<string, Promise<Buffer>>();

  constructor(private readonly opts: LocalKeyringOptions) {}

  async generateDataKey(key: string): Promise<{ plaintext: Buffer; wrapped: Buffer }> {
    const master = await this.master(key);
    const plaintext = randomBytes(KEY_BYTES);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', master, iv).setAAD(Buffer.from(key, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { plaintext, wrapped: Buffer.concat([iv, body, cipher.getAuthTag()]) };
  }

  async unwrapDataKey(key: string, wrapped: Buffer): Promise<Buffer> {
    const master = await this.master(key);
    if (wrapped.length !== IV_BYTES + KEY_BYTES + TAG_BYTES)
      throw new KeyUnavailableError(key, `${this.kind}: the stored data key is malformed`, { permanent: true });
    try {
      const decipher = createDecipheriv('aes-256-gcm', master, wrapped.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(key, 'utf8')).setAuthTag(wrapped.subarray(IV_BYTES + KEY_BYTES));
      return Buffer.concat([decipher.update(wrapped.subarray(IV_BYTES, IV_BYTES + KEY_BYTES)), decipher.final()]);
    } catch (e) {
      throw new KeyUnavailableError(
        key,
        `${this.kind}: the key file does not open this data key (the file was replaced, or the data was written under ` +
          'another key)',
        { permanent: true, cause: e },
      );
    }
  }

  /** The file's key, read once; a failed read is not cached, so a restored file is picked up. */
  private master(key: string): Promise<Buffer> {
    let p = this.keys.get(key);
    if (!p) {
      p = this.load(key);
      this.keys.set(key, p);
      p.catch(() => this.keys.delete(key));
    }
    return p;
  }

  private async load(key: string): Promise<Buffer> {
    const file = path.join(this.opts.dir, keyFileName(key));
    let text: string | undefined;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || !this.opts.create)
        throw new KeyUnavailableError(key, `${this.kind}: cannot read ${file}`, { permanent: true, cause: e });
    }
    if (text === undefined) {
      await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
      const fresh = randomBytes(KEY_BYTES);
      try {
        // Create-only: of two processes creating the same key, one wins and the other reads its file.
        await writeFile(file, fresh.toString('base64') + '\n', { flag: 'wx', mode: 0o600 });
        log.warn('created a local encryption key file; values encrypted under it are lost if it is lost', { key, file });
        return fresh;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        text = await readFile(file, 'utf8');
      }
    }
    const master = Buffer.from(text.trim(), 'base64');
    if (master.length !== KEY_BYTES)
      throw new KeyUnavailableError(key, `${this.kind}: ${file} does not hold a 32-byte key in base64`, { permanent: true });
    return master;
  }
}
