import {
  parseRingDocument,
  rangeIndexOf,
  spanOf,
  type RangeSpan,
  type RingDocument,
  type RingNode,
  type RingRange,
} from './document.js';
import type { RingStore } from './store.js';

export interface Route {
  index: number;
  span: RangeSpan;
  range: RingRange;
  owner: RingNode;
  /** The pending target, while the range migrates: writes are shadow-written to it. */
  pending?: RingNode;
  /** Who serves reads: the owner, or the pending target in the handoff phase. */
  reader: RingNode;
}

/** An immutable, indexed form of one ring document version, for routing. */
export class RingRouter {
  readonly version: number;
  private readonly nodes: Map<string, RingNode>;

  constructor(readonly doc: RingDocument) {
    this.version = doc.version;
    this.nodes = new Map(doc.nodes.map((n) => [n.id, n]));
  }

  route(position: string): Route {
    const index = rangeIndexOf(this.doc.ranges, position);
    const range = this.doc.ranges[index]!;
    const owner = this.nodes.get(range.owner)!;
    const pending = range.pending ? this.nodes.get(range.pending.target) : undefined;
    const reader = pending && range.pending?.phase === 'handoff' ? pending : owner;
    return { index, span: spanOf(this.doc, index), range, owner, reader, ...(pending ? { pending } : {}) };
  }

  node(id: string): RingNode | undefined {
    return this.nodes.get(id);
  }
}

export interface RingViewOptions {
  /** Where the authoritative document lives (optional when documents are only pushed in). */
  store?: RingStore;
  /** A document to start from. */
  initial?: RingDocument;
  /** Background refresh from the store; 0 = only on demand. @default 5000 */
  refreshIntervalMs?: number;
  /** Reports failures of background refreshes. */
  onError?: (e: unknown) => void;
}

/**
 * A cached ring, by version: coordinators and nodes keep one. It only ever moves forward: {@link adopt} takes a
 * document from anyone (a node's 409 answer, a push) only when it is newer; {@link refresh} reads the store
 * (concurrent calls share one read).
 */
export class RingView {
  private router: RingRouter | undefined;
  private readonly store?: RingStore;
  private loading: Promise<RingRouter> | undefined;
  private lastRefresh = 0;
  /** performance.now() at the start of the last successful store read. */
  private storeReadAt: number | undefined;
  private readonly timer?: NodeJS.Timeout;
  private readonly listeners = new Set<(r: RingRouter) => void>();

  constructor(opts: RingViewOptions = {}) {
    this.store = opts.store;
    if (opts.initial) this.router = new RingRouter(parseRingDocument(opts.initial));
    const every = opts.refreshIntervalMs ?? 5000;
    if (this.store && every > 0) {
      this.timer = setInterval(() => void this.refresh().catch((e) => opts.onError?.(e)), every);
      this.timer.unref();
    }
  }

  get version(): number {
    return this.router?.version ?? 0;
  }

  current(): RingRouter | undefined {
    return this.router;
  }

  /** The cached router, loading the document first if there is none. */
  async ready(): Promise<RingRouter> {
    return this.router ?? this.refresh();
  }

  /** Installs `doc` if it is newer than the cached one; returns whether it did. */
  adopt(doc: RingDocument | unknown): boolean {
    const parsed = parseRingDocument(doc);
    if (this.router && parsed.version <= this.router.version) return false;
    this.router = new RingRouter(parsed);
    for (const l of this.listeners) l(this.router);
    return true;
  }

  /** Reads the store (one read shared by concurrent callers) and adopts what it finds. */
  async refresh(): Promise<RingRouter> {
    if (!this.store) {
      if (this.router) return this.router;
      throw new Error('RingView: no ring document and no store to load one from');
    }
    this.loading ??= (async () => {
      try {
        this.lastRefresh = Date.now();
        const started = performance.now();
        const doc = await this.store!.load();
        if (!doc) throw new Error('RingView: the ring store holds no document');
        this.adopt(doc);
        this.storeReadAt = Math.max(this.storeReadAt ?? started, started);
        return this.router!;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /**
   * {@link refresh}, unless the store was read less than `minIntervalMs` ago (then the cached router): for
   * callers that refresh on failures, so an outage does not turn into a stream of store reads.
   */
  async refreshThrottled(minIntervalMs = 250): Promise<RingRouter | undefined> {
    if (this.loading) return this.loading;
    if (Date.now() - this.lastRefresh < minIntervalMs) return this.router;
    return this.refresh();
  }

  /**
   * How long ago (ms, monotonic) the last successful read of the store began: the cached ring holds every change the
   * store had then (documents adopted since are only newer). Infinity before the first; 0 for a view without a
   * store, whose documents are pushed in by whoever owns the ring (a test, one process) and are all there is.
   */
  age(): number {
    if (!this.store) return 0;
    return this.storeReadAt === undefined ? Infinity : performance.now() - this.storeReadAt;
  }

  onChange(listener: (r: RingRouter) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.listeners.clear();
  }
}
