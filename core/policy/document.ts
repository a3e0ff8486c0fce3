import * as z from 'zod';
import { NAMESPACE_PATTERN } from '../model/keys.js';
import { TAG_PATTERN } from '../model/schemas.js';
import { ValidationError } from '../errors.js';
import { namespacePolicySchema } from './namespace-settings.js';

/**
 * The policy document: Tiera's instance specification (paper 003 §2.2-2.3) in Strata's terms. A document holds
 *  - `namespaces`: per namespace (`*` = every namespace) a preset and the settings that are not rules (TTLs, the
 *    near cache, tombstones, hot residency);
 *  - `rules`: event → response pairs, scoped to a namespace, key prefix or tag;
 *  - `budgets` that cost events compare with, and `controls` that bound what background rules may do.
 * docs/POLICIES.md is the user's guide; its JSON Schema is generated from this file (test/unit/policy-docs.test.ts).
 */

export const POLICY_TIERS = ['hot', 'warm', 'cold'] as const;
export type PolicyTier = (typeof POLICY_TIERS)[number];
const tier = z.enum(POLICY_TIERS);

export const RULE_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ruleId = z.string().regex(RULE_ID_PATTERN, 'a rule id is 1-63 of a-z 0-9 - (starting with a letter or digit)');

const comparison = z.enum(['>', '>=', '<', '<=', '==']);
export type Comparison = z.infer<typeof comparison>;

// ------------------------------------------------------------------------------------------------- conditions

/**
 * Attributes of a tier, as the background evaluator reads them from the tiers' own statistics. `prelaunchFillPercent`
 * (warm): the fullest cache node with no scale-out in flight, as a share of paper 000's speculative threshold T (above
 * 100: it passed T; the rule default-prelaunch, where the deployment configures it).
 */
export const TIER_METRICS = [
  'fillPercent',
  'bytes',
  'entries',
  'requestsPerSecond',
  'nodeFillPercent',
  'prelaunchFillPercent',
] as const;
export type TierMetric = (typeof TIER_METRICS)[number];

const tierCondition = z.strictObject({
  tier,
  metric: z.enum(TIER_METRICS),
  op: comparison,
  value: z.number().min(0),
  /** The condition must hold this long before it counts (hysteresis against flapping). @default 0 */
  forSeconds: z.number().int().min(0).max(86_400).default(0),
  /**
   * While the condition keeps holding, fire again every this many seconds (e.g. one ScaleIn per idle quarter hour).
   * Absent: once per crossing (it fires again only after it stopped holding).
   */
  repeatSeconds: z.number().int().min(10).max(86_400).optional(),
});

/** Numeric attributes of an object (paper §2.2: size, access frequency, last access; plus age). */
export const OBJECT_NUMBERS = ['size', 'ageSeconds', 'idleSeconds', 'accessCount'] as const;

const objectNumber = z.strictObject({ object: z.enum(OBJECT_NUMBERS), op: comparison, value: z.number().min(0) });
const objectDirty = z.strictObject({ object: z.literal('dirty'), equals: z.boolean() });
const objectTag = z.strictObject({ object: z.literal('tag'), equals: z.string().regex(TAG_PATTERN) });
const objectContentType = z.strictObject({
  object: z.literal('contentType'),
  /** A prefix of the content type, e.g. `text/` or `application/json`. */
  startsWith: z.string().min(1).max(128),
});

const costCondition = z.strictObject({
  /** Projected spend for the month, from the cost model (docs/COST.md). */
  cost: z.literal('projectedMonthlyUsd'),
  /** One tier's spend; absent: every tier. */
  tier: tier.optional(),
  /** One namespace's share (a tenant's, when namespaces are tenants); absent: the whole deployment. */
  namespace: z.string().regex(NAMESPACE_PATTERN).optional(),
  op: comparison,
  /** A number of dollars, or the id of a budget in `budgets`. */
  value: z.union([z.number().min(0), z.strictObject({ budget: ruleId })]),
});

export const conditionSchema = z.union([tierCondition, objectNumber, objectDirty, objectTag, objectContentType, costCondition]);
export type Condition = z.infer<typeof conditionSchema>;

// ----------------------------------------------------------------------------------------------------- events

export const ACTIONS = ['put', 'get', 'delete'] as const;

