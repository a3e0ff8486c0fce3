/**
 * invalidate, second part: what the invalidation check costs on the read and write path (issue 24, item 8: ≤ 3%).
 *
 * Coordinator GETs and PUTs of 1 KB at concurrency 64 over one Redis hot tier (hot-path's load), and GETs served by
 * the near cache (L1), in paired rounds in one process as bench/policy-overhead.ts runs them:
 *
 *  - "check": a coordinator with the real `Invalidations`, its document in the Redis tier (the lowest), holding for
 *    each benchmark namespace 900 tag and 100 prefix generations (the most a namespace may hold) at six prefix
 *    lengths, all older than every entry, so each read makes the one comparison that clears an entry newer than
 *    every generation (the full check, for older entries, is timed in the micro table's last column) and each
 *    request the lease check (`ready()`), which also re-reads the document's version in the background every half
 *    lease, as deployed.
 *  - "none": the same coordinator with the check switched off (`ready()` and `covers()` return at once), so only
 *    the check differs. One coordinator plays both sides: two coordinators, identical but for the check, differed
 *    by up to 10% on L1 hits in A/A pairs of two checking ones (2026-11-27, both signs across runs), more than the
 *    3% measured. Both sides pay the switch (a field read and a branch).
 *  - A/A control: the check on, against itself in the next round, so it shows the rounds' own noise.
 *
 * All three share the redis-server and the keys (10,000 per namespace, three tags each); `bench` reads from Redis,
 * `bench-l1` from each coordinator's near cache (filled before the rounds; a copy lives 60 s, the most allowed, so a
 * few reads a minute per key go to Redis on both sides). Per pair the ratios check / none of throughput, p99 and CPU
 * per operation; over the pairs the geometric mean with a Student t interval on the logarithms and a bootstrap check
 * (bench/lib/paired.ts). Before each a/b pair `ready()` and `covers()` are timed over 1,000,000 calls each, as a
 * share of the CPU of that pair's "none" operation: `ready(now)` as a read calls it (the clock reading is the one the
 * read takes for its expiry checks, on both sides), and `ready()` with its own reading as a write calls it.
 */
import { Coordinator } from '../core/coordinator/coordinator.js';
import { Invalidations, tierInvalidationRegister, type InvalidationDocument } from '../core/coordinator/invalidations.js';
import type { EntryHeader } from '../core/model/entry.js';
import { HybridLogicalClock, LOGICAL_BITS } from '../core/model/hlc.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { MemoryTier } from '../core/tiers/memory-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { startRedis } from '../test/helpers/services.js';
import { CONCURRENCY } from './hot-path-side.js';
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
import { seededDocument } from './lib/invalidation-document.js';
import { keyOf, PREFIX_LENGTHS, SwitchableInvalidations, tagsOf } from './lib/invalidation-sides.js';
import { flag, prng, summary, type Summary } from './lib/rounds.js';

const KEYS = 10_000;
const DEFAULT_PAIRS = 30;
const DEFAULT_AA_PAIRS = 10;
const MICRO_CALLS = 1_000_000;
const VALUE = Buffer.alloc(1024, 0x5a);
const SEED = 24;
/** Overhead at most 3%: throughput check / none at least this, CPU per operation at most 1 + this. */
const MAX_OVERHEAD = 0.03;
const OPS = ['get', 'l1get', 'put'] as const;
type Op = (typeof OPS)[number];
const NS: Record<Op, string> = { get: 'bench', l1get: 'bench-l1', put: 'bench' };
const LABEL: Record<Op, string> = { get: 'GET', l1get: 'GET (L1 hit)', put: 'PUT' };
/** check2: the check on again, the A/A control's second side. */
type Role = 'check' | 'check2' | 'none';

interface RoundFigures {
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuUs: number;
  errors: number;
}

interface PairRecord {
  pair: number;
  kind: PairBlock['kind'];
  op: Op;
  order: string;
  /** a = check; b = none, or in an A/A pair the second check coordinator. */
  a: RoundFigures;
  b: RoundFigures;
  ratios: { throughput: number; p99: number; cpu: number };
  /**
   * CPU per call timed before this pair, ns (a/b pairs only): `ready(now)` as a GET calls it (with the clock reading
   * the read takes anyway for its expiry checks, which the none side takes too), `ready()` as a PUT calls it (its
   * own reading), and `covers()`.
   */
  readyNs?: number;
  readyOwnClockNs?: number;
  coversNs?: number;
}

