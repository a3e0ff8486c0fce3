import { TierUnavailableError } from '../errors.js';
import type { Entry } from '../model/entry.js';
import { contentHash, SYSTEM_NAMESPACE } from '../model/keys.js';
import type { Incarnations, Tier } from '../tiers/tier.js';
import { supportsIncarnations } from '../tiers/tier.js';

/**
 * Fencing of the hot tier's copies, so that no read returns a version older than one already acknowledged,
 * whatever the hot tier does (stalls, refuses writes when full, restarts from an older snapshot, fails over to a
 * replica that lags).
 *
 * The hot tier is a cache of the durable tiers (warm, cold): a write is made durable first and copied to hot
 * after. When that copy fails or its outcome is unknown (a timeout, a reset connection, OOM), the hot tier may
 * keep an older copy of the key, which every coordinator would serve. Instead of trusting hot blindly, every hot
 * copy carries the *epoch* of its shard (one of 256, `keyShardIndex`) current when its data was taken, and readers
 * serve a clean hot copy alone only when its epoch is at least the shard's current epoch:
 *
 * - The epochs live in one small document in a durable tier (the fence register), changed by compare-and-set.
 * - A coordinator that could not update hot after a durable write raises the shard's epoch (bumps are
 *   group-committed: one register write serves every write that needs one) and acknowledges only `leaseMs`
 *   after the bump is durable.
 * - Readers refresh the document on demand and trust their copy for `leaseMs` from the moment they started
 *   reading it. With an expired copy, or while the hot tier's incarnation is being checked after a reconnect,
 *   clean hot copies are not served alone (the read goes on to the durable tiers).
 * - Together: once a bump is acknowledged, no reader anywhere still holds an epoch that accepts the stale copy.
 *   Time is only measured as local durations (a lease and a wait of the same length), never compared across
 *   machines.
 *
 * Dirty (write-back) copies are the newest version of their key by construction and have no durable copy yet:
 * they stay candidates whatever their epoch, and the coordinator compares them with the durable tiers when the
 * epoch is stale. A hot tier that can restart or fail over ({@link Incarnations}) is checked after every
 * (re)connect; a new incarnation raises every shard's epoch before hot is trusted again.
 */
export const FENCE_SHARDS = 256;

/** The durable document: one epoch per shard, and the document's own version (compare-and-set). */
export interface FenceDocument {
  version: number;
  epochs: number[];
}

/** Where the fence document is kept: any durable store with a compare-and-set write. */
export interface FenceRegister {
  read(): Promise<FenceDocument | undefined>;
  /** Writes `doc` only if the stored version is `doc.version - 1` (none stored for version 1). */
  write(doc: FenceDocument): Promise<boolean>;
}

/** The key of the fence document in its tier (a namespace the API refuses, so no tenant can touch it). */
export const FENCE_KEY = 'hot-fence';

/**
 * A fence register kept as an entry of a durable tier. A tier's versioned put applies only over an older
 * version, so a put of version n + 1 after reading version n is a compare-and-set: of two coordinators that
 * both read n, exactly one writes n + 1.
 */
export function tierFenceRegister(tier: Tier): FenceRegister {
  return {
    async read() {
      const e = await tier.get(SYSTEM_NAMESPACE, FENCE_KEY);
      if (!e || e.header.flags.tombstone || e.header.flags.elsewhere) return undefined;
      const epochs = JSON.parse(e.value.toString('utf8')) as unknown;
      if (!Array.isArray(epochs) || epochs.length !== FENCE_SHARDS || !epochs.every((n) => Number.isSafeInteger(n) && n >= 0)) {
        throw new TierUnavailableError(tier.name, new Error('the hot-fence document is corrupt'));
      }
      return { version: e.header.version, epochs: epochs as number[] };
    },
    async write(doc) {
      const value = Buffer.from(JSON.stringify(doc.epochs));
      const header = { version: doc.version, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} };
      const entry: Entry = { header, value };
      return (await tier.put(SYSTEM_NAMESPACE, FENCE_KEY, entry)).applied;
    },
  };
}

export interface HotFenceOptions {
  register: FenceRegister;
  /**
   * How long a reader trusts the epochs it read, from the moment it started reading them; a write whose hot copy
   * failed waits this long after its bump before it is acknowledged. @default 2000
   */
  leaseMs?: number;
  /** The hot tier, when it can restart or fail over with older contents: checked after every (re)connect. */
  incarnations?: Incarnations;
  /** Monotonic milliseconds (tests inject one). @default performance.now */
  now?: () => number;
  /** Waits `ms` (tests inject one). */
  sleep?: (ms: number) => Promise<void>;
  /** Reports what the fence did on its own (bumps, refresh failures, new incarnations): a metric and a log line. */
  onEvent?: (event: FenceEvent) => void;
}

export type FenceEvent =
  /** An epoch raise was written: for `writes` writes whose hot copy failed, and/or a new hot-tier incarnation. */
  | { type: 'bump'; shards: number; writes: number; incarnation: boolean; version: number }
  /** The hot tier is a new incarnation (restarted or failed over); `first`: no incarnation was recorded before. */
  | { type: 'incarnation'; token: string; first: boolean }
  | { type: 'refresh-failed'; error: unknown }
  | { type: 'incarnation-check-failed'; error: unknown };

