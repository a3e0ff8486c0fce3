import { permanentDetails, StrataError, TierFencedError, TierUnavailableError } from '../errors.js';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { makeLocationMarker, makeTombstone } from '../model/entry.js';
import { keyShardIndex } from '../model/keys.js';
import type { Presigning, PutOptions, Tier, TierName } from '../tiers/tier.js';
import { supportsCreateIfAbsent } from '../tiers/tier.js';
import type { HotFence } from './hot-fence.js';
import type { Placement } from './placement.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';
import type { Attempt } from './restamp.js';

/** Where an acknowledged write landed. */
export interface Written {
  /** Tiers holding the value (not those that got a location marker). */
  tiers: TierName[];
  /** False when only hot holds it: a dirty write-back copy, or a namespace with no durable tier. */
  durable: boolean;
}

/**
 * A conditional write (If-Match, If-None-Match) at a version chosen from what the precondition read: it must apply
 * in at most one of several racing writers. One tier arbitrates, written first and alone (the namespace's lowest
 * durable tier, or hot where hot is written first: write-back, or no durable tier), so the loser changes nothing;
 * written to several tiers at once, each could pick a different winner, and every writer would lose somewhere.
 */
export interface Exclusive {
  /** Also conditional on the arbiter holding no record of the key (a create of a key with none anywhere). */
  ifAbsent: boolean;
}

/** What the writer needs from the coordinator. */
export interface TierWriterDeps {
  /** Tiers top-down. */
  tiers: readonly Tier[];
  hot?: Tier;
  fence?: HotFence;
  /** The coordinator's per-tier error counters. */
  count(tier: TierName, what: 'errors'): void;
  /** A durable write's hot copy failed or its outcome is unknown (before it is fenced off). */
  hotUnknown(ns: string, error: unknown): void;
  /** A dirty (write-back) copy landed in hot: someone must flush it, whatever the settings in force by now. */
  dirtied(): void;
}

/**
 * One attempt at each kind of change (a write, a delete, an upload's commit) with one version: the tiers in the
 * order that keeps the central promise, durable ones first (the lowest before the others: see bottomUp) and hot
 * after, so that when an attempt is acknowledged no tier can still serve an older version. An attempt that a tier
 * refuses as stale resolves `{ ok: false }` for the re-stamp loop (restamp.ts); one that cannot be made safe throws.
 */
export class TierWriter {
  private readonly byName = new Map<TierName, Tier>();
  private readonly named = new WeakMap<readonly TierName[], Tier[]>();
  /** Every tier but hot: a tombstone goes to all of them, whatever the policy, before hot. */
  private readonly belowHot: Tier[];

  constructor(private readonly d: TierWriterDeps) {
    for (const t of d.tiers) this.byName.set(t.name, t);
    this.belowHot = d.tiers.filter((t) => t !== d.hot);
  }

  /** The configured tiers of these names, in order. */
  tiersNamed(names: readonly TierName[]): Tier[] {
    // Placements share their name lists (placement.ts), so each list is resolved once, not on every write.
    let tiers = this.named.get(names);
    if (!tiers) this.named.set(names, (tiers = names.map((n) => this.byName.get(n)!)));
    return tiers;
  }

  /** The hot epoch of a key's shard now (0 without a fence): taken before an attempt writes or reads anything. */
  epochOf(ns: string, key: string): number {
    return this.d.fence && this.d.hot ? this.d.fence.current()[keyShardIndex(ns, key)]! : 0;
  }

