/**
 * Fencing a migration plan's steps by its rollback and by execution (issue 23, item 4), deterministically: a
 * ring compare-and-set held at the moment it would be written while a rollback runs, the steps of a rolled-back
 * plan or of another execution called directly, and a rollback whose source and target are both dead.
 */
import { RingPreconditionError, InMemoryCasStore } from '../../core/ring/store.js';
import { ringProblem } from '../../core/ring/document.js';
import { stepHandlers } from '../../core/workflows/steps/handlers.js';
import { contentHash } from '../../core/model/keys.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { harness, type Harness } from './harness.js';

/** The harness's store, able to hold the next write of the ring document until released. */
class GatedStore extends InMemoryCasStore {
  private gate?: { entered: () => void; released: Promise<void> };

  /** Holds the next ring write: `entered` resolves when it is waiting, `release` lets it go on. */
  holdNextRingWrite(): { entered: Promise<void>; release: () => void } {
    let release!: () => void;
    let entered!: () => void;
    const enteredP = new Promise<void>((r) => (entered = r));
    const released = new Promise<void>((r) => (release = r));
    this.gate = { entered, released };
    return { entered: enteredP, release };
  }

  /** Drops a hold no write took. */
  cancelHold(): void {
    this.gate = undefined;
  }

  override async put(key: string, body: string, ifEtag: string | null): Promise<string> {
    const gate = key === 'ring.json' ? this.gate : undefined;
    if (gate) {
      this.gate = undefined;
      gate.entered();
      await gate.released;
    }
    return super.put(key, body, ifEtag);
  }
}

const EXEC = 'scale-out-exec-1';

/** n4 joins: a plan (incremental) over the three nodes, planned by execution EXEC, after some data was written. */
async function planned(h: Harness) {
  const doc = (await h.ring.load())!;
  const items = Array.from({ length: 600 }, (_, i) => ({ key: `k${i}`, value: Buffer.alloc(64, i % 251) }));
  const warm = new WarmTier({ ring: new RingView({ initial: doc, refreshIntervalMs: 0 }), client: h.client, ownsRing: true });
  await warm.putMany(
    'fence',
    items.map((it, i) => ({
      key: it.key,
      entry: {
        header: { version: i + 1, expiresAt: null, size: 64, hash: contentHash(it.value), tags: [], flags: {} },
        value: it.value,
      },
    })),
  );
  await warm.close();
  const n4 = await h.fleet.launch('n4');
  const plan = await h.migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'incremental', execution: EXEC });
  expect(plan.sessions.length).toBeGreaterThanOrEqual(2);
  return { plan, n4 };
}

async function streamToEnd(h: Harness, id: string) {
  while (!(await h.migrator.stream(id, { execution: EXEC })).done);
}

