/**
 * Listing keys across the three real tiers (issue 24, items 2 and 8): redis-server as hot, a cache-node process as
 * warm, LocalStack S3 as cold, each keeping its own key order. A listing names every live key once, in order,
 * wherever it lives (in one tier or several, at different versions), never a deleted or expired one, and keeps
 * that while two coordinators write and delete around it.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { compareKeys } from '../../core/model/key-order.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { entry } from './warm-fixtures.js';
import { closeSharingTiers, startTierStack, type TierStack } from './tier-stack.js';

const NS = 'lst';

describe('listing keys across redis, a cache node and S3', () => {
  let stack: TierStack;
  let a: Coordinator;
  let b: Coordinator;
  const clock = new HybridLogicalClock();

  beforeAll(async () => {
    stack = await startTierStack('s3');
    // `lstwb` writes back: its keys live in the hot tier alone (dirty) until a flush, which no timer runs here.
    const policies = new PolicyRegistry({
      defaults: { writeTiers: ['hot', 'cold'], nearCache: { enabled: false } },
      namespaces: { lstwb: { writeMode: 'write-back' }, lsthot: { writeTiers: ['hot'] } },
    });
    const make = () =>
      new Coordinator({ tiers: [stack.hot, stack.warm, stack.cold], policies, flushTimer: false, onBackgroundError: () => {} });
    a = make();
    b = make();
  }, 180_000);

  afterAll(async () => {
    await closeSharingTiers(a, b);
    await stack?.close();
  });

  async function listAll(c: Coordinator, limit: number, prefix?: string): Promise<string[]> {
    const out: string[] = [];
    let from: { key: string; inclusive: boolean } | undefined;
    for (let i = 0; i < 500; i++) {
      const page = await c.listKeys(NS, { prefix, from, limit });
      out.push(...page.keys.map((k) => k.key));
      if (page.last === null) return out;
      from = { key: page.last, inclusive: false };
    }
    throw new Error('the listing did not end');
  }

  it('names every live key once in UTF-8 order, wherever it lives, and no deleted or expired one', async () => {
    const live: string[] = [];
    for (let i = 0; i < 40; i++) {
      const k = `both/${String(i).padStart(3, '0')}`;
      await a.put(NS, k, Buffer.from(k));
      live.push(k);
    }
    // In one tier only: warm and cold written straight into it (evicted from above, or never placed there). (A key in
    // the hot tier alone is a write-back write not yet flushed: the next test.)
    for (const [tier, name] of [
      [stack.warm, 'warm-only'],
      [stack.cold, 'cold-only'],
    ] as const) {
      for (const k of [...Array.from({ length: 15 }, (_, i) => `${name}/${i}-\u{1F600}`), `${name}/\uFFFD`]) {
        await tier.put(NS, k, entry(clock.next(), k));
        live.push(k);
      }
    }
    // Older copies in warm and cold under a delete's tombstones; an expired entry in warm.
    await stack.warm.put(NS, 'deleted', entry(clock.next(), 'old'));
    await stack.cold.put(NS, 'deleted', entry(clock.next(), 'old'));
    await b.delete(NS, 'deleted');
    await stack.warm.put(NS, 'expired', entry(clock.next(), 'x', { expiresAt: Date.now() + 50 }));
    await new Promise((r) => setTimeout(r, 80));
    await b.delete(NS, 'both/007');
    live.splice(live.indexOf('both/007'), 1);

    const expected = [...live].sort(compareKeys);
    expect(await listAll(a, 7)).toEqual(expected);
    expect(await listAll(b, 1000)).toEqual(expected);
    expect(await listAll(a, 3, 'warm-only/')).toEqual(expected.filter((k) => k.startsWith('warm-only/')));
  });

  it('names keys that live in the hot tier alone: write-back writes not yet flushed', async () => {
    const keys = [...Array.from({ length: 15 }, (_, i) => `hot-only/${i}-\u{1F600}`), 'hot-only/\uFFFD', 'z'];
    for (const k of keys) await a.put('lstwb', k, Buffer.from(k));
    const page = await b.listKeys('lstwb', { limit: 100, metadata: true });
    expect(page.keys.map((k) => k.key)).toEqual([...keys].sort(compareKeys));
    expect(new Set(page.keys.flatMap((k) => k.tiers))).toEqual(new Set(['hot']));
  });

  it('names every key of a namespace whose only tier is redis (no order there: a SCAN of the namespace)', async () => {
    const keys = ['b', 'a', '\u{1F600}', '\uFFFD', 'a/1'];
    for (const k of keys) await a.put('lsthot', k, Buffer.from(k));
    const page = await b.listKeys('lsthot', { limit: 2 });
    expect(page.keys.map((k) => k.key)).toEqual([...keys].sort(compareKeys).slice(0, 2));
    const rest = await b.listKeys('lsthot', { limit: 10, from: { key: page.last!, inclusive: false } });
    expect([...page.keys, ...rest.keys].map((k) => k.key)).toEqual([...keys].sort(compareKeys));
  });

  it('with metadata, names the tiers that hold each key at its live version', async () => {
    await a.put(NS, 'meta/placed', Buffer.from('v'));
    await stack.warm.put(NS, 'meta/warm', entry(clock.next(), 'w'));
    const page = await a.listKeys(NS, { prefix: 'meta/', limit: 10, metadata: true });
    expect(page.keys.map((k) => [k.key, k.tiers])).toEqual([
      ['meta/placed', ['hot', 'cold']],
      ['meta/warm', ['warm']],
    ]);
  });

  it('a key live for the whole listing is named exactly once while two coordinators write and delete others', async () => {
    const stable = Array.from({ length: 80 }, (_, i) => `churn/${String(i).padStart(3, '0')}`);
    for (const k of stable) await a.put(NS, k, Buffer.from(k));
    let stop = false;
    const churn = [a, b].map(async (c, w) => {
      for (let i = 0; !stop; i++) {
        const k = `churn/${String((i * 7 + w) % 80).padStart(3, '0')}~${w}`;
        await c.put(NS, k, Buffer.from('x'));
        if (i % 2) await c.delete(NS, k);
      }
    });
    const listed = await listAll(b, 9, 'churn/');
    stop = true;
    await Promise.all(churn);
    expect(listed.filter((k) => stable.includes(k))).toEqual(stable);
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort(compareKeys)).toEqual(listed);
  });
});
