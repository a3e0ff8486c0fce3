import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Entry, EntryHeader, WriteOutcome } from '../../layers/core/model/entry.js';
import { decodeHeader } from '../../layers/core/model/entry.js';
import { keyAfter, parseStoreKey, positionKey, storeKey } from '../../layers/core/warm/wire.js';
import { Sieve } from './sieve.js';

/**
 * The node's durable store: LMDB (a B+-tree in one memory-mapped file) on the data volume.
 *
 * Two databases share every key (8-byte ring position + ns + NUL + key, see `storeKey`), written in the same
 * transaction:
 * - `meta`: `[f64 version][f64 expiresAt, NaN = none][u32 accounted bytes]` + the header JSON. Small, so
 *   version checks, HEAD, the boot scan, victims and expiry sweeps never touch values;
 * - `data`: the value bytes.
 *
 * Writes are versioned: a put applies only over an older (or expired) version. The decision is made on the main
 * thread against the newest state, committed or still queued (the `pending` overlay), and LMDB applies queued
 * writes in call order, so the decision holds at commit. A write is acknowledged after its transaction commits
 * (`sync: 'commit'`: survives a crash of the process) or after it is flushed to disk too (`sync: 'flush'`, the
 * default: survives a crash of the machine).
 *
 * Capacity: the accounted bytes (key + header + value + a fixed overhead per entry) never exceed
 * `capacityBytes`; a write that would is refused with `full` (the caller places it elsewhere). Nothing is ever
 * dropped to make room: above the watermark the SIEVE order names victims for an evictor to copy down and
 * delete conditionally. Pinned entries (header flag `pinned`) are kept out of the SIEVE order, so they are never
 * named; expired entries are named first (see {@link NodeStore.victims}).
 */
export interface NodeStoreOptions {
  dir: string;
  capacityBytes: number;
  /** Fill ratio above which the node asks for eviction (stats, victims). @default 0.85 */
  watermark?: number;
  /** @default 'flush' */
  sync?: 'flush' | 'commit';
  now?: () => number;
}

export interface StoredItem {
  /** Storage key. */
  sk: Buffer;
  ns: string;
  key: string;
  /** The header as stored (JSON; parse it only if needed). */
  headerJson: string;
  value: Buffer;
}

export interface Victim {
  ns: string;
  key: string;
  version: number;
  /** Accounted bytes the node frees by removing it. */
  bytes: number;
  position: string;
  expiresAt: number | null;
  /** Already expired: nobody can read it, so an evictor drops it without copying it anywhere. */
  expired?: true;
}

interface Meta {
  version: number;
  expiresAt: number | null;
  bytes: number;
}

const META_FIXED = 20;
/** Bookkeeping per entry in the accounting (B+-tree slots in two databases, overlay and SIEVE node). */
export const ENTRY_OVERHEAD_BYTES = 96;
const SCAN_CHUNK = 256;

function encodeMeta(m: Meta, headerJson: string): Buffer {
  const hBytes = Buffer.byteLength(headerJson);
  const out = Buffer.allocUnsafe(META_FIXED + hBytes);
  out.writeDoubleBE(m.version, 0);
  out.writeDoubleBE(m.expiresAt ?? Number.NaN, 8);
  out.writeUInt32BE(m.bytes, 16);
  out.write(headerJson, META_FIXED, 'utf8');
  return out;
}

function decodeMetaFixed(b: Buffer): Meta {
  const e = b.readDoubleBE(8);
  return { version: b.readDoubleBE(0), expiresAt: Number.isNaN(e) ? null : e, bytes: b.readUInt32BE(16) };
}

function metaHeaderJson(b: Buffer): string {
  return b.toString('utf8', META_FIXED);
}

/** Whether a stored header JSON has the pinned flag (a cheap test first: few headers mention it). */
function isPinnedJson(headerJson: string): boolean {
  return headerJson.includes('"pinned"') && decodeHeader(headerJson).flags.pinned === true;
}

/** A storage key as a Map key (latin1 maps bytes to chars one to one). */
function idOf(sk: Buffer): string {
  return sk.toString('latin1');
}

