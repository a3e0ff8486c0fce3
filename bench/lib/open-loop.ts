/**
 * Open-loop load: requests arrive at a fixed offered rate whatever the system under test does, as users' requests
 * do. A closed loop (N workers back to back) slows down with the system, so a stall shows as fewer requests sent,
 * not as requests waiting, and its throughput mixes the system's capacity with the host's noise. Here:
 *
 *  - arrivals are scheduled ahead from a seeded PRNG (Poisson: exponential gaps; or evenly spaced), and each request
 *    is timed from its scheduled time, not from when it was issued: when the system (or this process) falls behind,
 *    the wait counts in the latency (no coordinated omission);
 *  - at most `maxInFlight` requests are outstanding; an arrival beyond that is not issued and counts as `dropped`
 *    (not served) in the second it was due, so a stall cannot grow an unbounded queue in the generator;
 *  - per second of due time: offered, served (succeeded before the end of that second plus `graceMs`), late
 *    (succeeded after that), errors, dropped, unfinished (still outstanding when the load stopped), p50/p99 latency.
 *
 * Nothing here knows what a request does: a scenario passes `op`, and marks its events with {@link OpenLoop.second}.
 * {@link windowStats} and {@link worstWindow} turn the seconds into a dip (shortfall of served against offered over
 * a window) the same way for every scenario (scale-out, a rolling upgrade, a node failure).
 */
import { performance } from 'node:perf_hooks';
import { prng } from './rounds.js';

export interface OpenLoopOptions {
  /** Offered requests per second. */
  rate: number;
  /** Poisson arrivals (exponential gaps, the default) or evenly spaced ones. */
  arrivals?: 'poisson' | 'uniform';
  /** Seeds the arrivals and the `rand` handed to `op`: the same seed gives the same schedule and workload. */
  seed?: number;
  /** Outstanding requests at most; an arrival beyond it is dropped (not served). */
  maxInFlight: number;
  /** A request due in second s is served when it succeeds by the end of s plus this (ms; default 250). */
  graceMs?: number;
  /**
   * How often the scheduler wakes (ms, default 1): the arrivals due since the last wake are issued together, each
   * still timed from its own scheduled time, so a coarser tick costs latency, not accuracy of the count.
   */
  tickMs?: number;
}

/** One request: `i` is its arrival index, `rand` a PRNG seeded with the loop (the same sequence on every run). */
export type OpenLoopOp = (i: number, rand: () => number) => Promise<unknown>;

/** What happened to the requests due in a span of time (one second, or a window of seconds). */
export interface Tally {
  offered: number;
  /** Succeeded by the end of their second plus the grace. */
  served: number;
  /** Succeeded, but after that. */
  late: number;
  errors: number;
  /** Not issued: `maxInFlight` requests were outstanding when they were due. */
  dropped: number;
  /** Issued, still outstanding when the loop stopped (after its drain). */
  unfinished: number;
  /** Latency percentiles of those that completed (success or error), from their due time. */
  p50Ms: number;
  p99Ms: number;
}

/** One second of due time (second 0 starts at {@link OpenLoop.start}). */
export interface SecondStats extends Tally {
  second: number;
  /** The longest an arrival of this second waited for the scheduler (this process's own lag, e.g. a GC pause). */
  issueLagMaxMs: number;
}

export interface OpenLoopResult {
  rate: number;
  arrivals: 'poisson' | 'uniform';
  seed: number;
  maxInFlight: number;
  graceMs: number;
  /** Whole seconds the arrivals ran for: later seconds are partial and left out of `seconds`. */
  fullSeconds: number;
  seconds: SecondStats[];
  /** Completed requests' latencies (ms) per second of due time, for percentiles over windows. */
  latenciesMs: number[][];
}

/** A span of seconds [from, to) summed: served against offered, and the latency percentiles over all of it. */
export interface WindowStats extends Tally {
  from: number;
  to: number;
  /** 1 - served / offered (0 when nothing was offered). */
  shortfall: number;
}

interface Counts {
  offered: number;
  served: number;
  late: number;
  errors: number;
  dropped: number;
  issueLagMaxMs: number;
  latencies: number[];
}

