/**
 * The scheduled evaluator's background jobs (core/policy/jobs.ts, job-runner.ts): the evaluator queues a copy, move,
 * delete or blob collection on the board; the job runner works through it in budgeted slices, each leaving a place
 * to go on from; the evaluator's next tick records the end. What must hold: a run cut into many slices does exactly
 * what one run does (nothing skipped, nothing counted twice); a move racing newer writes between slices never removes
 * them; a job whose rule left the policy stops; one runner per job at a time, and a dead runner's job is taken up
 * after its lease; the board never loses a writer's change. In-memory tiers and store: the real tiers are in
 * test/integration/policy-jobs.test.ts.
 */
import { LOGICAL_BITS } from '../../core/model/hlc.js';
import { blobKey } from '../../core/model/entry.js';
import { compilePolicyInput, type CompiledPolicy } from '../../core/policy/compile.js';
import { runTransfer, type TransferResult } from '../../core/policy/data-mover.js';
import { collectBlobs } from '../../core/policy/dedup-gc.js';
import { BackgroundEvaluator, type EvaluatorSnapshot } from '../../core/policy/evaluator.js';
import { runJobs } from '../../core/policy/job-runner.js';
import { JobBoard, MAX_JOBS } from '../../core/policy/jobs.js';
import { InMemoryCasStore } from '../../core/ring/store.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { entry } from '../helpers/tiers.js';

const NS = 'jobs';
const BASE = Date.now() - 60_000;
const version = (n: number) => BASE * LOGICAL_BITS + n;

/** Warm and cold in memory, warm holding `n` entries k000..; `clock` advances 10 ms per write into cold. */
async function tiersWith(n: number) {
  const warm = new MemoryTier({ name: 'warm' });
  const cold = new MemoryTier({ name: 'cold' });
  for (let i = 0; i < n; i++) await warm.put(NS, `k${String(i).padStart(3, '0')}`, entry(version(i), `v${i}`));
  const clock = { t: 1_000_000 };
  const put = cold.put.bind(cold);
  cold.put = async (...a) => {
    clock.t += 10;
    return put(...a);
  };
  return { warm, cold, clock, tiers: [warm, cold] };
}

const copyPolicy = (kind: 'copy' | 'move' = 'copy', extra: Record<string, unknown> = {}): CompiledPolicy =>
  compilePolicyInput(
    {
      rules: [
        {
          id: 'backup',
          scope: { namespace: NS },
          on: { timer: { everySeconds: 60 } },
          do: [{ [kind]: { from: 'warm', to: ['cold'], ...extra } }],
        },
      ],
    },
    { background: true },
  );

const noRules = compilePolicyInput({ rules: [] }, { background: true });

/** The scheduled evaluator as one Lambda invocation builds it: from the stored snapshot, with the board. */
function evaluatorAt(board: JobBoard, now: () => number, resume?: EvaluatorSnapshot) {
  return new BackgroundEvaluator({
    actions: {
      fleetSize: async () => 1,
      scaling: async () => false,
      scaleOut: async () => 'x',
      scaleIn: async () => 'x',
      jobs: board,
    },
    state: async () => ({ tiers: {} }),
    now,
    ...(resume ? { resume } : {}),
  });
}

describe('the job board', () => {
  it('keeps every concurrent writer’s change (compare-and-set, re-applied on the newest board)', async () => {
    const board = new JobBoard(new InMemoryCasStore());
    const ids = Array.from({ length: 8 }, (_, i) => `r${i}\u00000`);
    const results = await Promise.all(ids.map((id) => board.submit({ id, rule: id.split('\u0000')[0]!, kind: 'copy' })));
    expect(results.every(Boolean)).toBe(true);
    expect((await board.list()).map((j) => j.id).sort()).toEqual([...ids].sort());
  });

  it('queues one job per rule and response, and refuses past its bound with a message', async () => {
    const board = new JobBoard(new InMemoryCasStore());
    expect(await board.submit({ id: 'a\u00000', rule: 'a', kind: 'copy' })).toBe(true);
    expect(await board.submit({ id: 'a\u00000', rule: 'a', kind: 'copy' })).toBe(false);
    for (let i = 1; i < MAX_JOBS; i++) await board.submit({ id: `b${i}\u00000`, rule: `b${i}`, kind: 'copy' });
    await expect(board.submit({ id: 'c\u00000', rule: 'c', kind: 'copy' })).rejects.toThrow(/board is full \(100 jobs\)/);
  });

  it('a poll takes finished jobs off and says when an active one has no runner', async () => {
    let now = 1000;
    const board = new JobBoard(new InMemoryCasStore(), () => now);
    await board.submit({ id: 'a\u00000', rule: 'a', kind: 'copy' });
    expect(await board.poll()).toEqual({ active: ['a\u00000'], waiting: true, finished: [] });
    await board.update((jobs) => ({ jobs: jobs.map((j) => ({ ...j, lease: { by: 'r1', until: 5000 } })), value: 0 }));
    expect((await board.poll()).waiting).toBe(false);
    now = 5000; // the lease ran out: its runner died
    expect((await board.poll()).waiting).toBe(true);
    await board.update((jobs) => ({
      jobs: jobs.map((j) => ({ ...j, finished: { at: now, outcome: 'done' as const, detail: 'ok' } })),
      value: 0,
    }));
    const polled = await board.poll();
    expect(polled.finished.map((j) => j.id)).toEqual(['a\u00000']);
    expect(await board.list()).toEqual([]);
  });
});

