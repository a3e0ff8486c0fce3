import { StrataError, TierUnavailableError, VersionConflictError } from '../errors.js';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { copyForTier, isLive, makeLocationMarker, makeTombstone } from '../model/entry.js';
import { HybridLogicalClock } from '../model/hlc.js';
import { contentHash, keyShardIndex } from '../model/keys.js';
import type { MemoryTier } from '../tiers/memory-tier.js';
import type { Tier, TierName, TierStats } from '../tiers/tier.js';
import { supportsConfirming, supportsDirtyTracking, supportsIncarnations, supportsPresigning } from '../tiers/tier.js';
import { mapLimit, withTimeout } from '../util/concurrency.js';
import { HotFence, tierFenceRegister, type FenceEvent } from './hot-fence.js';
import { copyPendingToHot } from './hot-promotion.js';
import { Coalescer, KeyedMutex } from './keyed-mutex.js';
import { fetchFromOrigin } from './origin.js';
import type { NamespacePolicy } from './policy.js';
import { PolicyRegistry } from './policy.js';
import { entryHeader, headOne, readOne, TierWalk, type Walked } from './tier-walk.js';
import { WriteBackFlusher } from './write-back.js';

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
  /** What the coordinator did on its own (fence bumps, hot copies whose outcome was unknown): metrics and logs. */
  onEvent?: (event: CoordinatorEvent) => void;
}

export type CoordinatorEvent =
  | FenceEvent
  /** A write acknowledged from the durable tiers whose hot copy failed or whose outcome was unknown (fenced first). */
  | { type: 'hot-copy-unknown'; ns: string; error: unknown }
  /** Dirty write-back entries found gone (evicted or expired) before their flush: acknowledged writes lost. */
  | { type: 'write-back-lost'; count: number };

export type ServedBy = TierName | 'origin';

export interface ReadResult {
  entry: Entry;
  tier: ServedBy;
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

interface TierCounters {
  hits: number;
  misses: number;
  errors: number;
}

type Attempt = { ok: true; tiers: TierName[]; durable: boolean } | { ok: false; current: number };

const MAX_RESTAMPS = 8;

/**
 * Routes reads and writes over the ordered tiers by namespace policy.
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
  readonly policies: PolicyRegistry;
  private readonly tiers: Tier[];
  private readonly byName = new Map<TierName, Tier>();
  private readonly hot?: Tier;
  private readonly fence?: HotFence;
  private readonly l1?: MemoryTier;
  private readonly clock: HybridLogicalClock;
  private readonly onBackgroundError: (error: unknown, what: string) => void;
  private readonly onEvent: (event: CoordinatorEvent) => void;
  private readonly background = new Set<Promise<unknown>>();
  /** Writes of one key from this process go one at a time: exact local order, and no herd of re-stamps. */
  private readonly writeLocks = new KeyedMutex();
  private readonly durableByPolicy = new WeakMap<NamespacePolicy, Tier[]>();
  private readonly originLoads = new Coalescer<ReadResult | undefined>();
  private readonly counters = new Map<ServedBy, TierCounters>();
  private readonly started = Date.now();
  private readonly flusher?: WriteBackFlusher;
  private readonly reads: TierWalk;
  private readonly settled: Promise<void>;
  private promotions = 0;
  private hotUnknown = 0;