describe('fencing a migration plan by its rollback and by execution', () => {
  it('a prepare that read the plan before the rollback cannot land after the rollback’s ring edit', async () => {
    const cas = new GatedStore();
    const h = await harness({ cas });
    try {
      const { plan } = await planned(h);
      const [s0, s1] = plan.sessions as [string, string];
      await h.migrator.prepare(s0, { execution: EXEC });
      await streamToEnd(h, s0);
      await h.migrator.publish([s0], { execution: EXEC });

      // The next session's prepare (a Map iteration going on after a sibling failed) checks the plan, then is held
      // just before its ring write while the rollback fences the plan and writes the ring.
      // A prepare that ends before its ring write (a node call timing out on a loaded machine: the workflow would
      // retry the step) is started again, so the gate never waits for a write that is not coming.
      let held = cas.holdNextRingWrite();
      let preparing = h.migrator.prepare(s1, { execution: EXEC });
      for (let attempt = 1; ; attempt++) {
        const first = await Promise.race([
          held.entered.then(() => 'held' as const),
          preparing.then(
            () => 'ended' as const,
            () => 'ended' as const,
          ),
        ]);
        if (first === 'held') break;
        if (attempt >= 3)
          throw new Error(`prepare ended without writing the ring: ${String(await preparing.catch((e: unknown) => e))}`);
        cas.cancelHold();
        held = cas.holdNextRingWrite();
        preparing = h.migrator.prepare(s1, { execution: EXEC });
      }
      const rolled = await h.migrator.rollbackPlan(plan.id, { execution: EXEC, reason: 'test' });
      held.release();
      await expect(preparing).rejects.toThrow(RingPreconditionError);
      await expect(preparing).rejects.toThrow(/rolled back/);

      // n4 keeps the span it took over and is NORMAL; nothing is pending.
      expect(rolled.state).toBe('done');
      expect(rolled.rollback).toMatchObject({ execution: EXEC, reason: 'test' });
      const ring = (await h.ring.load())!;
      expect(ringProblem(ring)).toBeUndefined();
      expect(ring.ranges.filter((r) => r.pending)).toEqual([]);
      expect(ring.nodes.find((n) => n.id === 'n4')?.state).toBe('NORMAL');
      expect(ring.ranges.some((r) => r.owner === 'n4')).toBe(true);
      expect((await h.migrator.session(s0)).state).toBe('published');
      expect((await h.migrator.session(s1)).state).toBe('rolled-back');
    } finally {
      await h.close();
    }
  }, 300_000);

  it('the steps of a rolled-back plan refuse to act, and so do the steps of another execution', async () => {
    const h = await harness();
    try {
      const { plan } = await planned(h);
      const [s0, s1] = plan.sessions as [string, string];
      const steps = stepHandlers(h.deps);
      const base = { execution: EXEC, workflow: 'scale-out' };

      // Another execution's steps do not act on this plan.
      const other = { ...base, execution: 'scale-out-exec-2' };
      await expect(steps['migrate.prepare']({ ...other, sessionId: s0 })).rejects.toThrow(/belongs to execution/);
      expect((await h.ring.load())!.ranges.some((r) => r.pending)).toBe(false);

      await steps['migrate.prepare']({ ...base, sessionId: s0 });
      await streamToEnd(h, s0);
      await steps['migrate.rollback']({ ...base, state: { plan: { planId: plan.id }, error: { Error: 'Injected' } } });
      const ringAfter = (await h.ring.load())!;
      expect(ringAfter.ranges.some((r) => r.pending)).toBe(false);

      const refused = [
        steps['migrate.prepare']({ ...base, sessionId: s1 }),
        steps['migrate.stream']({ ...base, sessionId: s1 }),
        steps['migrate.publish']({ ...base, sessionIds: [s0] }),
        steps['migrate.finish']({ ...base, planId: plan.id }),
        steps['migrate.cleanup']({ ...base, planId: plan.id }),
      ];
      for (const r of refused) await expect(r).rejects.toThrow(RingPreconditionError);
      // Nothing changed: the ring is as the rollback left it.
      expect((await h.ring.load())!.version).toBe(ringAfter.version);
      expect((await h.migrator.plan(plan.id)).state).toBe('rolled-back');
    } finally {
      await h.close();
    }
  }, 300_000);

  it('a rollback whose source and target are both dead completes: a ring edit, with what it could not do recorded', async () => {
    const h = await harness();
    try {
      const { plan } = await planned(h);
      const [s0] = plan.sessions as [string];
      await h.migrator.prepare(s0, { execution: EXEC });
      await h.migrator.stream(s0, { execution: EXEC, maxMs: 100, rateBytesPerSec: 20_000, batchBytes: 4096 });
      const source = (await h.migrator.session(s0)).source;
      await h.fleet.kill(source, 'SIGKILL');
      await h.fleet.kill('n4', 'SIGKILL');

      const rolled = await h.migrator.rollbackPlan(plan.id, { execution: EXEC, reason: 'both nodes died' });
      expect(rolled.state).toBe('rolled-back');
      expect(rolled.rollback!.warnings.join('\n')).toMatch(new RegExp(`not pushed to '${source}'`));
      expect(rolled.rollback!.warnings.join('\n')).toMatch(/partial copy on 'n4' was not dropped/);
      const ring = (await h.ring.load())!;
      expect(ringProblem(ring)).toBeUndefined();
      expect(ring.ranges.filter((r) => r.pending)).toEqual([]);
      expect(ring.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3']); // n4 owned nothing: it left
      expect((await h.migrator.session(s0)).state).toBe('rolled-back');
      // Rolling back again changes nothing.
      expect((await h.migrator.rollbackPlan(plan.id)).state).toBe('rolled-back');
    } finally {
      await h.close();
    }
  }, 300_000);
});
