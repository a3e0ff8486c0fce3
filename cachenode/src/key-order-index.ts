/**
 * The node store's key-order index: the `order` database, one empty record per stored key under `ns ‖ NUL ‖ key`
 * (UTF-8), which is the storage key without its 8-byte ring position. `meta` orders keys by ring position, so one
 * hash range is one contiguous scan but a namespace in key order is nowhere; this index is that order. LMDB
 * compares keys by their bytes, and UTF-8 byte order is key order (core/model/key-order.ts `compareKeys`), so a
 * page of a namespace's keys between two bounds is one range read here.
 *
 * It holds exactly the keys `meta` holds: every write that inserts or removes a `meta` record changes it in the
 * same LMDB transaction (write-decision.ts for writes queued directly, journal-apply.ts for journaled writes and
 * their replay at boot). Inserts use MDB_NOOVERWRITE: an overwrite of a key already listed (most puts, pin
 * changes) only looks the key up and dirties no page, so an apply that rewrites thousands of keys does not write
 * the index's leaves again.
 */
import type { Database, PutOptions, RootDatabase } from 'lmdb';
import {
  belowUpper,
  inKeyRange,
  lowerBound,
  mergeOrderedPages,
  pageOfUnordered,
  type OrderedKeysPage,
  type OrderedKeysQuery,
} from '../../core/model/key-order.js';
import { HASH_BYTES } from '../../core/ring/hash.js';
import { keyAfter } from '../../core/nodes/wire.js';
import { EMPTY } from './record-codec.js';
import type { PendingState } from './write-decision.js';
import { nodeLog } from './node-log.js';

/**
 * `sys` entry: the version of the index this store keeps. Absent: a data directory written before the index
 * existed (or whose build of it was cut short), built once at open.
 */
export const KEY_ORDER_STAMP = 'store.keyOrderIndex';
const KEY_ORDER_VERSION = 1;
/** Keys per transaction while building the index at open (bounds the dirty pages one transaction holds). */
const BUILD_CHUNK = 50_000;
const NO_OVERWRITE: PutOptions = { noOverwrite: true };

/** The index key of storage key `sk`: `ns ‖ NUL ‖ key`, a view of `sk` past its ring position. */
export function orderKeyOf(sk: Buffer): Buffer {
  return sk.subarray(HASH_BYTES);
}

export class KeyOrderIndex {
  /** The database's asynchronous put, with options (lmdb-js's typings list them for putSync only; it takes them). */
  private readonly putAsync: (key: Buffer, value: Buffer, options: PutOptions) => Promise<boolean>;

  constructor(
    private readonly env: RootDatabase,
    private readonly db: Database<Buffer, Buffer>,
    /** The store's overlay: writes decided but not yet committed to LMDB, by storage key (latin1). */
    private readonly pending: Map<string, PendingState>,
  ) {
    this.putAsync = db.put.bind(db) as (key: Buffer, value: Buffer, options: PutOptions) => Promise<boolean>;
  }

  /**
   * Lists the key of `sk`, queued to LMDB now: in the same transaction as the `meta` write queued in the same
   * event turn (lmdb-js batches a turn's writes into one transaction). Resolves false when it was listed already.
   */
  add(sk: Buffer): Promise<boolean> {
    return this.putAsync(orderKeyOf(sk), EMPTY, NO_OVERWRITE);
  }

  /** Unlists the key of `sk`, queued like {@link add}. */
  drop(sk: Buffer): Promise<boolean> {
    return this.db.remove(orderKeyOf(sk));
  }

  /** {@link add} inside a synchronous transaction (the journal replay at boot). */
  addSync(sk: Buffer): void {
    this.db.putSync(orderKeyOf(sk), EMPTY, NO_OVERWRITE);
  }

  /** {@link drop} inside a synchronous transaction. */
  dropSync(sk: Buffer): void {
    this.db.removeSync(orderKeyOf(sk));
  }