export class OpenLoop {
  private readonly arrivals: 'poisson' | 'uniform';
  private readonly seed: number;
  private readonly graceMs: number;
  private readonly tickMs: number;
  private readonly arrivalRand: () => number;
  private readonly opRand: () => number;
  private readonly counts: Counts[] = [];
  /** Outstanding requests: arrival index -> the second it was due in. */
  private readonly outstanding = new Map<number, number>();
  private t0 = 0;
  private stoppedAt = 0;
  private next = 0;
  /** When the next arrival is due, in ms since start (offsets, not absolute times: whole seconds stay exact). */
  private nextAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private idle: (() => void) | undefined;

  constructor(
    private readonly op: OpenLoopOp,
    private readonly opts: OpenLoopOptions,
  ) {
    if (!(opts.rate > 0)) throw new Error(`open loop: rate must be > 0 (got ${opts.rate})`);
    if (!(opts.maxInFlight >= 1)) throw new Error(`open loop: maxInFlight must be >= 1 (got ${opts.maxInFlight})`);
    this.arrivals = opts.arrivals ?? 'poisson';
    this.seed = opts.seed ?? 1;
    this.graceMs = opts.graceMs ?? 250;
    this.tickMs = opts.tickMs ?? 1;
    // Two streams, so the workload an op draws does not depend on the arrival process (uniform or Poisson).
    this.arrivalRand = prng(this.seed);
    this.opRand = prng(this.seed ^ 0x5bd1e995);
  }

  /** Starts the arrivals now (second 0). */
  start(): void {
    if (this.running || this.t0) throw new Error('open loop: already started');
    this.t0 = performance.now();
    this.nextAt = this.gapMs(0);
    this.running = true;
    this.tick();
  }

  /** The second (of due time) that `at` (a performance.now() value, default now) falls in. */
  second(at = performance.now()): number {
    return Math.floor((at - this.t0) / 1000);
  }

  /** Seconds since start, fractional. */
  elapsed(at = performance.now()): number {
    return (at - this.t0) / 1000;
  }

  get inFlight(): number {
    return this.outstanding.size;
  }

  /**
   * Stops the arrivals and waits up to `drainMs` for the requests still outstanding (those left count as
   * unfinished), then gives the figures per whole second.
   */
  async stop(drainMs = 5000): Promise<OpenLoopResult> {
    if (!this.running) throw new Error('open loop: not running');
    this.stoppedAt = performance.now();
    // Every arrival due before now is offered, even when the last wake came early (or the event loop was busy).
    this.issueDue(this.stoppedAt);
    this.running = false;
    clearTimeout(this.timer);
    if (this.outstanding.size > 0) {
      let timeout: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((r) => (this.idle = r)),
        new Promise<void>((r) => (timeout = setTimeout(r, drainMs))),
      ]);
      clearTimeout(timeout);
      this.idle = undefined;
    }
    const unfinished: number[] = [];
    for (const s of this.outstanding.values()) unfinished[s] = (unfinished[s] ?? 0) + 1;
    // Requests still outstanding now complete into counts nobody reads: freeze the figures first.
    this.outstanding.clear();
    const fullSeconds = Math.max(0, this.second(this.stoppedAt));
    const seconds: SecondStats[] = [];
    const latenciesMs: number[][] = [];
    for (let s = 0; s < fullSeconds; s++) {
      const c = this.counts[s] ?? emptyCounts();
      const sorted = Float64Array.from(c.latencies).sort();
      latenciesMs.push([...c.latencies]);
      seconds.push({
        second: s,
        offered: c.offered,
        served: c.served,
        late: c.late,
        errors: c.errors,
        dropped: c.dropped,
        unfinished: unfinished[s] ?? 0,
        p50Ms: percentileSorted(sorted, 0.5),
        p99Ms: percentileSorted(sorted, 0.99),
        issueLagMaxMs: c.issueLagMaxMs,
      });
    }
    return {
      rate: this.opts.rate,
      arrivals: this.arrivals,
      seed: this.seed,
      maxInFlight: this.opts.maxInFlight,
      graceMs: this.graceMs,
      fullSeconds,
      seconds,
      latenciesMs,
    };
  }

  /** Milliseconds from arrival i-1 to arrival i (from start to arrival 0 when i = 0). */
  private gapMs(i: number): number {
    if (this.arrivals === 'uniform') return i === 0 ? 0 : 1000 / this.opts.rate;
    return (-Math.log(1 - this.arrivalRand()) * 1000) / this.opts.rate;
  }

  private tick = (): void => {
    if (!this.running) return;
    this.issueDue(performance.now());
    this.timer = setTimeout(this.tick, this.tickMs);
  };

  /** Issues the arrivals due by `now`, each timed from its own due time. */
  private issueDue(now: number): void {
    while (this.t0 + this.nextAt <= now) {
      this.issue(this.next, this.nextAt, now);
      this.next++;
      // Evenly spaced arrivals from the index, so rounding does not drift over a long run.
      this.nextAt = this.arrivals === 'uniform' ? (this.next * 1000) / this.opts.rate : this.nextAt + this.gapMs(this.next);
    }
  }

  /** Arrival `i`, due `offset` ms after start, issued (or dropped) at `now`. */
  private issue(i: number, offset: number, now: number): void {
    const s = Math.floor(offset / 1000);
    const due = this.t0 + offset;
    const c = (this.counts[s] ??= emptyCounts());
    c.offered++;
    c.issueLagMaxMs = Math.max(c.issueLagMaxMs, now - due);
    if (this.outstanding.size >= this.opts.maxInFlight) {
      c.dropped++;
      return;
    }
    this.outstanding.set(i, s);
    let p: Promise<unknown>;
    try {
      p = this.op(i, this.opRand);
    } catch (e) {
      p = Promise.reject(e);
    }
    // Served: succeeded by the end of its second plus the grace.
    const deadline = this.t0 + (s + 1) * 1000 + this.graceMs;
    p.then(
      () => this.done(i, due, deadline, c, true),
      () => this.done(i, due, deadline, c, false),
    );
  }

  private done(i: number, due: number, deadline: number, c: Counts, ok: boolean): void {
    // Not outstanding any more: the loop stopped and its figures are frozen.
    if (!this.outstanding.delete(i)) return;
    const now = performance.now();
    c.latencies.push(now - due);
    if (!ok) c.errors++;
    else if (now <= deadline) c.served++;
    else c.late++;
    if (this.outstanding.size === 0) this.idle?.();
  }
}

