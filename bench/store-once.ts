/**
 * store-once: paper 003's storeOnce response (Table 1; §4.2.1, Fig. 12: with less unique data, more of it fits in
 * the fast tier, so reads get faster and fewer reach S3), in Strata's terms (coordinator/dedup.ts): a
 * duplicate-heavy workload written into a namespace with the `dedup` preset against the same workload written into a
 * `write-through` namespace. Both presets place values in all three tiers. Two stacks of real tiers, one cache-node
 * process (WarmTier) as warm and the local folder tier (fsync on, its default) as cold in both:
 *  - redis: redis-server as hot (RedisTier), big enough for everything;
 *  - small-hot: an in-process MemoryTier of `--small-hot-mib` (8) MiB as hot: the write-through namespace's values
 *    (31 MiB) do not fit, the storeOnce namespace's blobs (1.6 MiB) do: the paper's setting.
 *
 * The workload: `--writes` (2,000) writes, each to a key of its own, of values drawn from `--distinct` (100)
 * random 16 KiB values with Zipf-like popularity (P(i) ∝ 1/(i+1)), the same sequence in every round and mode, at
 * `--concurrency` (8) writers; then every key is read `--read-passes` (5) times in a shuffled order (same
 * concurrency) and compared with what was written. Reported: bytes written by clients against bytes stored per tier
 * (each tier's `scan` of the namespace, summing header sizes: the value bytes a tier holds; plus the cold folder's
 * files on disk, headers included), the dedup ratio, write and read latency (p50/p99) and throughput of storeOnce
 * against plain, and the share of reads whose key entry came from hot (for storeOnce the key's entry is a reference;
 * its blob may come from another tier, and the read still reports hot: the blobs hot holds are counted after the
 * reads).
 *
 * Each round writes both modes in both stacks into fresh namespaces, alternating which mode goes first (`--runs`
 * rounds, default 5); ratios are taken within a round and summarised as median (min..max). `--seconds` is unused.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { Coordinator } from '../core/coordinator/coordinator.js';
import { BLOB_KEY_PREFIX } from '../core/model/entry.js';
import { LocalFleet } from '../core/nodes/local-fleet.js';
import { NodeClient } from '../core/nodes/node-client.js';
import { compilePolicyInput } from '../core/policy/compile.js';
import { initialRing } from '../core/ring/document.js';
import { RingView } from '../core/ring/view.js';
import { LocalFolderTier } from '../core/tiers/local-folder-tier.js';
import { MemoryTier } from '../core/tiers/memory-tier.js';
import { RedisTier } from '../core/tiers/redis/redis-tier.js';
import { supportsScan, type Tier } from '../core/tiers/tier.js';
import { WarmTier } from '../core/tiers/warm-tier.js';
import { startRedis } from '../test/helpers/services.js';
import { round, table } from './lib/measure.js';
import { flag, prng, median, summary, spread, type Summary } from './lib/rounds.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const SECRET = 'bench-secret-0123456789';
const VALUE_BYTES = 16 * KiB;
const MODES = ['plain', 'once'] as const;
type Mode = (typeof MODES)[number];
const STACKS = ['redis', 'small-hot'] as const;
type StackName = (typeof STACKS)[number];
type Ratio = 'writeP50' | 'writeP99' | 'writeThroughput' | 'readP50' | 'readP99' | 'readThroughput';

interface Stack {
  name: StackName;
  coordinator: Coordinator;
  hot: Tier;
  warm: Tier;
  cold: LocalFolderTier;
  coldDir: string;
}

interface ModeFigures {
  writesPerSecond: number;
  writeP50Ms: number;
  writeP99Ms: number;
  readsPerSecond: number;
  readP50Ms: number;
  readP99Ms: number;
  hotHitShare: number;
  noise: Record<'writeP50' | 'writeP99' | 'readP50' | 'readP99', number>;
}

interface StackFigures {
  plain: ModeFigures;
  once: ModeFigures;
  onceVsPlain: Record<Ratio, Summary>;
}

interface OpsResult {
  ops: number;
  seconds: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

interface Census {
  /** Entries that are keys (references, for storeOnce). */
  keys: number;
  blobs: number;
  /** Sum of header sizes: the value bytes the tier holds for the namespace. */
  bytes: number;
}

