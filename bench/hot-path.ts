/**
 * hot-path: the coordinator's GET and PUT of 1 KB values at concurrency 64 over a Redis hot tier, against raw
 * ioredis GET/SET on the same redis-server in the same run. Also the near-cache (L1) hit path.
 * Targets (issue 2): throughput ratio >= 0.85, p99 ratio <= 1.3.
 */
import { Redis } from 'ioredis';
import { Coordinator } from '../layers/core/coordinator/coordinator.js';
import { PolicyRegistry } from '../layers/core/coordinator/policy.js';
import { MemoryTier } from '../layers/core/tiers/memory-tier.js';
import { RedisTier } from '../layers/core/tiers/redis-tier.js';
import { startRedis } from '../test/helpers/services.js';
import { closedLoop, round, table, type LoadResult } from './lib/measure.js';

const KEYS = 10_000;
const VALUE = Buffer.alloc(1024, 0x5a);
const CONCURRENCY = 64;
const ROUNDS = 3;

export async function hotPath(opts: { seconds: number }): Promise<Record<string, unknown>> {
  const redis = await startRedis();
  const raw = new Redis(redis.url, { enableAutoPipelining: true });
  const hotOnly = new PolicyRegistry({ defaults: { writeTiers: ['hot'], nearCache: { enabled: false } } });
  const coordinator = new Coordinator({ tiers: [RedisTier.fromUrl(redis.url)], policies: hotOnly, flushTimer: false });
  const withL1 = new Coordinator({ tiers: [RedisTier.fromUrl(redis.url)], nearCache: new MemoryTier({ name: 'l1', maxBytes: 64 << 20 }), policies: new PolicyRegistry({ defaults: { writeTiers: ['hot'], nearCache: { ttlMs: 60_000 } } }), flushTimer: false });
  try {
    process.stdout.write(`loading ${KEYS} keys of 1 KB ... `);
    for (let i = 0; i < KEYS; i += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, j) => Promise.all([raw.set(`raw:${i + j}`, VALUE), coordinator.put('bench', `k${i + j}`, VALUE)])));
    }
    console.log('done');
    const key = (i: number) => (i * 7919) % KEYS;
    const load = { concurrency: CONCURRENCY, seconds: opts.seconds, warmupSeconds: Math.min(2, opts.seconds / 2) };
    // Single-run tails on a 2-core machine mostly show where GC pauses happened to land, so each side is measured
    // in ROUNDS interleaved rounds, alternating which side goes first, and the medians are compared.
    const rounds: Record<'baselineGet' | 'candidateGet' | 'baselinePut' | 'candidatePut', LoadResult[]> = { baselineGet: [], candidateGet: [], baselinePut: [], candidatePut: [] };
    const sides = {
      baselineGet: (i: number) => raw.getBuffer(`raw:${key(i)}`),
      candidateGet: (i: number) => coordinator.get('bench', `k${key(i)}`),
      baselinePut: (i: number) => raw.set(`raw:${key(i)}`, VALUE),
      candidatePut: (i: number) => coordinator.put('bench', `k${key(i)}`, VALUE),
    };
    for (let r = 0; r < ROUNDS; r++) {
      for (const op of ['Get', 'Put'] as const) {
        const order = r % 2 === 0 ? (['baseline', 'candidate'] as const) : (['candidate', 'baseline'] as const);
        for (const side of order) {
          const name = `${side}${op}` as const;
          const res = await closedLoop(sides[name], load);
          rounds[name].push(res);
          process.stdout.write(`  round ${r + 1}/${ROUNDS} ${name.padEnd(12)} ${String(res.opsPerSec).padStart(7)} ops/s  p99 ${res.p99Ms.toFixed(2)} ms\n`);
        }
      }
    }
    for (let i = 0; i < KEYS; i++) await withL1.get('bench', `k${i}`); // fill L1
    const runs = {
      baselineGet: median(rounds.baselineGet),
      candidateGet: median(rounds.candidateGet),
      baselinePut: median(rounds.baselinePut),
      candidatePut: median(rounds.candidatePut),
      l1Get: await closedLoop((i) => withL1.get('bench', `k${key(i)}`), load),
    };
    const baselineGet = runs.baselineGet;
    const ratios = {
      get: { throughput: round(runs.candidateGet.opsPerSec / baselineGet.opsPerSec), p99: round(runs.candidateGet.p99Ms / baselineGet.p99Ms) },
      put: { throughput: round(runs.candidatePut.opsPerSec / runs.baselinePut.opsPerSec), p99: round(runs.candidatePut.p99Ms / runs.baselinePut.p99Ms) },
      l1GetVsRedisGet: round(runs.l1Get.opsPerSec / baselineGet.opsPerSec),
    };
    const summary = { throughput: Math.min(ratios.get.throughput, ratios.put.throughput), p99: Math.max(ratios.get.p99, ratios.put.p99) };
    console.log('\n' + table([
      row('raw ioredis GET', baselineGet),
      row('coordinator GET', runs.candidateGet),
      row('raw ioredis SET', runs.baselinePut),
      row('coordinator PUT', runs.candidatePut),
      row('coordinator GET (L1 hit)', runs.l1Get),
    ]));
    console.log(`\nratios vs raw ioredis: GET throughput ${ratios.get.throughput} (target >= 0.85), p99 ${ratios.get.p99} (target <= 1.3)`);
    console.log(`                      PUT throughput ${ratios.put.throughput} (target >= 0.85), p99 ${ratios.put.p99} (target <= 1.3)`);
    console.log(`                      L1 hit path: ${runs.l1Get.opsPerSec} ops/s = ${ratios.l1GetVsRedisGet}x raw Redis GET`);
    return {
      scenario: 'hot-path',
      config: { keys: KEYS, valueBytes: VALUE.length, concurrency: CONCURRENCY, seconds: opts.seconds, rounds: ROUNDS, statistic: 'median of interleaved rounds', redis: 'redis-server on loopback, same host' },
      rounds,
      baseline: { name: 'raw ioredis (GET/SET, auto-pipelining)', get: baselineGet, put: runs.baselinePut },
      candidate: { name: 'Coordinator over RedisTier (versioned Lua CAS write, header with content hash, per-key write order)', get: runs.candidateGet, put: runs.candidatePut, l1Get: runs.l1Get },
      ratios: { ...summary, get: ratios.get, put: ratios.put, l1GetVsRedisGet: ratios.l1GetVsRedisGet },
      targets: { throughput: '>= 0.85', p99: '<= 1.3' },
      met: { throughput: summary.throughput >= 0.85, p99: summary.p99 <= 1.3 },
    };
  } finally {
    await Promise.allSettled([coordinator.close(), withL1.close()]);
    raw.disconnect();
    await redis.stop();
  }
}

/** Per-figure median over rounds (ops/s and each percentile separately). */
function median(rs: LoadResult[]): LoadResult {
  const mid = <K extends keyof LoadResult>(k: K) => [...rs].map((r) => r[k]).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
  return { ops: mid('ops'), seconds: mid('seconds'), opsPerSec: mid('opsPerSec'), p50Ms: mid('p50Ms'), p99Ms: mid('p99Ms'), p999Ms: mid('p999Ms'), errors: rs.reduce((a, r) => a + r.errors, 0) };
}

function row(name: string, r: LoadResult): Record<string, string | number> {
  return { path: name, 'ops/s': r.opsPerSec, 'p50 ms': round(r.p50Ms, 2), 'p99 ms': round(r.p99Ms, 2), 'p99.9 ms': round(r.p999Ms, 2), errors: r.errors };
}
