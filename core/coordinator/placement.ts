import type { Entry } from '../model/entry.js';
import { HybridLogicalClock } from '../model/hlc.js';
import type { TierName } from '../tiers/tier.js';
import type { NamespacePolicy } from '../policy/namespace-settings.js';

/**
 * The cache tier above the durable ones. It is the only tier that may lose what it holds without notice (eviction,
 * a restart from an older snapshot), so it is written after the durable tiers, its copies are fenced
 * (hot-fence.ts), and it alone may hold an acknowledged write only under write-back. The one place its name is
 * spelled out.
 */
export const HOT = 'hot' satisfies TierName;

/** What placement may know about one configured tier. */
export interface TierSnapshot {
  name: TierName;
  /** Can keep write-back state (dirty entries, listed and flushed later): DirtyTracking in tiers/tier.ts. */
  dirtyTracking: boolean;
  /**
   * How full the tier is (0..1), when known. Not consulted by today's rules: it is here for the policy engine's
   * threshold rules (fill → evict, write around a full tier), which must be able to decide without I/O.
   */
  fill?: number;
  /** False when the tier is known to be down. Not consulted today: a failed write is retried or refused by the caller. */
  available?: boolean;
}

/** The parts of an entry's header placement may look at (a new write's, or a read hit's). */
export interface PlacementHeader {
  /** Value size in bytes. */
  size: number;
  tags?: readonly string[];
  /** Absolute expiry, epoch ms; null = none. */
  expiresAt?: number | null;
  /** How long ago the entry was written, in ms (0 for a write being placed); undefined when not known. */
  ageMs?: number;
}

export interface PlacementInput {
  policy: NamespacePolicy;
  header: PlacementHeader;
  /** The configured tiers, top-down (each name at most once). */
  tiers: readonly TierSnapshot[];
}

/** Where an entry goes. Every list is top-down and names only configured tiers. */
export interface Placement {
  /**
   * Tiers below hot that take the value before a write is acknowledged (each may get a location marker instead
   * when full). Empty: hot holds the only copy.
   */
  readonly durable: readonly TierName[];
  /**
   * What the hot tier gets on a write: the value, a location marker shadowing any older copy there (write-around:
   * the value is too large for hot), or nothing (no hot tier, or the namespace does not write to it).
   */
  readonly hot: 'value' | 'marker' | null;
  /**
   * Acknowledge once hot holds the value marked dirty, and flush it to `durable` later. When hot cannot take it
   * (full of dirty data, or down) the write goes through to `durable` as if this were false.
   */
  readonly writeBack: boolean;
  /** Tiers a read hit found lower down is copied into, off the request path (only those above the hit). */
  readonly promoteInto: readonly TierName[];
  /**
   * Tiers below hot that get a location marker before the write goes anywhere: writes of the key under an earlier
   * policy, or under another (tag-scoped) placement, may have left a value there that a read would find before this
   * write's durable copy, which must not outlive this write. Absent: none.
   */
  readonly shadow?: readonly TierName[];
}

/**
 * Placement: where a write of an entry goes and which tiers a read of it is promoted into. Pure (no I/O, no clock):
 * a function of the namespace policy, the entry's header and a snapshot of the tiers, so a policy engine can
 * replace or extend the rules and they can be tested without tiers.
 *
 * Today's rules: the durable tiers are the policy's write tiers below hot (see {@link namespaceDurable}). A value
 * of at least `writeAroundBytes` skips hot, which gets a location marker instead, unless hot is the only copy.
 * Write-back applies to values hot takes, when hot can track dirty entries and there is a durable tier to flush
 * to. Promotions go into the policy's write tiers, hot only for values below `writeAroundBytes` (a hit found
 * below hot already lives elsewhere, so a large one never needs hot). A tier a read consults before the write's
 * topmost durable copy but which the write does not reach (placement changed at runtime), and a tier another
 * placement of the same keys writes (a tag-scoped rule: `footprint`), gets a location marker (`shadow`; hot:
 * 'marker'), so no tier keeps an older version readers would find.
 */
export function place({ policy, header, tiers }: PlacementInput): Placement {
  const large = header.size >= policy.writeAroundBytes;
  return derived(policy, tiers)[large ? 1 : 0];
}

