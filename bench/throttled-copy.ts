/**
 * throttled-copy: paper 003's backup experiment (§4.2.2, Fig. 14: a background copy between two volumes raised
 * foreground read/write latency by ~50%, and a bandwidth cap on the `copy` response removed the rise). Here: a
 * namespace of `--entries` values of 4-16 KiB (random bytes, ~10 KiB mean) held by one cache node (a `cachenode`
 * process through `WarmTier`), read by a closed loop of `--concurrency` readers through a `Coordinator` over
 * [warm, cold (the local folder tier)], while `runTransfer` (core/policy/data-mover.ts) copies the namespace
 * warm → cold:
 *
 *  - baseline: no copy;
 *  - uncapped: the copy as fast as it goes (each finished copy is followed by another, so it runs for the whole
 *    measurement);
 *  - capped: the copy paced to `--cap-bytes-per-second`, by default a quarter of the rate an uncapped copy reaches
 *    alone (measured for 3 s before the rounds, no reads running): the copy is then bound by the cap, not by its
 *    own per-entry round trips, and the namespace takes longer than a measurement to copy, so the copy runs
 *    throughout (cancelled when the measurement ends);
 *  - paper-cap: the paper's own cap, 40 KiB/s (`--paper-cap-bytes-per-second`).
 *
 * Every copy goes into a fresh folder tier on the same disk (fsync on, its default; `--cold-fsync 0` turns it off), so each copy
 * writes every entry. The foreground, the copy and the data mover run in the bench process, as in a Tiera instance;
 * the cache node in its own. Each round measures the three modes in a rotated order (`--runs` rounds, default 4, of
 * `--seconds`/2 each, after a 1 s warm-up of reads); ratios are taken to the same round's baseline and summarised
 * as the median with min..max over rounds.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { HybridLogicalClock } from '../core/model/hlc.js';
import { contentHash } from '../core/model/keys.js';
import { LocalFleet } from '../core/nodes/local-fleet.js';
import { NodeClient } from '../core/nodes/node-client.js';
import { runTransfer, type TransferSpec } from '../core/policy/data-mover.js';
import { initialRing } from '../core/ring/document.js';
import { RingView } from '../core/ring/view.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { WarmTier } from '../core/tiers/warm-tier.js';
import { closedLoop, table, type LoadResult } from './lib/measure.js';
import { flag, prng, summary, spread, type Summary } from './lib/rounds.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SECRET = 'bench-secret-0123456789';
const NS = 'backup';
const MODES = ['baseline', 'uncapped', 'capped', 'paper-cap'] as const;
type Mode = (typeof MODES)[number];

interface CopyFigures {
  bytes: number;
  entries: number;
  /** Copies of the whole namespace that finished inside the measurement. */
  completed: number;
  throttledMs: number;
  bytesPerSecond: number;
}

interface Figures {
  readsPerSecond: Summary;
  p50Ms: Summary;
  p99Ms: Summary;
  errors: number;
  copy?: { mibPerSecond: Summary; wholeCopies: number[]; throttledShare: Summary };
  vsBaseline?: Record<'p50' | 'p99' | 'throughput', Summary>;
}

interface ModeRound {
  reads: LoadResult;
  copy?: CopyFigures;
}

