/**
 * Every CloudWatch metric Strata publishes: the one place names, units and dimensions are defined. Publishers
 * (the API handlers' EMF records, the cost publisher, the workflow steps) and consumers (dashboards, alarms, the
 * local dashboard) import from here, so a widget can only reference a metric that something publishes (a test
 * checks that each one here has a publisher).
 *
 * Dimensions are bounded: `Environment` (dev/staging/prod), `Tier` (a fixed set), `Operation` (a fixed set),
 * `ErrorCode` (the API's stable codes), `Activity` (the coordinator's kinds of background work, a fixed set),
 * `Namespace`/`Tenant` (the configured ones; anything else is reported as `other`), `Node` (the fleet's nodes, a
 * few dozen at most).
 */

export const METRIC_NAMESPACES = {
  requests: 'Strata/Requests',
  cost: 'Strata/Cost',
  fleet: 'Strata/Fleet',
  workflows: 'Strata/Workflows',
} as const;
export type MetricNamespace = (typeof METRIC_NAMESPACES)[keyof typeof METRIC_NAMESPACES];

/** Where a request was answered from. `none` = a miss everywhere; `origin` = loaded through read-through. */
export const SERVED_TIERS = ['l1', 'hot', 'warm', 'cold', 'origin', 'none'] as const;
export type ServedTier = (typeof SERVED_TIERS)[number];

/** Cost is attributed to these tiers (plus the serving and control planes). */
export const COST_TIERS = ['hot', 'warm', 'cold', 'api', 'workflows', 'monitoring'] as const;
export type CostTier = (typeof COST_TIERS)[number];

export const OPERATIONS = [
  'get',
  'put',
  'delete',
  'head',
  'batch-get',
  'batch-put',
  'batch-delete',
  'upload-url',
  'download-url',
  'stats',
  'health',
  'upload-complete',
  'invalidate',
  'admin',
] as const;
export type Operation = (typeof OPERATIONS)[number];

/** A namespace or tenant outside the configured list is reported under this name, so dimensions stay bounded. */
export const OTHER = 'other';

export type MetricUnit = 'Count' | 'Milliseconds' | 'Bytes' | 'Percent' | 'None';

export interface MetricDef {
  namespace: MetricNamespace;
  name: string;
  unit: MetricUnit;
  /** The dimension sets it is published with (each a list of dimension names). */
  dimensions: readonly (readonly string[])[];
  description: string;
}

function def(
  namespace: MetricNamespace,
  name: string,
  unit: MetricUnit,
  dimensions: readonly (readonly string[])[],
  description: string,
): MetricDef {
  return { namespace, name, unit, dimensions, description };
}

const R = METRIC_NAMESPACES.requests;
const C = METRIC_NAMESPACES.cost;
const F = METRIC_NAMESPACES.fleet;
const W = METRIC_NAMESPACES.workflows;

