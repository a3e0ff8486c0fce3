import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import { FRAME_BYTES, Journal, readJournal } from './journal.js';
import { RING_HASH } from '../../layers/core/ring/hash.js';
import type { Entry, EntryHeader, WriteOutcome } from '../../layers/core/model/entry.js';
import { decodeHeader } from '../../layers/core/model/entry.js';
import { keyAfter, parseStoreKey, positionKey, storeKey } from '../../layers/core/warm/wire.js';
import { Sieve } from './sieve.js';
import { bucketStart, PositionHistogram, spanPieces, type SpanPieces } from './position-histogram.js';

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
 *   write-ahead {@link Journal} and acknowledged once their group is on disk (`sync: 'flush'`, the default:
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
  /** The value is in the `data` database (not inline). */
  external: boolean;
}

/** A key's newest state while a write of it waits for LMDB. */
interface PendingState {
  /** null: removed. */
  m: Meta | null;
  /** Journaled writes: the record as it will be stored in `meta` (puts; reads are served from it). */
  rec?: Buffer;
  /** Journaled puts of external values: the value as it will be stored in `data`. */
  value?: Buffer;
  /** Written through the journal (else queued to LMDB directly). */
  journaled: boolean;
}

/** What a journal record does to LMDB (bits). */
const OP_META_PUT = 1;
const OP_META_DEL = 2;
const OP_DATA_PUT = 4;
const OP_DATA_DEL = 8;
const OP_DATA = OP_DATA_PUT | OP_DATA_DEL;
/** A journal record: `[u8 ops][u8 0][u16 key length][u32 record length][u32 value length]`, key, record, value. */
const OP_FIXED = 12;

/** A journaled write, waiting to be applied to LMDB. */
interface WriteOp {
  sk: Buffer;
  id: string;
  ops: number;
  state: PendingState;
  /** Its journal record (framed), until appended. */
  framed: Buffer | undefined;
  /** Its journal record's number. */
  seq: number;
}

/** Bytes a journaled write keeps in the overlay until it is applied: its record and external value. */
function overlayBytes(op: WriteOp): number {
  return (op.state.rec?.length ?? 0) + (op.state.value?.length ?? 0);
}

function decodeOp(p: Buffer): { ops: number; sk: Buffer; rec: Buffer; value: Buffer } {
  const skLen = p.readUInt16BE(2);
  const recLen = p.readUInt32BE(4);
  const valLen = p.readUInt32BE(8);
  const at = OP_FIXED + skLen;
  return { ops: p[0]!, sk: p.subarray(OP_FIXED, at), rec: p.subarray(at, at + recLen), value: p.subarray(at + recLen, at + recLen + valLen) };
}

/** Journaled writes applied per LMDB transaction at most (a backlog takes several). */
const APPLY_BATCH_OPS = 100_000;
/** Writes queued to LMDB per event-loop turn while applying, so requests are not held up behind a large apply. */
const APPLY_CHUNK_OPS = 2_000;
/** Bytes of journaled records and values waiting for LMDB beyond which an apply starts at once. */
const APPLY_EARLY_BYTES = 64 * 1024 * 1024;
/** Beyond this, writes are acknowledged only once applied (LMDB falling behind slows writers, not memory). */
const OVERLAY_LIMIT_BYTES = 256 * 1024 * 1024;
/** `sys` entry: number of the last journal record LMDB holds (written in the transaction that applies it). */
const APPLIED_SEQ = 'journal.appliedSeq';
/** `sys` entry: the ring hash that ordered this store's keys ({@link StoreLayoutError} when it is not ours). */
const KEY_HASH = 'store.keyHash';

const META_FIXED = 20;
/** First byte after the fixed part of an inline record (an external record's header JSON starts with `{`). */
const INLINE_MARK = 0x01;
const INLINE_FIXED = META_FIXED + 5;
/** Values up to this size are stored inside their record (see the class comment). */
export const INLINE_VALUE_MAX_BYTES = 2048;
/** Bookkeeping per entry in the accounting (B+-tree slots in two databases, overlay and SIEVE node). */
export const ENTRY_OVERHEAD_BYTES = 96;
const SCAN_CHUNK = 256;
/** Keys read per event-loop turn by {@link NodeStore.rangeStats}. */
const STATS_CHUNK = 2048;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** What a `meta` record holds: inline with `value` when given, else external (the value goes to `data`). */
interface RecordParts {
  m: Meta;
  headerJson: string;
  value?: Buffer | undefined;
}

function recordLength(hBytes: number, value: Buffer | undefined): number {
  return (value ? INLINE_FIXED : META_FIXED) + hBytes + (value?.length ?? 0);
}

