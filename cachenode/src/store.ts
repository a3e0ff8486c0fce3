import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import { readJournal } from './journal.js';
import { RING_HASH } from '../../core/ring/hash.js';
import type { Entry, EntryHeader, WriteOutcome } from '../../core/model/entry.js';
import { decodeHeader } from '../../core/model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../../core/model/key-order.js';
import { parseStoreKey, storeKey } from '../../core/nodes/wire.js';
import { Sieve } from './sieve.js';
import { PositionHistogram } from './position-histogram.js';
import { ExpiryVictims, type Victim } from './expiry-victims.js';
import { JournalApplier, type WriteOp } from './journal-apply.js';
import { RangeStats, spanBounds } from './range-stats.js';
import {
  decodeMetaFixed,
  EMPTY,
  exactView,
  expiresAtOf,
  idOf,
  INLINE_FIXED,
  inlineValueAt,
  isPinnedJson,
  META_FIXED,
  metaHeaderJson,
  VIEW_VALUES,
} from './record-codec.js';
import { WriteDecider, type Direct, type PendingState } from './write-decision.js';
import { KeyOrderIndex } from './key-order-index.js';

export { INLINE_VALUE_MAX_BYTES } from './record-codec.js';
export { ENTRY_OVERHEAD_BYTES } from './write-decision.js';
export type { Victim } from './expiry-victims.js';

/**
 * The node's durable store: LMDB (a B+-tree in one memory-mapped file) on the data volume.
 *
 * Every key (8-byte ring position + ns + NUL + key, see `storeKey`) has one record in `meta`, starting
 * `[f64 version][f64 expiresAt, NaN = none][u32 accounted bytes]`, then one of two layouts:
 * - *inline* (values up to {@link INLINE_VALUE_MAX_BYTES}): `[u8 1][u32 header length]` + the header JSON + the
 *   value. One record, one B+-tree leaf touched per write: small writes cost half as much as with two;
 * - *external* (larger values): the header JSON alone (it starts with `{`), and the value in `data` under the
 *   same key, written in the same transaction. Version checks, HEAD, the boot scan, victims and expiry sweeps
 *   then never read large values.
 *
 * Writes are versioned: a put applies only over an older (or expired) version. The decision is made on the main
 * thread against the newest state, committed or still queued (the `pending` overlay), and every decided write
 * reaches LMDB in decision order, so the decision holds. Decided writes take one of two paths:
 * - *journaled* (small values up to {@link INLINE_VALUE_MAX_BYTES}, removals, pin changes): appended to the
 *   write-ahead `Journal` (journal.ts) and acknowledged once their group is on disk (`sync: 'flush'`, the default:
 *   survives a crash of the machine) or written (`sync: 'commit'`: survives a crash of the process). Until LMDB
 *   holds them they are served from the overlay, which keeps their records. They are applied to LMDB in large
 *   transactions about once per `applyIntervalMs` (sooner when someone waits for them: {@link NodeStore.settle}),
 *   so a leaf page written by many puts is written once, and superseded writes to a key are skipped. Each apply
 *   records the number of the last journal record it holds (`journal.appliedSeq`, in the same transaction), and a
 *   restart replays only the journal records after it;
 * - *direct* (larger values, and migration imports: `bulk`): queued to LMDB at once and acknowledged after their
 *   transaction commits (and is flushed, per `sync`). A large value written once, or thousands of writes in one
 *   call, cost about the same either way, and the journal would only write them twice. A key with a journaled
 *   write still waiting for LMDB takes the journal for its next writes too, so its writes reach LMDB in order.
 *
 * Key order: `meta` orders keys by ring position, so the `order` database lists every key again under
 * `ns ‖ NUL ‖ key`, changed in the same transactions as `meta` (see key-order-index.ts): {@link NodeStore.listOrdered}
 * pages through a namespace in key order. A store written before it existed builds it once at open.
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
  /** How often journaled writes are applied to LMDB when nobody waits for them (ms). @default 1000 */
  applyIntervalMs?: number;
  /** Size at which a journal segment is closed and the next begun (tests use small ones). @default 64 MiB */
  journalSegmentBytes?: number;
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

