import type { FiringOutcomeWire, FiringWire } from '../../sdk/src/contract.js';
import { errorText } from '../errors.js';
import { log } from '../util/logger.js';
import type { CompiledPolicy } from './compile.js';
import type { TransferResult, TransferSpec } from './data-mover.js';
import type { CollectResult } from './dedup-gc.js';
import { responseKind, ruleMode, type Condition, type PolicyResponse, type PolicyRule, type PolicyTier } from './document.js';
import { judge, type PolicyState } from './preview.js';
import { isEviction } from './defaults.js';
import type { JobBoard } from './jobs.js';
import { BackgroundRuns } from './evaluator-runs.js';

/**
 * The background executor: evaluates the background rules of the policy in force on a tick (an in-process loop
 * under `npm start`, a scheduled function in AWS) against the tiers' and the cost model's state, and carries out
 * their responses through {@link EvaluatorActions}. Every firing is recorded: a structured log line, a metric per
 * rule ({@link EvaluatorOptions.onFiring}) and an entry in a bounded history the admin API serves.
 *
 * Semantics (the same as the dry run's, preview.ts):
 *  - a timer rule fires every `everySeconds` (at the first tick at or after it is due);
 *  - a threshold rule fires when its conditions start to hold for `forSeconds` (edge-triggered), and again only
 *    after they stopped holding: a fill above 75% grows the fleet once, not at every tick;
 *  - a condition that cannot be judged (no statistics yet) does not fire.
 * Controls bound what fires: the kill switch (`backgroundEnabled: false`) records firings as suppressed, at most
 * `maxActionsPerMinute` responses start per minute, grow never passes `maxFleetSize` nor shrink `minFleetSize`,
 * and nothing starts while the projected monthly spend is above `maxProjectedMonthlyUsd`.
 */

/** What carrying out a response needs from outside the policy layer (the workflows, the fleet). */
export interface EvaluatorActions {
  /** The warm fleet's size now (for grow/shrink bounds), or undefined when there is no warm tier. */
  fleetSize(): Promise<number | undefined>;
  /**
   * Whether a scale or migration workflow is running, or the ring has a migration in progress: grow and shrink never
   * start another one then.
   */
  scaling(): Promise<boolean>;
  /**
   * Starts the eviction of the warm tier's coldest entries to S3 (EvictToS3) unless one is running; resolves with
   * the execution's name, or `skipped: <why>`. Absent: evictions are skipped.
   */
  evict?(reason: string): Promise<string>;
  /**
   * Raises (percent > 0) or lowers the hot tier's usage limits (ElastiCache Serverless: composition/hot-tier-limits.ts);
   * resolves with what it did or `skipped: <why>`. Absent: a hot-tier grow or shrink is skipped.
   */
  resizeHot?(percent: number, reason: string): Promise<string>;
  /**
   * Starts the prune of the S3 tier's stale order markers (the order-markers workflow, mode prune) unless one is
   * running; resolves with the execution's name, or `skipped: <why>`. Absent: the upkeep is skipped.
   */
  pruneOrderMarkers?(reason: string): Promise<string>;
  /** Starts one ScaleOut (one node); resolves with the execution's name. */
  scaleOut(reason: string): Promise<string>;
  /** Starts one ScaleIn (one node). */
  scaleIn(reason: string): Promise<string>;
  /**
   * Carries out a background copy, move or delete (data-mover.ts) over this runtime's tiers; resolves when it is
   * done. Absent: those responses are skipped (a runtime without the tiers at hand).
   */
  transfer?(request: TransferRequest): Promise<TransferResult>;
  /**
   * Removes the storeOnce blobs of a namespace no key refers to any more (dedup-gc.ts). Absent: blobs are not
   * collected by this runtime.
   */
  collectBlobs?(ns: string): Promise<CollectResult>;
  /**
   * Where a runtime that reaches no tier queues its copies, moves, deletes and blob collections for a runner that
   * does (the scheduled evaluator in AWS: jobs.ts). Used when `transfer` / `collectBlobs` are absent.
   */
  jobs?: Pick<JobBoard, 'submit' | 'poll'>;
}

/**
 * A copy, move or delete as a rule asks for it: a {@link TransferSpec} with the tiers by name (the runtime resolves
 * them, and knows which are durable), and how to tell that the run should stop.
 */
