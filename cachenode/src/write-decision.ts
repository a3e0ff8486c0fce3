/**
 * The version rules of the node store and the overlay they decide against: whether a put, removal or pin change
 * applies (a put only over an older or expired version, and only within capacity), decided on the main thread
 * against the newest state of the key, committed in LMDB or still queued (`pending`), and how a decided write
 * travels (journaled or queued to LMDB directly). Separate from the store so the rules that keep writes ordered
 * read in one place, apart from how the journal applies them and how the store is read.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Entry, WriteOutcome } from '../../core/model/entry.js';
import { decodeHeader } from '../../core/model/entry.js';
import type { JournalApplier, WriteOp } from './journal-apply.js';
import type { KeyOrderIndex } from './key-order-index.js';
import {
  decodeMetaFixed,
  encodeRecord,
  idOf,
  INLINE_VALUE_MAX_BYTES,
  inlineValueAt,
  journalRecord,
  metaHeaderJson,
  OP_DATA_DEL,
  OP_DATA_PUT,
  OP_META_DEL,
  OP_META_PUT,
  type Meta,
  type RecordParts,
} from './record-codec.js';
import type { Sieve } from './sieve.js';

/** Bookkeeping per entry in the accounting (B+-tree slots in two databases, overlay and SIEVE node). */
export const ENTRY_OVERHEAD_BYTES = 96;

/** A key's newest state while a write of it waits for LMDB. */
export interface PendingState {
  /** null: removed. */
  m: Meta | null;
  /** Journaled writes: the record as it will be stored in `meta` (puts; reads are served from it). */
  rec?: Buffer;
  /** Journaled puts of external values: the value as it will be stored in `data`. */
  value?: Buffer;
  /** Written through the journal (else queued to LMDB directly). */
  journaled: boolean;
}

/** The writes of one call queued to LMDB directly: their commit promises and overlay states. */
export interface Direct {
  commits: Set<Promise<unknown>>;
  queued: { id: string; state: PendingState }[];
}

function noop(): void {}

export interface WriteDeciderOptions {
  env: RootDatabase;
  meta: Database<Buffer, Buffer>;
  data: Database<Buffer, Buffer>;
  /** The key-order index: a direct write lists its key in the transaction of its `meta` record. */
  keyOrder: KeyOrderIndex;
  sync: 'flush' | 'commit';
  now: () => number;
  capacityBytes: number;
  /** Writes decided but not yet committed to LMDB: the newest state of their keys (shared with the applier). */
  pending: Map<string, PendingState>;
  applier: JournalApplier;
  order: Sieve<string>;
  /** The store's access clock (whole seconds since it opened): when a key enters the SIEVE order. */
  accessSecond: () => number;
  /** Books `keys` and `bytes` (either may be negative) for storage key `sk` (the store's totals and histogram). */
  account: (sk: Uint8Array, keys: number, bytes: number) => void;
  /** Accounted bytes of the store now. */
  accounted: () => number;
}

export class WriteDecider {
  private readonly env: RootDatabase;
  private readonly meta: Database<Buffer, Buffer>;
  private readonly data: Database<Buffer, Buffer>;
  private readonly keyOrder: KeyOrderIndex;
  private readonly sync: 'flush' | 'commit';
  private readonly now: () => number;
  private readonly capacityBytes: number;
  /** Writes decided but not yet committed to LMDB: the newest state of their keys. */
  readonly pending: Map<string, PendingState>;
  private readonly applier: JournalApplier;
  private readonly order: Sieve<string>;
  private readonly accessSecond: () => number;
  private readonly account: (sk: Uint8Array, keys: number, bytes: number) => void;
  private readonly accounted: () => number;

  constructor(opts: WriteDeciderOptions) {
    this.env = opts.env;
    this.meta = opts.meta;
    this.data = opts.data;
    this.keyOrder = opts.keyOrder;
    this.sync = opts.sync;
    this.now = opts.now;
    this.capacityBytes = opts.capacityBytes;
    this.pending = opts.pending;
    this.applier = opts.applier;
    this.order = opts.order;
    this.accessSecond = opts.accessSecond;
    this.account = opts.account;
    this.accounted = opts.accounted;
  }

  expired(m: Pick<Meta, 'expiresAt'>): boolean {
    return m.expiresAt !== null && m.expiresAt <= this.now();
  }

  /**
   * A journaled write of the key that LMDB does not hold yet: reads are answered from it (its record; undefined
   * when it removed the key). Writes queued to LMDB directly are read from LMDB once committed, as before.
   */
  journaledState(sk: Buffer): PendingState | undefined {
    if (!this.applier.busy) return undefined;
    const p = this.pending.get(idOf(sk));
    return p?.journaled ? p : undefined;
  }

  /** The newest state of a key, queued writes included. */
  current(sk: Buffer, id: string): Meta | null {
    const p = this.pending.get(id);
    return p !== undefined ? p.m : this.committedMeta(sk);
  }

  /** The state of a key in LMDB. */
  private committedMeta(sk: Buffer): Meta | null {
    // Fixed fields only: LMDB's reused read buffer, not a copy of the record (value included when inline).
    const mb = this.meta.getBinaryFast(sk);
    return mb ? decodeMetaFixed(mb) : null;
  }