export class NodeStore {
  readonly capacityBytes: number;
  readonly watermark: number;
  private readonly env: RootDatabase;
  private readonly meta: Database<Buffer, Buffer>;
  private readonly data: Database<Buffer, Buffer>;
  private readonly sys: Database<unknown, string>;
  private readonly sync: 'flush' | 'commit';
  private readonly now: () => number;
  /** Writes queued but not yet committed: the newest state of their keys (null = removed). */
  private readonly pending = new Map<string, Meta | null>();
  private readonly order = new Sieve<string>();
  private accounted = 0;
  private count = 0;
  private sweepCursor: Buffer | undefined;
  /** Where {@link victims} looks for expired entries next. */
  private expiryCursor: Buffer | undefined;
  private closed = false;

  constructor(opts: NodeStoreOptions) {
    mkdirSync(opts.dir, { recursive: true });
    this.capacityBytes = opts.capacityBytes;
    this.watermark = opts.watermark ?? 0.85;
    this.sync = opts.sync ?? 'flush';
    this.now = opts.now ?? Date.now;
    this.env = open({ path: opts.dir, maxDbs: 4 });
    this.meta = this.env.openDB<Buffer, Buffer>({ name: 'meta', encoding: 'binary', keyEncoding: 'binary' });
    this.data = this.env.openDB<Buffer, Buffer>({ name: 'data', encoding: 'binary', keyEncoding: 'binary' });
    this.sys = this.env.openDB<unknown, string>({ name: 'sys', encoding: 'json' });
    this.rebuild();
  }

  /** Boot: byte accounting and eviction order from the meta database (values are not read). */
  private rebuild(): void {
    for (const { key, value } of this.meta.getRange({ snapshot: false })) {
      const m = decodeMetaFixed(value);
      this.accounted += m.bytes;
      this.count++;
      if (!isPinnedJson(metaHeaderJson(value))) this.order.insert(idOf(key));
    }
  }

  // ------------------------------------------------------------------ system values

  getSys<T>(name: string): T | undefined {
    return this.sys.get(name) as T | undefined;
  }

  async putSys(name: string, value: unknown): Promise<void> {
    await this.sys.put(name, value);
    await this.durable();
  }

  // ------------------------------------------------------------------ reads

  /** The stored entry (tombstones and markers included), or undefined when absent or expired. */
  get(ns: string, key: string, touch = true): Entry | undefined {
    const raw = this.getRaw(storeKey(ns, key), touch);
    return raw && { header: decodeHeader(raw.headerJson), value: raw.value };
  }

  /** As {@link get}, by storage key, with the header as stored (JSON): what a response needs, unparsed. */
  getRaw(sk: Buffer, touch = true): { headerJson: string; value: Buffer } | undefined {
    const mb = this.meta.getBinary(sk);
    if (!mb) return undefined;
    if (this.expired(decodeMetaFixed(mb))) return undefined;
    const headerJson = metaHeaderJson(mb);
    const value = this.data.getBinary(sk) ?? Buffer.alloc(0);
    if (touch) this.order.touch(idOf(sk));
    return { headerJson, value };
  }

  head(ns: string, key: string): EntryHeader | undefined {
    const mb = this.meta.getBinary(storeKey(ns, key));
    if (!mb) return undefined;
    const m = decodeMetaFixed(mb);
    return this.expired(m) ? undefined : decodeHeader(metaHeaderJson(mb));
  }

  private expired(m: Pick<Meta, 'expiresAt'>): boolean {
    return m.expiresAt !== null && m.expiresAt <= this.now();
  }

  /** The newest state of a key, queued writes included. */
  private current(sk: Buffer, id: string): Meta | null {
    const p = this.pending.get(id);
    if (p !== undefined) return p;
    const mb = this.meta.getBinary(sk);
    return mb ? decodeMetaFixed(mb) : null;
  }

  // ------------------------------------------------------------------ writes

  /**
   * Versioned write. Decided synchronously (so callers can check ownership and enqueue in one step); the
   * returned promise resolves once the write is durable.
   */
  put(ns: string, key: string, entry: Entry): Promise<WriteOutcome> {
    return this.putAt(storeKey(ns, key), entry);
  }

