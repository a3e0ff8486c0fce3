import { SlabPool, SlabWriter } from '../../cachenode/src/slab-pool.js';

describe('SlabPool and SlabWriter (batch read response buffers)', () => {
  it('hands out at most maxSlabs slabs and reuses the ones given back', () => {
    const pool = new SlabPool(64, 2);
    const a = pool.acquire()!;
    const b = pool.acquire()!;
    expect(a.length).toBe(64);
    expect(pool.acquire()).toBeUndefined();
    expect(pool.stats).toEqual({ slabs: 2, out: 2 });
    pool.release(a);
    expect(pool.acquire()).toBe(a);
    pool.release(a);
    pool.release(b);
    expect(pool.stats).toEqual({ slabs: 2, out: 0 });
    expect(() => new SlabPool(0, 1)).toThrow(RangeError);
    expect(() => new SlabPool(8, -1)).toThrow(RangeError);
  });

  it('copies values into the slab while they fit, else into buffers of their own, and the copies outlive the source', () => {
    const pool = new SlabPool(10, 1);
    const w = new SlabWriter(pool);
    const src = Buffer.from('abcd');
    const first = w.copy(src);
    const second = w.copy(Buffer.from('efgh'));
    const third = w.copy(Buffer.from('ijkl')); // 12 > 10: its own buffer
    src.fill(0); // the store's view is reused by the next read
    expect([first, second, third].map(String)).toEqual(['abcd', 'efgh', 'ijkl']);
    expect(first.buffer).toBe(second.buffer);
    expect(third.buffer).not.toBe(first.buffer);
    expect(w.copy(Buffer.alloc(0)).length).toBe(0);
    expect(pool.stats.out).toBe(1);
    w.done();
    expect(pool.stats.out).toBe(0);
    // With the pool exhausted, every value gets its own buffer.
    const held = pool.acquire()!;
    const none = new SlabWriter(pool);
    expect(none.copy(Buffer.from('x')).buffer).not.toBe(held.buffer);
    none.done();
    expect(pool.stats).toEqual({ slabs: 1, out: 1 });
  });
});
