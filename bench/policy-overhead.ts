/**
 * policy-overhead: what the policy engine costs on the request path (issue 22's target, after Tiera's "control layer
 * overhead < 2%", paper 003 §4): with 10 active rules against none, throughput loss ≤ 2% and p99 ≤ 1.05×.
 *
 * Two measurements, in one process, over one Redis hot tier (coordinator GETs and PUTs of 1 KB, concurrency 64):
 *
 *  - Paired rounds. The same coordinator, connections and keys serve short rounds alternately with the ten-rule live
 *    policy in force and with none, the policy swapped between rounds (`Coordinator.replacePolicies`, as a new
 *    policy version is put in force). "Rules": each request first makes the live policy's refresh check (what the
 *    API handler does before each request) and the coordinator reads the compiled policy's settings. "None": no live
 *    policy, no check, and the same namespace settings as a plain `PolicyRegistry` (a deployment without a policy
 *    store), so both sides place and write exactly alike and only the engine differs. Per pair: the throughput, p99
 *    and CPU-per-operation ratios (rules / none); over the pairs: the geometric mean with a 95% Student t interval on
 *    the logarithms, and a bootstrap interval (seeded) as a check. The side that goes first alternates (a/b/b/a...),
 *    and A/A control pairs (the ten rules on both sides, swapped in between all the same) are spread among them:
 *    their interval shows how wide the noise alone makes it. A target is met when the interval's far end is within it;
 *    otherwise it stays open and the interval is reported.
 *  - CPU per request: the engine's work per request (the refresh check and the namespace's compiled settings) timed
 *    over 1,000,000 calls before each a/b pair, as a share of the CPU of an operation on the "none" side of that pair
 *    (95% t interval over the pairs). Issue 22 counts the throughput target as met when this shows it as well.
 *
 * Flags: `--pairs N` (a/b pairs per operation, default 30; `--runs N` means the same), `--aa-pairs N` (A/A control
 * pairs, default 10), `--round-seconds S` (default 1), `--warmup-seconds S` (before each round, unrecorded, default
 * 0.1). `--seconds` is not used. The default run takes ~3 minutes.
 */
import { startRedis } from '../test/helpers/services.js';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { closedLoop, round, table } from './lib/measure.js';
import {
  meanInterval,
  pairedSchedule,
  ratioCells,
  ratioFigure,
  type MeanInterval,
  type PairBlock,
  type RatioFigure,
} from './lib/paired.js';
import { flag, prng, summary, type Summary } from './lib/rounds.js';
import { CONCURRENCY, KEYS, tenRulePolicy } from './hot-path-side.js';

const DEFAULT_PAIRS = 30;
const DEFAULT_AA_PAIRS = 10;
/** Engine calls timed before each a/b pair. */
const ENGINE_CALLS = 1_000_000;
const VALUE = Buffer.alloc(1024, 0x5a);
const SEED = 22;
const OPS = ['get', 'put'] as const;
type Op = (typeof OPS)[number];
type Side = 'rules' | 'none';
/** Throughput loss at most 2%: the ratio rules / none at least this. */
const THROUGHPUT_MIN = 0.98;
const P99_MAX = 1.05;
const CPU_SHARE_MAX = 0.02;
/** CPU per operation, rules / none, at most this: the throughput target shown by CPU. */
const CPU_RATIO_MAX = 1.02;

/** One round's figures (one side, one operation). */
interface RoundFigures {
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Process CPU (user + system) per operation, µs. */
  cpuUs: number;
  errors: number;
}

interface PairRecord {
  pair: number;
  kind: PairBlock['kind'];
  op: Op;
  /** Which side ran first: `a` = the ten rules, `b` = none (or, in an A/A pair, the ten rules again). */
  order: string;
  a: RoundFigures;
  b: RoundFigures;
  ratios: { throughput: number; p99: number; cpu: number };
  /** The engine's CPU per request timed before this pair, ns (a/b pairs only). */
  engineNs?: number;
}

interface OpSummary {
  ab: { throughput: RatioFigure; p99: RatioFigure; cpu: RatioFigure };
  aa: { throughput: RatioFigure; p99: RatioFigure; cpu: RatioFigure };
  /** Median (min-max) of each side's figures over the a/b pairs. */
  sides: Record<Side, { opsPerSec: Summary; p50Ms: Summary; p99Ms: Summary; cpuUs: Summary }>;
  /** The engine's CPU per request as a share of the operation's CPU (on the "none" side). */
  engineShare: MeanInterval;
}

