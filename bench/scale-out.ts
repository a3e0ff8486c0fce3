/**
 * scale-out: 3 -> 4 cache nodes under a YCSB-B load (95% reads, 5% updates, scrambled Zipfian 0.99 key
 * popularity), with incremental migration (one source at a time, the new node serves each range as soon as it is
 * published; paper 004) and with the parallel baseline (all sources at once, served at the end). Target (issue 23):
 * incremental dip ≤ 5%, and smaller than parallel's.
 *
 * Why this method: a closed loop's throughput on this shared 2-core host moves by ~15% from one 5 s window to the
 * next with no migration at all, so one run per mode could not tell a 5% dip from noise. Here:
 *
 *  - Open-loop load at a fixed offered rate (lib/open-loop.ts): Poisson arrivals, seeded, each request timed from
 *    its scheduled start. The rate is a share (STRATA_BENCH_LOAD, 0.65) of the closed-loop capacity measured in the
 *    first run, so the fleet has headroom and serves everything offered when nothing disturbs it: the noise floor
 *    is then near zero instead of the host's throughput jitter. A migration that takes CPU or stalls requests
 *    shows as requests not served in time (the dip) and as a p99 rise.
 *  - The dip: shortfall of served against offered in the worst 5 s window of the migration and the 5 s after it.
 *    The noise floor: the same search over a span of the same length just before the migration, with no migration
 *    (lib/disruption.ts). The p99 rise: p99 over the migration's span against the seconds before that.
 *  - Several runs per mode, interleaved in pairs whose order alternates (incremental, parallel, parallel,
 *    incremental, ...: lib/paired.ts's schedule), so a drift of the host's load over the run weighs on both modes
 *    alike instead of always favouring the one that runs first in a pair. Both runs of a pair use the same seed
 *    (same arrivals, same keys). Over the runs: each mode's median, range and 95% t interval of the dip and noise
 *    floor, and of the paired difference incremental − parallel.
 *  - Each run starts a fresh fleet and loads the data anew, rather than scaling the same fleet back in: a scale-in
 *    is another migration with its own after-effects (nodes that just dropped ranges, a ring at a new version),
 *    so runs on a reused fleet would not start from the same state; fresh fleets make the runs independent, which
 *    the t interval assumes. It costs ~10 s of set-up per run, while the closed-loop calibration (every run, so
 *    every run warms up the same way) doubles as the warm-up.
 *
 * Each node process gets a fixed CPU budget (cgroups, {@link NODE_CPUS} of a core), standing in for an instance
 * of its own: on this 2-core host uncapped node processes all share the same cores, so a fourth node would add
 * contention rather than capacity, and the test would measure the host instead of the migration. Where cgroups
 * cannot be written the run is uncapped and its config says so.
 *
 * The migration runs in its own process (the ring CLI, as Step Functions would run it in Lambda), with the ring
 * and session documents in a local CAS folder shared with the load generator. Each session streams at the same
 * rate in both modes, so the parallel baseline moves data three times as fast in aggregate (as in the paper).
 *
 * Settings (environment): STRATA_BENCH_RUNS runs per mode (default 4; `--runs N` the same), STRATA_BENCH_SHORT=1 a
 * quick check (1 run per mode, shorter phases; no intervals, results not written), STRATA_BENCH_PRE_S seconds of
 * open-loop load before the migration (35), STRATA_BENCH_TAIL_S after it (8), STRATA_BENCH_WINDOW_S (5),
 * STRATA_BENCH_LOAD (0.65) or STRATA_BENCH_OFFERED_RATE (requests/s, skips the share), STRATA_BENCH_GRACE_MS (250),
 * STRATA_BENCH_MAX_IN_FLIGHT (1024), STRATA_BENCH_ARRIVALS (poisson | uniform), STRATA_BENCH_SEED (23),
 * STRATA_BENCH_CONCURRENCY (closed-loop workers of the calibration, 128), STRATA_BENCH_RATE (per-session stream
 * rate, bytes/s), STRATA_BENCH_NODE_CPUS (0.25; 0 = uncapped), STRATA_BENCH_MODES, STRATA_BENCH_TRACE=1.
 * `--seconds` is not used.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { HybridLogicalClock } from '../core/model/hlc.js';
import { initialRing } from '../core/ring/document.js';
import { ringHash } from '../core/ring/hash.js';
import { FileCasStore, RingStore } from '../core/ring/store.js';
import { RingView } from '../core/ring/view.js';
import { WarmTier } from '../core/tiers/warm-tier.js';
import { LocalFleet } from '../core/nodes/local-fleet.js';
import type { MigrationMode } from '../core/nodes/migration.js';
import { NodeClient } from '../core/nodes/node-client.js';
import { CpuCaps } from './lib/cpu-caps.js';
import { atMost, disruption, intervalText, overRuns, type Disruption, type OverRuns } from './lib/disruption.js';
import { MigrationTrace } from './lib/migration-trace.js';
import { closedLoop, round, table } from './lib/measure.js';
import { OpenLoop, windowStats, type SecondStats } from './lib/open-loop.js';
import { pairedSchedule } from './lib/paired.js';
import { median, prng } from './lib/rounds.js';
import { envNumber } from './lib/env-number.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SECRET = 'bench-secret-0123456789';
const KEYS = 40_000;
const VALUE_BYTES = 1024;
const READ_RATIO = 0.95;
const ZIPF_THETA = 0.99;

const whole = (min: number) => (v: number) => Number.isInteger(v) && v >= min;

/** STRATA_BENCH_SHORT=1: a quick check of the whole path (one run per mode, shorter phases). */
const SHORT = process.env.STRATA_BENCH_SHORT === '1';
/**
 * Closed-loop workers of the calibration (STRATA_BENCH_CONCURRENCY). Enough to saturate the fleet: 32 (the old
 * closed-loop load) are bound by their own round trips at ~11,000 ops/s, while an open loop of 14,000/s was still
 * served in full; 128 reach ~27,000 ops/s on the capped 3-node fleet.
 */
