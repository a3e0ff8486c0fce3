/**
 * write-back-interval: paper 003's Fig. 15 (§4.2.2: the write latency of the LowLatency instance as the timer
 * interval that copies dirty data from Memcached to the persistent store grows; zero is write-through), and the
 * durability the interval costs. A Coordinator over [hot: redis-server (RedisTier), warm: one cache-node process
 * (WarmTier), cold: the local folder tier (fsync on)] with namespaces compiled from
 * `{ wt: { preset: 'write-through' }, wb: { preset: 'low-latency', with: { flushSeconds: X } } }` and the flush timer
 * on (`flushTimer: true`), one coordinator per setting (the flusher runs at the registry's shortest interval), each
 * with tiers of its own (its own Redis key prefix, hence its own dirty set, and its own folder):
 *
 *  - write-through: puts into `wt` (acknowledged once warm and cold hold the value, then hot);
 *  - write-back at X = `--intervals` (default 0.1,0.5,1,5 s): puts into `wb` (acknowledged once hot holds it, dirty;
 *    the flusher writes dirty entries down to warm and cold every X).
 *
 * Load: closed-loop puts of 4 KiB values at `--concurrency` (16) over `--keys` (2,000) keys, `--seconds` x 0.3 per
 * measurement (3 s by default: the scenario then takes about two and a half minutes), `--runs` (3) rounds, the settings in a rotated order each round, medians compared; ratios to
 * write-through are taken within a round. After every write-back measurement the coordinator's dirty entries are
 * drained (flushDirty until nothing is left), timed, so that no flusher works during another setting's measurement.
 *
 * The durability window, once per setting after the rounds: how long after its acknowledgement a probe key's version
 * is found in cold (`cold.head` polled every 2 ms for the first 250 ms, then every 20 ms):
 *  - idle: six probes staggered over one interval (so they meet the timer at every phase), nothing else running;
 *  - under load: the same put load as the measurements, with five probes written 1.0-3.0 s into it, 500 ms apart;
 *    the load runs on until every probe is in cold or max(8 s, 3 X + 3 s) have passed (probes still missing then
 *    are reported as not reached). Under load a probe waits behind the dirty backlog: a flush pass takes at most
 *    1,000 entries, oldest first.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { LocalFleet } from '../core/nodes/local-fleet.js';
import { NodeClient } from '../core/nodes/node-client.js';
import { compilePolicyInput } from '../core/policy/compile.js';
import { initialRing } from '../core/ring/document.js';
import { RingView } from '../core/ring/view.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { WarmTier } from '../core/tiers/warm-tier.js';
import { startRedis } from '../test/helpers/services.js';
import { closedLoop, round, table, type LoadResult } from './lib/measure.js';
import { flag, median, summary, spread } from './lib/rounds.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SECRET = 'bench-secret-0123456789';
const VALUE = randomBytes(4 * KiB);
const IDLE_PROBES = 6;
/** Under load: probes written this many ms into the load. */
const LOAD_PROBES_AT_MS = [1000, 1500, 2000, 2500, 3000];

interface Setting {
  label: string;
  /** Null: write-through. */
  flushSeconds: number | null;
  ns: 'wt' | 'wb';
  coordinator: Coordinator;
  cold: LocalFolderTier;
}

