// What the scenarios that run interleaved rounds share: a seeded workload, numeric flags, and the median, min-max
// and spread of a figure over the rounds.
import { round } from './measure.js';

/** A figure over the rounds: its median and range. */
export interface Summary {
  median: number;
  min: number;
  max: number;
}

/** `--name N` from the command line, or `dflt` when absent or not a number. */
export function flag(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) ? v : dflt;
}

/** mulberry32: a small seeded PRNG, so a workload (and what it measures) is the same on every run. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function summary(xs: readonly number[], digits = 3): Summary {
  return { median: round(median(xs), digits), min: round(Math.min(...xs), digits), max: round(Math.max(...xs), digits) };
}

/** (max - min) / median over rounds: the noise of one figure. */
export function spread(xs: readonly number[]): number {
  return round((Math.max(...xs) - Math.min(...xs)) / median(xs));
}
