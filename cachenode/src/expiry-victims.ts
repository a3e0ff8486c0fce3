/**
 * Expiry and eviction candidates of the node store: names victims for an evictor (expired entries first, found by
 * a resumable bounded scan of LMDB, then the SIEVE order; never pinned ones) and sweeps expired entries away. The
 * store itself never drops data to make room. Separate from the store because it keeps its own scan cursors and
 * only reads the store's state, removing through the store's ordinary versioned removals.
 */
import type { Database } from 'lmdb';
import { keyAfter, parseStoreKey } from '../../core/nodes/wire.js';
import { decodeMetaFixed, idOf, type Meta } from './record-codec.js';
import type { Sieve } from './sieve.js';
import type { WriteDecider } from './write-decision.js';

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

export interface ExpiryVictimsOptions {
  /** The store's `meta` database, with values read as views (see `VIEW_VALUES`). */
  metaViews: Database<Buffer, Buffer>;
  now: () => number;
  order: Sieve<string>;
  /** The version rules and overlay: a key's newest state, and whether it has expired. */
  writes: WriteDecider;
  /** The store's versioned removal (each entry only if still at the version given). */
  removeMany: (items: { sk: Buffer; version?: number | undefined }[]) => Promise<boolean[]>;
}

export class ExpiryVictims {
  private readonly metaViews: Database<Buffer, Buffer>;
  private readonly now: () => number;
  private readonly order: Sieve<string>;
  private readonly writes: WriteDecider;
  private readonly removeMany: (items: { sk: Buffer; version?: number | undefined }[]) => Promise<boolean[]>;
  private sweepCursor: Buffer | undefined;
  /** Where {@link victims} looks for expired entries next. */
  private expiryCursor: Buffer | undefined;

  constructor(opts: ExpiryVictimsOptions) {
    this.metaViews = opts.metaViews;
    this.now = opts.now;
    this.order = opts.order;
    this.writes = opts.writes;
    this.removeMany = opts.removeMany;
  }

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
      const m = this.writes.current(sk, id);
      if (!m) continue;
      const { ns, key, position } = parseStoreKey(sk);
      if (named.has(position + ns + '\u0000' + key)) continue;
      const expired = this.writes.expired(m) ? { expired: true as const } : {};
      out.push({ ns, key, version: m.version, bytes: m.bytes, position, expiresAt: m.expiresAt, ...expired });
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
      const p = this.writes.pending.get(idOf(sk));
      if (p && p.m?.version !== m.version) continue;
      const { ns, key, position } = parseStoreKey(sk);
      out.push({ ns, key, version: m.version, bytes: m.bytes, position, expiresAt: m.expiresAt, expired: true });
    }
    return out;
  }

  /** Removes up to `maxScan` keys' worth of expired entries, resuming where the last sweep stopped. */
  async sweepExpired(maxScan: number): Promise<number> {
    const { found, resume } = this.scanExpired(this.sweepCursor, maxScan);
    this.sweepCursor = resume;
    const done = await this.removeMany(found.map(({ sk, m }) => ({ sk, version: m.version })));
    return done.filter(Boolean).length;
  }

  /**
   * Expired entries among up to `maxScan` keys after `cursor` (from the start when undefined), stopping once
   * `stopAfter` are found; `resume` is where the next scan starts (undefined: this one reached the end).
   */
  private scanExpired(
    cursor: Buffer | undefined,
    maxScan: number,
    stopAfter = Number.POSITIVE_INFINITY,
  ): { found: { sk: Buffer; m: Meta }[]; resume: Buffer | undefined } {
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
}