const actionEvent = z.strictObject({
  /** A request: a write, a read or a delete, optionally only those that reach one tier. */
  action: z.enum(ACTIONS),
  tier: tier.optional(),
});
const timerEvent = z.strictObject({
  /**
   * Every this many seconds. Below 1 s only the write-back flush honours it (it runs inside each API process);
   * background rules round up to 1 s. Background timers under a minute run in a Step Functions wait loop in AWS
   * (EventBridge schedules fire at most once a minute), and in-process under `npm start`. At most a week: the
   * evaluator keeps each timer's last firing in its state, so a weekly upkeep (default-prune-order-markers) is a timer.
   */
  timer: z.strictObject({ everySeconds: z.number().min(0.05).max(604_800) }),
});
/** Fires when every condition of the rule (`when`) holds; the event itself names the first one. */
const thresholdEvent = z.strictObject({ threshold: conditionSchema });

export const eventSchema = z.union([actionEvent, timerEvent, thresholdEvent]);
export type PolicyEvent = z.infer<typeof eventSchema>;

// -------------------------------------------------------------------------------------------------- responses

/** Bytes per second; the paper's backup cap is 40 KB/s. */
const bandwidth = z
  .number()
  .int()
  .min(1024)
  .max(10 * 1024 ** 3);

/** Which objects a background copy/move/delete takes: all in scope, or those matching these conditions. */
const selection = z
  .array(z.union([objectNumber, objectDirty, objectTag, objectContentType]))
  .max(8)
  .default([]);

const originSchema = namespacePolicySchema.shape.origin.unwrap();

export const responseSchema = z.union([
  z.strictObject({
    /** Write the object into these tiers before the request is acknowledged. */
    store: z.strictObject({ tiers: z.array(tier).min(1) }),
  }),
  z.strictObject({
    /** Like store, but identical content is stored once (content-addressed) and shared. */
    storeOnce: z.strictObject({ tiers: z.array(tier).min(1) }),
  }),
  z.strictObject({
    /** Read the object from the first of these tiers that has it, else from an origin (read-through). */
    retrieve: z.strictObject({ tiers: z.array(tier).min(1).optional(), origin: originSchema.optional() }),
  }),
  z.strictObject({
    copy: z.strictObject({
      from: tier,
      to: z.array(tier).min(1),
      what: selection,
      bandwidthBytesPerSecond: bandwidth.optional(),
    }),
  }),
  z.strictObject({
    move: z.strictObject({
      from: tier,
      to: z.array(tier).min(1),
      what: selection,
      bandwidthBytesPerSecond: bandwidth.optional(),
    }),
  }),
  z.strictObject({ delete: z.strictObject({ from: tier, what: selection }) }),
  z.strictObject({
    /** zstd (node:zlib) for values of at least `minBytes`; smaller ones are stored as they are. */
    compress: z.strictObject({
      minBytes: z.number().int().min(0).default(1024),
      level: z.number().int().min(1).max(19).default(3),
    }),
  }),
  z.strictObject({ uncompress: z.strictObject({}) }),
  z.strictObject({
    /** AES-256-GCM envelope encryption; `key` names a KMS key in AWS (alias or ARN), a key file locally. */
    encrypt: z.strictObject({ key: z.string().min(1).max(2048) }),
  }),
  z.strictObject({ decrypt: z.strictObject({}) }),
  z.strictObject({
    /** Warm tier: ScaleOut by `nodes` (or by `percent` of today's fleet); hot tier: raise its ElastiCache limits. */
    grow: z.strictObject({
      tier: z.enum(['hot', 'warm']),
      nodes: z.number().int().min(1).max(64).optional(),
      percent: z.number().int().min(1).max(400).optional(),
    }),
  }),
  z.strictObject({
    shrink: z.strictObject({
      tier: z.enum(['hot', 'warm']),
      nodes: z.number().int().min(1).max(64).optional(),
      percent: z.number().int().min(1).max(90).optional(),
    }),
  }),
  z.strictObject({
    /**
     * Upkeep of the deployment's own data structures, started as a workflow: `prune-order-markers` deletes the S3
     * tier's key-order markers of objects gone for good (the order-markers workflow, docs/WORKFLOWS.md).
     */
    maintain: z.strictObject({ task: z.enum(['prune-order-markers']) }),
  }),
  z.strictObject({
    /** Record the firing (metric, log line, history) and do nothing else. */
    alert: z.strictObject({ message: z.string().min(1).max(500) }),
  }),
]);
export type PolicyResponse = z.infer<typeof responseSchema>;
export type ResponseKind = PolicyResponse extends infer R ? (R extends Record<infer K, unknown> ? K : never) : never;

