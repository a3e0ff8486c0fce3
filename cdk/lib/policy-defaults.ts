import type { DefaultRulesOptions } from '../../core/policy/defaults.js';
import type { EnvironmentConfig } from '../config/schema.js';

/**
 * The policies' default rules as an environment configures them (core/policy/defaults.ts): with the policy evaluator on
 * (`policies.evaluator`), the loops the stacks would otherwise wire up themselves are rules the evaluator runs, and
 * which an operator sees in `strata policy validate` and changes or disables by writing a rule with the same id:
 *
 *   workflows.fillAlarmResponse    → default-evict-on-node-fill (evict-to-s3: EvictToS3; scale-out: one ScaleOut;
 *                                    none: no such rule), at monitoring.alarms.nodeFillWatermarkPercent
 *   workflows.evictionEveryHours   → default-evict-schedule (0: no such rule)
 *   workflows.orderMarkerPruneEveryHours → default-prune-order-markers (0: no such rule)
 *   workflows.scaleTrigger         → default-prelaunch (paper 000's speculative scale-out)
 */
export function policyDefaultsOf(config: EnvironmentConfig): DefaultRulesOptions {
  const w = config.workflows;
  const t = w.scaleTrigger;
  return {
    nodeFill: w.fillAlarmResponse === 'evict-to-s3' ? 'evict' : w.fillAlarmResponse === 'scale-out' ? 'grow' : 'off',
    nodeFillPercent: config.monitoring.alarms.nodeFillWatermarkPercent,
    evictEveryHours: w.evictionEveryHours,
    pruneOrderMarkersEveryHours: w.orderMarkerPruneEveryHours,
    prelaunch: {
      unit: t.unit,
      ...(t.capacity !== undefined ? { capacity: t.capacity } : {}),
      lowRate: t.lowRate,
      highRate: t.highRate,
      mode: t.mode,
    },
  };
}

/**
 * STRATA_POLICY_DEFAULTS for every function that compiles policies (the API functions, the ticker's evaluator and
 * flush), so that the rules the admin API shows are those the evaluator runs; nothing without the evaluator (the
 * stacks then run the loops themselves, and no function adds default rules).
 */
export function policyDefaultsEnvironment(config: EnvironmentConfig): Record<string, string> {
  return config.policies.evaluator ? { STRATA_POLICY_DEFAULTS: JSON.stringify(policyDefaultsOf(config)) } : {};
}