function emptyCounts(): Counts {
  return { offered: 0, served: 0, late: 0, errors: 0, dropped: 0, issueLagMaxMs: 0, latencies: [] };
}

/** The `q` quantile (0..1) of ascending `sorted`, nearest rank; NaN when empty. */
export function percentileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  return sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!;
}

/** The seconds [from, to) of `r` summed (clipped to the seconds there are). */
export function windowStats(r: OpenLoopResult, from: number, to: number): WindowStats {
  const lo = Math.max(0, from);
  const hi = Math.min(r.seconds.length, to);
  const w: WindowStats = {
    from: lo,
    to: hi,
    offered: 0,
    served: 0,
    shortfall: 0,
    late: 0,
    errors: 0,
    dropped: 0,
    unfinished: 0,
    p50Ms: NaN,
    p99Ms: NaN,
  };
  const lat: number[] = [];
  for (let s = lo; s < hi; s++) {
    const x = r.seconds[s]!;
    w.offered += x.offered;
    w.served += x.served;
    w.late += x.late;
    w.errors += x.errors;
    w.dropped += x.dropped;
    w.unfinished += x.unfinished;
    for (const v of r.latenciesMs[s] ?? []) lat.push(v);
  }
  w.shortfall = w.offered > 0 ? 1 - w.served / w.offered : 0;
  const sorted = Float64Array.from(lat).sort();
  w.p50Ms = percentileSorted(sorted, 0.5);
  w.p99Ms = percentileSorted(sorted, 0.99);
  return w;
}

/**
 * The window of `length` seconds within [from, to) with the largest shortfall (the earliest of equals); when the
 * span is shorter than `length`, the span itself. Searching a span of the same length for the worst window is what
 * makes a dip and its noise floor comparable: the more windows searched, the worse the worst one by chance alone.
 */
export function worstWindow(r: OpenLoopResult, from: number, to: number, length: number): WindowStats {
  const lo = Math.max(0, from);
  const hi = Math.min(r.seconds.length, to);
  if (hi - lo <= length) return windowStats(r, lo, hi);
  let worstAt = lo;
  let worst = -Infinity;
  for (let s = lo; s + length <= hi; s++) {
    let offered = 0;
    let served = 0;
    for (let k = s; k < s + length; k++) {
      offered += r.seconds[k]!.offered;
      served += r.seconds[k]!.served;
    }
    const shortfall = offered > 0 ? 1 - served / offered : 0;
    if (shortfall > worst) {
      worst = shortfall;
      worstAt = s;
    }
  }
  return windowStats(r, worstAt, worstAt + length);
}
