import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { isExpired, isLive, isNewer } from '../model/entry.js';
import { S3Fifo } from '../eviction/s3fifo.js';
import { decodeKey, encodeKey } from '../model/keys.js';
import { pageOfUnordered, type OrderedKeysPage, type OrderedKeysQuery } from '../model/key-order.js';
import type {
  Confirming,
  CreatesIfAbsent,
  DirtyTracking,
  KeyOrdering,
  KeyRef,
  Pinning,
  PutOptions,
  ReadOptions,
  ScanOptions,
  ScanPage,
  Scanning,
  Tier,
  TierName,
  TierStats,
} from './tier.js';

export interface MemoryTierOptions {
  /** 'l1' for the per-container near cache, 'hot' when it is the embedded hot tier. @default 'hot' */
  name?: TierName;
  /** Byte budget for values plus bookkeeping. @default 64 MiB */
  maxBytes?: number;
  /**
   * Largest share of maxBytes that dirty (write-back, not yet flushed) entries may hold. Dirty entries are never
   * evicted, so past this share a dirty write is refused with `full` and the coordinator writes it through.
   * @default 0.5
   */
  maxDirtyRatio?: number;
  /** Clock, for tests. */
  now?: () => number;
}

/** Put options beyond the tier contract's (near-cache use). */
export interface MemoryPutOptions {
  /** Drops the copy this long after it was stored, even if its header has no expiry (the near cache's bound). */
  maxAgeMs?: number;
  /**
   * When the caller began the tier read or write this copy comes from (this tier's clock, {@link MemoryTier.time}).
   * Needs {@link MemoryTier.trackLosses}. The copy is refused when any copy that hashes to the key's slot left this
   * tier (evicted, deleted, or expired) at or after `since`: a newer version of the key may have been here and gone,
   * and the copy may be older than it. An older copy the key still has is then dropped too, so nothing older than
   * the refused copy stays.
   */
  since?: number;
}

/**
 * A stored entry; `deadline` is a local max age (the near cache's staleness bound), separate from the header's expiry.
 * `at` and `reads` are its access facts (see {@link MemoryTier.scan}): two numbers on an object every entry has.
 */
type Stored = Entry & { deadline?: number; at: number; reads: number };

/** Approximate per-entry overhead (Map slots, header object, queue node). */
const ENTRY_OVERHEAD = 160;
const SEP = '\u0000';
/** Slots of the losses table (MemoryTier.trackLosses): 32 KiB; two keys share one with odds 1 in 4096. */
const LOSS_SLOTS = 4096;

/**
 * In-process tier bounded by bytes, evicting in S3-FIFO order. Used as the per-container near cache (L1)
 * and as the embedded hot tier when no Redis is configured. Values are copied on the way in and out so
 * callers cannot mutate cached bytes. Neither dirty (write-back) nor pinned entries are ever evicted: when only
 * they are left, a write that does not fit is refused with `full`.
 */
export class MemoryTier implements Tier, DirtyTracking, Scanning, Pinning, Confirming, KeyOrdering, CreatesIfAbsent {
  readonly name: TierName;
  readonly kind = 'memory';
  readonly createsIfAbsent = true;
  private readonly entries = new Map<string, Stored>();
  private readonly order: S3Fifo<string>;
  private readonly dirty = new Set<string>();
  private readonly maxBytes: number;
  private readonly maxDirtyBytes: number;
  private readonly now: () => number;
  private bytes = 0;
  private dirtyBytes = 0;
  private evictions = 0;
  /** Per slot of ids, the latest time a copy left ({@link trackLosses}): what `since` is checked against. */
  private lostAt: Float64Array | undefined;

  constructor(opts: MemoryTierOptions = {}) {
    this.name = opts.name ?? 'hot';
    this.maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    if (!(this.maxBytes > 0)) throw new Error('MemoryTier: maxBytes must be a positive number of bytes');
    this.maxDirtyBytes = Math.floor(this.maxBytes * (opts.maxDirtyRatio ?? 0.5));
    this.now = opts.now ?? Date.now;
    this.order = new S3Fifo<string>({ capacity: this.maxBytes });
  }

  /**
   * From now on, remembers when copies leave, so putSync's `since` can refuse a copy read or written before a newer
   * one of the same key left (the near cache turns it on; the hot tier has no use for it).
   */
  trackLosses(): void {
    this.lostAt ??= new Float64Array(LOSS_SLOTS);
  }

  /** This tier's clock (Date.now unless a test gave another): what `since` is measured in. */
  time(): number {
    return this.now();
  }

  async get(ns: string, key: string, opts?: ReadOptions): Promise<Entry | undefined> {
    return this.getSync(ns, key, opts);
  }

  /** Synchronous read for the coordinator's near-cache fast path, which passes the clock reading it took. */
  getSync(ns: string, key: string, opts?: ReadOptions, now = this.now()): Entry | undefined {
    const id = ns + SEP + key;
    const e = this.live(id, now);
    if (!e) return undefined;
    if (!opts?.peek) {
      this.order.touch(id);
      e.at = now;
      e.reads++;
    }
    return { header: cloneHeader(e.header), value: Buffer.from(e.value) };
  }