export type TransferRequest = Omit<TransferSpec, 'from' | 'to' | 'durable'> & {
  readonly from: PolicyTier;
  readonly to: readonly PolicyTier[];
  /** True once the rule left the policy or background actions were switched off: the run stops. */
  readonly cancelled: () => boolean;
};

export type FiringOutcome = FiringOutcomeWire;

/** What an evaluator carries from one tick to the next, as JSON (the scheduled evaluator stores it between ticks). */
export interface EvaluatorSnapshot {
  readonly history: Firing[];
  readonly lastTimer: Record<string, number>;
  readonly holding: Record<string, { since: number; fired: boolean; firedAt: number }>;
  readonly started: number[];
  readonly lastEntry: Record<string, { outcome: FiringOutcome; detail: string; at: number }>;
  readonly pending?: { kind: 'grow' | 'shrink'; left: number; of: number; rule: string };
  /** When each timer copy last finished cleanly (by rule and response): its next run takes what was written since. */
  readonly transferredSince?: Record<string, number>;
  /** When each storeOnce namespace's blobs were last collected. */
  readonly collected?: Record<string, number>;
  /** Whether jobs may be on the board (queued ones not yet seen finished): only then is the board read. */
  readonly jobs?: boolean;
}

/** One entry of the firing history (the wire contract's shape). */
export type Firing = Readonly<FiringWire>;

/** What the admin API reads of a runtime's evaluator: its bounded firing history. */
export interface FiringHistory {
  /** The newest firings first, at most `limit`. */
  firings(limit?: number): Firing[];
}

export interface EvaluatorOptions {
  readonly actions: EvaluatorActions;
  readonly state: () => Promise<PolicyState>;
  /** Each firing, for its metric. */
  readonly onFiring?: (firing: Firing) => void;
  /** Entries kept. @default 200 */
  readonly historySize?: number;
  /** How often the blobs of each storeOnce namespace are collected. @default ten minutes */
  readonly blobCollectionMs?: number;
  /**
   * Where an earlier process left off (a scheduled evaluator starts afresh at each invocation: evaluator-store.ts):
   * timers, thresholds held, actions started, a multi-node plan and the history.
   */
  readonly resume?: EvaluatorSnapshot;
  readonly now?: () => number;
}

type Controls = CompiledPolicy['document']['controls'];

/** Responses the background executor carries out today (the rest are refused when the document is compiled). */
export const BACKGROUND_RESPONSES = new Set(['alert', 'grow', 'shrink', 'copy', 'move', 'delete', 'maintain']);

const TRANSFERS = new Set(['copy', 'move', 'delete']);

export class BackgroundEvaluator implements FiringHistory {
  private readonly history: Firing[] = [];
  private readonly lastTimer = new Map<string, number>();
  /** Threshold rules: when their conditions started to hold (undefined: they do not), and whether they fired. */
  private readonly holding = new Map<string, { since: number; fired: boolean; firedAt: number }>();
  private readonly started: number[] = [];
  /** The last history entry of each rule and response (to keep repeated skips out of the history). */
  private readonly lastEntry = new Map<string, { outcome: FiringOutcome; detail: string; at: number }>();
  /**
   * A grow or shrink by several nodes: one ScaleOut or ScaleIn adds or removes one node, and only one runs at a
   * time, so the rest start at later ticks, each once the one before has finished.
   */
  private pending?: { kind: 'grow' | 'shrink'; left: number; of: number; rule: string };
  private policy?: CompiledPolicy;
  /** Copies, moves, deletes and blob collections (evaluator-runs.ts). */
  private readonly runs: BackgroundRuns;
  private readonly now: () => number;

