/**
 * `npm start`'s background evaluator reads what the local run knows: the warm fleet's fill (from the nodes' own
 * statistics) and the local cost model's projection, so a cost rule fires against its budget in the local run.
 */
import { compilePolicyInput } from '../../core/policy/compile.js';
import { BackgroundEvaluator } from '../../core/policy/evaluator.js';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { METRICS } from '../../core/metrics/metric-catalog.js';
import { costState, stateOfFleet } from '../../scripts/local/policy-evaluator.js';

const ENV = 'local';

function recordCost(store: LocalMetricsStore, projected: number, perHour: Record<string, number>, at: number): void {
  const m = METRICS.projectedMonthlyCost;
  store.record({ namespace: m.namespace, name: m.name, unit: m.unit, dimensions: { Environment: ENV } }, projected, at);
  const t = METRICS.costPerHour;
  for (const [tier, usd] of Object.entries(perHour))
    store.record({ namespace: t.namespace, name: t.name, unit: t.unit, dimensions: { Environment: ENV, Tier: tier } }, usd, at);
}

describe("npm start's policy evaluator state", () => {
  it('takes the projected monthly spend, in total and per tier, from the local cost model', () => {
    const now = Date.now();
    const store = new LocalMetricsStore({ now: () => now });
    expect(costState(store, ENV, now)).toBeUndefined(); // nothing priced yet: cost rules cannot be judged
    recordCost(store, 120, { hot: 0.1, cold: 0.01 }, now - 1000);
    expect(costState(store, ENV, now)).toEqual({ total: 120, byTier: { hot: 73, cold: 7.3 }, byNamespace: {} });
  });

  it('fires a budget rule once the local projection passes the budget', async () => {
    let now = Date.now();
    const store = new LocalMetricsStore({ now: () => now });
    const policy = compilePolicyInput(
      // No rule of its own: the budget's default rule (onExceeded: alert) is what fires.
      { budgets: [{ id: 'monthly', monthlyUsd: 100 }] },
      { background: true },
    );
    const ev = new BackgroundEvaluator({
      actions: {
        fleetSize: async () => undefined,
        scaling: async () => false,
        scaleOut: async () => '',
        scaleIn: async () => '',
      },
      state: async () => ({ tiers: {}, ...(costState(store, ENV, now) ? { cost: costState(store, ENV, now)! } : {}) }),
      now: () => now,
    });
    recordCost(store, 80, {}, now);
    expect(await ev.tick(policy)).toEqual([]);
    now += 60_000;
    recordCost(store, 130, {}, now);
    expect(await ev.tick(policy)).toEqual([
      expect.objectContaining({
        rule: 'default-budget-monthly',
        outcome: 'done',
        detail: "projected spend is above budget 'monthly' ($100/month)",
      }),
    ]);
  });

  it('reads the warm fill as the mean of the nodes, and the fullest node as nodeFillPercent', () => {
    expect(stateOfFleet(undefined)).toEqual({ tiers: {} });
    const fleet = {
      ringVersion: 3,
      nodes: 2,
      fills: [
        { node: 'a', percent: 40 },
        { node: 'b', percent: 80 },
      ],
      maxFillPercent: 80,
      migrationsInProgress: 0,
      silent: [],
    };
    expect(stateOfFleet(fleet as never)).toEqual({ tiers: { warm: { fillPercent: 60, nodeFillPercent: 80 } } });
  });
});