  async head(ns: string, key: string): Promise<EntryHeader | undefined> {
    const e = this.live(ns + SEP + key);
    return e && cloneHeader(e.header);
  }

  async has(ns: string, key: string): Promise<boolean> {
    const e = this.live(ns + SEP + key);
    return !!e && isLive(e.header, this.now());
  }

  async put(ns: string, key: string, entry: Entry, opts?: PutOptions): Promise<WriteOutcome> {
    if (opts?.ifAbsent) {
      const existing = this.live(ns + SEP + key);
      if (existing) return { applied: false, current: existing.header.version };
    }
    return this.putSync(ns, key, entry);
  }

  /** A copy of `entry`, unless this tier holds a newer one (or `since` refuses it, see {@link MemoryPutOptions}). */
  putSync(ns: string, key: string, entry: Entry, opts: MemoryPutOptions = {}): WriteOutcome {
    const id = ns + SEP + key;
    const existing = this.live(id);
    if (!isNewer(entry.header.version, existing?.header, this.now())) {
      return { applied: false, current: existing!.header.version };
    }
    if (opts.since !== undefined && this.lostAt && this.lostAt[lossSlot(id)]! >= opts.since) {
      if (existing) this.drop(id, true, this.now());
      return { applied: false, current: null };
    }
    const cost = entry.value.length + Buffer.byteLength(id) + ENTRY_OVERHEAD;
    if (cost > this.maxBytes) return { applied: false, current: existing?.header.version ?? null, full: true };
    const oldCost = existing ? this.costOf(id, existing) : 0;
    const isDirty = !!entry.header.flags.dirty;
    const wasDirty = this.dirty.has(id);
    if (isDirty && this.dirtyBytes - (wasDirty ? oldCost : 0) + cost > this.maxDirtyBytes) {
      return { applied: false, current: existing?.header.version ?? null, full: true };
    }
    // Make room first (never evicting this key's own slot or any dirty entry).
    while (this.bytes - oldCost + cost > this.maxBytes) {
      const victim = this.order.evictOne((k) => k !== id && !this.dirty.has(k) && !this.entries.get(k)?.header.flags.pinned);
      if (victim === undefined) return { applied: false, current: existing?.header.version ?? null, full: true };
      this.drop(victim, true, this.now());
      this.evictions++;
    }
    // A newer version keeps the key's access facts; a key that arrives counts as accessed now.
    const stored: Stored = {
      header: cloneHeader(entry.header),
      value: Buffer.from(entry.value),
      at: existing?.at ?? this.now(),
      reads: existing?.reads ?? 0,
    };
    if (opts.maxAgeMs !== undefined) stored.deadline = this.now() + opts.maxAgeMs;
    if (this.entries.has(id)) this.drop(id, false);
    this.entries.set(id, stored);
    this.bytes += cost;
    this.order.upsert(id, cost);
    if (isDirty) {
      this.dirty.add(id);
      this.dirtyBytes += cost;
    }
    return { applied: true, current: entry.header.version };
  }

  async delete(ns: string, key: string, version?: number): Promise<boolean> {
    return this.deleteSync(ns, key, version);
  }

  async confirm(ns: string, key: string, version: number): Promise<boolean> {
    const e = this.live(ns + SEP + key);
    if (!e || e.header.version !== version || !e.header.flags.pending) return false;
    delete e.header.flags.pending;
    return true;
  }

  /**
   * Drops every copy `pick` names (the near cache's, when an invalidation arrives: near-cache.ts), as a loss now, so
   * that a fill read from before is refused too (see {@link trackLosses}). Returns how many it dropped.
   */
  dropWhereSync(pick: (ns: string, key: string, header: EntryHeader) => boolean): number {
    const now = this.now();
    let dropped = 0;
    for (const [id, e] of this.entries) {
      const sep = id.indexOf(SEP); // namespaces never hold it
      if (!pick(id.slice(0, sep), id.slice(sep + 1), e.header)) continue;
      this.drop(id, true, now);
      dropped++;
    }
    return dropped;
  }

  deleteSync(ns: string, key: string, version?: number): boolean {
    const id = ns + SEP + key;
    const e = this.entries.get(id);
    if (!e || (version !== undefined && e.header.version !== version)) return false;
    this.drop(id, true, this.now());
    return true;
  }