  constructor(private readonly opts: EvaluatorOptions) {
    this.now = opts.now ?? Date.now;
    const r = opts.resume;
    if (r) {
      this.history.push(...r.history.slice(-(opts.historySize ?? 200)));
      for (const [k, v] of Object.entries(r.lastTimer)) this.lastTimer.set(k, v);
      for (const [k, v] of Object.entries(r.holding)) this.holding.set(k, { ...v });
      this.started.push(...r.started);
      for (const [k, v] of Object.entries(r.lastEntry)) this.lastEntry.set(k, { ...v });
      if (r.pending) this.pending = { ...r.pending };
    }
    this.runs = new BackgroundRuns(
      {
        actions: opts.actions,
        record: (rule, response, outcome, detail, at) => this.record(rule, response, outcome, detail, at),
        now: this.now,
        started: (at) => this.started.push(at),
        policy: () => this.policy,
        ...(opts.blobCollectionMs !== undefined ? { blobCollectionMs: opts.blobCollectionMs } : {}),
      },
      r,
    );
  }

  /** What the next tick needs to go on where this one left off (JSON). */
  snapshot(): EvaluatorSnapshot {
    return {
      history: [...this.history],
      lastTimer: Object.fromEntries(this.lastTimer),
      holding: Object.fromEntries(this.holding),
      started: [...this.started],
      lastEntry: Object.fromEntries(this.lastEntry),
      ...(this.pending ? { pending: { ...this.pending } } : {}),
      ...this.runs.snapshot(),
    };
  }

  /** Whether a queued job has no runner at the end of this tick (the ticker then starts one: job-runner.ts). */
  get jobsWaitingForRunner(): boolean {
    return this.runs.jobsWaitingForRunner;
  }

  /** Resolves once every background copy, move and delete under way has finished (tests). */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  /** Stops the copies, moves and deletes under way (between two entries) and waits for them (shutdown). */
  close(): Promise<void> {
    return this.runs.close();
  }

  /** The newest firings first. */
  firings(limit = 50): Firing[] {
    return this.history.slice(-limit).reverse();
  }

  /** One evaluation of every background rule of `policy`; resolves with this tick's firings. */
  async tick(policy: CompiledPolicy): Promise<Firing[]> {
    this.policy = policy;
    // The write-back flush runs in each API process (the coordinator's flusher), not here.
    const rules = policy.rules.filter((r) => ruleMode(r) === 'background' && !isFlushRule(r));
    const now = this.now();
    await this.runs.pollJobs();
    const continued = await this.continuePending(policy, now);
    await this.runs.collectDue(policy, now);
    if (!rules.length) return continued ? [continued] : [];
    const needsState = rules.some((r) => !('timer' in r.on) || r.when.length);
    const state = needsState ? await this.opts.state().catch(() => undefined) : undefined;
    const budgets = Object.fromEntries(policy.document.budgets.map((b) => [b.id, b.monthlyUsd]));
    const out: Firing[] = continued ? [continued] : [];
    for (const rule of rules) {
      if (!this.due(rule, now, state, budgets)) continue;
      for (const response of rule.do) out.push(await this.respond(rule, response, policy, state, now));
    }
    return out;
  }

  private due(rule: PolicyRule, now: number, state: PolicyState | undefined, budgets: Record<string, number>): boolean {
    const holds = (c: Condition): boolean => judge(c, state, budgets) === true;
    if ('timer' in rule.on) {
      const last = this.lastTimer.get(rule.id);
      if (last !== undefined && now - last < rule.on.timer.everySeconds * 1000) return false;
      if (!rule.when.every(holds)) return false;
      this.lastTimer.set(rule.id, now);
      return last !== undefined; // the first tick starts the clock
    }
    const conditions = ['threshold' in rule.on ? rule.on.threshold : undefined, ...rule.when].filter((c) => c !== undefined);
    if (!conditions.every(holds)) {
      this.holding.delete(rule.id);
      return false;
    }
    const h = this.holding.get(rule.id) ?? { since: now, fired: false, firedAt: 0 };
    this.holding.set(rule.id, h);
    const forMs = Math.max(0, ...conditions.map((c) => ('forSeconds' in c ? c.forSeconds * 1000 : 0)));
    if (now - h.since < forMs) return false;
    if (h.fired) {
      // Once per crossing, unless a condition asks to repeat while it keeps holding (an idle fleet gives back one
      // node per idle period).
      const repeatMs = Math.max(
        0,
        ...conditions.map((c) => ('repeatSeconds' in c && c.repeatSeconds ? c.repeatSeconds * 1000 : 0)),
      );
      if (repeatMs === 0 || now - h.firedAt < repeatMs) return false;
    }
    h.fired = true;
    h.firedAt = now;
    return true;
  }