/** `sys` entry: the ring hash that ordered this store's keys ({@link StoreLayoutError} when it is not ours). */
const KEY_HASH = 'store.keyHash';
const SCAN_CHUNK = 256;

/**
 * One live entry of a range sweep (see {@link NodeStore.visitRange}): its storage key, and its header JSON and
 * value as views valid only during the call. Answering false ends the sweep after this entry.
 */
export type RangeVisitor = (sk: Buffer, headerJson: Buffer, value: Buffer) => boolean | void;

/** The data directory was written by a build that orders keys by another ring hash. */
export class StoreLayoutError extends Error {}

/**
 * The store class: LMDB handles, byte accounting, reads and range sweeps, and the public API. The parts with a
 * job of their own live beside it: the record layouts (record-codec.ts), the version rules and overlay
 * (write-decision.ts), the journal apply pipeline (journal-apply.ts), range statistics (range-stats.ts) and
 * expiry and victims (expiry-victims.ts).
 */
export class NodeStore {
  readonly capacityBytes: number;
  readonly watermark: number;
  private readonly env: RootDatabase;
  private readonly meta: Database<Buffer, Buffer>;
  private readonly data: Database<Buffer, Buffer>;
  /** `meta` again, with values read as views (range sweeps: {@link visitRange}). */
  private readonly metaViews: Database<Buffer, Buffer>;
  private readonly sys: Database<unknown, string>;
  /** The `order` database: every key of `meta`, in (ns, key) order. */
  private readonly keyOrder: KeyOrderIndex;
  private readonly sync: 'flush' | 'commit';
  private readonly now: () => number;
  /** Writes decided but not yet committed to LMDB: the newest state of their keys. */
  private readonly pending = new Map<string, PendingState>();
  /** The write-ahead `Journal` (journal.ts) and the pipeline that applies it to LMDB. */
  private readonly applier: JournalApplier;
  /** The version rules that decide writes, against the overlay ({@link pending}). */
  private readonly writes: WriteDecider;
  private readonly order = new Sieve<string>();
  /** Keys and bytes per ring bucket, for {@link rangeStats}. */
  private readonly histogram = new PositionHistogram();
  private readonly ranges: RangeStats;
  private readonly expiry: ExpiryVictims;
  private accounted = 0;
  private count = 0;
  private closed = false;
  /**
   * When the store opened (ms, on `now`): the origin of the access clock (whole seconds since, see
   * {@link accessOf}), and the last access of every key found at start, so a restart never makes anything look idle.
   */
  readonly startedAt: number;