/** The kind of a response: its one key. */
export function responseKind(r: PolicyResponse): ResponseKind {
  return Object.keys(r)[0] as ResponseKind;
}

/** Responses that change the fleet or move data in bulk: background only, bounded by `controls`. */
const BACKGROUND_ONLY = new Set<ResponseKind>(['copy', 'move', 'delete', 'grow', 'shrink', 'maintain']);
/** Responses that act on the object of one request: foreground action rules only. */
const FOREGROUND_ONLY = new Set<ResponseKind>(['store', 'storeOnce', 'retrieve', 'compress', 'uncompress', 'encrypt', 'decrypt']);

// ------------------------------------------------------------------------------------------------------ rules

export const scopeSchema = z.strictObject({
  /** A namespace, or `*` for all. @default '*' */
  namespace: z
    .string()
    .refine((s) => s === '*' || NAMESPACE_PATTERN.test(s), 'a namespace name, or * for every namespace')
    .default('*'),
  /** Only keys that start with this. */
  prefix: z.string().min(1).max(512).optional(),
  /** Only objects that carry this tag. */
  tag: z.string().regex(TAG_PATTERN).optional(),
});
export type PolicyScope = z.infer<typeof scopeSchema>;

export const ruleSchema = z.strictObject({
  id: ruleId,
  description: z.string().max(500).optional(),
  /** A disabled rule is kept in the document and does nothing. @default true */
  enabled: z.boolean().default(true),
  scope: scopeSchema.prefault({}),
  on: eventSchema,
  /** More conditions, all of which must hold (AND). */
  when: z.array(conditionSchema).max(8).default([]),
  /**
   * foreground: on the request path, in the coordinator (action events only; the default for them, as in the
   * paper). background: in the scheduled evaluator (the default, and the only choice, for timer and threshold events).
   */
  mode: z.enum(['foreground', 'background']).optional(),
  do: z.array(responseSchema).min(1).max(8),
});
export type PolicyRule = z.infer<typeof ruleSchema>;
export type PolicyRuleInput = z.input<typeof ruleSchema>;

/** A rule's mode, its default applied. */
export function ruleMode(rule: Pick<PolicyRule, 'on' | 'mode'>): 'foreground' | 'background' {
  return rule.mode ?? ('action' in rule.on ? 'foreground' : 'background');
}

// --------------------------------------------------------------------------------------- namespaces, budgets

export const PRESET_NAMES = [
  'write-through',
  'low-latency',
  'persistent',
  'lru-cascade',
  'growing',
  'high-durability',
  'low-durability',
  'dedup',
  'compressed-cold',
  'encrypted',
] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/** The settings of a namespace that are not event → response rules. */
export const namespaceSettingsSchema = namespacePolicySchema
  .pick({ defaultTtlSeconds: true, hotResidencySeconds: true, promoteOnRead: true, tombstoneTtlMs: true })
  .extend({ nearCache: namespacePolicySchema.shape.nearCache.unwrap().partial().optional() })
  .partial();

export const namespaceEntrySchema = z.strictObject({
  /** A preset's rules, scoped to this namespace, come before the document's own (see docs/POLICIES.md). */
  preset: z.enum(PRESET_NAMES).optional(),
  /** The preset's parameters (e.g. `flushSeconds` for low-latency). */
  with: z.record(z.string(), z.union([z.number(), z.string(), z.boolean()])).optional(),
  settings: namespaceSettingsSchema.optional(),
});
export type NamespaceEntry = z.infer<typeof namespaceEntrySchema>;

export const budgetSchema = z.strictObject({
  id: ruleId,
  /** Dollars per month. */
  monthlyUsd: z.number().positive(),
  tier: tier.optional(),
  namespace: z.string().regex(NAMESPACE_PATTERN).optional(),
  /** What the default cost rule does when the projection passes the budget. @default 'alert' */
  onExceeded: z.enum(['alert', 'evict-cold', 'shrink-warm']).default('alert'),
});
export type Budget = z.infer<typeof budgetSchema>;

