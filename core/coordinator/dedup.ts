import { StrataError, TierUnavailableError } from '../errors.js';
import { blobKey, isLive, type Entry, type EntryEncoding } from '../model/entry.js';
import { contentHash } from '../model/keys.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';
import type { Tier } from '../tiers/tier.js';
import type { NearCache } from './near-cache.js';

/**
 * storeOnce (paper 003, Table 1: "store the object once"): identical bytes written under many keys are stored once,
 * as a content-addressed blob of the namespace ({@link blobKey}), and each key's entry refers to it (an entry with
 * no bytes whose encoding names the blob). A blob never changes (its address is its content), so any copy of it in
 * any tier is the right one, and reads take the first they find.
 *
 * Blobs no key refers to any more are removed by the garbage collector (policy/dedup-gc.ts), and a writer and the
 * collector meet in the blob's copy in the namespace's lowest durable tier (the authority):
 *  - the collector first marks a blob it found unreferenced `condemned` (a versioned write), then scans the keys
 *    again, and removes only blobs still unreferenced, and only the version it condemned;
 *  - a writer makes sure the blob is there (not condemned) before it writes its key, and looks again after: a blob
 *    condemned or removed meanwhile is written again, at a newer version, before the write is acknowledged.
 * Either the collector's second scan sees the writer's key, or the writer's second look sees the condemnation (which
 * came before that scan) and rewrites the blob, so that the collector's version-conditional removal fails or is undone
 * before the acknowledgement. A blob referred to by an acknowledged write is never lost; a deleted key's blob is
 * never served again (reads go through the key, whose tombstone ends them).
 */

export interface DedupDeps {
  /** Tiers top-down. */
  readonly tiers: readonly Tier[];
  readonly near: NearCache;
  /** The namespace's lowest durable tier, where blobs are decided. */
  authority(policy: NamespacePolicy): Tier | undefined;
  /** Writes a blob as a versioned write where the namespace's placement puts a value of its size. */
  writeBlob(ns: string, key: string, value: Buffer, encoding: EntryEncoding | undefined, policy: NamespacePolicy): Promise<void>;
}

/** A value on its way into a storeOnce scope: the blob to make sure of, and what the key's own entry holds. */
export interface Deduplicated {
  readonly address: string;
  readonly blob: { readonly value: Buffer; readonly encoding?: EntryEncoding };
  /** The key's entry: no bytes, and an encoding that names the blob. */
  readonly ref: { readonly value: Buffer; readonly encoding: EntryEncoding };
}

const EMPTY = Buffer.alloc(0);

export class Dedup {
  constructor(private readonly d: DedupDeps) {}

  /**
   * The blob of `value` (its bytes as stored, after any compression) made sure of: written unless the authority holds
   * it, live and not condemned. The key's entry is written next, then {@link confirm}.
   */
  async prepare(ns: string, value: Buffer, encoding: EntryEncoding | undefined, policy: NamespacePolicy): Promise<Deduplicated> {
    // The address covers the encoding too: a raw value and a compressed one with the same bytes are different values.
    const address = contentHash(value) + (encoding?.zstd ? '.z' : '');
    const blob = { value, ...(encoding ? { encoding } : {}) };
    await this.ensure(ns, address, blob, policy);
    return { address, blob, ref: { value: EMPTY, encoding: { size: encoding?.size ?? value.length, blob: address } } };
  }

  /** After the key's entry is written: the blob condemned or removed meanwhile is written again (see above). */
  async confirm(ns: string, d: Deduplicated, policy: NamespacePolicy): Promise<void> {
    await this.ensure(ns, d.address, d.blob, policy);
  }

  /** The blob an entry refers to, from the first tier that holds it (or L1). */
  async fetch(ns: string, address: string, policy: NamespacePolicy): Promise<Entry> {
    const key = blobKey(address);
    const near = this.d.near.get(ns, key, policy);
    if (near) return near.entry;
    const since = this.d.near.time();
    let failed: unknown;
    for (const tier of this.d.tiers) {
      let e: Entry | undefined;
      try {
        e = await tier.get(ns, key);
      } catch (error) {
        failed ??= error;
        continue;
      }
      if (!e || !isLive(e.header)) continue;
      if (contentHash(e.value) !== address.replace(/\.z$/, '')) continue; // a damaged copy: try the next tier
      this.d.near.fill(ns, key, e, policy, since);
      return e;
    }
    if (failed) throw failed instanceof StrataError ? failed : new TierUnavailableError('blob', failed);
    // Only a write not yet acknowledged can refer to a blob the collector just removed: its writer is rewriting it.
    throw new StrataError('TIER_UNAVAILABLE', `the shared content of this key is being written again; retry`, {
      ns,
      blob: address,
    });
  }

  private async ensure(
    ns: string,
    address: string,
    blob: { value: Buffer; encoding?: EntryEncoding },
    policy: NamespacePolicy,
  ): Promise<void> {
    const authority = this.d.authority(policy);
    if (!authority) throw new StrataError('INTERNAL', 'storeOnce needs a durable tier in the placement');
    const key = blobKey(address);
    const there = await authority.head(ns, key);
    if (there && isLive(there) && !there.flags.condemned) return;
    await this.d.writeBlob(ns, key, blob.value, blob.encoding, policy);
  }
}