const MAX_CAS_TRIES = 24;
/** Readers trust the epochs for this much less than a lease (see readerLeaseMs). */
const LEASE_MARGIN = 0.05;
/** A failed incarnation check or refresh is retried on demand, at most this often. */
const RETRY_MS = 250;

interface Round {
  shards: Set<number>;
  writes: number;
  incarnation: boolean;
  done: Promise<void>;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class HotFence {
  readonly leaseMs: number;
  private readonly register: FenceRegister;
  private readonly incarnations?: Incarnations;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly onEvent: (event: FenceEvent) => void;
  /** Replaced, never changed in place: a reader that holds it holds a snapshot. */
  private epochs: readonly number[] = new Array<number>(FENCE_SHARDS).fill(0);
  private docVersion = 0;
  /** The local copy of the epochs is trusted until then (monotonic ms). */
  private validUntil = -Infinity;
  private refreshing?: Promise<void>;
  private lastRefreshFailure = -Infinity;
  /** False from a lost connection until the incarnation check (and any bump it needs) is done. */
  private trusted: boolean;
  /** Connections lost so far: a check that started before the latest loss does not restore trust. */
  private losses = 0;
  private checking?: Promise<void>;
  private lastCheckFailure = -Infinity;
  /** The round collecting shards for the next bump, and whether a bump is being written. */
  private next?: Round;
  private bumping = false;
  private bumps = 0;

  constructor(opts: HotFenceOptions) {
    this.register = opts.register;
    this.leaseMs = opts.leaseMs ?? 2000;
    if (!Number.isInteger(this.leaseMs) || this.leaseMs < 10) {
      throw new Error(`HotFence: leaseMs must be an integer >= 10 (got ${opts.leaseMs})`);
    }
    this.incarnations = opts.incarnations;
    this.now = opts.now ?? (() => performance.now());
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.onEvent = opts.onEvent ?? (() => {});
    this.trusted = !opts.incarnations;
    opts.incarnations?.onConnectionLost(() => {
      this.losses++;
      this.trusted = false;
    });
  }

  /**
   * The epochs now, to stamp on hot copies (`[shard]`). Take them before the data is read or written below: a bump
   * that happens after that makes the copy stale, which is the safe direction. The array is a snapshot.
   */
  current(): readonly number[] {
    return this.epochs;
  }

  /**
   * The epochs a read starting now may judge clean hot copies by (a copy is confirmed when its epoch is at least
   * its shard's): the array while the lease holds; null when hot copies cannot be judged (the hot tier's
   * incarnation is unchecked, or the register cannot be read); or a promise to wait for (a refresh or check one
   * small register read away, cheaper than a durable read and a promotion), then ask again. Checking the lease
   * once, when the read starts, is enough: a read can only return an older version than a write acknowledged
   * before it started, and that write waited a lease after its bump.
   */
  readerView(): readonly number[] | null | Promise<void> {
    if (!this.trusted) {
      this.checkIncarnation();
      return this.checking ?? null;
    }
    const now = this.now();
    if (now >= this.validUntil) {
      this.refresh(now);
      return this.refreshing ?? null;
    }
    if (now >= this.validUntil - this.leaseMs / 2) this.refresh(now);
    return this.epochs;
  }

  /** Whether hot copies are trusted at all right now (for stats and tests). */
  get active(): boolean {
    return this.trusted && this.now() < this.validUntil;
  }

  /** Epoch bumps written by this process. */
  get bumpCount(): number {
    return this.bumps;
  }

  /**
   * Makes hot copies of `shards` taken before this call unreadable for every coordinator. Resolves once no reader
   * can accept them any more (the bump is durable and a lease has passed); rejects when the register cannot be
   * written, in which case the caller must not acknowledge.
   */
  invalidate(shards: Iterable<number>, why: 'write' | 'incarnation' = 'write'): Promise<void> {
    let round = this.next;
    if (!round) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      round = this.next = { shards: new Set(), writes: 0, incarnation: false, done, resolve, reject };
    }
    for (const s of shards) round.shards.add(s);
    if (why === 'write') round.writes++;
    else round.incarnation = true;
    if (!this.bumping) void this.bumpLoop();
    return round.done;
  }

  /**
   * Writes the collected rounds one at a time: a round joined while a bump is being written waits for the next
   * write, not for the previous round's lease (each round's lease runs on its own), so a write whose hot copy
   * failed waits about one lease and two register writes.
   */
  private async bumpLoop(): Promise<void> {
    this.bumping = true;
    try {
      while (this.next) {
        const round = this.next;
        this.next = undefined;
        try {
          const version = await this.bump(round.shards);
          this.onEvent({
            type: 'bump',
            shards: round.shards.size,
            writes: round.writes,
            incarnation: round.incarnation,
            version,
          });
          void this.waitUntil(this.now() + this.leaseMs).then(round.resolve);
        } catch (e) {
          round.reject(e);
        }
      }
    } finally {
      this.bumping = false;
    }
  }

