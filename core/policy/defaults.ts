import * as z from 'zod';
import { ruleSchema, type PolicyDocument, type PolicyRule, type PolicyRuleInput } from './document.js';

/**
 * The loops Strata runs on its own, as rules a user can see and change (paper 003: the control layer is the policy;
 * nothing acts outside it). They are added to every policy where a background evaluator runs, after the presets'
 * and before nothing: a rule of the document with the same id takes the default's place, so a default is changed by
 * writing a rule with its id, and switched off by writing it with `"enabled": false`. `strata policy validate` lists
 * them among the rules in force.
 *
 * The write-back flush is not among them: it is the flush rule of every write-back namespace (the low-latency
 * preset's `flush`, or the `deploy-…-flush` rule a STRATA_NAMESPACES write-back setting becomes).
 *
 * Some of them depend on the deployment ({@link DefaultRulesOptions}, STRATA_POLICY_DEFAULTS): in AWS the CDK stacks
 * give every function that compiles policies the same options, from `workflows.*` of cdk/config/<env>.ts, so the rules
 * the admin API shows are the ones the scheduled evaluator runs.
 */

/** Defaults' ids start with this; a document's own rule with the same id replaces the default. */
export const DEFAULT_RULE_PREFIX = 'default-';

/** The warm tier's fullest node above this fill starts an eviction to S3 (the node-fill alarm's watermark). */
export const DEFAULT_NODE_FILL_PERCENT = 85;

/** An idle warm fleet: serving at most this many requests a second, and at most this full, for this long. */
export const DEFAULT_IDLE = { requestsPerSecond: 1, fillPercent: 40, forSeconds: 900 } as const;

/**
 * Paper 000's trigger's settings (cdk/config's `workflows.scaleTrigger`; core/workflows/trigger/threshold.ts): the unit
 * of fill and capacity, δ_L and δ_H, and the migration mode of the scale-outs it starts. The scheduled trigger and the
 * rule `default-prelaunch` read the same.
 */
export const prelaunchSettingsFields = {
  /** `bytes`: fill = stored bytes of the node's capacity; `keys`: fill = keys of `capacity` records. @default 'bytes' */
  unit: z.enum(['keys', 'bytes']).default('bytes'),
  /** c, the node capacity in records; required with unit `keys` (bytes take the nodes' own capacity). */
  capacity: z.number().int().positive().optional(),
  /** δ_L, the lowest request rate expected (requests/s). @default 50 */
  lowRate: z.number().positive().default(50),
  /** δ_H, the highest request rate expected (requests/s). @default 250 */
  highRate: z.number().positive().default(250),
  /** Migration mode of the scale-outs it starts. @default 'incremental' */
  mode: z.enum(['incremental', 'parallel']).default('incremental'),
};

/** What the settings must satisfy together (also checked where cdk/config declares them with its own fields). */
export function checkPrelaunchSettings(
  s: { unit: string; capacity?: number | undefined; lowRate: number; highRate: number },
  ctx: z.RefinementCtx,
): void {
  if (s.unit === 'keys' && s.capacity === undefined)
    ctx.addIssue({ code: 'custom', message: 'unit "keys" needs capacity (records per node)', path: ['capacity'] });
  if (s.highRate < s.lowRate)
    ctx.addIssue({ code: 'custom', message: 'highRate (δ_H) must be at least lowRate (δ_L)', path: ['highRate'] });
}

export const prelaunchSettingsSchema = z.strictObject(prelaunchSettingsFields).superRefine(checkPrelaunchSettings);

/** How often paper 000's speculative threshold is looked at again while it keeps being passed (its trigger's period). */
export const PRELAUNCH_REPEAT_SECONDS = 60;

/**
 * What the deployment decides about the default rules (STRATA_POLICY_DEFAULTS, JSON; in AWS from cdk/config's
 * `workflows` section). Unset, as under `npm start`: the node-fill eviction, the idle scale-in and the budgets' rules.
 */