  constructor(opts: CoordinatorOptions) {
    if (opts.tiers.length === 0) throw new Error('Coordinator needs at least one tier');
    this.tiers = opts.tiers;
    for (const t of opts.tiers) {
      if (this.byName.has(t.name)) throw new Error(`Coordinator: tier '${t.name}' given twice`);
      this.byName.set(t.name, t);
    }
    this.hot = this.byName.get('hot');
    this.l1 = opts.nearCache;
    this.policies = opts.policies ?? new PolicyRegistry();
    this.clock = opts.clock ?? new HybridLogicalClock();
    this.onBackgroundError = opts.onBackgroundError ?? ((e, what) => console.error(`[strata] background ${what} failed:`, e));
    this.onEvent = opts.onEvent ?? (() => {});
    this.fence = this.makeFence(opts.hotFence);
    this.settled = this.fence ? this.fence.settle() : Promise.resolve();
    this.reads = new TierWalk({
      tiers: this.tiers,
      hot: this.hot,
      fence: this.fence,
      count: (tier, what) => this.count(tier, what),
      observe: (version) => this.clock.observe(version),
      durableTargets: (policy) => this.durableTargets(policy),
    });
    const hot = this.hot;
    if (hot && supportsDirtyTracking(hot)) {
      this.flusher = new WriteBackFlusher({
        hot,
        policies: this.policies,
        writeBelow: (ns, key, entry, policy) => this.writeBelow(ns, key, entry, policy),
        residencyMs: (policy) => policy.hotResidencySeconds * 1000,
        intervalMs: opts.flushTimer === false ? null : this.policies.minFlushIntervalMs(),
        onError: (e) => this.onBackgroundError(e, 'write-back flush'),
        onLost: (count) => this.onEvent({ type: 'write-back-lost', count }),
      });
    }
  }