function cpuPerCall(calls: number, f: (i: number) => unknown): number {
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) f(i);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / calls;
}

export async function invalidateOverhead(opts: { runs?: number }): Promise<Record<string, unknown>> {
  const pairs = Math.max(2, Math.round(flag('pairs', opts.runs ?? DEFAULT_PAIRS)));
  const aaPairs = Math.max(0, Math.round(flag('aa-pairs', DEFAULT_AA_PAIRS)));
  const roundSeconds = flag('round-seconds', 1);
  const warmupSeconds = flag('warmup-seconds', 0.1);
  // The document's shape (default: the most a namespace may hold, 1,000 records); smaller to see what each part costs.
  const docTags = Math.max(0, Math.round(flag('doc-tags', 900)));
  const docPrefixes = Math.max(0, Math.round(flag('doc-prefixes', 100)));
  if (docTags + docPrefixes > 1000) throw new Error('invalidate: a namespace holds at most 1,000 tag and prefix generations');
  const schedule = pairedSchedule(pairs, aaPairs);
  console.log(
    `\n${pairs} a/b pairs (check / none) and ${aaPairs} A/A pairs (check / check) per operation (GET, GET from L1, ` +
      `PUT), rounds of ${roundSeconds} s after ${warmupSeconds} s unrecorded: ` +
      `~${Math.round((schedule.length + 1) * OPS.length * 2 * (roundSeconds + warmupSeconds))} s of load`,
  );
  const redis = await startRedis();
  let made: { coordinator: Coordinator; invalidations: SwitchableInvalidations; l1: MemoryTier } | undefined;
  try {
    // The document first, as a deployment has it before its coordinators start.
    const seedTier = RedisTier.fromUrl(redis.url);
    let doc: InvalidationDocument = { version: 0, namespaces: {}, log: [] };
    for (const ns of ['bench', 'bench-l1'])
      doc = seededDocument(doc, ns, { tags: docTags, prefixes: docPrefixes, lengths: PREFIX_LENGTHS, keyOf });
    if (!(await tierInvalidationRegister(seedTier).write(doc))) throw new Error('invalidate: cannot seed the document');
    await seedTier.close();

    const policies = () =>
      new PolicyRegistry({
        defaults: { writeTiers: ['hot'], nearCache: { enabled: false } },
        namespaces: { 'bench-l1': { nearCache: { enabled: true, ttlMs: 60_000 } } },
      });
    {
      const hot = RedisTier.fromUrl(redis.url);
      const clock = new HybridLogicalClock();
      const invalidations = new SwitchableInvalidations({ register: tierInvalidationRegister(hot), clock });
      const l1 = new MemoryTier({ name: 'l1', maxBytes: 64 << 20 });
      const coordinator = new Coordinator({
        tiers: [hot],
        clock,
        nearCache: l1,
        policies: policies(),
        flushTimer: false,
        invalidations,
      });
      made = { coordinator, invalidations, l1 };
    }
    const check = made;
    await check.invalidations.refreshNow();
    const held = check.invalidations.current().namespaces.bench;
    const heldCount = held ? Object.keys(held.tags).length + Object.keys(held.prefixes).length : 0;
    if (heldCount !== docTags + docPrefixes)
      throw new Error(`invalidate: the check side holds ${heldCount} generations, not ${docTags + docPrefixes}`);

    process.stdout.write(`loading ${KEYS} keys of 1 KB (2-3 tags each) into 'bench' and 'bench-l1' ... `);
    // By a coordinator of its own, so the measured one fills its L1 by reads, as a reading container does.
    const loaderHot = RedisTier.fromUrl(redis.url);
    const loaderClock = new HybridLogicalClock();
    const loader = new Coordinator({
      tiers: [loaderHot],
      clock: loaderClock,
      policies: policies(),
      flushTimer: false,
      invalidations: new Invalidations({ register: tierInvalidationRegister(loaderHot), clock: loaderClock }),
    });
    for (const ns of ['bench', 'bench-l1'])
      for (let i = 0; i < KEYS; i += 500)
        await Promise.all(Array.from({ length: 500 }, (_, j) => loader.put(ns, keyOf(i + j), VALUE, { tags: tagsOf(i + j) })));
    await loader.close();
    // The L1 filled, and every read checked to find its entry (none is covered).
    for (const ns of ['bench', 'bench-l1'])
      for (let i = 0; i < KEYS; i += 500) {
        const got = await Promise.all(Array.from({ length: 500 }, (_, j) => check.coordinator.get(ns, keyOf(i + j))));
        if (got.some((r) => r === undefined)) throw new Error(`invalidate: a key of '${ns}' reads as missing`);
      }
    console.log('done');

    // Every key's entry as a read finds it (the rounds' order), for timing covers() on its own: the same working set
    // as the rounds, so its maps and strings are no more in the CPU's caches than theirs.
    const samples: { key: string; header: EntryHeader }[] = [];
    for (let i = 0; i < KEYS; i++) {
      const key = keyOf((i * 7919) % KEYS);
      samples.push({ key, header: (await check.coordinator.get('bench', key))!.entry.header });
    }
    const covering = samples.filter((s) => check.invalidations.covers('bench', s.key, s.header)).length;
    if (covering) throw new Error(`invalidate: ${covering} sampled entries are covered; the check would not be complete`);

    const key = (i: number) => keyOf((i * 7919) % KEYS);
    const opOf = (c: Coordinator): Record<Op, (i: number) => Promise<unknown>> => ({
      get: (i) => c.get(NS.get, key(i)),
      l1get: (i) => c.get(NS.l1get, key(i)),
      put: (i) => c.put(NS.put, key(i), VALUE, { tags: tagsOf((i * 7919) % KEYS) }),
    });
    const ops = opOf(check.coordinator);
    const measure = async (op: Op, role: Role): Promise<RoundFigures> => {
      const f = ops[op];
      // The side's setting for the whole round, its warm-up included (where a lease left to lapse while the check
      // was off is renewed, as a running coordinator renews it in the background).
      check.invalidations.on = role !== 'none';
      // The L1's copies all filled at once expire at once, 60 s later: the round that met that instant re-read all
      // 10,000 from Redis (up to 1.46x the CPU per operation of its pair's other round, either side). Each L1 round
      // starts on copies filled just before it, outside the timing, so none expires during a round.
      if (op === 'l1get') {
        for (let i = 0; i < KEYS; i++) check.l1.deleteSync(NS.l1get, keyOf(i));
        for (let i = 0; i < KEYS; i += 500)
          await Promise.all(Array.from({ length: 500 }, (_, j) => check.coordinator.get(NS.l1get, keyOf(i + j))));
      }
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
    const inv = check.invalidations;
    // Timed on a fresh lease: past it every call would wait for a refresh, which the closed loops never time.
    const micro = async () => {
      inv.on = true; // timed as the check side runs them (the switch's field read and branch included)
      await inv.refreshNow();
      const now = inv.now();
      return {
        readyNs: round(cpuPerCall(MICRO_CALLS, () => inv.ready(now)) * 1000, 2),
        readyOwnClockNs: round(cpuPerCall(MICRO_CALLS, () => inv.ready()) * 1000, 2),
        coversNs: round(
          cpuPerCall(MICRO_CALLS, (i) => {
            const s = samples[i % samples.length]!;
            return inv.covers('bench', s.key, s.header);
          }) * 1000,
          2,
        ),
      };
    };

    // What covers() costs by the document's shape: on the same entries (newer than every generation: one compare),
    // and on entries older than the generations that none covers (the full check: each of the entry's tags a lookup,
    // the key walked along the prefix trie). Own instances over an in-memory register.
    const shapes = await coversByShape(samples);
    console.log("\ncovers() by the namespace's generations (CPU per call, best of 5 × 1,000,000):\n");
    console.log(
      table(
        shapes.map((x) => ({
          tags: x.tags,
          prefixes: x.prefixes,
          'prefix lengths': x.lengths.join(', ') || '-',
          'ns/call': x.ns,
          'ns/call, full check': x.fullNs,
        })),
      ),
    );
    console.log('');

    // One unrecorded round of each first: the JIT, the connections and the heap settle.
    for (const op of OPS) for (const role of ['check', 'none'] as const) await measure(op, role);

    const records: PairRecord[] = [];
    for (const [i, block] of schedule.entries()) {
      const timed = block.kind === 'ab' ? await micro() : undefined;
      const roleOf = (x: 'a' | 'b'): Role => (x === 'a' ? 'check' : block.kind === 'aa' ? 'check2' : 'none');
      for (const op of OPS) {
        const got: Partial<Record<'a' | 'b', RoundFigures>> = {};
        for (const x of block.order) got[x] = await measure(op, roleOf(x));
        const a = got.a!;
        const b = got.b!;
        const ratios = {
          throughput: round(a.opsPerSec / b.opsPerSec, 4),
          p99: round(a.p99Ms / b.p99Ms, 4),
          cpu: round(a.cpuUs / b.cpuUs, 4),
        };
        records.push({ pair: i + 1, kind: block.kind, op, order: block.order.join(''), a, b, ratios, ...timed });
        const side = (f: RoundFigures) =>
          `${String(f.opsPerSec).padStart(6)} ops/s p99 ${f.p99Ms.toFixed(2).padStart(5)} ms ${f.cpuUs.toFixed(2)} µs CPU`;
        console.log(
          `  pair ${String(i + 1).padStart(2)}/${schedule.length} ${block.kind === 'ab' ? 'a/b' : 'A/A'} ` +
            `${LABEL[op].padEnd(12)} ${block.order.join('→')}  check: ${side(a)} | ` +
            `${block.kind === 'ab' ? 'none: ' : 'check:'} ${side(b)} | ratio: throughput ${ratios.throughput.toFixed(3)} ` +
            `p99 ${ratios.p99.toFixed(3)} CPU ${ratios.cpu.toFixed(3)}` +
            (timed && op === 'get'
              ? `  (ready ${timed.readyNs} ns, with its own clock reading ${timed.readyOwnClockNs} ns, covers ${timed.coversNs} ns)`
              : ''),
        );
      }
    }

    const errors = records.reduce((n, r) => n + r.a.errors + r.b.errors, 0);
    const rand = prng(SEED);
    const figure = (rs: readonly number[]): RatioFigure => ratioFigure(rs, rand);
    const summarize = (op: Op) => {
      const of = (kind: PairBlock['kind']) => records.filter((r) => r.op === op && r.kind === kind);
      const ratiosOf = (rs: PairRecord[]) => ({
        throughput: figure(rs.map((r) => r.ratios.throughput)),
        p99: figure(rs.map((r) => r.ratios.p99)),
        cpu: figure(rs.map((r) => r.ratios.cpu)),
      });
      const ab = of('ab');
      const sideOf = (pick: (r: PairRecord) => RoundFigures) => ({
        opsPerSec: summary(
          ab.map((r) => pick(r).opsPerSec),
          0,
        ),
        p50Ms: summary(ab.map((r) => pick(r).p50Ms)),
        p99Ms: summary(ab.map((r) => pick(r).p99Ms)),
        cpuUs: summary(ab.map((r) => pick(r).cpuUs)),
      });
      // What the check adds per operation: a PUT only the lease check with its own clock reading; a GET the lease
      // check on the reading both sides take (its expiry checks), and one covers() when the tiers answer it (an L1
      // hit is not checked: the near cache drops covered copies as invalidations arrive, near-cache.ts).
      const checkNs = (r: PairRecord) =>
        op === 'put' ? r.readyOwnClockNs! : op === 'l1get' ? r.readyNs! : r.readyNs! + r.coversNs!;
      const checkShare: MeanInterval = meanInterval(ab.map((r) => checkNs(r) / 1000 / r.b.cpuUs));
      return {
        ab: ratiosOf(ab),
        aa: ratiosOf(of('aa')),
        sides: { check: sideOf((r) => r.a), none: sideOf((r) => r.b) },
        checkShare,
      };
    };
    const byOp = { get: summarize('get'), l1get: summarize('l1get'), put: summarize('put') };
    const abRecords = records.filter((r) => r.op === 'get' && r.kind === 'ab');
    const readyNs = summary(
      abRecords.map((r) => r.readyNs!),
      1,
    );
    const readyOwnClockNs = summary(
      abRecords.map((r) => r.readyOwnClockNs!),
      1,
    );
    const coversNs = summary(
      abRecords.map((r) => r.coversNs!),
      1,
    );

    const range = (s: Summary, digits: number) =>
      `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;
    console.log(`\nmedian (min-max) over the ${pairs} a/b pairs:\n`);
    console.log(
      table(
        OPS.flatMap((op) =>
          (['check', 'none'] as const).map((side) => {
            const s = byOp[op].sides[side];
            return {
              op: LABEL[op],
              invalidations: side === 'check' ? 'check' : 'none (baseline)',
              'ops/s': range(s.opsPerSec, 0),
              'p50 ms': range(s.p50Ms, 3),
              'p99 ms': range(s.p99Ms, 2),
              'CPU µs/op': range(s.cpuUs, 2),
            };
          }),
        ),
      ),
    );
    const fmt = (x: number) => x.toFixed(3);
    console.log(
      `\nratios check / none per pair: geometric mean, 95% interval (Student t on the logarithms; bootstrap, seed ${SEED}),` +
        `\nand one pair's noise (sd of ln ratio); A/A = the check on in both rounds, should straddle 1:\n`,
    );
    console.log(
      table(
        OPS.flatMap((op) =>
          (['ab', 'aa'] as const).flatMap((kind) =>
            (['throughput', 'p99', 'cpu'] as const).map((name) => {
              const f = byOp[op][kind][name];
              return {
                op: LABEL[op],
                pairs: `${kind === 'ab' ? 'a/b' : 'A/A'} x${f.n}`,
                ratio: name === 'cpu' ? 'CPU/op' : name,
                ...ratioCells(f),
              };
            }),
          ),
        ),
      ),
    );

    // Verdicts: the paired throughput interval's low end, and separately the CPU per operation's high end and the
    // check's own CPU share; each said as it is, none standing in for another.
    const verdicts = Object.fromEntries(
      OPS.map((op) => {
        const s = byOp[op];
        const tp = s.ab.throughput;
        const cpu = s.ab.cpu;
        const share = s.checkShare;
        return [
          op,
          {
            throughput: `${tp.low >= 1 - MAX_OVERHEAD ? 'met' : 'open'}: ${fmt(tp.ratio)} (95% CI ${fmt(tp.low)}-${fmt(tp.high)})`,
            throughputMet: tp.low >= 1 - MAX_OVERHEAD,
            cpuPerOp: `${cpu.high <= 1 + MAX_OVERHEAD ? 'met' : 'open'}: ${fmt(cpu.ratio)} (95% CI ${fmt(cpu.low)}-${fmt(cpu.high)})`,
            cpuPerOpMet: cpu.high <= 1 + MAX_OVERHEAD,
            checkCpuShare:
              `${share.high <= MAX_OVERHEAD ? 'met' : 'open'}: ${(share.mean * 100).toFixed(2)}% ` +
              `(95% CI ${(share.low * 100).toFixed(2)}-${(share.high * 100).toFixed(2)}%)`,
            checkCpuShareMet: share.high <= MAX_OVERHEAD,
          },
        ];
      }),
    ) as Record<
      Op,
      {
        throughput: string;
        throughputMet: boolean;
        cpuPerOp: string;
        cpuPerOpMet: boolean;
        checkCpuShare: string;
        checkCpuShareMet: boolean;
      }
    >;
    console.log(
      `\nready(now): ${readyNs.median} ns/call (${readyNs.min}-${readyNs.max}); ` +
        `ready() with its own clock reading: ${readyOwnClockNs.median} ns/call ` +
        `(${readyOwnClockNs.min}-${readyOwnClockNs.max}); ` +
        `covers(): ${coversNs.median} ns/call (${coversNs.min}-${coversNs.max})`,
    );
    console.log(
      `\ntargets (check against none, overhead ≤ ${MAX_OVERHEAD * 100}%; met when the 95% interval's far end is within it):`,
    );
    for (const op of OPS) {
      const v = verdicts[op];
      console.log(`  ${LABEL[op]} throughput ≥ ${1 - MAX_OVERHEAD}× (paired interval): ${v.throughput}`);
      console.log(`  ${LABEL[op]} CPU per operation ≤ ${1 + MAX_OVERHEAD}×: ${v.cpuPerOp}`);
      console.log(`  ${LABEL[op]} the check's own CPU ≤ ${MAX_OVERHEAD * 100}% of the operation's: ${v.checkCpuShare}`);
      if (op === 'l1get')
        console.log(
          `  (L1 hits in one process carry an order effect as large as the target: their verdict is ` +
            `\`npm run bench -- invalidate-l1\`'s, a process per round)`,
        );
    }
    const controls = OPS.flatMap((op) =>
      (['throughput', 'cpu'] as const).map((name) => {
        const f = byOp[op].aa[name];
        return { op, name, straddles: f.n > 1 ? f.low <= 1 && f.high >= 1 : null };
      }),
    );
    if (aaPairs > 1)
      console.log(
        `  A/A control intervals (throughput, CPU/op) containing 1: ${controls.filter((c) => c.straddles).length} of ` +
          `${controls.length}` +
          (controls.some((c) => c.straddles === false)
            ? ` (not: ${controls
                .filter((c) => c.straddles === false)
                .map((c) => `${LABEL[c.op]} ${c.name}`)
                .join(', ')})`
            : ''),
      );
    if (errors) console.log(`  errors: ${errors} failed operations over the run`);

    return {
      config: {
        keys: KEYS,
        valueBytes: VALUE.length,
        concurrency: CONCURRENCY,
        pairs,
        aaPairs,
        roundSeconds,
        warmupSeconds,
        microCallsPerPair: MICRO_CALLS,
        seed: SEED,
        document:
          `per benchmark namespace ${docTags} tag and ${docPrefixes} prefix generations ` +
          `(prefix lengths ${PREFIX_LENGTHS.join(', ')}), all older than every entry`,
        entries: '2-3 tags each, keys like tenant-3/user-00042/profile',
        sides:
          'check: the real Invalidations (default 1000 ms lease, document in the Redis tier); ' +
          'none: the same coordinator with ready() and covers() switched off; A/A: the check on in both rounds',
        statistic:
          'per pair ratio check / none; geometric mean over pairs, 95% Student t interval on ln(ratio), bootstrap ' +
          'percentile interval as a check; a/b order alternating; A/A control pairs spread among them',
      },
      pairs: records,
      readyNs,
      readyOwnClockNs,
      coversNs,
      coversByShape: shapes,
      summary: byOp,
      verdicts,
      errors,
      targets: {
        throughput: `95% CI low of check/none >= ${1 - MAX_OVERHEAD}`,
        cpuPerOp: `95% CI high of check/none CPU per operation <= ${1 + MAX_OVERHEAD}`,
        checkCpuShare: `95% CI high of (ready + covers) / the operation's CPU <= ${MAX_OVERHEAD}`,
      },
    };
  } finally {
    await made?.coordinator.close().catch(() => {});
    await redis.stop();
  }
}

