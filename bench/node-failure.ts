/**
 * node-failure: one of four cache nodes is killed (`kill -9`) under an open-loop load, and the warm tier's failure
 * handling runs as it does locally (docs/WORKFLOWS.md, "When a cache node fails"): the coordinators' node calls make
 * the node suspect, the failure detector confirms it by probing and marks it DOWN in the ring, writes skip it once
 * its lease has run out, and the mark starts the ReplaceNode workflow, which launches a node, hands it the dead
 * node's ranges and fills it from cold. Issue 23, item 9. Targets: detection ≤ 10 s, write errors only between the
 * kill and the fence, four NORMAL nodes and the fill done ≤ 60 s after the kill (paper 003: about 3 minutes to
 * reconfigure), throughput after the recovery back to the level before the kill, no stale read.
 *
 * Set-up (one process for the load, the coordinator, the detector and the workflow; the nodes are processes):
 *
 *  - a LocalFleet of four cache nodes polling a file ring store every {@link POLL_MS} ms, the ring's lease
 *    {@link LEASE_MS} ms (production: 5 s polls, 15 s lease; local `npm start`: 1 s and 5 s); nodes uncapped;
 *  - a Coordinator over [WarmTier, LocalFolderTier as cold] writing to both (no hot tier: this measures the warm
 *    tier's failure handling, and a hot tier would serve most reads whatever warm does); the cold folder does not
 *    fsync (it stands in for S3; its fsyncs would measure this machine's disk);
 *  - a NodeHealthChecker ticking every {@link CHECK_TICK_MS} ms, fed by NodeClient.observe, probing with httpProbe
 *    ({@link PROBE_TIMEOUT_MS} ms), marking after {@link CONFIRM_MS} ms and {@link CONFIRM_PROBES} failed probes;
 *    its onMarked starts `replace-node` through `localWorkflows` (the synthesized state machines run in this
 *    process by aws-local-stepfunctions, the LocalFleet standing in for EC2), filling the bench namespace from cold
 *    under a bandwidth cap (`--fill-rate-mib`, 8 MiB/s: the workflow's default) in steps of {@link FILL_MAX_MS} ms.
 *    In AWS the fill runs in a Lambda; here it takes CPU from the load generator, which the figures include.
 *
 * Load (bench/lib/open-loop.ts, issue 23 item 10's method): Poisson arrivals at a fixed offered rate, a share
 * (STRATA_BENCH_LOAD, 0.5) of the closed-loop capacity measured first (or STRATA_BENCH_OFFERED_RATE), 50% reads and
 * 50% writes of 1 KiB values over the whole dataset (uniform keys). Per second: offered, served (succeeded by the
 * end of its second + 250 ms), read and write errors, p99. Every acknowledged write raises its key's acknowledged
 * version; a read that returns an older version than the one acknowledged before it started is a stale read.
 *
 * Timeline: warm-up, baseline window, kill, then until four NORMAL nodes and the workflow has ended (the fill
 * done), then the post window. Throughput after against before: per-second served counts of the post and baseline
 * windows paired second by second, the geometric mean of the ratios with a 95% t interval (bench/lib/paired.ts);
 * the same for the baseline's second half against its first (A/A: the interval's width when nothing changed).
 *
 * One run (a failure cannot be repeated on the same fleet without a different starting state); `--keys-per-node`
 * below the issue's 40,000 is a quick check whose results are not written.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { NodeHealthChecker } from '../core/nodes/health-check.js';
import { httpProbe } from '../core/nodes/health-probe.js';
import { LocalFleet } from '../core/nodes/local-fleet.js';
import { NodeClient } from '../core/nodes/node-client.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { initialRing, type RingDocument } from '../core/ring/document.js';
import { ringHash } from '../core/ring/hash.js';
import { FileCasStore, RingStore } from '../core/ring/store.js';
import { RingView } from '../core/ring/view.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { WarmTier } from '../core/tiers/warm-tier.js';
import type { LocalExecution } from '../core/workflows/local/asl-runner.js';
import { localWorkflows, type LocalWorkflows } from '../core/workflows/local/local-workflows.js';
import { closedLoop, round, table } from './lib/measure.js';
import { OpenLoop, windowStats } from './lib/open-loop.js';
import { meanInterval, ratioInterval, type RatioInterval } from './lib/paired.js';
import { flag, prng } from './lib/rounds.js';
import { envNumber } from './lib/env-number.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SECRET = 'bench-secret-0123456789';
const NS = 'failure';
const VALUE_BYTES = 1024;
const NODES = ['n1', 'n2', 'n3', 'n4'] as const;
/** The node killed. */
const VICTIM = 'n2';
const RANGES_PER_NODE = 2;
/** The issue's dataset: 40,000 keys of 1 KiB per node. */
const DEFAULT_KEYS_PER_NODE = 40_000;
const READ_SHARE = 0.5;