/** Writes the record of `parts` (header JSON `hBytes` long) at byte `at` of `out`. */
function writeRecord(out: Buffer, at: number, { m, headerJson, value }: RecordParts, hBytes: number): void {
  out.writeDoubleBE(m.version, at);
  out.writeDoubleBE(m.expiresAt ?? Number.NaN, at + 8);
  out.writeUInt32BE(m.bytes, at + 16);
  if (value) {
    out[at + META_FIXED] = INLINE_MARK;
    out.writeUInt32BE(hBytes, at + META_FIXED + 1);
  }
  const h = at + (value ? INLINE_FIXED : META_FIXED);
  out.write(headerJson, h, 'utf8');
  if (value) out.set(value, h + hBytes);
}

function encodeRecord(parts: RecordParts): Buffer {
  const hBytes = Buffer.byteLength(parts.headerJson);
  const out = Buffer.allocUnsafe(recordLength(hBytes, parts.value));
  writeRecord(out, 0, parts, hBytes);
  return out;
}

/**
 * A journal record in one buffer, with the space for its frame in front (see {@link Journal.append}): `[u8
 * ops][u8 0][u16 key length][u32 record length][u32 value length]`, then the storage key, the `meta` record and the
 * external value, if any. Answers views of the record and value too, which the overlay keeps (no second copy).
 */
function journalRecord(sk: Buffer, ops: number, record?: RecordParts, external?: Buffer): { framed: Buffer; rec?: Buffer; value?: Buffer } {
  const hBytes = record ? Buffer.byteLength(record.headerJson) : 0;
  const recLen = record ? recordLength(hBytes, record.value) : 0;
  const valLen = external?.length ?? 0;
  const at = FRAME_BYTES + OP_FIXED + sk.length;
  const out = Buffer.allocUnsafe(at + recLen + valLen);
  out[FRAME_BYTES] = ops;
  out[FRAME_BYTES + 1] = 0;
  out.writeUInt16BE(sk.length, FRAME_BYTES + 2);
  out.writeUInt32BE(recLen, FRAME_BYTES + 4);
  out.writeUInt32BE(valLen, FRAME_BYTES + 8);
  out.set(sk, FRAME_BYTES + OP_FIXED);
  if (record) writeRecord(out, at, record, hBytes);
  if (external) out.set(external, at + recLen);
  return { framed: out, ...(record ? { rec: out.subarray(at, at + recLen) } : {}), ...(external ? { value: out.subarray(at + recLen) } : {}) };
}

function decodeMetaFixed(b: Buffer): Meta {
  return { version: b.readDoubleBE(0), expiresAt: expiresAtOf(b), bytes: b.readUInt32BE(16), external: b[META_FIXED] !== INLINE_MARK };
}

/** A record's expiry (ms since the epoch), null for none: read alone where a whole Meta is not needed. */
function expiresAtOf(b: Buffer): number | null {
  const e = b.readDoubleBE(8);
  return Number.isNaN(e) ? null : e;
}

/** Where an inline record's header ends and its value starts (undefined: external record). */
function inlineValueAt(b: Buffer): number | undefined {
  return b[META_FIXED] === INLINE_MARK ? INLINE_FIXED + b.readUInt32BE(META_FIXED + 1) : undefined;
}

function metaHeaderJson(b: Buffer): string {
  const at = inlineValueAt(b);
  return at === undefined ? b.toString('utf8', META_FIXED) : b.toString('utf8', INLINE_FIXED, at);
}

function noop(): void {}

/** The writes of one call queued to LMDB directly: their commit promises and overlay states. */
interface Direct {
  commits: Set<Promise<unknown>>;
  queued: { id: string; state: PendingState }[];
}

const EMPTY = Buffer.alloc(0);

/**
 * lmdb-js's reusable read buffer reports the value's size as an own `length` property over a larger memory area,
 * which not every Buffer method honours (`toString` reads the whole area): a plain view of exactly the value.
 */
function exactView(b: Buffer | undefined): Buffer | undefined {
  return b && b.subarray(0, b.length);
}

/** Whether a stored header JSON has the pinned flag (a cheap test first: few headers mention it). */
function isPinnedJson(headerJson: string): boolean {
  return headerJson.includes('"pinned"') && decodeHeader(headerJson).flags.pinned === true;
}

/** A Buffer over the same memory as `b` (no copy). */
function viewOf(b: Uint8Array, start = 0, end = b.length): Buffer {
  return Buffer.from(b.buffer, b.byteOffset + start, end - start);
}

/**
 * Value codec of the {@link NodeStore} handle that sweeps ranges: it hands out views of lmdb-js's read buffer (or
 * its memory map) instead of the copy its `binary` encoding makes of every value. A view is valid only until the
 * next read, so a sweep consumes each entry before it steps on. (Keys stay copies: lmdb-js's custom key codecs
 * skipped entries in a sweep, measured on 3.5.6.)
 */
const VIEW_VALUES = { encode: (v: Buffer) => v, decode: (b: Uint8Array, size: number) => viewOf(b, 0, size), needsStableBuffer: false };

/**
 * One live entry of a range sweep (see {@link NodeStore.visitRange}): its storage key, and its header JSON and
 * value as views valid only during the call. Answering false ends the sweep after this entry.
 */