  /**
   * At open, after the journal replay: builds the index from `meta` when the store has none (written before it
   * existed), or when it does not hold as many keys as `meta` does. The count is checked at every open (two
   * O(1) reads) because a build from before the index may have written the directory since the index was built
   * (a rollback of a release on the same volume) and left keys out of it; a listing must never miss one. The
   * stamp goes first and comes back last, so a build cut short by a crash is done again at the next open.
   */
  ensureBuilt(meta: Database<Buffer, Buffer>, sys: Database<unknown, string>): void {
    const stamped = sys.get(KEY_ORDER_STAMP) as number | undefined;
    const metaKeys = entryCount(meta);
    const listed = entryCount(this.db);
    if (stamped === KEY_ORDER_VERSION && metaKeys === listed) return;
    const started = performance.now();
    if (stamped !== undefined) sys.removeSync(KEY_ORDER_STAMP);
    this.db.clearSync();
    let built = 0;
    let after: Buffer | undefined;
    for (;;) {
      const chunk: Buffer[] = [];
      const range = { ...(after ? { start: keyAfter(after) } : {}), limit: BUILD_CHUNK, snapshot: false };
      for (const k of meta.getKeys(range)) chunk.push(k as Buffer);
      if (chunk.length === 0) break;
      this.env.transactionSync(() => {
        for (const sk of chunk) this.addSync(sk);
      });
      built += chunk.length;
      after = chunk[chunk.length - 1];
    }
    sys.putSync(KEY_ORDER_STAMP, KEY_ORDER_VERSION);
    // A new store is stamped silently; a store that held keys says what it did (it may take a while).
    if (built === 0 && stamped === undefined) return;
    nodeLog.info('built the key-order index of the store', {
      keys: built,
      ms: Math.round(performance.now() - started),
      reason:
        stamped === undefined
          ? 'the store was written before the index existed'
          : `the index listed ${listed} keys and meta holds ${metaKeys}`,
    });
  }

  /**
   * One page of the keys of `ns` in `q` (core/model/key-order.ts `OrderedKeysPage`), keys that start with NUL (the
   * storeOnce blobs, model/keys.ts `BLOB_KEY_PREFIX`) left out: no listing asks for them.
   *
   * Journaled writes are served from the overlay until an apply puts them in LMDB (and the index), so the page
   * merges the overlay's puts into the index's page rather than calling the store's settle first: settling would
   * force an apply, and an fsync wait, on every node for every page of every listing, defeating the batching the
   * journal is for under exactly the write load listings run beside; a pass over the overlay (normally about one
   * apply interval of writes) costs less than one apply. Both are read in this one synchronous call, and a state
   * leaves the overlay only after its transaction has committed (then LMDB reads see it), so a key live for the
   * whole call is in one or the other. A key whose removal is still in the overlay may be listed: a listing may
   * name keys no longer live (KeyOrdering in core/tiers/tier.ts).
   */
  page(ns: string, q: OrderedKeysQuery): OrderedKeysPage {
    const limit = Math.max(1, Math.floor(q.limit));
    const head = Buffer.from(`${ns}\u0000`, 'utf8');
    // Every key of the namespace sorts before `ns ‖ 0x01`; the first key past the blobs is `ns ‖ NUL ‖ 0x01`.
    const end = Buffer.concat([head.subarray(0, head.length - 1), Buffer.of(1)]);
    let start: Buffer = Buffer.concat([head, Buffer.of(1)]);
    const lb = lowerBound(q);
    if (lb) {
      const at = Buffer.concat([head, Buffer.from(lb.key, 'utf8')]);
      const from = lb.inclusive ? at : keyAfter(at);
      if (Buffer.compare(from, start) > 0) start = from;
    }
    const keys: string[] = [];
    let more = false;
    for (const k of this.db.getKeys({ start, end })) {
      const key = (k as Buffer).toString('utf8', head.length);
      // Keys come in key order: past the upper bound (or the prefix), none further is in range.
      if (!belowUpper(key, q)) break;
      if (!inKeyRange(key, q)) continue;
      if (keys.length === limit) {
        more = true;
        break;
      }
      keys.push(key);
    }
    const fromOverlay = this.overlayPuts(head, q);
    if (fromOverlay.length === 0) return { keys, more };
    return mergeOrderedPages([{ keys, more }, pageOfUnordered(fromOverlay, { ...q, limit })], limit);
  }

  /** The keys of the namespace (`head` = ns ‖ NUL) in range that writes waiting in the overlay put. */
  private overlayPuts(head: Buffer, q: OrderedKeysQuery): string[] {
    const out: string[] = [];
    if (this.pending.size === 0) return out;
    // Overlay ids are storage keys read as latin1 (one char per byte): compare and cut them as bytes.
    const h = head.toString('latin1');
    for (const [id, state] of this.pending) {
      if (state.m === null || !id.startsWith(h, HASH_BYTES)) continue;
      const key = Buffer.from(id.slice(HASH_BYTES + h.length), 'latin1').toString('utf8');
      if (key.startsWith('\u0000') || !inKeyRange(key, q)) continue;
      out.push(key);
    }
    return out;
  }
}

/** Entries of one LMDB database (its B+-tree's count: no scan). */
function entryCount(db: Database<Buffer, Buffer>): number {
  return (db.getStats() as { entryCount: number }).entryCount;
}
