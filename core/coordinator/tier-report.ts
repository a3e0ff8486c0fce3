import type { Tier, TierStats } from '../tiers/tier.js';
import { withTimeout } from '../util/concurrency.js';
import type { ServedBy } from './types.js';

/** What the coordinator counted per tier (and for L1 and the origin) since it started. */
export interface TierCounts {
  hits: number;
  misses: number;
  errors: number;
}

/** The coordinator's per-tier counters (`GET /v1/stats`). */
export class TierCounters {
  private readonly counts = new Map<ServedBy, TierCounts>();

  count(tier: ServedBy, what: keyof TierCounts): void {
    let c = this.counts.get(tier);
    if (!c) this.counts.set(tier, (c = { hits: 0, misses: 0, errors: 0 }));
    c[what]++;
  }

  of(tier: ServedBy): TierCounts {
    return this.counts.get(tier) ?? { hits: 0, misses: 0, errors: 0 };
  }
}

export type TierReport = TierStats & TierCounts & { ok: boolean };

/** Each tier's own statistics with the coordinator's counts; a tier that cannot answer is reported `ok: false`. */
export function tierReports(tiers: readonly Tier[], counters: TierCounters): Promise<TierReport[]> {
  return Promise.all(
    tiers.map(async (t) => {
      const c = counters.of(t.name);
      try {
        return { ...(await t.stats()), ...c, ok: true };
      } catch {
        return { name: t.name, kind: t.kind, ...c, ok: false };
      }
    }),
  );
}

export interface Health {
  status: 'ok' | 'degraded' | 'down';
  tiers: Record<string, { kind: string; ok: boolean }>;
}

/** Pings every tier (2 s each): `ok` when all answer, `down` when none does, else `degraded`. */
export async function tierHealth(tiers: readonly Tier[]): Promise<Health> {
  const out: Record<string, { kind: string; ok: boolean }> = {};
  await Promise.all(
    tiers.map(async (t) => {
      const ok = await withTimeout(t.ping(), 2000).then(
        () => true,
        () => false,
      );
      out[t.name] = { kind: t.kind, ok };
    }),
  );
  const up = Object.values(out).filter((t) => t.ok).length;
  return { status: up === tiers.length ? 'ok' : up === 0 ? 'down' : 'degraded', tiers: out };
}
