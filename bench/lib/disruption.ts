/**
 * What an event (a migration, a rolling upgrade, a node failure) costs a service under open-loop load
 * (open-loop.ts), measured so that it can be told apart from the host's noise:
 *
 *  - the dip: the shortfall of served against offered requests in the worst `windowS`-second window of the event's
 *    span (the event plus `afterS` seconds of recovery);
 *  - the noise floor: the same figure for a span of the same length just before the event, with no event: searched
 *    over as many windows, so it has the same chance of a bad window by accident;
 *  - the p99 rise: the p99 latency over the event's span (and over the noise span) against the reference, the
 *    seconds before the noise span.
 *
 * Over several runs, {@link overRuns} gives each figure's median, range and 95% Student t interval.
 */
import { round } from './measure.js';
import { windowStats, worstWindow, type OpenLoopResult, type WindowStats } from './open-loop.js';
import { meanInterval } from './paired.js';
import { median } from './rounds.js';

export interface DisruptionOptions {
  /** The first second of the load that counts (the ones before warm the system up). */
  measuredFrom: number;
  /** The event's first second and the first second after it (of the open loop's seconds). */
  eventFrom: number;
  eventTo: number;
  /** Length of the worst window, s. */
  windowS: number;
  /** Recovery seconds after the event that its span also covers (default `windowS`). */
  afterS?: number;
  /** Seconds the reference keeps at least, before the noise span (default 10): shortens the noise span if need be. */
  minReferenceS?: number;
}

export interface Disruption {
  /** The event's span [from, to) and the no-event span of (at most) the same length just before it. */
  span: { from: number; to: number };
  noiseSpan: { from: number; to: number };
  /** The noise span had to be shorter than the event's (too few seconds before the event). */
  noiseSpanShort: boolean;
  reference: WindowStats;
  /** The worst window of the event's span, and of the noise span. */
  worst: WindowStats;
  noiseWorst: WindowStats;
  /** 100 × shortfall of those windows. */
  dipPercent: number;
  noisePercent: number;
  /** p99 over the whole span against the reference's, ms. */
  p99: { referenceMs: number; spanMs: number; noiseSpanMs: number; riseMs: number; noiseRiseMs: number };
  /** The whole span summed (its errors, drops and late requests). */
  spanTotals: WindowStats;
}

/** The dip, noise floor and p99 rise of one run (see the module's comment). */
export function disruption(r: OpenLoopResult, opts: DisruptionOptions): Disruption {
  const afterS = opts.afterS ?? opts.windowS;
  const minRef = opts.minReferenceS ?? 10;
  const from = opts.eventFrom;
  const to = Math.min(r.seconds.length, Math.max(opts.eventTo, from + 1) + afterS);
  const length = to - from;
  const noiseLength = Math.max(0, Math.min(length, from - opts.measuredFrom - minRef));
  const noiseSpan = { from: from - noiseLength, to: from };
  const reference = windowStats(r, opts.measuredFrom, noiseSpan.from);
  const worst = worstWindow(r, from, to, opts.windowS);
  const noiseWorst = worstWindow(r, noiseSpan.from, noiseSpan.to, opts.windowS);
  const spanTotals = windowStats(r, from, to);
  const noiseTotals = windowStats(r, noiseSpan.from, noiseSpan.to);
  return {
    span: { from, to },
    noiseSpan,
    noiseSpanShort: noiseLength < length,
    reference,
    worst,
    noiseWorst,
    dipPercent: round(worst.shortfall * 100, 3),
    noisePercent: round(noiseWorst.shortfall * 100, 3),
    p99: {
      referenceMs: round(reference.p99Ms, 3),
      spanMs: round(spanTotals.p99Ms, 3),
      noiseSpanMs: round(noiseTotals.p99Ms, 3),
      riseMs: round(spanTotals.p99Ms - reference.p99Ms, 3),
      noiseRiseMs: round(noiseTotals.p99Ms - reference.p99Ms, 3),
    },
    spanTotals,
  };
}

/** A figure over runs: median and range, and the mean with its 95% t interval (NaN bounds with fewer than 2 runs). */
export interface OverRuns {
  n: number;
  median: number;
  min: number;
  max: number;
  mean: number;
  low: number;
  high: number;
}

export function overRuns(xs: readonly number[], digits = 2): OverRuns {
  if (xs.length === 0) return { n: 0, median: NaN, min: NaN, max: NaN, mean: NaN, low: NaN, high: NaN };
  const m = meanInterval(xs, 0.95, 12);
  return {
    n: xs.length,
    median: round(median(xs), digits),
    min: round(Math.min(...xs), digits),
    max: round(Math.max(...xs), digits),
    mean: round(m.mean, digits),
    low: round(m.low, digits),
    high: round(m.high, digits),
  };
}

/** "a – b" with `unit`, or the reason there is no interval. */
export function intervalText(x: OverRuns, unit = ''): string {
  if (x.n < 2) return `${x.n} run${x.n === 1 ? '' : 's'}: no interval`;
  return `95% interval ${x.low}${unit} – ${x.high}${unit}, mean ${x.mean}${unit}, n = ${x.n}`;
}

/**
 * A target "figure ≤ limit" over runs: met when the whole 95% interval is within it; open otherwise (the interval
 * straddles the limit, lies beyond it, or there are too few runs to have one).
 */
export function atMost(x: OverRuns, limit: number): 'met' | 'open' {
  return x.n >= 2 && x.high <= limit ? 'met' : 'open';
}
