import { NotFoundError, permanentDetails, StrataError, VersionConflictError } from '../errors.js';
import type { Entry, EntryEncoding, EntryHeader } from '../model/entry.js';
import { copyForTier, isStale, makeTombstone } from '../model/entry.js';
import { HybridLogicalClock } from '../model/hlc.js';
import { contentHash, keyShardIndex } from '../model/keys.js';
import type { Tier, TierName } from '../tiers/tier.js';
import { supportsDirtyTracking, supportsPresigning } from '../tiers/tier.js';
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
import { OriginLoader, type OriginWriteOptions } from './origin.js';
import { HOT, namespaceDurable, place, type Placement, type PlacementHeader, type TierSnapshot } from './placement.js';
import { NearCache } from './near-cache.js';
import { PolicyRegistry, type NamespacePolicy } from '../policy/namespace-settings.js';
import { ValueCodec } from '../transforms/codec.js';
import { headResult, StoredValues, type Prepared } from './stored-values.js';
import { Promoter } from './promotion.js';
import { restamp, type Attempt } from './restamp.js';
import { entryHeader, headMany, headOne, readMany, readOne, TierWalk, type TierRead, type Walked } from './tier-walk.js';
import { listKeys, type KeyListing, type ListKeysOptions } from './key-listing.js';
import { SystemSecrets } from './system-secret.js';
import { TierWriter, type Exclusive } from './tier-writer.js';
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

/** Reads and writes a touch tries when writes of the same key keep landing between them. */
export const TOUCH_ATTEMPTS = 3;

