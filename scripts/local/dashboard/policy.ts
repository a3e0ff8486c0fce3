/**
 * What the local dashboard's "Policy firings" panel shows: the background evaluator's history (the
 * `FiringHistory` the admin API serves as `GET /v1/admin/policy/firings`, kept in memory by the evaluator `npm start`
 * ticks), newest first, and the policy in force (the live policy's version, source and hash). Both are read from
 * memory at each `/dashboard/data`: no store is read.
 */
import type { CompiledPolicy } from '../../../core/policy/compile.js';
import { ruleMode } from '../../../core/policy/document.js';
import { isFlushRule, type Firing, type FiringHistory } from '../../../core/policy/evaluator.js';
import type { PolicyView } from '../../../core/policy/service.js';

/** Rows the panel lists, as `GET /v1/admin/policy/firings` answers by default. */
export const FIRINGS_SHOWN = 50;
/** How far back the panel looks for rows before `until` (the evaluator keeps 200 by default). */
const FIRINGS_READ = 200;

/** One row of the policy-firings list: a firing as the admin API serves it. */
export type FiringRow = Firing;

/** The policy in force, as the panel names it. */
export interface PolicyInForce {
  /** 0: the deployment's configuration; then +1 per change. */
  version: number;
  source: PolicyView['source'];
  /** SHA-256 of the canonical document (16 hex characters). */
  hash: string;
  /** When this version was written (absent for version 0). */
  updatedAt?: string;
  /** The background rules the evaluator ticks (timer and threshold rules, the write-back flush left out). */
  backgroundRules: number;
}

/** The policy in force, from the live policy's current copy. */
export function policyInForce(current: { readonly view: PolicyView; readonly compiled: CompiledPolicy }): PolicyInForce {
  const { view, compiled } = current;
  return {
    version: view.version,
    source: view.source,
    hash: view.hash,
    ...(view.updatedAt ? { updatedAt: view.updatedAt } : {}),
    backgroundRules: compiled.rules.filter((r) => ruleMode(r) === 'background' && !isFlushRule(r)).length,
  };
}

/**
 * The newest firings first, at most {@link FIRINGS_SHOWN}; with `until` (the page shown as it was then), only those
 * that had happened by then.
 */
export function firingRows(history: FiringHistory, until?: number): FiringRow[] {
  const all = history.firings(until === undefined ? FIRINGS_SHOWN : FIRINGS_READ);
  return (until === undefined ? all : all.filter((f) => Date.parse(f.at) <= until)).slice(0, FIRINGS_SHOWN);
}