export const controlsSchema = z.strictObject({
  /** The kill switch: `false` stops every background response (firings are still evaluated and logged). */
  backgroundEnabled: z.boolean().default(true),
  /** At most this many background responses started per minute, across rules. */
  maxActionsPerMinute: z.number().int().min(1).max(600).default(6),
  /** No rule grows the warm fleet past this many nodes. */
  maxFleetSize: z.number().int().min(1).max(256).default(16),
  /** No rule shrinks the warm fleet below this many nodes. */
  minFleetSize: z.number().int().min(1).max(256).default(1),
  /** No background response starts while the projected monthly spend is above this (dollars); absent: no cap. */
  maxProjectedMonthlyUsd: z.number().positive().optional(),
});
export type PolicyControls = z.infer<typeof controlsSchema>;

export const policyDocumentSchema = z.strictObject({
  description: z.string().max(1000).optional(),
  namespaces: z
    .record(
      z.string().refine((s) => s === '*' || NAMESPACE_PATTERN.test(s), 'a namespace name, or *'),
      namespaceEntrySchema,
    )
    .default({}),
  rules: z.array(ruleSchema).max(200).default([]),
  budgets: z.array(budgetSchema).max(50).default([]),
  controls: controlsSchema.prefault({}),
});
export type PolicyDocument = z.infer<typeof policyDocumentSchema>;
export type PolicyDocumentInput = z.input<typeof policyDocumentSchema>;

// ------------------------------------------------------------------------------------------------- validation

/** One thing wrong with a document: where (`rules[2].on.timer.everySeconds`), which rule, and what. */
export interface PolicyProblem {
  readonly path: string;
  readonly rule?: string;
  readonly message: string;
}

/** A policy document refused whole: 400 VALIDATION_FAILED with every problem in `details.problems`. */
export class PolicyDocumentError extends ValidationError {
  constructor(readonly problems: readonly PolicyProblem[]) {
    const shown = problems
      .slice(0, 5)
      .map((p) => `${p.path}${p.rule ? ` (rule '${p.rule}')` : ''}: ${p.message}`)
      .join('; ');
    const more = problems.length > 5 ? `; and ${problems.length - 5} more` : '';
    super('policy', `invalid policy document: ${shown}${more}`, { problems: problems.map((p) => ({ ...p })) });
  }
}

function pathText(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `${out ? '.' : ''}${String(p)}`;
  return out || '(document)';
}

/** The rule a path points into, by id when the input has one. */
function ruleAt(input: unknown, path: readonly PropertyKey[]): string | undefined {
  if (path[0] !== 'rules' || typeof path[1] !== 'number') return undefined;
  const rules = (input as { rules?: unknown } | null)?.rules;
  const r = Array.isArray(rules) ? (rules[path[1]] as { id?: unknown } | undefined) : undefined;
  return typeof r?.id === 'string' ? r.id : `#${path[1]}`;
}

type Issue = z.core.$ZodIssue;

/**
 * Zod reports a value that fits no form of a union as one "Invalid input" with every form's issues. A user needs
 * the form they meant: the one whose key they wrote (no unknown keys, no missing first key), and its issues;
 * when no form fits, the keys the forms start with.
 */
function flatten(issues: readonly Issue[], base: readonly PropertyKey[] = []): Array<{ path: PropertyKey[]; message: string }> {
  const out: Array<{ path: PropertyKey[]; message: string }> = [];
  const missingKey = (i: Issue): boolean =>
    i.code === 'invalid_type' && i.path.length === 1 && i.message.endsWith('received undefined');
  for (const issue of issues) {
    const path = [...base, ...issue.path];
    if (issue.code !== 'invalid_union' || issue.errors.length === 0) {
      out.push({ path, message: issue.message });
      continue;
    }
    // A form fits when the value has no key the form does not know; of those, the one missing the fewest keys.
    const fits = issue.errors.filter((branch) => !branch.some((i) => i.path.length === 0));
    if (fits.length) {
      const missing = (b: readonly Issue[]): number => b.filter(missingKey).length;
      const best = fits.reduce((a, b) => (missing(b) < missing(a) || (missing(b) === missing(a) && b.length < a.length) ? b : a));
      out.push(...flatten(best, path));
      continue;
    }
    const forms = [...new Set(issue.errors.map((branch) => branch.find((i) => i.path.length === 1)?.path[0]))].filter(
      (k) => k !== undefined,
    );
    const unknown = issue.errors.flatMap((b) =>
      b.flatMap((i) => (i.code === 'unrecognized_keys' && !i.path.length ? i.keys : [])),
    );
    const strange = [...new Set(unknown)].filter((k) => !forms.includes(k));
    out.push({
      path,
      message:
        (strange.length ? `unknown ${strange.map((k) => `'${k}'`).join(', ')}; ` : '') +
        (forms.length ? `expected an object with one of: ${forms.map(String).join(', ')}` : issue.message),
    });
  }
  return out;
}

