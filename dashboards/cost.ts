import { COST_TIERS } from '../core/metrics/metric-catalog.js';
import type { DashboardSpec } from './spec.js';
import { expression, fill0, metric } from './spec.js';

/** The cost publisher runs hourly-ish: a shorter period would draw gaps. */
const PERIOD = 3600;

/**
 * Cost: what Strata costs now, per tier and per tenant, where the month is heading, what a cache hit costs, and
 * what spot capacity saves (Strata/Cost and SpotNodes of Strata/Fleet, from the scheduled cost publisher in
 * lambdas/ops).
 *
 * The spot lines are `FILL(x, 0)` of the published series: the publisher writes 0 on every run without spot nodes,
 * and the fill keeps a line at 0 where there is no point at all (before the first run; the local dashboard, whose
 * runs have no spot capacity, so it draws 0 there). FILL is metric math's "fill missing values"
 * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html).
 */
export const COST_DASHBOARD: DashboardSpec = {
  id: 'cost',
  name: 'Cost',
  description:
    'USD per hour per tier and per tenant, projected month, $ per 1,000 hits and what spot capacity saves (Strata/Cost, from the scheduled cost publisher).',
  widgets: [
    {
      id: 'cost.projected-month',
      title: 'Projected month (USD)',
      view: 'number',
      periodSeconds: PERIOD,
      unit: 'USD',
      width: 8,
      height: 4,
      series: [metric('projected', 'projectedMonthlyCost', 'Maximum', 'projected month')],
    },
    {
      id: 'cost.total-now',
      title: 'Cost now (USD / hour)',
      view: 'number',
      periodSeconds: PERIOD,
      unit: 'USD',
      width: 8,
      height: 4,
      series: [metric('total', 'totalCostPerHour', 'Average', 'all tiers')],
    },
    {
      id: 'cost.per-1000-hits-now',
      title: 'USD per 1,000 hits',
      view: 'number',
      periodSeconds: PERIOD,
      unit: 'USD',
      width: 8,
      height: 4,
      series: [metric('per_1000_hits', 'costPer1000Hits', 'Average', '$ / 1,000 hits')],
    },
    {
      id: 'cost.per-tier',
      title: 'Cost per tier (USD / hour)',
      view: 'line',
      stacked: true,
      periodSeconds: PERIOD,
      unit: 'USD',
      yMin: 0,
      width: 12,
      series: COST_TIERS.map((t) => metric(`tier_${t}`, 'costPerHour', 'Average', t, { dimensions: { Tier: t } })),
    },
    {
      id: 'cost.per-tenant',
      title: 'Cost per tenant (USD / hour)',
      view: 'line',
      stacked: true,
      periodSeconds: PERIOD,
      unit: 'USD',
      yMin: 0,
      width: 12,
      series: [metric('tenant', 'costPerHour', 'Average', 'tenant', { splitBy: 'Tenant' })],
    },
    {
      id: 'cost.projected-month-trend',
      title: 'Projected month (USD)',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'USD',
      yMin: 0,
      width: 12,
      series: [metric('projected', 'projectedMonthlyCost', 'Maximum', 'projected month')],
    },
    {
      id: 'cost.per-1000-hits',
      title: 'USD per 1,000 hits',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'USD',
      yMin: 0,
      width: 12,
      series: [metric('per_1000_hits', 'costPer1000Hits', 'Average', '$ / 1,000 hits')],
    },
    {
      id: 'cost.spot-savings',
      title: 'Spot savings (USD / month)',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'USD',
      yMin: 0,
      width: 12,
      series: [
        metric('savings', 'spotSavingsMonthly', 'Average', 'spot savings', { visible: false }),
        expression('savings_or_0', fill0('savings'), 'on-demand price minus spot price of the running spot nodes'),
      ],
    },
    {
      id: 'cost.spot-nodes',
      title: 'Spot nodes',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Count',
      yMin: 0,
      width: 12,
      series: [
        metric('spot', 'spotNodes', 'Maximum', 'spot nodes', { visible: false }),
        expression('spot_or_0', fill0('spot'), 'running spot nodes'),
      ],
    },
  ],
};
