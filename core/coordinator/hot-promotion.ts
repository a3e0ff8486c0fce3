import type { Entry } from '../model/entry.js';
import type { Confirming, Tier, TierName } from '../tiers/tier.js';

/** What a pending copy into the hot tier came to. */
export type PendingCopyOutcome =
  | { result: 'confirmed' }
  /** The hot tier has no room for it. */
  | { result: 'full' }
  /** `tier` holds a newer version (`version`): the copy was not made servable. */
  | { result: 'newer'; tier: TierName; version: number }
  /** The tier it was read from no longer holds that version (removed, expired or replaced by a delete). */
  | { result: 'changed'; tier: TierName };

/**
 * Copies an entry read from a lower tier into the hot tier (a promotion, or tier migration's promote) without ever
 * letting an older version shadow a newer one. The copy is stored pending (EntryFlags.pending: never served) and
 * confirmed only while the tiers below, down to the one it was read from, still hold its version as the newest.
 * Otherwise a write that landed after the read, and whose own hot copy was evicted since, would be hidden by it
 * (a versioned put accepts an absent key). A copy that is not confirmed is removed (that exact version only).
 *
 * `below`: the tiers between hot and the source, the source last. `residencyMs`: the hot copy's TTL bound.
 */
export async function copyPendingToHot(
  hot: Tier & Confirming,
  ns: string,
  key: string,
  entry: Entry,
  below: readonly Tier[],
  residencyMs: number,
): Promise<PendingCopyOutcome> {
  const version = entry.header.version;
  const pending: Entry = { header: { ...entry.header, flags: { ...entry.header.flags, pending: true } }, value: entry.value };
  const o = await hot.put(ns, key, pending, { residencyMs });
  if (!o.applied && o.full) return { result: 'full' };
  // Refused as stale: a newer version is there, or this very one (pending from an earlier try, confirmed below).
  if (!o.applied && o.current !== null && o.current !== version) return { result: 'newer', tier: hot.name, version: o.current };
  for (let i = 0; i < below.length; i++) {
    const t = below[i]!;
    const h = await t.head(ns, key);
    let outcome: PendingCopyOutcome | undefined;
    if (h && h.version > version) outcome = { result: 'newer', tier: t.name, version: h.version };
    else if (i === below.length - 1 && (h?.version !== version || h.flags.tombstone))
      outcome = { result: 'changed', tier: t.name };
    if (outcome) {
      await hot.delete(ns, key, version);
      return outcome;
    }
  }
  await hot.confirm(ns, key, version);
  return { result: 'confirmed' };
}
