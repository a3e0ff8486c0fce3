/**
 * `npm start`'s background evaluator: ticks the background rules of the policy in force every second, reading the
 * local fleet's state (the fleet sampler's reader) and the local cost model's projection, starting the local
 * workflows (ScaleOut, ScaleIn) and copying, moving and deleting entries between the tiers (data-mover.ts). Each
 * firing is a log line, a `Strata/Workflows` PolicyFirings point in the local metrics store and an entry in the
 * history the admin API serves (`GET /v1/admin/policy/firings`). In AWS the same evaluator is to run on a schedule.
 */
import { runTransfer } from '../../core/policy/data-mover.js';
import { collectBlobs } from '../../core/policy/dedup-gc.js';
import { blobAuthority, transferSpecOver } from '../../core/policy/job-runner.js';
import { BackgroundEvaluator, type EvaluatorActions, type Firing, type TransferRequest } from '../../core/policy/evaluator.js';
import type { Tier } from '../../core/tiers/tier.js';
import type { LivePolicy } from '../../core/policy/live.js';
import type { PolicyState } from '../../core/policy/preview.js';
import type { PolicyTier } from '../../core/policy/document.js';
import type { FleetState } from '../../core/cost/publisher/fleet-state.js';
import { METRICS } from '../../core/metrics/metric-catalog.js';
import type { LocalMetricsStore } from '../../core/metrics/local-store.js';
import type { WorkflowService } from '../../core/workflows/admin-service.js';
import { log } from '../../core/util/logger.js';

export interface LocalPolicyEvaluatorOptions {
  readonly live: LivePolicy;
  /** The local warm tier's workflows; absent without STRATA_LOCAL_NODES (grow and shrink then skip). */
  readonly workflows?: WorkflowService;
  /** The fleet's state now (the fleet sampler's `sample`); absent without a warm tier. */
  readonly fleet?: () => Promise<FleetState>;
  readonly metrics: LocalMetricsStore;
  readonly environment: string;
  /** The tiers copy, move and delete rules work on (the coordinator's, top-down); absent: those rules skip. */
  readonly tiers?: readonly Tier[];
  /** @default 1000 */
  readonly intervalMs?: number;
}

/** Carries out a background copy, move or delete over `tiers` (the rule's tiers by name). */
export function transferOver(tiers: readonly Tier[]): (request: TransferRequest) => ReturnType<typeof runTransfer> {
  return (q) => runTransfer(transferSpecOver(tiers, q), { cancelled: q.cancelled });
}

export interface LocalPolicyEvaluator {
  readonly evaluator: BackgroundEvaluator;
  stop(): Promise<void>;
}

/** The state background rules see: the warm tier's fill, from the nodes' own statistics. */
export function stateOfFleet(fleet: FleetState | undefined): PolicyState {
  if (!fleet || fleet.fills.length === 0) return { tiers: {} };
  const mean = fleet.fills.reduce((s, f) => s + f.percent, 0) / fleet.fills.length;
  const warm = { fillPercent: mean, ...(fleet.maxFillPercent !== undefined ? { nodeFillPercent: fleet.maxFillPercent } : {}) };
  return { tiers: { warm } };
}

const HOURS_PER_MONTH = 730;

/**
 * Requests a second each tier served over the last minute (the handlers' Hits by tier, as CloudWatch has them in
 * AWS): what `requestsPerSecond` conditions read (the default idle rule: a warm tier that serves almost nothing).
 */
export function requestRates(
  store: LocalMetricsStore,
  environment: string,
  now = Date.now(),
): Partial<Record<PolicyTier, number>> {
  const windowMs = 60_000;
  const rows = store.query(
    {
      namespace: METRICS.hits.namespace,
      name: METRICS.hits.name,
      dimensions: { Environment: environment },
      splitBy: 'Tier',
    },
    'Sum',
    { fromMs: now - windowMs, toMs: now },
  );
  const out: Partial<Record<PolicyTier, number>> = {};
  for (const tier of ['hot', 'warm', 'cold'] as const) {
    const points = rows.find((r) => r.split === tier)?.points ?? [];
    out[tier] = points.reduce((sum, [, v]) => sum + v, 0) / (windowMs / 1000);
  }
  return out;
}

/** A state with each known tier's request rate added (a tier the state has no other attribute of included). */
function withRequestRates(
  state: PolicyState,
  rates: Partial<Record<PolicyTier, number>>,
  extra: Partial<PolicyState>,
): PolicyState {
  const tiers: PolicyState['tiers'] = { ...state.tiers };
  for (const [tier, rate] of Object.entries(rates) as [PolicyTier, number][])
    tiers[tier] = { ...tiers[tier], requestsPerSecond: rate };
  return { ...state, ...extra, tiers };
}