  private async respond(
    rule: PolicyRule,
    response: PolicyResponse,
    policy: CompiledPolicy,
    state: PolicyState | undefined,
    now: number,
  ): Promise<Firing> {
    const kind = responseKind(response);
    const controls = policy.document.controls;
    const record = (outcome: FiringOutcome, detail: string): Firing => this.record(rule.id, kind, outcome, detail, now);
    if (kind === 'alert') return record('done', (response as { alert: { message: string } }).alert.message);
    const blocked = this.blocked(controls, state, now);
    if (blocked) return record('suppressed', blocked);
    if (kind === 'move' && isEviction(rule)) return this.evict(rule, record);
    if (kind === 'maintain') return this.maintain(rule, record);
    if (TRANSFERS.has(kind)) return this.runs.transfer(rule, response, now, record);
    try {
      const detail = await this.scale(kind as 'grow' | 'shrink', response, controls, rule.id, now);
      if (detail.startsWith('skipped: ')) return record('skipped', detail.slice(9));
      return record('done', detail);
    } catch (error) {
      return record('failed', errorText(error));
    }
  }

  private record(rule: string, response: string, outcome: FiringOutcome, detail: string, now: number): Firing {
    const f: Firing = { at: new Date(now).toISOString(), rule, response, outcome, detail };
    this.opts.onFiring?.(f);
    // A timer rule that keeps being skipped or suppressed for the same reason (a workflow still running, the fleet at
    // its bound) would fill the history and the log every tick: the same entry is kept once a minute.
    const key = `${rule}\u0000${response}`;
    const last = this.lastEntry.get(key);
    if (
      outcome !== 'done' &&
      outcome !== 'failed' &&
      last?.outcome === outcome &&
      last.detail === detail &&
      now - last.at < 60_000
    )
      return f;
    this.lastEntry.set(key, { outcome, detail, at: now });
    this.history.push(f);
    if (this.history.length > (this.opts.historySize ?? 200)) this.history.shift();
    log[outcome === 'failed' ? 'warn' : 'info']('policy rule fired', { ...f });
    return f;
  }

  /** Why the controls stop an action now, or undefined when they let it start. */
  private blocked(controls: Controls, state: PolicyState | undefined, now: number): string | undefined {
    if (!controls.backgroundEnabled) return 'background actions are switched off (controls.backgroundEnabled)';
    while (this.started.length && now - this.started[0]! >= 60_000) this.started.shift();
    if (this.started.length >= controls.maxActionsPerMinute)
      return `at most ${controls.maxActionsPerMinute} background actions a minute (controls)`;
    if (controls.maxProjectedMonthlyUsd !== undefined && (state?.cost?.total ?? 0) > controls.maxProjectedMonthlyUsd)
      return `projected spend above controls.maxProjectedMonthlyUsd ($${controls.maxProjectedMonthlyUsd})`;
    return undefined;
  }

  private async scale(
    kind: 'grow' | 'shrink',
    response: PolicyResponse,
    controls: Controls,
    ruleId: string,
    now: number,
  ): Promise<string> {
    const spec = (response as Record<string, { tier: string; nodes?: number; percent?: number }>)[kind]!;
    if (spec.tier === 'hot') {
      const resize = this.opts.actions.resizeHot;
      if (!resize) return 'skipped: this runtime cannot change the hot tier (ElastiCache Serverless limits, in AWS)';
      const percent = (spec.percent ?? 0) * (kind === 'grow' ? 1 : -1);
      const done = await resize(percent, `policy rule ${ruleId}`);
      if (!done.startsWith('skipped: ')) this.started.push(now);
      return done;
    }
    const size = await this.opts.actions.fleetSize();
    if (size === undefined) return 'skipped: this deployment has no warm tier';
    if (await this.opts.actions.scaling()) return 'skipped: a scale workflow is already running';
    const by = spec.nodes ?? Math.max(1, Math.round((size * (spec.percent ?? 0)) / 100));
    const room = kind === 'grow' ? controls.maxFleetSize - size : size - controls.minFleetSize;
    if (room <= 0)
      return kind === 'grow'
        ? `skipped: the fleet is at controls.maxFleetSize (${controls.maxFleetSize})`
        : `skipped: the fleet is at controls.minFleetSize (${controls.minFleetSize})`;
    const nodes = Math.min(by, room);
    // A newer firing replaces what is left of an older plan.
    this.pending = nodes > 1 ? { kind, left: nodes - 1, of: nodes, rule: ruleId } : undefined;
    return this.startOne(kind, ruleId, 1, nodes, now);
  }