/**
 * What today's rules decide depends on the policy, the tiers and whether the value is large, nothing else: both
 * answers are worked out once per (policy, tiers) and shared (read-only), so a write allocates nothing here. This
 * is on every write and read hit (bench hot-path). A rule that reads more of the header must widen this cache.
 */
const cache = new WeakMap<NamespacePolicy, WeakMap<readonly TierSnapshot[], readonly [Placement, Placement]>>();

function derived(policy: NamespacePolicy, tiers: readonly TierSnapshot[]): readonly [Placement, Placement] {
  let byTiers = cache.get(policy);
  if (!byTiers) cache.set(policy, (byTiers = new WeakMap()));
  let both = byTiers.get(tiers);
  if (!both) byTiers.set(tiers, (both = [decide(policy, tiers, false), decide(policy, tiers, true)]));
  return both;
}

function decide(policy: NamespacePolicy, tiers: readonly TierSnapshot[], large: boolean): Placement {
  const hot = tiers.find((t) => t.name === HOT && writesTo(policy, HOT));
  const durable = writeDurable(policy, tiers);
  // With nowhere else to go, a large value still lands in hot.
  const around = large && durable.length > 0;
  const writeBack = !!hot && !around && policy.writeMode === 'write-back' && hot.dirtyTracking && durable.length > 0;
  const promoteInto = policy.promoteOnRead
    ? tiers.filter((t) => writesTo(policy, t.name) && !(t.name === HOT && large)).map((t) => t.name)
    : [];
  // Tiers this write does not reach may still hold an older version of the key: one an earlier policy placed there
  // (placement changes at runtime), or another placement of the same keys (a tag-scoped rule: `footprint`). A read
  // walks the tiers top-down and stops at the first copy, so every such tier the walk consults before the topmost
  // durable copy, and every tier of the footprint, is shadowed by a location marker (hot: after the durable write,
  // as write-around does; it may lose the marker, and its fence covers that).
  const footprint = policy.footprint as readonly TierName[] | undefined;
  const topDurable = durable.length ? tiers.findIndex((t) => t.name === durable[0]) : -1;
  const shadow = tiers
    .filter((t, i) => t.name !== HOT && !writesTo(policy, t.name) && (i < topDurable || !!footprint?.includes(t.name)))
    .map((t) => t.name);
  const hotMarker = !hot && durable.length > 0 && tiers.some((t) => t.name === HOT);
  const answer = {
    durable: Object.freeze(durable),
    hot: hot ? (around ? 'marker' : 'value') : hotMarker ? 'marker' : null,
    writeBack,
    promoteInto: Object.freeze(promoteInto),
    ...(shadow.length ? { shadow: Object.freeze(shadow) } : {}),
  } as const;
  return Object.freeze(answer);
}

/** The tiers below hot a write placed by `policy` reaches before it is acknowledged (write-back: when flushed). */
function writeDurable(policy: NamespacePolicy, tiers: readonly TierSnapshot[]): TierName[] {
  return tiers.filter((t) => t.name !== HOT && writesTo(policy, t.name)).map((t) => t.name);
}

/**
 * The tiers every acknowledged write of the keys `policy` reads reaches, whatever the entry: the policy's write
 * tiers below hot, narrowed to what every tag-scoped placement of those keys also writes (`readDurable`, compiled).
 * The tier walk relies on it to decide when a read's answer is certain while a tier is down (tier-walk.ts), so
 * rules that make durability depend on the entry (its tags, its size) must keep it the intersection over every
 * entry those keys may hold.
 */
export function namespaceDurable(policy: NamespacePolicy, tiers: readonly TierSnapshot[]): TierName[] {
  const only = policy.readDurable as readonly TierName[] | undefined;
  if (!only) return writeDurable(policy, tiers);
  return tiers.filter((t) => t.name !== HOT && only.includes(t.name)).map((t) => t.name);
}

function writesTo(policy: NamespacePolicy, tier: TierName): boolean {
  return (policy.writeTiers as readonly TierName[]).includes(tier);
}

/** What placement sees of an entry already written: its age comes from its version's hybrid-logical-clock stamp. */
export function placementHeader({ header, value }: Entry): PlacementHeader {
  // The size as written (header.size is the size as stored, which is value.length for every live entry).
  const size = header.encoding?.size ?? value.length;
  return { size, tags: header.tags, expiresAt: header.expiresAt, ageMs: Date.now() - HybridLogicalClock.timeOf(header.version) };
}
