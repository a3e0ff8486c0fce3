import { S3Fifo } from '../../core/eviction/s3fifo.js';

describe('S3Fifo', () => {
  it('evicts one-hit wonders from the small queue before anything accessed twice', () => {
    const q = new S3Fifo<string>({ capacity: 100, smallRatio: 0.1 });
    for (const k of ['a', 'b', 'c', 'd']) q.upsert(k, 10);
    q.touch('b');
    q.touch('d');
    // Small queue holds 40 > 10: a, c are never re-read and go first; b and d move to main.
    expect(q.evictOne()).toBe('a');
    expect(q.evictOne()).toBe('c');
    expect(q.has('b')).toBe(true);
    expect(q.has('d')).toBe(true);
  });

  it('sends a key seen again shortly after eviction straight to the main queue (ghost hit)', () => {
    const q = new S3Fifo<string>({ capacity: 100, smallRatio: 0.1 });
    q.upsert('x', 20);
    expect(q.evictOne()).toBe('x');
    q.upsert('x', 20); // ghost hit: main queue
    q.upsert('y', 20); // small queue
    // small holds 20 >= 10 so the small queue is swept first: y (never touched) goes before x.
    expect(q.evictOne()).toBe('y');
    expect([...q.order()]).toEqual(['x']);
  });

  it('gives frequently read main-queue keys extra rounds (lazy promotion) and respects vetoes', () => {
    const q = new S3Fifo<string>({ capacity: 1000, smallRatio: 0.01 });
    for (const k of ['m1', 'm2', 'm3']) {
      q.upsert(k, 10);
      expect(q.evictOne()).toBe(k); // one-hit wonder leaves through the small queue into the ghost queue
      q.upsert(k, 10); // ghost hit: straight into main
    }
    expect([...q.order()]).toEqual(['m1', 'm2', 'm3']);
    q.touch('m1');
    q.touch('m1');
    expect(q.evictOne()).toBe('m2');
    expect(q.evictOne((k) => k !== 'm3')).toBe('m1'); // m3 vetoed; m1 used up its two extra rounds
    expect(q.evictOne((k) => k !== 'm3')).toBeUndefined();
    expect(q.size).toBe(1);
  });

  it('keeps cost totals exact through upserts and removals', () => {
    const q = new S3Fifo<number>({ capacity: 1000 });
    for (let i = 0; i < 50; i++) q.upsert(i, i + 1);
    q.upsert(3, 100);
    q.remove(10);
    const expected = Array.from({ length: 50 }, (_, i) => i + 1).reduce((a, b) => a + b) - 4 + 100 - 11;
    expect(q.cost).toBe(expected);
  });
});