export async function throttledCopy(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const seconds = Math.max(1, opts.seconds / 2);
  const rounds = opts.runs ?? 4;
  const entries = flag('entries', 3000);
  const concurrency = flag('concurrency', 8);
  const capFlag = flag('cap-bytes-per-second', 0);
  const paperCap = flag('paper-cap-bytes-per-second', 40 * KiB);
  const coldFsync = flag('cold-fsync', 1) !== 0;
  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-copy-'));
  const fleet = new LocalFleet({ rootDir: join(dir, 'fleet'), secret: SECRET, capacityBytes: 4 * 1024 * MiB });
  const admin = new NodeClient({ secret: SECRET });
  let warm: WarmTier | undefined;
  let coordinator: Coordinator | undefined;
  try {
    const node = await fleet.launch('copy-node');
    const ring = initialRing([{ id: node.nodeId, url: node.url }], 1);
    await admin.pushRing(node.url, ring);
    warm = new WarmTier({ ring: new RingView({ initial: ring }), secret: SECRET, connectionsPerNode: 16, timeoutMs: 10_000 });
    const cold = new LocalFolderTier({ dir: join(dir, 'cold'), fsync: coldFsync });
    coordinator = new Coordinator({ tiers: [warm, cold], flushTimer: false });
    const from = warm;

    // The namespace: written into warm only (cold holds none of it, as before a backup).
    const rand = prng(3);
    const clock = new HybridLogicalClock();
    let totalBytes = 0;
    process.stdout.write(`loading ${entries} values of 4-16 KiB into the cache node ... `);
    for (let i = 0; i < entries; i += 100) {
      const batch = Array.from({ length: Math.min(100, entries - i) }, (_, j) => {
        const value = randomBytes(4 * KiB + Math.floor(rand() * 12 * KiB));
        totalBytes += value.length;
        const header = {
          version: clock.next(),
          expiresAt: null,
          size: value.length,
          hash: contentHash(value),
          tags: [],
          flags: {},
        };
        return { key: `k${i + j}`, entry: { header, value } };
      });
      await warm.putMany(NS, batch);
    }
    console.log(`done (${(totalBytes / MiB).toFixed(1)} MiB)`);

    const key = (i: number) => `k${(i * 7919) % entries}`;
    const read = (i: number) => coordinator!.get(NS, key(i));
    let targets = 0;
    /** Copies the namespace again and again (each into a fresh folder tier) until `stop()`. */
    const copyWhile = async (stop: () => boolean, bytesPerSecond: number | undefined): Promise<CopyFigures> => {
      const started = performance.now();
      const f = { bytes: 0, entries: 0, completed: 0, throttledMs: 0, bytesPerSecond: 0 };
      while (!stop()) {
        const target = new LocalFolderTier({ dir: join(dir, `copy-${targets++}`), fsync: coldFsync });
        const spec: TransferSpec = {
          rule: 'bench-backup',
          kind: 'copy',
          ns: NS,
          from,
          to: [target],
          what: [],
          durable: [from, target],
          ...(bytesPerSecond ? { bytesPerSecond } : {}),
        };
        const r = await runTransfer(spec, { cancelled: stop });
        f.bytes += r.bytes;
        f.entries += r.copied;
        f.throttledMs += r.throttledMs;
        if (r.copied === entries) f.completed++;
        await target.close();
      }
      f.bytesPerSecond = Math.round(f.bytes / ((performance.now() - started) / 1000));
      return f;
    };
    // The copy alone (no reads), uncapped, for 3 s: what the data mover reaches on this host; the default cap is a
    // quarter of it.
    const calibrationEnds = performance.now() + 3000;
    const alone = await copyWhile(() => performance.now() >= calibrationEnds, undefined);
    const cap = capFlag > 0 ? capFlag : Math.max(16 * KiB, Math.round(alone.bytesPerSecond / 4 / KiB) * KiB);
    console.log(
      `copy alone, uncapped: ${(alone.bytesPerSecond / MiB).toFixed(2)} MiB/s (${Math.round(alone.entries / 3)} entries/s); cap ${(cap / MiB).toFixed(2)} MiB/s`,
    );
    // Reads alone for 3 s before the first round: the first rounds otherwise ran a fifth slower (JIT, the node's
    // first reads, the calibration copy's writes settling).
    await closedLoop(read, { concurrency, seconds: 3 });
    const measure = async (mode: Mode): Promise<ModeRound> => {
      await closedLoop(read, { concurrency, seconds: 1 }); // warm-up, no copy
      if (mode === 'baseline') return { reads: await closedLoop(read, { concurrency, seconds }) };
      let done = false;
      const copying = copyWhile(() => done, mode === 'capped' ? cap : mode === 'paper-cap' ? paperCap : undefined);
      const reads = await closedLoop(read, { concurrency, seconds });
      done = true;
      return { reads, copy: await copying };
    };

    const runs: Record<Mode, ModeRound[]> = { baseline: [], uncapped: [], capped: [], 'paper-cap': [] };
    for (let r = 0; r < rounds; r++) {
      const order = MODES.map((_, i) => MODES[(i + r) % MODES.length]!);
      for (const mode of order) {
        const m = await measure(mode);
        runs[mode].push(m);
        const c = m.copy ? `  copy ${(m.copy.bytesPerSecond / MiB).toFixed(2)} MiB/s (${m.copy.completed} whole copies)` : '';
        console.log(
          `  round ${r + 1}/${rounds} ${mode.padEnd(9)} ${String(m.reads.opsPerSec).padStart(6)} reads/s  p50 ${m.reads.p50Ms.toFixed(2)} ms  p99 ${m.reads.p99Ms.toFixed(2)} ms${c}`,
        );
      }
    }

    const ratio = (mode: Mode, f: (x: LoadResult) => number) =>
      summary(runs[mode].map((m, r) => f(m.reads) / f(runs.baseline[r]!.reads)));
    const figures = Object.fromEntries(
      MODES.map((mode) => {
        const rs = runs[mode];
        const copy = rs[0]!.copy
          ? {
              mibPerSecond: summary(
                rs.map((m) => m.copy!.bytesPerSecond / MiB),
                3,
              ),
              wholeCopies: rs.map((m) => m.copy!.completed),
              throttledShare: summary(
                rs.map((m) => m.copy!.throttledMs / (seconds * 1000)),
                2,
              ),
            }
          : undefined;
        return [
          mode,
          {
            readsPerSecond: summary(
              rs.map((m) => m.reads.opsPerSec),
              0,
            ),
            p50Ms: summary(rs.map((m) => m.reads.p50Ms)),
            p99Ms: summary(rs.map((m) => m.reads.p99Ms)),
            errors: rs.reduce((a, m) => a + m.reads.errors, 0),
            ...(copy ? { copy } : {}),
            ...(mode === 'baseline'
              ? {}
              : {
                  vsBaseline: {
                    p50: ratio(mode, (x) => x.p50Ms),
                    p99: ratio(mode, (x) => x.p99Ms),
                    throughput: ratio(mode, (x) => x.opsPerSec),
                  },
                }),
          },
        ];
      }),
    ) as Record<Mode, Figures>;
    const noise = {
      baselineP50: spread(runs.baseline.map((m) => m.reads.p50Ms)),
      baselineP99: spread(runs.baseline.map((m) => m.reads.p99Ms)),
      baselineThroughput: spread(runs.baseline.map((m) => m.reads.opsPerSec)),
    };

    const range = (s: Summary, unit = '') => `${s.median}${unit} (${s.min}-${s.max})`;
    console.log(
      '\n' +
        table(
          MODES.map((mode) => {
            const f = figures[mode];
            return {
              mode,
              'reads/s': f.readsPerSecond.median,
              'p50 ms': f.p50Ms.median,
              'p99 ms': f.p99Ms.median,
              'p50 vs baseline': f.vsBaseline ? range(f.vsBaseline.p50, 'x') : '-',
              'p99 vs baseline': f.vsBaseline ? range(f.vsBaseline.p99, 'x') : '-',
              'reads/s vs baseline': f.vsBaseline ? range(f.vsBaseline.throughput, 'x') : '-',
              'copy MiB/s': f.copy ? range(f.copy.mibPerSecond) : '-',
            };
          }),
        ),
    );
    console.log(
      `\nnoise: the baseline's (max - min)/median over ${rounds} rounds: p50 ${noise.baselineP50}, p99 ${noise.baselineP99}, reads/s ${noise.baselineThroughput}`,
    );
    return {
      scenario: 'throttled-copy',
      config: {
        entries,
        valueBytes: '4-16 KiB, uniform, random bytes',
        namespaceBytes: totalBytes,
        concurrency,
        secondsPerMeasurement: seconds,
        rounds,
        capBytesPerSecond: cap,
        capChosen: capFlag > 0 ? '--cap-bytes-per-second' : 'a quarter of the copy alone, uncapped',
        paperCapBytesPerSecond: paperCap,
        coldFsync,
        statistic: 'per mode: median (min-max) over rounds; ratios taken to the same round baseline, then median (min-max)',
        foreground: 'closed-loop coordinator.get of keys in warm (Coordinator over [warm, cold], no hot tier)',
        background:
          'runTransfer copy warm -> a fresh LocalFolderTier (fsync on) per copy, repeated until the measurement ends; same process as the foreground',
        node: 'one cachenode process (LMDB) via WarmTier, 16 connections',
        host: '2 shared cores; bench process (foreground + copy) and the cache node run on them together',
      },
      copyAlone: alone,
      rounds: runs,
      figures,
      noise,
    };
  } finally {
    await coordinator?.close(); // closes warm and cold
    if (!coordinator) await warm?.close();
    await admin.close();
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