export const defaultRulesOptionsSchema = z.strictObject({
  /**
   * What `default-evict-on-node-fill` does when the fullest node passes `nodeFillPercent`: `evict` (EvictToS3), `grow`
   * (one ScaleOut) or `off` (no such rule). @default 'evict'
   */
  nodeFill: z.enum(['evict', 'grow', 'off']).default('evict'),
  /** The node-fill watermark (%), the Monitoring stack's node-fill alarm's. @default 85 */
  nodeFillPercent: z.number().gt(0).max(100).default(DEFAULT_NODE_FILL_PERCENT),
  /**
   * `default-evict-schedule`: EvictToS3 every this many hours, whatever the fill (it evicts only above each node's
   * watermark). 0 = no such rule; at most 24 (a background timer's longest period). @default 0
   */
  evictEveryHours: z
    .number()
    .int()
    .min(0)
    .max(24, 'evictEveryHours is at most 24 (a policy timer fires at least daily)')
    .default(0),
  /**
   * `default-prune-order-markers`: the order-markers workflow's prune (the S3 tier's markers of objects gone for good)
   * every this many hours. 0 = no such rule; at most 168 (a policy timer's longest period, a week). @default 0
   */
  pruneOrderMarkersEveryHours: z
    .number()
    .int()
    .min(0)
    .max(168, 'pruneOrderMarkersEveryHours is at most 168 (a policy timer fires at least weekly)')
    .default(0),
  /**
   * `default-prelaunch`: paper 000's speculative scale-out (core/workflows/trigger), with its settings (unit, capacity,
   * δ_L, δ_H, mode). The evaluator's state then holds `warm.prelaunchFillPercent`. Absent: no such rule.
   */
  prelaunch: prelaunchSettingsSchema.optional(),
});
export type DefaultRulesOptions = z.input<typeof defaultRulesOptionsSchema>;

/** The default rules of `doc`: fixed ones, those the deployment configures (`options`), and one per budget. */
export function defaultRules(doc: PolicyDocument, options: DefaultRulesOptions = {}): PolicyRule[] {
  const o = defaultRulesOptionsSchema.parse(options);
  const rules: PolicyRuleInput[] = [];
  if (o.nodeFill !== 'off')
    rules.push({
      id: 'default-evict-on-node-fill',
      description:
        o.nodeFill === 'evict'
          ? "When the fullest cache node passes the watermark, evict the warm tier's coldest entries to S3 (EvictToS3, " +
            'in eviction order, until every node is below it)'
          : 'When the fullest cache node passes the watermark, add a node (one ScaleOut: new nodes take half of the ' +
            "fullest ranges; the deployment's workflows.fillAlarmResponse is scale-out)",
      on: { threshold: { tier: 'warm', metric: 'nodeFillPercent', op: '>=', value: o.nodeFillPercent } },
      do: [o.nodeFill === 'evict' ? { move: { from: 'warm', to: ['cold'] } } : { grow: { tier: 'warm', nodes: 1 } }],
    });
  if (o.evictEveryHours > 0)
    rules.push({
      id: 'default-evict-schedule',
      description:
        `Every ${o.evictEveryHours} hours, evict what each cache node holds above its watermark to S3 (EvictToS3), ` +
        'so a node the fill rule did not catch still sheds its coldest entries',
      on: { timer: { everySeconds: o.evictEveryHours * 3600 } },
      do: [{ move: { from: 'warm', to: ['cold'] } }],
    });
  if (o.pruneOrderMarkersEveryHours > 0)
    rules.push({
      id: 'default-prune-order-markers',
      description:
        `Every ${o.pruneOrderMarkersEveryHours} hours, delete the S3 tier's key-order markers of objects gone for good ` +
        '(the order-markers workflow, mode prune), so ordered key listings stop paying a read for each',
      on: { timer: { everySeconds: o.pruneOrderMarkersEveryHours * 3600 } },
      do: [{ maintain: { task: 'prune-order-markers' } }],
    });
  if (o.prelaunch) rules.push(prelaunchRule(o.prelaunch));
  rules.push({
    id: 'default-idle-scale-in',
    description:
      'A warm fleet that has served almost nothing and held little for a quarter of an hour gives back a node ' +
      '(one ScaleIn per idle quarter hour; never below controls.minFleetSize, never while a scale or migration runs)',
    on: {
      threshold: {
        tier: 'warm',
        metric: 'requestsPerSecond',
        op: '<=',
        value: DEFAULT_IDLE.requestsPerSecond,
        forSeconds: DEFAULT_IDLE.forSeconds,
        repeatSeconds: DEFAULT_IDLE.forSeconds,
      },
    },
    when: [{ tier: 'warm', metric: 'fillPercent', op: '<=', value: DEFAULT_IDLE.fillPercent }],
    do: [{ shrink: { tier: 'warm', nodes: 1 } }],
  });
  for (const b of doc.budgets) {
    const over = `projected ${b.namespace ? `spend of namespace ${b.namespace}` : b.tier ? `${b.tier} tier spend` : 'spend'}`;
    rules.push({
      id: `default-budget-${b.id}`.slice(0, 63),
      description: `When the ${over} passes budget '${b.id}' ($${b.monthlyUsd}/month): ${b.onExceeded}`,
      on: {
        threshold: {
          cost: 'projectedMonthlyUsd',
          ...(b.tier ? { tier: b.tier } : {}),
          ...(b.namespace ? { namespace: b.namespace } : {}),
          op: '>',
          value: { budget: b.id },
        },
      },
      do: [
        b.onExceeded === 'evict-cold'
          ? { move: { from: 'warm', to: ['cold'] } }
          : b.onExceeded === 'shrink-warm'
            ? { shrink: { tier: 'warm', nodes: 1 } }
            : { alert: { message: `${over} is above budget '${b.id}' ($${b.monthlyUsd}/month)` } },
      ],
    });
  }
  return rules.map((r) => ruleSchema.parse(r));
}