  /**
   * One attempt at a write of `entry` (already stamped) where `placement` says; `exclusive`: a conditional write,
   * arbitrated by one tier first (see {@link Exclusive}).
   */
  async write(
    ns: string,
    key: string,
    entry: Entry,
    placement: Placement,
    policy: NamespacePolicy,
    exclusive?: Exclusive,
  ): Promise<Attempt<Written>> {
    const hot = placement.hot ? this.d.hot : undefined;
    const durable = this.tiersNamed(placement.durable);
    const epoch = this.epochOf(ns, key);
    if (placement.shadow && !exclusive) {
      // Before the value goes anywhere: once acknowledged, no tier another placement of the key wrote may serve older.
      const shadowed = await this.shadow(ns, key, entry.header, this.tiersNamed(placement.shadow));
      if (!shadowed.ok) return shadowed;
    }

    if (hot && placement.writeBack) {
      const dirty = stampEpoch({ header: { ...entry.header, flags: { dirty: true } }, value: entry.value }, epoch);
      try {
        const o = await hot.put(ns, key, dirty, ifAbsent(hot, exclusive));
        if (o.applied) {
          this.d.dirtied();
          return { ok: true, value: { tiers: [hot.name], durable: false } };
        }
        if (!o.full) return { ok: false, current: o.current! };
        // No room for more dirty data: write this one through instead.
      } catch (e) {
        this.d.count(hot.name, 'errors'); // hot is down: write through to the durable tiers
        // Unless the write is conditional: a racing writer's dirty copy may be in hot, where this one cannot see it.
        if (exclusive) throw e instanceof TierUnavailableError ? e : new TierUnavailableError(hot.name, e);
      }
    }

    if (durable.length === 0) {
      // Hot is the only copy: it must take the value itself.
      if (!hot)
        throw new StrataError(
          'TIER_UNAVAILABLE',
          'the namespace writes to no configured tier',
          permanentDetails({ tier: 'none' }),
        );
      let o: WriteOutcome;
      try {
        // Stamped like every hot copy: unstamped, a fence that has raised the shard's epoch (a Redis it had not
        // seen before, a lost connection) could not vouch for it, and every read would miss this acknowledged write.
        o = await hot.put(ns, key, stampEpoch(entry, epoch), ifAbsent(hot, exclusive));
      } catch (e) {
        this.d.count(hot.name, 'errors');
        throw e instanceof TierUnavailableError ? e : new TierUnavailableError(hot.name, e);
      }
      if (o.applied) return { ok: true, value: { tiers: [hot.name], durable: false } };
      if (o.full) {
        throw new StrataError('TIER_UNAVAILABLE', 'the hot tier is full and the namespace writes to no other tier', {
          tier: hot.name,
        });
      }
      return { ok: false, current: o.current! };
    }

    let tiers: TierName[];
    if (exclusive) {
      // The arbiter first and alone: a loser is refused there and writes nothing anywhere.
      const arbiter = durable[durable.length - 1]!;
      const won = await this.putDurable(ns, key, entry, [arbiter], ifAbsent(arbiter, exclusive));
      if (!won.ok) return won;
      if (placement.shadow) {
        const shadowed = await this.shadow(ns, key, entry.header, this.tiersNamed(placement.shadow));
        if (!shadowed.ok) return shadowed;
      }
      const rest = await this.putDurable(ns, key, entry, durable.slice(0, -1));
      if (!rest.ok) return rest;
      tiers = [...rest.value, ...won.value];
    } else {
      const below = await this.putDurable(ns, key, entry, durable);
      if (!below.ok) return below;
      tiers = below.value;
    }
    if (hot) {
      const around = placement.hot === 'marker';
      const copy = around ? makeLocationMarker(entry.header.version, entry.header.expiresAt) : entry;
      const o = await this.copyToHot(ns, key, stampEpoch(copy, epoch), policy, true);
      if (o === 'applied' && !around) tiers.unshift(hot.name);
    }
    return { ok: true, value: { tiers, durable: true } };
  }

