import { atMost, disruption, intervalText, overRuns } from '../../bench/lib/disruption.js';
import {
  OpenLoop,
  percentileSorted,
  windowStats,
  worstWindow,
  type OpenLoopResult,
  type SecondStats,
} from '../../bench/lib/open-loop.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every arrival ends up in exactly one of these, whatever the timing. */
const accounted = (s: SecondStats) => s.served + s.late + s.errors + s.dropped + s.unfinished;

/** A synthetic result: `offered` per second, `served(s)` of them served, each completed one with latency `ms(s)`. */
function synthetic(n: number, offered: number, served: (s: number) => number, ms: (s: number) => number): OpenLoopResult {
  const seconds: SecondStats[] = [];
  const latenciesMs: number[][] = [];
  for (let s = 0; s < n; s++) {
    const lat = Array.from({ length: served(s) }, () => ms(s));
    latenciesMs.push(lat);
    const late = offered - served(s);
    seconds.push({
      second: s,
      offered,
      served: served(s),
      late,
      errors: 0,
      dropped: 0,
      unfinished: 0,
      p50Ms: ms(s),
      p99Ms: ms(s),
      issueLagMaxMs: 0,
    });
  }
  return { rate: offered, arrivals: 'uniform', seed: 1, maxInFlight: 10, graceMs: 250, fullSeconds: n, seconds, latenciesMs };
}

describe('open-loop load (bench/lib/open-loop.ts)', () => {
  it('offers evenly spaced arrivals at the rate and accounts for each one once', async () => {
    const loop = new OpenLoop(async () => undefined, { rate: 200, arrivals: 'uniform', maxInFlight: 1000 });
    loop.start();
    await sleep(1300);
    const r = await loop.stop();
    expect(r.fullSeconds).toBeGreaterThanOrEqual(1);
    expect(r.seconds).toHaveLength(r.fullSeconds);
    // Arrival i is due at i × 5 ms: exactly 200 in second 0, however late the scheduler woke.
    expect(r.seconds[0]!.offered).toBe(200);
    for (const s of r.seconds) expect(accounted(s)).toBe(s.offered);
    expect(r.seconds[0]!.dropped).toBe(0);
    expect(r.seconds[0]!.errors).toBe(0);
    expect(r.latenciesMs[0]).toHaveLength(200);
  });

  it('drops arrivals beyond maxInFlight and counts what never completed as unfinished', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const loop = new OpenLoop(() => gate, { rate: 100, arrivals: 'uniform', maxInFlight: 5 });
    loop.start();
    await sleep(1100);
    const r = await loop.stop(0);
    release();
    const s0 = r.seconds[0]!;
    expect(s0.offered).toBe(100);
    expect(s0.unfinished).toBe(5);
    expect(s0.dropped).toBe(95);
    expect(s0.served + s0.late + s0.errors).toBe(0);
    expect(r.latenciesMs[0]).toHaveLength(0);
    expect(s0.p99Ms).toBeNaN();
  });

  it('counts failed requests as errors, never as served', async () => {
    const loop = new OpenLoop(
      async (i) => {
        if (i % 2 === 0) throw new Error('no');
      },
      { rate: 100, arrivals: 'uniform', maxInFlight: 1000 },
    );
    loop.start();
    await sleep(1100);
    const r = await loop.stop();
    expect(r.seconds[0]!.errors).toBe(50);
    expect(r.seconds[0]!.served + r.seconds[0]!.late).toBe(50);
  });

  it('repeats the workload and the Poisson arrivals for a seed', async () => {
    const draws = async (seed: number) => {
      const seen: number[] = [];
      const loop = new OpenLoop(
        async (i, rand) => {
          seen[i] = rand();
        },
        { rate: 1000, seed, maxInFlight: 10_000 },
      );
      loop.start();
      await sleep(1100);
      const r = await loop.stop();
      return { seen: seen.slice(0, 500), offered: r.seconds[0]!.offered };
    };
    const a = await draws(7);
    const b = await draws(7);
    const c = await draws(8);
    expect(a.seen).toEqual(b.seen);
    expect(a.offered).toBe(b.offered);
    expect(a.seen).not.toEqual(c.seen);
    // Poisson with mean 1000 per second: its sd is ~32.
    expect(Math.abs(a.offered - 1000)).toBeLessThan(160);
  });

  it('rejects a rate or bound that cannot run', () => {
    expect(() => new OpenLoop(async () => undefined, { rate: 0, maxInFlight: 1 })).toThrow(/rate/);
    expect(() => new OpenLoop(async () => undefined, { rate: 1, maxInFlight: 0 })).toThrow(/maxInFlight/);
  });
});

