import { copyForTier, type Entry } from '../model/entry.js';
import type { DirtyTracking, Tier } from '../tiers/tier.js';
import { mapLimit } from '../util/concurrency.js';
import type { NamespacePolicy, PolicyRegistry } from '../policy/namespace-settings.js';

export interface WriteBackFlusherOptions {
  /** The hot tier holding the dirty entries. */
  hot: Tier & DirtyTracking;
  policies: PolicyRegistry;
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

  constructor(opts: WriteBackFlusherOptions) {
    this.opts = opts;
    if (opts.intervalMs !== null) {
      this.timer = setInterval(() => void this.flush().catch((e) => opts.onError(e, 'write-back flush')), opts.intervalMs);
      this.timer.unref();
    }
  }

  /** Entries flushed so far. */
  get flushed(): number {
    return this.done;
  }

  /** One pass over up to `limit` dirty entries, oldest first; concurrent calls share the pass. */
  flush(limit = 1000): Promise<number> {
    this.running ??= this.pass(limit).finally(() => (this.running = undefined));
    return this.running;
  }

  /** Flushes if the shortest flush interval in force has passed since the last pass. */
  async flushIfDue(): Promise<number> {
    const interval = this.opts.policies.minFlushIntervalMs();
    if (interval === null || Date.now() - this.last < interval) return 0;
    return this.flush();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * The last pass at shutdown, after the timer is stopped, so that dirty entries written since the previous pass
   * reach the durable tiers before the process goes away. Only while write-back is in force; failures are reported.
   */
  async finalFlush(): Promise<void> {
    if (this.opts.policies.minFlushIntervalMs() === null) return;
    await this.flush().catch((e) => this.opts.onError(e, 'final flush'));
  }

  private async pass(limit: number): Promise<number> {
    this.last = Date.now();
    const { hot, policies } = this.opts;
    const dirty = await hot.listDirty(limit);
    const lost = hot.takeLostDirty?.() ?? 0;
    if (lost > 0) this.opts.onLost?.(lost);
    let done = 0;
    await mapLimit(dirty, 16, async ({ ns, key }) => {
      const e = await hot.get(ns, key);
      if (!e || !e.header.flags.dirty) return;
      const { dirty: _dirty, ...flags } = e.header.flags;
      const clean = copyForTier(e, flags);
      const policy = policies.for(ns);
      if (await this.opts.writeBelow(ns, key, clean, policy)) {
        // Clean now, so the copy gets the policy's hot residency and a full hot tier may evict it.
        if (await hot.markClean(ns, key, e.header.version, policy.hotResidencySeconds * 1000)) done++;
      }
    });
    this.done += done;
    return done;
  }
}
