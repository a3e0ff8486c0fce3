import {
  bootstrapRatioInterval,
  meanInterval,
  pairedSchedule,
  ratioCells,
  ratioFigure,
  ratioInterval,
  studentT,
  tCdf,
} from '../../bench/lib/paired.js';
import { prng } from '../../bench/lib/rounds.js';

describe('paired-round statistics (bench/lib/paired.ts)', () => {
  it('gives Student t quantiles as the tables do', () => {
    // Two-sided 95%: the 0.975 quantile.
    const table: Array<[number, number]> = [
      [1, 12.706],
      [2, 4.303],
      [4, 2.776],
      [9, 2.262],
      [29, 2.045],
      [59, 2.001],
      [1000, 1.962],
    ];
    for (const [df, t] of table) expect(studentT(0.975, df)).toBeCloseTo(t, 3);
    expect(studentT(0.995, 9)).toBeCloseTo(3.25, 2);
    expect(studentT(0.025, 9)).toBeCloseTo(-2.262, 3);
    expect(studentT(0.5, 7)).toBe(0);
    expect(tCdf(0, 5)).toBeCloseTo(0.5, 12);
    expect(tCdf(studentT(0.9, 3), 3)).toBeCloseTo(0.9, 9);
  });

  it('gives the mean with its t interval', () => {
    const m = meanInterval([1, 2, 3, 4, 5]);
    expect(m.mean).toBe(3);
    expect(m.sd).toBeCloseTo(Math.sqrt(2.5), 6);
    // 3 ± 2.776 × 1.5811 / √5
    expect(m.low).toBeCloseTo(3 - 1.9632, 3);
    expect(m.high).toBeCloseTo(3 + 1.9632, 3);
    const one = meanInterval([4]);
    expect(one.mean).toBe(4);
    expect(one.low).toBeNaN();
  });

  it('takes ratios on their logarithms: r and 1/r balance at 1', () => {
    const r = ratioInterval([1.1, 1 / 1.1, 1.1, 1 / 1.1]);
    expect(r.ratio).toBe(1);
    expect(r.low).toBeLessThan(1);
    expect(r.high).toBeGreaterThan(1);
    expect(r.low * r.high).toBeCloseTo(1, 3);
    const same = ratioInterval([0.98, 0.98, 0.98]);
    expect(same).toEqual({ n: 3, ratio: 0.98, low: 0.98, high: 0.98, sdLog: 0 });
  });

  it('bootstraps the same interval from the same seed, near the t interval for well-behaved ratios', () => {
    const rand = prng(7);
    const ratios = Array.from({ length: 40 }, () => Math.exp((rand() - 0.5) * 0.1) * 0.99);
    const a = bootstrapRatioInterval(ratios, prng(1));
    const b = bootstrapRatioInterval(ratios, prng(1));
    expect(a).toEqual(b);
    const t = ratioInterval(ratios);
    expect(a.low).toBeLessThanOrEqual(t.ratio);
    expect(a.high).toBeGreaterThanOrEqual(t.ratio);
    expect(Math.abs(a.low - t.low)).toBeLessThan(0.003);
    expect(Math.abs(a.high - t.high)).toBeLessThan(0.003);
  });

  it('reports a figure as the t interval with the bootstrap beside it, and its table cells; "-" where n is too small', () => {
    const ratios = [1.01, 0.98, 1.03, 1.0, 0.99, 1.02];
    const f = ratioFigure(ratios, prng(5));
    expect(f).toEqual({ ...ratioInterval(ratios), bootstrap: bootstrapRatioInterval(ratios, prng(5)) });
    const cells = ratioCells(f);
    expect(cells.mean).toBe(f.ratio.toFixed(3));
    expect(cells['95% CI (t)']).toBe(`${f.low.toFixed(3)}-${f.high.toFixed(3)}`);
    expect(cells['95% CI (bootstrap)']).toBe(`${f.bootstrap.low.toFixed(3)}-${f.bootstrap.high.toFixed(3)}`);
    expect(cells['sd/pair']).toBe(`${(f.sdLog * 100).toFixed(1)}%`);
    expect(Object.keys(cells)).toEqual(['mean', '95% CI (t)', '95% CI (bootstrap)', 'sd/pair']);
    const one = ratioCells(ratioFigure([1.02], prng(5)));
    expect(one).toEqual({ mean: '1.020', '95% CI (t)': '-', '95% CI (bootstrap)': '-', 'sd/pair': '-' });
  });

  it('schedules the pairs: controls spread evenly, the side that goes first alternating within each kind', () => {
    const s = pairedSchedule(30, 10);
    expect(s).toHaveLength(40);
    expect(s.filter((b) => b.kind === 'aa')).toHaveLength(10);
    const controls = s.flatMap((b, i) => (b.kind === 'aa' ? [i] : []));
    expect(controls).toEqual([2, 6, 10, 14, 18, 22, 26, 30, 34, 38]);
    for (const kind of ['ab', 'aa'] as const) {
      const orders = s.filter((b) => b.kind === kind).map((b) => b.order.join(''));
      orders.forEach((o, i) => expect(o).toBe(i % 2 === 0 ? 'ab' : 'ba'));
    }
    // a/b/b/a/a/b/...: each side goes first in half of the pairs.
    expect(pairedSchedule(4, 0).flatMap((b) => b.order)).toEqual(['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a']);
    expect(pairedSchedule(0, 3).every((b) => b.kind === 'aa')).toBe(true);
    expect(pairedSchedule(5, 0).every((b) => b.kind === 'ab')).toBe(true);
  });
});