interface SettingRound {
  puts: LoadResult;
  /** Puts acknowledged as not yet durable (write-back). */
  notDurable: number;
  /** Entries the flusher wrote down during the measurement. */
  flushedDuringLoad: number;
  /** Dirty entries left at the end, and how long flushing them took at full speed. */
  backlog: number;
  drainMs: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Writes `key` and resolves how many ms after the acknowledgement cold held that version (polled), or null when it
 * had not by `giveUpAt` (performance.now() time).
 */
async function probe(s: Setting, key: string, giveUpAt: number): Promise<number | null> {
  const w = await s.coordinator.put(s.ns, key, VALUE);
  const acked = performance.now();
  for (;;) {
    const h = await s.cold.head(s.ns, key);
    if (h && h.version >= w.version) return Math.round(performance.now() - acked);
    if (performance.now() > giveUpAt) return null;
    await sleep(performance.now() - acked < 250 ? 2 : 20);
  }
}

export async function writeBackInterval(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const seconds = Math.max(1, opts.seconds * 0.3);
  const rounds = opts.runs ?? 3;
  const concurrency = flag('concurrency', 16);
  const keys = flag('keys', 2000);
  const iArg = process.argv.indexOf('--intervals');
  const intervals = iArg >= 0 ? process.argv[iArg + 1]!.split(',').map(Number) : [0.1, 0.5, 1, 5];
  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-wb-'));
  const redis = await startRedis();
  const fleet = new LocalFleet({ rootDir: join(dir, 'fleet'), secret: SECRET, capacityBytes: 4 * 1024 * MiB });
  const admin = new NodeClient({ secret: SECRET });
  const settings: Setting[] = [];
  try {
    const node = await fleet.launch('wb-node');
    const ring = initialRing([{ id: node.nodeId, url: node.url }], 1);
    await admin.pushRing(node.url, ring);
    const make = async (label: string, flushSeconds: number | null): Promise<Setting> => {
      const policy = compilePolicyInput({
        namespaces: { wt: { preset: 'write-through' }, wb: { preset: 'low-latency', with: { flushSeconds: flushSeconds ?? 1 } } },
      });
      const cold = new LocalFolderTier({ dir: join(dir, `cold-${label}`) });
      const coordinator = new Coordinator({
        tiers: [
          RedisTier.fromUrl(redis.url, { keyPrefix: `wbi-${label}` }),
          new WarmTier({ ring: new RingView({ initial: ring }), secret: SECRET, connectionsPerNode: 16, timeoutMs: 10_000 }),
          cold,
        ],
        policies: policy.registry,
        flushTimer: true,
      });
      await coordinator.ready();
      const s: Setting = { label, flushSeconds, ns: flushSeconds === null ? 'wt' : 'wb', coordinator, cold };
      settings.push(s);
      return s;
    };
    const all = [await make('write-through', null)];
    for (const x of intervals) all.push(await make(`write-back ${x} s`, x));

    /** Flushes until nothing dirty is left; resolves entries flushed and ms taken. */
    const drain = async (s: Setting): Promise<{ backlog: number; drainMs: number }> => {
      const t0 = performance.now();
      let backlog = 0;
      for (;;) {
        const n = await s.coordinator.flushDirty(1000);
        backlog += n;
        if (n === 0) break;
      }
      return { backlog, drainMs: Math.round(performance.now() - t0) };
    };
    let counter = 0;
    const putOp = (s: Setting) => (i: number) => s.coordinator.put(s.ns, `k${(i * 7919 + counter) % keys}`, VALUE);

    process.stdout.write(`loading ${keys} keys of 4 KiB in each setting ... `);
    for (const s of all) {
      for (let i = 0; i < keys; i += 250)
        await Promise.all(Array.from({ length: Math.min(250, keys - i) }, (_, j) => s.coordinator.put(s.ns, `k${i + j}`, VALUE)));
      await closedLoop(putOp(s), { concurrency, seconds: 1 }); // warm-up
      await drain(s);
    }
    console.log('done');

    const measure = async (s: Setting): Promise<SettingRound> => {
      counter += 7;
      let notDurable = 0;
      const put = putOp(s);
      const flushedBefore = (await s.coordinator.stats()).flushed;
      const puts = await closedLoop(
        async (i) => {
          const w = await put(i);
          if (!w.durable) notDurable++;
        },
        { concurrency, seconds },
      );
      const flushedDuringLoad = (await s.coordinator.stats()).flushed - flushedBefore;
      const { backlog, drainMs } = s.flushSeconds === null ? { backlog: 0, drainMs: 0 } : await drain(s);
      return { puts, notDurable, flushedDuringLoad, backlog, drainMs };
    };

    const runs = new Map<Setting, SettingRound[]>(all.map((s) => [s, []]));
    for (let r = 0; r < rounds; r++) {
      const order = all.map((_, i) => all[(i + r) % all.length]!);
      for (const s of order) {
        const m = await measure(s);
        runs.get(s)!.push(m);
        console.log(
          `  round ${r + 1}/${rounds} ${s.label.padEnd(18)} ${String(m.puts.opsPerSec).padStart(6)} puts/s  p50 ${m.puts.p50Ms.toFixed(2)} ms  p99 ${m.puts.p99Ms.toFixed(2)} ms` +
            (s.flushSeconds === null
              ? ''
              : `  | flushed ${m.flushedDuringLoad} during, ${m.backlog} left (drained in ${m.drainMs} ms)`),
        );
      }
    }

    // The durability window, idle and under load (see the header).
    const idle = new Map<Setting, (number | null)[]>();
    const loaded = new Map<Setting, { probes: (number | null)[]; loadSeconds: number }>();
    for (const s of all) {
      const x = (s.flushSeconds ?? 0) * 1000;
      const every = Math.max(x, 100) / IDLE_PROBES;
      const giveUp = performance.now() + 60_000;
      idle.set(
        s,
        await Promise.all(
          Array.from({ length: IDLE_PROBES }, async (_, n) => {
            await sleep(n * every);
            return probe(s, `idle-${n}`, giveUp);
          }),
        ),
      );
      if (s.flushSeconds === null) continue;
      const started = performance.now();
      const giveUpAt = started + Math.max(8000, 3 * x + 3000);
      let stop = false;
      const put = putOp(s);
      let i = 0;
      const load = Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (!stop) await put(i++).catch(() => {});
        }),
      );
      const probes = await Promise.all(
        LOAD_PROBES_AT_MS.map(async (at, n) => {
          await sleep(at);
          return probe(s, `loaded-${n}`, giveUpAt);
        }),
      );
      stop = true;
      await load;
      loaded.set(s, { probes, loadSeconds: round((performance.now() - started) / 1000, 1) });
      await drain(s);
      const ms = (p: (number | null)[]) => p.map((v) => (v === null ? 'not reached' : `${v}`)).join(', ');
      console.log(`  to cold, ${s.label}: idle ${ms(idle.get(s)!)} ms; under load ${ms(probes)} ms`);
    }

    const base = runs.get(all[0]!)!;
    const figures = all.map((s) => {
      const rs = runs.get(s)!;
      const vs = (f: (x: LoadResult) => number) => summary(rs.map((m, r) => f(m.puts) / f(base[r]!.puts)));
      const idleMs = idle.get(s)!.filter((v): v is number => v !== null);
      const under = loaded.get(s);
      const underMs = under?.probes.filter((v): v is number => v !== null) ?? [];
      return {
        setting: s.label,
        flushSeconds: s.flushSeconds,
        putsPerSecond: summary(
          rs.map((m) => m.puts.opsPerSec),
          0,
        ),
        p50Ms: summary(rs.map((m) => m.puts.p50Ms)),
        p99Ms: summary(rs.map((m) => m.puts.p99Ms)),
        errors: rs.reduce((a, m) => a + m.puts.errors, 0),
        vsWriteThrough: { p50: vs((x) => x.p50Ms), p99: vs((x) => x.p99Ms), throughput: vs((x) => x.opsPerSec) },
        notDurableShare: round(rs.reduce((a, m) => a + m.notDurable, 0) / rs.reduce((a, m) => a + m.puts.ops, 0)),
        flushedPerPut: round(
          rs.reduce((a, m) => a + m.flushedDuringLoad + m.backlog, 0) / rs.reduce((a, m) => a + m.puts.ops, 0),
        ),
        flushedPerSecondDuringLoad: summary(
          rs.map((m) => m.flushedDuringLoad / seconds),
          0,
        ),
        backlogAtEnd: summary(
          rs.map((m) => m.backlog),
          0,
        ),
        drainMs: summary(
          rs.map((m) => m.drainMs),
          0,
        ),
        /** Entries per second the flusher wrote down while draining (passes back to back): its capacity. */
        drainPerSecond: Math.round(
          (rs.reduce((a, m) => a + m.backlog, 0) /
            Math.max(
              1,
              rs.reduce((a, m) => a + m.drainMs, 0),
            )) *
            1000,
        ),
        durabilityIdleMs: { median: median(idleMs), max: Math.max(...idleMs), samples: idle.get(s)! },
        durabilityUnderLoadMs: under
          ? {
              median: underMs.length ? median(underMs) : null,
              max: underMs.length ? Math.max(...underMs) : null,
              notReached: under.probes.length - underMs.length,
              samples: under.probes,
              loadSeconds: under.loadSeconds,
            }
          : null,
        noise: {
          p50: spread(rs.map((m) => m.puts.p50Ms)),
          p99: spread(rs.map((m) => m.puts.p99Ms)),
          throughput: spread(rs.map((m) => m.puts.opsPerSec)),
        },
      };
    });

    const range = (x: { median: number; min: number; max: number }) => `${x.median}x (${x.min}-${x.max})`;
    console.log(
      '\n' +
        table(
          figures.map((f) => ({
            setting: f.setting,
            'puts/s': f.putsPerSecond.median,
            'p50 ms': f.p50Ms.median,
            'p99 ms': f.p99Ms.median,
            'p50 vs wt': f.flushSeconds === null ? '-' : range(f.vsWriteThrough.p50),
            'p99 vs wt': f.flushSeconds === null ? '-' : range(f.vsWriteThrough.p99),
            'puts/s vs wt': f.flushSeconds === null ? '-' : range(f.vsWriteThrough.throughput),
            'to cold, idle: median / max ms': `${f.durabilityIdleMs.median} / ${f.durabilityIdleMs.max}`,
            'to cold, under load: median / max ms': f.durabilityUnderLoadMs
              ? (f.durabilityUnderLoadMs.median === null
                  ? 'none reached'
                  : `${f.durabilityUnderLoadMs.median} / ${f.durabilityUnderLoadMs.max}`) +
                (f.durabilityUnderLoadMs.notReached
                  ? ` (${f.durabilityUnderLoadMs.notReached} of ${f.durabilityUnderLoadMs.samples.length} not within ${f.durabilityUnderLoadMs.loadSeconds} s)`
                  : '')
              : '-',
          })),
        ),
    );
    console.log(
      '\n' +
        table(
          figures
            .filter((f) => f.flushSeconds !== null)
            .map((f) => ({
              setting: f.setting,
              'cold writes per put': f.flushedPerPut,
              'flushed/s during load': f.flushedPerSecondDuringLoad.median,
              'dirty left at end': f.backlogAtEnd.median,
              'drain ms': f.drainMs.median,
              'flushed/s draining': f.drainPerSecond,
            })),
        ),
    );
    console.log(
      `\nnoise, (max - min)/median over ${rounds} rounds: ${figures.map((f) => `${f.setting}: p50 ${f.noise.p50}, p99 ${f.noise.p99}, puts/s ${f.noise.throughput}`).join('; ')}`,
    );
    return {
      scenario: 'write-back-interval',
      config: {
        keys,
        valueBytes: VALUE.length,
        concurrency,
        secondsPerMeasurement: seconds,
        rounds,
        intervals,
        idleProbes: IDLE_PROBES,
        loadProbesAtMs: LOAD_PROBES_AT_MS,
        tiers:
          'redis-server (RedisTier, hot fence on) / one cachenode process (WarmTier) / LocalFolderTier (fsync on); one coordinator (and tier instances) per setting',
        policy: "{ wt: { preset: 'write-through' }, wb: { preset: 'low-latency', with: { flushSeconds: X } } }, flushTimer: true",
        statistic: 'median (min-max) over rounds; ratios to write-through taken within a round',
        host: '2 shared cores; bench process, redis-server and the cache node run on them together',
      },
      rounds: Object.fromEntries([...runs].map(([s, rs]) => [s.label, rs])),
      figures,
    };
  } finally {
    for (const s of settings) await s.coordinator.close();
    await admin.close();
    await fleet.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
