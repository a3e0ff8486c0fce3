/**
 * elasticity: paper 000's scaling experiment (§4.4) at laptop scale, with real cache-node processes. A steady
 * stream of inserts of uniformly distributed keys (`key:<i>`, spread over the ring by SHA-256) at R requests/s
 * goes into a warm tier that starts with one node; a node holds at most c records. Measured twice in the same
 * run, on the same key sequence:
 *
 *   baseline   scale on overflow: when an insert finds its node full, launch a node, split the full node's
 *              fullest range at its median key onto it (Migrator.planScaleOut + run, incremental), then insert;
 *   candidate  speculative pre-launch (Algorithm 1): before each insert, a node whose fill passed
 *              T = c/2 + δ_H·(‖N‖ − R/δ_L) (decideScaleOut, with the paper's clamps) gets a node launched in the
 *              background (at most two such launches at a time: the paper's threads t1, t2), and is split onto
 *              it as soon as it is up; an overflow with nothing in flight for its node starts a scale-out at once
 *              (thread t3). At most one scale-out per node is in flight.
 *
 * In both, an insert into a full node waits until that node's scale-out has finished, and the stream waits
 * with it (the paper's coordinator, "the system waits until after scaling to update"); the stream then goes
 * on at rate R from where it stopped, so a run lasts N/R plus the time spent waiting.
 *
 * Definitions (reported per variant):
 *   scaling overhead    time the insert stream was blocked on a full node, waiting for a launch and/or a
 *                       split (paper 000's "scaling overhead": instance allocation plus data migration time the
 *                       execution had to wait for; speculation removes the part that overlaps the stream);
 *   scaling share       scaling overhead / total run time;
 *   total run time      first insert due → last insert acknowledged;
 *   scaling busy share  share of the run with at least one scale-out (launch or migration) running, blocking or
 *                       not (background work the candidate overlaps with the stream);
 *   nodes               nodes running at the end: the ring once the scale-outs still running at the end of
 *                       the stream have finished (a pre-launched instance costs from its launch), plus idle
 *                       pre-launched nodes (--split-at overflow); also the ring's nodes when the stream ended;
 *   migrations          splits completed; keys moved = records streamed to new nodes;
 *   throughput          acknowledged inserts / total run time;
 *   errors              failed inserts + failed scale-outs + acknowledged keys missing or wrong on read-back
 *                       + any difference between the keys the nodes hold (after the sources dropped their
 *                       handed-over spans) and the acknowledged keys. Must be 0.
 *
 * Allocation time: local processes boot in well under a second, EC2 instances in tens of seconds to minutes. A
 * launch counts as done after max(--launch-delay-ms, the real boot), modelling EC2's allocation time; the real
 * boot times are reported too. Parameters default to the paper's experiment scaled down: R/δ_L = 1 (R = δ_L)
 * and δ_H/c = 0.05 (250/5000), with c = 2500 and R = 100/s, so a node fills in 25 s, five times the delay.
 *
 * Flags (besides --seconds N, the insert stream's length per variant, default 90): --rate R, --capacity c,
 * --low-rate δL, --high-rate δH, --launch-delay-ms, --value-bytes, --max-prelaunch (2), --split-at up|overflow.
 */
import { speculativeThreshold, thresholdParamsSchema, type ThresholdParams } from '../core/workflows/trigger/threshold.js';
import { ElasticityEngine, type EngineResult } from './elasticity/engine.js';
import type { Variant } from './elasticity/policy.js';
import { RealCluster } from './elasticity/real-cluster.js';
import { round, table } from './lib/measure.js';

const SECRET = 'bench-secret-0123456789';
const PAPER_EXAMPLE = { params: { capacity: 5000, lowRate: 50, highRate: 250 }, rate: 100, expected: [2250, 2500, 2750, 3000] };

export interface ElasticityConfig {
  seconds: number;
  rate: number;
  params: ThresholdParams;
  launchDelayMs: number;
  valueBytes: number;
  maxPrelaunch: number;
  splitAt: 'up' | 'overflow';
}

