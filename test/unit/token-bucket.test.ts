import fc from 'fast-check';
import { TokenBucket } from '../../core/workflows/steps/token-bucket.js';

/** A clock that only moves when the bucket sleeps (or the test says so): waits are computed, never timed. */
function fakeTime() {
  const t = { now: 0, slept: [] as number[] };
  return {
    t,
    now: () => t.now,
    sleep: async (ms: number) => {
      t.slept.push(ms);
      t.now += ms;
    },
  };
}

describe('TokenBucket', () => {
  it('lets the burst through at once, then paces takes at the rate', async () => {
    const c = fakeTime();
    const b = new TokenBucket({ ratePerSec: 1000, burst: 500, now: c.now, sleep: c.sleep });
    await expect(b.take(300)).resolves.toBe(0);
    await expect(b.take(200)).resolves.toBe(0);
    // Empty now: 250 more bytes take 250 ms at 1000 B/s.
    await expect(b.take(250)).resolves.toBeCloseTo(250, 9);
    expect(c.t.slept).toEqual([expect.closeTo(250, 9)]);
    expect(b.available()).toBeCloseTo(0, 9);
  });

  it('refills with time, never above the burst', async () => {
    const c = fakeTime();
    const b = new TokenBucket({ ratePerSec: 100, burst: 50, now: c.now, sleep: c.sleep });
    await b.take(50);
    c.t.now += 200; // 20 tokens back
    expect(b.available()).toBeCloseTo(20, 9);
    c.t.now += 10_000;
    expect(b.available()).toBe(50);
    expect(b.delayFor(80)).toBeCloseTo(300, 9);
  });

  it('lets one take larger than the burst through by going into debt, at the average rate', async () => {
    const c = fakeTime();
    const b = new TokenBucket({ ratePerSec: 1000, burst: 100, now: c.now, sleep: c.sleep });
    await expect(b.take(5100)).resolves.toBeCloseTo(5000, 9);
    // The debt is paid by the wait: the next small take waits only for itself.
    await expect(b.take(10)).resolves.toBeCloseTo(10, 9);
    expect(b.waitedMs).toBeCloseTo(5010, 9);
  });

  it('over any sequence of takes, the time spent is (total - burst) / rate', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 10_000 }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 20_000 }),
        async (sizes, rate, burst) => {
          const c = fakeTime();
          const b = new TokenBucket({ ratePerSec: rate, burst, now: c.now, sleep: c.sleep });
          for (const n of sizes) await b.take(n);
          const total = sizes.reduce((s, n) => s + n, 0);
          const expected = (Math.max(0, total - burst) / rate) * 1000;
          expect(c.t.now).toBeCloseTo(expected, 3);
        },
      ),
    );
  });

  it('refuses nonsense rates and amounts', async () => {
    expect(() => new TokenBucket({ ratePerSec: 0 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSec: Number.POSITIVE_INFINITY })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSec: 10, burst: -1 })).toThrow(RangeError);
    await expect(new TokenBucket({ ratePerSec: 10 }).take(-1)).rejects.toThrow(RangeError);
    await expect(new TokenBucket({ ratePerSec: 10 }).take(Number.NaN)).rejects.toThrow(RangeError);
  });
});