  /**
   * One attempt at a delete: a tombstone to every tier below hot first (once they hold it no reader can find the
   * old value there), then to hot. A durable tier that failed may still hold the old value: not acknowledged.
   */
  async tombstone(
    ns: string,
    key: string,
    version: number,
    policy: NamespacePolicy,
    /** An origin's 404 remembered for `ttlMs` (origin.ts, negativeTtlSeconds); absent: a delete's tombstone. */
    negative?: { ttlMs: number },
  ): Promise<Attempt<void>> {
    const { hot } = this.d;
    const below = this.belowHot;
    const epoch = this.epochOf(ns, key);
    const tomb = makeTombstone(version, negative?.ttlMs ?? policy.tombstoneTtlMs, Date.now(), !!negative);
    const results =
      below.length > 0
        ? await bottomUp(
            below,
            (t) => t.put(ns, key, tomb),
            (t, w) => this.d.count(t, w),
          )
        : [];
    if (!Array.isArray(results)) return results;
    let stale = maxStale(results);
    const failed = failedTiers(results, below);
    if (stale === null && failed.length === 0 && hot) {
      const o = await this.copyToHot(ns, key, stampEpoch(tomb, epoch), policy, below.length > 0);
      if (o === 'stale') stale = (await hot.head(ns, key).catch(() => undefined))?.version ?? version;
    }
    if (stale !== null) return { ok: false, current: stale };
    failed.forEach((n) => this.d.count(n, 'errors'));
    if (failed.length > 0) throw new TierUnavailableError(failed.join(','));
    return { ok: true, value: undefined };
  }

  /**
   * One attempt at moving an upload into place in `target` (the presigning tier) as `header.version`: durable tiers
   * above it get a location marker first, the hot tier one after the commit, so no older copy anywhere outlives
   * the ack. Resolves the committed size.
   */
  async commitUpload(
    ns: string,
    key: string,
    target: Tier & Presigning,
    uploadId: string,
    header: Omit<EntryHeader, 'size' | 'hash'>,
    policy: NamespacePolicy,
  ): Promise<Attempt<{ size: number; marker: Entry }>> {
    const { hot } = this.d;
    const upper = this.d.tiers.slice(0, this.d.tiers.indexOf(target)).filter((t) => t !== hot);
    const epoch = this.epochOf(ns, key);
    const marker = makeLocationMarker(header.version, header.expiresAt);
    const shadows = await Promise.allSettled(upper.map((t) => t.put(ns, key, marker)));
    const stale = maxStale(shadows);
    const failed = failedTiers(shadows, upper);
    if (failed.length > 0) throw new TierUnavailableError(failed.join(','));
    if (stale !== null) return { ok: false, current: stale };
    const o = await target.commitUpload(uploadId, ns, key, header);
    if (!o.applied) return { ok: false, current: o.current ?? header.version };
    // A tier skipped above counts the commit as the write's end (ring/takeover.ts).
    const late = failedTiers(shadows, upper);
    if (late.length > 0) throw new TierUnavailableError(late.join(','));
    if (hot && target !== hot) await this.copyToHot(ns, key, stampEpoch(marker, epoch), policy, true);
    return { ok: true, value: { size: o.size, marker } };
  }

