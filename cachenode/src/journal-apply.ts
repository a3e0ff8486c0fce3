/**
 * The journal apply pipeline of the node store: appends decided writes to the write-ahead {@link Journal}, applies
 * them to LMDB in large batched transactions (recording `journal.appliedSeq` with each), replays the journal at
 * boot, and refuses writes once the journal or LMDB failed one. Separate from the store because it owns its own
 * state machine (queue, timer, apply loop, commit waiters) that the version rules and reads only consult.
 */
import type { Database, RootDatabase } from 'lmdb';
import { Journal, readJournal } from './journal.js';
import { decodeOp, OP_DATA, OP_DATA_DEL, OP_DATA_PUT, OP_META_DEL, OP_META_PUT } from './record-codec.js';
import type { PendingState } from './write-decision.js';
import type { KeyOrderIndex } from './key-order-index.js';
import { yieldToEventLoop } from './event-loop.js';
import { nodeLog } from './node-log.js';

/** A journaled write, waiting to be applied to LMDB. */
export interface WriteOp {
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

export interface JournalApplierOptions {
  dir: string;
  env: RootDatabase;
  meta: Database<Buffer, Buffer>;
  data: Database<Buffer, Buffer>;
  sys: Database<unknown, string>;
  /** The key-order index: every `meta` insert or removal changes it in the same transaction. */
  keyOrder: KeyOrderIndex;
  sync: 'flush' | 'commit';
  /** How often journaled writes are applied to LMDB when nobody waits for them (ms). */
  applyIntervalMs: number;
  journalSegmentBytes: number | undefined;
  /** The store's overlay: an applied write's state leaves it once committed (unless a newer one replaced it). */
  pending: Map<string, PendingState>;
}

export class JournalApplier {
  private readonly env: RootDatabase;
  private readonly meta: Database<Buffer, Buffer>;
  private readonly data: Database<Buffer, Buffer>;
  private readonly sys: Database<unknown, string>;
  private readonly keyOrder: KeyOrderIndex;
  private readonly pending: Map<string, PendingState>;
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
  private failed: Error | undefined;
  /** After a replay at boot: flushing LMDB, then deleting the replayed segments. */
  private replayCleanup: Promise<void> | undefined;
  /** Set when the store closes: no apply starts any more. */
  private stopped = false;

  constructor(opts: JournalApplierOptions) {
    this.env = opts.env;
    this.meta = opts.meta;
    this.data = opts.data;
    this.sys = opts.sys;
    this.keyOrder = opts.keyOrder;
    this.pending = opts.pending;
    this.applyIntervalMs = opts.applyIntervalMs;
    this.committedSeq = this.lastSeq = this.replayJournal(opts.dir);
    this.journal = new Journal({
      dir: opts.dir,
      fsync: opts.sync === 'flush',
      firstSeq: this.lastSeq + 1,
      segmentBytes: opts.journalSegmentBytes,
      onDurable: () => this.kickApply(),
      onError: (e) => this.fail(e),
    });
  }

  /** Set when the journal or LMDB failed a journaled write: every later write is refused. */
  get failure(): Error | undefined {
    return this.failed;
  }

  /** Whether journaled writes are queued for LMDB or being applied (reads then consult the overlay). */
  get busy(): boolean {
    return this.applyQueue.length !== 0 || this.applying !== undefined;
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
        if (err) {
          nodeLog.warn('could not flush the replayed journal; its segments are kept', { error: err.message });
        } else j.done();
        resolve();
      }),
    );
    nodeLog.info('replayed the write journal', { records: replayed, segments: j.segments.length, lastSeq: last });
    return last;
  }

  private applyOpSync(op: { ops: number; sk: Buffer; rec: Buffer; value: Buffer }): void {
    if (op.ops & OP_META_PUT) {
      this.meta.putSync(op.sk, op.rec);
      this.keyOrder.addSync(op.sk);
    }
    if (op.ops & OP_META_DEL) {
      this.meta.removeSync(op.sk);
      this.keyOrder.dropSync(op.sk);
    }
    if (op.ops & OP_DATA_PUT) this.data.putSync(op.sk, op.value);
    if (op.ops & OP_DATA_DEL) this.data.removeSync(op.sk);
  }

  /**
   * Journals decided writes (in the order given, after every write decided before them) and queues them for
   * LMDB. Resolves once they are durable in the journal; when the overlay holds more than its limit, only once
   * they are committed to LMDB too.
   */
  submit(ops: WriteOp[]): Promise<void> {
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

  /** Resolves once every journaled write appended so far is committed to LMDB. */
  allCommitted(): Promise<void> {
    return this.committedThrough(this.lastSeq);
  }

  /** Resolves once every journaled write up to record `seq` is committed to LMDB. */
  private committedThrough(seq: number): Promise<void> {
    if (this.committedSeq >= seq) return Promise.resolve();
    if (this.failed) return Promise.reject(this.failed);
    const committed = new Promise<void>((resolve, reject) => this.commitWaiters.push({ seq, resolve, reject }));
    this.kickApply();
    return committed;
  }

  /** Starts applying durable journaled writes to LMDB: now when someone waits or much is queued, else on schedule. */
  private kickApply(): void {
    if (this.applying || this.stopped || this.applyQueue.length === 0) return;
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
        // Disposal of released segments runs off this loop and never rejects (a failed delete is logged).
        void this.journal.release(last);
        if (this.commitWaiters.length === 0 && this.queuedBytes <= APPLY_EARLY_BYTES) return;
      }
    } catch (e) {
      this.fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /**
   * Queues one journaled write to LMDB (lmdb-js commits in call order). The key-order index is changed in the
   * same event turn as `meta`, so in the same transaction: a crash never leaves one without the other.
   */
  private applyOp(op: WriteOp): void {
    if (op.ops & OP_META_PUT) {
      void this.meta.put(op.sk, op.state.rec!);
      void this.keyOrder.add(op.sk);
    }
    if (op.ops & OP_META_DEL) {
      void this.meta.remove(op.sk);
      void this.keyOrder.drop(op.sk);
    }
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
    if (this.failed) return;
    this.failed = e;
    const msg = 'the node store failed a write; it refuses writes until restarted';
    nodeLog.error(msg, { error: e.message });
    const waiters = this.commitWaiters;
    this.commitWaiters = [];
    for (const w of waiters) w.reject(e);
  }

  /**
   * The store is closing (every write decided so far is applied, unless one failed): stops applying, and once
   * LMDB is flushed deletes the journal (nothing is left to replay). After a failed write, the journal is kept for
   * the next start to replay.
   */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.applyTimer);
    await this.applying;
    await this.env.flushed;
    if (!this.failed) void this.journal.release(this.lastSeq); // close() below waits for the disposal
    await this.journal.close();
    await this.replayCleanup;
  }
}
