/**
 * hot-fault: what the hot fence (coordinator/hot-fence.ts) costs, against the same coordinator without it
 * (`hotFence: false`, mode `refuse`: a write whose hot copy fails is refused with 503 instead of fenced). Both are
 * safe; the code before the hot fence acknowledged such writes and left the older hot copy readable.
 *
 * 1. Steady state: GET (hot hits) and PUT of 1 KB values at concurrency 64 over redis-server + an in-process
 *    durable tier (so that the coordinator's own work shows, not a disk's), interleaved rounds, medians: the
 *    per-read epoch check and the epoch in every hot header.
 * 2. A Redis paused with SIGSTOP for `--pause-seconds` (default 5) under a mixed load (24 reading and 8 writing
 *    workers) with production timers (stall watchdog 1000 ms, lease 2000 ms): reads and writes before, during and
 *    after the pause, errors, and how long after SIGCONT reads are served from hot again.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { MemoryTier } from '../core/tiers/memory-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { freePort } from '../test/helpers/services.js';
import { closedLoop, round, table, type LoadResult } from './lib/measure.js';

const KEYS = 5000;
const VALUE = Buffer.alloc(1024, 0x5a);
const ROUNDS = 3;

type Mode = 'fence' | 'refuse';

export async function hotFault(opts: { seconds: number }): Promise<Record<string, unknown>> {
  const pauseArg = process.argv.indexOf('--pause-seconds');
  const pauseSeconds = pauseArg >= 0 ? Number(process.argv[pauseArg + 1]) : 5;
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  await new Promise((r) => setTimeout(r, 300));
  const url = `redis://127.0.0.1:${port}`;
  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-hot-fault-'));
  const made: Coordinator[] = [];
  const make = async (mode: Mode, prefix: string, durable: 'memory' | 'folder') => {
    const below =
      durable === 'memory'
        ? new MemoryTier({ name: 'cold', maxBytes: 1 << 30 })
        : new LocalFolderTier({ dir: join(dir, prefix), fsync: false });
    const c = new Coordinator({
      tiers: [RedisTier.fromUrl(url, { keyPrefix: prefix }), below],
      policies: new PolicyRegistry({ defaults: { nearCache: { enabled: false } } }),
      flushTimer: false,
      onBackgroundError: () => {},
      hotFence: mode === 'fence' ? {} : false,
    });
    made.push(c);
    await c.ready();
    for (let i = 0; i < KEYS; i += 250)
      await Promise.all(Array.from({ length: 250 }, (_, j) => c.put('bench', `k${i + j}`, VALUE)));
    return c;
  };
  try {
    const sides = { fence: await make('fence', 'f', 'memory'), refuse: await make('refuse', 'n', 'memory') };
    const key = (i: number) => `k${(i * 7919) % KEYS}`;
    const load = { concurrency: 64, seconds: opts.seconds, warmupSeconds: Math.min(2, opts.seconds / 2) };
    const rounds: Record<string, LoadResult[]> = {};
    for (let r = 0; r < ROUNDS; r++) {
      for (const op of ['get', 'put'] as const) {
        const order: Mode[] = r % 2 === 0 ? ['refuse', 'fence'] : ['fence', 'refuse'];
        for (const mode of order) {
          const c = sides[mode];
          const res = await closedLoop(op === 'get' ? (i) => c.get('bench', key(i)) : (i) => c.put('bench', key(i), VALUE), load);
          (rounds[`${mode} ${op}`] ??= []).push(res);
          console.log(
            `  round ${r + 1}/${ROUNDS} ${`${mode} ${op}`.padEnd(14)} ${String(res.opsPerSec).padStart(7)} ops/s  p99 ${res.p99Ms.toFixed(2)} ms`,
          );
        }
      }
    }
    const med = Object.fromEntries(Object.entries(rounds).map(([k, rs]) => [k, median(rs)]));
    const spread = Object.fromEntries(
      Object.entries(rounds).map(([k, rs]) => [
        k,
        round((Math.max(...rs.map((x) => x.opsPerSec)) - Math.min(...rs.map((x) => x.opsPerSec))) / median(rs).opsPerSec),
      ]),
    );
    const steady = {
      get: {
        throughput: round(med['fence get']!.opsPerSec / med['refuse get']!.opsPerSec),
        p99: round(med['fence get']!.p99Ms / med['refuse get']!.p99Ms),
      },
      put: {
        throughput: round(med['fence put']!.opsPerSec / med['refuse put']!.opsPerSec),
        p99: round(med['fence put']!.p99Ms / med['refuse put']!.p99Ms),
      },
    };
    console.log(
      '\n' +
        table(
          Object.entries(med).map(([k, r]) => ({
            path: k,
            'ops/s': r.opsPerSec,
            'p50 ms': round(r.p50Ms, 2),
            'p99 ms': round(r.p99Ms, 2),
            'spread (max-min)/median': spread[k]!,
          })),
        ),
    );
    console.log(
      `\nsteady state, fence vs no fence: GET throughput ${steady.get.throughput}, p99 ${steady.get.p99}; PUT throughput ${steady.put.throughput}, p99 ${steady.put.p99}`,
    );

    const pause: Record<Mode, unknown> = { fence: undefined, refuse: undefined };
    for (const mode of ['fence', 'refuse'] as const) {
      // A real durable tier below (a local folder), as a deployment has.
      pause[mode] = await pausedRedis(await make(mode, `${mode}-pause`, 'folder'), redis.pid!, pauseSeconds, key);
      console.log(`\npause (${mode}):`);
      console.log(table((pause[mode] as { phases: Record<string, string | number>[] }).phases));
      console.log(`  reads served from hot again ${(pause[mode] as { hotAgainMs: number }).hotAgainMs} ms after SIGCONT`);
    }
    return {
      scenario: 'hot-fault',
      config: {
        keys: KEYS,
        valueBytes: VALUE.length,
        concurrency: 64,
        seconds: opts.seconds,
        rounds: ROUNDS,
        statistic: 'median of interleaved rounds',
        pauseSeconds,
        durable: { steady: 'in-process memory tier', pause: 'local folder (fsync off)' },
        timers: { stallMs: 1000, leaseMs: 2000 },
      },
      rounds,
      baseline: {
        name: 'coordinator without the hot fence (a write whose hot copy fails is refused with 503)',
        get: med['refuse get'],
        put: med['refuse put'],
      },
      candidate: {
        name: 'coordinator with the hot fence (epoch per shard, 2000 ms lease)',
        get: med['fence get'],
        put: med['fence put'],
      },
      ratios: steady,
      spread,
      pause,
    };
  } finally {
    await Promise.allSettled(made.map((c) => c.close()));
    redis.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Mixed load with Redis paused in the middle: per phase, reads and writes (latency, errors), and hot's return. */
