import { HybridLogicalClock, LOGICAL_BITS } from '../../core/model/hlc.js';

describe('HybridLogicalClock', () => {
  it('issues strictly increasing versions even when the wall clock stands still or steps back', () => {
    let now = 1_000_000;
    const clock = new HybridLogicalClock(() => now);
    const a = clock.next();
    const b = clock.next();
    now -= 500;
    const c = clock.next();
    expect(b).toBeGreaterThan(a);
    expect(c).toBeGreaterThan(b);
    expect(HybridLogicalClock.timeOf(a)).toBe(1_000_000);
  });

  it('never issues a version below one it observed', () => {
    const clock = new HybridLogicalClock(() => 5);
    clock.observe(99 * LOGICAL_BITS);
    expect(clock.next()).toBe(99 * LOGICAL_BITS + 1);
  });

  it("stays a safe integer for today's dates", () => {
    expect(Number.isSafeInteger(new HybridLogicalClock().next())).toBe(true);
  });
});