describe('windows, dips and noise floors (bench/lib/open-loop.ts, bench/lib/disruption.ts)', () => {
  it('takes nearest-rank percentiles', () => {
    const xs = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentileSorted(xs, 0.5)).toBe(50);
    expect(percentileSorted(xs, 0.99)).toBe(99);
    expect(percentileSorted([3], 0.99)).toBe(3);
    expect(percentileSorted([], 0.5)).toBeNaN();
  });

  it('sums a window and finds the worst one (the earliest of equals)', () => {
    const r = synthetic(
      20,
      100,
      (s) => (s === 10 || s === 11 ? 50 : 100),
      () => 2,
    );
    const w = windowStats(r, 8, 13);
    expect(w).toMatchObject({ from: 8, to: 13, offered: 500, served: 400, late: 100 });
    expect(w.shortfall).toBeCloseTo(0.2, 12);
    expect(windowStats(r, 18, 30)).toMatchObject({ from: 18, to: 20, offered: 200 });
    expect(worstWindow(r, 0, 20, 5).from).toBe(7);
    expect(worstWindow(r, 11, 20, 5)).toMatchObject({ from: 11, served: 450 });
    // A span shorter than the window is taken whole.
    expect(worstWindow(r, 10, 12, 5)).toMatchObject({ from: 10, to: 12, offered: 200, served: 100 });
  });

  it('gives the dip, the noise floor over a span as long, and the p99 rise', () => {
    // 40 s of 100 offered; the event in seconds 30-31 serves half, at 50 ms instead of 2 ms; second 25 serves 90.
    const r = synthetic(
      40,
      100,
      (s) => (s === 30 || s === 31 ? 50 : s === 25 ? 90 : 100),
      (s) => (s === 30 || s === 31 ? 50 : 2),
    );
    const d = disruption(r, { measuredFrom: 2, eventFrom: 30, eventTo: 32, windowS: 5 });
    expect(d.span).toEqual({ from: 30, to: 37 });
    expect(d.noiseSpan).toEqual({ from: 23, to: 30 });
    expect(d.noiseSpanShort).toBe(false);
    expect(d.reference).toMatchObject({ from: 2, to: 23 });
    expect(d.worst.from).toBe(30);
    expect(d.dipPercent).toBe(20);
    expect(d.noisePercent).toBe(2);
    expect(d.p99).toMatchObject({ referenceMs: 2, spanMs: 50, noiseSpanMs: 2, riseMs: 48, noiseRiseMs: 0 });
    expect(d.spanTotals).toMatchObject({ offered: 700, served: 600 });

    // Too few seconds before the event: the noise span shortens so that the reference keeps its minimum.
    const short = disruption(r, { measuredFrom: 15, eventFrom: 30, eventTo: 32, windowS: 5, minReferenceS: 10 });
    expect(short.noiseSpan).toEqual({ from: 25, to: 30 });
    expect(short.noiseSpanShort).toBe(true);
    expect(short.reference).toMatchObject({ from: 15, to: 25 });
  });

  it('summarises a figure over runs, with a verdict only when the whole interval is within the limit', () => {
    const x = overRuns([1, 2, 3, 4, 5]);
    expect(x).toMatchObject({ n: 5, median: 3, min: 1, max: 5, mean: 3 });
    // 3 ± 2.776 × 1.5811 / √5
    expect(x.low).toBeCloseTo(1.04, 2);
    expect(x.high).toBeCloseTo(4.96, 2);
    expect(atMost(x, 5)).toBe('met');
    expect(atMost(x, 4.9)).toBe('open');
    expect(atMost(overRuns([0.1]), 5)).toBe('open');
    expect(intervalText(overRuns([0.1]))).toBe('1 run: no interval');
    expect(intervalText(x, '%')).toBe('95% interval 1.04% – 4.96%, mean 3%, n = 5');
    expect(overRuns([]).n).toBe(0);
  });
});