/** covers() timed against namespaces holding each shape of document (none covering the entries), best of 5 runs. */
async function coversByShape(samples: readonly { key: string; header: EntryHeader }[]) {
  const shapes: { tags: number; prefixes: number; lengths: number[] }[] = [
    { tags: 0, prefixes: 0, lengths: [] },
    { tags: 900, prefixes: 0, lengths: [] },
    { tags: 0, prefixes: 100, lengths: [16] },
    { tags: 0, prefixes: 100, lengths: [16, 19] },
    { tags: 0, prefixes: 100, lengths: [16, 19, 21] },
    { tags: 900, prefixes: 100, lengths: [16, 19, 21] },
    { tags: 900, prefixes: 100, lengths: PREFIX_LENGTHS },
  ];
  // Older than every generation, under none of the seeded prefixes where the shape has no short ones, with tags no
  // record names. Users from 90,000 share 'tenant-N/user-' with the seeded prefixes, then part from them: the
  // seeds reach user ~25,000 at most (100 prefixes of keyOf(7i)), so e.g. 'tenant-3/user-10' is one of them.
  const old = (Date.now() - 7_200_000) * LOGICAL_BITS;
  const full = samples.map((s, i) => ({
    key: keyOf(90_000 + i),
    header: { ...s.header, version: old, tags: ['zz-a', `zz-${i}`, 'zz-c'] },
  }));
  const out: { tags: number; prefixes: number; lengths: number[]; ns: number; fullNs: number | string }[] = [];
  for (const shape of shapes) {
    const empty: InvalidationDocument = { version: 0, namespaces: {}, log: [] };
    const doc =
      shape.tags + shape.prefixes === 0
        ? empty
        : seededDocument(empty, 'bench', { tags: shape.tags, prefixes: shape.prefixes, lengths: shape.lengths, keyOf });
    const register = {
      version: () => Promise.resolve(doc.version),
      read: () => Promise.resolve(doc),
      write: () => Promise.resolve(false),
    };
    const inv = new Invalidations({ register, clock: new HybridLogicalClock() });
    await inv.refreshNow();
    const timed = (set: readonly { key: string; header: EntryHeader }[]) => {
      let best = Infinity;
      for (let r = 0; r < 5; r++)
        best = Math.min(
          best,
          cpuPerCall(MICRO_CALLS, (i) => {
            const s = set[i % set.length]!;
            if (inv.covers('bench', s.key, s.header))
              throw new Error(`invalidate: a seeded document (${JSON.stringify(shape)}) covers '${s.key}'`);
          }),
        );
      return round(best * 1000, 1);
    };
    // With a length-7 to -14 prefix every key of the bench's key space is covered: no entry takes the full check.
    const coversAll = shape.lengths.some((l) => l <= 14);
    out.push({ ...shape, ns: timed(samples), fullNs: coversAll ? '-' : timed(full) });
  }
  return out;
}
