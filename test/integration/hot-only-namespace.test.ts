/**
 * A namespace whose only tier is hot (writeTiers: ['hot']), over redis-server with the hot fence on: its writes are
 * the hot tier's own copies, stamped with their shard's epoch like every hot copy, so the fence vouches for them
 * and every coordinator reads them. Unstamped (epoch 0), a fence that began by fencing a Redis it had not seen
 * before (epochs above 0) took them for copies older than an acknowledged write: every read missed what was just
 * acknowledged.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { closeSharingTiers, startTierStack, type TierStack } from './tier-stack.js';

describe('a namespace that writes to the hot tier alone (redis, hot fence on)', () => {
  let stack: TierStack;
  const coordinators: Coordinator[] = [];

  beforeAll(async () => {
    stack = await startTierStack('folder');
  }, 180_000);

  afterAll(async () => {
    await closeSharingTiers(...coordinators);
    await stack?.close();
  });

  it('reads back what it wrote, from the writer and from another coordinator', async () => {
    const policies = new PolicyRegistry({
      defaults: { nearCache: { enabled: false } },
      namespaces: { only: { writeTiers: ['hot'] } },
    });
    const make = () => {
      const c = new Coordinator({
        tiers: [stack.hot, stack.warm, stack.cold],
        policies,
        flushTimer: false,
        onBackgroundError: () => {},
      });
      coordinators.push(c);
      return c;
    };
    const [a, b] = [make(), make()];
    await Promise.all([a.ready(), b.ready()]);
    // Both fences met a Redis they had not seen: each fences it whole once (raising every epoch), and hot-only data
    // written before a raise is rightly unreadable. Let both settle on one incarnation before the test writes.
    for (let i = 0; i < 3; i++) await Promise.all([a.get('only', 'settle'), b.get('only', 'settle')]);
    const w = await a.put('only', 'k', Buffer.from('v'));
    expect(w.tiers).toEqual(['hot']);
    expect((await a.get('only', 'k'))?.entry.value.toString()).toBe('v');
    expect((await b.head('only', 'k'))?.header.version).toBe(w.version);
    await b.put('only', 'k', Buffer.from('v2'));
    expect((await a.get('only', 'k'))?.entry.value.toString()).toBe('v2');
    expect((await a.listKeys('only', { limit: 10 })).keys.map((k) => k.key)).toEqual(['k']);
  });
});
