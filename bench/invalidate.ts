/**
 * invalidate: what invalidation by tag, by prefix and a namespace flush cost (issue 24, item 8). Two parts:
 *
 *  - Latency of one call (this file). N entries (default 100,000) of 1 KB, each with three tags, are loaded through
 *    a coordinator over a redis-server hot tier and a LocalFolderTier (fsync on, as deployed) below it, written
 *    through to both; then `invalidate(ns, { tags })`, `{ prefix }` and `{ flush: true }` are timed `--reps` times each,
 *    over N entries and over 1,000, with the default lease (1000 ms) and a short one (`--short-lease-ms`). Each call
 *    is broken down into the document's read, its write (the compare-and-set in the folder tier) and the wait for
 *    the lease. The design never touches the entries, so the call should take one lease plus one read and one write
 *    whatever it covers. After every call the bench reads a sample of covered keys (they must read as missing) and of
 *    keys outside the scope (they must still read), on every coordinator whose lease is no longer than the caller's.
 *  - Read-path overhead of the check (bench/invalidate-overhead.ts): paired rounds, as policy-overhead does.
 *
 * GETs the near cache answers are measured again, a process per round, by the scenario `invalidate-l1`
 * (bench/invalidate-l1.ts): in one process the round after a switch of the check cost more than the one before it.
 *
 * Flags: `--entries N` (default 100,000), `--reps N` (calls per kind, lease and size, default 10), `--short-lease-ms`
 * (default 100), `--part latency|overhead` (one part only: a partial run, nothing written), and the overhead part's
 * `--pairs`, `--aa-pairs`, `--round-seconds`, `--warmup-seconds`. The default run takes ~9 minutes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis } from '../test/helpers/services.js';
import { Coordinator } from '../core/coordinator/coordinator.js';
import {
  Invalidations,
  tierInvalidationRegister,
  type InvalidationDocument,
  type InvalidationRegister,
  type InvalidationScope,
} from '../core/coordinator/invalidations.js';
import { HybridLogicalClock } from '../core/model/hlc.js';
import { PolicyRegistry } from '../core/policy/namespace-settings.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import type { Tier } from '../core/tiers/tier.js';
import { invalidateOverhead } from './invalidate-overhead.js';
import { seededDocument } from './lib/invalidation-document.js';
import { round, table } from './lib/measure.js';
import { flag, prng, summary, type Summary } from './lib/rounds.js';

const DEFAULT_ENTRIES = 100_000;
const SMALL_ENTRIES = 1_000;
const DEFAULT_REPS = 10;
const DEFAULT_LEASE_MS = 1000;
const VALUE = Buffer.alloc(1024, 0x5a);
/** Covered keys re-written before each call and read after it. */
const SAMPLE = 50;
/** Keys outside every tag and prefix scope of the run, read after each call. */
const CONTROLS = 100;
const LOAD_BATCH = 256;
const SEED = 24;
const KINDS = ['tags', 'prefix', 'flush'] as const;
type Kind = (typeof KINDS)[number];

/** A register that records how long the document's read and write took, and when the write ended. */
class TimedRegister implements InvalidationRegister {
  readMs = 0;
  writeMs = 0;
  writes = 0;
  writtenAt = 0;
  bytes = 0;
  constructor(private readonly inner: InvalidationRegister) {}
  reset(): void {
    this.readMs = this.writeMs = this.writes = 0;
  }
  version(): Promise<number | undefined> {
    return this.inner.version();
  }
  async read(): Promise<InvalidationDocument | undefined> {
    const t0 = performance.now();
    try {
      return await this.inner.read();
    } finally {
      this.readMs += performance.now() - t0;
    }
  }
  async write(doc: InvalidationDocument): Promise<boolean> {
    const t0 = performance.now();
    try {
      return await this.inner.write(doc);
    } finally {
      this.writtenAt = performance.now();
      this.writeMs += this.writtenAt - t0;
      this.writes++;
      this.bytes = JSON.stringify(doc).length;
    }
  }
}

