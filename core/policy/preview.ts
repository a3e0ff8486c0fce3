import type { CompiledPolicy } from './compile.js';
import { ruleMode, type Comparison, type Condition, type PolicyRule, type PolicyTier, type TierMetric } from './document.js';
import type { FiringPreview } from './service.js';

/**
 * What the background rules see: tier attributes and projected cost. The dry run (`validate`) and the background
 * evaluator read the same shape, so a dry run says what the evaluator would do on the same state.
 */
export interface PolicyState {
  readonly tiers: Partial<Record<PolicyTier, Partial<Record<TierMetric, number>>>>;
  readonly cost?: {
    readonly total: number;
    readonly byTier: Partial<Record<PolicyTier, number>>;
    readonly byNamespace: Readonly<Record<string, number>>;
  };
  /** Budgets by id, dollars per month (from the document). */
  readonly budgets?: Readonly<Record<string, number>>;
}

export function compare(a: number, op: Comparison, b: number): boolean {
  switch (op) {
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '==':
      return a === b;
  }
}

/** A tier or cost condition against a state: true/false, or a reason it cannot be judged. */
export function judge(c: Condition, state: PolicyState | undefined, budgets: Readonly<Record<string, number>>): boolean | string {
  if ('metric' in c) {
    const v = state?.tiers[c.tier]?.[c.metric];
    if (v === undefined) return `${c.tier}.${c.metric} is not known in this runtime`;
    return compare(v, c.op, c.value);
  }
  if ('cost' in c) {
    const cost = state?.cost;
    if (!cost) return 'no cost projection in this runtime';
    const spend = c.namespace ? cost.byNamespace[c.namespace] : c.tier ? cost.byTier[c.tier] : cost.total;
    if (spend === undefined) return `no projected spend for ${c.namespace ?? c.tier}`;
    const limit = typeof c.value === 'number' ? c.value : budgets[c.value.budget];
    if (limit === undefined) return `no budget '${(c.value as { budget: string }).budget}'`;
    return compare(spend, c.op, limit);
  }
  return 'an object condition is judged per object';
}

function describe(c: Condition): string {
  if ('metric' in c) return `${c.tier}.${c.metric} ${c.op} ${c.value}`;
  if ('cost' in c)
    return `projected ${c.namespace ?? c.tier ?? 'total'} spend ${c.op} ${typeof c.value === 'number' ? `$${c.value}` : `budget ${c.value.budget}`}`;
  return JSON.stringify(c);
}

function preview(rule: PolicyRule, state: PolicyState | undefined, budgets: Readonly<Record<string, number>>): FiringPreview {
  const mode = ruleMode(rule);
  if (mode === 'foreground')
    return { rule: rule.id, mode, fires: false, reason: `runs on each ${(rule.on as { action: string }).action} in scope` };
  if ('timer' in rule.on) return { rule: rule.id, mode, fires: true, reason: `every ${rule.on.timer.everySeconds} s` };
  const conditions = ['threshold' in rule.on ? rule.on.threshold : undefined, ...rule.when].filter(
    (c): c is Condition => c !== undefined && ('metric' in c || 'cost' in c),
  );
  const held: string[] = [];
  for (const c of conditions) {
    const r = judge(c, state, budgets);
    if (typeof r === 'string') return { rule: rule.id, mode, fires: false, reason: `unknown: ${r}` };
    if (!r) return { rule: rule.id, mode, fires: false, reason: `${describe(c)} does not hold` };
    held.push(describe(c));
  }
  return { rule: rule.id, mode, fires: true, reason: held.join(' and ') || 'no condition' };
}

/** Every rule in force with whether it would fire now (background ones judged on `state`). */
export function previewFirings(compiled: CompiledPolicy, state: PolicyState | undefined): FiringPreview[] {
  const budgets = { ...Object.fromEntries(compiled.document.budgets.map((b) => [b.id, b.monthlyUsd])), ...state?.budgets };
  return compiled.rules.map((r) => preview(r, state, budgets));
}