/**
 * Routes reads and writes over the ordered tiers by namespace policy. The parts live beside it: placement.ts
 * decides where an entry goes, tier-walk.ts reads, tier-writer.ts makes one attempt at a change, restamp.ts retries
 * a change that lost to a newer version, write-back.ts flushes dirty hot entries, hot-fence.ts fences hot copies.
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
  private readonly settled: Promise<void>;
  private readonly secrets: SystemSecrets;
  private hotUnknown = 0;

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
      writeBlob: async (ns, key, value, encoding, policy) => {
        await this.writeLocks.run(lockId(ns, key), () =>
          this.write(ns, key, value, encoding, { ttlSeconds: null }, policy, 'restamp'),
        );
      },
    });
    this.origin = new OriginLoader({
      write: async (ns, key, value, opts, policy, at) => {
        const p = await this.values.prepare(this.registry, policy, ns, key, value, []);
        const mode = at === undefined ? 'restamp' : 'conditional';
        const written = (await this.writeLocks.run(lockId(ns, key), () =>
          this.write(ns, key, p.value, p.encoding, opts, policy, mode, at),
        ))!;
        await this.values.written(ns, p, policy);
        return written;
      },
      forget: (ns, key, policy, version, ttlMs) =>
        this.writeLocks.run(lockId(ns, key), async () => {
          const since = this.near.time();
          const r = await this.writer.tombstone(ns, key, version, policy, { ttlMs });
          const ms = Math.min(ttlMs, policy.nearCache.ttlMs);
          if (r.ok) this.near.shadow(ns, key, makeTombstone(version, ms, Date.now(), true), policy, since);
          return r.ok;
        }),
      version: () => this.clock.next(),
      hit: () => this.count('origin', 'hits'),
      track: (p, what) => this.track(p, what),
      ...(opts.invokeLambda ? { invokeLambda: opts.invokeLambda } : {}),
    });
    this.promoter = new Promoter({ tiers: this.tiers, hot: this.hot, track: (p, what) => this.track(p, what) });
    const hot = this.hot;
    if (hot && supportsDirtyTracking(hot)) {
      this.flusher = new WriteBackFlusher({
        hot,
        policies: () => this.registry,
        writeBelow: (ns, key, entry, policy) => this.writeBelow(ns, key, entry, policy),
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

  // ------------------------------------------------------------------ writes

  async put(ns: string, key: string, written: Buffer, opts: WriteOptions = {}): Promise<WriteResult> {
    // Stamped above every invalidation in force (invalidations.ts); fails closed when that is unknown.
    const ready = this.invalidations.ready();
    if (ready) await ready;
    const registry = this.registry;
    const policy = registry.forKey(ns, key, opts.tags);
    // Transformed once, before any tier sees it (stored-values.ts); every attempt writes these bytes.
    const prepared = this.values.prepare(registry, policy, ns, key, written, opts.tags);
    const p = prepared instanceof Promise ? await prepared : prepared;
    const conditional = opts.ifMatch !== undefined || !!opts.ifNoneMatch;
    if (!conditional) {
      // The common case takes no lock: one attempt, and only a write that lost to a concurrent writer of the same
      // key retries under the key's lock, so writers of one hot key in this process take turns instead of
      // re-stamping against each other. (The lock's promise bookkeeping on every write cost ~15% of throughput
      // and doubled the p99 of the hot path.)
      const first = await this.write(ns, key, p.value, p.encoding, opts, policy, 'first-try');
      if (first) return this.settleWrite(ns, p, policy, first);
    }
    const r = await this.writeLocks.run(lockId(ns, key), async () => {
      if (!conditional) return (await this.write(ns, key, p.value, p.encoding, opts, policy, 'restamp'))!;
      if (opts.ifNoneMatch) {
        const create = await this.createVersion(ns, key);
        const mode = create.ifAbsent ? 'create' : 'conditional';
        return (await this.write(ns, key, p.value, p.encoding, opts, policy, mode, create.at))!;
      }
      // If-Match: at the version read + 1, so the versioned write is a compare-and-set (see casVersion).
      const at = casVersion((await this.checkPrecondition(ns, key, opts))!);
      return (await this.write(ns, key, p.value, p.encoding, opts, policy, 'conditional', at))!;
    });
    return this.settleWrite(ns, p, policy, r);
  }

  /** A write's answer, once what its value needs besides its own entry is in place (a storeOnce blob). */
  private settleWrite(ns: string, p: Prepared, policy: NamespacePolicy, r: WriteResult): WriteResult | Promise<WriteResult> {
    return p.dedup ? this.values.written(ns, p, policy).then(() => r) : r;
  }

  /**
   * If-Match, checked under the key's lock so no local write interleaves (If-None-Match: {@link createVersion}). Returns the version read
   * (null: no live entry). Decided by head(): when a tier that might hold the key cannot answer, the write is
   * refused with 503 rather than decided on a partial view. A writer in another process that slips in after the
   * check is caught by the write that follows: an If-Match write goes in at {@link casVersion} of what was read,
   * which every later write is at or above, so it is refused and reported as a conflict (a write at a fresh clock
   * version would not be: a clock ahead of the other writer's would put it above, and undo, their acknowledged
   * write).
   */
  private async checkPrecondition(ns: string, key: string, opts: Pick<WriteOptions, 'ifMatch'>): Promise<number | null> {
    // Read past this container's near copy, which may be behind another process's write (a spurious conflict).
    this.near.drop(ns, key);
    const current = (await this.head(ns, key))?.header.version ?? null;
    if (opts.ifMatch === '*' && current === null) {
      throw new VersionConflictError(`key '${key}' does not exist`, { expected: '*', current });
    }
    if (typeof opts.ifMatch === 'number' && current !== opts.ifMatch) {
      const message = `key '${key}' is at version ${current ?? 'none'}, not ${opts.ifMatch}`;
      throw new VersionConflictError(message, { expected: opts.ifMatch, current });
    }
    return current;
  }

  /**
   * The version an If-None-Match: * create goes in at, decided under the key's lock; a VersionConflictError when a
   * live entry is there. Like If-Match, it is a compare-and-set on what the tiers hold, so that of creators racing
   * in different processes exactly one write applies (a write at a fresh clock version would not be: the creator
   * whose clock runs ahead would land above, and undo, the other's acknowledged create):
   * - a record of the key (a tombstone, a marker, an entry an invalidation covers): {@link casVersion} of it, which
   *   every write made since is at or above; both racers build on the same record, and a tier never applies one
   *   version twice. It is above every copy any tier may still hold or later receive (promotions, migrations and
   *   write-back flushes of older versions are at or below the record, which was written above them), and, for a
   *   covered entry, above the namespace's invalidations, or the create would be covered too.
   * - no record at all (never written, or its tombstone or value expired): a fresh clock version, as any write
   *   takes, with `ifAbsent`: the arbitrating tier applies it only while it holds no record of the key. No version
   *   two racers would both pick is safe here: a fixed one (say 1) could sit below an old copy still arriving (a
   *   promotion or write-back flush of the expired value, a Redis snapshot brought back) and would name two
   *   different values over the key's lifetime, breaking every ETag a client holds.
   * Read past this container's near copy (which may be behind another process's write) and, like head(), refused
   * with 503 rather than decided on a partial view.
   */
  private async createVersion(ns: string, key: string): Promise<{ at: number; ifAbsent: boolean }> {
    this.near.drop(ns, key);
    await this.invalidations.ready();
    const policy = this.policies.forRead(ns, key);
    const [w] = await this.reads.walk(ns, [key], headOne, (h) => h, policy.readTiers);
    this.reads.assertCertain(w!, policy);
    if (w!.hit) {
      const current = headResult(w!.hit.item, w!.hit.tier).header.version;
      throw new VersionConflictError(`key '${key}' already exists`, { expected: '*', current });
    }
    const record = w!.record;
    if (!record) return { at: this.clock.next(), ifAbsent: true };
    const floor = w!.invalidated ? Math.max(record.version, this.invalidations.ceiling(ns)) : record.version;
    return { at: casVersion(floor), ifAbsent: false };
  }

  /**
   * A new TTL for a key (`ttlSeconds`; null: no expiry) without the caller sending its value again: a write of
   * metadata. The live entry is written back as the tiers store it (its bytes, encoding, tags and content type; not
   * decoded and encoded again) with the new expiry, at its version + 1: a version that any write made after the one
   * read is at or above, so the versioned write cannot undo it, in this process or another (a read-then-write at a
   * fresh clock version would: an If-Match checked first is no compare-and-set across processes). When it does not
   * apply, the touch reads again and applies to the newer value, up to {@link TOUCH_ATTEMPTS} times. Placement and
   * the hot copy's TTL cap apply as to any write. `ifMatch`: only if the key is at that version (or, `*`, exists); a
   * missing key is a NotFoundError (a VersionConflictError with `ifMatch`). Values above `maxBytes` are refused:
   * their bytes would pass through this process (the caller writes them again through an upload).
   */
  async touch(
    ns: string,
    key: string,
    opts: { ttlSeconds: number | null; ifMatch?: number | '*'; maxBytes: number },
  ): Promise<WriteResult> {
    for (let attempt = 1; attempt <= TOUCH_ATTEMPTS; attempt++) {
      const r = await this.stored(ns, key);
      const current = r?.entry.header.version ?? null;
      if (opts.ifMatch !== undefined && (current === null || (opts.ifMatch !== '*' && current !== opts.ifMatch))) {
        const message = `key '${key}' is at version ${current ?? 'none'}, not ${opts.ifMatch}`;
        throw new VersionConflictError(message, { expected: opts.ifMatch, current });
      }
      if (!r) throw new NotFoundError(`key '${key}' not found in namespace '${ns}'`, { ns, key });
      const { version, ...header } = r.entry.header;
      if (header.size > opts.maxBytes) {
        const message = `a touch writes the value back; '${key}' is ${header.size} bytes, above ${opts.maxBytes}: write it again with the new TTL through an upload`;
        throw new StrataError('PAYLOAD_TOO_LARGE', message, { limit: opts.maxBytes, size: header.size });
      }
      const policy = this.registry.forKey(ns, key, header.tags);
      const expiresAt = opts.ttlSeconds === null ? null : Date.now() + opts.ttlSeconds * 1000;
      const base: Omit<EntryHeader, 'version'> = { ...header, expiresAt, flags: {} };
      const placement = this.placement(policy, {
        size: header.encoding?.size ?? header.size,
        tags: header.tags,
        expiresAt,
        ageMs: 0,
      });
      const w = await this.attemptWrite(ns, key, base, r.entry.value, placement, policy, casVersion(version));
      if (w.ok) return w.value;
      // A newer write is there (this container's near copy was behind, or a write landed since the read).
      this.near.drop(ns, key);
      if (typeof opts.ifMatch === 'number') {
        throw new VersionConflictError(`key '${key}' changed during the touch`, { expected: opts.ifMatch, current: w.current });
      }
    }
    throw new VersionConflictError(`key '${key}' kept changing during the touch; touch it again`, {
      expected: opts.ifMatch,
      current: null,
    });
  }

  async putMany(ns: string, items: { key: string; value: Buffer; opts?: WriteOptions }[]): Promise<WriteResult[]> {
    return mapLimit(items, 32, (i) => this.put(ns, i.key, i.value, i.opts));
  }

  async delete(ns: string, key: string, opts: { ifMatch?: number | '*' } = {}): Promise<DeleteResult> {
    await this.invalidations.ready();
    const policy = this.policies.forRead(ns, key);
    return this.writeLocks.run(lockId(ns, key), async () => {
      const tombstone = async (version: number): Promise<Attempt<DeleteResult>> => {
        const since = this.near.time();
        const r = await this.writer.tombstone(ns, key, version, policy);
        if (!r.ok) return r;
        this.near.shadow(ns, key, makeTombstone(version, policy.nearCache.ttlMs), policy, since);
        return { ok: true, value: { version } };
      };
      if (opts.ifMatch !== undefined) {
        // A compare-and-set, as a conditional put is (checkPrecondition).
        const version = casVersion((await this.checkPrecondition(ns, key, opts))!);
        const r = await tombstone(version);
        if (!r.ok)
          throw new VersionConflictError(`key '${key}' changed during the delete`, {
            expected: opts.ifMatch,
            current: r.current,
          });
        this.clock.observe(version);
        return r.value;
      }
      // Superseded by concurrent writers in other processes, as a write can be (see restamp.ts).
      return restamp(this.clock, tombstone, { exhausted: (version) => ({ version }) });
    });
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
   * Moves a value uploaded through a presigned URL into place in the presigning (cold) tier, as a versioned
   * write like any other (tier-writer.ts: every other tier is shadowed by a location marker).
   */
  async commitUpload(
    ns: string,
    key: string,
    uploadId: string,
    opts: Omit<WriteOptions, 'ifMatch' | 'ifNoneMatch'> = {},
  ): Promise<WriteResult> {
    await this.invalidations.ready();
    const registry = this.registry;
    const policy = registry.forKey(ns, key, opts.tags);
    // Uploaded bytes never pass through Strata, so they cannot be compressed or encrypted on their way in.
    this.values.refuseUpload(registry, ns, key, opts.tags);
    const target = this.tiers.find(supportsPresigning);
    if (!target || !supportsPresigning(target))
      throw new StrataError('TIER_UNAVAILABLE', 'no tier supports uploads', permanentDetails());
    const ttl = opts.ttlSeconds === undefined ? policy.defaultTtlSeconds : opts.ttlSeconds;
    const expiresAt = ttl === null ? null : Date.now() + ttl * 1000;
    const meta = { tags: opts.tags ?? [], ...(opts.contentType ? { contentType: opts.contentType } : {}), flags: {} };
    return this.writeLocks.run(lockId(ns, key), () =>
      restamp(
        this.clock,
        async (version): Promise<Attempt<WriteResult>> => {
          const since = this.near.time();
          const r = await this.writer.commitUpload(ns, key, target, uploadId, { version, expiresAt, ...meta }, policy);
          if (!r.ok) return r;
          this.near.shadow(ns, key, r.value.marker, policy, since);
          return { ok: true, value: { version, expiresAt, size: r.value.size, tiers: [target.name], durable: true } };
        },
        {
          exhausted: () => {
            throw new StrataError(
              'TIER_UNAVAILABLE',
              'the upload kept losing to concurrent writes of the same key; commit it again',
            );
          },
        },
      ),
    );
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

  /**
   * Stamps a value and writes it where placement says, re-stamped above any newer version it loses to (restamp.ts).
   * 'first-try': resolves undefined instead of re-stamping when the first attempt loses (the caller retries under
   * the key's lock); 'conditional': a loss is a conflict. `at`: exactly that version (a compare-and-set, see
   * casVersion), never re-stamped, arbitrated by one tier (tier-writer.ts, Exclusive); 'create': `at` is a fresh
   * version, applied only where the arbitrating tier holds no record of the key (createVersion).
   */
  private async write(
    ns: string,
    key: string,
    value: Buffer,
    encoding: EntryEncoding | undefined,
    opts: OriginWriteOptions,
    policy: NamespacePolicy,
    mode: 'first-try' | 'conditional' | 'create' | 'restamp',
    at?: number,
  ): Promise<WriteResult | undefined> {
    const ttl = opts.ttlSeconds === undefined ? policy.defaultTtlSeconds : opts.ttlSeconds;
    // An origin's value under stale-while-revalidate stays in the tiers `grace` past its TTL (origin.ts).
    const grace = ttl === null ? 0 : (opts.staleGraceSeconds ?? 0);
    const staleAt = ttl === null ? undefined : Date.now() + ttl * 1000;
    const base: Omit<EntryHeader, 'version'> = {
      expiresAt: staleAt === undefined ? null : staleAt + grace * 1000,
      ...(grace > 0 ? { staleAt } : {}),
      size: value.length,
      hash: contentHash(value),
      tags: opts.tags ?? [],
      ...(opts.contentType ? { contentType: opts.contentType } : {}),
      ...(encoding ? { encoding } : {}),
      flags: {},
    };
    // Placed by the size the caller wrote (write-around thresholds are about values, not how well they compress).
    const size = encoding?.size ?? base.size;
    const placement = this.placement(policy, { size, tags: base.tags, expiresAt: base.expiresAt, ageMs: 0 });
    if (mode === 'first-try') {
      // One attempt, no re-stamp (the lock-free common case; put() re-stamps under the key's lock when it lost).
      // Called directly rather than through restamp(): closures made per write cost ~5% of PUT throughput.
      const r = await this.attemptWrite(ns, key, base, value, placement, policy, this.clock.next());
      if (r.ok) return r.value;
      this.clock.observe(r.current);
      return undefined;
    }
    if (at !== undefined) {
      // A compare-and-set (If-Match, If-None-Match): exactly this version, and a loss is a conflict.
      const exclusive = { ifAbsent: mode === 'create' };
      const r = await this.attemptWrite(ns, key, base, value, placement, policy, at, exclusive);
      if (!r.ok) throw conflictDuringWrite(key, r.current);
      this.clock.observe(at);
      return r.value;
    }
    const { expiresAt } = base;
    return restamp<WriteResult, WriteResult | undefined>(
      this.clock,
      (version) => this.attemptWrite(ns, key, base, value, placement, policy, version),
      {
        conflict: mode === 'conditional' ? (current) => conflictDuringWrite(key, current) : undefined,
        // Ordering this write just before the concurrent writers' is a valid linearisation: it is acknowledged as
        // superseded rather than failed (it did not come after them, so readers rightly see theirs).
        exhausted: (version) => ({ version, expiresAt, size, tiers: [], durable: true, superseded: true }),
      },
    );
  }

  /** One attempt of a write at `version`: the tiers placement names, then L1. */
  private async attemptWrite(
    ns: string,
    key: string,
    base: Omit<EntryHeader, 'version'>,
    value: Buffer,
    placement: Placement,
    policy: NamespacePolicy,
    version: number,
    exclusive?: Exclusive,
  ): Promise<Attempt<WriteResult>> {
    const entry: Entry = { header: { ...base, version }, value };
    const since = this.near.time();
    const r = await this.writer.write(ns, key, entry, placement, policy, exclusive);
    if (!r.ok) return r;
    this.nearFill(ns, key, entry, policy, since);
    const size = base.encoding?.size ?? base.size;
    return { ok: true, value: { version, expiresAt: base.expiresAt, size, ...r.value } };
  }

  /** The write-back flusher's write below: true when the entry's version (or a newer one) is safe there. */
  private async writeBelow(ns: string, key: string, entry: Entry, policy: NamespacePolicy): Promise<boolean> {
    const placement = this.placement(policy, placementHeader(entry));
    const r = await this.writer.putDurable(ns, key, entry, this.writer.tiersNamed(placement.durable));
    return r.ok || r.current >= entry.header.version;
  }

  private track(p: Promise<unknown>, what: string): void {
    const tracked = p.catch((e) => this.onBackgroundError(e, what)).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  private count(tier: ServedBy, what: keyof TierCounts): void {
    this.counters.count(tier, what);
  }
}

/** What placement sees of an entry already written: its age comes from its version's hybrid-logical-clock stamp. */
function placementHeader({ header, value }: Entry): PlacementHeader {
  // The size as written (header.size is the size as stored, which is value.length for every live entry).
  const size = header.encoding?.size ?? value.length;
  return { size, tags: header.tags, expiresAt: header.expiresAt, ageMs: Date.now() - HybridLogicalClock.timeOf(header.version) };
}

/**
 * The version a compare-and-set over `read` is written at: one above it. Every write made after `read` was written
 * has a higher version (the tiers keep the newest, and writers stamp above what they meet), so this one applies only
 * while `read` is still the stored version; of two made over the same `read`, exactly one applies.
 */
function casVersion(read: number): number {
  return read + 1;
}

function conflictDuringWrite(key: string, current: number): VersionConflictError {
  return new VersionConflictError(`key '${key}' changed during the write`, { current });
}

/** A miss that goes on to the namespace's origin: its answer need not be certain (the origin's value is written). */
function asksOrigin(w: Walked<unknown>, policy: NamespacePolicy): boolean {
  return !!policy.origin && !w.hit && !w.deleted;
}

function lockId(ns: string, key: string): string {
  return `${ns}\u0000${key}`;
}
