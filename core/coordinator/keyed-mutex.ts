/** Serialises async sections per key within this process (conditional writes, origin loads). */
export class KeyedMutex {
  /** Per key: the last section queued (the one the next caller waits for). */
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Runs `fn` after every earlier `fn` of the same key has settled; an uncontended key costs one extra promise. */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key);
    const result = prev === undefined ? fn() : prev.then(fn, fn);
    this.tails.set(key, result);
    const release = (): void => {
      if (this.tails.get(key) === result) this.tails.delete(key);
    };
    result.then(release, release);
    return result;
  }
}

/** Single-flight: concurrent callers for the same key share one in-flight promise. */
export class Coalescer<T> {
  private readonly inflight = new Map<string, Promise<T>>();

  run(key: string, fn: () => Promise<T>): Promise<T> {
    const existing = this.inflight.get(key);
    if (existing) return existing;
    const p = fn().finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }

  /** Whether a call for `key` is in flight. */
  has(key: string): boolean {
    return this.inflight.has(key);
  }

  get size(): number {
    return this.inflight.size;
  }
}
