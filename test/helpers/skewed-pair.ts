import { Coordinator } from '../../core/coordinator/coordinator.js';
import type { CoordinatorOptions } from '../../core/coordinator/types.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { SwitchableTier } from './tiers.js';

/** The near cache's size in {@link skewedPair}. */
export const PAIR_NEAR_BYTES = 1024 * 1024;

/**
 * Two coordinators (two processes) over the same hot and cold tiers, each with its own near cache; a's clock runs a
 * second ahead of b's, as two machines' clocks may. A change that b makes between a's read and a's write is the race
 * a read-then-write must survive: a write at a's next clock version would land above b's and undo it.
 */
export function skewedPair(opts: Partial<CoordinatorOptions> = {}) {
  const hot = new SwitchableTier('hot');
  const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
  const make = (skewMs: number) =>
    new Coordinator({
      tiers: [hot, cold],
      nearCache: new MemoryTier({ name: 'l1', maxBytes: PAIR_NEAR_BYTES }),
      clock: new HybridLogicalClock(() => Date.now() + skewMs),
      flushTimer: false,
      onBackgroundError: () => {},
      ...opts,
    });
  return { a: make(1000), b: make(0), hot, cold };
}
