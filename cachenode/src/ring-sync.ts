// Ring sync of a cache node: polls the ring store and installs ring documents newer than the node's.
import { casStoreFromUri, RingStore, type CasStore } from '../../core/ring/store.js';
import type { NodeConfig } from './config.js';
import type { Ownership } from './ownership.js';
import type { NodeStore } from './store.js';
import { nodeLog } from './node-log.js';

export class RingSync {
  private readonly cas: CasStore;
  private readonly ringStore: RingStore;
  private poller?: NodeJS.Timeout;
  /** Ring store reads that failed in a row (logged on the first, then every 12th). */
  private failures = 0;
  /** A poll is under way (a slow store does not pile polls up). */
  private polling = false;

  constructor(
    private readonly config: NonNullable<NodeConfig['ringStore']>,
    private readonly ownership: Ownership,
    private readonly store: NodeStore,
    /** Whether the node is shutting down (then polls do nothing). */
    private readonly draining: () => boolean,
  ) {
    this.cas = casStoreFromUri(config.uri, config.s3Endpoint);
    this.ringStore = new RingStore(this.cas);
  }

  /** Polls once now (resolving when that poll ends: see CacheNode.start), then every pollMs. */
  start(): Promise<boolean> {
    // A node that polls serves on a lease (see Ownership). Without periodic polls it could not renew one: then only
    // a DOWN mark, pushed or read at start, fences it.
    if (this.config.pollMs > 0) this.ownership.requireLease();
    else nodeLog.warn('STRATA_NODE_RING_POLL_MS is 0: the node is not fenced by a lease on the ring', {});
    const first = this.poll();
    if (this.config.pollMs > 0) {
      this.poller = setInterval(() => void this.poll(), this.config.pollMs);
      this.poller.unref();
    }
    return first;
  }

  /**
   * Reads the ring store and installs a newer version than the node holds (as a push would). A node that missed
   * pushes (it was down, or a push failed) catches up by itself instead of waiting for a refused caller to bring
   * the ring. Never throws: a store outage is logged and the next poll tries again.
   */
  async poll(): Promise<boolean> {
    if (this.draining() || this.polling) return false;
    this.polling = true;
    // The lease counts from before the read: any ring written before this moment is what the read returns.
    const started = { mono: performance.now(), wall: Date.now() };
    try {
      const doc = await this.ringStore.load();
      this.failures = 0;
      if (!doc || doc.version <= this.ownership.version) {
        // Nothing newer in the store (or no ring there at all): no DOWN mark the node has not seen.
        this.ownership.confirm(started);
        return false;
      }
      const installed = await this.ownership.install(doc);
      if (installed) await this.store.settle();
      // Installed, or a newer one was pushed meanwhile: either way the node holds at least what the store held.
      this.ownership.confirm(started);
      return installed;
    } catch (e) {
      if (this.failures++ % 12 === 0) {
        const error = e instanceof Error ? e.message : String(e);
        nodeLog.warn('could not read the ring store', { store: this.config.uri, error });
      }
      return false;
    } finally {
      this.polling = false;
    }
  }

  /** Stops the polling. */
  stop(): void {
    if (this.poller) clearInterval(this.poller);
  }

  /** Releases the ring store's client. */
  close(): void {
    this.cas.close?.();
  }
}
