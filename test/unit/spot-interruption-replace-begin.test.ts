/**
 * The failure path behind a spot drain that ran out of time: the node dies mid-drain, the detector marks it DOWN
 * (locally 5-8 s after, sooner than the drain's stream retries and rollback may end), and replace-node starts at
 * once. Its Begin used to fail then (a range of the node still pending, the ScaleIn's lock still held), and the
 * replacement had to be started again by hand. Begin now waits, bounded, for that migration to end or roll back.
 */
import { PERMANENT_ERRORS } from '../../cdk/constructs/workflows/step-task.js';
import { initialRing, markDown } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { LOCAL_FLEET_SUBNETS } from '../../core/workflows/steps/fleet-placement.js';
import { ProgressStore, ScaleLocks } from '../../core/workflows/progress.js';
import { NodeMigrationInFlightError, replaceSteps } from '../../core/workflows/steps/replace-steps.js';

const DRAIN = 'spot-drain-n2';

/** n2 DOWN in the middle of its drain: its first range pending to its successor, the ScaleIn holding its lock. */
async function setup(o: { pending?: boolean; locked?: boolean; beginWaitMs?: number; onSleep?: (n: number) => Promise<void> }) {
  const cas = new InMemoryCasStore();
  const ring = new RingStore(cas);
  const locks = new ScaleLocks(cas);
  const progress = new ProgressStore(cas);
  await ring.create(
    initialRing(
      ['n1', 'n2', 'n3', 'n4'].map((id, k) => ({ id, url: `http://127.0.0.1:${7001 + k}` })),
      2,
    ),
  );
  await ring.update((d, next) => {
    if (o.pending ?? true) {
      const i = d.ranges.findIndex((r) => r.owner === 'n2');
      d.ranges[i]!.pending = { target: d.ranges[(i + 1) % d.ranges.length]!.owner, session: 'p-drain-s0' };
    }
    d.nodes.find((n) => n.id === 'n2')!.state = 'LEAVING';
    markDown(d, 'n2', next, 'test: killed mid-drain');
  });
  if (o.locked ?? true) expect(await locks.acquire('n2', DRAIN)).toBe(true);
  let clock = 0;
  let sleeps = 0;
  const steps = replaceSteps({
    ring,
    nodes: undefined as never,
    progress,
    locks,
    metric: () => {},
    now: () => clock,
    fleetSubnets: LOCAL_FLEET_SUBNETS,
    tiers: {},
    beginWaitMs: o.beginWaitMs ?? 10_000,
    sleep: async (ms) => {
      clock += ms;
      await o.onSleep?.(++sleeps);
    },
  });
  /** What the drain's rollback does: its pending mark released (one ring edit), then its lock. */
  const rollBack = async () => {
    await ring.update((d) => {
      for (const r of d.ranges) delete r.pending;
    });
    await locks.release('n2', DRAIN);
  };
  const begin = () => steps.begin({ execution: 'replace-node-n2-v9', workflow: 'replace-node', nodeId: 'n2' });
  return { steps, ring, locks, progress, rollBack, begin, sleeps: () => sleeps };
}

describe('ReplaceNode Begin, while a migration of the DOWN node is still ending', () => {
  it('waits for the rolling-back drain (pending range, then lock) and goes on once it ended', async () => {
    const s: Awaited<ReturnType<typeof setup>> = await setup({ onSleep: async (n) => void (n === 3 && (await s.rollBack())) });
    const out = await s.begin();
    expect(out).toMatchObject({ nodeId: 'n2', launch: { clientToken: expect.any(String) } });
    expect(s.sleeps()).toBe(3);
    // The replacement holds the node now: no scale execution can begin on it.
    expect(await s.locks.acquire('n2', 'another-execution')).toBe(false);
    expect((await s.progress.get('replace-node-n2-v9'))?.phase).toMatch(/launching a replacement/);
  });

  it('waits for a lock held without a pending range (between two sessions of an incremental drain)', async () => {
    const s: Awaited<ReturnType<typeof setup>> = await setup({
      pending: false,
      onSleep: async (n) => void (n === 2 && (await s.locks.release('n2', DRAIN))),
    });
    await expect(s.begin()).resolves.toMatchObject({ nodeId: 'n2' });
    expect(s.sleeps()).toBe(2);
  });

  it('records that it waits, in the execution progress', async () => {
    let phase: string | undefined;
    const s: Awaited<ReturnType<typeof setup>> = await setup({
      onSleep: async (n) => {
        phase ??= (await s.progress.get('replace-node-n2-v9'))?.phase;
        if (n === 1) await s.rollBack();
      },
    });
    await s.begin();
    expect(phase).toMatch(/waiting for the migration involving n2 to end or roll back: range .* is migrating/);
  });

  it('gives up after its wait with an error Step Functions retries (not a permanent one), holding no lock', async () => {
    const s = await setup({ beginWaitMs: 5000 });
    const e = await s.begin().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeMigrationInFlightError);
    expect(PERMANENT_ERRORS).not.toContain((e as Error).name);
    expect((e as Error).message).toMatch(/'n2' cannot be replaced yet: range .* is migrating .*\(waited 5 s\)/);
    await s.rollBack();
    // A retry of the step, after the rollback: the lock was never taken by the failed attempt.
    await expect(s.begin()).resolves.toMatchObject({ nodeId: 'n2' });
  });

  it('still refuses at once, permanently, a node that is not DOWN', async () => {
    const s = await setup({ pending: false, locked: false });
    await s.ring.update((d) => {
      const n = d.nodes.find((x) => x.id === 'n2')!;
      n.state = 'NORMAL';
      delete n.down;
    });
    await expect(s.begin()).rejects.toThrow(/is NORMAL, not DOWN/);
    expect(s.sleeps()).toBe(0);
  });
});