/** CPU microseconds (user + system) per call of `f` (synchronous: the refresh check returns without a promise). */
function cpuPerCall(calls: number, f: () => unknown): number {
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) f();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / calls;
}

/** One operation's verdicts: the 95% interval's far end within the target; throughput also by CPU (issue 22). */
interface Verdict {
  throughput: string;
  throughputMet: boolean;
  throughputMetBy: 'paired interval' | 'CPU per operation' | null;
  p99: string;
  p99Met: boolean;
  p99MetBy: 'paired interval' | 'CPU per operation' | null;
  engineCpuShare: string;
  engineCpuShareMet: boolean;
}

/**
 * `engineMaxNs`: the slowest pair's measurement of the engine's time per request. The engine's work is synchronous
 * on the request path (a refresh check and a compiled settings lookup, no I/O, no allocation): it can delay a request
 * by at most that, and slow the others by at most its share of the CPU, so with the rules the p99 is at most the
 * baseline's times (1 + share) plus that time. Against the smallest baseline p99 of any pair, that bound within 1.05
 * shows the p99 target by in-process CPU time, as the issue allows, where the paired interval is too wide.
 */
function verdictOf(s: OpSummary, engineMaxNs: number): Verdict {
  const fmt = (x: number) => x.toFixed(3);
  const tp = s.ab.throughput;
  const byInterval = tp.low >= THROUGHPUT_MIN;
  // In-process CPU: what the engine adds per request, or CPU per operation with the rules against without.
  const cpuEvidence = [
    s.engineShare.high <= CPU_SHARE_MAX
      ? `the engine's CPU at most ${(s.engineShare.high * 100).toFixed(2)}% of an operation's`
      : undefined,
    s.ab.cpu.high <= CPU_RATIO_MAX ? `CPU per operation rules / none at most ${fmt(s.ab.cpu.high)}` : undefined,
  ].filter((e) => e !== undefined);
  const byCpu = cpuEvidence.length > 0;
  const p = s.ab.p99;
  const share = s.engineShare;
  const p99Floor = s.sides.none.p99Ms.min * 1000; // µs
  const p99Bound = 1 + share.high + engineMaxNs / 1000 / p99Floor;
  const p99ByInterval = p.high <= P99_MAX;
  const p99ByCpu = p99Bound <= P99_MAX;
  return {
    throughput: byInterval
      ? `met: interval ${fmt(tp.low)}-${fmt(tp.high)}, loss at most ${((1 - tp.low) * 100).toFixed(1)}%`
      : byCpu
        ? `met by CPU per operation (${cpuEvidence.join('; ')}); the throughput interval ` +
          `${fmt(tp.low)}-${fmt(tp.high)} alone leaves it open`
        : `open: interval ${fmt(tp.low)}-${fmt(tp.high)}`,
    throughputMet: byInterval || byCpu,
    throughputMetBy: byInterval ? 'paired interval' : byCpu ? 'CPU per operation' : null,
    p99: p99ByInterval
      ? `met: interval ${fmt(p.low)}-${fmt(p.high)}`
      : p99ByCpu
        ? `met by CPU per operation (at most ${fmt(p99Bound)}×: the engine's ${round(engineMaxNs, 1)} ns a request against ` +
          `a baseline p99 of at least ${round(p99Floor, 0)} µs, and its CPU share); the p99 interval ` +
          `${fmt(p.low)}-${fmt(p.high)} alone leaves it open`
        : `open: interval ${fmt(p.low)}-${fmt(p.high)}`,
    p99Met: p99ByInterval || p99ByCpu,
    p99MetBy: p99ByInterval ? 'paired interval' : p99ByCpu ? 'CPU per operation' : null,
    engineCpuShare:
      `${share.high <= CPU_SHARE_MAX ? 'met' : 'open'}: ${(share.mean * 100).toFixed(2)}% ` +
      `(95% CI ${(share.low * 100).toFixed(2)}-${(share.high * 100).toFixed(2)}%)`,
    engineCpuShareMet: share.high <= CPU_SHARE_MAX,
  };
}

