import { Coalescer, KeyedMutex } from '../../core/coordinator/keyed-mutex.js';
import { keyShard } from '../../core/model/keys.js';

describe('KeyedMutex', () => {
  it('runs sections of one key one at a time, in call order, even when one fails', async () => {
    const m = new KeyedMutex();
    const log: string[] = [];
    const section = (name: string, ms: number, fail = false) =>
      m.run('k', async () => {
        log.push(`${name}+`);
        await new Promise((r) => setTimeout(r, ms));
        log.push(`${name}-`);
        if (fail) throw new Error(name);
        return name;
      });
    const results = await Promise.allSettled([section('a', 20), section('b', 1, true), section('c', 5)]);
    expect(log).toEqual(['a+', 'a-', 'b+', 'b-', 'c+', 'c-']);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  it('lets different keys run concurrently', async () => {
    const m = new KeyedMutex();
    let inside = 0;
    let peak = 0;
    await Promise.all(
      ['a', 'b', 'c'].map((k) =>
        m.run(k, async () => {
          peak = Math.max(peak, ++inside);
          await new Promise((r) => setTimeout(r, 10));
          inside--;
        }),
      ),
    );
    expect(peak).toBe(3);
  });
});

describe('Coalescer', () => {
  it('shares one in-flight call among concurrent callers and forgets it afterwards', async () => {
    const c = new Coalescer<number>();
    let calls = 0;
    const load = () =>
      c.run('k', async () => {
        calls++;
        await new Promise((r) => setTimeout(r, 5));
        return 7;
      });
    expect(await Promise.all([load(), load(), load()])).toEqual([7, 7, 7]);
    expect(calls).toBe(1);
    expect(c.size).toBe(0);
    await load();
    expect(calls).toBe(2);
  });
});

describe('keyShard', () => {
  it('spreads keys evenly over 256 shards', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 25_600; i++) {
      const s = keyShard('ns', `user:${i}`);
      expect(s).toMatch(/^[0-9a-f]{2}$/);
      counts.set(s, (counts.get(s) ?? 0) + 1);
    }
    expect(counts.size).toBe(256);
    // Expected 100 per shard; a decent hash stays well within +-50%.
    expect(Math.min(...counts.values())).toBeGreaterThan(50);
    expect(Math.max(...counts.values())).toBeLessThan(150);
  });
});
