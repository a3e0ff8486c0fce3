import type { Entry, EntryHeader } from '../model/entry.js';
import { copyForTier, isStale } from '../model/entry.js';
import { HybridLogicalClock } from '../model/hlc.js';
import { keyShardIndex } from '../model/keys.js';
import type { Tier, TierName } from '../tiers/tier.js';
import { supportsDirtyTracking } from '../tiers/tier.js';
import { mapLimit } from '../util/concurrency.js';
import { tierHealth, TierCounters, tierReports, type Health, type TierCounts, type TierReport } from './tier-report.js';
import { hotFenceFor, type HotFence } from './hot-fence.js';
import {
  Invalidations,
  tierInvalidationRegister,
  type InvalidationRecord,
  type InvalidationResult,
  type InvalidationScope,
} from './invalidations.js';
import { KeyedMutex } from './keyed-mutex.js';
import { lookupByPolicy, promotionTargets } from './key-scopes.js';
import { OriginLoader } from './origin.js';
import {
  HOT,
  namespaceDurable,
  place,
  placementHeader,
  type Placement,
  type PlacementHeader,
  type TierSnapshot,
} from './placement.js';
import { NearCache } from './near-cache.js';
import { PolicyRegistry, type NamespacePolicy } from '../policy/namespace-settings.js';
import { ValueCodec } from '../transforms/codec.js';
import { headResult, StoredValues } from './stored-values.js';
import { Promoter } from './promotion.js';
import { entryHeader, headMany, headOne, readMany, readOne, TierWalk, type TierRead, type Walked } from './tier-walk.js';
import { listKeys, type KeyListing, type ListKeysOptions } from './key-listing.js';
import { SystemSecrets } from './system-secret.js';
import { TierWriter } from './tier-writer.js';
import { KeyWrites } from './writes.js';
import type {
  CoordinatorEvent,
  CoordinatorOptions,
  DeleteResult,
  HeadResult,
  ReadResult,
  ServedBy,
  WriteOptions,
  WriteResult,
} from './types.js';
import { WriteBackFlusher } from './write-back.js';
import { log } from '../util/logger.js';

export { TOUCH_ATTEMPTS } from './writes.js';

/**
 * Routes reads and writes over the ordered tiers by namespace policy, and composes the parts that live beside it:
 * placement.ts decides where an entry goes, tier-walk.ts reads, writes.ts stamps and conditions writes, tier-writer.ts
 * makes one attempt at a change, restamp.ts retries a change that lost to a newer version, write-back.ts flushes
 * dirty hot entries, hot-fence.ts fences hot copies. This file keeps the reads and the composition.
 *
 * Reads: L1 → hot → warm → cold, one walk for get, head, getMany and preconditions; a hit below the top is
 * promoted upwards in the background (versioned puts, so a promotion can never replace a newer write); a
 * tombstone stops the walk; a miss may read through the namespace's origin, coalesced per key. A clean hot copy
 * is served alone only when the hot fence confirms it (see tier-walk.ts and hot-fence.ts).
 * Writes: every write gets a hybrid-logical-clock version and is made durable first (warm, cold), then copied to
 * hot; a hot copy that fails or whose outcome is unknown is fenced off before the write is acknowledged. A tier
 * refusing a write as stale means another writer got a newer version in first: the write is re-stamped above
 * that version and retried, so an acknowledged write is never silently dropped and the last write to be
 * acknowledged is the one readers see.
 */
export class Coordinator {
  /** The namespace settings in force; replaced at runtime by {@link replacePolicies}. */
  get policies(): PolicyRegistry {
    return this.registry;
  }
  private registry: PolicyRegistry;
  private readonly flushTimer: boolean;
  private readonly tiers: Tier[];
  private readonly byName = new Map<TierName, Tier>();
  private readonly hot?: Tier;
  /** What placement knows of the tiers (capabilities; fill and availability are not tracked yet). */
  private readonly snapshot: readonly TierSnapshot[];
  private readonly fence?: HotFence;
  /** Tag, prefix and namespace invalidations (invalidations.ts): checked on every read, observed by every write. */
  private readonly invalidations: Invalidations;
  private readonly near: NearCache;
  private readonly clock: HybridLogicalClock;
  private readonly values: StoredValues;
  private readonly onBackgroundError: (error: unknown, what: string) => void;
  private readonly onEvent: (event: CoordinatorEvent) => void;
  private readonly background = new Set<Promise<unknown>>();
  /** Writes of one key from this process go one at a time: exact local order, and no herd of re-stamps. */
  private readonly writeLocks = new KeyedMutex();
  /** Resolved once per policy object: the tier walk asks on every read that met a failed tier. */
  private readonly durableByPolicy = new WeakMap<NamespacePolicy, Tier[]>();
  private readonly origin: OriginLoader;
  private readonly counters = new TierCounters();
  private readonly started = Date.now();
  private readonly flusher?: WriteBackFlusher;
  private readonly reads: TierWalk;
  private readonly writer: TierWriter;
  private readonly promoter: Promoter;
  /** put, touch, delete and upload commits (writes.ts). */
  private readonly writes: KeyWrites;
  private readonly settled: Promise<void>;
  private readonly secrets: SystemSecrets;
  private hotUnknown = 0;
  /** Stops dropping the near cache's covered copies as invalidations arrive (on close). */
  private readonly unwatch: () => void;