interface ModeRound {
  ns: string;
  writes: OpsResult;
  reads: OpsResult;
  /** Share of reads whose key entry came from hot. */
  hotHitShare: number;
  /** Reads whose value differed from what was written (or were missing). */
  wrong: number;
  stored: Record<'hot' | 'warm' | 'cold', Census>;
  coldFileBytes: number;
}

/** Runs `op(0..count-1)` with `concurrency` workers taking the next index; per-operation latency in an HDR histogram. */
async function runOps(count: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<OpsResult> {
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let next = 0;
  let errors = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const t0 = performance.now();
        try {
          await op(i);
        } catch {
          errors++;
        }
        h.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const r = {
    ops: count,
    seconds: round(seconds),
    opsPerSec: Math.round(count / seconds),
    p50Ms: h.getValueAtPercentile(50) / 1000,
    p99Ms: h.getValueAtPercentile(99) / 1000,
    errors,
  };
  h.destroy();
  return r;
}

/** Keys and blobs a tier holds in `ns`, and the value bytes (header sizes); tombstones and markers left out. */
async function census(tier: Tier, ns: string): Promise<Census> {
  if (!supportsScan(tier)) throw new Error(`tier ${tier.name} cannot scan`);
  const out: Census = { keys: 0, blobs: 0, bytes: 0 };
  let cursor: string | null = null;
  do {
    const page = await tier.scan(ns, { cursor, limit: 500 });
    cursor = page.cursor;
    for (const { key, header } of page.items) {
      if (header.flags.tombstone || header.flags.elsewhere) continue;
      if (key.startsWith(BLOB_KEY_PREFIX)) out.blobs++;
      else out.keys++;
      out.bytes += header.size;
    }
  } while (cursor !== null);
  return out;
}

/** Bytes of the files under `dir` (the folder tier's entry files: value, header and trailer). */
function bytesUnder(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = statSync(p);
    total += s.isDirectory() ? bytesUnder(p) : s.size;
  }
  return total;
}