/** The ring's lease (`leaseMs`): a node serves only this long after its last successful read of the store. */
const LEASE_MS = 2000;
/** How often the nodes (and the coordinator's ring view) read the ring store. */
const POLL_MS = 200;
/** The failure detector: tick interval, probe bound, and what a marking needs. */
const CHECK_TICK_MS = 250;
const PROBE_TIMEOUT_MS = 500;
const CONFIRM_MS = 1000;
const CONFIRM_PROBES = 2;
/** Consecutive failed calls that make a node suspect (the checker's default). */
const SUSPECT_AFTER = 3;
/** Each fill step of the workflow returns after this long (its progress record is updated per step). */
const FILL_MAX_MS = 5000;

const MIB = 1024 * 1024;
const GRACE_MS = 250;
const MAX_IN_FLIGHT = 1024;
const CAL_WARMUP_S = 3;
const CAL_S = 5;
const CAL_CONCURRENCY = 64;

/** Targets (issue 23, item 9). */
const DETECTION_TARGET_S = 10;
const RECOVERY_TARGET_S = 60;
/** Throughput back: the ratio's 95% interval reaches 1 (no drop shown) and its low end is at least this. */
const THROUGHPUT_LOW_BOUND = 0.95;

/** `--name N` that must pass `ok`. */
function checkedFlag(name: string, dflt: number, ok: (v: number) => boolean, what: string): number {
  const v = flag(name, dflt);
  if (!ok(v)) throw new Error(`--${name} must be ${what} (got ${v})`);
  return v;
}

const wholeAtLeast = (min: number) => (v: number) => Number.isInteger(v) && v >= min;

/** Other jobs on the machine that would share its two cores (CI runs, test runs). */
function otherJobs(): string[] {
  const r = spawnSync('pgrep', ['-af', String.raw`\.ci/run|jest`], { encoding: 'utf8' });
  return (r.stdout ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith(`${process.pid} `))
    .map((l) => l.slice(0, 160));
}

const loadText = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Per-second counts by kind (by the second a request was issued in: within milliseconds of its due time). */
class Recorder {
  readonly reads: number[] = [];
  readonly writes: number[] = [];
  readonly readErrors: number[] = [];
  readonly writeErrors: number[] = [];
  readonly staleBySecond: number[] = [];
  stale = 0;
  readonly staleExamples: string[] = [];
  /** Error messages by kind, counted (the first 160 characters). */
  readonly messages = new Map<string, number>();
  /** The open loop's clock, once it runs (before that: the calibration, not recorded per second). */
  loop: OpenLoop | undefined;

  second(): number {
    return this.loop ? this.loop.second() : -1;
  }

  op(read: boolean, s: number): void {
    if (s >= 0) bump(read ? this.reads : this.writes, s);
  }

  error(read: boolean, s: number, e: unknown): void {
    if (s >= 0) bump(read ? this.readErrors : this.writeErrors, s);
    const text = `${read ? 'read' : 'write'}: ${errorText(e)}`.slice(0, 160);
    this.messages.set(text, (this.messages.get(text) ?? 0) + 1);
  }

  staleRead(s: number, key: string, got: number, floor: number): void {
    this.stale++;
    if (s >= 0) bump(this.staleBySecond, s);
    if (this.staleExamples.length < 10) this.staleExamples.push(`${key}: read ${got} after ${floor} was acknowledged`);
  }
}

function bump(a: number[], s: number): void {
  a[s] = (a[s] ?? 0) + 1;
}

function errorText(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = (e as { code?: unknown }).code;
  return `${e.name}${typeof code === 'string' ? ` ${code}` : ''}: ${e.message}`;
}

const sum = (a: readonly (number | undefined)[], from = 0, to = a.length) => {
  let t = 0;
  for (let i = Math.max(0, from); i < Math.min(a.length, to); i++) t += a[i] ?? 0;
  return t;
};

/** When things happened, ms of performance.now(); undefined until they do. */
interface Marks {
  kill?: number;
  exited?: number;
  marked?: number;
  downSeen?: number;
  takeover?: number;
  fourNormal?: number;
  workflowEnd?: number;
}

