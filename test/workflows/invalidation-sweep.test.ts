/**
 * The invalidation-sweep workflow (issue 24, items 1 and 3): the synthesized state machine under the local runner with
 * the real step handlers, over real tiers. It removes from every tier what a flush or a prefix invalidation covers,
 * and never a write made after the invalidation, nor one that lands between its scan and its removal.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { localWorkflows, type LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import type { SweepTotals } from '../../core/workflows/steps/sweep-steps.js';
import { localFleet, SECRET } from '../integration/warm-fixtures.js';
import { definitions } from './harness.js';

const NS = 'sweep';
const buf = (s: string) => Buffer.from(s);

describe('InvalidationSweep state machine (local runner, real step handlers)', () => {
  let hot: MemoryTier;
  let cold: MemoryTier;
  let c: Coordinator;
  let local: LocalWorkflows;
  const fleet = localFleet(); // no node is launched: the sweep needs none

  beforeEach(() => {
    hot = new MemoryTier({ name: 'hot', maxBytes: 16 << 20 });
    cold = new MemoryTier({ name: 'cold', maxBytes: 16 << 20 });
    c = new Coordinator({ tiers: [hot, cold], flushTimer: false, invalidations: { leaseMs: 20 }, hotFence: false });
    local = localWorkflows({
      definitions: definitions(),
      cas: new InMemoryCasStore(),
      fleet,
      secret: SECRET,
      tiers: { hot, cold },
      retryIntervalMs: 20,
    });
  });

  afterEach(async () => {
    await local.close();
    await c.close();
  });

  afterAll(() => fleet.closeAll());

  const keysOf = async (tier: MemoryTier) => {
    const page = await tier.scan(NS, { limit: 10_000 });
    return page.items.map((i) => i.key).sort();
  };

  it('removes the keys under an invalidated prefix from every tier, in batches, and keeps a write made after', async () => {
    for (let i = 0; i < 30; i++) await c.put(NS, `user/${i}`, buf(`u${i}`));
    for (let i = 0; i < 5; i++) await c.put(NS, `org/${i}`, buf(`o${i}`));
    await c.invalidate(NS, { prefix: 'user/' }, 'test');
    await c.put(NS, 'user/7', buf('after')); // a write after the invalidation: kept
    const done = await local.runner.wait(local.runner.start('invalidation-sweep', { ns: NS, prefix: 'user/', limit: 8 }).name);
    expect([done.status, done.error]).toEqual(['SUCCEEDED', undefined]);
    const totals = done.output as SweepTotals;
    expect(totals.removed).toBe(2 * 29);
    expect(totals.batches).toBeGreaterThan(4); // bounded batches, resumed from the cursor, tier after tier
    for (const tier of [hot, cold]) {
      expect(await keysOf(tier)).toEqual(['org/0', 'org/1', 'org/2', 'org/3', 'org/4', 'user/7']);
    }
    expect((await c.get(NS, 'user/7'))!.entry.value.toString()).toBe('after');
    const progress = await local.deps.progress.get(done.name);
    expect(progress).toMatchObject({ outcome: 'succeeded', keys: 58 });
  });

  it('after a flush removes every entry written before it, and only those', async () => {
    for (let i = 0; i < 12; i++) await c.put(NS, `k${i}`, buf('v'), { tags: ['t'] });
    await c.invalidate(NS, { flush: true }, 'test');
    await c.put(NS, 'k3', buf('kept'));
    const done = await local.runner.wait(local.runner.start('invalidation-sweep', { ns: NS }).name);
    expect(done.status).toBe('SUCCEEDED');
    for (const tier of [hot, cold]) expect(await keysOf(tier)).toEqual(['k3']);
    // A second sweep finds nothing more to remove.
    const again = await local.runner.wait(local.runner.start('invalidation-sweep', { ns: NS }).name);
    expect((again.output as SweepTotals).removed).toBe(0);
  });

  it('leaves a covered entry alone when a write replaced it between the scan and the removal', async () => {
    for (let i = 0; i < 4; i++) await c.put(NS, `k${i}`, buf('old'));
    await c.invalidate(NS, { flush: true }, 'test');
    // The tier's scan returns the old versions; right after it, k1 is written again.
    const scan = cold.scan.bind(cold);
    cold.scan = async (ns, opts) => {
      const page = await scan(ns, opts);
      await c.put(NS, 'k1', buf('new'));
      return page;
    };
    const done = await local.runner.wait(local.runner.start('invalidation-sweep', { ns: NS }).name);
    expect(done.status).toBe('SUCCEEDED');
    expect((done.output as SweepTotals).changed).toBeGreaterThanOrEqual(1);
    expect((await cold.get(NS, 'k1'))!.value.toString()).toBe('new');
    expect((await c.get(NS, 'k1'))!.entry.value.toString()).toBe('new');
  });

  it('sweeps what tag invalidations cover from the whole namespace, once their window is over', async () => {
    for (let i = 0; i < 10; i++) await c.put(NS, `k${i}`, buf('v'), { tags: [i % 2 ? 'odd' : 'even', `n${i}`] });
    await c.invalidate(NS, { tags: ['odd'] }, 'test');
    await c.invalidate(NS, { tags: ['n4'] }, 'test');
    await c.put(NS, 'k1', buf('after'), { tags: ['odd'] }); // written after: kept
    const notBefore = new Date(Date.now() + 1500).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const started = local.runner.start('invalidation-sweep', { ns: NS, notBefore });
    await new Promise((r) => setTimeout(r, 300));
    // Waiting for the window: nothing removed yet.
    expect(local.runner.describe(started.name)).toMatchObject({
      status: 'RUNNING',
      states: ['FromRequest', 'Scheduled', 'WaitForWindow'],
    });
    expect(await keysOf(cold)).toHaveLength(10);
    const done = await local.runner.wait(started.name);
    expect([done.status, done.error]).toEqual(['SUCCEEDED', undefined]);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(notBefore));
    for (const tier of [hot, cold]) expect(await keysOf(tier)).toEqual(['k0', 'k1', 'k2', 'k6', 'k8']);
    expect((await c.get(NS, 'k1'))!.entry.value.toString()).toBe('after');
  });

  it('rejects a bad request in its first state, before anything is removed', async () => {
    const done = await local.runner.wait(local.runner.start('invalidation-sweep', { ns: 'Not A Namespace' }).name);
    expect(done.status).toBe('FAILED');
    expect(done.states).toEqual(['FromRequest', 'Scheduled', 'Begin']);
  });
});