export async function policyOverhead(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const pairs = Math.max(2, Math.round(flag('pairs', opts.runs ?? DEFAULT_PAIRS)));
  const aaPairs = Math.max(0, Math.round(flag('aa-pairs', DEFAULT_AA_PAIRS)));
  const roundSeconds = flag('round-seconds', 1);
  const warmupSeconds = flag('warmup-seconds', 0.1);
  const schedule = pairedSchedule(pairs, aaPairs);
  const expectedSeconds = (schedule.length + 1) * OPS.length * 2 * (roundSeconds + warmupSeconds);
  console.log(
    `${pairs} a/b pairs (10 rules / none) and ${aaPairs} A/A pairs (10 rules / 10 rules) per operation (GET, PUT), ` +
      `rounds of ${roundSeconds} s after ${warmupSeconds} s unrecorded: ~${Math.round(expectedSeconds)} s of load`,
  );

  const redis = await startRedis();
  let active: Side = 'rules';
  const holder: { coordinator?: Coordinator } = {};
  // A new version read from the store goes into the coordinator, as the API does (only while the rules are in force).
  const live = tenRulePolicy((next) => {
    if (active === 'rules') holder.coordinator?.replacePolicies(next.registry);
  });
  const rulesRegistry = () => live.current.compiled.registry;
  // "None": the same settings the rules compile to for the benchmark namespace, as plain namespace settings.
  const none = new PolicyRegistry({ namespaces: { bench: { ...rulesRegistry().for('bench') } } });
  if (JSON.stringify(none.for('bench')) !== JSON.stringify(rulesRegistry().for('bench')))
    throw new Error('policy-overhead: the "none" settings differ from what the rules compile to');
  const coordinator = new Coordinator({ tiers: [RedisTier.fromUrl(redis.url)], policies: rulesRegistry(), flushTimer: false });
  holder.coordinator = coordinator;
  try {
    process.stdout.write(`loading ${KEYS} keys of 1 KB ... `);
    for (let i = 0; i < KEYS; i += 500)
      await Promise.all(Array.from({ length: 500 }, (_, j) => coordinator.put('bench', `k${i + j}`, VALUE)));
    console.log('done');
    await live.refreshIfStale(); // the first read of the store, as a container's first request makes

    const key = (i: number) => `k${(i * 7919) % KEYS}`;
    const plain: Record<Op, (i: number) => Promise<unknown>> = {
      get: (i) => coordinator.get('bench', key(i)),
      put: (i) => coordinator.put('bench', key(i), VALUE),
    };
    const withEngine = (op: (i: number) => Promise<unknown>) => (i: number) => {
      const wait = live.refreshIfStale();
      return wait ? wait.then(() => op(i)) : op(i);
    };
    const ops: Record<Side, Record<Op, (i: number) => Promise<unknown>>> = {
      none: plain,
      rules: { get: withEngine(plain.get), put: withEngine(plain.put) },
    };
    const use = (side: Side) => {
      active = side;
      coordinator.replacePolicies(side === 'rules' ? rulesRegistry() : none);
    };
    const measure = async (op: Op, side: Side): Promise<RoundFigures> => {
      use(side);
      const f = ops[side][op];
      if (warmupSeconds > 0) await closedLoop(f, { concurrency: CONCURRENCY, seconds: warmupSeconds });
      const before = process.cpuUsage();
      const res = await closedLoop(f, { concurrency: CONCURRENCY, seconds: roundSeconds });
      const used = process.cpuUsage(before);
      return {
        opsPerSec: res.opsPerSec,
        p50Ms: res.p50Ms,
        p99Ms: res.p99Ms,
        cpuUs: round((used.user + used.system) / res.ops, 4),
        errors: res.errors,
      };
    };
    const engineCall = () => (live.refreshIfStale(), rulesRegistry().for('bench'));

    // One unrecorded round of each side first: the JIT, the connections and the heap settle.
    for (const op of OPS) for (const side of ['rules', 'none'] as const) await measure(op, side);

    const records: PairRecord[] = [];
    for (const [i, block] of schedule.entries()) {
      const engineNs = block.kind === 'ab' ? round(cpuPerCall(ENGINE_CALLS, engineCall) * 1000, 2) : undefined;
      const sideOf = (x: 'a' | 'b'): Side => (x === 'a' || block.kind === 'aa' ? 'rules' : 'none');
      for (const op of OPS) {
        const got: Partial<Record<'a' | 'b', RoundFigures>> = {};
        for (const x of block.order) got[x] = await measure(op, sideOf(x));
        const a = got.a!;
        const b = got.b!;
        const ratios = {
          throughput: round(a.opsPerSec / b.opsPerSec, 4),
          p99: round(a.p99Ms / b.p99Ms, 4),
          cpu: round(a.cpuUs / b.cpuUs, 4),
        };
        records.push({ pair: i + 1, kind: block.kind, op, order: block.order.join(''), a, b, ratios, engineNs });
        const side = (f: RoundFigures) =>
          `${String(f.opsPerSec).padStart(6)} ops/s p99 ${f.p99Ms.toFixed(2).padStart(5)} ms ${f.cpuUs.toFixed(2)} µs CPU`;
        console.log(
          `  pair ${String(i + 1).padStart(2)}/${schedule.length} ${block.kind === 'ab' ? 'a/b' : 'A/A'} ${op.toUpperCase()} ` +
            `${block.order.join('→')}  rules: ${side(a)} | ${block.kind === 'ab' ? 'none: ' : 'rules:'} ${side(b)} | ` +
            `ratio: throughput ${ratios.throughput.toFixed(3)} p99 ${ratios.p99.toFixed(3)} CPU ${ratios.cpu.toFixed(3)}` +
            (engineNs !== undefined && op === 'get' ? `  (engine ${engineNs} ns/request)` : ''),
        );
      }
    }

    const errors = records.reduce((n, r) => n + r.a.errors + r.b.errors, 0);
    const rand = prng(SEED);
    const figure = (rs: readonly number[]): RatioFigure => ratioFigure(rs, rand);
    const summarize = (op: Op): OpSummary => {
      const of = (kind: PairBlock['kind']) => records.filter((r) => r.op === op && r.kind === kind);
      const ab = of('ab');
      const aa = of('aa');
      const ratiosOf = (rs: PairRecord[]) => ({
        throughput: figure(rs.map((r) => r.ratios.throughput)),
        p99: figure(rs.map((r) => r.ratios.p99)),
        cpu: figure(rs.map((r) => r.ratios.cpu)),
      });
      const sideOf = (pick: (r: PairRecord) => RoundFigures) => ({
        opsPerSec: summary(
          ab.map((r) => pick(r).opsPerSec),
          0,
        ),
        p50Ms: summary(ab.map((r) => pick(r).p50Ms)),
        p99Ms: summary(ab.map((r) => pick(r).p99Ms)),
        cpuUs: summary(ab.map((r) => pick(r).cpuUs)),
      });
      return {
        ab: ratiosOf(ab),
        aa: ratiosOf(aa),
        sides: { rules: sideOf((r) => r.a), none: sideOf((r) => r.b) },
        engineShare: meanInterval(ab.map((r) => r.engineNs! / 1000 / r.b.cpuUs)),
      };
    };
    const byOp = { get: summarize('get'), put: summarize('put') };
    const engineNs = summary(
      records.filter((r) => r.op === 'get' && r.engineNs !== undefined).map((r) => r.engineNs!),
      1,
    );

    // The figures of each side, then the ratios with their intervals.
    const range = (s: Summary, digits: number) =>
      `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;
    console.log(`\nmedian (min-max) over the ${pairs} a/b pairs:\n`);
    console.log(
      table(
        OPS.flatMap((op) =>
          (['rules', 'none'] as const).map((side) => {
            const s = byOp[op].sides[side];
            return {
              op: op.toUpperCase(),
              policy: side === 'rules' ? '10 rules' : 'none (baseline)',
              'ops/s': range(s.opsPerSec, 0),
              'p50 ms': range(s.p50Ms, 3),
              'p99 ms': range(s.p99Ms, 2),
              'CPU µs/op': range(s.cpuUs, 2),
            };
          }),
        ),
      ),
    );
    console.log(
      `\nratios 10 rules / none per pair: geometric mean, 95% interval (Student t on the logarithms; bootstrap, seed ${SEED}),` +
        `\nand one pair's noise (sd of ln ratio); A/A = the ten rules on both sides, should straddle 1:\n`,
    );
    console.log(
      table(
        OPS.flatMap((op) =>
          (['ab', 'aa'] as const).flatMap((kind) =>
            (['throughput', 'p99', 'cpu'] as const).map((name) => {
              const f = byOp[op][kind][name];
              return {
                op: op.toUpperCase(),
                pairs: `${kind === 'ab' ? 'a/b' : 'A/A'} x${f.n}`,
                ratio: name === 'cpu' ? 'CPU/op' : name,
                ...ratioCells(f),
              };
            }),
          ),
        ),
      ),
    );

    const verdicts = { get: verdictOf(byOp.get, engineNs.max), put: verdictOf(byOp.put, engineNs.max) };
    console.log(
      `\nengine (refresh check + compiled settings): ${engineNs.median} ns/request (${engineNs.min}-${engineNs.max}), ` +
        `as a share of an operation's CPU: GET ${verdicts.get.engineCpuShare.replace(/^\w+: /, '')}, ` +
        `PUT ${verdicts.put.engineCpuShare.replace(/^\w+: /, '')}`,
    );
    console.log("\ntargets (10 rules against none; met when the 95% interval's far end is within the target):");
    for (const op of OPS) {
      const v = verdicts[op];
      console.log(`  ${op.toUpperCase()} throughput loss ≤ 2% (ratio ≥ ${THROUGHPUT_MIN}): ${v.throughput}`);
      console.log(`  ${op.toUpperCase()} p99 ≤ ${P99_MAX}×: ${v.p99}`);
      console.log(`  ${op.toUpperCase()} engine CPU ≤ 2% of the operation's: ${v.engineCpuShare}`);
    }
    const controls = OPS.flatMap((op) =>
      (['throughput', 'p99'] as const).map((name) => {
        const f = byOp[op].aa[name];
        return { op, name, straddles: f.n > 1 ? f.low <= 1 && f.high >= 1 : null };
      }),
    );
    if (aaPairs > 1)
      console.log(
        `  A/A control intervals containing 1: ${controls.filter((c) => c.straddles).length} of ${controls.length}` +
          (controls.some((c) => c.straddles === false)
            ? ` (not: ${controls
                .filter((c) => c.straddles === false)
                .map((c) => `${c.op.toUpperCase()} ${c.name}`)
                .join(', ')}; ` + 'by chance, one interval in 20 each, or a drift the a/b pairs share too)'
            : ''),
      );
    if (errors) console.log(`  errors: ${errors} failed operations over the run`);

    const met = {
      throughput: verdicts.get.throughputMet && verdicts.put.throughputMet,
      p99: verdicts.get.p99Met && verdicts.put.p99Met,
      engineCpuShare: verdicts.get.engineCpuShareMet && verdicts.put.engineCpuShareMet,
    };
    return {
      scenario: 'policy-overhead',
      config: {
        keys: KEYS,
        valueBytes: VALUE.length,
        concurrency: CONCURRENCY,
        pairs,
        aaPairs,
        roundSeconds,
        warmupSeconds,
        engineCallsPerPair: ENGINE_CALLS,
        seed: SEED,
        policy: '10 active rules (placement, flush, write-around, six other namespaces, an alert); default rules left out',
        baseline: 'none: no live policy (no refresh check), the same namespace settings as a plain PolicyRegistry',
        process: 'one process, one coordinator and Redis connection; the policy swapped between rounds (replacePolicies)',
        statistic:
          'per pair ratio 10 rules / none; geometric mean over pairs, 95% Student t interval on ln(ratio), ' +
          'bootstrap percentile interval as a check; a/b order alternating; A/A control pairs spread among them',
      },
      pairs: records,
      engineNs,
      summary: byOp,
      verdicts,
      errors,
      targets: {
        throughput: `95% CI low of rules/none >= ${THROUGHPUT_MIN}, or CPU per operation shows it (engine share CI high <= ${CPU_SHARE_MAX}, or CPU/op ratio CI high <= ${CPU_RATIO_MAX})`,
        p99: `95% CI high of rules/none <= ${P99_MAX}`,
        engineCpuShare: `95% CI high <= ${CPU_SHARE_MAX} of a GET or PUT's CPU`,
      },
      met,
    };
  } finally {
    live.stop();
    await coordinator.close();
    await redis.stop();
  }
}
