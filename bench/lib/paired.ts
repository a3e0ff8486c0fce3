// Paired rounds: two settings (a and b) measured in alternating short rounds in one process, the figure of interest
// being the ratio a/b within each pair, and its mean over the pairs with a 95% interval. Pairing cancels the drift
// that separate runs suffer (other jobs on the machine, the heap's growth, the CPU's clock), so an effect smaller
// than the round-to-round noise shows once there are enough pairs. An A/A control (the same setting on both sides
// of a pair, run in the same schedule) shows how wide the interval is when there is nothing to find.
import { round } from './measure.js';

/** One pair of rounds: `ab` compares a with b, `aa` is the control (its b side runs a's setting again). */
export interface PairBlock {
  readonly kind: 'ab' | 'aa';
  /** Which side runs first: alternating, so a/b/b/a/a/b/... over consecutive pairs of a kind. */
  readonly order: readonly ['a', 'b'] | readonly ['b', 'a'];
}

/**
 * The order of `abPairs` a/b pairs and `aaPairs` control pairs: the control pairs spread evenly among the others
 * (so both see the same drift), and within each kind the side that goes first alternates.
 */
export function pairedSchedule(abPairs: number, aaPairs: number): PairBlock[] {
  const total = abPairs + aaPairs;
  // The controls sit in the middle of equal stretches of the schedule (at most one per block, as aaPairs <= total).
  const controls = new Set(Array.from({ length: aaPairs }, (_, j) => Math.floor(((j + 0.5) * total) / aaPairs)));
  const blocks: PairBlock[] = [];
  const seen = { ab: 0, aa: 0 };
  for (let i = 0; i < total; i++) {
    const kind = controls.has(i) ? 'aa' : 'ab';
    const order = seen[kind]++ % 2 === 0 ? (['a', 'b'] as const) : (['b', 'a'] as const);
    blocks.push({ kind, order });
  }
  return blocks;
}

/** A mean with its two-sided interval (Student t over the values). */
export interface MeanInterval {
  n: number;
  mean: number;
  low: number;
  high: number;
  /** Sample standard deviation of the values. */
  sd: number;
}

/** The arithmetic mean of `xs` with its two-sided Student t interval at `level` (0.95: 95%). */
export function meanInterval(xs: readonly number[], level = 0.95, digits = 6): MeanInterval {
  const n = xs.length;
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const sd = n < 2 ? NaN : Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  const half = n < 2 ? NaN : (studentT(1 - (1 - level) / 2, n - 1) * sd) / Math.sqrt(n);
  return {
    n,
    mean: round(mean, digits),
    low: round(mean - half, digits),
    high: round(mean + half, digits),
    sd: round(sd, digits),
  };
}

/** A ratio's central value over pairs with its interval, taken on the logarithms (so a/b and b/a are symmetric). */
export interface RatioInterval {
  n: number;
  /** The geometric mean of the pairs' ratios. */
  ratio: number;
  low: number;
  high: number;
  /** Standard deviation of ln(ratio) over the pairs: the noise of one pair, comparable between runs of any length. */
  sdLog: number;
}

/** The geometric mean of `ratios` with a Student t interval at `level` over their logarithms. */
export function ratioInterval(ratios: readonly number[], level = 0.95, digits = 4): RatioInterval {
  const m = meanInterval(
    ratios.map((r) => Math.log(r)),
    level,
    12,
  );
  return {
    n: m.n,
    ratio: round(Math.exp(m.mean), digits),
    low: round(Math.exp(m.low), digits),
    high: round(Math.exp(m.high), digits),
    sdLog: round(m.sd, digits),
  };
}

/**
 * A percentile bootstrap interval of the geometric mean of `ratios`: `resamples` draws of n pairs with replacement
 * from the seeded `rand` (rounds.ts's prng), so the same pairs give the same interval. A check on the t interval
 * where the ratios are skewed (p99s).
 */
export function bootstrapRatioInterval(
  ratios: readonly number[],
  rand: () => number,
  opts: { resamples?: number; level?: number; digits?: number } = {},
): { low: number; high: number } {
  const n = ratios.length;
  const logs = ratios.map((r) => Math.log(r));
  const resamples = opts.resamples ?? 10_000;
  const means = new Float64Array(resamples);
  for (let s = 0; s < resamples; s++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += logs[Math.floor(rand() * n)]!;
    means[s] = sum / n;
  }
  means.sort();
  const tail = (1 - (opts.level ?? 0.95)) / 2;
  const at = (q: number) => means[Math.min(resamples - 1, Math.max(0, Math.round(q * (resamples - 1))))]!;
  const digits = opts.digits ?? 4;
  return { low: round(Math.exp(at(tail)), digits), high: round(Math.exp(at(1 - tail)), digits) };
}

/** A ratio's t interval with the bootstrap interval beside it, as the paired benches report each ratio. */
export interface RatioFigure extends RatioInterval {
  bootstrap: { low: number; high: number };
}

/** {@link ratioInterval} and {@link bootstrapRatioInterval} of the same pairs' ratios. */
export function ratioFigure(ratios: readonly number[], rand: () => number): RatioFigure {
  return { ...ratioInterval(ratios), bootstrap: bootstrapRatioInterval(ratios, rand) };
}

/** A figure's cells in the paired benches' tables: mean, both intervals and one pair's noise ('-' where undefined). */
export function ratioCells(f: RatioFigure): Record<'mean' | '95% CI (t)' | '95% CI (bootstrap)' | 'sd/pair', string> {
  const fmt = (x: number) => x.toFixed(3);
  return {
    mean: f.n ? fmt(f.ratio) : '-',
    '95% CI (t)': f.n > 1 ? `${fmt(f.low)}-${fmt(f.high)}` : '-',
    '95% CI (bootstrap)': f.n > 1 ? `${fmt(f.bootstrap.low)}-${fmt(f.bootstrap.high)}` : '-',
    'sd/pair': f.n > 1 ? `${(f.sdLog * 100).toFixed(1)}%` : '-',
  };
}

/** The `p` quantile (0 < p < 1) of Student's t distribution with `df` degrees of freedom (bisection on the CDF). */
export function studentT(p: number, df: number): number {
  if (!(p > 0 && p < 1) || !(df > 0)) return NaN;
  if (p === 0.5) return 0;
  if (p < 0.5) return -studentT(1 - p, df);
  let lo = 0;
  let hi = 1;
  while (tCdf(hi, df) < p) hi *= 2;
  for (let i = 0; i < 100 && hi - lo > 1e-12 * hi; i++) {
    const mid = (lo + hi) / 2;
    if (tCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** P(T <= t) for Student's t with `df` degrees of freedom. */
export function tCdf(t: number, df: number): number {
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** The regularized incomplete beta function I_x(a, b) (continued fraction, Numerical Recipes' betacf). */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  return x < (a + 1) / (a + b + 2) ? (front * betaFraction(x, a, b)) / a : 1 - (front * betaFraction(1 - x, b, a)) / b;
}

function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-15) break;
  }
  return h;
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
    -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let s = c[0]!;
  for (let i = 1; i < 9; i++) s += c[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(s);
}