export async function storeOnce(opts: { seconds: number; runs?: number }): Promise<Record<string, unknown>> {
  const rounds = opts.runs ?? 5;
  const writes = flag('writes', 2000);
  const distinct = flag('distinct', 100);
  const concurrency = flag('concurrency', 8);
  const readPasses = flag('read-passes', 5);
  const smallHotBytes = flag('small-hot-mib', 8) * MiB;
  const rand = prng(11);
  const values = Array.from({ length: distinct }, () => randomBytes(VALUE_BYTES));
  // Zipf-like (s = 1) over the distinct values, drawn once: every round and mode writes the same sequence.
  const weights = values.map((_, i) => 1 / (i + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const pick = () => {
    let x = rand() * total;
    for (let i = 0; i < weights.length; i++) if ((x -= weights[i]!) <= 0) return i;
    return weights.length - 1;
  };
  const sequence = Array.from({ length: writes }, pick);
  const drawn = new Set(sequence).size;
  // Every key `readPasses` times, shuffled.
  const readOrder = Array.from({ length: writes * readPasses }, (_, i) => i % writes);
  for (let i = readOrder.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [readOrder[i], readOrder[j]] = [readOrder[j]!, readOrder[i]!];
  }
  const clientBytes = writes * VALUE_BYTES;

  const nsOf = (stack: StackName, mode: Mode, r: number | 'warm-up') => `${stack === 'redis' ? 'r' : 's'}-${mode}-${r}`;
  const policy = compilePolicyInput({
    namespaces: Object.fromEntries(
      STACKS.flatMap((stack) =>
        MODES.flatMap((mode) =>
          [...Array.from({ length: rounds }, (_, r) => r), 'warm-up' as const].map((r) => [
            nsOf(stack, mode, r),
            { preset: mode === 'once' ? 'dedup' : 'write-through' },
          ]),
        ),
      ),
    ),
  });

  const dir = mkdtempSync(join(tmpdir(), 'strata-bench-once-'));
  const redis = await startRedis();
  const fleet = new LocalFleet({ rootDir: join(dir, 'fleet'), secret: SECRET, capacityBytes: 4 * 1024 * MiB });
  const admin = new NodeClient({ secret: SECRET });
  const stacks: Stack[] = [];
  try {
    const node = await fleet.launch('once-node');
    const ring = initialRing([{ id: node.nodeId, url: node.url }], 1);
    await admin.pushRing(node.url, ring);
    for (const name of STACKS) {
      const hot =
        name === 'redis'
          ? RedisTier.fromUrl(redis.url, { keyPrefix: 'bench-once' })
          : new MemoryTier({ name: 'hot', maxBytes: smallHotBytes });
      const warm = new WarmTier({
        ring: new RingView({ initial: ring }),
        secret: SECRET,
        connectionsPerNode: 16,
        timeoutMs: 10_000,
      });
      const coldDir = join(dir, `cold-${name}`);
      const cold = new LocalFolderTier({ dir: coldDir });
      // The hot fence on, as deployed (a hot tier above durable ones).
      const coordinator = new Coordinator({ tiers: [hot, warm, cold], policies: policy.registry, flushTimer: false });
      stacks.push({ name, coordinator, hot, warm, cold, coldDir });
      await coordinator.ready();
    }

    // Warm-up: a few writes and reads of each mode in each stack, into namespaces of their own (not measured).
    for (const s of stacks) {
      for (const mode of MODES) {
        const ns = nsOf(s.name, mode, 'warm-up');
        await runOps(200, concurrency, (i) => s.coordinator.put(ns, `k${i}`, values[sequence[i]!]!));
        await runOps(1000, concurrency, (i) => s.coordinator.get(ns, `k${i % 200}`));
      }
    }

    const measure = async (s: Stack, mode: Mode, r: number): Promise<ModeRound> => {
      const ns = nsOf(s.name, mode, r);
      const c = s.coordinator;
      const w = await runOps(writes, concurrency, (i) => c.put(ns, `k${i}`, values[sequence[i]!]!));
      let wrong = 0;
      let hotHits = 0;
      const rd = await runOps(readOrder.length, concurrency, async (n) => {
        const i = readOrder[n]!;
        const got = await c.get(ns, `k${i}`);
        if (got?.tier === 'hot') hotHits++;
        if (!got || !got.entry.value.equals(values[sequence[i]!]!)) wrong++;
      });
      await c.drain(); // promotions of the reads that missed hot, before the census
      const [h, wm, cd] = await Promise.all([census(s.hot, ns), census(s.warm, ns), census(s.cold, ns)]);
      return {
        ns,
        writes: w,
        reads: rd,
        hotHitShare: round(hotHits / readOrder.length),
        wrong,
        stored: { hot: h, warm: wm, cold: cd },
        coldFileBytes: bytesUnder(join(s.coldDir, ns)),
      };
    };

    const runs: Record<StackName, Record<Mode, ModeRound[]>> = {
      redis: { plain: [], once: [] },
      'small-hot': { plain: [], once: [] },
    };
    for (let r = 0; r < rounds; r++) {
      for (const s of stacks) {
        for (const mode of r % 2 === 0 ? MODES : ([...MODES].reverse() as Mode[])) {
          const m = await measure(s, mode, r);
          runs[s.name][mode].push(m);
          console.log(
            `  round ${r + 1}/${rounds} ${s.name.padEnd(9)} ${mode.padEnd(5)} writes ${String(m.writes.opsPerSec).padStart(5)}/s p50 ${m.writes.p50Ms.toFixed(2)} p99 ${m.writes.p99Ms.toFixed(2)} ms | reads ${String(m.reads.opsPerSec).padStart(5)}/s p50 ${m.reads.p50Ms.toFixed(2)} p99 ${m.reads.p99Ms.toFixed(2)} ms, ${Math.round(m.hotHitShare * 100)}% of keys from hot${m.wrong ? ` | ${m.wrong} WRONG` : ''}`,
          );
        }
      }
    }

    const figures = Object.fromEntries(
      STACKS.map((st) => {
        const rs = runs[st];
        const ratio = (f: (m: ModeRound) => number) => summary(rs.once.map((m, r) => f(m) / f(rs.plain[r]!)));
        const med = (mode: Mode, f: (m: ModeRound) => number, digits = 3) => round(median(rs[mode].map(f)), digits);
        const perMode = (mode: Mode): ModeFigures => ({
          writesPerSecond: med(mode, (m) => m.writes.opsPerSec, 0),
          writeP50Ms: med(mode, (m) => m.writes.p50Ms),
          writeP99Ms: med(mode, (m) => m.writes.p99Ms),
          readsPerSecond: med(mode, (m) => m.reads.opsPerSec, 0),
          readP50Ms: med(mode, (m) => m.reads.p50Ms),
          readP99Ms: med(mode, (m) => m.reads.p99Ms),
          hotHitShare: med(mode, (m) => m.hotHitShare),
          noise: {
            writeP50: spread(rs[mode].map((m) => m.writes.p50Ms)),
            writeP99: spread(rs[mode].map((m) => m.writes.p99Ms)),
            readP50: spread(rs[mode].map((m) => m.reads.p50Ms)),
            readP99: spread(rs[mode].map((m) => m.reads.p99Ms)),
          },
        });
        return [
          st,
          {
            plain: perMode('plain'),
            once: perMode('once'),
            onceVsPlain: {
              writeP50: ratio((m) => m.writes.p50Ms),
              writeP99: ratio((m) => m.writes.p99Ms),
              writeThroughput: ratio((m) => m.writes.opsPerSec),
              readP50: ratio((m) => m.reads.p50Ms),
              readP99: ratio((m) => m.reads.p99Ms),
              readThroughput: ratio((m) => m.reads.opsPerSec),
            },
          },
        ];
      }),
    ) as Record<StackName, StackFigures>;

    // Stored bytes do not depend on timing (the full-size stack): the first round's, checked equal in every round.
    const storedOf = (mode: Mode) => runs.redis[mode][0]!.stored;
    const sameEveryRound = MODES.every((mode) =>
      runs.redis[mode].every((m) => JSON.stringify(m.stored) === JSON.stringify(storedOf(mode))),
    );
    const storage = Object.fromEntries(
      MODES.map((mode) => [
        mode,
        {
          ...Object.fromEntries(
            (['hot', 'warm', 'cold'] as const).map((t) => {
              const s = storedOf(mode)[t];
              return [t, { ...s, dedupRatio: round(clientBytes / s.bytes, 2) }];
            }),
          ),
          coldFileBytes: median(runs.redis[mode].map((m) => m.coldFileBytes)),
          smallHotResident: runs['small-hot'][mode].at(-1)!.stored.hot,
        },
      ]),
    ) as Record<
      Mode,
      Record<'hot' | 'warm' | 'cold', Census & { dedupRatio: number }> & { coldFileBytes: number; smallHotResident: Census }
    >;
    const wrong = STACKS.reduce(
      (a, st) =>
        a + MODES.reduce((b, mode) => b + runs[st][mode].reduce((c, m) => c + m.wrong + m.writes.errors + m.reads.errors, 0), 0),
      0,
    );

    console.log(
      `\nclients wrote ${writes} values of ${VALUE_BYTES / KiB} KiB (${(clientBytes / MiB).toFixed(2)} MiB), ${drawn} distinct of ${distinct}\n`,
    );
    console.log(
      table(
        MODES.flatMap((mode) =>
          (['hot', 'warm', 'cold'] as const).map((t) => {
            const s = storage[mode][t];
            return {
              namespace: mode === 'once' ? 'dedup (storeOnce)' : 'write-through',
              tier: t,
              keys: s.keys,
              blobs: s.blobs,
              'value MiB stored': (s.bytes / MiB).toFixed(2),
              'client bytes / stored': `${s.dedupRatio}x`,
              'files on disk MiB': t === 'cold' ? (storage[mode].coldFileBytes / MiB).toFixed(2) : '',
            };
          }),
        ),
      ),
    );
    const range = (x: Summary) => `${x.median}x (${x.min}-${x.max})`;
    for (const st of STACKS) {
      const f = figures[st];
      console.log(
        `\n${st === 'redis' ? 'hot: redis-server' : `hot: an in-process MemoryTier of ${smallHotBytes / MiB} MiB (the write-through namespace does not fit)`}\n` +
          table([
            ...MODES.map((mode) => ({
              namespace: mode === 'once' ? 'dedup (storeOnce)' : 'write-through',
              'writes/s': f[mode].writesPerSecond,
              'write p50 ms': f[mode].writeP50Ms,
              'write p99 ms': f[mode].writeP99Ms,
              'reads/s': f[mode].readsPerSecond,
              'read p50 ms': f[mode].readP50Ms,
              'read p99 ms': f[mode].readP99Ms,
              'key entry from hot': `${Math.round(f[mode].hotHitShare * 100)}%`,
            })),
            {
              namespace: 'storeOnce / plain',
              'writes/s': range(f.onceVsPlain.writeThroughput),
              'write p50 ms': range(f.onceVsPlain.writeP50),
              'write p99 ms': range(f.onceVsPlain.writeP99),
              'reads/s': range(f.onceVsPlain.readThroughput),
              'read p50 ms': range(f.onceVsPlain.readP50),
              'read p99 ms': range(f.onceVsPlain.readP99),
              'key entry from hot': '',
            },
          ]),
      );
      console.log(
        `noise, (max - min)/median over ${rounds} rounds: ${MODES.map(
          (mode) =>
            `${mode} ${Object.entries(f[mode].noise)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}`,
        ).join('; ')}`,
      );
    }
    const resident = (mode: Mode) => storage[mode].smallHotResident;
    console.log(
      `\nsmall hot tier holds, after the reads: write-through ${resident('plain').keys} of ${writes} keys; storeOnce ${resident('once').keys} keys and ${resident('once').blobs} of ${storage.once.cold.blobs} blobs`,
    );
    console.log(`wrong or failed operations: ${wrong}; stored bytes the same in every round: ${sameEveryRound}`);
    return {
      scenario: 'store-once',
      config: {
        writes,
        distinct,
        distinctDrawn: drawn,
        valueBytes: VALUE_BYTES,
        popularity: 'Zipf-like, P(i) proportional to 1/(i+1)',
        reads: `every key ${readPasses} times, shuffled`,
        concurrency,
        rounds,
        clientBytes,
        stacks: {
          redis: 'redis-server (RedisTier) / one cachenode process (WarmTier) / LocalFolderTier (fsync on); hot fence on',
          'small-hot': `MemoryTier of ${smallHotBytes} bytes as hot / the same cache node / another LocalFolderTier; hot fence on`,
        },
        namespaces: "'dedup' preset (storeOnce into hot, warm, cold) against 'write-through' (hot, warm, cold)",
        statistic: 'median (min-max) over rounds; ratios storeOnce / plain taken within a round',
        host: '2 shared cores; bench process, redis-server and the cache node run on them together',
      },
      rounds: runs,
      storage,
      figures,
      wrong,
      storedSameEveryRound: sameEveryRound,
    };
  } finally {
    for (const s of stacks) await s.coordinator.close();
    await admin.close();
    await fleet.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