function flag(argv: readonly string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === `--${name}`) return argv[i + 1];
    if (argv[i]!.startsWith(`--${name}=`)) return argv[i]!.slice(name.length + 3);
  }
  return undefined;
}

function num(argv: readonly string[], name: string, dflt: number, o: { integer?: boolean; min?: number } = {}): number {
  const raw = flag(argv, name);
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < (o.min ?? 0) || (o.integer && !Number.isInteger(n)))
    throw new Error(`--${name} must be ${o.integer ? 'an integer' : 'a number'} >= ${o.min ?? 0} (got '${raw}')`);
  return n;
}

/** The scenario's settings from the command line (`--seconds` only counts when given; default 90 s). */
export function elasticityConfig(argv: readonly string[], seconds: number): ElasticityConfig {
  const params = thresholdParamsSchema.parse({
    capacity: num(argv, 'capacity', 2500, { integer: true, min: 10 }),
    lowRate: num(argv, 'low-rate', 100, { min: 0.001 }),
    highRate: num(argv, 'high-rate', 125, { min: 0.001 }),
  });
  const splitAt = flag(argv, 'split-at') ?? 'up';
  if (splitAt !== 'up' && splitAt !== 'overflow') throw new Error(`--split-at must be 'up' or 'overflow' (got '${splitAt}')`);
  return {
    seconds: flag(argv, 'seconds') !== undefined ? seconds : 90,
    rate: num(argv, 'rate', 100, { min: 1 }),
    params,
    launchDelayMs: num(argv, 'launch-delay-ms', 5000, { integer: true }),
    valueBytes: num(argv, 'value-bytes', 512, { integer: true, min: 1 }),
    maxPrelaunch: num(argv, 'max-prelaunch', 2, { integer: true, min: 1 }),
    splitAt,
  };
}

interface VariantResult extends Omit<EngineResult, 'ackedKeys' | 'errors'> {
  name: string;
  errors: number;
  errorDetails: string[];
  verify: { missing: number; wrongValue: number; keysOnNodes: number; perNode: Record<string, number> };
  bootMs: number[];
}