  /** As {@link put}, by storage key; `headerJson` is the header as received, when the caller has it. */
  putAt(sk: Buffer, entry: Entry, headerJson?: string): Promise<WriteOutcome> {
    const decided = this.decidePut(sk, entry, headerJson);
    return decided.commit ?? Promise.resolve(decided.outcome);
  }

  private decidePut(sk: Buffer, entry: Entry, headerJson: string | undefined): { outcome: WriteOutcome; commit?: Promise<WriteOutcome> } {
    this.assertOpen();
    const id = idOf(sk);
    const cur = this.current(sk, id);
    const live = cur !== null && !this.expired(cur);
    if (live && cur.version >= entry.header.version) return { outcome: { applied: false, current: cur.version } };
    const json = headerJson ?? JSON.stringify(entry.header);
    const bytes = sk.length + Buffer.byteLength(json) + entry.value.length + ENTRY_OVERHEAD_BYTES;
    const before = cur?.bytes ?? 0;
    const grows = bytes > before;
    const small = entry.value.length === 0; // tombstones and location markers always fit
    if (grows && !small && this.accounted - before + bytes > this.capacityBytes) {
      return { outcome: { applied: false, current: live ? cur.version : null, full: true } };
    }
    const m: Meta = { version: entry.header.version, expiresAt: entry.header.expiresAt, bytes };
    this.pending.set(id, m);
    this.accounted += bytes - before;
    if (cur === null) this.count++;
    if (entry.header.flags.pinned) this.order.remove(id);
    else this.order.insert(id);
    const pm = this.meta.put(sk, encodeMeta(m, json));
    const pd = this.data.put(sk, entry.value);
    const commit = Promise.all([pm, pd])
      .then(() => this.durable())
      .then(
        () => {
          if (this.pending.get(id) === m) this.pending.delete(id);
          return { applied: true, current: m.version };
        },
        (e: unknown) => {
          if (this.pending.get(id) === m) this.pending.delete(id);
          throw e;
        },
      );
    return { outcome: { applied: true, current: m.version }, commit };
  }

  /** Removes the entry if its version is `version` (any when omitted). Resolves to whether it removed one. */
  remove(ns: string, key: string, version?: number): Promise<boolean> {
    return this.removeKey(storeKey(ns, key), version);
  }

  removeKey(sk: Buffer, version?: number): Promise<boolean> {
    this.assertOpen();
    const id = idOf(sk);
    const cur = this.current(sk, id);
    if (cur === null || (version !== undefined && cur.version !== version)) return Promise.resolve(false);
    this.pending.set(id, null);
    this.accounted -= cur.bytes;
    this.count--;
    this.order.remove(id);
    const commit = Promise.all([this.meta.remove(sk), this.data.remove(sk)]).then(() => this.durable());
    return commit.then(
      () => {
        if (this.pending.get(id) === null) this.pending.delete(id);
        return true;
      },
      (e: unknown) => {
        if (this.pending.get(id) === null) this.pending.delete(id);
        throw e;
      },
    );
  }

  /**
   * Sets or clears the pinned flag of the entry if it is exactly `version` (same value, version and expiry; the
   * header is rewritten in place). A pinned entry leaves the SIEVE order, an unpinned one re-enters it at the
   * newest end. Resolves to whether the entry now has the requested flag (false: absent, expired or another
   * version).
   */
  async setPinned(sk: Buffer, version: number, pinned: boolean): Promise<boolean> {
    this.assertOpen();
    const id = idOf(sk);
    // The header JSON of a queued write is only readable once committed: let queued writes of the key settle.
    for (let attempt = 0; this.pending.has(id); attempt++) {
      if (attempt >= 3) return false;
      await this.settle();
    }
    const mb = this.meta.getBinary(sk);
    if (!mb) return false;
    const m = decodeMetaFixed(mb);
    if (m.version !== version || this.expired(m)) return false;
    const oldJson = metaHeaderJson(mb);
    const header = decodeHeader(oldJson);
    if (!!header.flags.pinned === pinned) return true;
    if (pinned) header.flags.pinned = true;
    else delete header.flags.pinned;
    const json = JSON.stringify(header);
    const nm: Meta = { ...m, bytes: m.bytes - Buffer.byteLength(oldJson) + Buffer.byteLength(json) };
    this.pending.set(id, nm);
    this.accounted += nm.bytes - m.bytes;
    if (pinned) this.order.remove(id);
    else this.order.insert(id);
    try {
      await this.meta.put(sk, encodeMeta(nm, json));
      await this.durable();
    } finally {
      if (this.pending.get(id) === nm) this.pending.delete(id);
    }
    return true;
  }