describe('a copy cut into slices (data-mover resume)', () => {
  it.each([1, 7, 100])('does what one run does, page size %i: every entry copied once, none skipped', async (pageSize) => {
    const { warm, cold, clock } = await tiersWith(250);
    const spec = { rule: 'r', kind: 'copy' as const, ns: NS, from: warm, to: [cold], what: [], durable: [warm, cold] };
    let resume: TransferResult['resume'];
    let copied = 0;
    let scanned = 0;
    let slices = 0;
    do {
      // Each slice may write about nine entries before its deadline.
      const r = await runTransfer(spec, { ...(resume ? { resume } : {}), deadline: clock.t + 95, now: () => clock.t, pageSize });
      copied += r.copied;
      scanned += r.scanned;
      resume = r.resume;
      slices++;
    } while (resume && slices < 1000);
    expect(resume).toBeUndefined();
    expect(slices).toBeGreaterThan(20);
    expect(copied).toBe(250);
    expect(scanned).toBe(250);
    for (let i = 0; i < 250; i += 17) expect(await cold.head(NS, `k${String(i).padStart(3, '0')}`)).toBeDefined();
  });
});

describe('the job runner', () => {
  it('a copy queued by the evaluator runs across invocations, and the next tick records its end', async () => {
    const { cold, clock, tiers } = await tiersWith(120);
    const board = new JobBoard(new InMemoryCasStore(), () => clock.t);
    const policy = copyPolicy();
    let snapshot: EvaluatorSnapshot | undefined;
    // Tick 1 starts the timer's clock, tick 2 (a minute on) fires: the copy is queued, and a runner is wanted.
    for (const _ of [0, 1]) {
      clock.t += 61_000;
      const ev = evaluatorAt(board, () => clock.t, snapshot);
      const fired = await ev.tick(policy);
      snapshot = ev.snapshot();
      if (fired.length) {
        expect(fired[0]).toMatchObject({ rule: 'backup', response: 'copy', outcome: 'done' });
        expect(fired[0]!.detail).toMatch(/copy queued for the job runner \(jobs: warm → cold\)/);
        expect(ev.jobsWaitingForRunner).toBe(true);
      }
    }
    let invocations = 0;
    for (;;) {
      invocations++;
      const report = await runJobs({
        board,
        tiers,
        policy: () => policy,
        deadline: clock.t + 200,
        owner: `inv${invocations}`,
        now: () => clock.t,
      });
      if (report.finished || invocations > 100) break;
      // Between invocations the evaluator sees the job still running (no second copy queued).
      clock.t += 1000;
      const ev = evaluatorAt(board, () => clock.t, snapshot);
      await ev.tick(policy);
      snapshot = ev.snapshot();
      expect(ev.jobsWaitingForRunner).toBe(true);
    }
    expect(invocations).toBeGreaterThan(3);
    const ev = evaluatorAt(board, () => clock.t, snapshot);
    await ev.tick(policy);
    expect(ev.firings(1)[0]).toMatchObject({
      rule: 'backup',
      response: 'copy',
      outcome: 'done',
      detail: expect.stringMatching(
        new RegExp(`copy finished: 120 of 120 entries selected, 120 copied .*\\(${invocations} runs\\)`),
      ),
    });
    expect(await board.list()).toEqual([]);
    expect(ev.snapshot().jobs).toBeUndefined(); // nothing on the board: later ticks do not read it
    expect(ev.snapshot().transferredSince?.['backup\u00000']).toBeDefined();
    expect((await cold.head(NS, 'k119'))!.version).toBe(version(119));
  });

  it('a move racing newer writes between slices never removes them from the source', async () => {
    const { warm, cold, clock, tiers } = await tiersWith(60);
    const board = new JobBoard(new InMemoryCasStore(), () => clock.t);
    const policy = copyPolicy('move');
    await board.submit({
      id: 'backup\u00000',
      rule: 'backup',
      kind: 'move',
      transfer: { rule: 'backup', kind: 'move', ns: NS, from: 'warm', to: ['cold'], what: [] },
    });
    const latest = new Map<string, number>();
    for (let i = 0; i < 60; i++) latest.set(`k${String(i).padStart(3, '0')}`, version(i));
    let round = 0;
    for (;;) {
      const owner = `r${round}`;
      const r = await runJobs({ board, tiers, policy: () => policy, deadline: clock.t + 100, owner, now: () => clock.t });
      if (r.finished) break;
      // A newer write of keys done and keys not yet done lands in warm between two slices.
      round++;
      for (let i = round; i < 60; i += 9) {
        const key = `k${String(i).padStart(3, '0')}`;
        await warm.put(NS, key, entry(version(1000 * round + i), `new ${round}`));
        latest.set(key, version(1000 * round + i));
      }
    }
    expect(round).toBeGreaterThan(2);
    for (const [key, newest] of latest) {
      const inWarm = await warm.head(NS, key);
      const inCold = await cold.head(NS, key);
      // Nothing lost: the newest version acknowledged is in warm (written after the move passed it) or in cold.
      expect(Math.max(inWarm?.version ?? 0, inCold?.version ?? 0)).toBe(newest);
      // The move removed from warm only what cold holds.
      if (inWarm && inWarm.version !== newest) expect(inCold?.version).toBe(newest);
    }
  });

  it('stops a job whose rule left the policy, and the evaluator records why', async () => {
    const { clock, tiers } = await tiersWith(40);
    const board = new JobBoard(new InMemoryCasStore(), () => clock.t);
    await board.submit({
      id: 'backup\u00000',
      rule: 'backup',
      kind: 'copy',
      transfer: { rule: 'backup', kind: 'copy', ns: NS, from: 'warm', to: ['cold'], what: [] },
    });
    const r = await runJobs({ board, tiers, policy: () => noRules, deadline: clock.t + 10_000, owner: 'r', now: () => clock.t });
    expect(r).toEqual({ ran: 1, finished: 1 });
    const ev = evaluatorAt(board, () => clock.t, {
      history: [],
      lastTimer: {},
      holding: {},
      started: [],
      lastEntry: {},
      jobs: true,
    });
    await ev.tick(noRules);
    expect(ev.firings(1)[0]).toMatchObject({ outcome: 'skipped', detail: 'copy stopped: the rule left the policy' });
  });

  it('one runner per job: a live lease is left alone, an expired one is taken up where it stopped', async () => {
    const { cold, clock, tiers } = await tiersWith(30);
    const board = new JobBoard(new InMemoryCasStore(), () => clock.t);
    await board.submit({
      id: 'backup\u00000',
      rule: 'backup',
      kind: 'copy',
      transfer: { rule: 'backup', kind: 'copy', ns: NS, from: 'warm', to: ['cold'], what: [] },
    });
    await board.update((jobs) => ({
      jobs: jobs.map((j) => ({ ...j, lease: { by: 'other', until: clock.t + 5000 } })),
      value: 0,
    }));
    const policy = copyPolicy();
    expect(
      await runJobs({ board, tiers, policy: () => policy, deadline: clock.t + 1000, owner: 'me', now: () => clock.t }),
    ).toEqual({
      ran: 0,
      finished: 0,
    });
    expect(await cold.head(NS, 'k000')).toBeUndefined();
    clock.t += 5000; // the other runner died: its lease ran out
    expect(
      await runJobs({ board, tiers, policy: () => policy, deadline: clock.t + 10_000, owner: 'me', now: () => clock.t }),
    ).toEqual({
      ran: 1,
      finished: 1,
    });
    expect(await cold.head(NS, 'k029')).toBeDefined();
  });
});

describe('a blob collection cut short', () => {
  it('stops at its deadline with what it condemned kept, and the next run removes the blob', async () => {
    const cold = new MemoryTier({ name: 'cold' });
    const address = 'a'.repeat(64);
    await cold.put(NS, blobKey(address), entry(version(1), 'shared bytes'));
    for (let i = 0; i < 20; i++) await cold.put(NS, `plain${i}`, entry(version(i), 'x'));
    let t = Date.now();
    const first = await collectBlobs({
      ns: NS,
      authority: cold,
      tiers: [cold],
      pageSize: 5,
      now: () => (t += 1),
      deadline: t + 12,
    });
    expect(first.incomplete).toBe(true);
    expect(await cold.head(NS, blobKey(address))).toBeDefined();
    const second = await collectBlobs({ ns: NS, authority: cold, tiers: [cold], pageSize: 5 });
    expect(second.incomplete).toBeUndefined();
    expect(second.removed).toBe(1);
    expect(await cold.head(NS, blobKey(address))).toBeUndefined();
  });
});
