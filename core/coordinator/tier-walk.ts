import { TierUnavailableError } from '../errors.js';
import { mapLimit } from '../util/concurrency.js';
import type { Entry, EntryHeader } from '../model/entry.js';
import { isLive } from '../model/entry.js';
import { keyShardIndex } from '../model/keys.js';
import type { Tier, TierName } from '../tiers/tier.js';
import type { HotFence } from './hot-fence.js';
import type { NearCache } from './near-cache.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';
import type { ReadResult } from './types.js';

/** What the tier walk found for one key. */
export interface Walked<H> {
  hit?: { item: H; level: number; tier: TierName };
  /** A tombstone ended the walk: the key is deleted. */
  deleted: boolean;
  /** The tombstone that ended the walk is an origin's remembered 404 (flags.negative), not a delete. */
  negative?: boolean;
  /** The walk found an entry an invalidation covers: a miss (an origin is asked as for any miss). */
  invalidated?: boolean;
  /**
   * The header of what ended the walk, live or not: the hit, the tombstone, or an entry an invalidation covers
   * (what an exclusive create builds its version on; undefined: no tier holds a record of the key).
   */
  record?: EntryHeader;
  /** The tier whose answer ended the walk (a hit or a tombstone); undefined: every tier missed or failed. */
  at?: TierName;
  /** Tiers that could not answer before the walk ended. */
  failed: TierName[];
  /** Why the first of them could not (the cause a 503 carries into the log, never into the answer). */
  error?: unknown;
  /** Tiers that answered (a miss included) before the walk ended. */
  answered: TierName[];
  /** A dirty hot copy the fence could not confirm: the newest version unless a lower tier holds a newer one. */
  candidate?: { item: H; level: number; tier: TierName };
  /** The hot epochs taken before anything was read (a promotion is stamped with its shard's). */
  epochs?: readonly number[];
  /** Version of a clean hot copy the fence did not confirm (a promotion of that same version replaces it). */
  staleHot?: number;
}

/** Reads entries or headers of some keys from one tier (undefined where it holds none). */
export type TierRead<H> = (t: Tier, ns: string, keys: string[]) => Promise<(H | undefined)[]>;

/** What a lookup found for one key: L1's own answer (a copy, or null for a local tombstone), or the tier walk's. */
export type Found<H> = { near: ReadResult | null } | { walked: Walked<H> };

/** What the walk needs from the coordinator. */
export interface TierWalkDeps {
  /** The per-container near cache, asked before any tier. */
  near: NearCache;
  /** Tiers top-down. */
  tiers: readonly Tier[];
  hot?: Tier;
  fence?: HotFence;
  /** The coordinator's per-tier counters. */
  count(tier: TierName, what: 'hits' | 'misses' | 'errors'): void;
  /** A version seen (the hybrid logical clock). */
  observe(version: number): void;
  /** The durable tiers every acknowledged write of the namespace reaches. */
  durableTargets(policy: NamespacePolicy): Tier[];
  /** Whether an invalidation covers what a walk found (coordinator/invalidations.ts). */
  covers(ns: string, key: string, header: EntryHeader): boolean;
}

/**
 * The coordinator's reads: one lookup (L1, then one walk over the tiers) for get, head, getMany and preconditions,
 * and one rule for when its answer may be given while a tier failed.
 */
export class TierWalk {
  constructor(private readonly d: TierWalkDeps) {}

  /**
   * The start of every read (get, getMany, head, preconditions): L1 first, then one {@link walk} for the keys L1 did
   * not settle.
   */
  async lookup<H>(
    ns: string,
    keys: string[],
    policy: NamespacePolicy,
    read: TierRead<H>,
    headerOf: (item: H) => EntryHeader,
  ): Promise<Found<H>[]> {
    const found: Found<H>[] = new Array(keys.length);
    const pending: number[] = [];
    keys.forEach((k, i) => {
      const near = this.d.near.get(ns, k, policy);
      if (near === undefined) pending.push(i);
      else found[i] = { near };
    });
    if (pending.length > 0) {
      const walked = await this.walk(
        ns,
        pending.map((i) => keys[i]!),
        read,
        headerOf,
        policy.readTiers,
      );
      pending.forEach((i, j) => (found[i] = { walked: walked[j]! }));
    }
    return found;
  }

