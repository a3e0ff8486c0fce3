/**
 * Hybrid logical clock packed into a JS safe integer: physical milliseconds × 1024 + a 10-bit logical
 * counter. Monotonic per process even if the wall clock steps back; `observe()` folds in versions seen from
 * other writers so a process never issues a version below one it has read. 2^53 / 1024 ms reaches the year
 * 2248, so versions stay exact in JavaScript numbers and in Redis Lua (doubles).
 */
export const LOGICAL_BITS = 1024;

export class HybridLogicalClock {
  private last = 0;
  constructor(private readonly wallClock: () => number = Date.now) {}

  /** A version strictly greater than every version this clock issued or observed. */
  next(): number {
    const physical = this.wallClock() * LOGICAL_BITS;
    this.last = physical > this.last ? physical : this.last + 1;
    return this.last;
  }

  /** Fold in a version produced elsewhere. */
  observe(version: number): void {
    if (version > this.last) this.last = version;
  }

  /** This clock's wall-clock milliseconds (what its next version is built on). */
  wallNow(): number {
    return this.wallClock();
  }

  /** The wall-clock millisecond a version was issued at. */
  static timeOf(version: number): number {
    return Math.floor(version / LOGICAL_BITS);
  }
}