  async getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
    return keys.map((k) => this.getSync(ns, k));
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    return items.map((i) => this.putSync(ns, i.key, i.entry));
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    return keys.map((k) => this.deleteSync(ns, k));
  }

  async listDirty(limit: number): Promise<KeyRef[]> {
    const out: KeyRef[] = [];
    for (const id of this.dirty) {
      if (out.length >= limit) break;
      const i = id.indexOf(SEP);
      out.push({ ns: id.slice(0, i), key: id.slice(i + 1) });
    }
    return out;
  }

  async markClean(ns: string, key: string, version: number): Promise<boolean> {
    const id = ns + SEP + key;
    const e = this.entries.get(id);
    if (!e || e.header.version !== version || !this.dirty.has(id)) return false;
    e.header.flags = { ...e.header.flags, dirty: false };
    delete e.header.flags.dirty;
    this.dirty.delete(id);
    this.dirtyBytes -= this.costOf(id, e);
    return true;
  }

  /**
   * Keys of `ns` starting with `prefix`, in key order (code units), `limit` per page; the cursor is the last key
   * examined (encoded). Each page sorts the namespace's matching keys: O(n log n) per page, fine in process. Items
   * carry their access facts: the last read through get/getSync/getMany (head, has and scans do not count), or
   * when the key arrived, and the reads since; a new process starts with none.
   */
  async scan(ns: string, opts: ScanOptions): Promise<ScanPage> {
    const start = ns + SEP + (opts.prefix ?? '');
    const after = opts.cursor ? ns + SEP + decodeKey(opts.cursor) : undefined;
    const ids: string[] = [];
    for (const id of this.entries.keys()) if (id.startsWith(start) && (after === undefined || id > after)) ids.push(id);
    ids.sort();
    const items: ScanPage['items'] = [];
    let i = 0;
    for (; i < ids.length && items.length < opts.limit; i++) {
      const e = this.live(ids[i]!);
      if (e)
        items.push({
          key: ids[i]!.slice(ns.length + 1),
          header: cloneHeader(e.header),
          access: { lastAccessMs: e.at, count: e.reads },
        });
    }
    const last = ids[i - 1];
    return { items, cursor: i < ids.length && last !== undefined ? encodeKey(last.slice(ns.length + 1)) : null };
  }

  /** Sorted at each call (the in-process tier has no index: O(n log n) over the namespace's keys in range). */
  async listOrdered(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
    const start = ns + SEP;
    const keys: string[] = [];
    for (const id of this.entries.keys()) if (id.startsWith(start) && this.live(id)) keys.push(id.slice(start.length));
    return pageOfUnordered(keys, q);
  }

  async setPinned(ns: string, key: string, version: number, pinned: boolean): Promise<boolean> {
    const e = this.live(ns + SEP + key);
    if (!e || e.header.version !== version) return false;
    if (pinned) e.header.flags = { ...e.header.flags, pinned: true };
    else {
      const { pinned: _was, ...rest } = e.header.flags;
      e.header.flags = rest;
    }
    return true;
  }

  /** Keys in eviction order, next victim first (for tests and the node's victims view). */
  evictionOrder(): KeyRef[] {
    return [...this.order.order()].map((id) => {
      const i = id.indexOf(SEP);
      return { ns: id.slice(0, i), key: id.slice(i + 1) };
    });
  }

  async stats(): Promise<TierStats> {
    return {
      name: this.name,
      kind: this.kind,
      entries: this.entries.size,
      bytes: this.bytes,
      capacityBytes: this.maxBytes,
      evictions: this.evictions,
      dirtyEntries: this.dirty.size,
    };
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.entries.clear();
  }

  /** The stored entry unless expired (expired entries are dropped on sight; a dirty one is never expired away unseen). */
  private live(id: string, now = this.now()): Stored | undefined {
    const e = this.entries.get(id);
    if (!e) return undefined;
    if (isExpired(e.header, now) || (e.deadline !== undefined && e.deadline <= now)) {
      // Left when it stopped being servable, not when it was noticed (a late fill's `since` may lie in between).
      this.drop(id, true, Math.min(e.header.expiresAt ?? now, e.deadline ?? now));
      return undefined;
    }
    return e;
  }

  private costOf(id: string, e: Entry): number {
    return e.value.length + Buffer.byteLength(id) + ENTRY_OVERHEAD;
  }

  /** `lostAt`: the copy left (rather than making way for a newer one), at that time. */
  private drop(id: string, fromOrder = true, lostAt?: number): void {
    const e = this.entries.get(id);
    if (!e) return;
    if (lostAt !== undefined && this.lostAt) {
      const slot = lossSlot(id);
      if (lostAt > this.lostAt[slot]!) this.lostAt[slot] = lostAt;
    }
    const cost = this.costOf(id, e);
    this.entries.delete(id);
    this.bytes -= cost;
    if (fromOrder) this.order.remove(id);
    if (this.dirty.delete(id)) this.dirtyBytes -= cost;
  }
}

/** The losses-table slot of a key (tests use it to find two keys that share one). */
export function memoryLossSlot(ns: string, key: string): number {
  return lossSlot(ns + SEP + key);
}

/** FNV-1a over the id's UTF-16 code units, folded to a slot of the losses table. */
function lossSlot(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h >>> 0) % LOSS_SLOTS;
}

function cloneHeader(h: EntryHeader): EntryHeader {
  return { ...h, tags: [...h.tags], flags: { ...h.flags } };
}