  /** Decides one write and, when it applies, adds it to `journaled` or `direct` (and to the overlay). */
  decidePut(
    sk: Buffer,
    id: string,
    entry: Entry,
    headerJson: string | undefined,
    bulk: boolean,
    journaled: WriteOp[],
    direct: Direct,
    ifAbsent = false,
  ): WriteOutcome {
    const prev = this.pending.get(id);
    const cur = prev !== undefined ? prev.m : this.committedMeta(sk);
    const live = cur !== null && !this.expired(cur);
    // An exclusive create (ifAbsent) is refused by any live record of the key, older or not: a value, a tombstone or
    // a location marker (the coordinator's createVersion found none, so one that is here now was written since).
    if (live && (ifAbsent || cur.version >= entry.header.version)) return { applied: false, current: cur.version };
    const json = headerJson ?? JSON.stringify(entry.header);
    const bytes = sk.length + Buffer.byteLength(json) + entry.value.length + ENTRY_OVERHEAD_BYTES;
    const before = cur?.bytes ?? 0;
    const grows = bytes > before;
    const small = entry.value.length === 0; // tombstones and location markers always fit
    if (grows && !small && this.accounted() - before + bytes > this.capacityBytes) {
      return { applied: false, current: live ? cur.version : null, full: true };
    }
    const inline = entry.value.length <= INLINE_VALUE_MAX_BYTES;
    const m: Meta = { version: entry.header.version, expiresAt: entry.header.expiresAt, bytes, external: !inline };
    this.account(sk, cur === null ? 1 : 0, bytes - before);
    // A key that arrives (written, promoted, migrated in) counts as accessed now: never idle since before it came.
    if (entry.header.flags.pinned) this.order.remove(id);
    else this.order.insert(id, this.accessSecond());
    const dataOps = inline ? (cur?.external ? OP_DATA_DEL : 0) : OP_DATA_PUT;
    if ((inline && !bulk) || prev?.journaled) {
      // A large value (or a bulk write) behind a journaled write of the same key is journaled too, so it reaches
      // LMDB after it. Either way the record (and value) are copied into the journal record: the caller's buffer
      // may be a pooled request body, reused once this is acknowledged.
      const record = { m, headerJson: json, value: inline ? entry.value : undefined };
      journaled.push(this.decided(sk, id, OP_META_PUT | dataOps, m, record, inline ? undefined : entry.value));
    } else {
      const state: PendingState = { m, journaled: false };
      this.pending.set(id, state);
      direct.queued.push({ id, state });
      // The header, the value and the key's place in the key-order index are queued in the same event turn, so
      // lmdb-js commits them in one transaction (its default `eventTurnBatching`; nothing here uses the
      // synchronous transactions that could split a batch): a crash or a reader never sees one without the other.
      direct.commits.add(this.meta.put(sk, encodeRecord({ m, headerJson: json, value: inline ? entry.value : undefined })));
      direct.commits.add(this.keyOrder.add(sk));
      if (!inline) direct.commits.add(this.data.put(sk, entry.value));
      else if (cur?.external) direct.commits.add(this.data.remove(sk));
    }
    return { applied: true, current: m.version };
  }

  /**
   * Decides the removal of the entry if its version is `version` (any when undefined): its journaled write, or
   * undefined when the key is absent or holds another version.
   */
  decideRemove(sk: Buffer, version: number | undefined): WriteOp | undefined {
    const id = idOf(sk);
    const cur = this.current(sk, id);
    if (cur === null || (version !== undefined && cur.version !== version)) return undefined;
    this.account(sk, -1, -cur.bytes);
    this.order.remove(id);
    return this.decided(sk, id, OP_META_DEL | (cur.external ? OP_DATA_DEL : 0), null);
  }

  /**
   * Decides setting or clearing the pinned flag of the committed record `mb` if it is exactly `version` (not
   * expired): its journaled write (the record rewritten whole with the new header), or whether the entry already
   * has the requested flag (true) or is not that version (false). A pinned entry leaves the SIEVE order, an
   * unpinned one re-enters it at the newest end.
   */
  decidePin(sk: Buffer, id: string, mb: Buffer, version: number, pinned: boolean): WriteOp | boolean {
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
    const op = this.decided(sk, id, OP_META_PUT, nm, {
      m: nm,
      headerJson: json,
      value: at === undefined ? undefined : mb.subarray(at),
    });
    this.account(sk, 0, nm.bytes - m.bytes);
    if (pinned) this.order.remove(id);
    else this.order.insert(id, this.accessSecond());
    return op;
  }

  /**
   * A decided journaled write (`m` null: a removal): its journal record, and its state, now the key's newest (the
   * overlay). {@link JournalApplier.submit} journals it.
   */
  private decided(sk: Buffer, id: string, ops: number, m: Meta | null, record?: RecordParts, external?: Buffer): WriteOp {
    const { framed, rec, value } = journalRecord(sk, ops, record, external);
    const state: PendingState = { m, rec, value, journaled: true };
    this.pending.set(id, state);
    return { sk, id, ops, state, framed, seq: 0 };
  }

  /** Resolves once the decided writes are durable: journaled ones in the journal, direct ones in LMDB. */
  afterDecided(journaled: WriteOp[], direct: Direct): Promise<void> {
    const j = journaled.length > 0 ? this.applier.submit(journaled) : undefined;
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
}
