/**
 * The background executor: when timer and threshold rules fire, and what the controls let them do. Actions are a
 * recording stand-in for the workflows (ScaleOut/ScaleIn are tested end to end in test/workflows/); the rules,
 * the policy and the evaluator are the real ones. No runtime ticks the evaluator yet (docs/POLICIES.md, "What
 * this version runs"), so documents with these responses are refused unless compiled for one that does.
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
    scaleOut: async (nodes) => {
      started.push(`out ${nodes}`);
      size += nodes;
      return `exec-${started.length}`;
    },
    scaleIn: async (nodes) => {
      started.push(`in ${nodes}`);
      size -= nodes;
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
  it('growing: grows the warm fleet once when it stays 75% full for a minute, and again only after it dropped', async () => {
    const h = harness({ namespaces: { '*': { preset: 'growing' } } }, 4);
    h.setState(fill(80));
    expect(await h.tick(0)).toEqual([]); // holds, but not for a minute yet
    expect(await h.tick(30_000)).toEqual([]);
    const fired = await h.tick(30_000);
    expect(fired).toEqual([
      expect.objectContaining({
        rule: 'all-grow',
        response: 'grow',
        outcome: 'done',
        detail: 'ScaleOut by 4 (execution exec-1)',
      }),
    ]);
    expect(await h.tick(60_000)).toEqual([]); // still full: edge-triggered, no second grow
    h.setState(fill(40));
    await h.tick(1000);
    h.setState(fill(90));
    await h.tick(1000);
    expect(await h.tick(60_000)).toHaveLength(1);
    expect(h.started).toEqual(['out 4', 'out 8']);
  });

  it('never grows past maxFleetSize nor shrinks below minFleetSize', async () => {
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
    const h = harness({ rules, controls: { maxFleetSize: 6, minFleetSize: 2 } }, 4);
    h.setState(fill(90));
    expect(await h.tick(1)).toEqual([expect.objectContaining({ rule: 'up', detail: 'ScaleOut by 2 (execution exec-1)' })]);
    h.setState(fill(50));
    await h.tick(1);
    h.setState(fill(95));
    expect(await h.tick(1)).toEqual([
      expect.objectContaining({ outcome: 'skipped', detail: 'the fleet is at controls.maxFleetSize (6)' }),
    ]);
    h.setState(fill(1));
    expect(await h.tick(1)).toEqual([expect.objectContaining({ rule: 'down', detail: 'ScaleIn by 4 (execution exec-2)' })]);
    expect(h.started).toEqual(['out 2', 'in 4']);
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
    await h.tick(60_000);
    h.setScaling(true);
    expect((await h.tick(1000))[0]).toMatchObject({ outcome: 'skipped', detail: 'a scale workflow is already running' });
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
    expect(await h.tick(1)).toEqual([expect.objectContaining({ rule: 'over-budget', outcome: 'done' })]);
  });

  it('does not fire on a condition it cannot judge (no statistics yet)', async () => {
    const h = harness({ namespaces: { '*': { preset: 'growing' } } });
    h.setState({ tiers: {} });
    expect(await h.tick(120_000)).toEqual([]);
    expect(await h.tick(120_000)).toEqual([]);
  });
});