  constructor(opts: CoordinatorOptions) {
    if (opts.tiers.length === 0) throw new Error('Coordinator needs at least one tier');
    this.tiers = opts.tiers;
    for (const t of opts.tiers) {
      if (this.byName.has(t.name)) throw new Error(`Coordinator: tier '${t.name}' given twice`);
      this.byName.set(t.name, t);
    }
    this.hot = this.byName.get(HOT);
    this.snapshot = this.tiers.map((t) => ({ name: t.name, dirtyTracking: supportsDirtyTracking(t) }));
    this.registry = opts.policies ?? new PolicyRegistry();
    this.flushTimer = opts.flushTimer !== false;
    this.clock = opts.clock ?? new HybridLogicalClock();
    this.onBackgroundError = opts.onBackgroundError ?? ((e, what) => log.error(`background ${what} failed`, { error: e }));
    this.onEvent = opts.onEvent ?? (() => {});
    this.invalidations =
      opts.invalidations instanceof Invalidations
        ? opts.invalidations
        : new Invalidations({
            register: tierInvalidationRegister(this.tiers[this.tiers.length - 1]!),
            clock: this.clock,
            ...opts.invalidations,
            onEvent: (e) => this.onEvent(e),
          });
    this.secrets = new SystemSecrets(this.tiers[this.tiers.length - 1]!);
    const covers = this.invalidations.covers.bind(this.invalidations);
    this.near = new NearCache(opts.nearCache, () => this.count('l1', 'hits'), covers);
    this.unwatch = this.invalidations.onChange(() => this.near.dropCovered());
    this.fence = hotFenceFor(opts.hotFence, this.tiers, this.hot, (e) => this.onEvent(e));
    this.settled = this.fence ? this.fence.settle() : Promise.resolve();
    this.reads = new TierWalk({
      near: this.near,
      tiers: this.tiers,
      hot: this.hot,
      fence: this.fence,
      count: (tier, what) => this.count(tier, what),
      observe: (version) => this.clock.observe(version),
      durableTargets: (policy) => this.durableTargets(policy),
      covers,
    });
    this.writer = new TierWriter({
      tiers: this.tiers,
      hot: this.hot,
      fence: this.fence,
      count: (tier, what) => this.count(tier, what),
      hotUnknown: (ns, error) => {
        this.hotUnknown++;
        this.onEvent({ type: 'hot-copy-unknown', ns, error });
      },
      dirtied: () => this.flusher?.dirtied(this.flushTimer),
    });
    this.values = new StoredValues(opts.codec ?? new ValueCodec(), {
      tiers: this.tiers,
      near: this.near,
      authority: (policy) => this.durableTargets(policy).at(-1),
      writeBlob: (ns, key, value, encoding, policy) => this.writes.writeBlob(ns, key, value, encoding, policy),
    });
    this.origin = new OriginLoader({
      write: (ns, key, value, opts, policy, at) => this.writes.writeOrigin(ns, key, value, opts, policy, at),
      forget: (ns, key, policy, version, ttlMs) => this.writes.forgetOrigin(ns, key, policy, version, ttlMs),
      version: () => this.clock.next(),
      hit: () => this.count('origin', 'hits'),
      track: (p, what) => this.track(p, what),
      ...(opts.invokeLambda ? { invokeLambda: opts.invokeLambda } : {}),
    });
    this.promoter = new Promoter({ tiers: this.tiers, hot: this.hot, track: (p, what) => this.track(p, what) });
    this.writes = new KeyWrites({
      tiers: this.tiers,
      clock: this.clock,
      invalidations: this.invalidations,
      registry: () => this.registry,
      values: this.values,
      near: this.near,
      writer: this.writer,
      reads: this.reads,
      locks: this.writeLocks,
      placement: (policy, header) => this.placement(policy, header),
      head: (ns, key) => this.head(ns, key),
      stored: (ns, key) => this.stored(ns, key),
      nearFill: (ns, key, entry, policy, since) => this.nearFill(ns, key, entry, policy, since),
    });
    const hot = this.hot;
    if (hot && supportsDirtyTracking(hot)) {
      this.flusher = new WriteBackFlusher({
        hot,
        policies: () => this.registry,
        writeBelow: (ns, key, entry, policy) => this.writes.writeBelow(ns, key, entry, policy),
        intervalMs: opts.flushTimer === false ? null : this.policies.minFlushIntervalMs(),
        onError: (e, what) => this.onBackgroundError(e, what),
        onLost: (count) => this.onEvent({ type: 'write-back-lost', count }),
      });
    }
  }