  /**
   * The one tier walk behind get, head, getMany and preconditions: each tier in turn, for the keys no tier above
   * has settled. `read` fetches entries or headers of some keys from one tier. `only`: a retrieve rule's tiers
   * (top-down, checked when compiled); the others are not read. A hit's `level` is its tier's place among all tiers.
   */
  async walk<H>(
    ns: string,
    keys: string[],
    read: TierRead<H>,
    headerOf: (item: H) => EntryHeader,
    only?: readonly TierName[],
  ): Promise<Walked<H>[]> {
    const hot = this.d.hot && (!only || only.includes(this.d.hot.name)) ? this.d.hot : undefined;
    const fence = hot ? this.d.fence : undefined;
    let view = fence?.readerView() ?? null;
    if (view instanceof Promise) {
      await view;
      view = fence!.readerView();
      if (view instanceof Promise) view = null;
    }
    // Taken before anything is read: the epochs a promotion of what this walk finds is stamped with.
    const epochs = view ?? fence?.current();
    const out: Walked<H>[] = keys.map(() => ({ deleted: false, failed: [], answered: [], epochs }));
    let pending = keys.map((_, i) => i);
    for (let level = 0; level < this.d.tiers.length && pending.length > 0; level++) {
      const tier = this.d.tiers[level]!;
      if (only && !only.includes(tier.name)) continue;
      let found: (H | undefined)[];
      try {
        found = await read(tier, ns, pending.length === keys.length ? keys : pending.map((i) => keys[i]!));
      } catch (e) {
        this.d.count(tier.name, 'errors');
        for (const i of pending) {
          out[i]!.failed.push(tier.name);
          out[i]!.error ??= e;
        }
        continue;
      }
      const next: number[] = [];
      pending.forEach((i, j) => {
        const w = out[i]!;
        w.answered.push(tier.name);
        const item = found[j];
        const h = item === undefined ? undefined : headerOf(item);
        if (
          h &&
          tier === hot &&
          (h.flags.pending || (fence && !(view && (h.hotEpoch ?? 0) >= view[keyShardIndex(ns, keys[i]!)]!)))
        ) {
          // Not confirmed by the fence: a clean copy may be older than an acknowledged write and is skipped; a
          // dirty one is the newest unless a lower tier proves otherwise.
          if (h.flags.dirty && isLive(h)) w.candidate = { item: item!, level, tier: tier.name };
          else if (!h.flags.pending) w.staleHot = h.version;
          this.d.count(tier.name, 'misses');
          next.push(i);
          return;
        }
        const cand = w.candidate && headerOf(w.candidate.item).version;
        w.at = tier.name;
        // A marker or a miss goes on down: what a lower tier holds is the record (the marker is, if none does).
        if (h) w.record = cand !== undefined && cand > h.version ? headerOf(w.candidate!.item) : h;
        if (h?.flags.tombstone) {
          if (cand !== undefined && cand > h.version) w.hit = w.candidate;
          // A tombstone an invalidation covers (a delete's, or an origin's negative entry) is a miss like a covered
          // value: the origin is asked again.
          else if (this.d.covers(ns, keys[i]!, h)) w.invalidated = true;
          else {
            w.deleted = true;
            if (h.flags.negative) w.negative = true;
          }
        } else if (h && isLive(h)) {
          w.hit = cand !== undefined && cand > h.version ? w.candidate : { item: item!, level, tier: tier.name };
          this.d.observe(h.version);
        } else {
          w.at = undefined;
          this.d.count(tier.name, 'misses');
          next.push(i);
          return;
        }
        if (w.hit) this.d.count(w.hit.tier, 'hits');
        else this.d.count(tier.name, 'misses');
      });
      pending = next;
    }
    for (const i of pending) {
      const w = out[i]!;
      if (w.candidate) {
        w.hit = w.candidate;
        w.record = headerOf(w.candidate.item);
        this.d.count(w.candidate.tier, 'hits');
      }
    }
    // Checked on the answer, wherever it came from: what a walk finds is the newest version, so a covered one
    // means the key is missing (an older version in a lower tier is covered too).
    out.forEach((w, i) => {
      if (w.hit && this.d.covers(ns, keys[i]!, headerOf(w.hit.item))) {
        w.hit = undefined;
        w.invalidated = true;
      }
    });
    return out;
  }

  /**
   * Whether a walk's answer (a hit, a tombstone or a miss) may be given while some tier above it failed. It is sure
   * when it comes from a tier that every acknowledged write of the namespace reaches (a durable target, or a hot
   * copy the fence confirmed), for a miss when such a tier answered, or when no failed tier might hold a newer
   * version: a failed hot tier counts only where hot can lead the durable tiers (write-back, or no durable tier).
   * Otherwise get, head, getMany and preconditions all answer 503.
   */
  certain(w: Walked<unknown>, policy: NamespacePolicy): boolean {
    if (w.failed.length === 0) return true;
    const durable = this.d.durableTargets(policy);
    const reachedByAll = (n: TierName) => durable.some((t) => t.name === n);
    const hot = this.d.hot?.name;
    if (w.at !== undefined ? w.at === hot || reachedByAll(w.at) : w.answered.some(reachedByAll)) return true;
    return w.failed.every((n) => n === hot && !this.hotMayLead(policy));
  }

  assertCertain(w: Walked<unknown>, policy: NamespacePolicy): void {
    if (!this.certain(w, policy)) throw new TierUnavailableError(w.failed.join(','), w.error);
  }

  /** Whether the hot tier may hold a version no durable tier has (write-back, or a namespace with no durable tier). */
  private hotMayLead(policy: NamespacePolicy): boolean {
    return policy.writeMode === 'write-back' || !!policy.readHotMayLead || this.d.durableTargets(policy).length === 0;
  }
}

export function readOne(t: Tier, ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
  return t.get(ns, keys[0]!).then((e) => [e]);
}

export function readMany(t: Tier, ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
  return t.getMany(ns, keys);
}

export function headOne(t: Tier, ns: string, keys: string[]): Promise<(EntryHeader | undefined)[]> {
  return t.head(ns, keys[0]!).then((h) => [h]);
}

/** Headers of a batch of keys, a few at a time (tiers have no batched HEAD). */
export function headMany(t: Tier, ns: string, keys: string[]): Promise<(EntryHeader | undefined)[]> {
  return mapLimit(keys, 16, (k) => t.head(ns, k));
}

export function entryHeader(e: Entry): EntryHeader {
  return e.header;
}
