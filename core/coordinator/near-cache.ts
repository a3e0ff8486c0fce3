import type { Entry } from '../model/entry.js';
import { copyForTier, isLive, isStale } from '../model/entry.js';
import type { MemoryTier } from '../tiers/memory-tier.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';
import type { ReadResult } from './types.js';

/**
 * The per-container near cache (L1) in front of the tiers. Its copies are dropped `nearCache.ttlMs` after they were
 * cached, which bounds how stale a read served from another container's write can be; this container's own writes
 * and deletes replace its copy at once (a delete by a short-lived tombstone), so it always reads its own writes.
 *
 * Every copy comes with `since`, taken ({@link time}) before the tier read or write it comes from began. A copy is
 * only ever replaced by a newer version, but a newer one can leave first (expired, evicted, dropped): a read that
 * fetched v1 just before v2 was written, and fills after v2's copy expired, would otherwise put v1 back, and this
 * container would read v1 after acknowledging v2 (MemoryTier.putSync's `since` refuses it).
 */
export class NearCache {
  constructor(
    private readonly l1: MemoryTier | undefined,
    /** Counts an L1 hit (the coordinator's per-tier counters). */
    private readonly onHit: () => void,
    /**
     * Whether an invalidation covers a copy (coordinator/invalidations.ts): such a copy is never cached, and the ones
     * cached before it came are dropped when it does ({@link dropCovered}), so a hit needs no check.
     */
    private readonly covers: (ns: string, key: string, header: Entry['header']) => boolean = () => false,
  ) {
    l1?.trackLosses();
  }

  /**
   * A live copy, null for a fresh local tombstone (deleted here), undefined to go on to the tiers. `now` (wall-clock
   * ms, as Date.now) comes from the read's one clock reading (Invalidations.wallAt) and serves every expiry check
   * here: an L1 hit is short enough that each further clock read (~40 ns) shows in its cost.
   */
  get(ns: string, key: string, policy: NamespacePolicy, now = Date.now()): ReadResult | null | undefined {
    if (!this.l1 || !policy.nearCache.enabled) return undefined;
    const e = this.l1.getSync(ns, key, undefined, now);
    if (!e) return undefined;
    // A stale copy (past an origin value's TTL, coordinator/origin.ts) goes to the tiers, where its refresh starts.
    if (!e.header.flags.tombstone && (!isLive(e.header, now) || isStale(e.header, now))) return undefined;
    if (e.header.flags.tombstone) return null;
    this.onHit();
    return { entry: e, tier: 'l1' };
  }

  /** The clock `since` is read from: taken before the tier read or write whose result is then cached. */
  time(): number {
    return this.l1 ? this.l1.time() : 0;
  }

  /**
   * Caches a value just written or read, when the namespace uses L1 and the value is small enough. `since`: from
   * {@link time}, before the read or write began.
   */
  fill(ns: string, key: string, entry: Entry, policy: NamespacePolicy, since: number): void {
    if (!this.l1) return;
    // Not cached (L1 off for the namespace, too large, no room): an older copy must not stay either, or this
    // container would read it back (at once, or once a policy turns L1 back on within its ttl).
    if (!policy.nearCache.enabled || entry.value.length > policy.nearCache.maxValueBytes) return void this.l1.deleteSync(ns, key);
    this.place(this.l1, ns, key, copyForTier(entry), policy, since);
  }

  /**
   * Replaces L1's copy with a tombstone or location marker after a delete or an upload. Not gated on
   * `nearCache.enabled`: the marker is harmless when L1 is off, and no copy L1 holds can outlive the change.
   */
  shadow(ns: string, key: string, marker: Entry, policy: NamespacePolicy, since: number): void {
    if (this.l1) this.place(this.l1, ns, key, marker, policy, since);
  }

  /**
   * Drops every copy an invalidation now covers, tombstones included (an origin's negative entry then asks the
   * origin): called as the invalidations in force change, before any read checks against them.
   */
  dropCovered(): void {
    this.l1?.dropWhereSync(this.covers);
  }

  /**
   * Stores `entry`; when L1 refuses it (no room) over an older copy, that copy goes too (see {@link fill}). A copy an
   * invalidation covers is not stored: read before the invalidation came, it arrives after {@link dropCovered} ran.
   */
  private place(l1: MemoryTier, ns: string, key: string, entry: Entry, policy: NamespacePolicy, since: number): void {
    if (this.covers(ns, key, entry.header)) return void l1.deleteSync(ns, key);
    const r = l1.putSync(ns, key, entry, { maxAgeMs: policy.nearCache.ttlMs, since });
    if (!r.applied && r.current !== null && r.current < entry.header.version) l1.deleteSync(ns, key);
  }

  /** Forgets this container's copy, so the next read asks the tiers (a touch that lost to a newer write). */
  drop(ns: string, key: string): void {
    this.l1?.deleteSync(ns, key);
  }

  /** The cache as a tier, for stats and close. */
  get tier(): MemoryTier | undefined {
    return this.l1;
  }
}
