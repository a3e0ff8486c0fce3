/**
 * invalidate-l1: what the invalidation check costs a GET the near cache answers (issue 24, item 8: ≤ 3% "with and
 * without near-cache hits"), each round in a process of its own (bench/invalidate-l1-side.ts).
 *
 * The invalidate scenario's overhead part measures L1 hits in paired rounds in one process, one coordinator
 * switching the check on and off between rounds. There the round after a switch cost more than the one before it,
 * whichever side it was, by about as much as the target (bench/README.md, "## invalidate"). Here every round is a
 * fresh process with the check on or off from its start: same keys in Redis (10,000 of 1 KB, 2-3 tags each), same
 * document (900 tag and 100 prefix generations in the namespace, all older than every entry), its near cache filled
 * by reading every key, an unrecorded warm-up, then one timed round of 64 concurrent GETs, the event loop turned at
 * least every millisecond as a server turns it between requests (invalidate-l1-side.ts says why). Pairs as in the
 * other parts: the order within a pair alternating, A/A control pairs (the check on in both processes) spread among
 * them, per pair the ratios check / none of throughput, p99 and CPU per operation, and over the pairs the geometric
 * mean with a Student t interval on the logarithms and a bootstrap check (bench/lib/paired.ts).
 *
 * Flags: `--pairs N` (100), `--aa-pairs N` (12), `--round-seconds S` (2), `--warmup-seconds S` (1.5), `--lease-ms N`
 * (1000, the deployed lease), `--turn-ms N` (1; a large value never turns it, as the overhead part's loop). ~23 min.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { Invalidations, tierInvalidationRegister, type InvalidationDocument } from '../core/coordinator/invalidations.js';
import { HybridLogicalClock } from '../core/model/hlc.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { startRedis } from '../test/helpers/services.js';
import { L1_KEYS, L1_NS, type L1Round } from './invalidate-l1-side.js';
import { round, table } from './lib/measure.js';
import { seededDocument } from './lib/invalidation-document.js';
import { keyOf, PREFIX_LENGTHS, tagsOf } from './lib/invalidation-sides.js';
import { pairedSchedule, ratioCells, ratioFigure, type PairBlock, type RatioInterval } from './lib/paired.js';
import { flag, prng, summary } from './lib/rounds.js';

const VALUE = Buffer.alloc(1024, 0x5a);
const SEED = 24;
/** Overhead at most 3%: throughput check / none at least this, CPU per operation at most 1 + this. */
const MAX_OVERHEAD = 0.03;

interface Timing {
  roundSeconds: number;
  warmupSeconds: number;
  /** The invalidation lease of both sides (the deployed default: 1000 ms). */
  leaseMs: number;
  /** The longest the sides' closed loops go without turning the event loop, as a server does between requests. */
  turnMs: number;
}

interface L1Pair {
  pair: number;
  kind: PairBlock['kind'];
  order: string;
  /** a: the check on; b: off, or in an A/A pair on again. */
  a: L1Round;
  b: L1Round;
  ratios: { throughput: number; p99: number; cpu: number };
}