  /**
   * Puts new namespace settings in force (a policy document replaced at runtime). Requests already running finish
   * with the settings they started with; the next ones use these. The write-back flusher follows the new flush
   * intervals, and keeps flushing what was written under write-back even when the new settings have none.
   */
  replacePolicies(next: PolicyRegistry): void {
    this.registry = next;
    this.flusher?.retime(this.flushTimer);
  }

  /** Resolves once the hot fence has read its epochs and checked the hot tier's incarnation (start-up, tests). */
  ready(): Promise<void> {
    return this.settled;
  }

  /** The configured tiers, top-down. */
  tierList(): readonly Tier[] {
    return this.tiers;
  }

  // ------------------------------------------------------------------ reads

  /**
   * One key: the same lookup as getMany (L1, then the one tier walk), written out for a single key because it is
   * the hot path: the batch's arrays and Promise.all cost a third of a get's throughput (bench hot-path).
   */
  async get(ns: string, key: string): Promise<ReadResult | undefined> {
    // One clock reading for the lease and the near cache's expiry checks (an L1 hit is ~1.8 µs; a read ~40 ns).
    const now = this.invalidations.now();
    const ready = this.invalidations.ready(now);
    if (ready) await ready;
    const policy = this.policies.forRead(ns, key);
    const near = this.near.get(ns, key, policy, ready ? undefined : this.invalidations.wallAt(now));
    if (near !== undefined) return near ? this.values.restore(ns, key, near, policy) : undefined;
    const since = this.near.time();
    const [w] = await this.reads.walk(ns, [key], readOne, entryHeader, policy.readTiers);
    if (!asksOrigin(w!, policy)) this.reads.assertCertain(w!, policy);
    return this.settleRead(ns, key, w!, policy, true, since);
  }

  /** Header of the live entry, without the value and without promotion. Fails exactly when get() would. */
  async head(ns: string, key: string): Promise<HeadResult | undefined> {
    const now = this.invalidations.now();
    const ready = this.invalidations.ready(now);
    if (ready) await ready;
    const policy = this.policies.forRead(ns, key);
    const near = this.near.get(ns, key, policy, ready ? undefined : this.invalidations.wallAt(now));
    if (near !== undefined) return near ? headResult(near.entry.header, near.tier) : undefined;
    const [w] = await this.reads.walk(ns, [key], headOne, (h) => h, policy.readTiers);
    this.reads.assertCertain(w!, policy);
    return w!.hit ? headResult(w!.hit.item, w!.hit.tier) : undefined;
  }

  async getMany(ns: string, keys: string[]): Promise<(ReadResult | undefined)[]> {
    return this.readEntries(ns, keys, readMany);
  }

