import fc from 'fast-check';
import { ValidationError } from '../../core/errors.js';
import { decideScaleOut, speculativeThreshold, thresholdParamsSchema } from '../../core/workflows/trigger/threshold.js';

const PAPER = { capacity: 5000, lowRate: 50, highRate: 250 };

describe('paper 000 speculative threshold T = c/2 + δH·(‖N‖ − R/δL)', () => {
  it("reproduces the paper's worked example: 2250, 2500, 2750, 3000 for 1-4 nodes (c=5000, δL=50, δH=250, R=100)", () => {
    expect([1, 2, 3, 4].map((n) => speculativeThreshold(PAPER, n, 100))).toEqual([2250, 2500, 2750, 3000]);
  });

  it('clamps: below 0.1·c becomes 0.1·c; above 0.75·c becomes 0.95·c', () => {
    // R = 1000 → R/δL = 20: T = 2500 + 250·(1 − 20) < 500
    expect(speculativeThreshold(PAPER, 1, 1000)).toBe(500);
    // 8 nodes at R = 0: T = 2500 + 250·8 = 4500 > 3750
    expect(speculativeThreshold(PAPER, 8, 0)).toBe(4750);
    // exactly 0.75·c is not clamped: 2500 + 250·(N − R/50) = 3750 at N = 5, R = 0
    expect(speculativeThreshold(PAPER, 5, 0)).toBe(3750);
  });

  it('always lies within [0.1·c, 0.95·c], rises with the fleet and falls with the rate', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), fc.double({ min: 0, max: 10_000, noNaN: true }), (n, r) => {
        const t = speculativeThreshold(PAPER, n, r);
        expect(t).toBeGreaterThanOrEqual(500);
        expect(t).toBeLessThanOrEqual(4750);
        expect(speculativeThreshold(PAPER, n + 1, r)).toBeGreaterThanOrEqual(t);
        expect(speculativeThreshold(PAPER, n, r + 10)).toBeLessThanOrEqual(t);
      }),
    );
  });

  it('rejects bad parameters with messages naming them', () => {
    expect(thresholdParamsSchema.safeParse({ capacity: 0, lowRate: 1, highRate: 2 }).error?.issues[0]?.message).toMatch(
      /capacity/,
    );
    expect(thresholdParamsSchema.safeParse({ capacity: 10, lowRate: 5, highRate: 2 }).error?.issues[0]?.path).toEqual([
      'highRate',
    ]);
    expect(() => speculativeThreshold(PAPER, 0, 1)).toThrow(ValidationError);
    expect(() => speculativeThreshold(PAPER, 1, -1)).toThrow(/rate/);
  });
});

describe('the scale-out trigger', () => {
  const nodes = (...fills: number[]) => fills.map((fill, i) => ({ id: `n${i + 1}`, fill }));

  it('does nothing while every node is below T', () => {
    expect(decideScaleOut(PAPER, nodes(2000, 2400), 100)).toEqual({ action: 'none', threshold: 2500 });
  });

  it('pre-launches for the fullest node past T, and splits at once on overflow', () => {
    expect(decideScaleOut(PAPER, nodes(2000, 2800, 2760), 100)).toMatchObject({
      action: 'prelaunch',
      node: 'n2',
      threshold: 2750,
      fill: 2800,
    });
    expect(decideScaleOut(PAPER, nodes(2000, 5000), 100)).toMatchObject({ action: 'split', node: 'n2' });
  });

  it('at most one scale-out per node: a node in flight is skipped for the next one past T, or reported', () => {
    expect(decideScaleOut(PAPER, nodes(2600, 2700), 100, new Set(['n2']))).toMatchObject({ action: 'prelaunch', node: 'n1' });
    expect(decideScaleOut(PAPER, nodes(2000, 2700), 100, new Set(['n2']))).toMatchObject({ action: 'in-flight', node: 'n2' });
  });
});
