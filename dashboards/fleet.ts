import type { DashboardSpec } from './spec.js';
import { metric } from './spec.js';

const PERIOD = 60;

/**
 * Fleet: the warm tier's cache nodes: how many, how full, and what the elasticity workflows are doing
 * (Strata/Fleet from the cost publisher, Strata/Workflows from the workflow steps).
 */
export const FLEET_DASHBOARD: DashboardSpec = {
  id: 'fleet',
  name: 'Fleet',
  description: 'Cache nodes, fill and migrations of the warm tier (Strata/Fleet and Strata/Workflows).',
  widgets: [
    {
      id: 'fleet.nodes-now',
      title: 'Cache nodes',
      view: 'number',
      periodSeconds: 300,
      unit: 'Count',
      width: 8,
      height: 4,
      series: [metric('nodes', 'nodes', 'Maximum', 'nodes')],
    },
    {
      id: 'fleet.max-fill-now',
      title: 'Fullest node',
      view: 'number',
      periodSeconds: 300,
      unit: 'Percent',
      width: 8,
      height: 4,
      series: [metric('max_fill', 'maxNodeFill', 'Maximum', 'fill %')],
    },
    {
      id: 'fleet.migrations-now',
      title: 'Migrations in progress',
      view: 'number',
      periodSeconds: 300,
      unit: 'Count',
      width: 8,
      height: 4,
      series: [metric('migrations', 'migrationsInProgress', 'Maximum', 'sessions')],
    },
    // Silent: in the ring without a fresh stats report (stopped, cut off from S3): their fill is not on the chart below.
    {
      id: 'fleet.nodes',
      title: 'Cache nodes in the ring',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Count',
      yMin: 0,
      width: 12,
      series: [
        metric('nodes', 'nodes', 'Maximum', 'nodes'),
        metric('silent', 'silentNodes', 'Maximum', 'silent (no fresh stats report)'),
      ],
    },
    {
      id: 'fleet.fill',
      title: 'Node fill (%)',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Percent',
      yMin: 0,
      yMax: 100,
      width: 12,
      series: [
        metric('max_fill', 'maxNodeFill', 'Maximum', 'fullest node'),
        metric('node_fill', 'nodeFill', 'Maximum', 'node', { splitBy: 'Node' }),
      ],
    },
    {
      id: 'fleet.migrations',
      title: 'Migration sessions in progress',
      view: 'line',
      periodSeconds: PERIOD,
      unit: 'Count',
      yMin: 0,
      width: 12,
      series: [metric('migrations', 'migrationsInProgress', 'Maximum', 'in progress')],
    },
    {
      id: 'fleet.sessions-done',
      title: 'Migration sessions published',
      view: 'line',
      periodSeconds: 300,
      unit: 'Count',
      yMin: 0,
      width: 12,
      series: [metric('sessions_done', 'sessionsDone', 'Sum', 'sessions', { splitBy: 'Workflow' })],
    },
    {
      id: 'fleet.bytes-moved',
      title: 'Bytes moved by workflows',
      view: 'line',
      periodSeconds: 300,
      unit: 'Bytes',
      yMin: 0,
      width: 12,
      series: [metric('bytes_moved', 'bytesMoved', 'Sum', 'bytes', { splitBy: 'Workflow' })],
    },
    {
      id: 'fleet.keys-evicted',
      title: 'Keys evicted to S3',
      view: 'line',
      periodSeconds: 300,
      unit: 'Count',
      yMin: 0,
      width: 12,
      series: [metric('evicted', 'keysEvicted', 'Sum', 'keys')],
    },
    {
      id: 'fleet.allocation-time',
      title: 'Node allocation time (launch to healthy)',
      view: 'line',
      periodSeconds: 3600,
      unit: 'Milliseconds',
      yMin: 0,
      width: 12,
      series: [metric('alloc_p50', 'nodeAllocationMs', 'p50', 'p50'), metric('alloc_max', 'nodeAllocationMs', 'Maximum', 'max')],
    },
  ],
};
