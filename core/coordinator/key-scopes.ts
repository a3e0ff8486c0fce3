import type { NamespacePolicy } from '../policy/namespace-settings.js';
import type { TierName } from '../tiers/tier.js';

/**
 * Reads of a namespace whose keys take different policies (scoped placement and retrieve rules: PolicyRegistry's
 * key classes). A namespace without them never comes here: its reads take one policy, as they always did.
 */

/**
 * Runs `lookup` once per distinct policy over the keys that take it (one tier walk per class, each over its own
 * tiers), and gives back the answers in the order of `keys`.
 */
export async function lookupByPolicy<F>(
  keys: readonly string[],
  policies: readonly NamespacePolicy[],
  lookup: (keys: string[], policy: NamespacePolicy) => Promise<F[]>,
): Promise<F[]> {
  const groups = new Map<NamespacePolicy, number[]>();
  policies.forEach((p, i) => {
    const g = groups.get(p);
    if (g) g.push(i);
    else groups.set(p, [i]);
  });
  const out: F[] = new Array(keys.length);
  await Promise.all(
    [...groups].map(async ([policy, at]) => {
      const found = await lookup(
        at.map((i) => keys[i]!),
        policy,
      );
      at.forEach((i, j) => (out[i] = found[j]!));
    }),
  );
  return out;
}

/**
 * The tiers a read hit is promoted into: those the entry's placement names, and of them only those the read's
 * retrieve rule lists (a retrieve that skips hot does not fill hot).
 */
export function promotionTargets(into: readonly TierName[], read: NamespacePolicy): readonly TierName[] {
  const only = read.readTiers as readonly TierName[] | undefined;
  return only ? into.filter((t) => only.includes(t)) : into;
}
