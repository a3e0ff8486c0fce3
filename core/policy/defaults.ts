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
 */

/** Defaults' ids start with this; a document's own rule with the same id replaces the default. */
export const DEFAULT_RULE_PREFIX = 'default-';

/** The warm tier's fullest node above this fill starts an eviction to S3 (the node-fill alarm's watermark). */
export const DEFAULT_NODE_FILL_PERCENT = 85;

/** An idle warm fleet: serving at most this many requests a second, and at most this full, for this long. */
export const DEFAULT_IDLE = { requestsPerSecond: 1, fillPercent: 40, forSeconds: 900 } as const;

/** The default rules of `doc`: fixed ones, and one per budget (its `onExceeded`). */
export function defaultRules(doc: PolicyDocument): PolicyRule[] {
  const rules: PolicyRuleInput[] = [
    {
      id: 'default-evict-on-node-fill',
      description:
        "When the fullest cache node passes the watermark, evict the warm tier's coldest entries to S3 (EvictToS3, " +
        'in eviction order, until every node is below it)',
      on: { threshold: { tier: 'warm', metric: 'nodeFillPercent', op: '>=', value: DEFAULT_NODE_FILL_PERCENT } },
      do: [{ move: { from: 'warm', to: ['cold'] } }],
    },
    {
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
    },
  ];
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