  /**
   * Writes an entry to the durable tiers. A tier that refuses it for lack of room (a full cache node) gets a
   * location marker instead, which always fits and shadows any older copy there; the write stands as long as
   * another durable tier took the value, and is refused with 503 otherwise, before anything is changed. Resolves the
   * tiers that took the value.
   */
  async putDurable(ns: string, key: string, entry: Entry, durable: Tier[], opts?: PutOptions): Promise<Attempt<TierName[]>> {
    if (durable.length === 0) return { ok: true, value: [] };
    const results = await bottomUp(
      durable,
      (t) => t.put(ns, key, entry, opts),
      (t, w) => this.d.count(t, w),
    );
    if (!Array.isArray(results)) return results;
    const stale = maxStale(results);
    if (stale !== null) return { ok: false, current: stale };
    const failed = failedTiers(results, durable);
    if (failed.length > 0) {
      failed.forEach((n) => this.d.count(n, 'errors'));
      throw new TierUnavailableError(failed.join(','));
    }
    const full = durable.filter((_, i) => {
      const r = results[i]!;
      return r.status === 'fulfilled' && r.value.full;
    });
    // A tier fenced for this key (its cache node is DOWN) took nothing and serves nothing: the others must hold it.
    const took = durable.filter((_, i) => results[i]!.status === 'fulfilled' && !full.includes(durable[i]!));
    const tiers = took.map((t) => t.name);
    if (tiers.length === 0 && full.length < durable.length) {
      const fenced = durable.filter((t) => !full.includes(t)).map((t) => t.name);
      throw new StrataError(
        'TIER_UNAVAILABLE',
        `tier '${fenced.join(',')}' cannot take this key (its cache node is DOWN) and the namespace writes to no other durable tier`,
        { tier: fenced.join(','), reason: 'down' },
      );
    }
    if (full.length > 0) {
      const fullNames = full.map((t) => t.name).join(',');
      if (tiers.length === 0) {
        throw new StrataError(
          'TIER_UNAVAILABLE',
          `tier '${fullNames}' is full and the namespace writes to no other durable tier`,
          {
            tier: fullNames,
            reason: 'full',
          },
        );
      }
      const marker = makeLocationMarker(entry.header.version, entry.header.expiresAt);
      const shadows = await Promise.allSettled(full.map((t) => t.put(ns, key, marker)));
      const shadowStale = maxStale(shadows);
      if (shadowStale !== null) return { ok: false, current: shadowStale };
      const unshadowed = full.filter((_, i) => {
        const r = shadows[i]!;
        return r.status === 'rejected' || !r.value.applied;
      });
      if (unshadowed.length > 0) {
        // An older copy would stay readable there: the write is not acknowledged.
        const names = unshadowed.map((t) => t.name).join(',');
        throw new StrataError('TIER_UNAVAILABLE', `tier '${names}' is full and could not be shadowed`, {
          tier: names,
          reason: 'full',
        });
      }
    }
    return { ok: true, value: tiers };
  }

