/**
 * The background executor: when timer and threshold rules fire, and what the controls let them do. Actions are a
 * recording stand-in for the workflows (ScaleOut/ScaleIn are tested end to end in test/workflows/); the rules,
 * the policy and the evaluator are the real ones. `npm start` ticks it (test/integration/start-local-warm.test.ts
 * runs a grow rule end to end); runtimes without one refuse these responses (compile.ts CompileOptions).
 */
import { compilePolicyInput } from '../../core/policy/compile.js';
import type { PolicyDocumentInput } from '../../core/policy/document.js';
import { BackgroundEvaluator, type EvaluatorActions, type Firing } from '../../core/policy/evaluator.js';
import type { PolicyState } from '../../core/policy/preview.js';

function harness(doc: PolicyDocumentInput, fleet = 4) {
  let now = 1_000_000;
  let state: PolicyState = { tiers: { warm: { fillPercent: 10 } }, cost: { total: 10, byTier: {}, byNamespace: {} } };
  const started: string[] = [];
  let size = fleet;
  let scaling = false;
  const actions: EvaluatorActions = {
    fleetSize: async () => size,
    scaling: async () => scaling,
    // One node per execution, as ScaleOut and ScaleIn do.
    scaleOut: async (reason) => {
      started.push(`out: ${reason}`);
      size += 1;
      return `exec-${started.length}`;
    },
    scaleIn: async (reason) => {
      started.push(`in: ${reason}`);
      size -= 1;
      return `exec-${started.length}`;
    },
    evict: async (reason) => {
      started.push(`evict: ${reason}`);
      return `exec-${started.length}`;
    },
  };
  const metrics: Firing[] = [];
  const ev = new BackgroundEvaluator({ actions, state: async () => state, now: () => now, onFiring: (f) => metrics.push(f) });
  // A runtime with the background evaluator accepts its responses (compile.ts CompileOptions).
  const policy = compilePolicyInput(doc, { background: true });
  return {
    ev,
    started,
    metrics,
    tick: (advanceMs: number) => ((now += advanceMs), ev.tick(policy)),
    setState: (s: PolicyState) => (state = s),
    setScaling: (v: boolean) => (scaling = v),
  };
}

const fill = (percent: number): PolicyState => ({ tiers: { warm: { fillPercent: percent } } });

