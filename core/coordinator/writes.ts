/**
 * The coordinator's writes (coordinator.ts holds reads and composition): put, touch, delete and upload commits,
 * each stamped by the hybrid logical clock and re-stamped above a newer version it loses to (restamp.ts), one
 * attempt at a time through the tier writer (tier-writer.ts), under the key's lock where writes of one key must
 * take turns; and the conditional forms (If-Match, If-None-Match) as compare-and-sets on what the tiers hold.
 */
import { NotFoundError, permanentDetails, StrataError, VersionConflictError } from '../errors.js';
import type { Entry, EntryEncoding, EntryHeader } from '../model/entry.js';
import { makeTombstone } from '../model/entry.js';
import type { HybridLogicalClock } from '../model/hlc.js';
import { contentHash } from '../model/keys.js';
import type { PolicyRegistry, NamespacePolicy } from '../policy/namespace-settings.js';
import type { Tier } from '../tiers/tier.js';
import { supportsPresigning } from '../tiers/tier.js';
import type { Invalidations } from './invalidations.js';
import type { KeyedMutex } from './keyed-mutex.js';
import type { NearCache } from './near-cache.js';
import type { OriginWriteOptions } from './origin.js';
import { placementHeader, type Placement, type PlacementHeader } from './placement.js';
import { restamp, type Attempt } from './restamp.js';
import { headResult, type Prepared, type StoredValues } from './stored-values.js';
import { headOne, type TierWalk } from './tier-walk.js';
import type { Exclusive, TierWriter } from './tier-writer.js';
import type { DeleteResult, HeadResult, ReadResult, WriteOptions, WriteResult } from './types.js';

/** Reads and writes a touch tries when writes of the same key keep landing between them. */
export const TOUCH_ATTEMPTS = 3;

/** What the writes need from the coordinator. */
export interface KeyWritesDeps {
  /** Tiers top-down. */
  tiers: readonly Tier[];
  clock: HybridLogicalClock;
  invalidations: Invalidations;
  /** The namespace settings in force now (replaced at runtime). */
  registry: () => PolicyRegistry;
  values: StoredValues;
  near: NearCache;
  writer: TierWriter;
  reads: TierWalk;
  /** Writes of one key from this process take turns under it (the coordinator's: tests watch it). */
  locks: KeyedMutex;
  placement: (policy: NamespacePolicy, header: PlacementHeader) => Placement;
  /** The key's header as HEAD reads it (If-Match's check). */
  head: (ns: string, key: string) => Promise<HeadResult | undefined>;
  /** The live entry as the tiers store it (a touch writes it back). */
  stored: (ns: string, key: string) => Promise<ReadResult | undefined>;
  /** Caches a value just written in L1 (the coordinator's, which tests replay late). */
  nearFill: (ns: string, key: string, entry: Entry, policy: NamespacePolicy, since: number) => void;
}

export class KeyWrites {
  constructor(private readonly d: KeyWritesDeps) {}

