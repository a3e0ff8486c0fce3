/**
 * SIEVE eviction order (Zhang et al., NSDI 2024): one FIFO queue with a "visited" bit per key and a hand that
 * walks from the oldest key towards the newest. A hit only sets the bit (no reordering, so reads stay cheap and
 * lock-free); the hand clears set bits as it passes and stops at the first key whose bit is clear: that key is
 * the next victim. New keys enter at the newest end. Operations are O(1) amortised.
 *
 * The node never drops data on its own: the order only names victims (see `victims`); whoever evicts copies
 * them below first and then deletes them conditionally on their version.
 */
interface SieveNode<K> {
  key: K;
  visited: boolean;
  /** Towards the oldest key. */
  older: SieveNode<K> | undefined;
  /** Towards the newest key. */
  newer: SieveNode<K> | undefined;
}

export class Sieve<K> {
  private readonly nodes = new Map<K, SieveNode<K>>();
  private newest: SieveNode<K> | undefined;
  private oldest: SieveNode<K> | undefined;
  private hand: SieveNode<K> | undefined;

  get size(): number {
    return this.nodes.size;
  }

  has(key: K): boolean {
    return this.nodes.has(key);
  }

  /** Adds a key at the newest end (an existing key keeps its place and is marked visited). */
  insert(key: K): void {
    const n = this.nodes.get(key);
    if (n) {
      n.visited = true;
      return;
    }
    const node: SieveNode<K> = { key, visited: false, older: this.newest, newer: undefined };
    if (this.newest) this.newest.newer = node;
    this.newest = node;
    this.oldest ??= node;
    this.nodes.set(key, node);
  }

  touch(key: K): void {
    const n = this.nodes.get(key);
    if (n) n.visited = true;
  }

  remove(key: K): void {
    const n = this.nodes.get(key);
    if (!n) return;
    if (this.hand === n) this.hand = n.newer;
    if (n.older) n.older.newer = n.newer;
    else this.oldest = n.newer;
    if (n.newer) n.newer.older = n.older;
    else this.newest = n.older;
    this.nodes.delete(key);
  }

  /**
   * The next victim: moves the hand as an eviction would (clearing visited bits on the way) but keeps the key;
   * the caller removes it once it is really gone. Undefined when empty.
   */
  nextVictim(): K | undefined {
    if (this.nodes.size === 0) return undefined;
    let p = this.hand ?? this.oldest!;
    while (p.visited) {
      p.visited = false;
      p = p.newer ?? this.oldest!;
    }
    this.hand = p.newer; // undefined: wrap to the oldest next time
    return p.key;
  }

  /** Up to `limit` distinct victims in order (see {@link nextVictim}). */
  victims(limit: number): K[] {
    const out: K[] = [];
    const seen = new Set<K>();
    const max = Math.min(limit, this.nodes.size);
    // Two passes at most: the first may only clear visited bits.
    for (let steps = 0; out.length < max && steps < 2 * this.nodes.size + 1; steps++) {
      const k = this.nextVictim();
      if (k === undefined) break;
      if (seen.has(k)) continue;
      seen.add(k);
      out.push(k);
    }
    return out;
  }

  /** Keys from oldest to newest (tests). */
  *order(): IterableIterator<K> {
    for (let p = this.oldest; p; p = p.newer) yield p.key;
  }
}