describe('the background evaluator', () => {
  it('growing: grows the warm fleet by 100% when it stays 75% full for a minute, one node per ScaleOut, once', async () => {
    const h = harness({ namespaces: { '*': { preset: 'growing' } } }, 2);
    h.setState(fill(80));
    expect(await h.tick(0)).toEqual([]); // holds, but not for a minute yet
    expect(await h.tick(30_000)).toEqual([]);
    expect(await h.tick(30_000)).toEqual([
      expect.objectContaining({
        rule: 'all-grow',
        response: 'grow',
        outcome: 'done',
        detail: 'ScaleOut 1 of 2 (execution exec-1)',
      }),
    ]);
    // The second node once the first ScaleOut has finished.
    h.setScaling(true);
    expect(await h.tick(1000)).toEqual([]);
    h.setScaling(false);
    expect(await h.tick(1000)).toEqual([
      expect.objectContaining({ rule: 'all-grow', detail: 'ScaleOut 2 of 2 (execution exec-2)' }),
    ]);
    expect(await h.tick(60_000)).toEqual([]); // still full: edge-triggered, no second grow
    h.setState(fill(40));
    await h.tick(1000);
    h.setState(fill(90));
    await h.tick(1000);
    expect(await h.tick(60_000)).toEqual([expect.objectContaining({ detail: 'ScaleOut 1 of 4 (execution exec-3)' })]);
    expect(h.started[0]).toBe('out: policy rule all-grow (1 of 2)');
  });

  it('never grows past maxFleetSize nor shrinks below minFleetSize, across a multi-node plan', async () => {
    const rules: PolicyDocumentInput['rules'] = [
      {
        id: 'up',
        on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: 75 } },
        do: [{ grow: { tier: 'warm', nodes: 10 } }],
      },
      {
        id: 'down',
        on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '<', value: 5 } },
        do: [{ shrink: { tier: 'warm', nodes: 10 } }],
      },
    ];
    const h = harness({ rules, controls: { maxFleetSize: 6, minFleetSize: 2, maxActionsPerMinute: 100 } }, 4);
    h.setState(fill(90));
    expect(await h.tick(1)).toEqual([expect.objectContaining({ rule: 'up', detail: 'ScaleOut 1 of 2 (execution exec-1)' })]);
    expect(await h.tick(1)).toEqual([expect.objectContaining({ rule: 'up', detail: 'ScaleOut 2 of 2 (execution exec-2)' })]);
    h.setState(fill(50));
    await h.tick(1);
    h.setState(fill(95));
    expect(await h.tick(1)).toEqual([
      expect.objectContaining({ outcome: 'skipped', detail: 'the fleet is at controls.maxFleetSize (6)' }),
    ]);
    h.setState(fill(1));
    const shrinks: string[] = [];
    for (let i = 0; i < 6; i++) shrinks.push(...(await h.tick(1)).map((f) => f.detail));
    expect(shrinks).toEqual([1, 2, 3, 4].map((n) => `ScaleIn ${n} of 4 (execution exec-${n + 2})`));
  });

  it('drops the rest of a plan when the kill switch is thrown or the rule is removed', async () => {
    const grow = { id: 'up', on: { timer: { everySeconds: 1 } }, do: [{ grow: { tier: 'warm' as const, nodes: 3 } }] };
    const h = harness({ rules: [grow], controls: { maxFleetSize: 50 } }, 2);
    await h.tick(0);
    expect((await h.tick(1000))[0]).toMatchObject({ detail: 'ScaleOut 1 of 3 (execution exec-1)' });
    const off = compilePolicyInput({ rules: [grow], controls: { backgroundEnabled: false } }, { background: true });
    expect(await h.ev.tick(off)).toEqual([
      expect.objectContaining({ outcome: 'suppressed', detail: '2 more node(s) dropped: background actions are switched off' }),
    ]);
    // A new plan, then a policy without its rule.
    expect((await h.tick(1000))[0]).toMatchObject({ detail: 'ScaleOut 1 of 3 (execution exec-2)' });
    expect(await h.ev.tick(compilePolicyInput({}, { background: true }))).toEqual([
      expect.objectContaining({ outcome: 'skipped', detail: '2 more node(s) dropped: the rule is no longer in the policy' }),
    ]);
    expect(h.started).toHaveLength(2);
  });

  it('the kill switch suppresses actions but still records the firing; alerts always record', async () => {
    const h = harness({
      rules: [
        {
          id: 'grow',
          on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: 75 } },
          do: [{ grow: { tier: 'warm', nodes: 1 } }],
        },
        {
          id: 'note',
          on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: 75 } },
          do: [{ alert: { message: 'warm is filling' } }],
        },
      ],
      controls: { backgroundEnabled: false },
    });
    h.setState(fill(80));
    expect((await h.tick(1)).map((f) => [f.rule, f.outcome])).toEqual([
      ['grow', 'suppressed'],
      ['note', 'done'],
    ]);
    expect(h.started).toEqual([]);
    expect(h.metrics).toHaveLength(2);
    expect(h.ev.firings()[0]).toMatchObject({ rule: 'note', detail: 'warm is filling' });
  });

  it('starts at most maxActionsPerMinute actions a minute, and nothing while a scale workflow runs', async () => {
    const h = harness({
      rules: [{ id: 'tick', on: { timer: { everySeconds: 1 } }, do: [{ grow: { tier: 'warm', nodes: 1 } }] }],
      controls: { maxActionsPerMinute: 2, maxFleetSize: 100 },
    });
    await h.tick(0); // the first tick starts the timer's clock
    const outcomes: string[] = [];
    for (let i = 0; i < 4; i++) outcomes.push(...(await h.tick(1000)).map((f) => f.outcome));
    expect(outcomes).toEqual(['done', 'done', 'suppressed', 'suppressed']);
    expect(h.started).toHaveLength(2);
    await h.tick(60_000);
    h.setScaling(true);
    expect((await h.tick(1000))[0]).toMatchObject({ outcome: 'skipped', detail: 'a scale workflow is already running' });
  });

  it('keeps a reason repeated every tick out of the history (once a minute), but counts every firing', async () => {
    const h = harness({
      rules: [{ id: 'tick', on: { timer: { everySeconds: 1 } }, do: [{ grow: { tier: 'warm', nodes: 1 } }] }],
    });
    h.setScaling(true);
    await h.tick(0);
    for (let i = 0; i < 30; i++) await h.tick(1000);
    expect(h.metrics).toHaveLength(30);
    expect(h.ev.firings()).toEqual([
      expect.objectContaining({ outcome: 'skipped', detail: 'a scale workflow is already running' }),
    ]);
    for (let i = 0; i < 31; i++) await h.tick(1000);
    expect(h.ev.firings()).toHaveLength(2);
  });

  it('fires a cost rule against its budget', async () => {
    const h = harness({
      budgets: [{ id: 'monthly', monthlyUsd: 100 }],
      rules: [
        {
          id: 'over-budget',
          on: { threshold: { cost: 'projectedMonthlyUsd', op: '>', value: { budget: 'monthly' } } },
          do: [{ alert: { message: 'projected spend is over the monthly budget' } }],
        },
      ],
    });
    h.setState({ tiers: {}, cost: { total: 80, byTier: {}, byNamespace: {} } });
    expect(await h.tick(1)).toEqual([]);
    h.setState({ tiers: {}, cost: { total: 120, byTier: {}, byNamespace: {} } });
    expect(await h.tick(1)).toEqual([
      // The budget's own default rule (onExceeded: alert) fires beside the document's rule.
      expect.objectContaining({ rule: 'default-budget-monthly', response: 'alert', outcome: 'done' }),
      expect.objectContaining({ rule: 'over-budget', outcome: 'done' }),
    ]);
  });

  it('does not fire on a condition it cannot judge (no statistics yet)', async () => {
    const h = harness({ namespaces: { '*': { preset: 'growing' } } });
    h.setState({ tiers: {} });
    expect(await h.tick(120_000)).toEqual([]);
    expect(await h.tick(120_000)).toEqual([]);
  });
});