interface CallRecord {
  leaseMs: number;
  entries: number;
  kind: Kind;
  rep: number;
  totalMs: number;
  readMs: number;
  writeMs: number;
  /** From the end of the document's write to the call's return: the lease. */
  waitMs: number;
  /** The rest: the rate check, the record, the compare-and-set retries. */
  otherMs: number;
  casAttempts: number;
  docBytes: number;
  /** Sampled covered keys that read as missing afterwards, of those read (per coordinator checked). */
  coveredMissing: number;
  coveredRead: number;
  /** Sampled keys outside the scope that still read afterwards, of those read. */
  uncoveredPresent: number;
  uncoveredRead: number;
}

interface Node {
  leaseMs: number;
  coordinator: Coordinator;
  register: TimedRegister;
}

/** One coordinator of the deployment: its own connections over the shared redis-server and folder. */
function node(redisUrl: string, dir: string, leaseMs: number): Node {
  const hot = RedisTier.fromUrl(redisUrl);
  const folder = new LocalFolderTier({ dir, name: 'cold' });
  const clock = new HybridLogicalClock();
  const register = new TimedRegister(tierInvalidationRegister(folder));
  const coordinator = new Coordinator({
    tiers: [hot, folder],
    clock,
    policies: new PolicyRegistry({ defaults: { writeTiers: ['hot', 'cold'], nearCache: { enabled: false } } }),
    flushTimer: false,
    invalidations: new Invalidations({ register, clock, leaseMs }),
  });
  return { leaseMs, coordinator, register };
}

const itemKey = (i: number) => `items/${String(i).padStart(6, '0')}`;
const controlKey = (i: number) => `controls/${i}`;
/** Three tags per entry: `all` (the tag the bench invalidates), and two groups as an application would have. */
const itemTags = (i: number) => ['all', `group-${i % 100}`, `shard-${i % 7}`];

async function load(c: Coordinator, ns: string, count: number, key: (i: number) => string, tags: (i: number) => string[]) {
  for (let i = 0; i < count; i += LOAD_BATCH)
    await Promise.all(
      Array.from({ length: Math.min(LOAD_BATCH, count - i) }, (_, j) => c.put(ns, key(i + j), VALUE, { tags: tags(i + j) })),
    );
}

async function reads(c: Coordinator, ns: string, keys: readonly string[]): Promise<number> {
  const got = await Promise.all(keys.map((k) => c.get(ns, k)));
  return got.filter((r) => r !== undefined).length;
}