  constructor(opts: NodeStoreOptions) {
    mkdirSync(opts.dir, { recursive: true });
    this.capacityBytes = opts.capacityBytes;
    this.watermark = opts.watermark ?? 0.85;
    this.sync = opts.sync ?? 'flush';
    this.now = opts.now ?? Date.now;
    this.startedAt = this.now();
    // noSubdir false: lmdb-js otherwise takes a path with a dot in its last part (`/data/strata.v1`) for a file.
    // maxDbs: meta, data, sys and order, with room for more (a limit of this open, not of the directory).
    this.env = open({ path: opts.dir, maxDbs: 8, noSubdir: false });
    this.meta = this.env.openDB<Buffer, Buffer>({ name: 'meta', encoding: 'binary', keyEncoding: 'binary' });
    this.data = this.env.openDB<Buffer, Buffer>({ name: 'data', encoding: 'binary', keyEncoding: 'binary' });
    // (lmdb-js's typings do not list `encoder` and `keyEncoder`, which its `openDB` takes.)
    const viewCodecs = { name: 'meta', keyEncoding: 'binary' as const, encoder: VIEW_VALUES };
    this.metaViews = this.env.openDB<Buffer, Buffer>(viewCodecs);
    this.sys = this.env.openDB<unknown, string>({ name: 'sys', encoding: 'json' });
    const order = this.env.openDB<Buffer, Buffer>({ name: 'order', encoding: 'binary', keyEncoding: 'binary' });
    this.keyOrder = new KeyOrderIndex(this.env, order, this.pending);
    this.checkKeyHash(opts.dir);
    this.applier = new JournalApplier({
      dir: opts.dir,
      env: this.env,
      meta: this.meta,
      data: this.data,
      sys: this.sys,
      keyOrder: this.keyOrder,
      sync: this.sync,
      applyIntervalMs: opts.applyIntervalMs ?? 1000,
      journalSegmentBytes: opts.journalSegmentBytes,
      pending: this.pending,
    });
    // After the journal replay, which keeps the index too: a store without one (or with one that lost keys) gets
    // it built from `meta` as it now stands.
    this.keyOrder.ensureBuilt(this.meta, this.sys);
    this.writes = new WriteDecider({
      env: this.env,
      meta: this.meta,
      data: this.data,
      keyOrder: this.keyOrder,
      sync: this.sync,
      now: this.now,
      capacityBytes: this.capacityBytes,
      pending: this.pending,
      applier: this.applier,
      order: this.order,
      accessSecond: () => this.accessSecond(),
      account: (sk, keys, bytes) => this.account(sk, keys, bytes),
      accounted: () => this.accounted,
    });
    this.ranges = new RangeStats(this.meta, this.metaViews, this.histogram);
    this.expiry = new ExpiryVictims({
      metaViews: this.metaViews,
      now: this.now,
      order: this.order,
      writes: this.writes,
      removeMany: (items) => this.removeMany(items),
    });
    this.rebuild();
  }

  /**
   * Boot: a store's keys are ordered by ring position, so a data directory whose keys another ring hash placed
   * would answer every lookup with a miss and export the wrong ranges. Stamps a new store with {@link RING_HASH};
   * refuses a store stamped otherwise, or one that holds data but no stamp (written before the stamp existed,
   * when positions were the first 64 bits of SHA-256).
   */
  private checkKeyHash(dir: string): void {
    const stamped = this.sys.get(KEY_HASH) as string | undefined;
    if (stamped === RING_HASH) return;
    const holdsData = stamped !== undefined || this.meta.getKeysCount({ limit: 1 }) > 0 || readJournal(dir).segments.length > 0;
    if (holdsData) {
      void this.env.close(); // the store never opens: nothing waits for it, and the error below says why
      throw new StoreLayoutError(
        `the data directory ${dir} holds keys placed by ring hash "${stamped ?? 'sha256-64'}", but this build places them by ` +
          `"${RING_HASH}": its entries cannot be found. Drain the node with the build that wrote it (scale-in), or empty the ` +
          `directory to start the node afresh.`,
      );
    }
    this.sys.putSync(KEY_HASH, RING_HASH);
  }

  /**
   * Boot: byte accounting and eviction order from the meta database (values are not read). Access facts live in
   * memory only: every key starts with no reads and last accessed at the node's start.
   */
  private rebuild(): void {
    for (const { key, value } of this.metaViews.getRange({ snapshot: false })) {
      const m = decodeMetaFixed(value);
      this.account(key, 1, m.bytes);
      if (!isPinnedJson(metaHeaderJson(value))) this.order.insert(idOf(key), 0);
    }
  }

  /** The access clock: whole seconds since the store opened (a small integer for 34 years). */
  private accessSecond(): number {
    return Math.max(0, Math.floor((this.now() - this.startedAt) / 1000));
  }