const CONCURRENCY = envNumber('STRATA_BENCH_CONCURRENCY', 128, whole(1), 'a whole number of workers >= 1');
/** Per migration session, bytes per second (STRATA_BENCH_RATE). */
const RATE = envNumber('STRATA_BENCH_RATE', 1024 * 1024, (v) => v > 0, 'bytes per second > 0');
/** CPU budget of each node process, in cores (STRATA_BENCH_NODE_CPUS; 0 = uncapped). */
const NODE_CPUS = envNumber('STRATA_BENCH_NODE_CPUS', 0.25, (v) => v >= 0, 'a share of a core >= 0');
/** Which modes to run (STRATA_BENCH_MODES, comma-separated; both by default). */
const MODES = (process.env.STRATA_BENCH_MODES ?? 'incremental,parallel')
  .split(',')
  .filter((m): m is MigrationMode => m === 'incremental' || m === 'parallel');
/** STRATA_BENCH_TRACE=1: print per-process CPU, latencies and the driver's events around each migration. */
const TRACE = process.env.STRATA_BENCH_TRACE === '1';
/** Whether `nice` is there to lower the migration driver's priority. */
const NICE = spawnSync('nice', ['true']).status === 0;

/** Offered rate as a share of the closed-loop capacity: below saturation, so an undisturbed fleet serves it all. */
const LOAD = envNumber('STRATA_BENCH_LOAD', 0.65, (v) => v > 0 && v <= 1, 'a share of capacity in (0, 1]');
/** A fixed offered rate (requests/s) instead of the share of the calibration: the same load on any host. */
const FIXED_RATE = envNumber('STRATA_BENCH_OFFERED_RATE', 0, (v) => v >= 0, 'requests per second >= 0');
/** Closed-loop calibration per run: unrecorded warm-up, then measured (JIT, connections, page cache settle). */
const CAL_WARMUP_S = SHORT ? 2 : 3;
const CAL_S = SHORT ? 4 : 7;
/** Open-loop seconds before the measured ones: the switch from the closed loop settles. */
const OPEN_WARMUP_S = SHORT ? 2 : 4;
/** Open-loop seconds measured before the migration: the noise span and, before it, the p99 reference. */
const PRE_S = envNumber('STRATA_BENCH_PRE_S', SHORT ? 25 : 35, whole(10), 'whole seconds >= 10');
const WINDOW_S = envNumber('STRATA_BENCH_WINDOW_S', 5, whole(1), 'whole seconds >= 1');
/** After the migration: its span covers WINDOW_S of them, plus the grace and a partial second. */
const TAIL_S = envNumber('STRATA_BENCH_TAIL_S', WINDOW_S + 3, whole(WINDOW_S + 2), `whole seconds >= ${WINDOW_S + 2}`);
/** The p99 reference keeps at least this many seconds before the noise span. */
const MIN_REFERENCE_S = 8;
const GRACE_MS = envNumber('STRATA_BENCH_GRACE_MS', 250, (v) => v >= 0, 'milliseconds >= 0');
/** Outstanding requests at most: a stall drops arrivals rather than queueing them without bound in the client. */
const MAX_IN_FLIGHT = envNumber('STRATA_BENCH_MAX_IN_FLIGHT', 1024, whole(1), 'a whole number >= 1');
const ARRIVALS = process.env.STRATA_BENCH_ARRIVALS === 'uniform' ? 'uniform' : 'poisson';
const SEED = envNumber('STRATA_BENCH_SEED', 23, whole(0), 'a whole number >= 0');
const DEFAULT_RUNS = 4;
/** The target: incremental dip at most this, in %. */
const DIP_TARGET = 5;