export async function invalidationLatency(opts: {
  entries: number;
  reps: number;
  shortLeaseMs: number;
}): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-invalidate-'));
  const redis = await startRedis();
  const leases = [...new Set([DEFAULT_LEASE_MS, opts.shortLeaseMs])].sort((a, b) => b - a);
  const nodes: Node[] = [];
  try {
    // The document as a deployment holds it: another namespace's 1,000 records (the most one may hold) besides this
    // run's, so its read and write carry a realistic body.
    const seedTier: Tier = new LocalFolderTier({ dir, name: 'cold' });
    const seed = seededDocument({ version: 0, namespaces: {}, log: [] }, 'tenant-seed', {
      tags: 900,
      prefixes: 100,
      lengths: [6, 9, 12, 15],
      keyOf: (i) => `users/${String(i).padStart(6, '0')}/profile`,
    });
    if (!(await tierInvalidationRegister(seedTier).write(seed))) throw new Error('invalidate: cannot seed the document');
    await seedTier.close();

    for (const leaseMs of leases) nodes.push(node(redis.url, dir, leaseMs));
    await Promise.all(nodes.map((n) => n.coordinator.ready()));
    const loader = nodes[0]!.coordinator;
    const sizes = [...new Set([opts.entries, SMALL_ENTRIES])].sort((a, b) => b - a);
    const nsOf = (entries: number, leaseMs: number) => `inv-${entries}-${leaseMs}`;
    // Each (size, lease) has a namespace of its own, loaded once: a flush covers everything in it.
    for (const entries of sizes)
      for (const leaseMs of leases) {
        const ns = nsOf(entries, leaseMs);
        process.stdout.write(`loading ${entries} entries of 1 KB (3 tags each) into '${ns}' (Redis + folder, fsync) ... `);
        const t0 = performance.now();
        await load(loader, ns, entries, itemKey, itemTags);
        await load(loader, ns, CONTROLS, controlKey, () => ['control']);
        console.log(`${round((performance.now() - t0) / 1000, 1)} s`);
      }
    // A namespace no call names: a flush of another must leave it alone.
    await load(loader, 'inv-bystander', CONTROLS, controlKey, () => ['all']);

    const rand = prng(SEED);
    const records: CallRecord[] = [];
    const controls = Array.from({ length: CONTROLS }, (_, i) => controlKey(i));
    for (const entries of sizes)
      for (const n of nodes) {
        const ns = nsOf(entries, n.leaseMs);
        // Coordinators that must see the call in force when it returns: those that trust a copy no longer.
        const checkers = nodes.filter((m) => m.leaseMs <= n.leaseMs);
        for (const kind of KINDS) {
          const scope: InvalidationScope =
            kind === 'tags' ? { tags: ['all'] } : kind === 'prefix' ? { prefix: 'items/' } : { flush: true };
          for (let rep = 1; rep <= opts.reps; rep++) {
            // The first call of a namespace covers all its entries live; every later one covers them again (they stay
            // covered) and a sample written again just before it, so the check after it has live entries to hide.
            const sample = Array.from({ length: SAMPLE }, () => itemKey(Math.floor(rand() * entries)));
            await Promise.all(sample.map((k, j) => n.coordinator.put(ns, k, VALUE, { tags: itemTags(j) })));
            if ((await reads(n.coordinator, ns, sample)) !== SAMPLE) throw new Error(`invalidate: '${ns}' sample unreadable`);
            n.register.reset();
            const t0 = performance.now();
            await n.coordinator.invalidate(ns, scope, 'bench');
            const t1 = performance.now();
            const totalMs = t1 - t0;
            const waitMs = t1 - n.register.writtenAt;
            const outside = kind === 'flush' ? { ns: 'inv-bystander', keys: controls } : { ns, keys: controls };
            let coveredMissing = 0;
            let uncoveredPresent = 0;
            for (const m of checkers) {
              coveredMissing += SAMPLE - (await reads(m.coordinator, ns, sample));
              uncoveredPresent += await reads(m.coordinator, outside.ns, outside.keys);
            }
            const rec: CallRecord = {
              leaseMs: n.leaseMs,
              entries,
              kind,
              rep,
              totalMs: round(totalMs, 2),
              readMs: round(n.register.readMs, 2),
              writeMs: round(n.register.writeMs, 2),
              waitMs: round(waitMs, 2),
              otherMs: round(totalMs - n.register.readMs - n.register.writeMs - waitMs, 2),
              casAttempts: n.register.writes,
              docBytes: n.register.bytes,
              coveredMissing,
              coveredRead: SAMPLE * checkers.length,
              uncoveredPresent,
              uncoveredRead: CONTROLS * checkers.length,
            };
            records.push(rec);
            const ok = rec.coveredMissing === rec.coveredRead && rec.uncoveredPresent === rec.uncoveredRead;
            console.log(
              `  ${String(entries).padStart(6)} entries, lease ${String(n.leaseMs).padStart(4)} ms, ${kind.padEnd(6)} ` +
                `#${String(rep).padStart(2)}: ${rec.totalMs.toFixed(1).padStart(7)} ms = read ${rec.readMs.toFixed(1)} + ` +
                `write ${rec.writeMs.toFixed(1)} + wait ${rec.waitMs.toFixed(1)} + other ${rec.otherMs.toFixed(1)}` +
                `  (covered missing ${rec.coveredMissing}/${rec.coveredRead}, others read ${rec.uncoveredPresent}/` +
                `${rec.uncoveredRead})${ok ? '' : '  CHECK FAILED'}`,
            );
          }
        }
      }

    const pct = (xs: number[], q: number) => {
      const s = [...xs].sort((a, b) => a - b);
      return round(s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!, 2);
    };
    const stats = (xs: number[]) => ({ ...summary(xs, 2), p95: pct(xs, 0.95) });
    const groups = sizes.flatMap((entries) =>
      leases.flatMap((leaseMs) =>
        KINDS.map((kind) => {
          const rs = records.filter((r) => r.entries === entries && r.leaseMs === leaseMs && r.kind === kind);
          return {
            entries,
            leaseMs,
            kind,
            calls: rs.length,
            totalMs: stats(rs.map((r) => r.totalMs)),
            readMs: stats(rs.map((r) => r.readMs)),
            writeMs: stats(rs.map((r) => r.writeMs)),
            waitMs: stats(rs.map((r) => r.waitMs)),
            otherMs: stats(rs.map((r) => r.otherMs)),
            overLeaseMs: stats(rs.map((r) => r.totalMs - leaseMs)),
            checksFailed: rs.filter((r) => r.coveredMissing !== r.coveredRead || r.uncoveredPresent !== r.uncoveredRead).length,
          };
        }),
      ),
    );
    const ms = (s: Summary & { p95: number }) => `${s.median.toFixed(1)} / ${s.p95.toFixed(1)}`;
    console.log(`\nper call, median / p95 over ${opts.reps} calls (ms); "over lease" = total − lease:\n`);
    console.log(
      table(
        groups.map((g) => ({
          entries: g.entries,
          'lease ms': g.leaseMs,
          scope: g.kind,
          total: ms(g.totalMs),
          'over lease': ms(g.overLeaseMs),
          'doc read': ms(g.readMs),
          'doc write': ms(g.writeMs),
          'lease wait': ms(g.waitMs),
          other: ms(g.otherMs),
          'checks failed': g.checksFailed,
        })),
      ),
    );
    const failed = groups.reduce((n, g) => n + g.checksFailed, 0);
    console.log(
      failed
        ? `\nCORRECTNESS CHECK FAILED after ${failed} calls (covered keys read, or keys outside the scope missing)`
        : `\ncorrectness: after every call, all sampled covered keys read as missing and all keys outside it still ` +
            `read, on each coordinator checked`,
    );
    return {
      config: {
        entries: sizes,
        valueBytes: VALUE.length,
        tagsPerEntry: 3,
        reps: opts.reps,
        leasesMs: leases,
        tiers: 'redis-server hot tier + LocalFolderTier (fsync on) in a temp dir, written through to both',
        document: `another namespace's 900 tag and 100 prefix generations besides the run's (${seed.version} records seeded)`,
        sample: `${SAMPLE} covered keys re-written before each call, read after it; ${CONTROLS} keys outside the scope`,
      },
      calls: records,
      summary: groups,
      checksFailed: failed,
    };
  } finally {
    await Promise.allSettled(nodes.map((n) => n.coordinator.close()));
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function invalidate(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const i = process.argv.indexOf('--part');
  const part = i >= 0 ? process.argv[i + 1] : undefined;
  if (part !== undefined && part !== 'latency' && part !== 'overhead')
    throw new Error(`invalidate: --part is 'latency' or 'overhead', not '${part}'`);
  const entries = Math.max(SMALL_ENTRIES, Math.round(flag('entries', DEFAULT_ENTRIES)));
  const reps = Math.max(1, Math.round(flag('reps', DEFAULT_REPS)));
  const shortLeaseMs = Math.max(50, Math.round(flag('short-lease-ms', 100)));
  const latency = part === 'overhead' ? undefined : await invalidationLatency({ entries, reps, shortLeaseMs });
  const overhead = part === 'latency' ? undefined : await invalidateOverhead(opts);
  return { scenario: 'invalidate', latency, overhead, ...(part ? { partial: true } : {}) };
}