/**
 * The projected monthly spend cost rules compare with budgets: the local cost model's latest points (what this
 * run's traffic would cost on AWS, docs/COST.md), as the cost publisher publishes them in AWS. Undefined before
 * the model has priced its first bucket.
 */
export function costState(store: LocalMetricsStore, environment: string, now = Date.now()): PolicyState['cost'] {
  const window = { fromMs: now - 3_600_000, toMs: now };
  const latest = (name: string, splitBy?: string) =>
    store.query(
      {
        namespace: METRICS.projectedMonthlyCost.namespace,
        name,
        dimensions: { Environment: environment },
        ...(splitBy ? { splitBy } : {}),
      },
      'Maximum',
      window,
    );
  const total = latest(METRICS.projectedMonthlyCost.name)[0]?.points.at(-1)?.[1];
  if (total === undefined) return undefined;
  const byTier: Record<string, number> = {};
  for (const r of latest(METRICS.costPerHour.name, 'Tier')) {
    const perHour = r.points.at(-1)?.[1];
    if (r.split && perHour !== undefined) byTier[r.split] = perHour * HOURS_PER_MONTH;
  }
  return { total, byTier, byNamespace: {} };
}

/** `read`, answered from its last result while that is younger than `ms`. */
function recentFor<T>(ms: number, read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= ms) last = { at: now, value: read() };
    return last.value;
  };
}

/** Collects a storeOnce namespace's unreferenced blobs, decided in its lowest durable tier (dedup-gc.ts). */
export function collectOver(tiers: readonly Tier[], live: LivePolicy): (ns: string) => ReturnType<typeof collectBlobs> {
  return async (ns) => collectBlobs({ ns, authority: blobAuthority(tiers, live.current.compiled, ns), tiers });
}

export function startLocalPolicyEvaluator(o: LocalPolicyEvaluatorOptions): LocalPolicyEvaluator {
  const { workflows } = o;
  // One read of the nodes per tick: the state, the fleet's size and the scaling check all ask for it within a tick.
  const fleet = o.fleet && recentFor(500, o.fleet);
  const actions: EvaluatorActions = {
    fleetSize: async () => (fleet ? (await fleet()).nodes : undefined),
    scaling: async () =>
      ((await fleet?.())?.migrationsInProgress ?? 0) > 0 ||
      (!!workflows &&
        (await workflows.list({ limit: 20 })).some(
          (e) =>
            e.status === 'RUNNING' && (e.workflow === 'scale-out' || e.workflow === 'scale-in' || e.workflow === 'tier-migrate'),
        )),
    evict: async (reason) => {
      if (!workflows) return 'skipped: this run has no warm tier (STRATA_LOCAL_NODES)';
      const running = (await workflows.list({ limit: 20 })).find((e) => e.status === 'RUNNING' && e.workflow === 'evict-to-s3');
      if (running) return `skipped: an eviction is already running (${running.execution})`;
      // Its input takes no reason (a strict schema): the firing that started it records why.
      void reason;
      return (await workflows.start('evict-to-s3', {})).execution;
    },
    scaleOut: async (reason) => (await required(workflows).start('scale-out', { reason })).execution,
    scaleIn: async () => (await required(workflows).start('scale-in', {})).execution,
    ...(o.tiers ? { transfer: transferOver(o.tiers), collectBlobs: collectOver(o.tiers, o.live) } : {}),
  };
  const record = (f: Firing) => {
    const def = METRICS.policyFirings;
    const metric = { namespace: def.namespace, name: def.name, unit: def.unit };
    o.metrics.record({ ...metric, dimensions: { Environment: o.environment } }, 1, Date.parse(f.at));
    o.metrics.record(
      { ...metric, dimensions: { Environment: o.environment, Rule: f.rule, Outcome: f.outcome } },
      1,
      Date.parse(f.at),
    );
  };
  const evaluator = new BackgroundEvaluator({
    actions,
    state: async () => {
      const cost = costState(o.metrics, o.environment);
      return withRequestRates(stateOfFleet(fleet ? await fleet() : undefined), requestRates(o.metrics, o.environment), {
        ...(cost ? { cost } : {}),
      });
    },
    onFiring: record,
  });
  let running: Promise<unknown> = Promise.resolve();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return; // a tick waiting on a workflow call: the next one starts after it
    busy = true;
    running = evaluator
      .tick(o.live.current.compiled)
      .catch((error: unknown) => log.warn('policy evaluator tick failed', { error }))
      .finally(() => (busy = false));
  }, o.intervalMs ?? 1000);
  timer.unref();
  return {
    evaluator,
    stop: async () => {
      clearInterval(timer);
      await running;
      await evaluator.close();
    },
  };
}

function required(w: WorkflowService | undefined): WorkflowService {
  if (!w) throw new Error('this run has no warm tier (start it with STRATA_LOCAL_NODES=N)');
  return w;
}
