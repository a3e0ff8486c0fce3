/**
 * The scheduled evaluator's clock (core/policy/ticker.ts) and memory (evaluator snapshots): a policy without
 * sub-minute timers ticks once a minute, one with them ticks again within the minute's execution and stops before
 * the next one starts; an evaluator resumed from a snapshot carries on exactly where the previous one stopped.
 */
import { compilePolicyInput } from '../../core/policy/compile.js';
import { BackgroundEvaluator, type EvaluatorActions } from '../../core/policy/evaluator.js';
import { EvaluatorStateStore } from '../../core/policy/evaluator-store.js';
import { nextTick, shortestTimerSeconds, TICK_WINDOW_MS } from '../../core/policy/ticker.js';
import { InMemoryCasStore } from '../../core/ring/store.js';

const timer = (id: string, everySeconds: number) => ({ id, on: { timer: { everySeconds } }, do: [{ alert: { message: id } }] });
const compile = (rules: unknown[]) => compilePolicyInput({ rules }, { background: true, defaults: false });

describe('the ticker', () => {
  it('ticks once a minute for a policy without sub-minute timers', () => {
    const p = compile([timer('hourly', 3600)]);
    expect(shortestTimerSeconds(p)).toBe(3600);
    expect(nextTick(p, 0, 1000)).toEqual({ again: false, waitSeconds: 59 });
    expect(nextTick(compile([]), 0, 1000)).toEqual({ again: false, waitSeconds: 59 });
  });

  it('ticks again within the minute at the shortest timer (or write-back flush), and stops before the window ends', () => {
    const p = compile([timer('fast', 2.5), timer('slow', 20)]);
    expect(shortestTimerSeconds(p)).toBe(3);
    expect(nextTick(p, 0, 1000)).toEqual({ again: true, waitSeconds: 3 });
    expect(nextTick(p, 0, 1000, 1)).toEqual({ again: true, waitSeconds: 1 });
    // The state machine's Wait takes whole seconds: a 1.5 s flush interval waits 2.
    expect(nextTick(p, 0, 1000, 1.5)).toEqual({ again: true, waitSeconds: 2 });
    expect(nextTick(p, 0, TICK_WINDOW_MS - 2000)).toEqual({ again: false, waitSeconds: 3 });
  });
});

describe('an evaluator resumed from its snapshot', () => {
  const actions: EvaluatorActions = {
    fleetSize: async () => 1,
    scaling: async () => false,
    scaleOut: async () => 'x',
    scaleIn: async () => 'x',
  };

  it('keeps its timers and history across invocations through the store', async () => {
    const p = compile([timer('every-10s', 10)]);
    const store = new EvaluatorStateStore(new InMemoryCasStore());
    let now = 1_000_000;
    const tick = async () => {
      const saved = await store.load();
      const ev = new BackgroundEvaluator({
        actions,
        state: async () => ({ tiers: {} }),
        now: () => now,
        ...(saved ? { resume: saved.snapshot } : {}),
      });
      const fired = await ev.tick(p);
      expect(await store.save(ev.snapshot(), saved?.etag ?? null)).toBe(true);
      return fired.map((f) => f.rule);
    };
    expect(await tick()).toEqual([]); // the first tick starts the clock
    now += 5_000;
    expect(await tick()).toEqual([]);
    now += 5_000;
    expect(await tick()).toEqual(['every-10s']);
    now += 1_000;
    expect(await tick()).toEqual([]);
    expect((await store.load())!.snapshot.history).toHaveLength(1);
  });

  it('of two overlapping ticks, the second to save loses (its state is dropped, never merged)', async () => {
    const store = new EvaluatorStateStore(new InMemoryCasStore());
    const ev = new BackgroundEvaluator({ actions, state: async () => ({ tiers: {} }) });
    expect(await store.save(ev.snapshot(), null)).toBe(true);
    const a = await store.load();
    const b = await store.load();
    expect(await store.save(ev.snapshot(), a!.etag)).toBe(true);
    expect(await store.save(ev.snapshot(), b!.etag)).toBe(false);
  });
});
