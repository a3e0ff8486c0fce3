import { Coordinator } from '../../core/coordinator/coordinator.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import type { Entry, WriteOutcome } from '../../core/model/entry.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { PutOptions, TierName } from '../../core/tiers/tier.js';
import { entry } from '../helpers/tiers.js';

/** A memory tier whose puts fail from the `failFrom`-th on (1-based): a tier that stops answering mid-write. */
class FailingAfter extends MemoryTier {
  puts = 0;
  constructor(
    name: TierName,
    private readonly failFrom: number,
  ) {
    super({ name });
  }
  override put(ns: string, key: string, e: Entry, opts?: PutOptions): Promise<WriteOutcome> {
    if (++this.puts >= this.failFrom) return Promise.reject(new Error(`${this.name} stopped answering`));
    return super.put(ns, key, e, opts);
  }
}

describe('a write to several durable tiers', () => {
  const registry = new PolicyRegistry({ defaults: { writeTiers: ['warm', 'cold'], nearCache: { enabled: false } } });

  it('leaves no older version above the lowest tier when it loses there and cannot re-stamp', async () => {
    // Cold holds v2, acknowledged earlier; warm has no record of the key (its cache node evicted it, or took the
    // range over). This writer's clock is behind, so its first attempt is stamped below v2. Then both tiers stop
    // answering, so the re-stamp never lands. Written to both at once, warm took the older version and served it.
    const warm = new FailingAfter('warm', 2);
    const cold = new FailingAfter('cold', 3); // the seed, the first attempt (refused as stale), then failures
    const v2 = new HybridLogicalClock(() => Date.now() + 60_000).next();
    await cold.put('ns', 'k', entry(v2, 'v2'));
    const c = new Coordinator({ tiers: [warm, cold], policies: registry, flushTimer: false });
    await expect(c.put('ns', 'k', Buffer.from('older'))).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
    expect(await warm.get('ns', 'k')).toBeUndefined();
    // A reader (cold answers reads still: only its puts fail) gets v2, not the older attempt.
    const reader = new Coordinator({ tiers: [warm, cold], policies: registry, flushTimer: false });
    expect((await reader.get('ns', 'k'))?.entry.value.toString()).toBe('v2');
    await c.close(); // (closes the tiers)
    await reader.close();
  });

  it('writes the lowest tier first and the others once it took the version', async () => {
    const order: string[] = [];
    class Logged extends MemoryTier {
      override put(ns: string, key: string, e: Entry, opts?: PutOptions): Promise<WriteOutcome> {
        order.push(`${this.name}:start`);
        return super.put(ns, key, e, opts).finally(() => order.push(`${this.name}:end`));
      }
    }
    const c = new Coordinator({
      tiers: [new Logged({ name: 'warm' }), new Logged({ name: 'cold' })],
      policies: registry,
      flushTimer: false,
    });
    await c.put('ns', 'k', Buffer.from('v'));
    await c.delete('ns', 'k');
    expect(order).toEqual([
      'cold:start',
      'cold:end',
      'warm:start',
      'warm:end',
      'cold:start',
      'cold:end',
      'warm:start',
      'warm:end',
    ]);
    await c.close();
  });
});
