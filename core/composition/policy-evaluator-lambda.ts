import { CloudWatchClient, GetMetricDataCommand, type MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import { readFleetState, ringStoreFleetSource } from '../cost/publisher/fleet-state.js';
import { emfDocument, serializeEmf } from '../metrics/emf.js';
import { METRICS } from '../metrics/metric-catalog.js';
import type { PolicyTier } from '../policy/document.js';
import { BackgroundEvaluator, type EvaluatorActions, type Firing } from '../policy/evaluator.js';
import type { EvaluatorStateStore } from '../policy/evaluator-store.js';
import { JOB_RUNNER_BUDGET_MS, runJobs } from '../policy/job-runner.js';
import { JobBoard } from '../policy/jobs.js';
import type { PolicyState } from '../policy/preview.js';
import { nextTick, type TickEvent, type TickResult } from '../policy/ticker.js';
import { log } from '../util/logger.js';
import type { WorkflowService } from '../workflows/admin-service.js';
import { buildApiContext, type BuiltContext } from './api-context.js';
import { fleetHealthTick, type FleetHealthTickResult } from './fleet-health-tick.js';
import { policyPartsFromEnv } from './policy-env.js';
import { loadRuntimeEnv } from './runtime-env.js';
import type { LivePolicy } from '../policy/live.js';
import { HotTierLimits } from './hot-tier-limits.js';
import { ringStoreFromEnv, type RingStoreEnv } from './ring-store-env.js';
import { RingStore, type CasStore } from '../ring/store.js';
import { ScaleLocks } from '../workflows/progress.js';
import { PrelaunchSource, withPrelaunch } from '../workflows/trigger/prelaunch.js';
import type { ScaleTriggerSettings } from '../workflows/trigger/scale-trigger.js';
import { loadRuntimeEnvWithSecrets } from './secrets.js';
import { warmTierFromEnv } from './warm-tier-env.js';
import { workflowServiceFromEnv } from './workflow-service-env.js';

/**
 * The scheduled policy evaluator in AWS, one tick per invocation of the ticker state machine (core/policy/ticker.ts),
 * in two functions that the ticker invokes side by side, because what they reach lives on either side of the VPC:
 *  - the tick (lambdas/policy/evaluator.ts, outside the VPC: Step Functions, CloudWatch, ElastiCache's API and S3 are
 *    public endpoints, and the VPC has neither a NAT gateway nor interface endpoints for them): the policy in force,
 *    one tick of the background rules (alert, grow, shrink, eviction) against the fleet's state (the nodes' reports in
 *    the ring store), the cost publisher's projection and the request rates (CloudWatch), starting workflows through
 *    Step Functions; its memory between ticks and the firing history are kept in the policy store
 *    (evaluator-store.ts), each firing also an EMF PolicyFirings point and a log line; and whether to tick again
 *    within this minute (sub-minute timers), and when. Once a minute, beside the rules, the cache nodes' failure
 *    detector (fleet-health-tick.ts: the nodes' EC2 status, a DOWN mark in the ring, replace-node started);
 *  - the flush (lambdas/policy/flush.ts, in the VPC beside the tiers): the write-back values that are due are written
 *    down, so an acknowledged write-back reaches the durable tiers even when no request arrives (the API functions
 *    flush only at the end of their own invocations).
 */

/** What a tick works with (built once per container; tests build their own). */
export interface PolicyTickRuntime {
  /** The policy in force (undefined without a policy store: nothing to evaluate). */
  readonly live?: LivePolicy;
  readonly store?: EvaluatorStateStore;
  readonly workflows?: WorkflowService;
  readonly cloudWatch: CloudWatchClient;
  readonly environment: string;
  readonly fleet: () => ReturnType<typeof readFleetState> | undefined;
  /** How long CloudWatch's answer is kept (its metrics are per minute, and each query is billed). @default 60 s */
  readonly metricsTtlMs?: number;
  /** The hot tier's usage limits (ElastiCache Serverless, STRATA_HOT_CACHE_NAME); absent: hot grow/shrink skip. */
  readonly hotLimits?: HotTierLimits;
  /**
   * Paper 000's measurement, for the rule default-prelaunch (STRATA_POLICY_DEFAULTS.prelaunch, with the ring store):
   * the state's `warm.prelaunchFillPercent`. Absent: that metric is unknown.
   */
  readonly prelaunch?: PrelaunchSource;
  /** Where copies, moves, deletes and blob collections wait for the job runner (beside the evaluator's state). */
  readonly jobs?: Pick<JobBoard, 'submit' | 'poll'>;
  /**
   * The cache nodes' failure detector (fleet-health-tick.ts), run at the first tick of each minute's execution: with
   * the ring store, the EC2 status of the ring's nodes, marking confirmed ones DOWN and starting replace-node for them.
   * Absent: no warm fleet to watch (no ring store).
   */
  readonly fleetHealth?: () => Promise<FleetHealthTickResult>;
}

let runtime: Promise<PolicyTickRuntime> | undefined;

async function build(): Promise<PolicyTickRuntime> {
  // Outside the VPC it reaches no tier: the ring store is read for the nodes' reports alone (ringStoreFromEnv), so its
  // variables are left out of the runtime environment, which would otherwise ask for the fleet's secret.
  const { STRATA_WARM_RING_BUCKET: _bucket, STRATA_WARM_RING_DIR: _dir, ...rest } = process.env;
  const env = loadRuntimeEnv(rest);
  const policy = policyPartsFromEnv(env);
  const ring = ringStoreFromEnv();
  const source = ring.cas ? ringStoreFleetSource(ring.cas, { reportIdPrefix: ring.reportIdPrefix }) : undefined;
  const prelaunch = prelaunchSourceOf(ring, env.STRATA_POLICY_DEFAULTS?.prelaunch);
  // The ScaleOuts it starts while a node is past paper 000's threshold are for that node (its lock, the trigger's mode).
  const wf = workflowServiceFromEnv();
  const workflows = wf && prelaunch ? withPrelaunch(wf, prelaunch) : wf;
  const cacheName = env.STRATA_HOT_CACHE_NAME;
  const hotLimits = cacheName
    ? new HotTierLimits(
        new (await import('@aws-sdk/client-elasticache')).ElastiCacheClient({ region: env.AWS_REGION }),
        cacheName,
      )
    : undefined;
  const live = policy.live({ timer: false, onChange: () => {} });
  const fleetHealth = ring.cas
    ? await fleetHealthOf(ring.cas, ring.reportIdPrefix, env.AWS_REGION, env.STRATA_ENV, workflows)
    : undefined;
  return {
    ...(fleetHealth ? { fleetHealth } : {}),
    ...(live ? { live } : {}),
    ...(policy.evaluatorState ? { store: policy.evaluatorState } : {}),
    ...(policy.store ? { jobs: new JobBoard(policy.store.cas) } : {}),
    ...(hotLimits ? { hotLimits } : {}),
    ...(workflows ? { workflows } : {}),
    ...(prelaunch ? { prelaunch } : {}),
    cloudWatch: new CloudWatchClient({ region: env.AWS_REGION }),
    environment: env.STRATA_ENV,
    fleet: () => (source ? readFleetState(source) : undefined),
  };
}

/**
 * The failure detector over the ring store's fleet: the nodes' EC2 instance status (one DescribeInstanceStatus call a
 * tick; ec2:DescribeInstanceStatus in the evaluator's role) and, for the instances EC2 calls healthy, the age of the
 * daemon's statistics report (core/nodes/heartbeat-probe.ts: a hung daemon on a healthy instance), the operators'
 * pause in `health/controls`, and replace-node started through the evaluator's workflow service for each node it
 * marks DOWN.
 */
async function fleetHealthOf(
  cas: CasStore,
  reportIdPrefix: string,
  region: string,
  environment: string,
  workflows: WorkflowService | undefined,
): Promise<() => Promise<FleetHealthTickResult>> {
  // Loaded only where a ring store is configured (the SDK's EC2 client is large).
  const [{ EC2Client }, { ec2StatusProbe }, { withReportHeartbeat }] = await Promise.all([
    import('@aws-sdk/client-ec2'),
    import('../nodes/ec2-probe.js'),
    import('../nodes/heartbeat-probe.js'),
  ]);
  const probe = withReportHeartbeat(ec2StatusProbe({ client: new EC2Client({ region }) }), { cas, reportIdPrefix });
  return () => fleetHealthTick({ cas, probe, environment, ...(workflows ? { workflows } : {}) });
}

let flushContext: Promise<BuiltContext> | undefined;

/** How long the ticker's flush keeps writing down a write-back backlog (passes of 1,000 while each finds a full one). */
const FLUSH_BACKLOG_MS = 10_000;

/** The tiers and the coordinator, built once per container (the flush's and the job runner's). */
function flushContextOnce(): Promise<BuiltContext> {
  return (flushContext ??= (async () => {
    const built = buildApiContext(await loadRuntimeEnvWithSecrets(), { flushTimer: false, warmTier: warmTierFromEnv });
    await built.coordinator.ready();
    return built;
  })());
}

/**
 * The flush half of a tick (in the VPC): the policy in force (the flusher follows its write-back namespaces), then the
 * write-back values that are due written down. Resolves with how many were.
 */
export async function policyFlush(ctx?: BuiltContext): Promise<{ flushed: number }> {
  const c = ctx ?? (await flushContextOnce());
  await c.livePolicy?.refresh();
  // A backlog is written down for up to FLUSH_BACKLOG_MS (the tick waits for this half; the function has a minute).
  const flushed = await c.coordinator.flushIfDue(FLUSH_BACKLOG_MS);
  if (flushed) log.info('policy evaluator: write-back values written down', { flushed });
  return { flushed };
}

/**
 * The job runner (in the VPC; lambdas/policy/jobs.ts): the ticker starts it, without waiting, when the evaluator
 * reports a queued job with no runner. It works through the jobs (job-runner.ts) until its budget is spent, bounded by
 * what the invocation has left, less `marginMs` to save its place.
 */
export async function policyJobs(
  o: { owner: string; remainingMs?: number; budgetMs?: number; marginMs?: number },
  ctx?: BuiltContext,
): Promise<{ ran: number; finished: number }> {
  const started = Date.now();
  const c = ctx ?? (await flushContextOnce());
  const live = c.livePolicy;
  const board = c.jobBoard;
  if (!live || !board) {
    log.warn('policy job runner: no policy store (STRATA_POLICY_STORE) or no scheduled evaluator; no jobs to run');
    return { ran: 0, finished: 0 };
  }
  await live.refresh();
  const budget = Math.min(o.budgetMs ?? JOB_RUNNER_BUDGET_MS, (o.remainingMs ?? Infinity) - (o.marginMs ?? 30_000));
  const report = await runJobs({
    board,
    tiers: c.tiers,
    policy: () => live.current.compiled,
    deadline: started + Math.max(0, budget),
    owner: o.owner,
  });
  log.info('policy job runner: done for this invocation', { ...report, ms: Date.now() - started });
  return report;
}

export async function policyTick(event: TickEvent, rt?: PolicyTickRuntime): Promise<TickResult> {
  const base = rt ?? (await (runtime ??= build()));
  // The fleet's state is read once per tick: the state, the fleet's size and the scaling check all ask for it, and
  // each read is the ring plus every node's report from S3.
  let fleet: { state: ReturnType<PolicyTickRuntime['fleet']> } | undefined;
  const r: PolicyTickRuntime = { ...base, fleet: () => (fleet ??= { state: base.fleet() }).state };
  const startedAt = event.startedAt ?? new Date().toISOString();
  const ticks = (event.ticks ?? 0) + 1;
  // The failure detector once a minute, at the execution's first tick (a sub-minute timer's further ticks would only
  // repeat its EC2 call and S3 reads), beside the rules; its failure is logged and does not fail the tick.
  const health = ticks === 1 && r.fleetHealth ? runFleetHealth(r.fleetHealth) : undefined;
  try {
    return await evaluate(r, startedAt, ticks);
  } finally {
    await health;
  }
}

async function runFleetHealth(tick: () => Promise<FleetHealthTickResult>): Promise<void> {
  try {
    const result = await tick();
    if (result.marked.length > 0 || result.held || result.started.length > 0) log.info('health check: tick', { ...result });
    else log.debug('health check: tick', { ...result });
  } catch (error) {
    log.error('health check: the tick failed (the ring store could not be read); trying again at the next minute', { error });
  }
}

async function evaluate(r: PolicyTickRuntime, startedAt: string, ticks: number): Promise<TickResult> {
  const live = r.live;
  if (!live || !r.store) {
    log.warn('policy evaluator: no policy store (STRATA_POLICY_STORE); nothing to evaluate');
    return { startedAt, ticks, again: false, waitSeconds: 59 };
  }
  // The policy in force now (one read of the store: `effectiveIfNewer` compiles only a version it does not have).
  await live.refresh();
  const { view, compiled } = live.current;
  const saved = await r.store.load();
  const evaluator = new BackgroundEvaluator({
    actions: actionsOf(r),
    state: () => stateOf(r),
    onFiring: (f) => emitFiring(r.environment, f),
    ...(saved ? { resume: saved.snapshot } : {}),
  });
  const firings = await evaluator.tick(compiled);
  // Saved only when the tick changed something (a timer's clock, a threshold held, a firing): most ticks change
  // nothing, and a PUT per tick would be most of an idle deployment's S3 requests.
  const snapshot = evaluator.snapshot();
  const changed = !saved || JSON.stringify(snapshot) !== JSON.stringify(saved.snapshot);
  const kept = !changed || (await r.store.save(snapshot, saved?.etag ?? null));
  if (!kept)
    log.warn("policy evaluator: an overlapping tick saved first; this tick's state is dropped", { firings: firings.length });
  const flushSeconds = compiled.registry.minFlushIntervalMs();
  const next = nextTick(compiled, Date.parse(startedAt), Date.now(), flushSeconds === null ? undefined : flushSeconds / 1000);
  const runJobs = evaluator.jobsWaitingForRunner;
  log.debug('policy tick', { ticks, firings: firings.length, policyVersion: view.version, runJobs, ...next });
  return { startedAt, ticks, ...next, ...(runJobs ? { runJobs } : {}) };
}

function actionsOf(r: PolicyTickRuntime): EvaluatorActions {
  const wf = r.workflows;
  const running = async (names: readonly string[]) =>
    !!wf && (await wf.list({ limit: 20 })).find((e) => e.status === 'RUNNING' && names.includes(e.workflow));
  return {
    fleetSize: async () => {
      const f = await r.fleet();
      return f && f.ringVersion !== null ? f.nodes : undefined;
    },
    scaling: async () =>
      ((await r.fleet())?.migrationsInProgress ?? 0) > 0 || !!(await running(['scale-out', 'scale-in', 'tier-migrate'])),
    scaleOut: async (reason) => (await required(wf).start('scale-out', { reason })).execution,
    scaleIn: async () => (await required(wf).start('scale-in', {})).execution,
    ...(r.hotLimits ? { resizeHot: (percent: number) => r.hotLimits!.resize(percent) } : {}),
    ...(r.jobs ? { jobs: r.jobs } : {}),
    evict: async () => {
      const busy = await running(['evict-to-s3']);
      if (busy) return `skipped: an eviction is already running (${busy.execution})`;
      return (await required(wf).start('evict-to-s3', {})).execution;
    },
    pruneOrderMarkers: async () => {
      const busy = await running(['order-markers']);
      if (busy) return `skipped: an order-markers run is already running (${busy.execution})`;
      return (await required(wf).start('order-markers', { mode: 'prune' })).execution;
    },
  };
}

function required(wf: WorkflowService | undefined): WorkflowService {
  if (!wf) throw new Error('the workflows are not configured for the evaluator (STRATA_WORKFLOW_ARNS)');
  return wf;
}

/** CloudWatch's answer, kept a minute per container: its metrics are per minute, and each query is billed. */
let metricsCache: { at: number; environment: string; value: Awaited<ReturnType<typeof cloudWatchState>> } | undefined;

async function stateOf(r: PolicyTickRuntime): Promise<PolicyState> {
  const now = Date.now();
  const ttl = r.metricsTtlMs ?? 60_000;
  const fresh = metricsCache && metricsCache.environment === r.environment && now - metricsCache.at < ttl;
  const metrics = fresh ? metricsCache!.value : await cloudWatchState(r.cloudWatch, r.environment, now);
  if (!fresh) metricsCache = { at: now, environment: r.environment, value: metrics };
  const fleet = await r.fleet();
  const tiers: Record<string, Record<string, number>> = {};
  if (fleet && fleet.fills.length) {
    const mean = fleet.fills.reduce((s, f) => s + f.percent, 0) / fleet.fills.length;
    tiers.warm = { fillPercent: mean, ...(fleet.maxFillPercent !== undefined ? { nodeFillPercent: fleet.maxFillPercent } : {}) };
  }
  for (const [tier, rate] of Object.entries(metrics.rates)) tiers[tier] = { ...tiers[tier], requestsPerSecond: rate };
  const pre = await r.prelaunch?.fill();
  if (pre) tiers.warm = { ...tiers.warm, prelaunchFillPercent: pre.percent };
  return { tiers: tiers as PolicyState['tiers'], ...(metrics.cost ? { cost: metrics.cost } : {}) };
}

/**
 * Paper 000's trigger for the rule default-prelaunch, when the deployment configures it (STRATA_POLICY_DEFAULTS) and
 * the ring store holds the nodes' reports: the evaluator reads the scale-out locks and keeps the trigger's counter
 * sample there (workflows/scale-trigger-sample), as the trigger's own Lambda did.
 */
function prelaunchSourceOf(ring: RingStoreEnv, settings: ScaleTriggerSettings | undefined): PrelaunchSource | undefined {
  if (!settings || !ring.cas) return undefined;
  const deps = {
    ring: new RingStore(ring.cas),
    locks: new ScaleLocks(ring.cas),
    cas: ring.cas,
    reportIdPrefix: ring.reportIdPrefix,
  };
  return new PrelaunchSource(deps, settings);
}

const RATE_WINDOW_S = 300;
const HOURS_PER_MONTH = 730;

/**
 * The cost publisher's latest projection (ProjectedMonthlyCost, CostPerHour by tier) and the request rates each tier
 * served over the last five minutes (Hits by tier), in one GetMetricData call.
 */
export async function cloudWatchState(
  cw: Pick<CloudWatchClient, 'send'>,
  environment: string,
  now = Date.now(),
): Promise<{ cost?: PolicyState['cost']; rates: Partial<Record<PolicyTier, number>> }> {
  const tiers: PolicyTier[] = ['hot', 'warm', 'cold'];
  const q = (
    id: string,
    def: { namespace: string; name: string },
    dims: Record<string, string>,
    stat: string,
    period: number,
  ): MetricDataQuery => ({
    Id: id,
    MetricStat: {
      Metric: {
        Namespace: def.namespace,
        MetricName: def.name,
        Dimensions: Object.entries(dims).map(([Name, Value]) => ({ Name, Value })),
      },
      Period: period,
      Stat: stat,
    },
  });
  const queries: MetricDataQuery[] = [
    q('total', METRICS.projectedMonthlyCost, { Environment: environment }, 'Maximum', 60),
    ...tiers.map((t) => q(`cost_${t}`, METRICS.costPerHour, { Environment: environment, Tier: t }, 'Maximum', 60)),
    ...tiers.map((t) => q(`hits_${t}`, METRICS.hits, { Environment: environment, Tier: t }, 'Sum', 60)),
  ];
  const out = await cw
    .send(
      new GetMetricDataCommand({
        MetricDataQueries: queries,
        // Minute buckets over the last hour (the cost publisher publishes every few minutes), up to the minute that
        // has begun: the newest bucket is the first value (TimestampDescending).
        StartTime: new Date(now - 3_600_000),
        EndTime: new Date(now + 60_000),
        ScanBy: 'TimestampDescending',
      }),
    )
    .catch((error: unknown) => {
      log.warn('policy evaluator: CloudWatch metrics unavailable; cost and rate conditions cannot be judged', { error });
      return undefined;
    });
  const values = (id: string) => out?.MetricDataResults?.find((m) => m.Id === id)?.Values ?? [];
  const latest = (id: string) => values(id)[0];
  const rates: Partial<Record<PolicyTier, number>> = {};
  // Hits over the last five minute buckets (an empty minute has no value: it counts as none).
  const since = now - RATE_WINDOW_S * 1000;
  for (const t of tiers) {
    const r = out?.MetricDataResults?.find((m) => m.Id === `hits_${t}`);
    if (!r) continue;
    const sum = (r.Values ?? []).reduce((acc, v, i) => acc + ((r.Timestamps?.[i]?.getTime() ?? 0) >= since ? v : 0), 0);
    rates[t] = sum / RATE_WINDOW_S;
  }
  const total = latest('total');
  if (total === undefined) return { rates };
  const byTier: Partial<Record<PolicyTier, number>> = {};
  for (const t of tiers) {
    const perHour = latest(`cost_${t}`);
    if (perHour !== undefined) byTier[t] = perHour * HOURS_PER_MONTH;
  }
  return { cost: { total, byTier, byNamespace: {} }, rates };
}

function emitFiring(environment: string, f: Firing): void {
  const at = Date.parse(f.at);
  process.stdout.write(
    serializeEmf([
      emfDocument({ timestamp: at, dimensions: { Environment: environment }, values: { policyFirings: 1 } }),
      emfDocument({
        timestamp: at,
        dimensions: { Environment: environment, Rule: f.rule, Outcome: f.outcome },
        values: { policyFirings: 1 },
      }),
    ]),
  );
}
