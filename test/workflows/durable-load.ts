/**
 * Closed-loop read/write load over warm and cold (the warm tier's node fleet, and a local folder as the cold tier),
 * for the suites where a cache node dies: every acknowledged write is in both tiers, so what a dead node held
 * is still readable from cold once its ranges read as misses (DOWN), and nothing acknowledged may be lost.
 * Like the warm-only Workload (test/integration/warm-workload.ts): two coordinators with their own rings, a
 * newest acknowledged version per key, and a check of every read against what was acknowledged before it began.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { contentHash } from '../../core/model/keys.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import type { RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { SECRET, tempDir } from '../integration/warm-fixtures.js';

export const NS = 'death';
const VALUE_BYTES = 100;

export class DurableLoad {
  readonly acked: Float64Array;
  /** Failed operations (never acknowledged), with when they failed (epoch ms). */
  readonly errors: { at: number; key: string; write: boolean; message: string }[] = [];
  readonly staleReads: string[] = [];
  ops = 0;
  /** Each key's last few operations (times in ms mod 100 s), reported with a stale read of it. */
  private readonly history = new Map<string, string[]>();
  private running = false;
  private loops: Promise<void>[] = [];
  private readonly cold: { dir: string; remove(): void };
  private readonly coordinators: Coordinator[];
  private readonly warm: WarmTier[];

  constructor(
    private readonly store: RingStore,
    readonly keys = 6000,
  ) {
    this.acked = new Float64Array(keys);
    this.cold = tempDir('strata-death-cold-');
    this.warm = [0, 1].map(
      () =>
        new WarmTier({
          ring: new RingView({ store, refreshIntervalMs: 200 }),
          secret: SECRET,
          timeoutMs: 3000,
          ownsRing: true,
        }),
    );
    this.coordinators = this.warm.map((w) => this.coordinator(w));
  }

  private coordinator(warm: WarmTier): Coordinator {
    return new Coordinator({
      tiers: [warm, new LocalFolderTier({ dir: this.cold.dir, fsync: false })],
      policies: new PolicyRegistry({
        defaults: { writeTiers: ['warm', 'cold'], nearCache: { enabled: false }, promoteOnRead: false },
      }),
      flushTimer: false,
      onBackgroundError: () => {},
    });
  }

  /** Writes every key once to both tiers, with versions from one clock. */
  async load(): Promise<void> {
    const clock = new HybridLogicalClock();
    const cold = new LocalFolderTier({ dir: this.cold.dir, fsync: false });
    for (let i = 0; i < this.keys; i += 500) {
      const items = Array.from({ length: Math.min(500, this.keys - i) }, (_, j) => {
        const version = clock.next();
        const value = Buffer.alloc(VALUE_BYTES, (i + j) % 251);
        const header = { version, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} };
        return { key: `k${i + j}`, entry: { header, value } };
      });
      const [w, c] = await Promise.all([this.warm[0]!.putMany(NS, items), cold.putMany(NS, items)]);
      items.forEach((it, j) => {
        if (!w[j]!.applied || !c[j]!.applied) throw new Error(`load of ${it.key} not applied`);
        this.acked[i + j] = it.entry.header.version;
      });
    }
    await cold.close();
  }

  start(concurrency = 4): void {
    this.running = true;
    this.loops = this.coordinators.flatMap((c) => Array.from({ length: concurrency }, () => this.loop(c)));
  }

  private async loop(c: Coordinator): Promise<void> {
    while (this.running) {
      const i = Math.floor(Math.random() * this.keys);
      const key = `k${i}`;
      const write = Math.random() < 0.5;
      try {
        if (write) {
          const began = Date.now();
          const r = await c.put(NS, key, Buffer.alloc(VALUE_BYTES, i % 251));
          if (!r.superseded) this.acked[i] = Math.max(this.acked[i]!, r.version);
          this.note(
            key,
            `put by ${this.coordinators.indexOf(c)} ${began % 100_000}-${Date.now() % 100_000}: ${r.version} ${r.tiers.join('+')}`,
          );
        } else {
          const expected = this.acked[i]!;
          const began = Date.now();
          const r = await c.get(NS, key);
          const read = `get by ${this.coordinators.indexOf(c)} ${began % 100_000}-${Date.now() % 100_000}`;
          if (!r || r.entry.header.version < expected)
            this.staleReads.push(
              `${key}: read ${r?.entry.header.version ?? 'nothing'} from ${r?.tier ?? 'no tier'} after ${expected} was ` +
                `acknowledged; ${read}; before it: ${(this.history.get(key) ?? []).join(' | ')}`,
            );
          else this.note(key, `${read}: ${r.entry.header.version} from ${r.tier}`);
        }
        this.ops++;
      } catch (e) {
        this.errors.push({ at: Date.now(), key, write, message: e instanceof Error ? e.message : String(e) });
        this.note(key, `${write ? 'put' : 'get'} by ${this.coordinators.indexOf(c)} failed at ${Date.now() % 100_000}`);
      }
    }
  }

  private note(key: string, what: string): void {
    let h = this.history.get(key);
    if (!h) this.history.set(key, (h = []));
    h.push(what);
    if (h.length > 6) h.shift();
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  /** Runs the load for `ms` and returns what failed meanwhile. */
  async phase(ms: number, concurrency = 4): Promise<{ ops: number; errors: DurableLoad['errors'] }> {
    const ops = this.ops;
    const errors = this.errors.length;
    this.start(concurrency);
    await new Promise((r) => setTimeout(r, ms));
    await this.stop();
    return { ops: this.ops - ops, errors: this.errors.slice(errors) };
  }

  /** Keys whose newest acknowledged version cannot be read (a fresh coordinator, reading the ring as it is now). */
  async missing(): Promise<string[]> {
    const warm = new WarmTier({
      ring: new RingView({ store: this.store, refreshIntervalMs: 0 }),
      secret: SECRET,
      ownsRing: true,
    });
    const c = this.coordinator(warm);
    const missing: string[] = [];
    try {
      for (let i = 0; i < this.keys; i += 200) {
        const batch = Array.from({ length: Math.min(200, this.keys - i) }, (_, j) => i + j);
        await Promise.all(
          batch.map(async (k) => {
            const got = await c.get(NS, `k${k}`).catch((e: unknown) => e as Error);
            const v = got instanceof Error ? undefined : got?.entry.header.version;
            if (v === undefined || v < this.acked[k]!)
              missing.push(
                `k${k}: ${got instanceof Error ? got.message : `has ${v ?? 'nothing'}`}, acknowledged ${this.acked[k]}`,
              );
          }),
        );
      }
    } finally {
      await c.close(); // and its tiers
    }
    return missing;
  }

  async close(): Promise<void> {
    await this.stop();
    await Promise.all(this.coordinators.map((c) => c.close()));
    this.cold.remove();
  }
}

/** One line for assertion messages. */
export function describeErrors(errors: DurableLoad['errors']): string {
  return `${errors.length} errors: ${errors
    .slice(0, 3)
    .map((e) => `${e.key} (${e.write ? 'write' : 'read'}): ${e.message}`)
    .join(' | ')}`;
}