  async put(ns: string, key: string, written: Buffer, opts: WriteOptions = {}): Promise<WriteResult> {
    // Stamped above every invalidation in force (invalidations.ts); fails closed when that is unknown.
    const ready = this.d.invalidations.ready();
    if (ready) await ready;
    const registry = this.d.registry();
    const policy = registry.forKey(ns, key, opts.tags);
    // Transformed once, before any tier sees it (stored-values.ts); every attempt writes these bytes.
    const prepared = this.d.values.prepare(registry, policy, ns, key, written, opts.tags);
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
    const r = await this.d.locks.run(lockId(ns, key), async () => {
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
    return p.dedup ? this.d.values.written(ns, p, policy).then(() => r) : r;
  }

  /**
   * If-Match, checked under the key's lock so no local write interleaves (If-None-Match: {@link createVersion}).
   * Returns the version read (null: no live entry). Decided by head(): when a tier that might hold the key cannot answer, the write is
   * refused with 503 rather than decided on a partial view. A writer in another process that slips in after the
   * check is caught by the write that follows: an If-Match write goes in at {@link casVersion} of what was read,
   * which every later write is at or above, so it is refused and reported as a conflict (a write at a fresh clock
   * version would not be: a clock ahead of the other writer's would put it above, and undo, their acknowledged
   * write).
   */
  private async checkPrecondition(ns: string, key: string, opts: Pick<WriteOptions, 'ifMatch'>): Promise<number | null> {
    // Read past this container's near copy, which may be behind another process's write (a spurious conflict).
    this.d.near.drop(ns, key);
    const current = (await this.d.head(ns, key))?.header.version ?? null;
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
    this.d.near.drop(ns, key);
    await this.d.invalidations.ready();
    const policy = this.d.registry().forRead(ns, key);
    const [w] = await this.d.reads.walk(ns, [key], headOne, (h) => h, policy.readTiers);
    this.d.reads.assertCertain(w!, policy);
    if (w!.hit) {
      const current = headResult(w!.hit.item, w!.hit.tier).header.version;
      throw new VersionConflictError(`key '${key}' already exists`, { expected: '*', current });
    }
    const record = w!.record;
    if (!record) return { at: this.d.clock.next(), ifAbsent: true };
    const floor = w!.invalidated ? Math.max(record.version, this.d.invalidations.ceiling(ns)) : record.version;
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
      const r = await this.d.stored(ns, key);
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
      const policy = this.d.registry().forKey(ns, key, header.tags);
      const expiresAt = opts.ttlSeconds === null ? null : Date.now() + opts.ttlSeconds * 1000;
      const base: Omit<EntryHeader, 'version'> = { ...header, expiresAt, flags: {} };
      const placement = this.d.placement(policy, {
        size: header.encoding?.size ?? header.size,
        tags: header.tags,
        expiresAt,
        ageMs: 0,
      });
      const w = await this.attemptWrite(ns, key, base, r.entry.value, placement, policy, casVersion(version));
      if (w.ok) return w.value;
      // A newer write is there (this container's near copy was behind, or a write landed since the read).
      this.d.near.drop(ns, key);
      if (typeof opts.ifMatch === 'number') {
        throw new VersionConflictError(`key '${key}' changed during the touch`, { expected: opts.ifMatch, current: w.current });
      }
    }
    throw new VersionConflictError(`key '${key}' kept changing during the touch; touch it again`, {
      expected: opts.ifMatch,
      current: null,
    });
  }

  async delete(ns: string, key: string, opts: { ifMatch?: number | '*' } = {}): Promise<DeleteResult> {
    await this.d.invalidations.ready();
    const policy = this.d.registry().forRead(ns, key);
    return this.d.locks.run(lockId(ns, key), async () => {
      const tombstone = async (version: number): Promise<Attempt<DeleteResult>> => {
        const since = this.d.near.time();
        const r = await this.d.writer.tombstone(ns, key, version, policy);
        if (!r.ok) return r;
        this.d.near.shadow(ns, key, makeTombstone(version, policy.nearCache.ttlMs), policy, since);
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
        this.d.clock.observe(version);
        return r.value;
      }
      // Superseded by concurrent writers in other processes, as a write can be (see restamp.ts).
      return restamp(this.d.clock, tombstone, { exhausted: (version) => ({ version }) });
    });
  }

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
    await this.d.invalidations.ready();
    const registry = this.d.registry();
    const policy = registry.forKey(ns, key, opts.tags);
    // Uploaded bytes never pass through Strata, so they cannot be compressed or encrypted on their way in.
    this.d.values.refuseUpload(registry, ns, key, opts.tags);
    const target = this.d.tiers.find(supportsPresigning);
    if (!target || !supportsPresigning(target))
      throw new StrataError('TIER_UNAVAILABLE', 'no tier supports uploads', permanentDetails());
    const ttl = opts.ttlSeconds === undefined ? policy.defaultTtlSeconds : opts.ttlSeconds;
    const expiresAt = ttl === null ? null : Date.now() + ttl * 1000;
    const meta = { tags: opts.tags ?? [], ...(opts.contentType ? { contentType: opts.contentType } : {}), flags: {} };
    return this.d.locks.run(lockId(ns, key), () =>
      restamp(
        this.d.clock,
        async (version): Promise<Attempt<WriteResult>> => {
          const since = this.d.near.time();
          const r = await this.d.writer.commitUpload(ns, key, target, uploadId, { version, expiresAt, ...meta }, policy);
          if (!r.ok) return r;
          this.d.near.shadow(ns, key, r.value.marker, policy, since);
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
   * Stamps a value and writes it where placement says, re-stamped above any newer version it loses to (restamp.ts).
   * 'first-try': resolves undefined instead of re-stamping when the first attempt loses (the caller retries under
   * the key's lock); 'conditional': a loss is a conflict. `at`: exactly that version (a compare-and-set, see
   * casVersion), never re-stamped, arbitrated by one tier (tier-writer.ts, Exclusive); 'create': `at` is a fresh
   * version, applied only where the arbitrating tier holds no record of the key (createVersion).
   */
  async write(
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
    const placement = this.d.placement(policy, { size, tags: base.tags, expiresAt: base.expiresAt, ageMs: 0 });
    if (mode === 'first-try') {
      // One attempt, no re-stamp (the lock-free common case; put() re-stamps under the key's lock when it lost).
      // Called directly rather than through restamp(): closures made per write cost ~5% of PUT throughput.
      const r = await this.attemptWrite(ns, key, base, value, placement, policy, this.d.clock.next());
      if (r.ok) return r.value;
      this.d.clock.observe(r.current);
      return undefined;
    }
    if (at !== undefined) {
      // A compare-and-set (If-Match, If-None-Match): exactly this version, and a loss is a conflict.
      const exclusive = { ifAbsent: mode === 'create' };
      const r = await this.attemptWrite(ns, key, base, value, placement, policy, at, exclusive);
      if (!r.ok) throw conflictDuringWrite(key, r.current);
      this.d.clock.observe(at);
      return r.value;
    }
    const { expiresAt } = base;
    return restamp<WriteResult, WriteResult | undefined>(
      this.d.clock,
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
    const since = this.d.near.time();
    const r = await this.d.writer.write(ns, key, entry, placement, policy, exclusive);
    if (!r.ok) return r;
    this.d.nearFill(ns, key, entry, policy, since);
    const size = base.encoding?.size ?? base.size;
    return { ok: true, value: { version, expiresAt: base.expiresAt, size, ...r.value } };
  }

  /** The write-back flusher's write below: true when the entry's version (or a newer one) is safe there. */
  async writeBelow(ns: string, key: string, entry: Entry, policy: NamespacePolicy): Promise<boolean> {
    const placement = this.d.placement(policy, placementHeader(entry));
    const r = await this.d.writer.putDurable(ns, key, entry, this.d.writer.tiersNamed(placement.durable));
    return r.ok || r.current >= entry.header.version;
  }

  /** A storeOnce blob's write (stored-values.ts): a plain versioned write of bytes already transformed. */
  async writeBlob(ns: string, key: string, value: Buffer, encoding: EntryEncoding | undefined, policy: NamespacePolicy) {
    await this.d.locks.run(lockId(ns, key), () => this.write(ns, key, value, encoding, { ttlSeconds: null }, policy, 'restamp'));
  }

  /** An origin's value (origin.ts): transformed as a put's, and at exactly `at` when given (a refresh's compare-and-set). */
  async writeOrigin(
    ns: string,
    key: string,
    value: Buffer,
    opts: OriginWriteOptions,
    policy: NamespacePolicy,
    at: number | undefined,
  ): Promise<WriteResult> {
    const p = await this.d.values.prepare(this.d.registry(), policy, ns, key, value, []);
    const mode = at === undefined ? 'restamp' : 'conditional';
    const written = (await this.d.locks.run(lockId(ns, key), () =>
      this.write(ns, key, p.value, p.encoding, opts, policy, mode, at),
    ))!;
    await this.d.values.written(ns, p, policy);
    return written;
  }

  /** An origin's 404, remembered for `ttlMs` as a negative tombstone (origin.ts, negativeTtlSeconds). */
  forgetOrigin(ns: string, key: string, policy: NamespacePolicy, version: number, ttlMs: number): Promise<boolean> {
    return this.d.locks.run(lockId(ns, key), async () => {
      const since = this.d.near.time();
      const r = await this.d.writer.tombstone(ns, key, version, policy, { ttlMs });
      const ms = Math.min(ttlMs, policy.nearCache.ttlMs);
      if (r.ok) this.d.near.shadow(ns, key, makeTombstone(version, ms, Date.now(), true), policy, since);
      return r.ok;
    });
  }
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

function lockId(ns: string, key: string): string {
  return `${ns}\u0000${key}`;
}
