/**
 * One round of bench/invalidate-l1.ts in a process of its own: a coordinator over the Redis tier with a near cache,
 * the invalidation check on (`check`) or off (`none`) for the process's whole life, its near cache filled by reading
 * every key, then an unrecorded warm-up and one timed round of GETs that the near cache answers. argv: <role>
 * <redis url> <round seconds> <warm-up seconds> <lease ms> <event-loop turn ms>; sends back one message with the
 * round's figures, then exits.
 *
 * Why a process per round: in one process, the round after a switch of the check cost ~3-6% more than the one
 * before it whichever side it was (bench/README.md, "## invalidate"), and two coordinators identical but for the
 * check differed by up to 10%. A fresh process gives each round the same history; what differs between processes
 * (code placement, the JIT's choices) is then noise that the pairs average, not a bias of one side.
 */
import { Coordinator } from '../core/coordinator/coordinator.js';
import { tierInvalidationRegister } from '../core/coordinator/invalidations.js';
import { HybridLogicalClock } from '../core/model/hlc.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { MemoryTier } from '../core/tiers/memory-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { CONCURRENCY } from './hot-path-side.js';
import { closedLoop, round } from './lib/measure.js';
import { keyOf, SwitchableInvalidations } from './lib/invalidation-sides.js';

export const L1_NS = 'bench-l1';
export const L1_KEYS = 10_000;

/** What one round reports. */
export interface L1Round {
  role: 'check' | 'none';
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuUs: number;
  errors: number;
  /** Reads of the round the near cache did not answer (a copy expired or evicted): should be 0. */
  misses: number;
}

async function main(
  role: 'check' | 'none',
  url: string,
  roundSeconds: number,
  warmupSeconds: number,
  leaseMs: number,
  turnMs: number,
): Promise<void> {
  const hot = RedisTier.fromUrl(url);
  const clock = new HybridLogicalClock();
  const invalidations = new SwitchableInvalidations({ register: tierInvalidationRegister(hot), clock, leaseMs });
  invalidations.on = role === 'check';
  const l1 = new MemoryTier({ name: 'l1', maxBytes: 64 << 20 });
  const coordinator = new Coordinator({
    tiers: [hot],
    clock,
    nearCache: l1,
    policies: new PolicyRegistry({
      defaults: { writeTiers: ['hot'], nearCache: { enabled: false } },
      namespaces: { [L1_NS]: { nearCache: { enabled: true, ttlMs: 60_000 } } },
    }),
    flushTimer: false,
    invalidations,
  });
  try {
    await invalidations.refreshNow();
    for (let i = 0; i < L1_KEYS; i += 500) {
      const got = await Promise.all(Array.from({ length: 500 }, (_, j) => coordinator.get(L1_NS, keyOf(i + j))));
      if (got.some((r) => r === undefined)) throw new Error(`invalidate-l1: a key of '${L1_NS}' reads as missing`);
    }
    const key = (i: number) => keyOf((i * 7919) % L1_KEYS);
    let misses = 0;
    // A server turns its event loop between requests (they arrive as I/O); a closed loop of L1 hits never would, as
    // each resolves in microtasks. Without turns, the check side's lease refresh (a HEAD to Redis every half lease)
    // could not be answered before the lease ran out, and each turn it then forced (our reading) let the side run the
    // event loop's deferred work (timers, the collector's tasks) inside its round, which the other side left until
    // after its own: ~3% more CPU, gone with a 60 s lease (bench/README.md, "## invalidate-l1"). So both sides turn
    // the loop at least every `turnMs`: when a turn is due, every worker waits for it.
    let turn: Promise<void> | undefined;
    let lastTurn = performance.now();
    let calls = 0;
    const turned = (): Promise<void> =>
      (turn ??= new Promise<void>((resolve) =>
        setImmediate(() => {
          turn = undefined;
          lastTurn = performance.now();
          resolve();
        }),
      ));
    const get = async (i: number) => {
      if (turn || ((++calls & 63) === 0 && performance.now() - lastTurn >= turnMs)) await turned();
      const r = await coordinator.get(L1_NS, key(i));
      if (r?.tier !== 'l1') misses++;
      return r;
    };
    await closedLoop(get, { concurrency: CONCURRENCY, seconds: warmupSeconds });
    misses = 0;
    const before = process.cpuUsage();
    const res = await closedLoop(get, { concurrency: CONCURRENCY, seconds: roundSeconds });
    const used = process.cpuUsage(before);
    const figures: L1Round = {
      role,
      opsPerSec: res.opsPerSec,
      p50Ms: res.p50Ms,
      p99Ms: res.p99Ms,
      cpuUs: round((used.user + used.system) / res.ops, 4),
      errors: res.errors,
      misses,
    };
    process.send!(figures);
  } finally {
    await coordinator.close();
  }
}

// Run only as the forked side (bench/invalidate-l1.ts imports the constants above).
if (process.send && process.argv[2]) {
  const [role, url, roundSeconds, warmupSeconds, leaseMs, turnMs] = process.argv.slice(2);
  if (role !== 'check' && role !== 'none') throw new Error(`invalidate-l1-side: role is check or none, not ${role}`);
  main(role, url!, Number(roundSeconds), Number(warmupSeconds), Number(leaseMs), Number(turnMs)).then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
