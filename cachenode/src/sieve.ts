/**
 * SIEVE eviction order (Zhang et al., NSDI 2024): one FIFO queue with a "visited" bit per key and a hand that
 * walks from the oldest key towards the newest. A hit only sets the bit (no reordering, so reads stay cheap and
 * lock-free); the hand clears set bits as it passes and stops at the first key whose bit is clear: that key is
 * the next victim. New keys enter at the newest end. Operations are O(1) amortised.
 *
 * The node never drops data on its own: the order only names victims (see `victims`); whoever evicts copies
 * them below first and then deletes them conditionally on their version.
 *
 * Each key's node also carries its access facts (policy selections by `idleSeconds` / `accessCount`, paper 003's
 * LRU cascade): when it was last read, in whole seconds on the caller's clock, and how many reads. Two small
 * integers on an object every entry has anyway: 16 bytes per entry, no allocation per read, nothing on disk.
 */
interface SieveNode<K> {
  key: K;
  visited: boolean;
  /** Last read, or when the key entered the order (written, imported, or the node's start): caller's seconds. */
  at: number;
  /** Reads since the key entered the order (capped at {@link MAX_READS}). */
  reads: number;
  /** Towards the oldest key. */
  older: SieveNode<K> | undefined;
  /** Towards the newest key. */
  newer: SieveNode<K> | undefined;
}

/** Reads are counted up to this (a V8 small integer on every platform: the field never turns into a boxed number). */
export const MAX_READS = 2 ** 30 - 1;

/** What a key's node knows of its reads (see {@link Sieve.access}). */
export interface AccessFacts {
  /** Last read, or when the key entered the order, whichever is later (the caller's seconds). */
  readonly at: number;
  readonly reads: number;
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

  /**
   * Adds a key at the newest end, entering at `at` (seconds: its access facts start there, with no reads); an
   * existing key keeps its place and facts and is marked visited.
   */
  insert(key: K, at = 0): void {
    const n = this.nodes.get(key);
    if (n) {
      n.visited = true;
      return;
    }
    const node: SieveNode<K> = { key, visited: false, at, reads: 0, older: this.newest, newer: undefined };
    if (this.newest) this.newest.newer = node;
    this.newest = node;
    this.oldest ??= node;
    this.nodes.set(key, node);
  }

  /** A read: marks the key visited and, given the time (seconds), records the read in its access facts. */
  touch(key: K, at?: number): void {
    const n = this.nodes.get(key);
    if (!n) return;
    n.visited = true;
    if (at === undefined) return;
    if (at > n.at) n.at = at;
    if (n.reads < MAX_READS) n.reads++;
  }

  /** The key's access facts; undefined when it is not in the order (absent, or pinned: see the store). */
  access(key: K): AccessFacts | undefined {
    const n = this.nodes.get(key);
    return n && { at: n.at, reads: n.reads };
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
