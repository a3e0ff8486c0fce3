// The coordinator's public vocabulary: what callers pass in and get back (re-exported by coordinator.ts, which
// callers import; the coordinator's parts import it from here, so none of them depends on the class).
import type { Entry, EntryHeader } from '../model/entry.js';
import type { HybridLogicalClock } from '../model/hlc.js';
import type { MemoryTier } from '../tiers/memory-tier.js';
import type { Tier, TierName } from '../tiers/tier.js';
import type { FenceEvent, HotFence } from './hot-fence.js';
import type { LambdaInvoke } from './lambda-origin.js';
import type { InvalidationEvent, Invalidations, InvalidationsOptions } from './invalidations.js';
import type { PolicyRegistry } from '../policy/namespace-settings.js';
import type { ValueCodec } from '../transforms/codec.js';

export interface CoordinatorOptions {
  /** Tiers top-down (hot, warm, cold); each name at most once. */
  tiers: Tier[];
  /** Per-container near cache (L1), consulted before the hot tier. */
  nearCache?: MemoryTier;
  policies?: PolicyRegistry;
  clock?: HybridLogicalClock;
  /** Reports failures of background work (promotions, flushes); they never fail a request. */
  onBackgroundError?: (error: unknown, what: string) => void;
  /** Start the write-back flush timer (off for Lambda, which flushes at the end of an invocation). @default true */
  flushTimer?: boolean;
  /**
   * Fencing of hot copies (coordinator/hot-fence.ts): a fence, its lease, or false. @default a fence with a
   * 2000 ms lease, kept in the lowest tier, whenever there is a hot tier above a durable one
   */
  hotFence?: HotFence | { leaseMs?: number } | false;
  /**
   * Compresses and encrypts values where the policy's foreground rules say so, and undoes it on reads
   * (transforms/codec.ts); holds the keyring. @default a codec without a keyring (encrypt rules fail KEY_UNAVAILABLE)
   */
  codec?: ValueCodec;
  /**
   * Tag, prefix and namespace invalidations (coordinator/invalidations.ts): an instance, or its lease and clock-skew
   * bound. @default a 1000 ms lease and a 2000 ms skew bound, the document kept in the lowest tier
   */
  invalidations?: Invalidations | Pick<InvalidationsOptions, 'leaseMs' | 'maxClockSkewMs' | 'now'>;
  /**
   * Sends a Lambda origin's Invoke (coordinator/lambda-origin.ts), built with the AWS SDK in the composition root
   * (composition/lambda-origins.ts). @default none: a policy's Lambda origin fails ORIGIN_FAILED
   */
  invokeLambda?: LambdaInvoke;
  /** What the coordinator did on its own (fence bumps, hot copies whose outcome was unknown): metrics and logs. */
  onEvent?: (event: CoordinatorEvent) => void;
}

export type CoordinatorEvent =
  | FenceEvent
  | InvalidationEvent
  /** A write acknowledged from the durable tiers whose hot copy failed or whose outcome was unknown (fenced first). */
  | { type: 'hot-copy-unknown'; ns: string; error: unknown }
  /** Dirty write-back entries found gone (evicted or expired) before their flush: acknowledged writes lost. */
  | { type: 'write-back-lost'; count: number };

export type ServedBy = TierName | 'origin';

export interface ReadResult {
  entry: Entry;
  tier: ServedBy;
  /**
   * The value was stored compressed or encrypted and is given back as written: it has no presigned URL (its stored
   * bytes are not the value), so the API serves it inline.
   */
  transformed?: boolean;
}

/** An entry's header without its value (head), as {@link ReadResult} describes it. */
export interface HeadResult {
  header: EntryHeader;
  tier: ServedBy;
  transformed?: boolean;
}

export interface WriteOptions {
  /** Seconds to live; null = no expiry; undefined = the namespace default. */
  ttlSeconds?: number | null;
  tags?: string[];
  contentType?: string;
  /** Apply only if the current version is exactly this one, or ('*') only if the key exists. */
  ifMatch?: number | '*';
  /** Apply only if the key does not exist. */
  ifNoneMatch?: boolean;
}

export interface WriteResult {
  version: number;
  expiresAt: number | null;
  size: number;
  tiers: TierName[];
  /**
   * False when the write is acknowledged from the hot tier alone (write-back) and not yet flushed to a durable
   * tier: it is lost if the hot tier loses it first (docs/API.md, "Write-back").
   */
  durable: boolean;
  /** Concurrent writers in other processes got newer versions in first; theirs is what readers see. */
  superseded?: boolean;
}

export interface DeleteResult {
  version: number;
}