export type RangeVisitor = (sk: Buffer, headerJson: Buffer, value: Buffer) => boolean | void;

/** A storage key as a Map key (latin1 maps bytes to chars one to one). */
function idOf(sk: Buffer): string {
  return sk.toString('latin1');
}

/** The data directory was written by a build that orders keys by another ring hash. */
export class StoreLayoutError extends Error {}

export class NodeStore {
  readonly capacityBytes: number;
  readonly watermark: number;
  private readonly env: RootDatabase;
  private readonly meta: Database<Buffer, Buffer>;
  private readonly data: Database<Buffer, Buffer>;
  /** `meta` again, with values read as views (range sweeps: {@link visitRange}). */
  private readonly metaViews: Database<Buffer, Buffer>;
  private readonly sys: Database<unknown, string>;
  private readonly sync: 'flush' | 'commit';
  private readonly now: () => number;
  /** Writes decided but not yet committed to LMDB: the newest state of their keys. */
  private readonly pending = new Map<string, PendingState>();
  private readonly journal: Journal;
  private readonly applyIntervalMs: number;
  /** Journaled writes not yet applied to LMDB, in decision order. */
  private applyQueue: WriteOp[] = [];
  /** The apply loop, while it runs. */
  private applying: Promise<void> | undefined;
  private applyTimer: NodeJS.Timeout | undefined;
  private lastApplyAt = 0;
  /** Bytes of records and values in {@link applyQueue}. */
  private queuedBytes = 0;
  /** Every journaled write up to this record number is committed to LMDB. */
  private committedSeq: number;
  /** Number of the last journal record appended. */
  private lastSeq: number;
  private commitWaiters: { seq: number; resolve: () => void; reject: (e: unknown) => void }[] = [];
  /** Set when the journal or LMDB failed a journaled write: every later write is refused. */
  private failure: Error | undefined;
  /** After a replay at boot: flushing LMDB, then deleting the replayed segments. */
  private replayCleanup: Promise<void> | undefined;
  private readonly order = new Sieve<string>();
  /** Keys and bytes per ring bucket, for {@link rangeStats}. */
  private readonly histogram = new PositionHistogram();
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
    // noSubdir false: lmdb-js otherwise takes a path with a dot in its last part (`/data/strata.v1`) for a file.
    this.env = open({ path: opts.dir, maxDbs: 4, noSubdir: false });
    this.meta = this.env.openDB<Buffer, Buffer>({ name: 'meta', encoding: 'binary', keyEncoding: 'binary' });
    this.data = this.env.openDB<Buffer, Buffer>({ name: 'data', encoding: 'binary', keyEncoding: 'binary' });
    // (lmdb-js's typings do not list `encoder` and `keyEncoder`, which its `openDB` takes.)
    const viewCodecs = { name: 'meta', keyEncoding: 'binary' as const, encoder: VIEW_VALUES };
    this.metaViews = this.env.openDB<Buffer, Buffer>(viewCodecs);
    this.sys = this.env.openDB<unknown, string>({ name: 'sys', encoding: 'json' });
    this.checkKeyHash(opts.dir);
    this.applyIntervalMs = opts.applyIntervalMs ?? 1000;
    this.committedSeq = this.lastSeq = this.replayJournal(opts.dir);
    this.journal = new Journal({ dir: opts.dir, fsync: this.sync === 'flush', firstSeq: this.lastSeq + 1, segmentBytes: opts.journalSegmentBytes, onDurable: () => this.kickApply(), onError: (e) => this.fail(e) });
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
      this.env.close();
      throw new StoreLayoutError(`the data directory ${dir} holds keys placed by ring hash "${stamped ?? 'sha256-64'}", but this build places them by "${RING_HASH}": its entries cannot be found. Drain the node with the build that wrote it (scale-in), or empty the directory to start the node afresh.`);
    }
    this.sys.putSync(KEY_HASH, RING_HASH);
  }

  /**
   * Boot: applies the journal records LMDB does not hold yet (those after its `journal.appliedSeq`), in order, in
   * synchronous transactions that record their progress, then deletes the segments. Answers the number of the
   * last record applied or seen (the journal numbers on from there).
   */
  private replayJournal(dir: string): number {
    const applied = (this.sys.get(APPLIED_SEQ) as number | undefined) ?? 0;
    const j = readJournal(dir, applied);
    if (j.segments.length === 0) return applied;
    let batch: { seq: number; payload: Buffer }[] = [];
    let replayed = 0;
    const flush = (): void => {
      const records = batch;
      batch = [];
      this.env.transactionSync(() => {
        for (const r of records) this.applyOpSync(decodeOp(r.payload));
        this.sys.putSync(APPLIED_SEQ, records[records.length - 1]!.seq);
      });
      replayed += records.length;
    };
    for (const r of j.records) {
      batch.push(r);
      if (batch.length >= APPLY_BATCH_OPS) flush();
    }
    if (batch.length > 0) flush();
    const last = Math.max(applied, j.lastSeq());
    // lmdb-js's overlapping sync does not flush synchronous transactions: the segments go only once a forced sync
    // has put the replayed records on disk (until then a crash finds them again, after an older appliedSeq).
    // (lmdb-js's typings do not list `sync`: a forced mdb_env_sync on a worker thread, calling back when done.)
    const env = this.env as unknown as { sync(done: (err?: Error) => void): void };
    this.replayCleanup = new Promise<void>((resolve) =>
      env.sync((err?: Error) => {
        if (err) console.error(JSON.stringify({ level: 'warn', msg: 'could not flush the replayed journal; its segments are kept', error: err.message }));
        else j.done();
        resolve();
      }),
    );
    console.error(JSON.stringify({ level: 'info', msg: 'replayed the write journal', records: replayed, segments: j.segments.length, lastSeq: last }));
    return last;
  }

  private applyOpSync(op: { ops: number; sk: Buffer; rec: Buffer; value: Buffer }): void {
    if (op.ops & OP_META_PUT) this.meta.putSync(op.sk, op.rec);
    if (op.ops & OP_META_DEL) this.meta.removeSync(op.sk);
    if (op.ops & OP_DATA_PUT) this.data.putSync(op.sk, op.value);
    if (op.ops & OP_DATA_DEL) this.data.removeSync(op.sk);
  }

  /** Boot: byte accounting and eviction order from the meta database (values are not read). */
  private rebuild(): void {
    for (const { key, value } of this.metaViews.getRange({ snapshot: false })) {
      const m = decodeMetaFixed(value);
      this.account(key, 1, m.bytes);
      if (!isPinnedJson(metaHeaderJson(value))) this.order.insert(idOf(key));
    }
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
    const p = this.journaledState(sk);
    const mb = p ? p.rec : exactView(this.meta.getBinaryFast(sk));
    if (!mb) return undefined;
    if (this.expired(decodeMetaFixed(mb))) return undefined;
    const headerJson = metaHeaderJson(mb);
    const at = inlineValueAt(mb);
    // The next read may reuse the meta buffer: the header is a string already, an inline value is taken now.
    const value = at !== undefined ? mb.subarray(at) : (p?.value ?? exactView(this.data.getBinaryFast(sk)) ?? EMPTY);
    if (touch) this.order.touch(idOf(sk));
    return take(headerJson, value);
  }

  head(ns: string, key: string): EntryHeader | undefined {
    const sk = storeKey(ns, key);
    const p = this.journaledState(sk);
    const mb = p ? p.rec : this.meta.getBinary(sk);
    if (!mb) return undefined;
    const m = decodeMetaFixed(mb);
    return this.expired(m) ? undefined : decodeHeader(metaHeaderJson(mb));
  }

  private expired(m: Pick<Meta, 'expiresAt'>): boolean {
    return m.expiresAt !== null && m.expiresAt <= this.now();
  }

  /**
   * A journaled write of the key that LMDB does not hold yet: reads are answered from it (its record; undefined
   * when it removed the key). Writes queued to LMDB directly are read from LMDB once committed, as before.
   */
  private journaledState(sk: Buffer): PendingState | undefined {
    if (this.applyQueue.length === 0 && !this.applying) return undefined;
    const p = this.pending.get(idOf(sk));
    return p?.journaled ? p : undefined;
  }

  /** The newest state of a key, queued writes included. */
  private current(sk: Buffer, id: string): Meta | null {
    const p = this.pending.get(id);
    return p !== undefined ? p.m : this.committedMeta(sk);
  }

  /** The state of a key in LMDB. */
  private committedMeta(sk: Buffer): Meta | null {
    // Fixed fields only: LMDB's reused read buffer, not a copy of the record (value included when inline).
    const mb = this.meta.getBinaryFast(sk);
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
    return this.putMany([{ ns: '', key: '', entry, sk, headerJson }]).then((o) => o[0]!);
  }

  /**
   * Versioned writes (single puts, batch puts, migration imports): every item is decided now, in order, and
   * they are journaled or queued to LMDB together. Resolves once all are durable. `bulk` (migration imports:
   * thousands of writes per call, in large transactions anyway) queues small values to LMDB directly too, except
   * behind a journaled write of the same key.
   */
  putMany(items: { ns: string; key: string; entry: Entry; sk?: Buffer; headerJson?: string }[], opts: { bulk?: boolean } = {}): Promise<WriteOutcome[]> {
    this.assertWritable();
    const outcomes: WriteOutcome[] = [];
    const journaled: WriteOp[] = [];
    const direct: Direct = { commits: new Set(), queued: [] };
    for (const it of items) {
      const sk = it.sk ?? storeKey(it.ns, it.key);
      outcomes.push(this.decidePut(sk, idOf(sk), it.entry, it.headerJson, opts.bulk === true, journaled, direct));
    }
    return this.afterDecided(journaled, direct).then(() => outcomes);
  }

  /** Decides one write and, when it applies, adds it to `journaled` or `direct` (and to the overlay). */
  private decidePut(sk: Buffer, id: string, entry: Entry, headerJson: string | undefined, bulk: boolean, journaled: WriteOp[], direct: Direct): WriteOutcome {
    const prev = this.pending.get(id);
    const cur = prev !== undefined ? prev.m : this.committedMeta(sk);
    const live = cur !== null && !this.expired(cur);
    if (live && cur.version >= entry.header.version) return { applied: false, current: cur.version };
    const json = headerJson ?? JSON.stringify(entry.header);
    const bytes = sk.length + Buffer.byteLength(json) + entry.value.length + ENTRY_OVERHEAD_BYTES;
    const before = cur?.bytes ?? 0;
    const grows = bytes > before;
    const small = entry.value.length === 0; // tombstones and location markers always fit
    if (grows && !small && this.accounted - before + bytes > this.capacityBytes) {
      return { applied: false, current: live ? cur.version : null, full: true };
    }
    const inline = entry.value.length <= INLINE_VALUE_MAX_BYTES;
    const m: Meta = { version: entry.header.version, expiresAt: entry.header.expiresAt, bytes, external: !inline };
    this.account(sk, cur === null ? 1 : 0, bytes - before);
    if (entry.header.flags.pinned) this.order.remove(id);
    else this.order.insert(id);
    const dataOps = inline ? (cur?.external ? OP_DATA_DEL : 0) : OP_DATA_PUT;
    if ((inline && !bulk) || prev?.journaled) {
      // A large value (or a bulk write) behind a journaled write of the same key is journaled too, so it reaches
      // LMDB after it. Either way the record (and value) are copied into the journal record: the caller's buffer
      // may be a pooled request body, reused once this is acknowledged.
      journaled.push(this.decided(sk, id, OP_META_PUT | dataOps, m, { m, headerJson: json, value: inline ? entry.value : undefined }, inline ? undefined : entry.value));
    } else {
      const state: PendingState = { m, journaled: false };
      this.pending.set(id, state);
      direct.queued.push({ id, state });
      // The header and the value are queued in the same event turn, so lmdb-js commits them in one transaction
      // (its default `eventTurnBatching`; nothing here uses the synchronous transactions that could split a
      // batch): a crash or a reader never sees one without the other.
      direct.commits.add(this.meta.put(sk, encodeRecord({ m, headerJson: json, value: inline ? entry.value : undefined })));
      if (!inline) direct.commits.add(this.data.put(sk, entry.value));
      else if (cur?.external) direct.commits.add(this.data.remove(sk));
    }
    return { applied: true, current: m.version };
  }

  /**
   * A decided journaled write (`m` null: a removal): its journal record, and its state, now the key's newest (the
   * overlay). {@link submit} journals it.
   */
  private decided(sk: Buffer, id: string, ops: number, m: Meta | null, record?: RecordParts, external?: Buffer): WriteOp {
    const { framed, rec, value } = journalRecord(sk, ops, record, external);
    const state: PendingState = { m, rec, value, journaled: true };
    this.pending.set(id, state);
    return { sk, id, ops, state, framed, seq: 0 };
  }

  /** Resolves once the decided writes are durable: journaled ones in the journal, direct ones in LMDB. */
  private afterDecided(journaled: WriteOp[], direct: Direct): Promise<void> {
    const j = journaled.length > 0 ? this.submit(journaled) : undefined;
    const d = direct.queued.length > 0 ? this.durableAfter(direct) : undefined;
    return j && d ? Promise.all([j, d]).then(noop) : (j ?? d ?? Promise.resolve());
  }

  /**
   * Resolves once the directly queued writes are committed and (per `sync`) flushed, then drops their overlay
   * state. The flush promise is taken now, right after queuing: the one of the transaction these writes are in
   * (one read later could be a newer transaction's, a whole commit later).
   */
  private durableAfter({ commits, queued }: Direct): Promise<void> {
    if (this.sync === 'flush') commits.add(this.env.flushed.then(noop));
    const settled = (): void => {
      for (const q of queued) if (this.pending.get(q.id) === q.state) this.pending.delete(q.id);
    };
    return Promise.all(commits).then(settled, (e: unknown) => {
      settled();
      throw e;
    });
  }

  /**
   * Journals decided writes (in the order given, after every write decided before them) and queues them for
   * LMDB. Resolves once they are durable in the journal; when the overlay holds more than its limit, only once
   * they are committed to LMDB too.
   */
  private submit(ops: WriteOp[]): Promise<void> {
    const { seq, durable } = this.journal.append(ops.map((op) => op.framed!));
    let s = seq - ops.length;
    for (const op of ops) {
      op.seq = ++s;
      op.framed = undefined;
      this.queuedBytes += overlayBytes(op);
      this.applyQueue.push(op);
    }
    this.lastSeq = seq;
    if (this.queuedBytes > OVERLAY_LIMIT_BYTES) return durable.then(() => this.committedThrough(seq));
    return durable;
  }

  /** Resolves once every journaled write up to record `seq` is committed to LMDB. */
  private committedThrough(seq: number): Promise<void> {
    if (this.committedSeq >= seq) return Promise.resolve();
    if (this.failure) return Promise.reject(this.failure);
    const committed = new Promise<void>((resolve, reject) => this.commitWaiters.push({ seq, resolve, reject }));
    this.kickApply();
    return committed;
  }

  /** Starts applying durable journaled writes to LMDB: now when someone waits or much is queued, else on schedule. */
  private kickApply(): void {
    if (this.applying || this.closed || this.applyQueue.length === 0) return;
    const urgent = this.commitWaiters.length > 0 || this.queuedBytes > APPLY_EARLY_BYTES;
    const wait = urgent ? 0 : this.lastApplyAt + this.applyIntervalMs - performance.now();
    if (wait > 0) {
      this.applyTimer ??= setTimeout(() => {
        this.applyTimer = undefined;
        this.kickApply();
      }, wait);
      return;
    }
    clearTimeout(this.applyTimer);
    this.applyTimer = undefined;
    this.applying = this.applyLoop().finally(() => {
      this.applying = undefined;
      if (this.applyQueue[0] && this.applyQueue[0].seq <= this.journal.durableSeq) this.kickApply();
    });
  }

  /**
   * Applies the durable journaled writes to LMDB, in order, up to {@link APPLY_BATCH_OPS} per transaction: a write
   * superseded by a later one of the same key in the batch is skipped (the later one takes over its `data`
   * removal), the rest are queued {@link APPLY_CHUNK_OPS} per event-loop turn, then the batch's last record number
   * (so a restart does not apply them again over newer direct writes). Once committed, their overlay states go;
   * once flushed, the journal releases their records.
   */
  private async applyLoop(): Promise<void> {
    try {
      for (;;) {
        const durableSeq = this.journal.durableSeq;
        let n = 0;
        while (n < this.applyQueue.length && n < APPLY_BATCH_OPS && this.applyQueue[n]!.seq <= durableSeq) n++;
        if (n === 0) return;
        const batch = this.applyQueue.splice(0, n);
        this.lastApplyAt = performance.now();
        const newest = new Map<string, WriteOp>();
        for (const op of batch) {
          const before = newest.get(op.id);
          if (before && before.ops & OP_DATA && !(op.ops & OP_DATA)) op.ops |= OP_DATA_DEL;
          newest.set(op.id, op);
        }
        let queued = 0;
        for (const op of batch) {
          if (newest.get(op.id) !== op) continue;
          this.applyOp(op);
          if (++queued % APPLY_CHUNK_OPS === 0) await yieldToEventLoop();
        }
        const last = batch[batch.length - 1]!.seq;
        const committed = this.sys.put(APPLIED_SEQ, last);
        // Taken now, right after queuing: the flush of the transaction these writes end in.
        const flushed = this.env.flushed;
        await committed;
        for (const op of batch) {
          this.queuedBytes -= overlayBytes(op);
          if (this.pending.get(op.id) === op.state) this.pending.delete(op.id);
        }
        this.committedSeq = last;
        this.resolveCommitWaiters();
        await flushed;
        this.journal.release(last);
        if (this.commitWaiters.length === 0 && this.queuedBytes <= APPLY_EARLY_BYTES) return;
      }
    } catch (e) {
      this.fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** Queues one journaled write to LMDB (lmdb-js commits in call order). */
  private applyOp(op: WriteOp): void {
    if (op.ops & OP_META_PUT) void this.meta.put(op.sk, op.state.rec!);
    if (op.ops & OP_META_DEL) void this.meta.remove(op.sk);
    if (op.ops & OP_DATA_PUT) void this.data.put(op.sk, op.state.value!);
    if (op.ops & OP_DATA_DEL) void this.data.remove(op.sk);
  }

  private resolveCommitWaiters(): void {
    if (this.commitWaiters.length === 0) return;
    const still: typeof this.commitWaiters = [];
    for (const w of this.commitWaiters) {
      if (w.seq <= this.committedSeq) w.resolve();
      else still.push(w);
    }
    this.commitWaiters = still;
  }

  /** The journal or LMDB failed a journaled write: the store refuses writes from now on (a restart replays). */
  private fail(e: Error): void {
    if (this.failure) return;
    this.failure = e;
    console.error(JSON.stringify({ level: 'error', msg: 'the node store failed a write; it refuses writes until restarted', error: e.message }));
    const waiters = this.commitWaiters;
    this.commitWaiters = [];
    for (const w of waiters) w.reject(e);
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
      const id = idOf(sk);
      const cur = this.current(sk, id);
      if (cur === null || (version !== undefined && cur.version !== version)) {
        removed.push(false);
        continue;
      }
      this.account(sk, -1, -cur.bytes);
      this.order.remove(id);
      ops.push(this.decided(sk, id, OP_META_DEL | (cur.external ? OP_DATA_DEL : 0), null));
      removed.push(true);
    }
    if (ops.length === 0) return Promise.resolve(removed);
    return this.submit(ops).then(() => removed);
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
    const m = decodeMetaFixed(mb);
    if (m.version !== version || this.expired(m)) return false;
    const oldJson = metaHeaderJson(mb);
    const header = decodeHeader(oldJson);
    if (!!header.flags.pinned === pinned) return true;
    if (pinned) header.flags.pinned = true;
    else delete header.flags.pinned;
    const json = JSON.stringify(header);
    const nm: Meta = { ...m, bytes: m.bytes - Buffer.byteLength(oldJson) + Buffer.byteLength(json) };
    const at = inlineValueAt(mb);
    // The record is rewritten whole (an inline value with it); an external value stays where it is in `data`.
    const op = this.decided(sk, id, OP_META_PUT, nm, { m: nm, headerJson: json, value: at === undefined ? undefined : mb.subarray(at) });
    this.account(sk, 0, nm.bytes - m.bytes);
    if (pinned) this.order.remove(id);
    else this.order.insert(id);
    await this.submit([op]);
    return true;
  }

  /**
   * Resolves when every write decided so far is committed to LMDB (and flushed, per `sync`): range sweeps, which
   * read LMDB, then see them all.
   */
  async settle(): Promise<void> {
    await this.committedThrough(this.lastSeq);
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
  visitRange(start: string, end: string | null, after: Buffer | undefined, limit: number, withValues: boolean, visit: RangeVisitor): { last: Buffer | undefined; exhausted: boolean } {
    const now = this.now();
    let last: Buffer | undefined;
    let seen = 0;
    for (const { key, value } of this.metaViews.getRange({ ...NodeStore.bounds(start, end, after), limit })) {
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
   * Number of stored keys and accounted bytes in [start, end), and the position at quantile `q` of its keys. The
   * whole buckets of the span come from the position histogram; only the keys of the partial buckets at its ends
   * and of the bucket the cut falls in are read (in chunks, yielding between them): a migration plans on a live
   * node, and reading a whole range would stall its requests.
   */
  async rangeStats(start: string, end: string | null, q = 0.5): Promise<{ keys: number; bytes: number; cut: string | null }> {
    // The buckets count queued writes at once; once those are committed, the reads of partial buckets agree.
    await this.settle();
    const pieces = spanPieces(start, end);
    const head = pieces.head ? await this.countSpan(pieces.head.start, pieces.head.end) : { keys: 0, bytes: 0 };
    const whole = this.histogram.sum(pieces.whole.from, pieces.whole.to);
    const tail = pieces.tail ? await this.countSpan(pieces.tail.start, pieces.tail.end) : { keys: 0, bytes: 0 };
    const keys = head.keys + whole.keys + tail.keys;
    const bytes = head.bytes + whole.bytes + tail.bytes;
    let cut: string | null = null;
    if (keys >= 2) {
      cut = await this.positionAt(pieces, head.keys, Math.min(keys - 1, Math.max(1, Math.floor(keys * q))));
      // Keys sharing the cut position all stay on one side; a cut at the range start would move nothing.
      if (cut === start) cut = null;
    }
    return { keys, bytes, cut };
  }

  /** Keys and accounted bytes of [start, end), read from the meta database. */
  private async countSpan(start: string, end: string | null): Promise<{ keys: number; bytes: number }> {
    const b = NodeStore.bounds(start, end);
    let keys = 0;
    let bytes = 0;
    for (let after: Buffer | undefined; ; await yieldToEventLoop()) {
      let last: Buffer | undefined;
      for (const { key, value } of this.metaViews.getRange({ ...b, ...(after ? { start: keyAfter(after) } : {}), limit: STATS_CHUNK })) {
        keys++;
        bytes += value.readUInt32BE(16);
        last = key;
      }
      if (!last) return { keys, bytes };
      after = last; // a sweep's keys are copies (see VIEW_VALUES), as scanExpired relies on too
    }
  }

  /** The position of the key `skip` keys into the span (0-based), reading only the piece it falls in. */
  private async positionAt(pieces: SpanPieces, headKeys: number, skip: number): Promise<string | null> {
    if (pieces.head && skip < headKeys) return this.nthPosition(pieces.head.start, pieces.head.end, skip);
    let rest = skip - headKeys;
    for (let b = pieces.whole.from; b < pieces.whole.to; b++) {
      const n = this.histogram.keysIn(b);
      if (rest < n) return this.nthPosition(bucketStart(b)!, bucketStart(b + 1), rest);
      rest -= n;
    }
    return pieces.tail ? this.nthPosition(pieces.tail.start, pieces.tail.end, rest) : null;
  }

  /** The position of the key `skip` keys into [start, end); the last one when there are fewer (null: none). */
  private async nthPosition(start: string, end: string | null, skip: number): Promise<string | null> {
    const b = NodeStore.bounds(start, end);
    let last: Buffer | undefined;
    for (let after: Buffer | undefined; ; await yieldToEventLoop()) {
      let seen = false;
      for (const k of this.meta.getKeys({ ...b, ...(after ? { start: keyAfter(after) } : {}), limit: STATS_CHUNK * 4 })) {
        last = k as Buffer;
        seen = true;
        if (skip-- === 0) return last.toString('hex', 0, 8);
      }
      if (!seen) return last ? last.toString('hex', 0, 8) : null;
      after = Buffer.from(last!);
    }
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
      const done = await this.removeMany(keys.map((sk) => ({ sk })));
      removed += done.filter(Boolean).length;
      after = keys[keys.length - 1];
    }
    return removed;
  }

  // ------------------------------------------------------------------ eviction and expiry

  /**
   * Up to `limit` victims (not removed): expired entries first (found by a bounded scan of LMDB, which holds
   * journaled writes once the store has settled; it resumes where the last one stopped, so repeated calls cover
   * the whole store), then the next keys in SIEVE order. Naming a SIEVE
   * victim moves the hand past it, so consecutive calls name consecutive victims. Pinned entries are never named
   * (they are not in the order; an expired pinned entry is dead all the same and is named).
   */
  victims(limit: number): Victim[] {
    const out = this.expiredVictims(limit);
    const named = new Set(out.map((v) => v.position + v.ns + '\u0000' + v.key));
    for (const id of this.order.victims(limit - out.length)) {
      const sk = Buffer.from(id, 'latin1');
      const m = this.current(sk, id);
      if (!m) continue;
      const { ns, key, position } = parseStoreKey(sk);
      if (named.has(position + ns + '\u0000' + key)) continue;
      out.push({ ns, key, version: m.version, bytes: m.bytes, position, expiresAt: m.expiresAt, ...(this.expired(m) ? { expired: true as const } : {}) });
    }
    return out;
  }

  /** Expired entries among the next `4 × limit` keys (at least 256, at most 8192) after the expiry cursor. */
  private expiredVictims(limit: number): Victim[] {
    if (limit <= 0) return [];
    const { found, resume } = this.scanExpired(this.expiryCursor, Math.min(8192, Math.max(256, 4 * limit)), limit);
    this.expiryCursor = resume;
    const out: Victim[] = [];
    for (const { sk, m } of found) {
      // LMDB may not hold the newest write yet: one waiting (a removal, a newer version) wins.
      const p = this.pending.get(idOf(sk));
      if (p && p.m?.version !== m.version) continue;
      const { ns, key, position } = parseStoreKey(sk);
      out.push({ ns, key, version: m.version, bytes: m.bytes, position, expiresAt: m.expiresAt, expired: true });
    }
    return out;
  }

  /** Removes up to `maxScan` keys' worth of expired entries, resuming where the last sweep stopped. */
  async sweepExpired(maxScan = 2000): Promise<number> {
    const { found, resume } = this.scanExpired(this.sweepCursor, maxScan);
    this.sweepCursor = resume;
    const done = await this.removeMany(found.map(({ sk, m }) => ({ sk, version: m.version })));
    return done.filter(Boolean).length;
  }

  /**
   * Expired entries among up to `maxScan` keys after `cursor` (from the start when undefined), stopping once
   * `stopAfter` are found; `resume` is where the next scan starts (undefined: this one reached the end).
   */
  private scanExpired(cursor: Buffer | undefined, maxScan: number, stopAfter = Number.POSITIVE_INFINITY): { found: { sk: Buffer; m: Meta }[]; resume: Buffer | undefined } {
    const now = this.now();
    const found: { sk: Buffer; m: Meta }[] = [];
    let scanned = 0;
    let last: Buffer | undefined;
    // Values as views: a sweep reads only their fixed part, and copying each (a node sweeps every few seconds)
    // cost a buffer per key in garbage collection.
    for (const { key, value } of this.metaViews.getRange({ ...(cursor ? { start: keyAfter(cursor) } : {}), limit: maxScan })) {
      scanned++;
      last = key;
      const m = decodeMetaFixed(value);
      if (m.expiresAt !== null && m.expiresAt <= now) {
        found.push({ sk: last, m });
        if (found.length >= stopAfter) break;
      }
    }
    return { found, resume: scanned < maxScan && found.length < stopAfter ? undefined : last };
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

  private assertWritable(): void {
    if (this.closed) throw new Error('the store is closed');
    if (this.failure) throw this.failure;
  }

  /**
   * Applies and flushes every write decided so far, deletes the journal (nothing is left to replay) and closes
   * LMDB. After a failed write, the journal is kept for the next start to replay.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    if (!this.failure) await this.settle();
    this.closed = true;
    clearTimeout(this.applyTimer);
    await this.applying;
    await this.env.flushed;
    if (!this.failure) this.journal.release(this.lastSeq);
    await this.journal.close();
    await this.replayCleanup;
    await this.env.close();
  }
}