  /**
   * get and getMany: the lookup, then each key's answer: the hit (promoted), the origin's value, or a miss. A miss
   * that a failed tier makes unsure is a 503, except where the origin is asked instead.
   */
  private async readEntries(ns: string, keys: string[], read: TierRead<Entry>): Promise<(ReadResult | undefined)[]> {
    await this.invalidations.ready();
    const registry = this.registry;
    const policy = registry.for(ns);
    // Keys of scoped rules' classes may read other tiers: one walk per class (key-scopes.ts).
    const each = registry.hasKeyScopes(ns) ? keys.map((k) => registry.forRead(ns, k)) : undefined;
    const since = this.near.time();
    const found = each
      ? await lookupByPolicy(keys, each, (some, p) => this.reads.lookup(ns, some, p, read, entryHeader))
      : await this.reads.lookup(ns, keys, policy, read, entryHeader);
    // Every key is settled before any origin load, so a 503 never leaves origin loads half done.
    found.forEach((f, i) => {
      const p = each?.[i] ?? policy;
      if ('walked' in f && !asksOrigin(f.walked, p)) this.reads.assertCertain(f.walked, p);
    });
    return Promise.all(
      found.map((f, i) =>
        'near' in f
          ? f.near
            ? this.values.restore(ns, keys[i]!, f.near, each?.[i] ?? policy)
            : undefined
          : this.settleRead(ns, keys[i]!, f.walked, each?.[i] ?? policy, true, since),
      ),
    );
  }

  /**
   * A certain walk's answer for a read: the hit (promoted), the origin's value, or a miss. `restore`: the value as
   * written, its transforms undone (what callers get); else as stored (what a copy into another tier needs).
   * `since`: the near cache's clock before the walk began (NearCache.fill).
   */
  private async settleRead(
    ns: string,
    key: string,
    w: Walked<Entry>,
    policy: NamespacePolicy,
    restore: boolean,
    since: number,
  ): Promise<ReadResult | undefined> {
    if (w.hit && isStale(w.hit.item.header)) {
      // Past its TTL, within its stale-while-revalidate grace: served (marked stale by its header) while one
      // background refresh runs; neither cached in L1 nor promoted. Without a grace in force now, a miss.
      const { item: entry, tier } = w.hit;
      if (!policy.origin?.staleWhileRevalidateSeconds) return policy.origin ? this.origin.load(ns, key, policy) : undefined;
      this.origin.refresh(ns, key, policy, entry.header.version);
      return restore ? this.values.restore(ns, key, { entry, tier }, policy) : { entry, tier };
    }
    if (w.hit) {
      const { item: entry, level, tier } = w.hit;
      this.nearFill(ns, key, entry, policy, since);
      if (level > 0) {
        // Off the request path, into the tiers above the hit that placement names (promotion.ts). The hot copy is
        // stamped with the epoch the walk took before it read anything.
        const epoch = w.epochs ? w.epochs[keyShardIndex(ns, key)]! : 0;
        // Placed as its own write was (its tags may pick a tag-scoped placement), within the retrieve rule's tiers.
        const placedBy = this.registry.forKey(ns, key, entry.header.tags);
        const into = promotionTargets(this.placement(placedBy, placementHeader(entry)).promoteInto, policy);
        const residencyMs = policy.hotResidencySeconds * 1000;
        this.promoter.promote({ ns, key, entry, level, epoch, into, residencyMs, staleHot: w.staleHot });
      }
      return restore ? this.values.restore(ns, key, { entry, tier }, policy) : { entry, tier };
    }
    // An origin's 404 remembered (negativeTtlSeconds) is a miss; a delete's tombstone lets the origin be asked.
    if (policy.origin && !w.negative) return this.origin.load(ns, key, policy, this.reads.certain(w, policy));
    return undefined;
  }

  // ------------------------------------------------------------------ writes (writes.ts)

  /**
   * Writes a value: stamped, made durable, then copied to hot, and re-stamped above a newer version it loses to;
   * `ifMatch` / `ifNoneMatch` make it a compare-and-set (KeyWrites.put).
   */
  put(ns: string, key: string, written: Buffer, opts: WriteOptions = {}): Promise<WriteResult> {
    return this.writes.put(ns, key, written, opts);
  }

  /** A new TTL for a key without sending its value again: a write of metadata (KeyWrites.touch). */
  touch(
    ns: string,
    key: string,
    opts: { ttlSeconds: number | null; ifMatch?: number | '*'; maxBytes: number },
  ): Promise<WriteResult> {
    return this.writes.touch(ns, key, opts);
  }

  async putMany(ns: string, items: { key: string; value: Buffer; opts?: WriteOptions }[]): Promise<WriteResult[]> {
    return mapLimit(items, 32, (i) => this.put(ns, i.key, i.value, i.opts));
  }

  /** Deletes a key: a tombstone in every tier below hot, then hot (KeyWrites.delete). */
  delete(ns: string, key: string, opts: { ifMatch?: number | '*' } = {}): Promise<DeleteResult> {
    return this.writes.delete(ns, key, opts);
  }