export const METRICS = {
  // ---- Strata/Requests: EMF records written by the API handlers (one per request, flushed with the log line).
  requests: def(R, 'Requests', 'Count', [['Environment'], ['Environment', 'Operation']], 'API requests handled'),
  hits: def(
    R,
    'Hits',
    'Count',
    [
      ['Environment', 'Tier'],
      ['Environment', 'Namespace', 'Tier'],
    ],
    'keys found, by the tier that served them',
  ),
  misses: def(R, 'Misses', 'Count', [['Environment'], ['Environment', 'Namespace']], 'keys found in no tier'),
  latency: def(
    R,
    'Latency',
    'Milliseconds',
    [['Environment'], ['Environment', 'Tier']],
    'handler latency, by the tier that served',
  ),
  bytesIn: def(R, 'BytesIn', 'Bytes', [['Environment'], ['Environment', 'Namespace']], 'value bytes written'),
  bytesOut: def(R, 'BytesOut', 'Bytes', [['Environment'], ['Environment', 'Namespace']], 'value bytes read'),
  errors: def(
    R,
    'Errors',
    'Count',
    [['Environment'], ['Environment', 'ErrorCode']],
    'requests answered with an error (4xx and 5xx)',
  ),
  serverErrors: def(R, 'ServerErrors', 'Count', [['Environment']], 'requests answered with a 5xx'),
  // Not per request: the coordinator's background-error log (composition/api-context.ts), one record per log line with its count.
  backgroundErrors: def(
    R,
    'BackgroundErrors',
    'Count',
    [['Environment'], ['Environment', 'Activity']],
    'failed background work (promotions, write-back flushes), by activity; never a failed request',
  ),
  // Not per request either: the coordinator's own actions (composition/api-context.ts coordinatorEventLog), one record per log line.
  hotCopiesUnknown: def(
    R,
    'HotCopiesUnknown',
    'Count',
    [['Environment']],
    'writes acknowledged from the durable tiers whose hot copy failed or timed out (each fenced off before the ack)',
  ),
  hotFenceBumps: def(
    R,
    'HotFenceBumps',
    'Count',
    [['Environment']],
    'hot-fence epoch raises written (each covers one or more writes, or a restarted or failed-over hot tier)',
  ),
  invalidations: def(
    R,
    'Invalidations',
    'Count',
    [['Environment']],
    'tag, prefix and namespace invalidations and flushes put in force (each a write of the invalidations document)',
  ),
  writeBackLost: def(
    R,
    'WriteBackLost',
    'Count',
    [['Environment']],
    'write-back entries found gone (evicted or expired) from the hot tier before they were flushed',
  ),

  // ---- Strata/Cost: the scheduled cost publisher (lambdas/ops).
  costPerHour: def(
    C,
    'CostPerHour',
    'None',
    [
      ['Environment', 'Tier'],
      ['Environment', 'Tenant'],
    ],
    'USD per hour, by tier and by tenant',
  ),
  totalCostPerHour: def(C, 'TotalCostPerHour', 'None', [['Environment']], 'USD per hour, all tiers'),
  projectedMonthlyCost: def(
    C,
    'ProjectedMonthlyCost',
    'None',
    [['Environment']],
    'USD for the month at the current rate (month-to-date + rate x hours left)',
  ),
  costPer1000Hits: def(C, 'CostPer1000Hits', 'None', [['Environment']], 'USD per 1,000 cache hits over the last hour'),
  spotSavingsMonthly: def(
    C,
    'SpotSavingsMonthly',
    'None',
    [['Environment']],
    'USD per month the running spot cache nodes save: their on-demand price minus their assumed spot price (0 with none)',
  ),

  // ---- Strata/Fleet: the cost publisher (from the ring and the nodes' /stats) and the workflow steps.
  nodes: def(F, 'Nodes', 'Count', [['Environment']], 'cache nodes in the ring'),
  spotNodes: def(F, 'SpotNodes', 'Count', [['Environment']], 'running cache-node instances bought as spot (0 with none)'),
  nodeFill: def(F, 'NodeFillPercent', 'Percent', [['Environment', 'Node']], 'fill of each node (bytes used / capacity)'),
  maxNodeFill: def(F, 'MaxNodeFillPercent', 'Percent', [['Environment']], 'fill of the fullest node'),
  policyFirings: def(
    W,
    'PolicyFirings',
    'Count',
    [['Environment'], ['Environment', 'Rule', 'Outcome']],
    'background policy rules that fired, by rule and outcome (done, suppressed by a control, skipped, failed)',
  ),
  migrationsInProgress: def(
    F,
    'MigrationsInProgress',
    'Count',
    [['Environment']],
    'migration sessions prepared but not yet published',
  ),
  silentNodes: def(
    F,
    'SilentNodes',
    'Count',
    [['Environment']],
    'nodes of the ring whose stats report is missing or older than its staleness bound',
  ),
  // The failure detector in AWS (the policy evaluator's tick, core/composition/fleet-health-tick.ts): published only
  // when it marks or holds, so an idle or healthy fleet adds no metric. `Reason` is the hold's: paused, cap or storm.
  nodesMarkedDown: def(
    F,
    'NodesMarkedDown',
    'Count',
    [['Environment']],
    'cache nodes the failure detector marked DOWN (each then replaced by the replace-node workflow)',
  ),
  nodeHealthHeld: def(
    F,
    'NodeHealthHeld',
    'Count',
    [['Environment'], ['Environment', 'Reason']],
    'cache nodes confirmed failing but not marked DOWN, by why (paused, cap: maxDown reached, storm: too many at once)',
  ),
  // Spot interruptions (core/nodes/spot-interruption.ts, run by the spot-interruption Lambda on EC2's EventBridge
  // warnings): published only when a warning arrives. `Outcome` is what the warning led to (a bounded set).
  spotInterruptions: def(
    F,
    'SpotInterruptions',
    'Count',
    [['Environment'], ['Environment', 'Outcome']],
    'EC2 spot interruption warnings and rebalance recommendations received, by outcome (draining, redelivered, ignored)',
  ),
  spotDrainMs: def(
    F,
    'SpotDrainTime',
    'Milliseconds',
    [['Environment']],
    "from an interruption warning to the end of its node's drain (the ScaleIn succeeded: the node left the ring)",
  ),
  spotDrainsFailed: def(
    F,
    'SpotDrainsFailed',
    'Count',
    [['Environment']],
    'interrupted nodes whose drain did not finish (the failure path took over: DOWN, then replaced)',
  ),

  // ---- Strata/Workflows: progress of the Step Functions workflows (emitted by their step Lambdas).
  sessionsDone: def(W, 'MigrationSessionsDone', 'Count', [['Environment', 'Workflow']], 'migration sessions published'),
  bytesMoved: def(W, 'BytesMoved', 'Bytes', [['Environment', 'Workflow']], 'bytes moved between nodes or tiers'),
  entriesSwept: def(
    W,
    'EntriesSwept',
    'Count',
    [['Environment']],
    'entries an invalidation covered, removed from a tier by the invalidation-sweep workflow',
  ),
  orderMarkersRemoved: def(
    W,
    'OrderMarkersRemoved',
    'Count',
    [['Environment']],
    "stale S3 order markers (their object gone) deleted by the order-markers workflow's prune",
  ),
  orderMarkersCreated: def(
    W,
    'OrderMarkersCreated',
    'Count',
    [['Environment']],
    "S3 order markers written for objects that had none by the order-markers workflow's backfill",
  ),
  keysEvicted: def(W, 'KeysEvicted', 'Count', [['Environment']], 'keys moved from the warm tier to S3 by eviction'),
  nodeAllocationMs: def(W, 'NodeAllocationTime', 'Milliseconds', [['Environment']], 'from launch to a healthy cache node'),
  nodeRecoveryMs: def(
    W,
    'NodeRecoveryTime',
    'Milliseconds',
    [['Environment']],
    'from a cache node marked DOWN to its replacement owning its ranges',
  ),
} as const satisfies Record<string, MetricDef>;

export type MetricKey = keyof typeof METRICS;

/** Maps a namespace or tenant to itself when configured, else to {@link OTHER}. */
export function boundedName(name: string, known: ReadonlySet<string> | readonly string[]): string {
  const set = known instanceof Set ? known : new Set(known as readonly string[]);
  return set.has(name) ? name : OTHER;
}
