/**
 * S3-FIFO eviction order (Yang et al., SOSP 2023): a small probationary FIFO (~10% of capacity), a main FIFO
 * with lazy promotion (2-bit frequency, reinsertion instead of move-to-front) and a ghost FIFO of recently
 * evicted keys. One-hit wonders leave through the small queue without polluting the main one; a key that
 * comes back soon after eviction goes straight to the main queue. All operations are O(1) amortised: the
 * queues are insertion-ordered Maps (oldest first).
 *
 * The structure only decides order; the owner keeps the values and asks for victims via {@link evictOne}.
 */
export interface S3FifoOptions {
  /** Total budget in cost units (bytes for the memory tier). */
  capacity: number;
  /** Share of the budget for the small queue. @default 0.1 */
  smallRatio?: number;
  /** Max keys remembered in the ghost queue. @default 4096 */
  ghostEntries?: number;
}

interface Node {
  cost: number;
  freq: number;
  queue: 'small' | 'main';
}

export class S3Fifo<K> {
  private readonly small = new Map<K, Node>();
  private readonly main = new Map<K, Node>();
  private readonly ghost = new Map<K, true>();
  private smallCost = 0;
  private mainCost = 0;
  private readonly smallTarget: number;
  private readonly ghostLimit: number;

  constructor(private readonly opts: S3FifoOptions) {
    this.smallTarget = Math.max(1, Math.floor(opts.capacity * (opts.smallRatio ?? 0.1)));
    this.ghostLimit = opts.ghostEntries ?? 4096;
  }

  get size(): number {
    return this.small.size + this.main.size;
  }

  get cost(): number {
    return this.smallCost + this.mainCost;
  }

  has(key: K): boolean {
    return this.small.has(key) || this.main.has(key);
  }

  /** Records a hit: saturating 2-bit frequency, no reordering (that is what makes reads cheap). */
  touch(key: K): void {
    const n = this.small.get(key) ?? this.main.get(key);
    if (n && n.freq < 3) n.freq++;
  }

  /** Inserts a new key or updates the cost of an existing one (keeping its place and frequency). */
  upsert(key: K, cost: number): void {
    const n = this.small.get(key) ?? this.main.get(key);
    if (n) {
      this.adjust(n, cost - n.cost);
      n.cost = cost;
      return;
    }
    const fromGhost = this.ghost.delete(key);
    const node: Node = { cost, freq: 0, queue: fromGhost ? 'main' : 'small' };
    (fromGhost ? this.main : this.small).set(key, node);
    this.adjust(node, cost);
  }

  remove(key: K): void {
    const n = this.small.get(key) ?? this.main.get(key);
    if (!n) return;
    (n.queue === 'small' ? this.small : this.main).delete(key);
    this.adjust(n, -n.cost);
  }

  /**
   * Picks and removes the next victim. `canEvict` lets the owner veto a key (e.g. a dirty write-back entry);
   * a vetoed key is kept and given another round in the main queue. Returns undefined when every key was
   * vetoed in a full pass.
   */
  evictOne(canEvict: (key: K) => boolean = () => true): K | undefined {
    let budget = (this.small.size + this.main.size) * 2 + 2;
    while (budget-- > 0 && this.size > 0) {
      const fromSmall = this.smallCost >= this.smallTarget || this.main.size === 0;
      const victim = fromSmall ? this.stepSmall(canEvict) : this.stepMain(canEvict);
      if (victim !== undefined) return victim;
    }
    return undefined;
  }

  /** Keys in eviction order (next victim first), for inspection and tests. */
  *order(): IterableIterator<K> {
    yield* this.small.keys();
    yield* this.main.keys();
  }

  private stepSmall(canEvict: (key: K) => boolean): K | undefined {
    const first = this.small.entries().next();
    if (first.done) return undefined;
    const [key, n] = first.value;
    this.small.delete(key);
    this.smallCost -= n.cost;
    // Accessed at least once while on probation (the paper uses > 1 for its own counting; a single re-access
    // is the common definition for web-like traces and keeps hot keys out of the ghost queue).
    if (n.freq > 0 || !canEvict(key)) {
      n.freq = 0;
      n.queue = 'main';
      this.main.set(key, n);
      this.mainCost += n.cost;
      return undefined;
    }
    this.rememberGhost(key);
    return key;
  }

  private stepMain(canEvict: (key: K) => boolean): K | undefined {
    const first = this.main.entries().next();
    if (first.done) return undefined;
    const [key, n] = first.value;
    this.main.delete(key);
    if (n.freq > 0 || !canEvict(key)) {
      if (n.freq > 0) n.freq--;
      this.main.set(key, n); // lazy promotion: reinsert at the tail
      return undefined;
    }
    this.mainCost -= n.cost;
    return key;
  }

  private rememberGhost(key: K): void {
    this.ghost.set(key, true);
    if (this.ghost.size > this.ghostLimit) this.ghost.delete(this.ghost.keys().next().value as K);
  }

  private adjust(n: Node, delta: number): void {
    if (n.queue === 'small') this.smallCost += delta;
    else this.mainCost += delta;
  }
}