  /**
   * Versioned bulk write (migration import, batch put): every item is decided now and they share one
   * transaction. Resolves once all are durable.
   */
  putMany(items: { ns: string; key: string; entry: Entry; sk?: Buffer; headerJson?: string }[]): Promise<WriteOutcome[]> {
    const decided = items.map((it) => this.decidePut(it.sk ?? storeKey(it.ns, it.key), it.entry, it.headerJson));
    return Promise.all(decided.map((d) => d.commit ?? d.outcome));
  }

  /** Resolves when every write queued so far is committed (and flushed, per `sync`). */
  async settle(): Promise<void> {
    await this.env.committed;
    await this.durable();
  }

  private async durable(): Promise<void> {
    if (this.sync === 'flush') await this.env.flushed;
  }

  // ------------------------------------------------------------------ ranges

  /** Storage-key bounds of ring span [start, end). */
  private static bounds(start: string, end: string | null, after?: Buffer): { start: Buffer; end?: Buffer } {
    const lo = positionKey(start);
    const from = after && Buffer.compare(after, lo) >= 0 ? keyAfter(after) : lo;
    return end === null ? { start: from } : { start: from, end: positionKey(end) };
  }

  /**
   * Up to `limit` live entries of [start, end) in key order, after storage key `after` (exclusive). Reads
   * committed state: callers that need queued writes included call {@link settle} first.
   */
  scan(start: string, end: string | null, after: Buffer | undefined, limit: number, withValues = true): StoredItem[] {
    const out: StoredItem[] = [];
    const now = this.now();
    for (const { key, value } of this.meta.getRange({ ...NodeStore.bounds(start, end, after), limit })) {
      const m = decodeMetaFixed(value);
      if (m.expiresAt !== null && m.expiresAt <= now) continue;
      const headerJson = metaHeaderJson(value);
      const { ns, key: k } = parseStoreKey(key);
      const v = withValues ? (this.data.getBinary(key) ?? Buffer.alloc(0)) : Buffer.alloc(0);
      out.push({ sk: Buffer.from(key), ns, key: k, headerJson, value: v });
    }
    return out;
  }

  /** Number of stored keys and accounted bytes in [start, end), and the position at quantile `q` of its keys. */
  rangeStats(start: string, end: string | null, q = 0.5): { keys: number; bytes: number; cut: string | null } {
    const b = NodeStore.bounds(start, end);
    let keys = 0;
    let bytes = 0;
    for (const { value } of this.meta.getRange({ ...b, snapshot: true })) {
      keys++;
      bytes += value.readUInt32BE(16);
    }
    let cut: string | null = null;
    if (keys >= 2) {
      const at = Math.min(keys - 1, Math.max(1, Math.floor(keys * q)));
      let i = 0;
      for (const k of this.meta.getKeys({ ...b, snapshot: true })) {
        if (i++ === at) {
          cut = (k as Buffer).toString('hex', 0, 8);
          break;
        }
      }
      // Keys sharing the cut position all stay on one side; a cut at the range start would move nothing.
      if (cut === start) cut = null;
    }
    return { keys, bytes, cut };
  }

  /** Deletes every key of [start, end) (committed and queued). Resolves to how many it removed. */
  async deleteRange(start: string, end: string | null): Promise<number> {
    await this.settle();
    let removed = 0;
    let after: Buffer | undefined;
    for (;;) {
      const keys: Buffer[] = [];
      for (const k of this.meta.getKeys({ ...NodeStore.bounds(start, end, after), limit: SCAN_CHUNK * 4 })) keys.push(Buffer.from(k as Buffer));
      if (keys.length === 0) break;
      const done = await Promise.all(keys.map((k) => this.removeKey(k)));
      removed += done.filter(Boolean).length;
      after = keys[keys.length - 1];
    }
    return removed;
  }