export async function nodeFailure(_opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const keysPerNode = checkedFlag('keys-per-node', DEFAULT_KEYS_PER_NODE, wholeAtLeast(100), 'a whole number >= 100');
  const warmupS = checkedFlag('warmup-s', 5, wholeAtLeast(1), 'whole seconds >= 1');
  const baselineS = checkedFlag('baseline-s', 30, wholeAtLeast(4), 'whole seconds >= 4');
  const postS = checkedFlag('post-s', 30, wholeAtLeast(4), 'whole seconds >= 4');
  const maxRecoveryS = checkedFlag('max-recovery-s', 600, wholeAtLeast(10), 'whole seconds >= 10');
  const fillRate = checkedFlag('fill-rate-mib', 8, (v) => v > 0 && v <= 1024, 'MiB/s in (0, 1024]') * MIB;
  const load = envNumber('STRATA_BENCH_LOAD', 0.5, (v) => v > 0 && v <= 1, 'a share of capacity in (0, 1]');
  const fixedRate = envNumber('STRATA_BENCH_OFFERED_RATE', 0, (v) => v >= 0, 'requests per second >= 0');
  const seed = envNumber('STRATA_BENCH_SEED', 23, wholeAtLeast(0), 'a whole number >= 0');
  const keys = keysPerNode * NODES.length;
  const partial = keysPerNode < DEFAULT_KEYS_PER_NODE;

  const jobsAtStart = otherJobs();
  const loadAtStart = loadText();
  console.log(
    `4 cache nodes, ${keys} keys of ${VALUE_BYTES} B (${keysPerNode} per node), kill -9 ${VICTIM}; ` +
      `lease ${LEASE_MS} ms, ring polled every ${POLL_MS} ms; detector tick ${CHECK_TICK_MS} ms, confirm ${CONFIRM_MS} ms ` +
      `and ${CONFIRM_PROBES} probes; fill cap ${round(fillRate / MIB, 2)} MiB/s; load average ${loadAtStart}`,
  );
  console.log(
    jobsAtStart.length === 0
      ? 'no CI or jest run seen on the machine'
      : `other jobs on the machine (the figures share its cores with them):\n  ${jobsAtStart.join('\n  ')}`,
  );

  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-failure-'));
  const ringDir = join(dir, 'ring');
  const fleet = new LocalFleet({
    rootDir: join(dir, 'nodes'),
    secret: SECRET,
    capacityBytes: 4 * 1024 ** 3,
    env: { STRATA_NODE_RING_STORE: `file:${ringDir}`, STRATA_NODE_RING_POLL_MS: String(POLL_MS) },
  });
  const cas = new FileCasStore(ringDir);
  const ringStore = new RingStore(cas);
  const client = new NodeClient({ secret: SECRET });
  let coordinator: Coordinator | undefined;
  let workflows: LocalWorkflows | undefined;
  let checker: NodeHealthChecker | undefined;
  let loop: OpenLoop | undefined;
  let unobserve: (() => void) | undefined;
  const startedAt = performance.now();
  try {
    // ---------------------------------------------------------------- set-up
    const launched = await Promise.all(NODES.map((id) => fleet.launch(id)));
    const ring = await ringStore.create({
      ...initialRing(
        launched.map((n) => ({ id: n.nodeId, url: n.url, instance: n.nodeId })),
        RANGES_PER_NODE,
      ),
      leaseMs: LEASE_MS,
    });
    await Promise.all(launched.map((n) => client.pushRing(n.url, ring)));
    const view = new RingView({ store: ringStore, refreshIntervalMs: POLL_MS });
    const warm = new WarmTier({ ring: view, client, ownsRing: true });
    const cold = new LocalFolderTier({ dir: join(dir, 'cold'), fsync: false });
    let backgroundErrors = 0;
    const c = new Coordinator({
      tiers: [warm, cold],
      policies: new PolicyRegistry({ defaults: { writeTiers: ['warm', 'cold'], nearCache: { enabled: false } } }),
      flushTimer: false,
      onBackgroundError: () => backgroundErrors++,
    });
    coordinator = c;
    await c.ready();

    const { synthesizeWorkflowDefinitions } = await import('../cdk/lib/workflow-definitions.js');
    const metrics: { key: string; value: number }[] = [];
    const wf = localWorkflows({
      definitions: synthesizeWorkflowDefinitions(),
      cas,
      fleet,
      secret: SECRET,
      tiers: { warm, cold },
      metric: (key, value) => metrics.push({ key, value }),
    });
    workflows = wf;

    const marks: Marks = {};
    const detectorLog: string[] = [];
    let execution: string | undefined;
    let workflowStartError: string | undefined;
    let finished: LocalExecution | undefined;
    const at = (t: number | undefined) =>
      t === undefined || marks.kill === undefined ? '' : `+${round((t - marks.kill) / 1000, 2)} s`;
    const ck = new NodeHealthChecker({
      ring: ringStore,
      probe: httpProbe(client, PROBE_TIMEOUT_MS),
      suspectAfterFailures: SUSPECT_AFTER,
      confirmMs: CONFIRM_MS,
      confirmProbes: CONFIRM_PROBES,
      log: (level, message) => {
        if (level === 'warn' || level === 'error') detectorLog.push(`${at(performance.now())} ${level} ${message}`);
      },
      onMarked: async (m) => {
        marks.marked = performance.now();
        try {
          const run = await wf.service.start('replace-node', {
            nodeId: m.node,
            reason: 'health check',
            fillNamespaces: [NS],
            rateBytesPerSec: fillRate,
            fillMaxMs: FILL_MAX_MS,
          });
          execution = run.execution;
          void wf.runner.wait(run.execution).then((e) => {
            marks.workflowEnd = performance.now();
            finished = e;
          });
        } catch (e) {
          workflowStartError = errorText(e);
        }
      },
    });
    checker = ck;
    unobserve = client.observe((url, ok) => {
      const node = view.current()?.doc.nodes.find((n) => n.url === url);
      if (node) ck.report(node.id, ok);
    });
    ck.start(CHECK_TICK_MS);

    // ---------------------------------------------------------------- the dataset
    const key = (i: number) => `k${i}`;
    const value = Buffer.alloc(VALUE_BYTES, 0x61);
    const acked = new Float64Array(keys);
    const loadStart = performance.now();
    const CHUNK = 1000;
    const chunks = Array.from({ length: Math.ceil(keys / CHUNK) }, (_, i) => i);
    let nextChunk = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (nextChunk < chunks.length) {
          const from = chunks[nextChunk++]! * CHUNK;
          const items = Array.from({ length: Math.min(CHUNK, keys - from) }, (_, j) => ({ key: key(from + j), value }));
          const written = await c.putMany(NS, items);
          written.forEach((w, j) => (acked[from + j] = w.version));
        }
      }),
    );
    const loadSeconds = round((performance.now() - loadStart) / 1000, 1);
    console.log(`loaded ${keys} keys into warm and cold in ${loadSeconds} s`);

    // The victim's keys under the first ring: the ranges its replacement takes over (for the coverage check).
    const router = new RingView({ initial: ring, refreshIntervalMs: 0 });
    const victimKeys: number[] = [];
    for (let i = 0; i < keys; i++) if (router.current()!.route(ringHash(NS, key(i))).owner.id === VICTIM) victimKeys.push(i);
    router.close();

    // ---------------------------------------------------------------- the load
    const rec = new Recorder();
    const request = async (rand: () => number) => {
      const k = Math.floor(rand() * keys);
      const read = rand() < READ_SHARE;
      const s = rec.second();
      rec.op(read, s);
      try {
        if (read) {
          const floor = acked[k]!;
          const got = await c.get(NS, key(k));
          const v = got?.entry.header.version ?? 0;
          if (v < floor) rec.staleRead(s, key(k), v, floor);
        } else {
          const r = await c.put(NS, key(k), value);
          if (r.version > acked[k]!) acked[k] = r.version;
        }
      } catch (e) {
        rec.error(read, s, e);
        throw e;
      }
    };

    const calRand = prng(seed ^ 0x2545f491);
    const capacity = await closedLoop(() => request(calRand), {
      concurrency: CAL_CONCURRENCY,
      seconds: CAL_S,
      warmupSeconds: CAL_WARMUP_S,
    });
    const rate = fixedRate > 0 ? fixedRate : Math.max(1, Math.round(capacity.opsPerSec * load));
    const rateFrom = fixedRate > 0 ? 'STRATA_BENCH_OFFERED_RATE' : `${load} of the closed-loop capacity`;
    console.log(
      `capacity ${capacity.opsPerSec} ops/s closed-loop (${CAL_CONCURRENCY} workers, p99 ${round(capacity.p99Ms, 2)} ms, ` +
        `${capacity.errors} errors); offering ${rate}/s (${rateFrom})`,
    );
    const staleInCalibration = rec.stale;

    const ol = new OpenLoop((_i, rand) => request(rand), {
      rate,
      arrivals: 'poisson',
      seed,
      maxInFlight: MAX_IN_FLIGHT,
      graceMs: GRACE_MS,
    });
    loop = ol;
    rec.loop = ol;
    ol.start();
    const measuredFrom = warmupS;
    const plannedKill = warmupS + baselineS;
    const untilSecond = async (s: number) => {
      const ms = (s - ol.elapsed()) * 1000;
      if (ms > 0) await sleep(ms);
    };
    await untilSecond(plannedKill);

    // ---------------------------------------------------------------- the failure
    marks.kill = performance.now();
    await fleet.kill(VICTIM, 'SIGKILL');
    marks.exited = performance.now();
    console.log(`killed ${VICTIM} at second ${round(ol.elapsed(marks.kill), 2)} of the open loop`);
    let timedOut = false;
    let newNode: string | undefined;
    for (;;) {
      const now = performance.now();
      const doc = (await ringStore.load()) as RingDocument;
      const dead = doc.nodes.find((n) => n.id === VICTIM);
      if (dead?.state === 'DOWN') marks.downSeen ??= now;
      const fresh = doc.nodes.filter((n) => !(NODES as readonly string[]).includes(n.id));
      if (!dead && fresh.length > 0 && doc.ranges.some((r) => r.owner === fresh[0]!.id)) {
        marks.takeover ??= now;
        newNode = fresh[0]!.id;
      }
      if (!dead && doc.nodes.length === NODES.length && doc.nodes.every((n) => n.state === 'NORMAL')) marks.fourNormal ??= now;
      if (marks.fourNormal !== undefined && marks.workflowEnd !== undefined) break;
      if (finished && finished.status !== 'SUCCEEDED') break;
      if (workflowStartError) break;
      if (now - marks.kill > maxRecoveryS * 1000) {
        timedOut = true;
        break;
      }
      await sleep(100);
    }
    const recovered =
      marks.fourNormal !== undefined && marks.workflowEnd !== undefined && finished?.status === 'SUCCEEDED'
        ? Math.max(marks.fourNormal, marks.workflowEnd)
        : undefined;
    console.log(
      recovered !== undefined
        ? `recovered ${at(recovered)} after the kill: four NORMAL nodes (${newNode} for ${VICTIM}) and the fill done`
        : `not recovered: ${timedOut ? `still not after ${maxRecoveryS} s` : (workflowStartError ?? `workflow ${finished?.status}: ${JSON.stringify(finished?.error)}`)}`,
    );

    // ---------------------------------------------------------------- after it
    const postFrom = Math.ceil(ol.elapsed(recovered ?? performance.now()));
    await untilSecond(postFrom + postS + 0.05);
    const res = await ol.stop();
    loop = undefined;
    rec.loop = undefined;
    const endedAt = performance.now();
    // Over the whole run: before the kill warm holds every key, so reads never reach cold and nothing is promoted.
    // (Not asked during the load: the cold folder's stats walk every file.)
    const promotions = (await c.stats()).promotions;

    // Coverage of the replaced ranges in warm (peek: warm alone), and acknowledged writes read back, by sample.
    const sampleRand = prng(seed ^ 0x51ed270b);
    const coverageSample = Array.from({ length: Math.min(2000, victimKeys.length) }, () =>
      key(victimKeys[Math.floor(sampleRand() * victimKeys.length)]!),
    );
    const inWarm = (await Promise.all(coverageSample.map((k) => warm.get(NS, k, { peek: true }).catch(() => undefined)))).filter(
      (e) => e !== undefined,
    ).length;
    const readBack = Array.from({ length: Math.min(5000, keys) }, () => Math.floor(sampleRand() * keys));
    let lost = 0;
    let readBackErrors = 0;
    for (let i = 0; i < readBack.length; i += 250) {
      const batch = readBack.slice(i, i + 250);
      const got = await Promise.all(batch.map((k) => c.get(NS, key(k)).catch(() => null)));
      got.forEach((g, j) => {
        if (g === null) readBackErrors++;
        else if ((g?.entry.header.version ?? 0) < acked[batch[j]!]!) lost++;
      });
    }
    const progress = execution ? await wf.deps.progress.get(execution) : undefined;

    // ---------------------------------------------------------------- figures
    const sec = (t: number | undefined) => (t === undefined ? undefined : ol.elapsed(t));
    const killAt = ol.elapsed(marks.kill);
    // The event's first second: the one the kill fell in (the baseline ends before it).
    const killSecond = Math.floor(killAt);
    const rel = (t: number | undefined) => (t === undefined ? null : round((t - marks.kill!) / 1000, 2));
    const n = res.seconds.length;
    const we = Array.from({ length: n }, (_, s) => rec.writeErrors[s] ?? 0);
    const re = Array.from({ length: n }, (_, s) => rec.readErrors[s] ?? 0);
    // Fenced: the first second with no write error after the write errors the kill caused began.
    const firstErr = we.findIndex((x, s) => s >= killSecond && x > 0);
    let fencedSecond = killSecond;
    if (firstErr >= 0) {
      fencedSecond = we.findIndex((x, s) => s > firstErr && x === 0);
      if (fencedSecond < 0) fencedSecond = n;
    }
    const fencedAfterS = round(fencedSecond - killAt, 2);
    const writeErrorsDuring = sum(we, killSecond, fencedSecond);
    const writeErrorsOutside = sum(we, measuredFrom, killSecond) + sum(we, fencedSecond, n);
    const eventEnd = recovered !== undefined ? Math.ceil(ol.elapsed(recovered)) : postFrom;
    const readErrors = {
      baseline: sum(re, measuredFrom, killSecond),
      killToFence: sum(re, killSecond, fencedSecond),
      fenceToRecovery: sum(re, fencedSecond, eventEnd),
      post: sum(re, postFrom, n),
    };
    const detectionS = marks.marked !== undefined ? round((marks.marked - marks.kill) / 1000, 2) : null;
    const recoveryS = recovered !== undefined ? round((recovered - marks.kill) / 1000, 2) : null;
    const fourNormalS = rel(marks.fourNormal);
    // What the lease allows: the mark's time plus the lease (the coordinator counts from when it saw the mark).
    const leaseOutS = marks.marked !== undefined ? round((marks.marked - marks.kill) / 1000 + LEASE_MS / 1000, 2) : null;

    const served = res.seconds.map((s) => s.served);
    const baseline = served.slice(measuredFrom, killSecond);
    const post = served.slice(postFrom, Math.min(n, postFrom + postS));
    const pairs = Math.min(baseline.length, post.length);
    const ratio = pairs >= 2 ? ratioInterval(Array.from({ length: pairs }, (_, i) => post[i]! / baseline[i]!)) : undefined;
    const half = Math.floor(baseline.length / 2);
    const aa = ratioInterval(Array.from({ length: half }, (_, i) => baseline[half + i]! / baseline[i]!));
    const bw = windowStats(res, measuredFrom, killSecond);
    const pw = windowStats(res, postFrom, postFrom + postS);
    const ew = windowStats(res, killSecond, eventEnd);
    const baseMean = meanInterval(baseline, 0.95, 1);
    const postMean = post.length >= 2 ? meanInterval(post, 0.95, 1) : undefined;

    const refill = {
      keys: progress?.keys ?? null,
      bytes: progress?.bytes ?? null,
      bytesMovedMetric: metrics.filter((m) => m.key === 'bytesMoved').reduce((a, m) => a + m.value, 0),
      victimKeys: victimKeys.length,
      victimBytes: victimKeys.length * VALUE_BYTES,
      readThroughPromotions: promotions,
      warmCoverageAfter: {
        sampled: coverageSample.length,
        inWarm,
        percent: round((100 * inWarm) / Math.max(1, coverageSample.length), 2),
      },
      fillSeconds:
        marks.takeover !== undefined && marks.workflowEnd !== undefined
          ? round((marks.workflowEnd - marks.takeover) / 1000, 2)
          : null,
      recoveryMsRecorded: (progress?.facts as { recoveryMs?: number } | undefined)?.recoveryMs ?? null,
    };

    // ---------------------------------------------------------------- output
    console.log('\nper second around the kill (t = seconds from the kill to the start of the second)');
    const row = (s: number) => {
      const x = res.seconds[s]!;
      return {
        't (s)': round(s - killAt, 2),
        offered: x.offered,
        served: x.served,
        late: x.late,
        dropped: x.dropped,
        'read err': re[s]!,
        'write err': we[s]!,
        stale: rec.staleBySecond[s] ?? 0,
        'p99 ms': Number.isFinite(x.p99Ms) ? round(x.p99Ms, 1) : '',
        '': [
          s === killSecond ? 'kill' : '',
          s === Math.floor(sec(marks.marked) ?? -1) ? 'marked DOWN' : '',
          s === fencedSecond ? 'fenced (no write error)' : '',
          s === Math.floor(sec(marks.takeover) ?? -1) ? 'take-over' : '',
        ]
          .filter(Boolean)
          .join(', '),
      };
    };
    const from = Math.max(measuredFrom, killSecond - 3);
    const to = Math.min(n, Math.max(fencedSecond + 3, Math.ceil(sec(marks.takeover) ?? 0) + 2, killSecond + 8));
    console.log(table(Array.from({ length: Math.max(0, to - from) }, (_, i) => row(from + i))));

    console.log('\n5 s windows (t = seconds from the kill)');
    const windows: Record<string, string | number>[] = [];
    for (let s = measuredFrom; s + 5 <= n; s += 5) {
      const w = windowStats(res, s, s + 5);
      windows.push({
        't (s)': round(s - killAt, 1),
        'served/s': round(w.served / 5, 0),
        'served %': round((100 * w.served) / Math.max(1, w.offered), 2),
        'read err': sum(re, s, s + 5),
        'write err': sum(we, s, s + 5),
        'p99 ms': round(w.p99Ms, 1),
        window: s < killSecond ? 'baseline' : s >= postFrom ? 'post' : 'event',
      });
    }
    console.log(table(windows));

    const cell = (x: RatioInterval | undefined) => (x ? `${x.ratio} (${x.low}–${x.high})` : 'n/a');
    console.log('\nevents, seconds after the kill');
    console.log(
      table([
        { event: 'marked DOWN (detection)', s: rel(marks.marked) ?? 'never' },
        { event: 'DOWN seen in the ring store (100 ms polls)', s: rel(marks.downSeen) ?? 'never' },
        { event: 'lease out (mark + lease)', s: leaseOutS ?? '' },
        { event: 'fenced: first second with no write error', s: fencedAfterS },
        { event: `take-over (${newNode ?? '?'} owns ${VICTIM}'s ranges)`, s: rel(marks.takeover) ?? 'never' },
        { event: 'four NORMAL nodes', s: rel(marks.fourNormal) ?? 'never' },
        { event: `workflow ended (${finished?.status ?? 'not'})`, s: rel(marks.workflowEnd) ?? 'never' },
        { event: 'recovered (four NORMAL and the fill done)', s: recoveryS ?? 'never' },
      ]),
    );
    for (const l of detectorLog) console.log(`  detector: ${l}`);

    const verdict = {
      detection: `detection ≤ ${DETECTION_TARGET_S} s: ${detectionS !== null && detectionS <= DETECTION_TARGET_S ? 'met' : 'not met'} (${detectionS ?? 'never'} s)`,
      writeErrors:
        `write errors only between the kill and the fence: ${writeErrorsOutside === 0 ? 'met' : 'not met'} ` +
        `(${writeErrorsDuring} in the ${fencedAfterS} s from the kill to the fence, ${writeErrorsOutside} outside it)`,
      recovery:
        `recovery (four NORMAL nodes and the fill done) ≤ ${RECOVERY_TARGET_S} s: ` +
        `${recoveryS !== null && recoveryS <= RECOVERY_TARGET_S ? 'met' : 'not met'} (${recoveryS ?? 'never'} s)`,
      fourNormal:
        `four NORMAL nodes ≤ ${RECOVERY_TARGET_S} s (the replacement serves its ranges, filling by read-through): ` +
        `${fourNormalS !== null && fourNormalS <= RECOVERY_TARGET_S ? 'met' : 'not met'} (${fourNormalS ?? 'never'} s)`,
      throughput:
        `throughput back to before: ${ratio && ratio.high >= 1 && ratio.low >= THROUGHPUT_LOW_BOUND ? 'met' : 'not met'} ` +
        `(post / baseline served per second ${cell(ratio)}, 95% interval; A/A of the baseline's halves ${cell(aa)})`,
      staleReads: `no stale read: ${rec.stale === 0 ? 'met' : 'not met'} (${rec.stale})`,
    };
    const met = {
      detection: detectionS !== null && detectionS <= DETECTION_TARGET_S,
      writeErrorsOnlyUntilFenced: writeErrorsOutside === 0,
      recovery: recoveryS !== null && recoveryS <= RECOVERY_TARGET_S,
      fourNormal: fourNormalS !== null && fourNormalS <= RECOVERY_TARGET_S,
      throughputBack: !!ratio && ratio.high >= 1 && ratio.low >= THROUGHPUT_LOW_BOUND,
      noStaleRead: rec.stale === 0,
    };
    const wallS = round((endedAt - startedAt) / 1000, 1);
    const jobsAtEnd = otherJobs();
    console.log(
      `\nrefilled from cold by the workflow: ${refill.keys ?? '?'} keys, ${refill.bytes ?? '?'} bytes ` +
        `(${refill.victimKeys} keys of ${VICTIM}'s ranges; metric bytesMoved ${refill.bytesMovedMetric}); fill ${refill.fillSeconds ?? '?'} s ` +
        `after the take-over at ${round(fillRate / MIB, 2)} MiB/s; ${refill.readThroughPromotions} promotions into warm ` +
        `(read-through, over the run); warm holds ${refill.warmCoverageAfter.percent}% of a sample of ` +
        `${refill.warmCoverageAfter.sampled} of ${VICTIM}'s keys after it`,
    );
    console.log(
      `read errors: ${readErrors.baseline} in the baseline, ${readErrors.killToFence} from the kill to the fence, ` +
        `${readErrors.fenceToRecovery} from the fence to the recovery, ${readErrors.post} after it; ` +
        `stale reads ${rec.stale} (${staleInCalibration} in the calibration); acknowledged writes read back: ` +
        `${lost} of ${readBack.length} older than acknowledged, ${readBackErrors} errors`,
    );
    console.log(
      `served per second: baseline ${baseMean.mean} (95% ${baseMean.low}–${baseMean.high}, sd ${baseMean.sd}, ` +
        `${round(100 * (1 - bw.shortfall), 2)}% of offered, p99 ${round(bw.p99Ms, 1)} ms), post ` +
        `${postMean ? `${postMean.mean} (95% ${postMean.low}–${postMean.high}, sd ${postMean.sd}` : 'n/a ('}` +
        `, ${round(100 * (1 - pw.shortfall), 2)}% of offered, p99 ${round(pw.p99Ms, 1)} ms); during the event ` +
        `${round(100 * (1 - ew.shortfall), 2)}% of offered, p99 ${round(ew.p99Ms, 1)} ms`,
    );
    if (rec.messages.size > 0) {
      console.log('errors by message:');
      for (const [m, count] of [...rec.messages.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8))
        console.log(`  ${count} × ${m}`);
    }
    for (const v of Object.values(verdict)) console.log(v);
    console.log(
      `offered ${rate}/s; ${wallS} s in all; load average ${loadAtStart} at the start, ${loadText()} at the end; ` +
        (jobsAtStart.length + jobsAtEnd.length === 0
          ? 'no CI or jest run seen at the start or the end'
          : 'other jobs were running (see above)'),
    );
    if (backgroundErrors > 0) console.log(`${backgroundErrors} background errors (promotions into the dead node, mostly)`);

    const csv = [
      't_s,second,offered,served,late,dropped,errors,read_ops,write_ops,read_errors,write_errors,stale,p50_ms,p99_ms,issue_lag_max_ms',
    ];
    for (const x of res.seconds)
      csv.push(
        [
          round(x.second - killAt, 2),
          x.second,
          x.offered,
          x.served,
          x.late,
          x.dropped,
          x.errors,
          rec.reads[x.second] ?? 0,
          rec.writes[x.second] ?? 0,
          re[x.second]!,
          we[x.second]!,
          rec.staleBySecond[x.second] ?? 0,
          ...[x.p50Ms, x.p99Ms, x.issueLagMaxMs].map((v) => (Number.isFinite(v) ? round(v, 2) : '')),
        ].join(','),
      );
    const csvFile = partial
      ? join(tmpdir(), 'strata-bench-node-failure.csv')
      : join(ROOT, 'bench', 'results', 'node-failure.csv');
    writeFileSync(csvFile, csv.join('\n') + '\n');
    console.log(`\nCSV (per second; t_s = 0 at the kill): ${csvFile}`);
    if (partial) console.log(`--keys-per-node below ${DEFAULT_KEYS_PER_NODE}: a quick check, results not written`);

    return {
      scenario: 'node-failure',
      ...(partial ? { partial: true } : {}),
      config: {
        nodes: `${NODES.length} local cachenode processes (uncapped), ${RANGES_PER_NODE} ranges each; ${VICTIM} killed with SIGKILL`,
        keysPerNode,
        keys,
        valueBytes: VALUE_BYTES,
        tiers: 'Coordinator over [WarmTier, LocalFolderTier cold (no fsync)], writeTiers warm + cold; no hot tier',
        ring: { leaseMs: LEASE_MS, nodePollMs: POLL_MS, coordinatorRefreshMs: POLL_MS },
        detector: {
          tickMs: CHECK_TICK_MS,
          probe: `httpProbe, ${PROBE_TIMEOUT_MS} ms`,
          suspectAfterFailures: SUSPECT_AFTER,
          confirmMs: CONFIRM_MS,
          confirmProbes: CONFIRM_PROBES,
          fedBy: 'NodeClient.observe of the warm tier',
        },
        workflow: {
          name: 'replace-node, started by the detector (onMarked) through localWorkflows in this process',
          fillNamespaces: [NS],
          rateBytesPerSec: fillRate,
          fillMaxMs: FILL_MAX_MS,
        },
        load: `open loop, Poisson arrivals, seed ${seed}; ${READ_SHARE * 100}% reads, ${100 - READ_SHARE * 100}% writes, uniform keys`,
        offeredRate: rate,
        rateFrom,
        capacity: { opsPerSec: capacity.opsPerSec, p99Ms: round(capacity.p99Ms, 3), concurrency: CAL_CONCURRENCY },
        graceMs: GRACE_MS,
        maxInFlight: MAX_IN_FLIGHT,
        windows: { warmupS, baselineS, postS, postFrom: round(postFrom - killAt, 2) },
        loadSeconds,
        wallSeconds: wallS,
        host: {
          cores: 2,
          loadAverageStart: loadAtStart,
          loadAverageEnd: loadText(),
          otherJobsAtStart: jobsAtStart,
          otherJobsAtEnd: jobsAtEnd,
        },
      },
      definitions: {
        detection: 'the DOWN mark (the checker onMarked), from the kill',
        fenced: 'the start of the first second, after the kill, with no write error (seconds of the open loop)',
        recovered: 'four NORMAL nodes in the ring and the replace-node execution ended SUCCEEDED (the fill done)',
        throughputRatio:
          'served per second, post window against the baseline, paired second by second: geometric mean and 95% t interval on the logs',
        aa: "the baseline's second half against its first, the same way: the interval's width with no event",
        staleRead: 'a read returning a version older than the one acknowledged for its key before it started',
        served: `succeeded by the end of its second + ${GRACE_MS} ms (latency from the scheduled start)`,
      },
      events: {
        killSecond,
        markedS: rel(marks.marked),
        downSeenS: rel(marks.downSeen),
        leaseOutS,
        fencedS: fencedAfterS,
        takeoverS: rel(marks.takeover),
        fourNormalS: rel(marks.fourNormal),
        workflowEndS: rel(marks.workflowEnd),
        recoveredS: recoveryS,
        newNode: newNode ?? null,
        execution: execution ?? null,
        workflowStatus: finished?.status ?? null,
        workflowStates: finished?.states ?? null,
        workflowError: finished?.error ?? workflowStartError ?? null,
        timedOut,
        detectorLog,
      },
      refill,
      errors: {
        writeErrorsKillToFence: writeErrorsDuring,
        writeErrorsOutside,
        readErrors,
        staleReads: rec.stale,
        staleExamples: rec.staleExamples,
        staleInCalibration,
        readBack: { sampled: readBack.length, olderThanAcknowledged: lost, errors: readBackErrors },
        byMessage: Object.fromEntries([...rec.messages.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20)),
        backgroundErrors,
      },
      throughput: {
        baseline: { servedPerSecond: baseMean, servedShare: round(1 - bw.shortfall, 4), p99Ms: round(bw.p99Ms, 3) },
        event: { servedShare: round(1 - ew.shortfall, 4), p99Ms: round(ew.p99Ms, 3), late: ew.late, dropped: ew.dropped },
        post: { servedPerSecond: postMean ?? null, servedShare: round(1 - pw.shortfall, 4), p99Ms: round(pw.p99Ms, 3) },
        ratio: ratio ?? null,
        aa,
      },
      series: res.seconds.map((x) => [
        round(x.second - killAt, 2),
        x.offered,
        x.served,
        re[x.second]!,
        we[x.second]!,
        Number.isFinite(x.p99Ms) ? round(x.p99Ms, 2) : null,
      ]),
      seriesColumns: ['t_s', 'offered', 'served', 'read_errors', 'write_errors', 'p99_ms'],
      targets: {
        detectionS: `<= ${DETECTION_TARGET_S}`,
        writeErrorsOutsideKillToFence: '0',
        recoveryS: `<= ${RECOVERY_TARGET_S}, four NORMAL nodes and the fill done (paper 003: about 180)`,
        fourNormalS: `<= ${RECOVERY_TARGET_S}`,
        throughputRatio: `95% interval reaches 1 and its low end >= ${THROUGHPUT_LOW_BOUND}`,
        staleReads: '0',
      },
      verdict,
      met,
    };
  } finally {
    if (loop) await loop.stop(0).catch(() => undefined);
    unobserve?.();
    await checker?.stop();
    await workflows?.close().catch(() => undefined);
    await coordinator?.close().catch(() => undefined);
    await client.close();
    await fleet.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