/** One round: a process started with the check on or off, its figures, and its exit. */
function side(role: 'check' | 'none', url: string, t: Timing): Promise<L1Round> {
  const child = fork(
    fileURLToPath(new URL('./invalidate-l1-side.ts', import.meta.url)),
    [role, url, String(t.roundSeconds), String(t.warmupSeconds), String(t.leaseMs), String(t.turnMs)],
    { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  return new Promise<L1Round>((resolve, reject) => {
    let got: L1Round | undefined;
    child.once('message', (m) => (got = m as L1Round));
    child.once('exit', (code) => (got && code === 0 ? resolve(got) : reject(new Error(`invalidate-l1 side exited (${code})`))));
  });
}

export async function invalidateL1(): Promise<Record<string, unknown>> {
  const pairs = Math.max(2, Math.round(flag('pairs', 100)));
  const aaPairs = Math.max(0, Math.round(flag('aa-pairs', 12)));
  const roundSeconds = flag('round-seconds', 2);
  const warmupSeconds = flag('warmup-seconds', 1.5);
  const leaseMs = flag('lease-ms', 1000);
  const turnMs = flag('turn-ms', 1);
  const timing: Timing = { roundSeconds, warmupSeconds, leaseMs, turnMs };
  const schedule = pairedSchedule(pairs, aaPairs);
  console.log(
    `\nGET (L1 hit), a process per round: ${pairs} a/b pairs (check / none) and ${aaPairs} A/A pairs, ` +
      `rounds of ${roundSeconds} s after ${warmupSeconds} s unrecorded ` +
      `(~${Math.round(schedule.length * 2 * (roundSeconds + warmupSeconds + 2.5))} s)`,
  );
  const redis = await startRedis();
  try {
    const hot = RedisTier.fromUrl(redis.url);
    const doc: InvalidationDocument = seededDocument({ version: 0, namespaces: {}, log: [] }, L1_NS, {
      tags: 900,
      prefixes: 100,
      lengths: PREFIX_LENGTHS,
      keyOf,
    });
    if (!(await tierInvalidationRegister(hot).write(doc))) throw new Error('invalidate-l1: cannot seed the document');
    const clock = new HybridLogicalClock();
    const loader = new Coordinator({
      tiers: [hot],
      clock,
      policies: new PolicyRegistry({ defaults: { writeTiers: ['hot'], nearCache: { enabled: false } } }),
      flushTimer: false,
      invalidations: new Invalidations({ register: tierInvalidationRegister(hot), clock }),
    });
    for (let i = 0; i < L1_KEYS; i += 500)
      await Promise.all(Array.from({ length: 500 }, (_, j) => loader.put(L1_NS, keyOf(i + j), VALUE, { tags: tagsOf(i + j) })));
    await loader.close();
    await hot.close().catch(() => {});

    // One unrecorded pair first: the machine's caches and the redis-server settle.
    for (const role of ['check', 'none'] as const) await side(role, redis.url, timing);
    const records: L1Pair[] = [];
    for (const [i, block] of schedule.entries()) {
      const roleOf = (x: 'a' | 'b') => (x === 'a' || block.kind === 'aa' ? 'check' : 'none');
      const got: Partial<Record<'a' | 'b', L1Round>> = {};
      for (const x of block.order) got[x] = await side(roleOf(x), redis.url, timing);
      const [a, b] = [got.a!, got.b!];
      const ratios = {
        throughput: round(a.opsPerSec / b.opsPerSec, 4),
        p99: round(a.p99Ms / b.p99Ms, 4),
        cpu: round(a.cpuUs / b.cpuUs, 4),
      };
      records.push({ pair: i + 1, kind: block.kind, order: block.order.join(''), a, b, ratios });
      const show = (f: L1Round) => `${String(f.opsPerSec).padStart(7)} ops/s ${f.cpuUs.toFixed(3)} µs CPU`;
      console.log(
        `  pair ${String(i + 1).padStart(2)}/${schedule.length} ${block.kind === 'ab' ? 'a/b' : 'A/A'} ` +
          `${block.order.join('→')}  check: ${show(a)} | ${block.kind === 'ab' ? 'none: ' : 'check:'} ${show(b)} | ` +
          `ratio: throughput ${ratios.throughput.toFixed(3)} CPU ${ratios.cpu.toFixed(3)}`,
      );
    }

    const rand = prng(SEED);
    const figure = (rs: readonly number[]) => ratioFigure(rs, rand);
    const of = (kind: PairBlock['kind'], order?: string) =>
      records.filter((r) => r.kind === kind && (order === undefined || r.order === order));
    const ratiosOf = (rs: L1Pair[]) => ({
      throughput: figure(rs.map((r) => r.ratios.throughput)),
      p99: figure(rs.map((r) => r.ratios.p99)),
      cpu: figure(rs.map((r) => r.ratios.cpu)),
    });
    const ab = ratiosOf(of('ab'));
    const aa = ratiosOf(of('aa'));
    // Split by which side ran first: in one process the two halves differed by 6%; here they should agree.
    const byOrder = { checkFirst: ratiosOf(of('ab', 'ab')), checkSecond: ratiosOf(of('ab', 'ba')) };
    const fmt = (x: number) => x.toFixed(3);
    console.log('\nratios check / none per pair (geometric mean, 95% interval: t on the logarithms; bootstrap):\n');
    console.log(
      table(
        (
          [
            ['a/b', ab],
            ['a/b, check first', byOrder.checkFirst],
            ['a/b, check second', byOrder.checkSecond],
            ['A/A', aa],
          ] as const
        ).flatMap(([label, set]) =>
          (['throughput', 'p99', 'cpu'] as const).map((name) => {
            const f = set[name];
            return {
              pairs: `${label} x${f.n}`,
              ratio: name === 'cpu' ? 'CPU/op' : name,
              ...ratioCells(f),
            };
          }),
        ),
      ),
    );
    const sides = (pick: (r: L1Pair) => L1Round) => ({
      opsPerSec: summary(
        of('ab').map((r) => pick(r).opsPerSec),
        0,
      ),
      cpuUs: summary(of('ab').map((r) => pick(r).cpuUs)),
      p99Ms: summary(of('ab').map((r) => pick(r).p99Ms)),
    });
    const misses = records.reduce((n, r) => n + r.a.misses + r.b.misses, 0);
    const errors = records.reduce((n, r) => n + r.a.errors + r.b.errors, 0);
    const said = (met: boolean, f: RatioInterval) =>
      `${met ? 'met' : 'open'}: ${fmt(f.ratio)} (95% CI ${fmt(f.low)}-${fmt(f.high)})`;
    const throughputMet = ab.throughput.low >= 1 - MAX_OVERHEAD;
    const cpuPerOpMet = ab.cpu.high <= 1 + MAX_OVERHEAD;
    const verdicts = {
      throughput: said(throughputMet, ab.throughput),
      throughputMet,
      cpuPerOp: said(cpuPerOpMet, ab.cpu),
      cpuPerOpMet,
    };
    console.log(`\ntargets, GET (L1 hit), a process per round (met when the 95% interval's far end is within 3%):`);
    console.log(`  throughput ≥ ${1 - MAX_OVERHEAD}×: ${verdicts.throughput}`);
    console.log(`  CPU per operation ≤ ${1 + MAX_OVERHEAD}×: ${verdicts.cpuPerOp}`);
    if (aaPairs > 1)
      console.log(
        `  A/A control intervals containing 1: throughput ${aa.throughput.low <= 1 && aa.throughput.high >= 1}, ` +
          `CPU/op ${aa.cpu.low <= 1 && aa.cpu.high >= 1}`,
      );
    if (misses || errors) console.log(`  near-cache misses in timed rounds: ${misses}; failed operations: ${errors}`);
    return {
      scenario: 'invalidate-l1',
      config: {
        keys: L1_KEYS,
        valueBytes: VALUE.length,
        pairs,
        aaPairs,
        roundSeconds,
        warmupSeconds,
        leaseMs,
        turnMs,
        seed: SEED,
        sides:
          'a process per round, the check on (the real Invalidations, 1000 ms lease, document in Redis) or off ' +
          '(ready() and covers() switched off) from its start; A/A: on in both',
      },
      pairs: records,
      summary: { ab, aa, byOrder, sides: { check: sides((r) => r.a), none: sides((r) => r.b) } },
      verdicts,
      misses,
      errors,
    };
  } finally {
    await redis.stop();
  }
}