  async deleteMany(ns: string, keys: string[]): Promise<DeleteResult[]> {
    return mapLimit(keys, 32, (k) => this.delete(ns, k));
  }

  // ------------------------------------------------------------------ invalidation (invalidations.ts)

  /**
   * Makes every entry of `ns` in `scope` (tags, a key prefix, or the whole namespace) written before this call
   * missing for every reader, in every tier and near cache, without touching the entries; resolves once that holds
   * for every coordinator. `by` is recorded in the audit log.
   */
  invalidate(ns: string, scope: InvalidationScope, by: string): Promise<InvalidationResult> {
    return this.invalidations.invalidate(ns, scope, by);
  }

  /** Recent invalidations and flushes, newest first, optionally of one namespace. */
  invalidationLog(ns?: string): Promise<InvalidationRecord[]> {
    return this.invalidations.audit(ns);
  }

  // ------------------------------------------------------------------ listing (key-listing.ts)

  /**
   * Keys of `ns` in key order within a range, each read as a HEAD would (never deleted, expired or invalidated);
   * `last` is where the next page starts.
   */
  async listKeys(ns: string, opts: ListKeysOptions): Promise<KeyListing> {
    const registry = this.registry;
    const policy = registry.for(ns);
    const only = registry.hasKeyScopes(ns) ? undefined : policy.readTiers;
    // Write-through: every acknowledged write is in the durable tiers, which list it. Write-back: the hot tier holds
    // the writes not yet flushed. No durable tier: the hot tier is all there is. (As the tier walk's certainty.)
    const durable = this.durableTargets(policy).length > 0;
    const hotMayLead = policy.writeMode === 'write-back' || !!policy.readHotMayLead || !durable;
    const lists = registry.hasKeyScopes(ns) || !durable ? 'all' : hotMayLead ? 'ahead' : 'none';
    return listKeys(
      {
        tiers: only ? this.tiers.filter((t) => (only as readonly TierName[]).includes(t.name)) : this.tiers,
        ...(this.hot ? { hot: { tier: this.hot, lists } } : {}),
        resolve: (n, keys) => this.headMany(n, keys),
        certainWithout: (_n, failed, answered) => this.reads.certain({ deleted: false, failed, answered }, policy),
      },
      ns,
      opts,
    );
  }

  /** A secret shared by every coordinator of the deployment (system-secret.ts), e.g. the listing cursors' key. */
  sharedSecret(name: string): Promise<Buffer> {
    return this.secrets.get(name);
  }

  /**
   * Headers of some keys as the tiers hold them now (as written; undefined where HEAD would be 404), read past the
   * near cache: a listing names what another container deleted a moment ago no more than it misses what it wrote.
   * Fails exactly where a HEAD that reached the tiers would.
   */
  private async headMany(ns: string, keys: string[]): Promise<(EntryHeader | undefined)[]> {
    if (keys.length === 0) return [];
    await this.invalidations.ready();
    const registry = this.registry;
    const policy = registry.for(ns);
    const each = registry.hasKeyScopes(ns) ? keys.map((k) => registry.forRead(ns, k)) : undefined;
    const walk = (some: string[], p: NamespacePolicy) => this.reads.walk(ns, some, headMany, (h) => h, p.readTiers);
    const walked = each ? await lookupByPolicy(keys, each, walk) : await walk(keys, policy);
    return walked.map((w, i) => {
      this.reads.assertCertain(w, each?.[i] ?? policy);
      return w.hit ? headResult(w.hit.item, w.hit.tier).header : undefined;
    });
  }

  // ------------------------------------------------------------------ large values

  /**
   * Moves a value uploaded through a presigned URL into place in the presigning (cold) tier, as a versioned write
   * like any other (KeyWrites.commitUpload).
   */
  commitUpload(
    ns: string,
    key: string,
    uploadId: string,
    opts: Omit<WriteOptions, 'ifMatch' | 'ifNoneMatch'> = {},
  ): Promise<WriteResult> {
    return this.writes.commitUpload(ns, key, uploadId, opts);
  }

  /**
   * Forgets this container's near copy of a key that another process wrote on this caller's behalf (an upload the
   * upload-commit workflow committed: api/async-complete.ts), so this container, which answers that write, reads it.
   */
  forgetNear(ns: string, key: string): void {
    this.near.drop(ns, key);
  }

