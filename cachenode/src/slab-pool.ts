/**
 * Reusable buffers for batch read responses. Copying each value into a fresh buffer (what a plain LMDB read does)
 * costs an allocation per value, and for large values page faults and garbage-collector work on top: on a busy
 * node that was most of the CPU of a 100 KB read. A response instead copies its values into one slab taken from
 * here, and gives it back once the response is done with it (see {@link SlabPool.release}).
 *
 * The pool holds at most `maxSlabs` slabs of `slabBytes` each, allocated on first use. When all are out, callers
 * allocate per value as before: the pool bounds memory, never availability.
 */
export class SlabPool {
  private readonly free: Buffer[] = [];
  private created = 0;

  constructor(
    readonly slabBytes: number,
    readonly maxSlabs: number,
  ) {
    if (!Number.isInteger(slabBytes) || slabBytes < 1)
      throw new RangeError('SlabPool: slabBytes must be a positive whole number');
    if (!Number.isInteger(maxSlabs) || maxSlabs < 0) throw new RangeError('SlabPool: maxSlabs must be a whole number >= 0');
  }

  /** A slab, or undefined when all `maxSlabs` are out. */
  acquire(): Buffer | undefined {
    const b = this.free.pop();
    if (b) return b;
    if (this.created >= this.maxSlabs) return undefined;
    this.created++;
    return Buffer.allocUnsafeSlow(this.slabBytes);
  }

  /** Gives a slab back: call only once nothing (a pending socket write included) refers to it any more. */
  release(b: Buffer): void {
    this.free.push(b);
  }

  /** Slabs allocated, and how many of them are out now. */
  get stats(): { slabs: number; out: number } {
    return { slabs: this.created, out: this.created - this.free.length };
  }
}

/**
 * Copies values into a slab while they fit, else into buffers of their own; `done` returns the slab to its pool.
 */
export class SlabWriter {
  private used = 0;

  constructor(
    private readonly pool: SlabPool,
    private readonly slab: Buffer | undefined = pool.acquire(),
  ) {}

  /** A stable copy of `view` (which may be a transient view into the store). */
  copy(view: Buffer): Buffer {
    const n = view.length;
    if (n === 0) return view;
    if (this.slab && this.used + n <= this.slab.length) {
      const out = this.slab.subarray(this.used, this.used + n);
      view.copy(out);
      this.used += n;
      return out;
    }
    return Buffer.from(view);
  }

  /** Returns the slab: call once the copies are no longer referenced (the response finished or was aborted). */
  done(): void {
    if (this.slab) this.pool.release(this.slab);
  }
}