  // ------------------------------------------------------------------ eviction and expiry

  /**
   * Up to `limit` victims (not removed): expired entries first (found by a bounded scan that resumes where the
   * last one stopped, so repeated calls cover the whole store), then the next keys in SIEVE order. Naming a SIEVE
   * victim moves the hand past it, so consecutive calls name consecutive victims. Pinned entries are never named
   * (they are not in the order; an expired pinned entry is dead all the same and is named).
   */
  victims(limit: number): Victim[] {
    const out = this.expiredVictims(limit);
    const named = new Set(out.map((v) => v.position + v.ns + '\u0000' + v.key));
    for (const id of this.order.victims(limit - out.length)) {
      const sk = Buffer.from(id, 'latin1');
      const mb = this.meta.getBinary(sk);
      if (!mb) continue;
      const m = decodeMetaFixed(mb);
      const { ns, key, position } = parseStoreKey(sk);
      if (named.has(position + ns + '\u0000' + key)) continue;
      out.push({ ns, key, version: m.version, bytes: m.bytes, position, expiresAt: m.expiresAt, ...(this.expired(m) ? { expired: true as const } : {}) });
    }
    return out;
  }

  /** Expired entries among the next `4 × limit` keys (at least 256, at most 8192) after the expiry cursor. */
  private expiredVictims(limit: number): Victim[] {
    const out: Victim[] = [];
    if (limit <= 0) return out;
    const maxScan = Math.min(8192, Math.max(256, 4 * limit));
    const now = this.now();
    let scanned = 0;
    let last: Buffer | undefined;
    for (const { key, value } of this.meta.getRange({ ...(this.expiryCursor ? { start: keyAfter(this.expiryCursor) } : {}), limit: maxScan })) {
      scanned++;
      last = Buffer.from(key);
      const m = decodeMetaFixed(value);
      if (m.expiresAt !== null && m.expiresAt <= now) {
        const { ns, key: k, position } = parseStoreKey(key);
        out.push({ ns, key: k, version: m.version, bytes: m.bytes, position, expiresAt: m.expiresAt, expired: true });
        if (out.length >= limit) break;
      }
    }
    this.expiryCursor = scanned < maxScan && out.length < limit ? undefined : last;
    return out;
  }

  /** Removes up to `maxScan` keys' worth of expired entries, resuming where the last sweep stopped. */
  async sweepExpired(maxScan = 2000): Promise<number> {
    const now = this.now();
    const expired: { sk: Buffer; version: number }[] = [];
    let scanned = 0;
    let last: Buffer | undefined;
    for (const { key, value } of this.meta.getRange({ ...(this.sweepCursor ? { start: keyAfter(this.sweepCursor) } : {}), limit: maxScan })) {
      scanned++;
      last = Buffer.from(key);
      const m = decodeMetaFixed(value);
      if (m.expiresAt !== null && m.expiresAt <= now) expired.push({ sk: last, version: m.version });
    }
    this.sweepCursor = scanned < maxScan ? undefined : last;
    const done = await Promise.all(expired.map((e) => this.removeKey(e.sk, e.version)));
    return done.filter(Boolean).length;
  }

  // ------------------------------------------------------------------ stats and lifecycle

  stats(): { keys: number; bytes: number; capacityBytes: number; fill: number; watermark: number; aboveWatermark: boolean; bytesOverWatermark: number } {
    const fill = this.capacityBytes > 0 ? this.accounted / this.capacityBytes : 1;
    return {
      keys: this.count,
      bytes: this.accounted,
      capacityBytes: this.capacityBytes,
      fill,
      watermark: this.watermark,
      aboveWatermark: fill >= this.watermark,
      bytesOverWatermark: Math.max(0, Math.ceil(this.accounted - this.capacityBytes * this.watermark)),
    };
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the store is closed');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.settle();
    this.closed = true;
    await this.env.close();
  }
}
