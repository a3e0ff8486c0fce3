import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import { StrataError } from '../errors.js';
import type { EntryEncoding } from '../model/entry.js';
import { KeyUnavailableError, type Keyring } from './keyring.js';

/**
 * The foreground transforms of the policy engine (paper 003, Table 1: compress / uncompress, encrypt / decrypt):
 * a value is transformed once, before any tier sees it, and every tier holds the same transformed bytes (so
 * promotions, flushes, evictions and migrations copy them unchanged and their checksums hold). The entry's header
 * records what was done ({@link EntryEncoding}); a read undoes it whatever the policy in force by then says.
 *
 * Encryption is envelope encryption: AES-256-GCM under a data key, the data key wrapped by a master key that never
 * leaves its keyring (KMS in AWS, a key file locally, keyring.ts). A data key serves many values (one KMS call per
 * hour per process, not per write) with a random 96-bit IV each; it is replaced after `dataKeyMaxAgeMs` or
 * `dataKeyMaxUses` values, whichever comes first, far below GCM's 2^32 random-IV bound. Each value is bound to its
 * namespace and key (GCM associated data), so bytes copied under another key do not decrypt.
 */

/** What a policy's foreground rules ask of one value. */
export interface ValueTransform {
  /** zstd for values of at least `minBytes`; kept only when it makes the value smaller. */
  readonly compress?: { readonly minBytes: number; readonly level: number };
  /** AES-256-GCM envelope encryption under this master key. */
  readonly encrypt?: { readonly key: string };
}

/** Whether this Node has zstd in node:zlib (22.15 and later). */
export const ZSTD_AVAILABLE = typeof zlib.zstdCompressSync === 'function';

export interface CodecOptions {
  /** Where master keys live. Absent: encrypt rules fail with KEY_UNAVAILABLE (no keyring in this runtime). */
  readonly keyring?: Keyring;
  /** A data key encrypts values for at most this long. @default one hour */
  readonly dataKeyMaxAgeMs?: number;
  /** A data key encrypts at most this many values. @default 2^24 */
  readonly dataKeyMaxUses?: number;
  /**
   * How long an unwrapped data key is kept for reads. A master key disabled or deleted stops reads after at most
   * this long. @default five minutes
   */
  readonly unwrappedTtlMs?: number;
  /** Unwrapped data keys kept at most. @default 256 */
  readonly unwrappedMax?: number;
  readonly now?: () => number;
}

export interface CodecStats {
  dataKeysGenerated: number;
  dataKeysUnwrapped: number;
  /** Bytes given to compression, and the bytes it kept (values it did not shrink count on both sides). */
  compressIn: number;
  compressOut: number;
}