/** What the schema cannot say: cross-field and cross-rule rules. Empty when the document is consistent. */
export function semanticProblems(doc: PolicyDocument): PolicyProblem[] {
  const problems: PolicyProblem[] = [];
  const seen = new Set<string>();
  const budgets = new Set(doc.budgets.map((b) => b.id));
  doc.rules.forEach((rule, i) => {
    const at = (sub: string, message: string): void => {
      problems.push({ path: `rules[${i}]${sub}`, rule: rule.id, message });
    };
    if (seen.has(rule.id)) at('.id', `another rule already has the id '${rule.id}'`);
    seen.add(rule.id);
    const mode = ruleMode(rule);
    if (mode === 'foreground' && !('action' in rule.on))
      at('.mode', 'only action events run in the foreground; timer and threshold rules run in the background evaluator');
    rule.do.forEach((r, j) => {
      const kind = responseKind(r);
      if (mode === 'foreground' && BACKGROUND_ONLY.has(kind))
        at(`.do[${j}]`, `${kind} runs in the background (bounded by controls); set "mode": "background"`);
      if (mode === 'background' && FOREGROUND_ONLY.has(kind))
        at(`.do[${j}]`, `${kind} acts on the request's object: it needs an action event in the foreground`);
      if ((kind === 'store' || kind === 'storeOnce') && 'action' in rule.on && rule.on.action !== 'put')
        at(`.do[${j}]`, `${kind} answers a put, not a ${rule.on.action}`);
      if (kind === 'retrieve' && 'action' in rule.on && rule.on.action !== 'get')
        at(`.do[${j}]`, `retrieve answers a get, not a ${rule.on.action}`);
      if (kind === 'copy' || kind === 'move') {
        const m = (r as { copy?: { from: string; to: string[] }; move?: { from: string; to: string[] } })[kind]!;
        if (m.to.includes(m.from)) at(`.do[${j}].${kind}.to`, `a ${kind} from '${m.from}' cannot go to '${m.from}' itself`);
      }
      if (kind === 'grow' || kind === 'shrink') {
        const g = (r as { grow?: { nodes?: number; percent?: number }; shrink?: { nodes?: number; percent?: number } })[kind]!;
        if ((g.nodes === undefined) === (g.percent === undefined))
          at(`.do[${j}].${kind}`, 'give exactly one of nodes or percent');
      }
    });
    for (const [k, c] of [rule.on, ...rule.when].entries()) {
      const cond = 'threshold' in c ? c.threshold : c;
      if ('cost' in cond && typeof cond.value === 'object' && !budgets.has(cond.value.budget))
        at(k === 0 ? '.on.threshold.value' : `.when[${k - 1}].value`, `no budget has the id '${cond.value.budget}'`);
    }
  });
  const budgetIds = new Set<string>();
  doc.budgets.forEach((b, i) => {
    if (budgetIds.has(b.id)) problems.push({ path: `budgets[${i}].id`, message: `another budget already has the id '${b.id}'` });
    budgetIds.add(b.id);
  });
  if (doc.controls.minFleetSize > doc.controls.maxFleetSize)
    problems.push({ path: 'controls.minFleetSize', message: 'minFleetSize cannot be above maxFleetSize' });
  return problems;
}

/**
 * Parses and checks a whole document. Throws {@link PolicyDocumentError} naming every problem (schema, then
 * semantics); nothing of a bad document is used.
 */
export function parsePolicyDocument(input: unknown): PolicyDocument {
  const parsed = policyDocumentSchema.safeParse(input);
  if (!parsed.success) {
    throw new PolicyDocumentError(
      flatten(parsed.error.issues).map((i) => {
        const rule = ruleAt(input, i.path);
        return { path: pathText(i.path), ...(rule ? { rule } : {}), message: i.message };
      }),
    );
  }
  const problems = semanticProblems(parsed.data);
  if (problems.length) throw new PolicyDocumentError(problems);
  return parsed.data;
}