export async function elasticity(opts: { seconds: number }): Promise<Record<string, unknown>> {
  const cfg = elasticityConfig(process.argv.slice(2), opts.seconds);
  const inserts = Math.max(1, Math.round(cfg.rate * cfg.seconds));

  const exampleT = [1, 2, 3, 4].map((n) => speculativeThreshold(PAPER_EXAMPLE.params, n, PAPER_EXAMPLE.rate));
  const exampleOk = exampleT.every((t, i) => t === PAPER_EXAMPLE.expected[i]);
  console.log(
    `paper 000 worked example (c=5000, δL=50, δH=250, R=100): T = ${exampleT.join(', ')} for 1-4 nodes (paper: ${PAPER_EXAMPLE.expected.join(', ')}) ${exampleOk ? 'ok' : 'MISMATCH'}`,
  );
  const ourT = Array.from({ length: 10 }, (_, i) => Math.round(speculativeThreshold(cfg.params, i + 1, cfg.rate)));
  console.log(
    `this run: c=${cfg.params.capacity} records, δL=${cfg.params.lowRate}/s, δH=${cfg.params.highRate}/s, R=${cfg.rate}/s: T = ${ourT.join(', ')} for 1-10 nodes`,
  );
  console.log(
    `${inserts} inserts of ${cfg.valueBytes} B values per variant (${cfg.seconds} s at R), modelled allocation time ${cfg.launchDelayMs} ms, split of a pre-launched node when it is ${cfg.splitAt === 'up' ? 'up' : 'needed (overflow)'}`,
  );

  const baseline = await runVariant('on-overflow', cfg, inserts);
  const candidate = await runVariant('speculative', cfg, inserts);
  const variants = [baseline, candidate];

  console.log(
    '\n' +
      table(
        variants.map((v) => ({
          variant: v.variant,
          'total s': round(v.totalMs / 1000, 1),
          'blocked s': round(v.blockedMs / 1000, 1),
          'scaling %': round(v.scalingShare * 100, 1),
          'busy %': round(v.scalingBusyShare * 100, 1),
          nodes: v.nodesAtEnd,
          'in ring at stream end': v.nodesAtStreamEnd,
          splits: v.splits,
          'pre-launches': v.prelaunches,
          'overflow launches': v.overflowScaleOuts,
          'keys moved': v.keysMoved,
          'alloc s': round(v.allocationMsTotal / 1000, 1),
          'migr s': round(v.migrationMsTotal / 1000, 2),
          'inserts/s': round(v.insertsPerSec, 1),
          errors: v.errors,
        })),
      ),
  );
  console.log(
    'scaling % = time the stream was blocked on a full node / run time; busy % = time any scale-out was running; nodes = running at the end (in the ring once the scale-outs still running finished, or idle)',
  );
  const boots = [...baseline.bootMs, ...candidate.bootMs].sort((a, b) => a - b);
  const bootSummary = {
    launches: boots.length,
    minMs: boots[0] ?? 0,
    medianMs: boots[Math.floor(boots.length / 2)] ?? 0,
    maxMs: boots[boots.length - 1] ?? 0,
  };
  console.log(
    `real local node boot (launch to listening): median ${bootSummary.medianMs} ms (min ${bootSummary.minMs}, max ${bootSummary.maxMs}) over ${bootSummary.launches} launches; modelled allocation time ${cfg.launchDelayMs} ms`,
  );

  const ratio = (a: number, b: number) => (b > 0 ? round(a / b) : null);
  const ratios = {
    scalingShareCandidateOverBaseline: ratio(candidate.scalingShare, baseline.scalingShare),
    blockedTimeCandidateOverBaseline: ratio(candidate.blockedMs, baseline.blockedMs),
    throughputCandidateOverBaseline: ratio(candidate.insertsPerSec, baseline.insertsPerSec),
    totalTimeCandidateOverBaseline: ratio(candidate.totalMs, baseline.totalMs),
    /** The paper's way of putting it: how many times smaller the candidate's scaling overhead is (null when it is 0). */
    scalingShareReduction: ratio(baseline.scalingShare, candidate.scalingShare),
    nodesCandidateOverBaseline: ratio(candidate.nodesAtEnd, baseline.nodesAtEnd),
    nodesInRingAtStreamEndCandidateOverBaseline: ratio(candidate.nodesAtStreamEnd, baseline.nodesAtStreamEnd),
    splitsCandidateOverBaseline: ratio(candidate.splits, baseline.splits),
  };
  const fmt = (x: number | null, what: string) => `${what} ${x === null ? 'n/a' : `${x}×`}`;
  const cut =
    candidate.scalingShare === 0
      ? baseline.scalingShare > 0
        ? ' (overhead cut to zero)'
        : ''
      : ratios.scalingShareReduction !== null
        ? ` (overhead cut ${ratios.scalingShareReduction}×)`
        : '';
  console.log(
    `candidate / baseline: ${fmt(ratios.scalingShareCandidateOverBaseline, 'scaling share')}${cut}, ${fmt(ratios.throughputCandidateOverBaseline, 'throughput')}, ${fmt(ratios.nodesCandidateOverBaseline, 'nodes')}, ${fmt(ratios.totalTimeCandidateOverBaseline, 'run time')}`,
  );
  if (baseline.errors + candidate.errors > 0)
    console.log(`ERRORS: baseline ${baseline.errors}, candidate ${candidate.errors} (see errorDetails in the JSON)`);

  return {
    scenario: 'elasticity',
    config: {
      inserts,
      streamSeconds: cfg.seconds,
      rate: cfg.rate,
      capacityRecords: cfg.params.capacity,
      lowRate: cfg.params.lowRate,
      highRate: cfg.params.highRate,
      launchDelayMs: cfg.launchDelayMs,
      valueBytes: cfg.valueBytes,
      maxPrelaunch: cfg.maxPrelaunch,
      splitAt: cfg.splitAt,
      keys: 'key:<i>, i = 0..N-1, the same sequence in both variants (uniform over the ring by SHA-256)',
      nodes: 'local cachenode processes (LocalFleet), starting with 1; ring in an in-memory CAS store',
      client:
        'WarmTier in the bench process; splits by Migrator.planScaleOut (one source, fullest range cut at its median) + run (incremental)',
      host: '2 shared cores',
    },
    definitions: {
      scalingShare: 'time the insert stream was blocked on a full node (waiting for a launch and/or split) / total run time',
      totalMs: 'first insert due -> last insert acknowledged; the stream resumes at rate R after a block (no catch-up)',
      scalingBusyShare: 'share of the run with at least one scale-out (launch or migration) running, blocking or not',
      allocationMs: 'max(launch delay, real boot): the modelled EC2 allocation time',
      migrationMs: 'planScaleOut + prepare + stream + publish + finish of one split',
      nodesAtEnd:
        'nodes running at the end: the ring once the scale-outs still running when the stream ended finished (a pre-launched instance costs from its launch), plus idle pre-launched nodes; nodesAtStreamEnd: ring nodes when the stream ended',
      errors:
        'failed inserts + failed scale-outs + acknowledged keys missing or wrong on read-back + |keys on nodes - acknowledged keys|',
    },
    thresholdCheck: { ...PAPER_EXAMPLE, T: exampleT, ok: exampleOk },
    thresholds: { nodes: ourT.map((_, i) => i + 1), T: ourT },
    localBootMs: bootSummary,
    baseline,
    candidate,
    ratios,
  };
}