  private async startOne(kind: 'grow' | 'shrink', ruleId: string, n: number, of: number, now: number): Promise<string> {
    const reason = `policy rule ${ruleId} (${n} of ${of})`;
    const execution = kind === 'grow' ? await this.opts.actions.scaleOut(reason) : await this.opts.actions.scaleIn(reason);
    this.started.push(now);
    return `${kind === 'grow' ? 'ScaleOut' : 'ScaleIn'} ${n} of ${of} (execution ${execution})`;
  }

  /** The eviction to S3 (a move from warm to cold for every namespace: defaults.ts `isEviction`). */
  private async evict(rule: PolicyRule, record: (o: FiringOutcome, d: string) => Firing): Promise<Firing> {
    const evict = this.opts.actions.evict;
    if (!evict) return record('skipped', 'this runtime has no warm tier to evict from');
    try {
      const started = await evict(`policy rule ${rule.id}`);
      if (started.startsWith('skipped: ')) return record('skipped', started.slice(9));
      this.started.push(this.now());
      return record('done', `EvictToS3 started (execution ${started})`);
    } catch (error) {
      return record('failed', errorText(error));
    }
  }

  /** Upkeep started as a workflow (`maintain`: the prune of stale order markers). */
  private async maintain(rule: PolicyRule, record: (o: FiringOutcome, d: string) => Firing): Promise<Firing> {
    const prune = this.opts.actions.pruneOrderMarkers;
    if (!prune) return record('skipped', 'this runtime cannot start the order-markers workflow');
    try {
      const started = await prune(`policy rule ${rule.id}`);
      if (started.startsWith('skipped: ')) return record('skipped', started.slice(9));
      this.started.push(this.now());
      return record('done', `OrderMarkers prune started (execution ${started})`);
    } catch (error) {
      return record('failed', errorText(error));
    }
  }

  /** The next node of a multi-node grow or shrink, once the previous workflow has finished. */
  private async continuePending(policy: CompiledPolicy, now: number): Promise<Firing | undefined> {
    const p = this.pending;
    if (!p) return undefined;
    const controls = policy.document.controls;
    const drop = (outcome: FiringOutcome, why: string): Firing => {
      this.pending = undefined;
      return this.record(p.rule, p.kind, outcome, `${p.left} more node(s) dropped: ${why}`, now);
    };
    if (!policy.rules.some((r) => r.id === p.rule)) return drop('skipped', 'the rule is no longer in the policy');
    if (!controls.backgroundEnabled) return drop('suppressed', 'background actions are switched off');
    if (this.blocked(controls, undefined, now) || (await this.opts.actions.scaling())) return undefined; // a later tick
    const size = await this.opts.actions.fleetSize();
    const room = size === undefined ? 0 : p.kind === 'grow' ? controls.maxFleetSize - size : size - controls.minFleetSize;
    if (room <= 0) return drop('skipped', 'the fleet reached its bound (controls)');
    const n = p.of - p.left + 1;
    p.left--;
    if (p.left === 0) this.pending = undefined;
    try {
      return this.record(p.rule, p.kind, 'done', await this.startOne(p.kind, p.rule, n, p.of, now), now);
    } catch (error) {
      this.pending = undefined;
      return this.record(p.rule, p.kind, 'failed', errorText(error), now);
    }
  }
}

/** The write-back flush (a timer copying dirty values from hot), which the coordinator runs. */
export function isFlushRule(rule: PolicyRule): boolean {
  if (!('timer' in rule.on) || rule.do.length !== 1 || rule.when.length) return false;
  const r = rule.do[0]!;
  return (
    'copy' in r &&
    r.copy.from === 'hot' &&
    r.copy.bandwidthBytesPerSecond === undefined &&
    r.copy.what.length === 1 &&
    r.copy.what.some((w) => w.object === 'dirty' && 'equals' in w && w.equals)
  );
}