/**
 * Paper 000's trigger as a rule. `warm.prelaunchFillPercent` is the fill of the fullest cache node with no scale-out in
 * flight, as a share of the speculative threshold T (workflows/trigger/threshold.ts; the evaluator computes it with
 * the trigger's own code): above 100 that node passed T, and one ScaleOut is started for it (holding its lock, in the
 * configured mode). Looked at again every minute while it holds, as the trigger was (a scale-out already running
 * makes the grow skip until it ends).
 */
function prelaunchRule(p: z.output<typeof prelaunchSettingsSchema>): PolicyRuleInput {
  const c = p.unit === 'keys' ? `${p.capacity} records` : 'its capacity in bytes';
  return {
    id: 'default-prelaunch',
    description:
      "Paper 000's speculative scale-out: when the fullest cache node with no scale-out in flight passes " +
      `T = c/2 + δ_H·(‖N‖ − R/δ_L) (c = ${c}, δ_L = ${p.lowRate}, δ_H = ${p.highRate} req/s, R = the fleet's rate, ` +
      `‖N‖ = its nodes), launch a node for it (one ${p.mode} ScaleOut, locked to that node)`,
    on: {
      threshold: {
        tier: 'warm',
        metric: 'prelaunchFillPercent',
        op: '>',
        value: 100,
        repeatSeconds: PRELAUNCH_REPEAT_SECONDS,
      },
    },
    do: [{ grow: { tier: 'warm', nodes: 1 } }],
  };
}

/**
 * A `move` from warm to cold for every namespace with no selection: the warm tier's eviction to S3 (the EvictToS3
 * workflow, which moves victims in the nodes' eviction order until they are below the watermark), rather than a copy
 * of every entry.
 */
export function isEviction(rule: PolicyRule): boolean {
  return (
    rule.scope.namespace === '*' &&
    !rule.scope.prefix &&
    !rule.scope.tag &&
    rule.do.length === 1 &&
    'move' in rule.do[0]! &&
    rule.do[0].move.from === 'warm' &&
    rule.do[0].move.to.length === 1 &&
    rule.do[0].move.to[0] === 'cold' &&
    rule.do[0].move.what.length === 0 &&
    rule.do[0].move.bandwidthBytesPerSecond === undefined
  );
}
