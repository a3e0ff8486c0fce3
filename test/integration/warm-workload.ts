/** Closed-loop read/write load over the warm tier, shared by the migration and workflow suites. */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { contentHash } from '../../core/model/keys.js';
import type { RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { SECRET } from './warm-fixtures.js';

export const KEYS = 20_000;
export const NS = 'mig';
export const VALUE_BYTES = 100;

/**
 * Closed-loop read/write load through two coordinators (each with its own WarmTier and cached ring, so they
 * discover ring changes independently). Tracks, per key, the newest version whose write was acknowledged, and
 * checks every read against what was acknowledged before the read started.
 */
export class Workload {
  readonly acked = new Float64Array(KEYS);
  readonly errors: string[] = [];
  readonly staleReads: string[] = [];
  ops = 0;
  private stopped = false;
  private loops: Promise<void>[] = [];
  readonly coordinators: Coordinator[];
  readonly tiers: WarmTier[];

  constructor(store: RingStore) {
    this.tiers = [0, 1].map(
      () => new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 1000 }), secret: SECRET, timeoutMs: 3000 }),
    );
    const policies = new PolicyRegistry({
      defaults: { writeTiers: ['warm'], nearCache: { enabled: false }, promoteOnRead: false },
    });
    this.coordinators = this.tiers.map(
      (t) => new Coordinator({ tiers: [t], policies, flushTimer: false, onBackgroundError: () => {} }),
    );
  }

  /** Writes every key once, in batches (through the tier directly, with versions from one clock). */
  async load(): Promise<void> {
    const clock = new HybridLogicalClock();
    for (let i = 0; i < KEYS; i += 1000) {
      const items = Array.from({ length: Math.min(1000, KEYS - i) }, (_, j) => {
        const version = clock.next();
        const value = valueFor(i + j, version);
        return {
          key: `k${i + j}`,
          entry: {
            header: { version, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} },
            value,
          },
        };
      });
      const out = await this.tiers[0]!.putMany(NS, items);
      out.forEach((o, j) => {
        if (!o.applied) throw new Error(`load of k${i + j} not applied`);
        this.acked[i + j] = items[j]!.entry.header.version;
      });
    }
  }

  start(concurrency = 8, writeRatio = 0.5): void {
    this.loops = this.coordinators.flatMap((c) => Array.from({ length: concurrency }, () => this.loop(c, writeRatio)));
  }

  private async loop(c: Coordinator, writeRatio: number): Promise<void> {
    while (!this.stopped) {
      const i = Math.floor(Math.random() * KEYS);
      const key = `k${i}`;
      try {
        if (Math.random() < writeRatio) {
          const r = await c.put(NS, key, Buffer.alloc(VALUE_BYTES, i % 251));
          if (!r.superseded) this.acked[i] = Math.max(this.acked[i]!, r.version);
        } else {
          const expected = this.acked[i]!;
          const r = await c.get(NS, key);
          if (!r || r.entry.header.version < expected)
            this.staleReads.push(`${key}: read ${r?.entry.header.version ?? 'nothing'} after ${expected} was acknowledged`);
        }
        this.ops++;
      } catch (e) {
        this.errors.push(
          `${key}: ${e instanceof Error ? `${e.message} ${e.cause instanceof Error ? e.cause.message : ''}` : String(e)}`,
        );
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** Every key holds at least the newest acknowledged version (read with a fresh tier). */
  async verify(store: RingStore): Promise<{ missing: string[]; checked: number }> {
    const t = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET });
    const missing: string[] = [];
    for (let i = 0; i < KEYS; i += 1000) {
      const keys = Array.from({ length: Math.min(1000, KEYS - i) }, (_, j) => `k${i + j}`);
      const got = await t.getMany(NS, keys);
      got.forEach((e, j) => {
        if (!e || e.header.version < this.acked[i + j]!)
          missing.push(`${keys[j]}: has ${e?.header.version ?? 'nothing'}, acknowledged ${this.acked[i + j]}`);
      });
    }
    await t.close();
    return { missing, checked: KEYS };
  }

  async close(): Promise<void> {
    await Promise.all(this.coordinators.map((c) => c.close()));
  }
}

export function valueFor(i: number, _version: number): Buffer {
  return Buffer.alloc(VALUE_BYTES, i % 251);
}

/** One line for assertion messages. */
export function summary(w: Workload): string {
  return `ops ${w.ops}, errors ${w.errors.length} ${w.errors.slice(0, 3).join(' | ')}, stale reads ${w.staleReads.length} ${w.staleReads.slice(0, 3).join(' | ')}`;
}
