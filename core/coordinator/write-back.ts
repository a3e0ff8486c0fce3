import { copyForTier, type Entry } from '../model/entry.js';
import type { DirtyTracking, Tier } from '../tiers/tier.js';
import { mapLimit } from '../util/concurrency.js';
import type { NamespacePolicy, PolicyRegistry } from '../policy/namespace-settings.js';

export interface WriteBackFlusherOptions {
  /** The hot tier holding the dirty entries. */
  hot: Tier & DirtyTracking;
  /** The settings in force (read at each pass: a policy replaced at runtime applies to the next one). */
  policies: () => PolicyRegistry;
  /**
   * Writes a clean copy to the namespace's durable tiers as a write-through write would; resolves true when this
   * version (or a newer one) is safe there.
   */
  writeBelow: (ns: string, key: string, entry: Entry, policy: NamespacePolicy) => Promise<boolean>;
  /** Start the flush timer at this interval (ms); null: flushes only when asked (Lambda's end of invocation). */
  intervalMs: number | null;
  /** A pass that failed: `what` is 'write-back flush' (the timer's) or 'final flush' (at close). Never thrown. */
  onError: (error: unknown, what: string) => void;
  /** Dirty entries the hot tier found gone before their flush (write-back losses), reported after each pass. */
  onLost?: (count: number) => void;
}

/** The longest a flusher waits between passes while it drains what an ended write-back policy left dirty. */
const MAX_DRAIN_INTERVAL_MS = 1000;

/** Entries a pass lists at most. */
const PASS_LIMIT = 1000;

/**
 * How long a timer's passes may follow one another while each finds a full batch (a backlog): at least this, else
 * the interval. Without it the flusher wrote at most one batch per interval (200 entries a second at 5 s), and
 * under a sustained write-back load the time to reach the durable tiers grew with the backlog, not the interval.
 */
const MIN_BACKLOG_MS = 1000;

/**
 * Write-back: dirty hot entries are written down to their namespace's durable tiers and then marked clean (which
 * also gives the hot copy its residency TTL, so a full hot tier can evict it). Until then an acknowledged
 * write-back write exists only in hot: see `durable: false` in the write's result and docs/API.md.
 */
export class WriteBackFlusher {
  private readonly opts: WriteBackFlusherOptions;
  private timer?: NodeJS.Timeout;
  private running?: Promise<number>;
  private last = 0;
  private done = 0;
  /** The last pass listed a full batch: more may be dirty. */
  private full = false;
  private intervalMs: number | null = null;
  /** While draining: the interval of the last settings that had write-back. */
  private drainInterval = 1000;
  /**
   * Write-back was in force and no longer is: dirty entries written under the old policy may still be in hot, so
   * the flusher keeps its last interval until a pass finds nothing dirty.
   */
  private draining = false;
  /** The shortest write-back interval of the settings before the last change (null: they had none). */
  private policyInterval: number | null;
  /** Dirty copies that landed while the settings in force had no write-back (see {@link dirtied}). */
  private lateDirty = 0;

  constructor(opts: WriteBackFlusherOptions) {
    this.opts = opts;
    this.policyInterval = opts.policies().minFlushIntervalMs();
    this.schedule(opts.intervalMs);
  }

  /**
   * The policy changed: flush at its shortest write-back interval. A policy without write-back keeps the old
   * timer running until hot holds nothing dirty, so no write acknowledged under write-back is left unflushed.
   */
  retime(timer: boolean): void {
    const next = this.opts.policies().minFlushIntervalMs();
    if (next === null && this.policyInterval !== null) this.draining = true;
    if (next !== null) this.draining = false;
    // Drain within a second: whoever ended write-back wants what it acknowledged written down now.
    if (this.policyInterval !== null) this.drainInterval = Math.min(this.policyInterval, MAX_DRAIN_INTERVAL_MS);
    this.policyInterval = next;
    const wanted = next ?? (this.draining ? this.drainInterval : this.intervalMs);
    if (timer && wanted !== null && wanted !== this.intervalMs) this.schedule(wanted);
  }