  /**
   * Waits until the monotonic clock reaches `at`. A timer alone is not enough: Node schedules it against the event
   * loop's cached time, so under load it can fire a few milliseconds before the lease has really passed.
   */
  private async waitUntil(at: number): Promise<void> {
    for (let left = at - this.now(); left > 0; left = at - this.now()) await this.sleep(Math.ceil(left));
  }

  private async bump(shards: Set<number>): Promise<number> {
    for (let attempt = 0; attempt < MAX_CAS_TRIES; attempt++) {
      const started = this.now();
      const doc = (await this.register.read()) ?? { version: 0, epochs: new Array<number>(FENCE_SHARDS).fill(0) };
      const epochs = doc.epochs.slice();
      for (const s of shards) epochs[s] = Math.max(epochs[s]!, this.epochs[s]!) + 1;
      const next = { version: doc.version + 1, epochs };
      if (await this.register.write(next)) {
        this.bumps++;
        this.adopt(next, started);
        return next.version;
      }
      // Another container raised epochs meanwhile (after a Redis outage many do at once): back off with jitter.
      await this.sleep(Math.random() * Math.min(500, 10 * 2 ** attempt));
    }
    const why = `the hot-fence document kept changing under ${MAX_CAS_TRIES} compare-and-set attempts`;
    throw new TierUnavailableError('hot-fence', new Error(why));
  }

  /** Reads the register in the background (one read at a time); a failure is retried on a later demand. */
  private refresh(now: number): void {
    if (this.refreshing || now - this.lastRefreshFailure < RETRY_MS) return;
    this.refreshing = this.refreshNow()
      .catch((error) => {
        this.lastRefreshFailure = this.now();
        this.onEvent({ type: 'refresh-failed', error });
      })
      .finally(() => (this.refreshing = undefined));
  }

  /** Reads the register now (also the first read, which callers may await to start warm). */
  async refreshNow(): Promise<void> {
    const started = this.now();
    const doc = await this.register.read();
    if (doc) this.adopt(doc, started);
    else this.validUntil = Math.max(this.validUntil, started + this.readerLeaseMs());
  }

  /** Takes a document read (or written) from `started` on; epochs never go backwards locally. */
  private adopt(doc: FenceDocument, started: number): void {
    if (doc.version > this.docVersion || (doc.version === this.docVersion && doc.epochs !== this.epochs)) {
      this.epochs = this.epochs.map((e, s) => Math.max(e, doc.epochs[s]!));
      this.docVersion = doc.version;
    }
    this.validUntil = Math.max(this.validUntil, started + this.readerLeaseMs());
  }

  /**
   * How long a reader trusts what it read: a little less than the writers' wait, so that timer imprecision and
   * the clocks of two machines running at slightly different rates can never make a reader outlast a writer.
   */
  private readerLeaseMs(): number {
    return this.leaseMs * (1 - LEASE_MARGIN);
  }

  /**
   * After a (re)connect: is hot the same incarnation (process, primary) whose copies the epochs describe? If not,
   * every shard is bumped before hot is trusted again, then the new incarnation is recorded in hot itself.
   */
  private checkIncarnation(): void {
    if (this.checking || !this.incarnations || this.now() - this.lastCheckFailure < RETRY_MS) return;
    const inc = this.incarnations;
    const losses = this.losses;
    this.checking = (async () => {
      const seen = await inc.checkIncarnation();
      if (!seen.same) {
        await this.invalidate(
          Array.from({ length: FENCE_SHARDS }, (_, s) => s),
          'incarnation',
        );
        await inc.confirmIncarnation(seen.token);
        this.onEvent({ type: 'incarnation', token: seen.token, first: seen.previous === null });
      }
      if (this.losses === losses) this.trusted = true;
    })()
      .catch((error) => {
        this.lastCheckFailure = this.now();
        this.onEvent({ type: 'incarnation-check-failed', error });
      })
      .finally(() => (this.checking = undefined));
  }

  /** Resolves once hot is trusted and the epochs are fresh (start-up and tests); never throws. */
  async settle(): Promise<void> {
    await this.refreshNow().catch(() => {});
    if (!this.trusted) {
      this.checkIncarnation();
      await this.checking;
    }
  }
}

/**
 * The coordinator's fence (CoordinatorOptions.hotFence): the one given, none when asked for none or when there is no
 * hot tier above a durable one (nothing to fence, or nowhere durable to keep the register), or else a fence whose
 * register is kept in the lowest tier (the most durable one).
 */
export function hotFenceFor(
  opt: HotFence | { leaseMs?: number } | false | undefined,
  tiers: readonly Tier[],
  hot: Tier | undefined,
  onEvent: (e: FenceEvent) => void,
): HotFence | undefined {
  if (opt instanceof HotFence) return opt;
  const lowest = tiers[tiers.length - 1]!;
  if (opt === false || !hot || lowest === hot) return undefined;
  return new HotFence({
    register: tierFenceRegister(lowest),
    leaseMs: opt?.leaseMs,
    incarnations: supportsIncarnations(hot) ? hot : undefined,
    onEvent,
  });
}
