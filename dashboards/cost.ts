import { COST_TIERS } from '../core/metrics/metric-catalog.js';
import type { DashboardSpec } from './spec.js';
import { metric } from './spec.js';

/** The cost publisher runs hourly-ish: a shorter period would draw gaps. */
const PERIOD = 3600;

/**
 * Cost: what Strata costs now, per tier and per tenant, where the month is heading, and what a cache hit costs
 * (Strata/Cost, from the scheduled cost publisher in lambdas/ops).
 */
export const COST_DASHBOARD: DashboardSpec = {
  id: 'cost',
  name: 'Cost',
  description:
    'USD per hour per tier and per tenant, projected month and $ per 1,000 hits (Strata/Cost, from the scheduled cost publisher).',
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
  ],
};