async function runVariant(variant: Variant, cfg: ElasticityConfig, inserts: number): Promise<VariantResult> {
  const name =
    variant === 'on-overflow'
      ? 'scale on overflow (launch, then split, while inserts wait)'
      : `speculative pre-launch (paper 000 threshold T, split when ${cfg.splitAt === 'up' ? 'the node is up' : 'the source overflows'})`;
  console.log(`\n--- ${variant}: ${name}`);
  const cluster = await RealCluster.start({ secret: SECRET, launchDelayMs: cfg.launchDelayMs, valueBytes: cfg.valueBytes });
  try {
    const engine = new ElasticityEngine(cluster, {
      variant,
      params: cfg.params,
      rate: cfg.rate,
      maxBackground: cfg.maxPrelaunch,
      splitAt: cfg.splitAt,
      inserts,
      keyOf: (i) => `key:${i}`,
      log: (line) => console.log(line),
    });
    const r = await engine.run();
    const verify = await cluster.verify(r.ackedKeys);
    const details = [...r.errors, ...cluster.warningsSeen().map((w) => `warning: ${w}`)];
    if (verify.missing || verify.wrongValue)
      details.push(`read-back: ${verify.missing} missing, ${verify.wrongValue} wrong (${verify.examples.join('; ')})`);
    if (verify.keysOnNodes !== r.acked) details.push(`nodes hold ${verify.keysOnNodes} keys, ${r.acked} acknowledged`);
    const errors =
      r.failedInserts +
      r.scaleOuts.filter((s) => s.error).length +
      verify.missing +
      verify.wrongValue +
      Math.abs(verify.keysOnNodes - r.acked);
    console.log(
      `  ${variant}: ${r.acked}/${inserts} inserts in ${(r.totalMs / 1000).toFixed(1)} s, blocked ${(r.blockedMs / 1000).toFixed(1)} s (${(r.scalingShare * 100).toFixed(1)}%), ${r.nodesAtEnd} nodes (${r.nodesAtStreamEnd} in the ring at the end of the stream), ${r.splits} splits, read-back ${r.acked - verify.missing - verify.wrongValue}/${r.acked} ok, nodes hold ${verify.keysOnNodes} keys, errors ${errors}`,
    );
    const { ackedKeys: _keys, errors: _errors, ...rest } = r;
    return {
      name,
      ...rest,
      scalingShare: round(r.scalingShare, 4),
      scalingBusyShare: round(r.scalingBusyShare, 4),
      insertsPerSec: round(r.insertsPerSec, 2),
      errors,
      errorDetails: details,
      verify: {
        missing: verify.missing,
        wrongValue: verify.wrongValue,
        keysOnNodes: verify.keysOnNodes,
        perNode: verify.perNode,
      },
      bootMs: cluster.bootMs,
    };
  } finally {
    await cluster.close();
  }
}