  /** Makes sure `tierName` holds the live version of a key (e.g. before presigning a download from cold). */
  async ensureIn(tierName: TierName, ns: string, key: string): Promise<void> {
    const tier = this.byName.get(tierName);
    if (!tier) return;
    const r = await this.stored(ns, key);
    if (!r) return;
    const there = await tier.head(ns, key);
    if (there && there.version >= r.entry.header.version) return;
    await tier.put(ns, key, copyForTier(r.entry));
  }

  /** The live entry as tiers store it (transforms not undone), for copies into another tier. */
  private async stored(ns: string, key: string): Promise<ReadResult | undefined> {
    await this.invalidations.ready();
    const policy = this.policies.forRead(ns, key);
    const near = this.near.get(ns, key, policy);
    if (near !== undefined) return near ?? undefined;
    const since = this.near.time();
    const [w] = await this.reads.walk(ns, [key], readOne, entryHeader, policy.readTiers);
    this.reads.assertCertain(w!, policy);
    return this.settleRead(ns, key, w!, policy, false, since);
  }

  // ------------------------------------------------------------------ write-back (write-back.ts)

  /**
   * Writes dirty (write-back) entries of the hot tier down to the namespace's durable tiers and marks them
   * clean. Safe to call concurrently (calls share one pass). Returns how many entries were flushed.
   */
  async flushDirty(limit = 1000): Promise<number> {
    return this.flusher ? this.flusher.flush(limit) : 0;
  }

  /**
   * Flushes if write-back is in use and the shortest flush interval has passed: one pass (Lambda's end of invocation),
   * or passes while a backlog lasts, for up to `backlogMs` (the policy ticker's flush).
   */
  async flushIfDue(backlogMs = 0): Promise<number> {
    return this.flusher ? this.flusher.flushIfDue(backlogMs) : 0;
  }

  // ------------------------------------------------------------------ lifecycle and stats

  /** Waits for background promotions to settle (tests, graceful shutdown). */
  async drain(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  async close(): Promise<void> {
    this.unwatch();
    this.flusher?.stop();
    await this.drain();
    await this.flusher?.finalFlush();
    await Promise.allSettled([...this.tiers, ...(this.near.tier ? [this.near.tier] : [])].map((t) => t.close()));
  }

  async stats(): Promise<{
    uptimeSeconds: number;
    tiers: TierReport[];
    promotions: number;
    flushed: number;
    hotFence?: { active: boolean; leaseMs: number; bumps: number; unknownHotCopies: number };
  }> {
    const tiers = await tierReports([...(this.near.tier ? [this.near.tier] : []), ...this.tiers], this.counters);
    const f = this.fence;
    const fence = f
      ? { hotFence: { active: f.active, leaseMs: f.leaseMs, bumps: f.bumpCount, unknownHotCopies: this.hotUnknown } }
      : {};
    const uptimeSeconds = Math.round((Date.now() - this.started) / 1000);
    return { uptimeSeconds, tiers, promotions: this.promoter.promotions, flushed: this.flusher?.flushed ?? 0, ...fence };
  }

  health(): Promise<Health> {
    return tierHealth(this.tiers);
  }

  // ------------------------------------------------------------------ internals

  /** Where an entry with this header goes, per the namespace policy (placement.ts). */
  private placement(policy: NamespacePolicy, header: PlacementHeader): Placement {
    return place({ policy, header, tiers: this.snapshot });
  }

  /** Tiers below hot that every write of this namespace must reach before it is acknowledged. */
  private durableTargets(policy: NamespacePolicy): Tier[] {
    let targets = this.durableByPolicy.get(policy);
    if (!targets) {
      targets = this.writer.tiersNamed(namespaceDurable(policy, this.snapshot));
      this.durableByPolicy.set(policy, targets);
    }
    return targets;
  }

  /**
   * Caches a value just written or read in L1 (near-cache.ts); `since`: the near cache's clock before the write or
   * read began. A method of its own so tests can replay a slow fill.
   */
  private nearFill(ns: string, key: string, entry: Entry, policy: NamespacePolicy, since: number): void {
    this.near.fill(ns, key, entry, policy, since);
  }

  private track(p: Promise<unknown>, what: string): void {
    const tracked = p.catch((e) => this.onBackgroundError(e, what)).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  private count(tier: ServedBy, what: keyof TierCounts): void {
    this.counters.count(tier, what);
  }
}

/** A miss that goes on to the namespace's origin: its answer need not be certain (the origin's value is written). */
function asksOrigin(w: Walked<unknown>, policy: NamespacePolicy): boolean {
  return !!policy.origin && !w.hit && !w.deleted;
}