  /**
   * What this node knows of a key's reads (policy selections by idleSeconds / accessCount): its last read through
   * GET or a batch get (HEAD, exports and migrations do not count), or when it arrived here (written, imported, or
   * found at the node's start), whichever is later, to the second; and the reads since it arrived or the node
   * started. Undefined when the key is absent or pinned (pinned keys are outside the SIEVE order): unknown, which
   * a selection by access never takes. Reads that a coordinator serves from its hot tier or near cache never reach
   * the node: this is idleness in the warm tier, as each tier of Tiera keeps its own LRU order.
   */
  accessOf(sk: Buffer): { lastAccessMs: number; count: number } | undefined {
    const a = this.order.access(idOf(sk));
    return a && { lastAccessMs: this.startedAt + a.at * 1000, count: a.reads };
  }

  /** Books `keys` and `bytes` (either may be negative) for storage key `sk`: totals and its ring bucket. */
  private account(sk: Uint8Array, keys: number, bytes: number): void {
    this.accounted += bytes;
    this.count += keys;
    this.histogram.add(sk, keys, bytes);
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
    return this.readRaw(sk, (headerJson, view) => ({ headerJson, value: Buffer.from(view) }), touch);
  }

  /**
   * As {@link getRaw}, but hands the value to `take` as a transient view (lmdb-js's reusable read buffer, or its
   * memory map): valid only during the call, so `take` copies it where it is needed, e.g. into a pooled response
   * buffer (getRaw copies it into a buffer of its own).
   */
  readRaw<T>(sk: Buffer, take: (headerJson: string, value: Buffer) => T, touch = true): T | undefined {
    const p = this.writes.journaledState(sk);
    const mb = p ? p.rec : exactView(this.meta.getBinaryFast(sk));
    if (!mb) return undefined;
    if (this.writes.expired(decodeMetaFixed(mb))) return undefined;
    const headerJson = metaHeaderJson(mb);
    const at = inlineValueAt(mb);
    // The next read may reuse the meta buffer: the header is a string already, an inline value is taken now.
    const value = at !== undefined ? mb.subarray(at) : (p?.value ?? exactView(this.data.getBinaryFast(sk)) ?? EMPTY);
    if (touch) this.order.touch(idOf(sk), this.accessSecond());
    return take(headerJson, value);
  }

  head(ns: string, key: string): EntryHeader | undefined {
    const sk = storeKey(ns, key);
    const p = this.writes.journaledState(sk);
    const mb = p ? p.rec : this.meta.getBinary(sk);
    if (!mb) return undefined;
    const m = decodeMetaFixed(mb);
    return this.writes.expired(m) ? undefined : decodeHeader(metaHeaderJson(mb));
  }

  // ------------------------------------------------------------------ writes

  /**
   * Versioned write. Decided synchronously (so callers can check ownership and enqueue in one step); the
   * returned promise resolves once the write is durable.
   */
  put(ns: string, key: string, entry: Entry): Promise<WriteOutcome> {
    return this.putAt(storeKey(ns, key), entry);
  }

  /**
   * As {@link put}, by storage key; `headerJson` is the header as received, when the caller has it. `ifAbsent`: an
   * exclusive create, refused while the key has any live record (PutOptions.ifAbsent in core/tiers/tier.ts).
   */
  putAt(sk: Buffer, entry: Entry, headerJson?: string, ifAbsent?: boolean): Promise<WriteOutcome> {
    return this.putMany([{ ns: '', key: '', entry, sk, headerJson, ifAbsent }]).then((o) => o[0]!);
  }

  /**
   * Versioned writes (single puts, batch puts, migration imports): every item is decided now, in order, and
   * they are journaled or queued to LMDB together. Resolves once all are durable. `bulk` (migration imports:
   * thousands of writes per call, in large transactions anyway) queues small values to LMDB directly too, except
   * behind a journaled write of the same key.
   */
  putMany(
    items: { ns: string; key: string; entry: Entry; sk?: Buffer; headerJson?: string; ifAbsent?: boolean | undefined }[],
    opts: { bulk?: boolean } = {},
  ): Promise<WriteOutcome[]> {
    this.assertWritable();
    const outcomes: WriteOutcome[] = [];
    const journaled: WriteOp[] = [];
    const direct: Direct = { commits: new Set(), queued: [] };
    for (const it of items) {
      const sk = it.sk ?? storeKey(it.ns, it.key);
      const bulk = opts.bulk === true;
      outcomes.push(this.writes.decidePut(sk, idOf(sk), it.entry, it.headerJson, bulk, journaled, direct, it.ifAbsent));
    }
    return this.writes.afterDecided(journaled, direct).then(() => outcomes);
  }