/** One migration under open-loop load, on a fresh fleet. */
interface RunResult {
  /** 1-based position in the schedule, and the pair it belongs to (the runs of a pair share a seed). */
  run: number;
  pair: number;
  mode: MigrationMode;
  seed: number;
  /** Closed-loop throughput of the 3-node fleet measured at the start of this run. */
  capacityOpsPerSec: number;
  offeredRate: number;
  migrationSeconds: number;
  publishedS: number[];
  firstServedAfterMs: number | null;
  allocationMs: number;
  movedKeys: number;
  d: Disruption;
  /** The load's seconds, and the second the migration started in (for the CSV and the time series). */
  seconds: SecondStats[];
  eventFrom: number;
  /** Served share and p99 of consecutive 5 s windows, `rel` s from the migration's start. */
  steps: { rel: number; servedPercent: number; p99Ms: number }[];
  /** 1-minute load average when the run ended. */
  loadAverage: number;
}

export async function scaleOut(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const runs = SHORT ? 1 : envNumber('STRATA_BENCH_RUNS', opts.runs ?? DEFAULT_RUNS, whole(1), 'a whole number >= 1');
  // a = incremental, b = parallel; the first of a pair alternates.
  const order = pairedSchedule(runs, 0).flatMap((block, p) =>
    block.order
      .map((side) => ({ pair: p + 1, mode: (side === 'a' ? 'incremental' : 'parallel') as MigrationMode }))
      .filter((r) => MODES.includes(r.mode)),
  );
  const perRunS = 8 + CAL_WARMUP_S + CAL_S + OPEN_WARMUP_S + PRE_S + 8 + TAIL_S;
  console.log(
    `${runs} run(s) per mode, ${order.length} in all: ~${perRunS} s each (set-up ~8 s, calibration ${CAL_WARMUP_S + CAL_S} s, ` +
      `open loop ${OPEN_WARMUP_S} + ${PRE_S} s before the migration, ${TAIL_S} s after it), ` +
      `~${Math.ceil((order.length * perRunS) / 60)} min; ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  const caps = NODE_CPUS > 0 ? CpuCaps.open('strata-bench-node') : undefined;
  if (NODE_CPUS > 0 && !caps) console.log('cgroups are not writable here: node processes run without CPU caps');
  const results: RunResult[] = [];
  const startedAt = performance.now();
  let rate = FIXED_RATE > 0 ? FIXED_RATE : undefined;
  try {
    for (const [i, r] of order.entries()) {
      const res = await runOnce({ run: i + 1, pair: r.pair, mode: r.mode, seed: SEED + r.pair, rate, caps });
      rate = res.offeredRate;
      results.push(res);
    }
  } finally {
    caps?.close();
  }
  const rateFrom = FIXED_RATE > 0 ? 'STRATA_BENCH_OFFERED_RATE' : `${LOAD} of the first run's closed-loop capacity`;
  const wallS = round((performance.now() - startedAt) / 1000, 1);
  const of = (mode: MigrationMode) => results.filter((r) => r.mode === mode);
  const inc = of('incremental');
  const par = of('parallel');

  printSeries(inc, par);
  const figures = (rs: RunResult[]) => ({
    runs: rs.length,
    dipPercent: overRuns(rs.map((r) => r.d.dipPercent)),
    noiseFloorPercent: overRuns(rs.map((r) => r.d.noisePercent)),
    p99RiseMs: overRuns(rs.map((r) => r.d.p99.riseMs)),
    noiseP99RiseMs: overRuns(rs.map((r) => r.d.p99.noiseRiseMs)),
    migrationSeconds: overRuns(rs.map((r) => r.migrationSeconds)),
    firstServedAfterMs: overRuns(
      rs.flatMap((r) => (r.firstServedAfterMs === null ? [] : [r.firstServedAfterMs])),
      0,
    ),
  });
  const modes = { incremental: figures(inc), parallel: figures(par) };
  // Paired by run order: the i-th incremental run with the i-th parallel one (same pair, same seed).
  const pairs = Math.min(inc.length, par.length);
  const diff = overRuns(Array.from({ length: pairs }, (_, i) => inc[i]!.d.dipPercent - par[i]!.d.dipPercent));
  const p99Diff = overRuns(Array.from({ length: pairs }, (_, i) => inc[i]!.d.p99.riseMs - par[i]!.d.p99.riseMs));

  const cell = (x: OverRuns, unit = '') =>
    x.n === 0 ? '' : `${x.median}${unit} [${x.min}–${x.max}]${x.n >= 2 ? ` (${x.low}–${x.high})` : ''}`;
  console.log('\nper mode: median [min–max] (95% t interval of the mean)');
  console.log(
    table(
      (['incremental', 'parallel'] as const)
        .filter((m) => modes[m].runs > 0)
        .map((m) => ({
          mode: m,
          runs: modes[m].runs,
          'dip %': cell(modes[m].dipPercent),
          'noise floor %': cell(modes[m].noiseFloorPercent),
          'p99 rise ms': cell(modes[m].p99RiseMs),
          'noise p99 rise ms': cell(modes[m].noiseP99RiseMs),
          'migration s': cell(modes[m].migrationSeconds),
        })),
    ),
  );
  const verdict = {
    incrementalDip:
      `incremental dip ≤ ${DIP_TARGET}%: ${atMost(modes.incremental.dipPercent, DIP_TARGET)} ` +
      `(${intervalText(modes.incremental.dipPercent, '%')})`,
    incrementalBelowParallel:
      `incremental < parallel: ${pairs >= 2 && diff.high < 0 ? 'met' : 'open'} ` +
      `(difference incremental − parallel, paired: ${intervalText(diff, ' points')})`,
  };
  console.log(
    `\nrate offered ${rate}/s (${rateFrom}); ` +
      `capacity per run ${results.map((r) => r.capacityOpsPerSec).join(', ')} ops/s; ${wallS} s in all; ` +
      `load average at the end ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  console.log(`p99 rise, paired difference incremental − parallel: ${intervalText(p99Diff, ' ms')}`);
  console.log(verdict.incrementalDip);
  console.log(verdict.incrementalBelowParallel);

  const partial = inc.length < 2 || par.length < 2;
  const compact = (r: RunResult) => ({
    run: r.run,
    pair: r.pair,
    mode: r.mode,
    seed: r.seed,
    capacityOpsPerSec: r.capacityOpsPerSec,
    dipPercent: r.d.dipPercent,
    noiseFloorPercent: r.d.noisePercent,
    worstWindowAtS: r.d.worst.from - r.eventFrom,
    noiseWorstWindowAtS: r.d.noiseWorst.from - r.eventFrom,
    spanS: r.d.span.to - r.d.span.from,
    noiseSpanS: r.d.noiseSpan.to - r.d.noiseSpan.from,
    referenceS: r.d.reference.to - r.d.reference.from,
    p99: r.d.p99,
    span: pick(r.d.spanTotals),
    migrationSeconds: r.migrationSeconds,
    publishedS: r.publishedS,
    firstServedAfterMs: r.firstServedAfterMs,
    allocationMs: r.allocationMs,
    movedKeys: r.movedKeys,
    loadAverage: r.loadAverage,
  });
  const csv = ['run,pair,mode,t_s,offered,served,late,errors,dropped,unfinished,p50_ms,p99_ms,issue_lag_max_ms'];
  for (const r of results)
    for (const s of r.seconds)
      csv.push(
        [
          ...[r.run, r.pair, r.mode, s.second - r.eventFrom, s.offered, s.served, s.late, s.errors, s.dropped, s.unfinished],
          ...[s.p50Ms, s.p99Ms, s.issueLagMaxMs].map((v) => (Number.isFinite(v) ? round(v, 2) : '')),
        ].join(','),
      );
  // A partial run's CSV goes to the temp folder: there to look at, never mistaken for results.
  const csvFile = partial ? join(tmpdir(), 'strata-bench-scale-out.csv') : join(ROOT, 'bench', 'results', 'scale-out.csv');
  writeFileSync(csvFile, csv.join('\n') + '\n');
  console.log(`\nCSV (per run and second, t_s = 0 at the start of the migration): ${csvFile}`);
  if (partial) {
    console.log('fewer than 2 runs of each mode: no intervals, so the results are not written');
    return { scenario: 'scale-out', partial: true, runs: results.map(compact) };
  }
  return {
    scenario: 'scale-out',
    config: {
      keys: KEYS,
      valueBytes: VALUE_BYTES,
      workload: 'YCSB-B: 95% reads, 5% updates, scrambled Zipfian 0.99',
      load: `open loop, ${ARRIVALS} arrivals, seeded (${SEED} + pair)`,
      offeredRate: rate,
      rateFrom,
      calibrationConcurrency: CONCURRENCY,
      runsPerMode: runs,
      order: results.map((r) => r.mode),
      phases: { calibrationS: CAL_WARMUP_S + CAL_S, openWarmupS: OPEN_WARMUP_S, preS: PRE_S, tailS: TAIL_S },
      window: `${WINDOW_S} s`,
      graceMs: GRACE_MS,
      maxInFlight: MAX_IN_FLIGHT,
      ratePerSessionBytes: RATE,
      rangesPerNode: 2,
      nodes: '3 -> 4 local cachenode processes, a fresh fleet per run',
      nodeCpus: caps ? NODE_CPUS : 'uncapped',
      client: 'WarmTier in the bench process; migration driven by the ring CLI in its own process',
      driverPriority: NICE ? 'nice 19' : 'normal',
      host: '2 shared cores',
      wallSeconds: wallS,
    },
    definitions: {
      dipPercent: `100 × (1 − served / offered), worst ${WINDOW_S} s window of the migration and the ${WINDOW_S} s after it`,
      served: `succeeded by the end of the second it was due in + ${GRACE_MS} ms; latency from the scheduled start`,
      noiseFloorPercent: 'the same over a span of the same length just before the migration (no migration)',
      p99RiseMs: "p99 over the migration's span − p99 over the seconds before the noise span",
      intervals: '95% Student t over runs; the difference is paired by run order (same pair, same seed)',
    },
    baseline: { name: 'parallel migration (all sources at once, served at the end)', ...modes.parallel },
    candidate: { name: 'incremental migration (one source at a time, served per session)', ...modes.incremental },
    difference: { dipPercentPoints: diff, p99RiseMs: p99Diff },
    runs: results.map(compact),
    series: { csv: 'bench/results/scale-out.csv' },
    targets: { incrementalDipPercent: `<= ${DIP_TARGET} (whole 95% interval)`, incrementalVsParallel: 'difference interval < 0' },
    verdict,
    met: {
      incrementalDipAtMost5: atMost(modes.incremental.dipPercent, DIP_TARGET) === 'met',
      incrementalBelowParallel: diff.n >= 2 && diff.high < 0,
    },
  };
}

function pick(w: { offered: number; served: number; late: number; errors: number; dropped: number; unfinished: number }) {
  return { offered: w.offered, served: w.served, late: w.late, errors: w.errors, dropped: w.dropped, unfinished: w.unfinished };
}

/** Served share and p99 in 5 s steps around the migration (t = 0 at its start), medians over each mode's runs. */
function printSeries(inc: RunResult[], par: RunResult[]): void {
  const rels = [...new Set([...inc, ...par].flatMap((r) => r.steps.map((s) => s.rel)))].sort((a, b) => a - b);
  if (rels.length === 0) return;
  const at = (rs: RunResult[], rel: number) => {
    const ws = rs.flatMap((r) => r.steps.filter((s) => s.rel === rel));
    return ws.length === 0
      ? { served: '', p99: '' }
      : { served: round(median(ws.map((w) => w.servedPercent)), 2), p99: round(median(ws.map((w) => w.p99Ms)), 1) };
  };
  const rows = rels.map((rel) => {
    const i = at(inc, rel);
    const p = at(par, rel);
    return {
      't (s)': rel,
      'incremental served %': i.served,
      'inc p99 ms': i.p99,
      'parallel served %': p.served,
      'par p99 ms': p.p99,
    };
  });
  console.log('\nserved / offered and p99, 5 s windows, t = 0 at the start of each migration, median over runs');
  console.log(table(rows));
}

/** YCSB's scrambled Zipfian: rank by Gray et al.'s Zipfian generator, then spread ranks over the key space. */
export class ScrambledZipfian {
  private readonly zetan: number;
  private readonly alpha: number;
  private readonly eta: number;

  constructor(
    private readonly n: number,
    private readonly theta = ZIPF_THETA,
  ) {
    let z = 0;
    for (let i = 1; i <= n; i++) z += 1 / i ** theta;
    this.zetan = z;
    const zeta2 = 1 + 1 / 2 ** theta;
    this.alpha = 1 / (1 - theta);
    this.eta = (1 - (2 / n) ** (1 - theta)) / (1 - zeta2 / z);
  }

  /** A key index; `rand` (default Math.random) is the uniform source, seeded by the open loop so runs repeat. */
  next(rand: () => number = Math.random): number {
    const u = rand();
    const uz = u * this.zetan;
    let rank: number;
    if (uz < 1) rank = 0;
    else if (uz < 1 + 0.5 ** this.theta) rank = 1;
    else rank = Math.floor(this.n * (this.eta * u - this.eta + 1) ** this.alpha);
    return fnv64mod(Math.min(rank, this.n - 1), this.n);
  }
}

function fnv64mod(x: number, n: number): number {
  let h = 0xcbf29ce484222325n;
  for (let i = 0; i < 8; i++) {
    h ^= BigInt((x >>> (i * 8)) & 0xff);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(n));
}

/**
 * One run: a fresh 3-node fleet loaded with the keys, the fourth node and the migration driver started (as they
 * would be elsewhere, before the measurement), the closed-loop calibration, then the open loop: warm-up, PRE_S
 * seconds, the migration, TAIL_S seconds.
 */
async function runOnce(o: {
  run: number;
  pair: number;
  mode: MigrationMode;
  seed: number;
  rate: number | undefined;
  caps: CpuCaps | undefined;
}): Promise<RunResult> {
  const { mode, caps } = o;
  console.log(
    `\n--- run ${o.run} (pair ${o.pair}), ${mode}: 3 nodes${caps ? ` of ${NODE_CPUS} CPU each` : ''}, ` +
      `${KEYS} keys of ${VALUE_BYTES} B`,
  );
  const dir = mkdtempSync(join(tmpdir(), `strata-bench-scale-${mode}-`));
  const fleet = new LocalFleet({ rootDir: join(dir, 'nodes'), secret: SECRET, capacityBytes: 4 * 1024 ** 3 });
  const client = new NodeClient({ secret: SECRET });
  const storeUri = `file:${join(dir, 'ring')}`;
  const store = new RingStore(new FileCasStore(join(dir, 'ring')));
  let warm: WarmTier | undefined;
  let child: ChildProcess | undefined;
  let loop: OpenLoop | undefined;
  try {
    const capped = (id: string) => caps?.cap(fleet.pid(id)!, id, NODE_CPUS);
    const nodes = await Promise.all(['n1', 'n2', 'n3'].map((id) => fleet.launch(id)));
    for (const n of nodes) capped(n.nodeId);
    const ring = await store.create(
      initialRing(
        nodes.map((n) => ({ id: n.nodeId, url: n.url })),
        2,
      ),
    );
    await Promise.all(nodes.map((n) => client.pushRing(n.url, ring)));
    const ringView = new RingView({ store, refreshIntervalMs: 1000 });
    warm = new WarmTier({ ring: ringView, secret: SECRET, connectionsPerNode: 16, timeoutMs: 5000 });
    const clock = new HybridLogicalClock();
    const value = Buffer.alloc(VALUE_BYTES, 0x61);
    const entry = () => ({
      header: { version: clock.next(), expiresAt: null, size: VALUE_BYTES, hash: '', tags: [], flags: {} },
      value,
    });
    for (let i = 0; i < KEYS; i += 500)
      await warm.putMany(
        'ycsb',
        Array.from({ length: Math.min(500, KEYS - i) }, (_, j) => ({ key: `user${i + j}`, entry: entry() })),
      );

    const zipf = new ScrambledZipfian(KEYS);
    let traceFrom = Date.now();
    const trace = TRACE ? new MigrationTrace(() => traceFrom) : undefined;
    const tier = warm;
    // One YCSB-B request; `rand` picks the key and the kind, so a seeded caller repeats the same workload.
    const request = async (rand: () => number) => {
      const key = `user${zipf.next(rand)}`;
      const read = rand() < READ_RATIO;
      const t0 = performance.now();
      try {
        if (read) await tier.get('ycsb', key);
        else await tier.put('ycsb', key, entry());
      } finally {
        trace?.op(read ? 'read' : 'write', performance.now() - t0, ringView.current()?.route(ringHash('ycsb', key)).reader.id);
      }
    };

    // The new node boots and the migration driver loads now, before any measurement: in production both happen on
    // other machines (an EC2 instance, a Lambda), so their start-up is not migration work here.
    const n4 = await fleet.launch('n4');
    capped('n4');
    const published: number[] = [];
    let moved = 0;
    let goAt = 0;
    // The driver runs at the lowest CPU priority: in production it runs elsewhere (a Lambda), so its start-up and
    // bookkeeping should not take CPU from the nodes or the load generator on this shared host.
    const proc = spawn(
      NICE ? 'nice' : process.execPath,
      [
        ...(NICE ? ['-n', '19', process.execPath] : []),
        '--import',
        'tsx',
        join(ROOT, 'core/composition/migration-cli.ts'),
        '--store',
        storeUri,
        '--wait-for-go',
        'scale-out',
        '--id',
        'n4',
        '--url',
        n4.url,
        '--mode',
        mode,
        '--rate',
        String(RATE),
        '--grace-ms',
        '600000',
      ],
      {
        cwd: ROOT,
        env: { ...process.env, STRATA_NODE_SECRET: SECRET, NODE_OPTIONS: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    child = proc;
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    let ready: () => void = () => {};
    const isReady = new Promise<void>((r) => (ready = r));
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const ev = JSON.parse(line) as { event?: string; at?: number; session?: { copied: { keys: number } } };
      trace?.event(ev.event ?? 'output');
      if (ev.event === 'ready') ready();
      if (ev.event === 'published') {
        published.push(ev.at!);
        moved += ev.session?.copied.keys ?? 0;
      }
    });
    const exited = new Promise<void>((resolve, reject) =>
      proc.once('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`migration failed (${code}): ${stderr.slice(-2000)}`)),
      ),
    );
    exited.catch(() => undefined); // awaited below; a failure before then must not crash the process unhandled
    await Promise.race([isReady, exited]);

    // Calibration, in every run so that every run warms up alike; the first one sets the offered rate of all.
    const cal = prng(o.seed ^ 0x2545f491);
    const capacity = await closedLoop(() => request(cal), {
      concurrency: CONCURRENCY,
      seconds: CAL_S,
      warmupSeconds: CAL_WARMUP_S,
    });
    const rate = o.rate ?? Math.max(1, Math.round(capacity.opsPerSec * LOAD));

    loop = new OpenLoop((_i, rand) => request(rand), {
      rate,
      arrivals: ARRIVALS,
      seed: o.seed,
      maxInFlight: MAX_IN_FLIGHT,
      graceMs: GRACE_MS,
    });
    traceFrom = Date.now();
    trace?.start(() => ({
      n1: fleet.pid('n1'),
      n2: fleet.pid('n2'),
      n3: fleet.pid('n3'),
      n4: fleet.pid('n4'),
      driver: proc.pid,
      load: process.pid,
    }));
    const ol = loop;
    ol.start();
    await sleep((OPEN_WARMUP_S + PRE_S) * 1000);
    const migrationStart = performance.now();
    goAt = Date.now();
    proc.stdin.end('go\n');
    await exited;
    const migrationEnd = performance.now();
    await sleep(TAIL_S * 1000);
    const res = await ol.stop();
    loop = undefined;
    trace?.stop();
    trace?.print(goAt);
    if (trace) {
      const refused = await Promise.all(
        (await fleet.list()).map(async (n) => `${n.nodeId} ${((await client.stats(n.url)) as { refused?: number }).refused}`),
      );
      console.log(`  trace: stale retries ${(await warm.stats()).staleRetries}; refused by node: ${refused.join(' ')}`);
    }
    const stats = await client.stats(n4.url);

    const eventFrom = ol.second(migrationStart);
    const d = disruption(res, {
      measuredFrom: OPEN_WARMUP_S,
      eventFrom,
      eventTo: Math.ceil(ol.elapsed(migrationEnd)),
      windowS: WINDOW_S,
      minReferenceS: MIN_REFERENCE_S,
    });
    const steps: RunResult['steps'] = [];
    // From up to 20 s before the migration (enough to see the level it starts from) to the end of the load.
    const firstRel = -Math.min(20, Math.floor((eventFrom - OPEN_WARMUP_S) / 5) * 5);
    for (let rel = firstRel; eventFrom + rel + 5 <= res.seconds.length; rel += 5) {
      const w = windowStats(res, eventFrom + rel, eventFrom + rel + 5);
      steps.push({ rel, servedPercent: (100 * w.served) / Math.max(1, w.offered), p99Ms: w.p99Ms });
    }
    const result: RunResult = {
      run: o.run,
      pair: o.pair,
      mode,
      seed: o.seed,
      capacityOpsPerSec: capacity.opsPerSec,
      offeredRate: rate,
      migrationSeconds: round((migrationEnd - migrationStart) / 1000, 2),
      publishedS: published.map((t) => round((t - goAt) / 1000, 2)),
      firstServedAfterMs: stats.firstServedAt === null ? null : stats.firstServedAt - goAt,
      allocationMs: n4.allocationMs,
      movedKeys: moved,
      d,
      seconds: res.seconds,
      eventFrom,
      steps,
      loadAverage: round(loadavg()[0]!, 2),
    };
    const t = d.spanTotals;
    console.log(
      `  capacity ${capacity.opsPerSec} ops/s closed-loop, offered ${rate}/s; migration ${result.migrationSeconds} s ` +
        `(published at ${result.publishedS.join(', ')} s), first served after ${result.firstServedAfterMs} ms\n` +
        `  dip ${d.dipPercent}% (worst ${WINDOW_S} s at +${d.worst.from - eventFrom} s), noise floor ${d.noisePercent}% ` +
        `(span ${d.span.to - d.span.from} s, noise span ${d.noiseSpan.to - d.noiseSpan.from} s); ` +
        `p99 ${d.p99.referenceMs} → ${d.p99.spanMs} ms (noise span ${d.p99.noiseSpanMs} ms); ` +
        `in the span: late ${t.late}, dropped ${t.dropped}, errors ${t.errors}, unfinished ${t.unfinished}; ` +
        `load average ${result.loadAverage}`,
    );
    return result;
  } finally {
    if (loop) await loop.stop(0).catch(() => undefined);
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await warm?.close();
    await client.close();
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
