import { TransformedScopeError } from '../errors.js';
import type { EntryEncoding, EntryHeader } from '../model/entry.js';
import type { NamespacePolicy, PolicyRegistry, ValueTransformChoice } from '../policy/namespace-settings.js';
import type { ValueCodec } from '../transforms/codec.js';
import { Dedup, type DedupDeps, type Deduplicated } from './dedup.js';
import type { HeadResult, ReadResult, ServedBy } from './types.js';

/**
 * Values as the tiers store them, and back: the policy's foreground transforms applied once before a write (compress
 * and encrypt, transforms/codec.ts; storeOnce, dedup.ts) and undone on every read from what the entry's header records.
 * A namespace without transform rules costs one lookup per write and one field check per read.
 */

/** A value ready for the tiers: its bytes and encoding, and the blob a storeOnce write must confirm once written. */
export interface Prepared {
  readonly value: Buffer;
  readonly encoding?: EntryEncoding;
  readonly dedup?: Deduplicated;
}

export class StoredValues {
  private readonly dedup: Dedup;

  constructor(
    private readonly codec: ValueCodec,
    dedup: DedupDeps,
  ) {
    this.dedup = new Dedup(dedup);
  }

  /**
   * The bytes and encoding to write for `value`, per the transform rules of `registry` that take this key and tags.
   * Synchronous when nothing applies (the hot path of a namespace without transforms awaits nothing more).
   */
  prepare(
    registry: PolicyRegistry,
    policy: NamespacePolicy,
    ns: string,
    key: string,
    value: Buffer,
    tags: readonly string[] | undefined,
  ): Prepared | Promise<Prepared> {
    const transform = registry.transformFor(ns, key, tags);
    if (!transform) return { value };
    return this.transformed(policy, ns, key, value, transform);
  }

  private async transformed(
    policy: NamespacePolicy,
    ns: string,
    key: string,
    value: Buffer,
    transform: ValueTransformChoice,
  ): Promise<Prepared> {
    const coded = await this.codec.encode(ns, key, value, transform);
    if (!transform.storeOnce) return coded;
    const dedup = await this.dedup.prepare(ns, coded.value, coded.encoding, policy);
    return { ...dedup.ref, dedup };
  }

  /** After the key's entry is written, before the write is acknowledged (storeOnce: dedup.ts). */
  async written(ns: string, p: Prepared, policy: NamespacePolicy): Promise<void> {
    if (p.dedup) await this.dedup.confirm(ns, p.dedup, policy);
  }

  /** Refuses what would put untransformed bytes into a transformed scope (an upload committed from a presigned URL). */
  refuseUpload(registry: PolicyRegistry, ns: string, key: string, tags: readonly string[] | undefined): void {
    const transform = registry.transformFor(ns, key, tags);
    if (transform) throw new TransformedScopeError(ns, key, transform.rules, 'upload');
  }

  /** A read's answer as the caller wrote it: a storeOnce blob fetched, compression and encryption undone. */
  restore(ns: string, key: string, r: ReadResult, policy: NamespacePolicy): ReadResult | Promise<ReadResult> {
    const encoding = r.entry.header.encoding;
    if (!encoding) return r;
    return this.restoreValue(ns, key, r.entry.value, encoding, policy).then((value) => ({
      entry: { header: asWritten(r.entry.header), value },
      tier: r.tier,
      transformed: true,
    }));
  }

  private async restoreValue(
    ns: string,
    key: string,
    stored: Buffer,
    encoding: EntryEncoding,
    policy: NamespacePolicy,
  ): Promise<Buffer> {
    if (encoding.blob) {
      const blob = await this.dedup.fetch(ns, encoding.blob, policy);
      const inner = blob.header.encoding;
      return inner ? this.codec.decode(ns, key, blob.value, inner) : blob.value;
    }
    return this.codec.decode(ns, key, stored, encoding);
  }
}

/** A header as head() answers it: the size as written, and whether the value is transformed (no presigned URL). */
export function headResult(h: EntryHeader, tier: ServedBy): HeadResult {
  return h.encoding ? { header: asWritten(h), tier, transformed: true } : { header: h, tier };
}

/** A header as the caller wrote the value: its size before any transform, and without the encoding. */
export function asWritten(h: EntryHeader): EntryHeader {
  if (!h.encoding) return h;
  const { encoding, ...rest } = h;
  return { ...rest, size: encoding.size };
}