  /** Removes the entry if its version is `version` (any when omitted). Resolves to whether it removed one. */
  remove(ns: string, key: string, version?: number): Promise<boolean> {
    return this.removeKey(storeKey(ns, key), version);
  }

  removeKey(sk: Buffer, version?: number): Promise<boolean> {
    return this.removeMany([{ sk, version }]).then((r) => r[0]!);
  }

  /** Removes each entry whose version is as given (any when undefined), journaled together. */
  removeMany(items: { sk: Buffer; version?: number | undefined }[]): Promise<boolean[]> {
    this.assertWritable();
    const removed: boolean[] = [];
    const ops: WriteOp[] = [];
    for (const { sk, version } of items) {
      const op = this.writes.decideRemove(sk, version);
      if (op) ops.push(op);
      removed.push(op !== undefined);
    }
    if (ops.length === 0) return Promise.resolve(removed);
    return this.applier.submit(ops).then(() => removed);
  }

  /**
   * Sets or clears the pinned flag of the entry if it is exactly `version` (same value, version and expiry; the
   * header is rewritten in place). A pinned entry leaves the SIEVE order, an unpinned one re-enters it at the
   * newest end. Resolves to whether the entry now has the requested flag (false: absent, expired or another
   * version).
   */
  async setPinned(sk: Buffer, version: number, pinned: boolean): Promise<boolean> {
    this.assertWritable();
    const id = idOf(sk);
    // Reads the committed record: let queued writes of the key settle first.
    for (let attempt = 0; this.pending.has(id); attempt++) {
      if (attempt >= 3) return false;
      await this.settle();
    }
    const mb = this.meta.getBinary(sk);
    if (!mb) return false;
    const op = this.writes.decidePin(sk, id, mb, version, pinned);
    if (typeof op === 'boolean') return op;
    await this.applier.submit([op]);
    return true;
  }

  /**
   * Resolves when every write decided so far is committed to LMDB (and flushed, per `sync`): range sweeps, which
   * read LMDB, then see them all.
   */
  async settle(): Promise<void> {
    await this.applier.allCommitted();
    await this.env.committed;
    await this.durable();
  }

  private async durable(): Promise<void> {
    if (this.sync === 'flush') await this.env.flushed;
  }

  // ------------------------------------------------------------------ key order

  /**
   * One page of the keys of `ns` in `q`, in key order (UTF-8 bytes), whatever ring range they are in: committed
   * ones from the key-order index and journaled ones still waiting for LMDB from the overlay (see
   * {@link KeyOrderIndex.page}). Keys removed or expired but not yet swept may be listed; internal keys (storeOnce
   * blobs, which start with NUL) are not.
   */
  listOrdered(ns: string, q: OrderedKeysQuery): OrderedKeysPage {
    return this.keyOrder.page(ns, q);
  }

  // ------------------------------------------------------------------ ranges

  /**
   * Up to `limit` live entries of [start, end) in key order, after storage key `after` (exclusive). Reads
   * committed state: callers that need queued writes included call {@link settle} first.
   */
  scan(start: string, end: string | null, after: Buffer | undefined, limit: number, withValues = true): StoredItem[] {
    const out: StoredItem[] = [];
    this.visitRange(start, end, after, limit, withValues, (sk, header, value) => {
      const { ns, key } = parseStoreKey(sk);
      out.push({ sk, ns, key, headerJson: header.toString('utf8'), value: Buffer.from(value) });
    });
    return out;
  }