interface DataKey {
  readonly plaintext: Buffer;
  readonly wrapped: string;
  readonly created: number;
  uses: number;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Values above this are compressed off the event loop (zlib's thread pool). */
const ASYNC_ZSTD_BYTES = 128 * 1024;
const zstdCompress = ZSTD_AVAILABLE ? promisify(zlib.zstdCompress) : undefined;
const zstdDecompress = ZSTD_AVAILABLE ? promisify(zlib.zstdDecompress) : undefined;

export class ValueCodec {
  readonly stats: CodecStats = { dataKeysGenerated: 0, dataKeysUnwrapped: 0, compressIn: 0, compressOut: 0 };
  private readonly current = new Map<string, DataKey>();
  private readonly generating = new Map<string, Promise<DataKey>>();
  private readonly unwrapped = new Map<string, { key: Promise<Buffer>; at: number }>();
  private readonly maxAge: number;
  private readonly maxUses: number;
  private readonly unwrappedTtl: number;
  private readonly unwrappedMax: number;
  private readonly now: () => number;

  constructor(private readonly opts: CodecOptions = {}) {
    this.maxAge = opts.dataKeyMaxAgeMs ?? 3_600_000;
    this.maxUses = opts.dataKeyMaxUses ?? 2 ** 24;
    this.unwrappedTtl = opts.unwrappedTtlMs ?? 300_000;
    this.unwrappedMax = opts.unwrappedMax ?? 256;
    this.now = opts.now ?? Date.now;
  }

  /** The value as tiers store it, and what was done to it (undefined when nothing was). */
  async encode(ns: string, key: string, value: Buffer, t: ValueTransform): Promise<{ value: Buffer; encoding?: EntryEncoding }> {
    const encoding: EntryEncoding = { size: value.length };
    let out = value;
    if (t.compress && value.length >= t.compress.minBytes && value.length > 0) {
      const packed = await compress(value, t.compress.level);
      this.stats.compressIn += value.length;
      this.stats.compressOut += Math.min(packed.length, value.length);
      if (packed.length < value.length) {
        out = packed;
        encoding.zstd = true;
      }
    }
    if (t.encrypt) {
      const dk = await this.dataKey(t.encrypt.key);
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', dk.plaintext, iv).setAAD(associatedData(ns, key));
      out = Buffer.concat([iv, cipher.update(out), cipher.final(), cipher.getAuthTag()]);
      encoding.aes = { key: t.encrypt.key, dataKey: dk.wrapped };
    }
    return encoding.zstd || encoding.aes ? { value: out, encoding } : { value };
  }

  /** The value as it was written, from the stored bytes and their encoding. */
  async decode(ns: string, key: string, stored: Buffer, encoding: EntryEncoding): Promise<Buffer> {
    let out = stored;
    if (encoding.aes) {
      const dataKey = await this.unwrap(encoding.aes.key, encoding.aes.dataKey);
      if (out.length < IV_BYTES + TAG_BYTES) throw unreadable(ns, key, 'shorter than its IV and tag');
      try {
        const decipher = createDecipheriv('aes-256-gcm', dataKey, out.subarray(0, IV_BYTES));
        decipher.setAAD(associatedData(ns, key)).setAuthTag(out.subarray(out.length - TAG_BYTES));
        out = Buffer.concat([decipher.update(out.subarray(IV_BYTES, out.length - TAG_BYTES)), decipher.final()]);
      } catch (e) {
        throw unreadable(ns, key, 'its ciphertext failed authentication', e);
      }
    }
    if (encoding.zstd) {
      if (!zstdDecompress) throw unreadable(ns, key, 'it is zstd-compressed and this Node has no zstd (22.15 or later)');
      // Bounded by the size written, so damaged or forged bytes cannot expand without limit; decided on that size
      // (a highly compressible large value is not decompressed on the event loop), in one output chunk (zlib's
      // default 16 KiB chunks cost a thread-pool round trip each: bench transforms).
      const opts = {
        maxOutputLength: Math.max(1, encoding.size),
        chunkSize: Math.max(64, Math.min(encoding.size, 8 * 1024 * 1024)),
      };
      try {
        out = encoding.size > ASYNC_ZSTD_BYTES ? await zstdDecompress(out, opts) : zlib.zstdDecompressSync(out, opts);
      } catch (e) {
        throw unreadable(ns, key, `its zstd frame does not decode to ${encoding.size} bytes`, e);
      }
    }
    if (out.length !== encoding.size) throw unreadable(ns, key, `it decodes to ${out.length} bytes, not ${encoding.size}`);
    return out;
  }

  /** The data key in use for `key`, replaced when too old or too used; concurrent callers share one generation. */
  private async dataKey(key: string): Promise<DataKey> {
    const dk = this.current.get(key);
    if (dk && dk.uses < this.maxUses && this.now() - dk.created < this.maxAge) {
      dk.uses++;
      return dk;
    }
    let p = this.generating.get(key);
    if (!p) {
      p = this.generate(key).finally(() => this.generating.delete(key));
      this.generating.set(key, p);
    }
    const fresh = await p;
    fresh.uses++;
    return fresh;
  }

  private async generate(key: string): Promise<DataKey> {
    const keyring = this.keyringFor(key);
    const { plaintext, wrapped } = await keyring.generateDataKey(key);
    const dk: DataKey = { plaintext, wrapped: wrapped.toString('base64'), created: this.now(), uses: 0 };
    this.stats.dataKeysGenerated++;
    this.current.set(key, dk);
    // The new key opens what it encrypts without asking the keyring again.
    this.remember(dk.wrapped, Promise.resolve(plaintext));
    return dk;
  }

  private unwrap(key: string, wrapped: string): Promise<Buffer> {
    const hit = this.unwrapped.get(wrapped);
    if (hit && this.now() - hit.at < this.unwrappedTtl) return hit.key;
    const keyring = this.keyringFor(key);
    const p = keyring.unwrapDataKey(key, Buffer.from(wrapped, 'base64')).then((k) => {
      this.stats.dataKeysUnwrapped++;
      return k;
    });
    this.remember(wrapped, p);
    p.catch(() => this.unwrapped.delete(wrapped));
    return p;
  }

  private remember(wrapped: string, key: Promise<Buffer>): void {
    this.unwrapped.delete(wrapped);
    this.unwrapped.set(wrapped, { key, at: this.now() });
    while (this.unwrapped.size > this.unwrappedMax) this.unwrapped.delete(this.unwrapped.keys().next().value!);
  }

  private keyringFor(key: string): Keyring {
    if (!this.opts.keyring)
      throw new KeyUnavailableError(key, 'none: this runtime has no keyring (STRATA_KEYRING)', { permanent: true });
    return this.opts.keyring;
  }
}

async function compress(value: Buffer, level: number): Promise<Buffer> {
  if (!zstdCompress) throw new StrataError('INTERNAL', 'zstd is not available in this Node (22.15 or later has it)');
  const params = { [zlib.constants.ZSTD_c_compressionLevel]: level };
  return value.length > ASYNC_ZSTD_BYTES ? zstdCompress(value, { params }) : zlib.zstdCompressSync(value, { params });
}

function associatedData(ns: string, key: string): Buffer {
  return Buffer.from(`strata/v1\u0000${ns}\u0000${key}`, 'utf8');
}

/** A stored value that does not decode: corruption, never shown to the caller in detail (INTERNAL). */
function unreadable(ns: string, key: string, why: string, cause?: unknown): StrataError {
  return new StrataError('INTERNAL', `stored value of '${key}' in '${ns}' does not decode: ${why}`, { ns, key }, { cause });
}
