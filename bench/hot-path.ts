/**
 * hot-path: the coordinator's GET and PUT of 1 KB values at concurrency 64 over a Redis hot tier, against raw
 * ioredis GET/SET on the same redis-server in the same run. Also the near-cache (L1) hit path.
 * Targets: throughput ratio >= 0.85, p99 ratio <= 1.3.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../test/helpers/services.js';
import { CONCURRENCY, KEYS } from './hot-path-side.js';
import { round, table, type LoadResult } from './lib/measure.js';

const VALUE_BYTES = 1024;
const ROUNDS = 3;

export async function hotPath(opts: { seconds: number }): Promise<Record<string, unknown>> {
  const redis = await startRedis();
  // Each side runs in a process of its own (bench/hot-path-side.ts): the same redis-server, the same load, one
  // side active at a time; neither side's garbage collection lands in the other's latency tail.
  const raw = await Side.start('raw', redis.url);
  const coordinator = await Side.start('coordinator', redis.url);
  try {
    process.stdout.write(`loading ${KEYS} keys of 1 KB on each side ... `);
    await Promise.all([raw.ask({ op: 'load' }), coordinator.ask({ op: 'load' })]);
    console.log('done');
    const load = { seconds: opts.seconds, warmupSeconds: Math.min(2, opts.seconds / 2) };
    // Single-run tails on a 2-core machine mostly show where GC pauses happened to land, so each side is measured
    // in ROUNDS interleaved rounds, alternating which side goes first, and the medians are compared.
    const rounds: Record<'baselineGet' | 'candidateGet' | 'baselinePut' | 'candidatePut', LoadResult[]> = {
      baselineGet: [],
      candidateGet: [],
      baselinePut: [],
      candidatePut: [],
    };
    for (let r = 0; r < ROUNDS; r++) {
      for (const op of ['Get', 'Put'] as const) {
        const order = r % 2 === 0 ? (['baseline', 'candidate'] as const) : (['candidate', 'baseline'] as const);
        for (const side of order) {
          const name = `${side}${op}` as const;
          const res = (await (side === 'baseline' ? raw : coordinator).ask({
            op: op === 'Get' ? 'get' : 'put',
            ...load,
          })) as LoadResult;
          rounds[name].push(res);
          process.stdout.write(
            `  round ${r + 1}/${ROUNDS} ${name.padEnd(12)} ${String(res.opsPerSec).padStart(7)} ops/s  p99 ${res.p99Ms.toFixed(2)} ms\n`,
          );
        }
      }
    }
    const runs = {
      baselineGet: median(rounds.baselineGet),
      candidateGet: median(rounds.candidateGet),
      baselinePut: median(rounds.baselinePut),
      candidatePut: median(rounds.candidatePut),
      l1Get: (await coordinator.ask({ op: 'l1Get', ...load })) as LoadResult,
    };
    const baselineGet = runs.baselineGet;
    const ratios = {
      get: {
        throughput: round(runs.candidateGet.opsPerSec / baselineGet.opsPerSec),
        p99: round(runs.candidateGet.p99Ms / baselineGet.p99Ms),
      },
      put: {
        throughput: round(runs.candidatePut.opsPerSec / runs.baselinePut.opsPerSec),
        p99: round(runs.candidatePut.p99Ms / runs.baselinePut.p99Ms),
      },
      l1GetVsRedisGet: round(runs.l1Get.opsPerSec / baselineGet.opsPerSec),
    };
    const summary = {
      throughput: Math.min(ratios.get.throughput, ratios.put.throughput),
      p99: Math.max(ratios.get.p99, ratios.put.p99),
    };
    console.log(
      '\n' +
        table([
          row('raw ioredis GET', baselineGet),
          row('coordinator GET', runs.candidateGet),
          row('raw ioredis SET', runs.baselinePut),
          row('coordinator PUT', runs.candidatePut),
          row('coordinator GET (L1 hit)', runs.l1Get),
        ]),
    );
    console.log(
      `\nratios vs raw ioredis: GET throughput ${ratios.get.throughput} (target >= 0.85), p99 ${ratios.get.p99} (target <= 1.3)`,
    );
    console.log(
      `                      PUT throughput ${ratios.put.throughput} (target >= 0.85), p99 ${ratios.put.p99} (target <= 1.3)`,
    );
    console.log(`                      L1 hit path: ${runs.l1Get.opsPerSec} ops/s = ${ratios.l1GetVsRedisGet}x raw Redis GET`);
    return {
      scenario: 'hot-path',
      config: {
        keys: KEYS,
        valueBytes: VALUE_BYTES,
        concurrency: CONCURRENCY,
        seconds: opts.seconds,
        rounds: ROUNDS,
        statistic: 'median of interleaved rounds',
        redis: 'redis-server on loopback, same host',
        processes: 'each side in its own client process, one active at a time',
      },
      rounds,
      baseline: { name: 'raw ioredis (GET/SET, auto-pipelining)', get: baselineGet, put: runs.baselinePut },
      candidate: {
        name: 'Coordinator over RedisTier (versioned Lua CAS write, header with content hash, per-key write order)',
        get: runs.candidateGet,
        put: runs.candidatePut,
        l1Get: runs.l1Get,
      },
      ratios: { ...summary, get: ratios.get, put: ratios.put, l1GetVsRedisGet: ratios.l1GetVsRedisGet },
      targets: { throughput: '>= 0.85', p99: '<= 1.3' },
      met: { throughput: summary.throughput >= 0.85, p99: summary.p99 <= 1.3 },
    };
  } finally {
    await Promise.allSettled([raw.close(), coordinator.close()]);
    await redis.stop();
  }
}

/** A side's process, asked one thing at a time. */
class Side {
  private constructor(private readonly child: ChildProcess) {}

  static async start(side: 'raw' | 'coordinator', url: string): Promise<Side> {
    const child = fork(fileURLToPath(new URL('./hot-path-side.ts', import.meta.url)), [side, url], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const s = new Side(child);
    await s.next();
    return s;
  }

  private next(): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`hot-path side exited (${code})`));
      this.child.once('exit', onExit);
      this.child.once('message', (m) => {
        this.child.off('exit', onExit);
        resolve(m);
      });
    });
  }

  ask(msg: Record<string, unknown>): Promise<unknown> {
    const reply = this.next();
    this.child.send(msg);
    return reply;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.send({ op: 'close' });
    await exited;
  }
}

/** Per-figure median over rounds (ops/s and each percentile separately). */
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

function row(name: string, r: LoadResult): Record<string, string | number> {
  return {
    path: name,
    'ops/s': r.opsPerSec,
    'p50 ms': round(r.p50Ms, 2),
    'p99 ms': round(r.p99Ms, 2),
    'p99.9 ms': round(r.p999Ms, 2),
    errors: r.errors,
  };
}