  /**
   * Sweeps up to `limit` stored keys of [start, end) after storage key `after` (exclusive), in key order, and
   * hands each live one to `visit` without copying its record: header JSON (UTF-8) and value (empty unless
   * `withValues`) are views into lmdb-js's read buffers, valid only during the call. Expired entries are stepped
   * over (they count towards `limit`); a visitor answering false ends the sweep early. Answers the last key visited
   * (the cursor to continue after) and whether the sweep reached the end of the span. Reads committed
   * state, like {@link scan}.
   */
  visitRange(
    start: string,
    end: string | null,
    after: Buffer | undefined,
    limit: number,
    withValues: boolean,
    visit: RangeVisitor,
  ): { last: Buffer | undefined; exhausted: boolean } {
    const now = this.now();
    let last: Buffer | undefined;
    let seen = 0;
    for (const { key, value } of this.metaViews.getRange({ ...spanBounds(start, end, after), limit })) {
      seen++;
      last = key;
      const e = expiresAtOf(value);
      if (e !== null && e <= now) continue;
      const at = inlineValueAt(value);
      let more: boolean | void;
      if (at !== undefined) {
        more = visit(key, value.subarray(INLINE_FIXED, at), withValues ? value.subarray(at) : EMPTY);
      } else {
        // Reading `data` reuses the buffer that `value` views: the header is copied first (large values only).
        const header = Buffer.from(value.subarray(META_FIXED));
        more = visit(key, header, withValues ? (exactView(this.data.getBinaryFast(key)) ?? EMPTY) : EMPTY);
      }
      if (more === false) return { last: key, exhausted: false };
    }
    return { last, exhausted: seen < limit };
  }

  /**
   * Number of stored keys and accounted bytes in [start, end), and the position at quantile `q` of its keys (see
   * {@link RangeStats.of}: whole buckets from the position histogram, only partial ones read).
   */
  async rangeStats(start: string, end: string | null, q = 0.5): Promise<{ keys: number; bytes: number; cut: string | null }> {
    // The buckets count queued writes at once; once those are committed, the reads of partial buckets agree.
    await this.settle();
    return this.ranges.of(start, end, q);
  }

  /** Deletes every key of [start, end) (committed and queued). Resolves to how many it removed. */
  async deleteRange(start: string, end: string | null): Promise<number> {
    await this.settle();
    let removed = 0;
    let after: Buffer | undefined;
    for (;;) {
      const keys: Buffer[] = [];
      for (const k of this.meta.getKeys({ ...spanBounds(start, end, after), limit: SCAN_CHUNK * 4 }))
        keys.push(Buffer.from(k as Buffer));
      if (keys.length === 0) break;
      const done = await this.removeMany(keys.map((sk) => ({ sk })));
      removed += done.filter(Boolean).length;
      after = keys[keys.length - 1];
    }
    return removed;
  }

  // ------------------------------------------------------------------ eviction and expiry

  /** Up to `limit` victims (not removed): expired entries first, then SIEVE order (see {@link ExpiryVictims.victims}). */
  victims(limit: number): Victim[] {
    return this.expiry.victims(limit);
  }

  /** Removes up to `maxScan` keys' worth of expired entries, resuming where the last sweep stopped. */
  sweepExpired(maxScan = 2000): Promise<number> {
    return this.expiry.sweepExpired(maxScan);
  }

  // ------------------------------------------------------------------ stats and lifecycle

  stats(): {
    keys: number;
    bytes: number;
    capacityBytes: number;
    fill: number;
    watermark: number;
    aboveWatermark: boolean;
    bytesOverWatermark: number;
  } {
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

  private assertWritable(): void {
    if (this.closed) throw new Error('the store is closed');
    if (this.applier.failure) throw this.applier.failure;
  }

  /**
   * Applies and flushes every write decided so far, deletes the journal (nothing is left to replay) and closes
   * LMDB. After a failed write, the journal is kept for the next start to replay.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    if (!this.applier.failure) await this.settle();
    this.closed = true;
    await this.applier.close();
    await this.env.close();
  }
}