  /**
   * A dirty copy landed in hot. A write that chose write-back just before settings without it came into force can
   * land after this flusher's drain found hot clean and stopped (its pass listed before the write landed); without
   * this, that acknowledged write stayed in hot alone, skipped by the final flush at shutdown too, until write-back
   * came back. So a copy landing while no write-back is in force starts (or prolongs) the drain.
   */
  dirtied(timer: boolean): void {
    if (this.policyInterval !== null) return; // the policy's own timer flushes it
    this.lateDirty++;
    if (this.draining) return;
    this.draining = true;
    if (timer && this.intervalMs !== this.drainInterval) this.schedule(this.drainInterval);
  }

  private schedule(intervalMs: number | null): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.intervalMs = intervalMs;
    if (intervalMs === null) return;
    this.timer = setInterval(() => void this.drain().catch((e) => this.opts.onError(e, 'write-back flush')), intervalMs);
    this.timer.unref();
  }

  /** The interval in force: the policy's shortest, else (draining) the last one. */
  private interval(): number | null {
    return this.opts.policies().minFlushIntervalMs() ?? (this.draining ? this.drainInterval : null);
  }

  /** Entries flushed so far. */
  get flushed(): number {
    return this.done;
  }

  /** One pass over up to `limit` dirty entries, oldest first; concurrent calls share the pass. */
  flush(limit = PASS_LIMIT): Promise<number> {
    this.running ??= this.pass(limit).finally(() => (this.running = undefined));
    return this.running;
  }

  /**
   * Flushes if the shortest flush interval in force has passed since the last pass: one pass, or (`backlogMs`) passes
   * while a backlog lasts, for up to that long.
   */
  async flushIfDue(backlogMs = 0): Promise<number> {
    const interval = this.interval();
    if (interval === null || Date.now() - this.last < interval) return 0;
    return backlogMs > 0 ? this.drain(backlogMs) : this.flush();
  }

  /**
   * Passes one after another while each finds a full batch, for up to `budgetMs` (at least a second, else the
   * interval): what a timer tick (and the policy ticker's flush) does, so a backlog is written down at the tiers'
   * speed rather than one batch per interval. Resolves with the entries flushed.
   */
  async drain(budgetMs = Math.max(this.intervalMs ?? 0, MIN_BACKLOG_MS)): Promise<number> {
    const until = Date.now() + budgetMs;
    let flushed = 0;
    for (;;) {
      const done = await this.flush();
      flushed += done;
      // A pass that wrote nothing down (the tiers below refuse or fail) is not retried at once: the next tick will.
      if (!this.full || done === 0 || Date.now() >= until) return flushed;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * The last pass at shutdown, after the timer is stopped, so that dirty entries written since the previous pass
   * reach the durable tiers before the process goes away. Only while write-back is in force; failures are reported.
   */
  async finalFlush(): Promise<void> {
    if (this.interval() === null) return;
    await this.flush().catch((e) => this.opts.onError(e, 'final flush'));
  }

  private async pass(limit: number): Promise<number> {
    this.last = Date.now();
    const { hot } = this.opts;
    const policies = this.opts.policies();
    const late = this.lateDirty;
    const dirty = await hot.listDirty(limit);
    this.full = dirty.length >= limit;
    // Hot is clean, unless a late dirty copy landed after the listing (it is listed by the next pass).
    if (dirty.length === 0 && this.draining && this.lateDirty === late) {
      this.draining = false;
      if (this.opts.policies().minFlushIntervalMs() === null) this.schedule(null);
    }
    const lost = hot.takeLostDirty?.() ?? 0;
    if (lost > 0) this.opts.onLost?.(lost);
    let done = 0;
    await mapLimit(dirty, 16, async ({ ns, key }) => {
      const e = await hot.get(ns, key);
      if (!e || !e.header.flags.dirty) return;
      const { dirty: _dirty, ...flags } = e.header.flags;
      const clean = copyForTier(e, flags);
      // The policy its write was placed by (a prefix- or tag-scoped write-back, or the namespace's).
      const policy = policies.forKey(ns, key, e.header.tags);
      if (await this.opts.writeBelow(ns, key, clean, policy)) {
        // Clean now, so the copy gets the policy's hot residency and a full hot tier may evict it.
        if (await hot.markClean(ns, key, e.header.version, policy.hotResidencySeconds * 1000)) done++;
      }
    });
    this.done += done;
    return done;
  }
}