  /**
   * Location markers of `header`'s version into tiers this write does not place the value in but another write of
   * the key may have (tag-scoped placements): a tier that cannot take one fails the write, since it would keep
   * serving the older value.
   */
  private async shadow(ns: string, key: string, header: EntryHeader, tiers: Tier[]): Promise<Attempt<void>> {
    const marker = makeLocationMarker(header.version, header.expiresAt);
    const results = await Promise.allSettled(tiers.map((t) => t.put(ns, key, marker)));
    const stale = maxStale(results);
    if (stale !== null) return { ok: false, current: stale };
    const failed = failedTiers(results, tiers);
    failed.forEach((n) => this.d.count(n, 'errors'));
    if (failed.length > 0)
      throw new TierUnavailableError(
        failed.join(','),
        (results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason,
      );
    const unshadowed = tiers.filter((_, i) => {
      const r = results[i]!;
      return r.status === 'fulfilled' && !r.value.applied; // a fenced tier (rejected) serves nothing to shadow
    });
    if (unshadowed.length > 0) {
      const names = unshadowed.map((t) => t.name).join(',');
      throw new StrataError('TIER_UNAVAILABLE', `tier '${names}' is full and could not be shadowed`, {
        tier: names,
        reason: 'full',
      });
    }
    return { ok: true, value: undefined };
  }

  /**
   * Copies a durable write (value, marker or tombstone) to hot. When hot cannot take it (down, stalled, OOM, full
   * and unshadowable), the older copy it may hold is fenced off before this resolves: the caller acknowledges
   * after. 'stale': hot holds a newer version (a newer write, already durable).
   */
  private async copyToHot(
    ns: string,
    key: string,
    copy: Entry,
    policy: NamespacePolicy,
    fenceOnFailure: boolean,
  ): Promise<'applied' | 'stale' | 'fenced'> {
    const hot = this.d.hot!;
    const residency = { residencyMs: policy.hotResidencySeconds * 1000 };
    try {
      const o = await hot.put(ns, key, copy, residency);
      if (o.applied) return 'applied';
      if (!o.full) return 'stale';
      // No room for the value: a marker (never larger than the entry it replaces) shadows older copies.
      const marker = stampEpoch(makeLocationMarker(copy.header.version, copy.header.expiresAt), copy.header.hotEpoch ?? 0);
      const m = await hot.put(ns, key, marker, residency);
      if (m.applied) return 'fenced';
      if (!m.full) return 'stale';
      throw new StrataError('TIER_UNAVAILABLE', 'the hot tier has no room even for a location marker', { tier: hot.name });
    } catch (error) {
      this.d.count(hot.name, 'errors');
      if (!fenceOnFailure) throw error;
      this.d.hotUnknown(ns, error);
      const fence = this.d.fence;
      if (!fence) throw error instanceof TierUnavailableError ? error : new TierUnavailableError(hot.name, error);
      // The write is durable; hot may still serve an older copy: raise the shard's epoch for every reader.
      await fence.invalidate([keyShardIndex(ns, key)]);
      return 'fenced';
    }
  }
}

/**
 * The arbiter's condition for an exclusive write of a key with no record: only a tier that can check it atomically
 * is asked (tiers/tier.ts, CreatesIfAbsent). Elsewhere the create stays a plain versioned write at a fresh version,
 * which two creators in different processes can both make (docs/API.md says where).
 */
function ifAbsent(arbiter: Tier, exclusive: Exclusive | undefined): PutOptions | undefined {
  return exclusive?.ifAbsent && supportsCreateIfAbsent(arbiter) ? { ifAbsent: true } : undefined;
}

/** A copy for the hot tier, stamped with its shard's epoch. */
export function stampEpoch(e: Entry, epoch: number): Entry {
  return { header: { ...e.header, hotEpoch: epoch }, value: e.value };
}

/**
 * The tiers whose write failed, by name. A {@link TierFencedError} is not a failure here: the key's cache node is
 * DOWN and fenced, so that tier can serve no copy of the key, older or newer, until it is replaced (or the node
 * took the range over from one and holds nothing this old). Unless the write ended too late: a node that takes
 * the range over may then hold a version older than this one (ring/takeover.ts). Called once the others ended.
 */
function failedTiers(results: PromiseSettledResult<unknown>[], tiers: readonly Tier[]): TierName[] {
  return results.flatMap((r, i) => (r.status === 'rejected' && !skipped(r.reason) ? [tiers[i]!.name] : []));
}

/** A tier this write skipped on purpose, in time (see {@link failedTiers}). */
function skipped(reason: unknown): boolean {
  return reason instanceof TierFencedError && !reason.late();
}

/**
 * Puts to several tiers, the lowest first and alone, then the others at once. The lowest durable tier holds every
 * acknowledged version, so it is the one that knows whether this version is stale; written alongside, a tier above
 * with no record of the key (a cache node that evicted it, or took its range over) would take an older version the
 * lowest refuses, and keep serving it if the re-stamp that follows never lands (a failure, a crash). Refused or
 * failed at the bottom, nothing was written: the refusal, or a throw. Costs the upper tiers' latency (a cache
 * node's millisecond) on top of the lowest's.
 */
async function bottomUp(
  tiers: readonly Tier[],
  put: (t: Tier) => Promise<WriteOutcome>,
  count: TierWriterDeps['count'],
): Promise<PromiseSettledResult<WriteOutcome>[] | { ok: false; current: number }> {
  const lowest = tiers[tiers.length - 1]!;
  const [first] = await Promise.allSettled([put(lowest)]);
  if (tiers.length === 1) return [first!];
  const stale = maxStale([first!]);
  if (stale !== null) return { ok: false, current: stale };
  if (first!.status === 'rejected' && !skipped(first!.reason)) {
    count(lowest.name, 'errors');
    const e = first!.reason as unknown;
    throw e instanceof TierUnavailableError ? e : new TierUnavailableError(lowest.name, e);
  }
  const upper = await Promise.allSettled(tiers.slice(0, -1).map(put));
  return [...upper, first!];
}

/** The highest version a tier reported when it refused a write as stale, or null when none did. */
function maxStale(results: PromiseSettledResult<WriteOutcome>[]): number | null {
  let max: number | null = null;
  for (const r of results) {
    const refusedAsStale = r.status === 'fulfilled' && !r.value.applied && !r.value.full && r.value.current !== null;
    if (refusedAsStale) max = Math.max(max ?? 0, r.value.current!);
  }
  return max;
}
