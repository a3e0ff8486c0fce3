import { TierFencedError } from '../errors.js';
import type { Entry } from '../model/entry.js';
import { copyForTier } from '../model/entry.js';
import type { Tier, TierName } from '../tiers/tier.js';
import { supportsConfirming } from '../tiers/tier.js';
import { copyPendingToHot } from './hot-promotion.js';
import { stampEpoch } from './tier-writer.js';

/** What a promotion needs from the coordinator. */
export interface PromoterDeps {
  /** Tiers top-down. */
  tiers: readonly Tier[];
  hot?: Tier;
  /** Runs background work whose failure is reported, never thrown (the read that found the entry is answered). */
  track(work: Promise<unknown>, what: string): void;
}

/** One read hit to copy upwards. */
export interface PromotionRequest {
  ns: string;
  key: string;
  entry: Entry;
  /** Where the walk found it (0 = the top tier: nothing above to copy into). */
  level: number;
  /** The hot epoch of the key's shard taken before the walk read anything. */
  epoch: number;
  /** The tiers placement promotes this entry into (placement.ts); only those above `level` get a copy. */
  into: readonly TierName[];
  /** The policy's hot residency, in ms (the hot copy's TTL bound). */
  residencyMs: number;
  /** Version of a clean hot copy the fence did not confirm (tier-walk.ts `staleHot`). */
  staleHot?: number;
}

/**
 * Read promotions: a hit found below the top is copied into the tiers above it that placement names, off the
 * request path. Every copy is a versioned put, so a promotion never replaces a newer write; the hot copy goes in
 * pending and is confirmed against the tiers it came through (hot-promotion.ts), and carries the epoch taken before
 * the walk read anything, so if a write's hot copy failed meanwhile, its bump makes this one stale too.
 */
export class Promoter {
  private done = 0;

  constructor(private readonly d: PromoterDeps) {}

  /** Promotions that placed at least one copy. */
  get promotions(): number {
    return this.done;
  }

  promote(r: PromotionRequest): void {
    const upper = this.d.tiers.slice(0, r.level).filter((t) => r.into.includes(t.name));
    if (upper.length === 0) return;
    const entry = copyForTier(r.entry);
    const copies = upper.map((t) =>
      t === this.d.hot ? this.toHot(t, r, entry) : t.put(r.ns, r.key, entry).then((o) => o.applied, notPlaced),
    );
    this.d.track(
      Promise.all(copies).then((applied) => {
        if (applied.includes(true)) this.done++;
      }),
      'promotion',
    );
  }

  private async toHot(hot: Tier, r: PromotionRequest, entry: Entry): Promise<boolean> {
    const { ns, key, residencyMs, staleHot } = r;
    // Equal versions never replace each other: a fenced-off copy of this very version is removed first (only
    // that exact version, so a newer write landing meanwhile stays).
    if (staleHot === entry.header.version) await hot.delete(ns, key, staleHot);
    const copy = stampEpoch(entry, r.epoch);
    if (!supportsConfirming(hot)) return (await hot.put(ns, key, copy, { residencyMs })).applied;
    return (await copyPendingToHot(hot, ns, key, copy, this.d.tiers.slice(1, r.level + 1), residencyMs)).result === 'confirmed';
  }
}

/**
 * A copy a tier skipped on purpose (its cache node is DOWN, or took the range over after this version was written:
 * ring/takeover.ts) is simply not placed; anything else is the background error it was.
 */
function notPlaced(e: unknown): false {
  if (e instanceof TierFencedError) return false;
  throw e;
}
