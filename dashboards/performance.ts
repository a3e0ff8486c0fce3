import type { DashboardSpec, Expr, Series } from './spec.js';
import { add, div, expression, fill0, metric, mul, num, perSecond, ref, sub } from './spec.js';

/** Tiers a key can be served from (a hit), top-down. */
const HIT_TIERS = ['l1', 'hot', 'warm', 'cold', 'origin'] as const;
/** Latency is split by the tier that served, `none` being a miss everywhere. */
const LATENCY_TIERS = [...HIT_TIERS, 'none'] as const;

const PERIOD = 60;

/** Hits per tier and misses, as hidden inputs, and `lookups` = all of them (tiers without traffic count 0). */
function lookupInputs(): { series: Series[]; lookups: Expr } {
  const series: Series[] = [
    ...HIT_TIERS.map((t) => metric(`hits_${t}`, 'hits', 'Sum', `hits ${t}`, { dimensions: { Tier: t }, visible: false })),
    metric('misses', 'misses', 'Sum', 'misses', { visible: false }),
  ];
  const lookups = add(...HIT_TIERS.map((t) => fill0(`hits_${t}`)), fill0('misses'));
  return { series: [...series, expression('lookups', lookups, 'lookups', { visible: false })], lookups: ref('lookups') };
}

function hitRatioWidgetSeries(): Series[] {
  const { series, lookups } = lookupInputs();
  return [
    ...series,
    expression('hit_ratio', mul(num(100), div(sub(lookups, fill0('misses')), lookups)), 'all tiers'),
    ...HIT_TIERS.map((t) => expression(`ratio_${t}`, mul(num(100), div(fill0(`hits_${t}`), lookups)), t)),
  ];
}

function overallHitRatioSeries(): Series[] {
  const { series, lookups } = lookupInputs();
  return [...series, expression('hit_ratio', mul(num(100), div(sub(lookups, fill0('misses')), lookups)), 'hit ratio')];
}

/**
 * Performance: how well the cache serves. Hit ratio per tier (share of all lookups answered by each tier), latency
 * p50/p99 per serving tier, throughput per operation, errors by code, bytes in and out.
 */
export const PERFORMANCE_DASHBOARD: DashboardSpec = {
  id: 'performance',
  name: 'Performance',
  description:
    'Hit ratio, latency, throughput and errors of the Strata API (Strata/Requests, from the API handlers’ EMF records).',
  widgets: [
    {
      id: 'performance.hit-ratio-now',
      title: 'Hit ratio',
      view: 'number',
      periodSeconds: 300,
      unit: 'Percent',
      width: 6,
      height: 4,
      series: overallHitRatioSeries(),
    },
    {
      id: 'performance.throughput-now',
      title: 'Requests per second',
      view: 'number',
      periodSeconds: 300,
      unit: 'Count/Second',
      width: 6,
      height: 4,
      series: [
        metric('requests', 'requests', 'Sum', 'requests', { visible: false }),
        expression('rps', perSecond('requests'), 'requests/s'),
      ],
    },
    {
      id: 'performance.latency-now',
      title: 'Latency',
      view: 'number',
      periodSeconds: 300,
      unit: 'Milliseconds',
      width: 6,
      height: 4,
      series: [metric('p50', 'latency', 'p50', 'p50'), metric('p99', 'latency', 'p99', 'p99')],
    },
    {
      id: 'performance.errors-now',
      title: 'Error rate',
      view: 'number',
      periodSeconds: 300,
      unit: 'Percent',
      width: 6,
      height: 4,
      series: [
        metric('requests', 'requests', 'Sum', 'requests', { visible: false }),
        metric('errors', 'errors', 'Sum', 'errors', { visible: false }),
        expression('error_rate', mul(num(100), div(fill0('errors'), ref('requests'))), 'errors %'),
      ],
    },
    {
      id: 'performance.hit-ratio',
      title: 'Hit ratio per tier (% of lookups)',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Percent',
      yMin: 0,
      yMax: 100,
      width: 12,
      series: hitRatioWidgetSeries(),
    },
    {
      id: 'performance.throughput',
      title: 'Throughput by operation',
      view: 'line',
      stacked: true,
      periodSeconds: PERIOD,
      unit: 'Count',
      width: 12,
      series: [metric('requests', 'requests', 'Sum', 'requests', { splitBy: 'Operation' })],
    },
    {
      id: 'performance.latency-p50',
      title: 'Latency p50 by serving tier',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Milliseconds',
      width: 12,
      series: LATENCY_TIERS.map((t) => metric(`p50_${t}`, 'latency', 'p50', t, { dimensions: { Tier: t } })),
    },
    {
      id: 'performance.latency-p99',
      title: 'Latency p99 by serving tier',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Milliseconds',
      width: 12,
      series: LATENCY_TIERS.map((t) => metric(`p99_${t}`, 'latency', 'p99', t, { dimensions: { Tier: t } })),
    },
    {
      id: 'performance.errors',
      title: 'Errors by code',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Count',
      width: 12,
      series: [
        metric('errors', 'errors', 'Sum', 'errors', { splitBy: 'ErrorCode' }),
        metric('server_errors', 'serverErrors', 'Sum', '5xx (all codes)'),
      ],
    },
    {
      // The hot fence at work (docs/API.md, Consistency): writes fenced because their hot copy failed, the epoch
      // raises that covered them, and write-back entries lost before their flush. All zero while Redis is healthy.
      id: 'performance.hot-fence',
      title: 'Hot tier faults: fenced writes, epoch raises, write-back losses',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Count',
      width: 12,
      series: [
        metric('hot_copies_unknown', 'hotCopiesUnknown', 'Sum', 'writes fenced (hot copy failed)'),
        metric('hot_fence_bumps', 'hotFenceBumps', 'Sum', 'epoch raises'),
        metric('write_back_lost', 'writeBackLost', 'Sum', 'write-back entries lost'),
        metric('background_errors', 'backgroundErrors', 'Sum', 'background errors', { splitBy: 'Activity' }),
      ],
    },
    {
      id: 'performance.bytes',
      title: 'Value bytes in and out',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Bytes',
      width: 12,
      series: [metric('bytes_in', 'bytesIn', 'Sum', 'in (written)'), metric('bytes_out', 'bytesOut', 'Sum', 'out (read)')],
    },
    {
      id: 'performance.misses-by-namespace',
      title: 'Misses by namespace',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Count',
      width: 12,
      series: [metric('misses', 'misses', 'Sum', 'misses', { splitBy: 'Namespace' })],
    },
    {
      id: 'performance.bytes-out-by-namespace',
      title: 'Bytes read by namespace',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Bytes',
      width: 12,
      series: [metric('bytes_out', 'bytesOut', 'Sum', 'bytes out', { splitBy: 'Namespace' })],
    },
  ],
};