async function pausedRedis(
  c: Coordinator,
  pid: number,
  pauseSeconds: number,
  key: (i: number) => string,
): Promise<Record<string, unknown>> {
  type Sample = { t: number; op: 'get' | 'put'; ms: number; ok: boolean; tier?: string };
  const samples: Sample[] = [];
  const t0 = performance.now();
  const total = (pauseSeconds + 6) * 1000;
  let counter = 0;
  // Readers and writers are separate workers, so a slow write does not hold back the reads behind it.
  const worker = (op: 'get' | 'put') => async () => {
    while (performance.now() - t0 < total) {
      const i = counter++;
      const s = performance.now();
      try {
        const r = op === 'get' ? await c.get('bench', key(i)) : await c.put('bench', key(i), VALUE);
        samples.push({
          t: s - t0,
          op,
          ms: performance.now() - s,
          ok: true,
          tier: op === 'get' ? (r as { tier?: string } | undefined)?.tier : undefined,
        });
      } catch {
        samples.push({ t: s - t0, op, ms: performance.now() - s, ok: false });
      }
    }
  };
  const stopAt = 3000;
  const contAt = stopAt + pauseSeconds * 1000;
  const pauser = (async () => {
    await new Promise((r) => setTimeout(r, stopAt));
    process.kill(pid, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, pauseSeconds * 1000));
    process.kill(pid, 'SIGCONT');
  })();
  await Promise.all([...Array.from({ length: 24 }, worker('get')), ...Array.from({ length: 8 }, worker('put')), pauser]);
  const phase = (name: string, from: number, to: number) => {
    const reads = samples.filter((x) => x.op === 'get' && x.t >= from && x.t < to);
    const writes = samples.filter((x) => x.op === 'put' && x.t >= from && x.t < to);
    const pct = (xs: Sample[], p: number) =>
      xs.length
        ? round([...xs].sort((a, b) => a.ms - b.ms)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!.ms, 1)
        : 0;
    const secs = (to - from) / 1000;
    return {
      phase: name,
      'reads/s': Math.round(reads.filter((x) => x.ok).length / secs),
      'read p50 ms': pct(reads, 50),
      'read p99 ms': pct(reads, 99),
      'writes/s': Math.round(writes.filter((x) => x.ok).length / secs),
      'write p50 ms': pct(writes, 50),
      'write p99 ms': pct(writes, 99),
      errors: [...reads, ...writes].filter((x) => !x.ok).length,
    };
  };
  const firstHot = samples.filter((x) => x.t >= contAt && x.tier === 'hot').sort((a, b) => a.t - b.t)[0];
  return {
    phases: [phase('before', 0, stopAt), phase('paused', stopAt, contAt), phase('after', contAt, total)],
    hotAgainMs: firstHot ? Math.round(firstHot.t + firstHot.ms - contAt) : null,
  };
}

function median(rs: LoadResult[]): LoadResult {
  const mid = <K extends keyof LoadResult>(k: K) => [...rs].map((r) => r[k]).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
  return {
    ops: mid('ops'),
    seconds: mid('seconds'),
    opsPerSec: mid('opsPerSec'),
    p50Ms: mid('p50Ms'),
    p99Ms: mid('p99Ms'),
    p999Ms: mid('p999Ms'),
    errors: rs.reduce((a, r) => a + r.errors, 0),
  };
}