describe('the default rules', () => {
  const warm = (
    w: Partial<Record<'fillPercent' | 'nodeFillPercent' | 'requestsPerSecond', number>>,
    total = 10,
  ): PolicyState => ({
    tiers: { warm: w },
    cost: { total, byTier: {}, byNamespace: {} },
  });

  it('evicts to S3 when the fullest node passes the watermark, once per crossing', async () => {
    const h = harness({});
    h.setState(warm({ fillPercent: 60, nodeFillPercent: 84 }));
    expect(await h.tick(1000)).toEqual([]);
    h.setState(warm({ fillPercent: 60, nodeFillPercent: 90 }));
    expect(await h.tick(1000)).toEqual([
      expect.objectContaining({
        rule: 'default-evict-on-node-fill',
        response: 'move',
        detail: 'EvictToS3 started (execution exec-1)',
      }),
    ]);
    expect(await h.tick(60_000)).toEqual([]);
    expect(h.started).toEqual(['evict: policy rule default-evict-on-node-fill']);
  });

  it('gives back one node per idle quarter hour, never below minFleetSize, never while a scale or migration runs', async () => {
    const h = harness({ controls: { minFleetSize: 2 } }, 4);
    h.setState(warm({ fillPercent: 20, requestsPerSecond: 0.2 }));
    expect(await h.tick(1000)).toEqual([]);
    expect(await h.tick(900_000)).toEqual([
      expect.objectContaining({ rule: 'default-idle-scale-in', response: 'shrink', detail: 'ScaleIn 1 of 1 (execution exec-1)' }),
    ]);
    expect(await h.tick(60_000)).toEqual([]); // the next idle quarter hour has not passed
    h.setScaling(true); // a migration runs
    expect(await h.tick(840_000)).toEqual([
      expect.objectContaining({ outcome: 'skipped', detail: 'a scale workflow is already running' }),
    ]);
    h.setScaling(false);
    expect(await h.tick(900_000)).toEqual([expect.objectContaining({ detail: 'ScaleIn 1 of 1 (execution exec-2)' })]);
    expect(await h.tick(900_000)).toEqual([
      expect.objectContaining({ outcome: 'skipped', detail: 'the fleet is at controls.minFleetSize (2)' }),
    ]);
    // Busy again: the idle period starts over.
    h.setState(warm({ fillPercent: 20, requestsPerSecond: 50 }));
    expect(await h.tick(900_000)).toEqual([]);
    expect(h.started).toEqual([
      'in: policy rule default-idle-scale-in (1 of 1)',
      'in: policy rule default-idle-scale-in (1 of 1)',
    ]);
  });

  it("answers a budget passed with the budget's onExceeded: shrink the warm tier, or evict its coldest entries", async () => {
    const h = harness({
      budgets: [
        { id: 'warm-cap', monthlyUsd: 50, tier: 'warm', onExceeded: 'shrink-warm' },
        { id: 'total', monthlyUsd: 100, onExceeded: 'evict-cold' },
      ],
    });
    h.setState({ tiers: { warm: { fillPercent: 50 } }, cost: { total: 120, byTier: { warm: 70 }, byNamespace: {} } });
    expect(await h.tick(1000)).toEqual([
      expect.objectContaining({ rule: 'default-budget-warm-cap', response: 'shrink', outcome: 'done' }),
      expect.objectContaining({ rule: 'default-budget-total', response: 'move', detail: 'EvictToS3 started (execution exec-2)' }),
    ]);
  });

  it('are replaced by a rule of the document with the same id (here: switched off)', async () => {
    const off: NonNullable<PolicyDocumentInput['rules']>[number] = {
      id: 'default-evict-on-node-fill',
      enabled: false,
      on: { threshold: { tier: 'warm', metric: 'nodeFillPercent', op: '>=', value: 85 } },
      do: [{ move: { from: 'warm', to: ['cold'] } }],
    };
    const h = harness({ rules: [off] });
    h.setState(warm({ fillPercent: 60, nodeFillPercent: 99 }));
    expect(await h.tick(1000)).toEqual([]);
  });
});
