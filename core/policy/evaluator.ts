import { log } from '../util/logger.js';
import type { CompiledPolicy } from './compile.js';
import { responseKind, ruleMode, type Condition, type PolicyResponse, type PolicyRule } from './document.js';
import { judge, type PolicyState } from './preview.js';

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
  /** Whether a scale workflow is running (grow/shrink never start a second one). */
  scaling(): Promise<boolean>;
  /** Starts ScaleOut by `nodes`; resolves with the execution's name. */
  scaleOut(nodes: number, reason: string): Promise<string>;
  /** Starts ScaleIn by `nodes`. */
  scaleIn(nodes: number, reason: string): Promise<string>;
}

export type FiringOutcome = 'done' | 'suppressed' | 'skipped' | 'failed';

/** One entry of the firing history. */
export interface Firing {
  readonly at: string;
  readonly rule: string;
  readonly response: string;
  readonly outcome: FiringOutcome;
  /** What happened, in words (the execution started, or why nothing did). */
  readonly detail: string;
}

export interface EvaluatorOptions {
  readonly actions: EvaluatorActions;
  readonly state: () => Promise<PolicyState>;
  /** Each firing, for its metric. */
  readonly onFiring?: (firing: Firing) => void;
  /** Entries kept. @default 200 */
  readonly historySize?: number;
  readonly now?: () => number;
}

/** Responses the background executor carries out today (the rest are refused when the document is compiled). */
export const BACKGROUND_RESPONSES = new Set(['alert', 'grow', 'shrink']);

export class BackgroundEvaluator {
  private readonly history: Firing[] = [];
  private readonly lastTimer = new Map<string, number>();
  /** Threshold rules: when their conditions started to hold (undefined: they do not), and whether they fired. */
  private readonly holding = new Map<string, { since: number; fired: boolean }>();
  private readonly started: number[] = [];
  private readonly now: () => number;

  constructor(private readonly opts: EvaluatorOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** The newest firings first. */
  firings(limit = 50): Firing[] {
    return this.history.slice(-limit).reverse();
  }

  /** One evaluation of every background rule of `policy`; resolves with this tick's firings. */
  async tick(policy: CompiledPolicy): Promise<Firing[]> {
    const rules = policy.rules.filter((r) => ruleMode(r) === 'background');
    if (!rules.length) return [];
    const now = this.now();
    const needsState = rules.some((r) => !('timer' in r.on) || r.when.length);
    const state = needsState ? await this.opts.state().catch(() => undefined) : undefined;
    const budgets = Object.fromEntries(policy.document.budgets.map((b) => [b.id, b.monthlyUsd]));
    const out: Firing[] = [];
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
    const h = this.holding.get(rule.id) ?? { since: now, fired: false };
    this.holding.set(rule.id, h);
    const forMs = Math.max(0, ...conditions.map((c) => ('forSeconds' in c ? c.forSeconds * 1000 : 0)));
    if (h.fired || now - h.since < forMs) return false;
    h.fired = true;
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
    const record = (outcome: FiringOutcome, detail: string): Firing => {
      const f: Firing = { at: new Date(now).toISOString(), rule: rule.id, response: kind, outcome, detail };
      this.history.push(f);
      if (this.history.length > (this.opts.historySize ?? 200)) this.history.shift();
      log[outcome === 'failed' ? 'warn' : 'info']('policy rule fired', { ...f });
      this.opts.onFiring?.(f);
      return f;
    };
    if (kind === 'alert') return record('done', (response as { alert: { message: string } }).alert.message);
    if (!controls.backgroundEnabled)
      return record('suppressed', 'background actions are switched off (controls.backgroundEnabled)');
    while (this.started.length && now - this.started[0]! >= 60_000) this.started.shift();
    if (this.started.length >= controls.maxActionsPerMinute)
      return record('suppressed', `at most ${controls.maxActionsPerMinute} background actions a minute (controls)`);
    if (controls.maxProjectedMonthlyUsd !== undefined && (state?.cost?.total ?? 0) > controls.maxProjectedMonthlyUsd)
      return record('suppressed', `projected spend above controls.maxProjectedMonthlyUsd ($${controls.maxProjectedMonthlyUsd})`);
    try {
      const detail = await this.scale(kind, response, controls, rule.id);
      if (detail.startsWith('skipped: ')) return record('skipped', detail.slice(9));
      this.started.push(now);
      return record('done', detail);
    } catch (error) {
      return record('failed', error instanceof Error ? error.message : String(error));
    }
  }

  private async scale(
    kind: string,
    response: PolicyResponse,
    controls: CompiledPolicy['document']['controls'],
    ruleId: string,
  ): Promise<string> {
    const spec = (response as Record<string, { tier: string; nodes?: number; percent?: number }>)[kind]!;
    if (spec.tier !== 'warm') return 'skipped: resizing the hot tier is not run by this version';
    const size = await this.opts.actions.fleetSize();
    if (size === undefined) return 'skipped: this deployment has no warm tier';
    if (await this.opts.actions.scaling()) return 'skipped: a scale workflow is already running';
    const by = spec.nodes ?? Math.max(1, Math.round((size * (spec.percent ?? 0)) / 100));
    const reason = `policy rule ${ruleId}`;
    if (kind === 'grow') {
      const nodes = Math.min(by, controls.maxFleetSize - size);
      if (nodes <= 0) return `skipped: the fleet is at controls.maxFleetSize (${controls.maxFleetSize})`;
      return `ScaleOut by ${nodes} (execution ${await this.opts.actions.scaleOut(nodes, reason)})`;
    }
    const nodes = Math.min(by, size - controls.minFleetSize);
    if (nodes <= 0) return `skipped: the fleet is at controls.minFleetSize (${controls.minFleetSize})`;
    return `ScaleIn by ${nodes} (execution ${await this.opts.actions.scaleIn(nodes, reason)})`;
  }
}