  private makeFence(opt: CoordinatorOptions['hotFence']): HotFence | undefined {
    if (opt instanceof HotFence) return opt;
    const lowest = this.tiers[this.tiers.length - 1]!;
    if (opt === false || !this.hot || lowest === this.hot) return undefined;
    return new HotFence({
      register: tierFenceRegister(lowest),
      leaseMs: opt?.leaseMs,
      incarnations: supportsIncarnations(this.hot) ? this.hot : undefined,
      onEvent: (e) => this.onEvent(e),
    });
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

  async get(ns: string, key: string): Promise<ReadResult | undefined> {
    const policy = this.policies.for(ns);
    const near = this.nearGet(ns, key, policy);
    if (near !== undefined) return near ?? undefined;
    const [w] = await this.reads.walk(ns, [key], readOne, entryHeader);
    return this.settleRead(ns, key, w!, policy);
  }

  /** Header of the live entry, without the value and without promotion. Fails exactly when get() would. */
  async head(ns: string, key: string): Promise<{ header: EntryHeader; tier: ServedBy } | undefined> {
    const policy = this.policies.for(ns);
    const near = this.nearGet(ns, key, policy);
    if (near) return { header: near.entry.header, tier: near.tier };
    if (near === null) return undefined;
    const [w] = await this.reads.walk(ns, [key], headOne, (h) => h);
    this.reads.assertCertain(w!, policy);
    return w!.hit ? { header: w!.hit.item, tier: w!.hit.tier } : undefined;
  }

  async getMany(ns: string, keys: string[]): Promise<(ReadResult | undefined)[]> {
    const policy = this.policies.for(ns);
    const out: (ReadResult | undefined)[] = new Array(keys.length).fill(undefined);
    const pending: number[] = [];
    keys.forEach((k, i) => {
      const near = this.nearGet(ns, k, policy);
      if (near) out[i] = near;
      else if (near === undefined) pending.push(i);
    });
    const walked = await this.reads.walk(ns, pending.map((i) => keys[i]!), (t, n, ks) => t.getMany(n, ks), entryHeader);
    // Every key is settled before any origin load, so a 503 never leaves origin loads half done.
    const uncertain = walked.findIndex((w) => !(policy.origin && !w.hit && !w.deleted) && !this.reads.certain(w, policy));
    if (uncertain >= 0) throw new TierUnavailableError(walked[uncertain]!.failed.join(','));
    await Promise.all(pending.map(async (i, j) => (out[i] = await this.settleRead(ns, keys[i]!, walked[j]!, policy))));
    return out;
  }

  /** A walk's answer for a read: the hit (promoted), the origin's value, a miss, or a 503 when a miss is unsure. */
  private async settleRead(ns: string, key: string, w: Walked<Entry>, policy: NamespacePolicy): Promise<ReadResult | undefined> {
    if (!(policy.origin && !w.hit && !w.deleted)) this.reads.assertCertain(w, policy);
    if (w.hit) {
      const hit: ReadResult = { entry: w.hit.item, tier: w.hit.tier };
      const epoch = w.epochs ? w.epochs[keyShardIndex(ns, key)]! : 0;
      this.afterHit(ns, key, hit, w.hit.level, epoch, policy, w.staleHot);
      return hit;
    }
    if (policy.origin) return this.loadFromOrigin(ns, key, policy);
    return undefined;
  }

  // ------------------------------------------------------------------ writes

  async put(ns: string, key: string, value: Buffer, opts: WriteOptions = {}): Promise<WriteResult> {
    const policy = this.policies.for(ns);
    const conditional = opts.ifMatch !== undefined || !!opts.ifNoneMatch;
    if (!conditional) {
      // The common case takes no lock: one attempt, and only a write that lost to a concurrent writer of the same
      // key retries under the key's lock, so writers of one hot key in this process take turns instead of
      // re-stamping against each other. (The lock's promise bookkeeping on every write cost ~15% of throughput
      // and doubled the p99 of the hot path.)
      const first = await this.write(ns, key, value, opts, policy, false, true);
      if (first) return first;
    }
    return this.writeLocks.run(lockId(ns, key), async () => {
      if (conditional) await this.checkPrecondition(ns, key, opts, policy);
      return (await this.write(ns, key, value, opts, policy, conditional, false))!;
    });
  }

  /**
   * If-Match / If-None-Match, checked under the key's lock so no local write interleaves; a writer in another
   * process that slips in afterwards is caught by the versioned write and reported as a conflict too. Decided on
   * the same walk as head(): when a tier that might hold the key cannot answer, the write is refused with 503
   * rather than decided on a partial view.
   */
  private async checkPrecondition(ns: string, key: string, opts: Pick<WriteOptions, 'ifMatch' | 'ifNoneMatch'>, policy: NamespacePolicy): Promise<void> {
    const near = this.nearGet(ns, key, policy);
    let current: number | null;
    if (near) current = near.entry.header.version;
    else if (near === null) current = null;
    else {
      const [w] = await this.reads.walk(ns, [key], headOne, (h) => h);
      this.reads.assertCertain(w!, policy);
      current = w!.hit ? w!.hit.item.version : null;
    }
    if (opts.ifNoneMatch && current !== null) throw new VersionConflictError(`key '${key}' already exists`, { expected: '*', current });
    if (opts.ifMatch === '*' && current === null) throw new VersionConflictError(`key '${key}' does not exist`, { expected: '*', current });
    if (typeof opts.ifMatch === 'number' && current !== opts.ifMatch) {
      throw new VersionConflictError(`key '${key}' is at version ${current ?? 'none'}, not ${opts.ifMatch}`, { expected: opts.ifMatch, current });
    }
  }

  async putMany(ns: string, items: { key: string; value: Buffer; opts?: WriteOptions }[]): Promise<WriteResult[]> {
    return mapLimit(items, 32, (i) => this.put(ns, i.key, i.value, i.opts));
  }

  async delete(ns: string, key: string, opts: { ifMatch?: number | '*' } = {}): Promise<DeleteResult> {
    const policy = this.policies.for(ns);
    return this.writeLocks.run(lockId(ns, key), async () => {
      const conditional = opts.ifMatch !== undefined;
      if (conditional) await this.checkPrecondition(ns, key, opts, policy);
      const below = this.tiers.filter((t) => t !== this.hot);
      let version = this.clock.next();
      for (let attempt = 0; ; attempt++) {
        const epoch = this.epochOf(ns, key);
        const tomb = makeTombstone(version, policy.tombstoneTtlMs);
        // Durable tiers first: once they hold the tombstone no reader can find the old value there.
        const results = await Promise.allSettled(below.map((t) => t.put(ns, key, tomb)));
        let stale = maxStale(results);
        const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [below[i]!.name] : []));
        if (stale === null && failed.length === 0 && this.hot) {
          const o = await this.copyToHot(ns, key, stampEpoch(tomb, epoch), policy, below.length > 0);
          if (o === 'stale') stale = (await this.hot.head(ns, key).catch(() => undefined))?.version ?? version;
        }
        if (stale !== null) {
          if (conditional) throw new VersionConflictError(`key '${key}' changed during the delete`, { expected: opts.ifMatch, current: stale });
          if (attempt >= MAX_RESTAMPS) return { version }; // superseded by concurrent writers (see write())
          this.clock.observe(stale);
          version = this.clock.next();
          continue;
        }
        failed.forEach((n) => this.count(n, 'errors'));
        // A durable tier may still hold the old value: the delete is not acknowledged.
        if (failed.length > 0) throw new TierUnavailableError(failed.join(','));
        this.l1?.putSync(ns, key, makeTombstone(version, policy.nearCache.ttlMs), policy.nearCache.ttlMs);
        return { version };
      }
    });
  }

  async deleteMany(ns: string, keys: string[]): Promise<DeleteResult[]> {
    return mapLimit(keys, 32, (k) => this.delete(ns, k));
  }

  // ------------------------------------------------------------------ large values

  /**
   * Moves a value uploaded through a presigned URL into place in the presigning (cold) tier, as a versioned
   * write like any other: durable tiers above it get a location marker first, the hot tier one after the commit,
   * so no older copy anywhere outlives the ack.
   */
  async commitUpload(ns: string, key: string, uploadId: string, opts: Omit<WriteOptions, 'ifMatch' | 'ifNoneMatch'> = {}): Promise<WriteResult> {
    const policy = this.policies.for(ns);
    const target = this.tiers.find(supportsPresigning);
    if (!target || !supportsPresigning(target)) throw new StrataError('TIER_UNAVAILABLE', 'no tier supports uploads');
    const ttl = opts.ttlSeconds === undefined ? policy.defaultTtlSeconds : opts.ttlSeconds;
    const expiresAt = ttl === null ? null : Date.now() + ttl * 1000;
    const upper = this.tiers.slice(0, this.tiers.indexOf(target)).filter((t) => t !== this.hot);
    return this.writeLocks.run(lockId(ns, key), async () => {
      let version = this.clock.next();
      for (let attempt = 0; ; attempt++) {
        const epoch = this.epochOf(ns, key);
        const marker = makeLocationMarker(version, expiresAt);
        const shadows = await Promise.allSettled(upper.map((t) => t.put(ns, key, marker)));
        let stale = maxStale(shadows);
        const failed = shadows.flatMap((r, i) => (r.status === 'rejected' ? [upper[i]!.name] : []));
        if (failed.length > 0) throw new TierUnavailableError(failed.join(','));
        if (stale === null) {
          const o = await target.commitUpload(uploadId, ns, key, { version, expiresAt, tags: opts.tags ?? [], ...(opts.contentType ? { contentType: opts.contentType } : {}), flags: {} });
          if (o.applied) {
            if (this.hot && target !== this.hot) await this.copyToHot(ns, key, stampEpoch(marker, epoch), policy, true);
            this.l1?.putSync(ns, key, marker, policy.nearCache.ttlMs);
            return { version, expiresAt, size: o.size, tiers: [target.name], durable: true };
          }
          stale = o.current ?? version;
        }
        if (attempt >= MAX_RESTAMPS) throw new StrataError('TIER_UNAVAILABLE', 'the upload kept losing to concurrent writes of the same key; commit it again');
        this.clock.observe(stale);
        version = this.clock.next();
      }
    });
  }

  /** Makes sure `tierName` holds the live version of a key (e.g. before presigning a download from cold). */
  async ensureIn(tierName: TierName, ns: string, key: string): Promise<void> {
    const tier = this.byName.get(tierName);
    if (!tier) return;
    const r = await this.get(ns, key);
    if (!r) return;
    const there = await tier.head(ns, key);
    if (there && there.version >= r.entry.header.version) return;
    await tier.put(ns, key, copyForTier(r.entry));
  }

  // ------------------------------------------------------------------ write-back

  /**
   * Writes dirty (write-back) entries of the hot tier down to the namespace's durable tiers and marks them
   * clean. Safe to call concurrently (calls share one pass). Returns how many entries were flushed.
   */
  async flushDirty(limit = 1000): Promise<number> {
    return this.flusher ? this.flusher.flush(limit) : 0;
  }

  /** Flushes if write-back is in use and the shortest flush interval has passed (for Lambda's end of invocation). */
  async flushIfDue(): Promise<number> {
    return this.flusher ? this.flusher.flushIfDue() : 0;
  }

  // ------------------------------------------------------------------ lifecycle and stats

  /** Waits for background promotions to settle (tests, graceful shutdown). */
  async drain(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  async close(): Promise<void> {
    this.flusher?.stop();
    await this.drain();
    if (this.policies.minFlushIntervalMs() !== null) await this.flushDirty().catch((e) => this.onBackgroundError(e, 'final flush'));
    await Promise.allSettled([...this.tiers, ...(this.l1 ? [this.l1] : [])].map((t) => t.close()));
  }

  async stats(): Promise<{
    uptimeSeconds: number;
    tiers: (TierStats & TierCounters & { ok: boolean })[];
    promotions: number;
    flushed: number;
    hotFence?: { active: boolean; leaseMs: number; bumps: number; unknownHotCopies: number };
  }> {
    const all: Tier[] = [...(this.l1 ? [this.l1] : []), ...this.tiers];
    const tiers = await Promise.all(
      all.map(async (t) => {
        const c = this.counters.get(t.name) ?? { hits: 0, misses: 0, errors: 0 };
        try {
          return { ...(await t.stats()), ...c, ok: true };
        } catch {
          return { name: t.name, kind: t.kind, ...c, ok: false };
        }
      }),
    );
    const fence = this.fence ? { hotFence: { active: this.fence.active, leaseMs: this.fence.leaseMs, bumps: this.fence.bumpCount, unknownHotCopies: this.hotUnknown } } : {};
    return { uptimeSeconds: Math.round((Date.now() - this.started) / 1000), tiers, promotions: this.promotions, flushed: this.flusher?.flushed ?? 0, ...fence };
  }

  async health(): Promise<{ status: 'ok' | 'degraded' | 'down'; tiers: Record<string, { kind: string; ok: boolean }> }> {
    const tiers: Record<string, { kind: string; ok: boolean }> = {};
    await Promise.all(
      this.tiers.map(async (t) => {
        const ok = await withTimeout(t.ping(), 2000).then(() => true, () => false);
        tiers[t.name] = { kind: t.kind, ok };
      }),
    );
    const up = Object.values(tiers).filter((t) => t.ok).length;
    return { status: up === this.tiers.length ? 'ok' : up === 0 ? 'down' : 'degraded', tiers };
  }

  // ------------------------------------------------------------------ internals

  /** L1 lookup: a live copy, null for a fresh local tombstone (deleted here), undefined to go further. */
  private nearGet(ns: string, key: string, policy: NamespacePolicy): ReadResult | null | undefined {
    if (!this.l1 || !policy.nearCache.enabled) return undefined;
    const e = this.l1.getSync(ns, key);
    if (!e) return undefined;
    if (e.header.flags.tombstone) return null;
    if (!isLive(e.header)) return undefined;
    this.count('l1', 'hits');
    return { entry: e, tier: 'l1' };
  }

  private nearFill(ns: string, key: string, entry: Entry, policy: NamespacePolicy): void {
    if (!this.l1 || !policy.nearCache.enabled || entry.value.length > policy.nearCache.maxValueBytes) return;
    this.l1.putSync(ns, key, copyForTier(entry), policy.nearCache.ttlMs);
  }

  /**
   * Promotes a hit from below into the upper tiers the namespace writes to. The hot copy carries the epoch taken
   * before the walk read anything: if a write's hot copy failed meanwhile, its bump makes this one stale too.
   */
  private afterHit(ns: string, key: string, hit: ReadResult, level: number, epoch: number, policy: NamespacePolicy, staleHot?: number): void {
    this.nearFill(ns, key, hit.entry, policy);
    if (!policy.promoteOnRead || level === 0) return;
    const upper = this.tiers.slice(0, level).filter((t) => policy.writeTiers.includes(t.name as 'hot' | 'warm' | 'cold') && !(t === this.hot && hit.entry.value.length >= policy.writeAroundBytes));
    if (upper.length === 0) return;
    const entry = copyForTier(hit.entry);
    const residencyMs = policy.hotResidencySeconds * 1000;
    const toHot = async (t: Tier): Promise<boolean> => {
      // Equal versions never replace each other: a fenced-off copy of this very version is removed first (only
      // that exact version, so a newer write landing meanwhile stays).
      if (staleHot === entry.header.version) await t.delete(ns, key, staleHot);
      const copy = stampEpoch(entry, epoch);
      if (!supportsConfirming(t)) return (await t.put(ns, key, copy, { residencyMs })).applied;
      return (await copyPendingToHot(t, ns, key, copy, this.tiers.slice(1, level + 1), residencyMs)).result === 'confirmed';
    };
    this.track(
      Promise.all(upper.map((t) => (t === this.hot ? toHot(t) : t.put(ns, key, entry).then((o) => o.applied)))).then((applied) => {
        if (applied.includes(true)) this.promotions++;
      }),
      'promotion',
    );
  }

  private loadFromOrigin(ns: string, key: string, policy: NamespacePolicy): Promise<ReadResult | undefined> {
    const origin = policy.origin!;
    return this.originLoads.run(lockId(ns, key), async () => {
      const loaded = await fetchFromOrigin(origin, key);
      if (!loaded) return undefined;
      const written = await this.writeLocks.run(lockId(ns, key), () => this.write(ns, key, loaded.value, { ttlSeconds: origin.ttlSeconds, contentType: loaded.contentType }, policy, false, false).then((w) => w!));
      const header: EntryHeader = { version: written.version, expiresAt: written.expiresAt, size: written.size, hash: contentHash(loaded.value), tags: [], contentType: loaded.contentType, flags: {} };
      this.count('origin', 'hits');
      return { entry: { header, value: loaded.value }, tier: 'origin' };
    });
  }

  /**
   * Stamps and writes; re-stamps above a newer version it lost to, up to MAX_RESTAMPS times. `firstTryOnly`:
   * resolves undefined instead of re-stamping when the first attempt loses (the caller retries under the lock).
   */
  private async write(ns: string, key: string, value: Buffer, opts: WriteOptions, policy: NamespacePolicy, conditional: boolean, firstTryOnly: boolean): Promise<WriteResult | undefined> {
    const ttl = opts.ttlSeconds === undefined ? policy.defaultTtlSeconds : opts.ttlSeconds;
    const base: Omit<EntryHeader, 'version'> = {
      expiresAt: ttl === null ? null : Date.now() + ttl * 1000,
      size: value.length,
      hash: contentHash(value),
      tags: opts.tags ?? [],
      ...(opts.contentType ? { contentType: opts.contentType } : {}),
      flags: {},
    };
    let version = this.clock.next();
    for (let attempt = 0; ; attempt++) {
      const entry: Entry = { header: { ...base, version }, value };
      const r = await this.writeOnce(ns, key, entry, policy);
      if (r.ok) {
        this.nearFill(ns, key, entry, policy);
        return { version, expiresAt: base.expiresAt, size: value.length, tiers: r.tiers, durable: r.durable };
      }
      if (conditional) throw new VersionConflictError(`key '${key}' changed during the write`, { current: r.current });
      if (firstTryOnly) {
        this.clock.observe(r.current);
        return undefined;
      }
      // Each re-stamp put us above every version seen so far; losing again means writers in other processes
      // wrote concurrently. Ordering this write just before theirs is a valid linearisation: it is acknowledged
      // as superseded rather than failed (it did not come after them, so readers rightly see theirs).
      if (attempt >= MAX_RESTAMPS) return { version, expiresAt: base.expiresAt, size: value.length, tiers: [], durable: true, superseded: true };
      this.clock.observe(r.current);
      version = this.clock.next();
    }
  }

  /** Tiers below hot that a write of this namespace must reach before it is acknowledged (cached per policy). */
  private durableTargets(policy: NamespacePolicy): Tier[] {
    let targets = this.durableByPolicy.get(policy);
    if (!targets) {
      targets = this.tiers.filter((t) => t !== this.hot && policy.writeTiers.includes(t.name as 'warm' | 'cold'));
      this.durableByPolicy.set(policy, targets);
    }
    return targets;
  }

  /** The hot epoch of a key's shard now (0 without a fence): taken before an attempt writes or reads anything. */
  private epochOf(ns: string, key: string): number {
    return this.fence && this.hot ? this.fence.current()[keyShardIndex(ns, key)]! : 0;
  }

  private async writeOnce(ns: string, key: string, entry: Entry, policy: NamespacePolicy): Promise<Attempt> {
    const hot = policy.writeTiers.includes('hot') ? this.hot : undefined;
    const durable = this.durableTargets(policy);
    // With nowhere else to go, a large value still lands in hot.
    const around = durable.length > 0 && entry.value.length >= policy.writeAroundBytes;
    const epoch = this.epochOf(ns, key);

    if (hot && !around && policy.writeMode === 'write-back' && supportsDirtyTracking(hot) && durable.length > 0) {
      const dirty = stampEpoch({ header: { ...entry.header, flags: { dirty: true } }, value: entry.value }, epoch);
      try {
        const o = await hot.put(ns, key, dirty);
        if (o.applied) return { ok: true, tiers: ['hot'], durable: false };
        if (!o.full) return { ok: false, current: o.current! };
        // No room for more dirty data: write this one through instead.
      } catch {
        this.count('hot', 'errors'); // hot is down: write through to the durable tiers
      }
    }

    if (durable.length === 0) {
      // Hot is the only copy: it must take the value itself.
      if (!hot) throw new StrataError('TIER_UNAVAILABLE', 'the namespace writes to no configured tier', { tier: 'none' });
      let o: WriteOutcome;
      try {
        o = await hot.put(ns, key, entry);
      } catch (e) {
        this.count('hot', 'errors');
        throw e instanceof TierUnavailableError ? e : new TierUnavailableError('hot', e);
      }
      if (o.applied) return { ok: true, tiers: ['hot'], durable: false };
      if (o.full) throw new StrataError('TIER_UNAVAILABLE', 'the hot tier is full and the namespace writes to no other tier', { tier: 'hot' });
      return { ok: false, current: o.current! };
    }

    const below = await this.putDurable(ns, key, entry, durable);
    if (!below.ok) return below;
    const tiers = below.tiers;
    if (hot) {
      const copy = around ? makeLocationMarker(entry.header.version, entry.header.expiresAt) : entry;
      const o = await this.copyToHot(ns, key, stampEpoch(copy, epoch), policy, true);
      if (o === 'applied' && !around) tiers.unshift('hot');
    }
    return { ok: true, tiers, durable: true };
  }

  /**
   * Writes an entry to the durable tiers. A tier that refuses it for lack of room (a full cache node) gets a
   * location marker instead, which always fits and shadows any older copy there; the write stands as long as
   * another durable tier took the value, and is refused with 503 otherwise, before anything is changed.
   */
  private async putDurable(ns: string, key: string, entry: Entry, durable: Tier[]): Promise<Attempt & { ok: true } | Attempt & { ok: false }> {
    const results = await Promise.allSettled(durable.map((t) => t.put(ns, key, entry)));
    const stale = maxStale(results);
    if (stale !== null) return { ok: false, current: stale };
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [durable[i]!.name] : []));
    if (failed.length > 0) {
      failed.forEach((n) => this.count(n, 'errors'));
      throw new TierUnavailableError(failed.join(','));
    }
    const full = durable.filter((_, i) => (results[i] as PromiseFulfilledResult<WriteOutcome>).value.full);
    const tiers = durable.filter((t) => !full.includes(t)).map((t) => t.name);
    if (full.length > 0) {
      if (tiers.length === 0) {
        throw new StrataError('TIER_UNAVAILABLE', `tier '${full.map((t) => t.name).join(',')}' is full and the namespace writes to no other durable tier`, { tier: full.map((t) => t.name).join(','), reason: 'full' });
      }
      const marker = makeLocationMarker(entry.header.version, entry.header.expiresAt);
      const shadows = await Promise.allSettled(full.map((t) => t.put(ns, key, marker)));
      const shadowStale = maxStale(shadows);
      if (shadowStale !== null) return { ok: false, current: shadowStale };
      const unshadowed = full.filter((_, i) => { const r = shadows[i]!; return r.status === 'rejected' || !r.value.applied; });
      if (unshadowed.length > 0) {
        // An older copy would stay readable there: the write is not acknowledged.
        throw new StrataError('TIER_UNAVAILABLE', `tier '${unshadowed.map((t) => t.name).join(',')}' is full and could not be shadowed`, { tier: unshadowed.map((t) => t.name).join(','), reason: 'full' });
      }
    }
    return { ok: true, tiers, durable: true };
  }

  /** The write-back flusher's write below: true when the entry's version (or a newer one) is safe there. */
  private async writeBelow(ns: string, key: string, entry: Entry, policy: NamespacePolicy): Promise<boolean> {
    const r = await this.putDurable(ns, key, entry, this.durableTargets(policy));
    return r.ok || r.current >= entry.header.version;
  }

  /**
   * Copies a durable write (value, marker or tombstone) to hot. When hot cannot take it (down, stalled, OOM, full
   * and unshadowable), the older copy it may hold is fenced off before this resolves: the caller acknowledges
   * after. 'stale': hot holds a newer version (a newer write, already durable).
   */
  private async copyToHot(ns: string, key: string, copy: Entry, policy: NamespacePolicy, fenceOnFailure: boolean): Promise<'applied' | 'stale' | 'fenced'> {
    const hot = this.hot!;
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
      throw new StrataError('TIER_UNAVAILABLE', 'the hot tier has no room even for a location marker', { tier: 'hot' });
    } catch (error) {
      this.count('hot', 'errors');
      if (!fenceOnFailure) throw error;
      this.hotUnknown++;
      this.onEvent({ type: 'hot-copy-unknown', ns, error });
      if (!this.fence) throw error instanceof TierUnavailableError ? error : new TierUnavailableError('hot', error);
      // The write is durable; hot may still serve an older copy: raise the shard's epoch for every reader.
      await this.fence.invalidate([keyShardIndex(ns, key)]);
      return 'fenced';
    }
  }

  private track(p: Promise<unknown>, what: string): void {
    const tracked = p.catch((e) => this.onBackgroundError(e, what)).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  private count(tier: ServedBy, what: keyof TierCounters): void {
    let c = this.counters.get(tier);
    if (!c) this.counters.set(tier, (c = { hits: 0, misses: 0, errors: 0 }));
    c[what]++;
  }
}

/** A copy for the hot tier, stamped with its shard's epoch. */
function stampEpoch(e: Entry, epoch: number): Entry {
  return { header: { ...e.header, hotEpoch: epoch }, value: e.value };
}

/** The highest version a tier reported when it refused a write as stale, or null when none did. */
function maxStale(results: PromiseSettledResult<WriteOutcome>[]): number | null {
  let max: number | null = null;
  for (const r of results) {
    if (r.status === 'fulfilled' && !r.value.applied && !r.value.full && r.value.current !== null) max = Math.max(max ?? 0, r.value.current);
  }
  return max;
}

function lockId(ns: string, key: string): string {
  return `${ns}\u0000${key}`;
}
