import { createHash } from 'node:crypto';
import {
  PolicyDocumentError,
  parsePolicyDocument,
  responseKind,
  ruleMode,
  ruleSchema,
  type PolicyDocument,
  type PolicyProblem,
  type PolicyRule,
  type PolicyTier,
  type ResponseKind,
} from './document.js';
import { BACKGROUND_RESPONSES, isFlushRule } from './evaluator.js';
import { presetParamProblems, presetRules } from './presets.js';
import { defaultRules, isEviction, type DefaultRulesOptions } from './defaults.js';
import {
  namespacePolicySchema,
  PolicyConfigError,
  PolicyRegistry,
  WARM_ONLY_DURABLE_WHY,
  warmOnlyDurable,
  type KeyScopes,
  type NamespaceConfigInput,
  type NamespacePolicy,
  type ScopeExtras,
  type TransformRule,
} from './namespace-settings.js';
import { ZSTD_AVAILABLE } from '../transforms/codec.js';
import {
  compileNamespacePlacement,
  inScope,
  isOrigin,
  isPlacement,
  namespaceText,
  sortTiers,
  type GroupPlacement,
  type Placement,
} from './scoped-placement.js';

export type { Placement, ScopedPlacement } from './scoped-placement.js';

/**
 * A policy document compiled for the coordinator: presets expanded into rules, and per namespace the placement its
 * foreground rules decide, as the NamespacePolicy the coordinator has always read (so the request path costs the
 * same whatever the rules: bench hot-path). Also the reverse: a deployment's STRATA_NAMESPACES settings as a
 * document, so existing configurations keep working.
 */

export interface CompiledPolicy {
  readonly document: PolicyDocument;
  /** Every rule in force: each namespace's preset rules, then the document's own; disabled ones left out. */
  readonly rules: readonly PolicyRule[];
  /** The settings per namespace, `*` included, for the coordinator. */
  readonly registry: PolicyRegistry;
  /** What the foreground rules compile to, per namespace (validate shows it). */
  readonly placements: Readonly<Record<string, Placement>>;
  /** SHA-256 of the canonical document, 16 hex characters. */
  readonly hash: string;
  /**
   * What a stored document (CompileOptions.stored) does that a new one may not, and is kept running: a placement
   * or background rule that leaves warm holding the only durable copy of a write, accepted before Strata refused it.
   * Absent: none.
   */
  readonly warnings?: readonly PolicyProblem[];
}

/** Write-around never: the largest size a value may have. */
const NEVER = Number.MAX_SAFE_INTEGER;

/**
 * What the runtimes of this deployment run besides placement: `background` = a background evaluator
 * (evaluator.ts) ticks the background rules (`npm start` does; AWS does not yet). Without one their responses are
 * refused rather than accepted and never carried out.
 */
export interface CompileOptions {
  readonly background?: boolean;
  /**
   * The background evaluator runs copy, move and delete, and collects storeOnce blobs (`npm start`; the scheduled
   * evaluator in AWS does not yet). @default background
   */
  readonly transfers?: boolean;
  /**
   * The default rules (defaults.ts) are added, with the deployment's options when given (STRATA_POLICY_DEFAULTS: the
   * eviction schedule, the node-fill response, paper 000's pre-launch). @default background
   */
  readonly defaults?: boolean | DefaultRulesOptions;
  /**
   * The runtime's keyring (composition/keyring-env.ts): encrypt rules are refused without one, and, when `keys` is
   * given, name one of those keys (in AWS, the KMS keys the deployment granted Strata; locally any name).
   */
  readonly encryption?: { readonly keyring: string; readonly keys?: readonly string[] };
  /**
   * A stored document, accepted when it was put, loaded to run: its encrypt rules are kept even where this runtime
   * has no keyring or was not granted the key since (those writes then fail with KEY_UNAVAILABLE, never fall back to
   * a policy that stores them in the clear); a placement whose only durable tier is warm, accepted before Strata
   * refused it, runs as it did and is reported in `warnings` (refusing it would leave the policy store unusable:
   * every change is compared with the version in force). A new document, or a rollback to such a version, is refused.
   */
  readonly stored?: boolean;
  /**
   * The hot tier of this runtime reports per-entry access (the in-process MemoryTier: embedded use, tests), so a
   * copy from hot may select by idleSeconds / accessCount. A Redis hot tier does not (see accessProblem). @default false
   */
  readonly hotTracksAccess?: boolean;
  /**
   * The Lambda functions this deployment declares as origins (STRATA_LAMBDA_ORIGINS: the environment config's
   * api.lambdaOrigins, which the API functions are granted lambda:InvokeFunction on): a retrieve rule naming any other
   * function is refused, except in a stored document (its reads then fail ORIGIN_FAILED). @default none declared
   */
  readonly lambdaOrigins?: readonly string[];
}

/** Responses this version runs. The others are part of the language and refused until their executor exists. */
function unsupported(rule: PolicyRule, opts: CompileOptions): string | undefined {
  for (const r of rule.do) {
    const kind = responseKind(r);
    if (kind === 'store' || kind === 'storeOnce') continue;
    if (isTransformKind(kind)) continue; // checked by transformProblem()
    if (kind === 'retrieve') continue; // tiers and origin: checked by compileNamespacePlacement()
    if (kind === 'copy' && isFlush(rule)) continue;
    const scoped = !!rule.scope.prefix || !!rule.scope.tag;
    const moves = (kind === 'copy' || kind === 'move' || kind === 'delete') && !isEviction(rule);
    const runs = moves ? (opts.transfers ?? opts.background) : opts.background;
    if (runs && BACKGROUND_RESPONSES.has(kind) && ruleMode(rule) === 'background' && (moves || !scoped)) continue;
    return (
      `'${kind}' ${kind === 'copy' ? 'other than the write-back flush (a timer copying dirty values from hot) ' : ''}` +
      'is part of the rule language but this version of Strata does not run it yet'
    );
  }
  return undefined;
}

const isFlush = isFlushRule;

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

/** SHA-256 of the canonical JSON of a parsed document (key order does not matter), 16 hex characters. */
export function policyHash(doc: PolicyDocument): string {
  return createHash('sha256').update(canonical(doc)).digest('hex').slice(0, 16);
}

/**
 * Expands presets, and (where a background evaluator runs) adds the default rules a document does not replace;
 * the problems name the namespace entry or rule.
 */
function expand(doc: PolicyDocument, problems: PolicyProblem[], opts: CompileOptions): PolicyRule[] {
  const out: PolicyRule[] = [];
  if (opts.defaults ?? opts.background) {
    const own = new Set(doc.rules.map((r) => r.id));
    const options = typeof opts.defaults === 'object' ? opts.defaults : {};
    out.push(...defaultRules(doc, options).filter((r) => !own.has(r.id)));
  }
  for (const [ns, entry] of Object.entries(doc.namespaces)) {
    if (!entry.preset) continue;
    const bad = presetParamProblems(entry.preset, entry.with);
    for (const message of bad) problems.push({ path: `namespaces.${ns}.with`, message });
    if (bad.length) continue;
    for (const raw of presetRules(entry.preset, ns, entry.with)) {
      const parsed = ruleSchema.safeParse(raw);
      if (parsed.success) out.push(parsed.data);
      else
        problems.push({
          path: `namespaces.${ns}.with`,
          rule: raw.id,
          message: `preset '${entry.preset}' with these parameters makes an invalid rule: ${parsed.error.issues[0]?.message}`,
        });
    }
  }
  const ids = new Set(out.map((r) => r.id));
  doc.rules.forEach((r, i) => {
    if (ids.has(r.id))
      problems.push({ path: `rules[${i}].id`, rule: r.id, message: `a preset's rule already has the id '${r.id}'` });
    out.push(r);
  });
  return out.filter((r) => r.enabled);
}

/**
 * Why a selection by access (idleSeconds, accessCount) cannot run from tier `from`, or undefined. Only tiers whose
 * scans report each entry's reads can answer it: warm (each cache node tracks its entries' reads in memory) and the
 * in-process MemoryTier as hot. A Redis hot tier cannot at a reasonable cost: OBJECT FREQ answers only under an LFU
 * eviction policy, and an ElastiCache Serverless cache's configuration cannot be changed (it evicts volatile-lru);
 * OBJECT IDLETIME would be one more command (and ECPU) for every key scanned, and reads refresh it. Cold (S3, the
 * local folder) keeps no access record at all.
 */
function accessProblem(from: PolicyTier, object: string, opts: CompileOptions): string | undefined {
  if (from === 'warm' || (from === 'hot' && opts.hotTracksAccess)) return undefined;
  const why =
    from === 'cold'
      ? 'the cold tier (S3, or the local folder) keeps no record of reads'
      : 'the hot tier (Redis / ElastiCache Serverless) cannot report per-key reads: OBJECT FREQ needs an LFU eviction ' +
        'policy, which a serverless cache does not let you set, and OBJECT IDLETIME would cost a command per key scanned';
  return (
    `selection by ${object} from ${from}: ${why}. Select by access from warm, whose cache nodes track each entry's ` +
    'reads, or from this tier by size, ageSeconds, tag, contentType or dirty'
  );
}

/**
 * Why a background copy / move / delete cannot run as written (data-mover.ts), or undefined. Tiers enumerate one
 * namespace at a time, hot evicts on its own (it never holds the only copy, and its dirty entries are the flusher's),
 * and only some tiers track per-entry access (idle time, access count: {@link accessProblem}).
 */
function transferProblem(rule: PolicyRule, opts: CompileOptions): string | undefined {
  if (isFlush(rule)) return undefined;
  for (const r of rule.do) {
    const resize = 'grow' in r ? r.grow : 'shrink' in r ? r.shrink : undefined;
    if (resize?.tier === 'hot' && resize.percent === undefined)
      return `${responseKind(r)} of the hot tier is by percent (its ElastiCache Serverless limits), not by nodes`;
    const spec = 'copy' in r ? r.copy : 'move' in r ? r.move : 'delete' in r ? r.delete : undefined;
    if (!spec) continue;
    const kind = responseKind(r);
    if (rule.scope.namespace === '*' && !isEviction(rule))
      return (
        `${kind} enumerates one namespace's entries: scope the rule to a namespace (scope.namespace), or move from ` +
        'warm to cold for every namespace with no selection, which is the eviction to S3 (EvictToS3)'
      );
    const to: readonly PolicyTier[] = 'to' in spec ? (spec as { to: PolicyTier[] }).to : [];
    if (kind !== 'copy' && spec.from === 'hot')
      return `${kind} from hot: hot evicts on its own (hotResidencySeconds bounds how long it keeps a copy)`;
    if (kind === 'move' && to.every((t) => t === 'hot'))
      return 'move into hot alone would leave the only copy in a tier that evicts on its own';
    const byAccess = spec.what.find((w) => w.object === 'idleSeconds' || w.object === 'accessCount');
    const accessWhy = byAccess && 'object' in byAccess ? accessProblem(spec.from, byAccess.object, opts) : undefined;
    if (accessWhy) return accessWhy;
  }
  return undefined;
}

/**
 * Why a background move or delete out of cold would leave warm holding the only durable copy of the values it takes,
 * or undefined. A delete from cold removes cold's copy wherever warm holds that version (data-mover.ts), and a move
 * carries it up into warm; a warm key range lives on one cache node, so that copy would not survive the node. Static,
 * like the placement check ({@link warmOnlyDurable}): a namespace whose writes never reach warm would lose nothing,
 * but the rule trims nothing there either.
 */
function coldTrimProblem(rule: PolicyRule): string | undefined {
  for (const r of rule.do) {
    const spec = 'move' in r ? r.move : 'delete' in r ? r.delete : undefined;
    if (!spec || spec.from !== 'cold') continue;
    const kind = responseKind(r);
    // A move into hot alone is refused by transferProblem.
    if ('move' in r && !r.move.to.includes('warm')) continue;
    const fix = kind === 'move' ? 'Copy from cold instead' : 'Delete from warm instead';
    return (
      `${namespaceText(rule.scope.namespace)}: a ${kind} from cold would leave warm holding the only durable copy of the ` +
      `values it takes; ${WARM_ONLY_DURABLE_WHY}. ${fix} (cold keeps its copy)`
    );
  }
  return undefined;
}

const TRANSFORM_KINDS = new Set<ResponseKind>(['compress', 'encrypt', 'uncompress', 'decrypt']);
const isTransformKind = (kind: ResponseKind): boolean => TRANSFORM_KINDS.has(kind);
const isTransform = (r: PolicyRule): boolean => 'action' in r.on && r.do.some((d) => 'compress' in d || 'encrypt' in d);

/**
 * Why a compress / encrypt (or uncompress / decrypt) rule cannot run as written, or undefined. A value is transformed
 * once, before any tier holds it, so every tier holds the same bytes (the checksums evictions and migrations verify
 * hold, and promotions never re-encode); reads undo whatever the entry's header records, so uncompress and decrypt
 * on a get are what every read already does.
 */
/** A retrieve rule's Lambda origin that the deployment does not declare (so its functions may not invoke it). */
function lambdaOriginProblem(rule: PolicyRule, opts: CompileOptions): string | undefined {
  if (opts.stored) return undefined;
  for (const r of rule.do) {
    const fn = 'retrieve' in r ? r.retrieve.origin?.lambda : undefined;
    if (fn === undefined || opts.lambdaOrigins?.includes(fn)) continue;
    const declared = opts.lambdaOrigins?.length ? opts.lambdaOrigins.join(', ') : 'none';
    return (
      `origin.lambda '${fn}' is not a Lambda origin this deployment declares (declared: ${declared}); name one of ` +
      "them, or add it to api.lambdaOrigins in the environment's config and redeploy (the API functions may invoke " +
      'only declared functions)'
    );
  }
  return undefined;
}

function transformProblem(rule: PolicyRule, opts: CompileOptions): string | undefined {
  const on = 'action' in rule.on ? rule.on : undefined;
  for (const r of rule.do) {
    const kind = responseKind(r);
    if (!isTransformKind(kind)) continue;
    const inverse = kind === 'uncompress' || kind === 'decrypt';
    if (!on || on.action !== (inverse ? 'get' : 'put'))
      return `${kind} answers a ${inverse ? 'get' : 'put'} (values are transformed as they are written and restored as they are read)`;
    if (on.tier)
      return (
        `${kind} applies before any tier holds the value, so every tier holds the same bytes: remove on.tier ` +
        '(to keep transformed values out of hot, send them around it with a write-around rule, as the compressed-cold preset does)'
      );
    if (rule.when.length)
      return `${kind} takes no conditions: compress has its own size floor (minBytes); scope a rule by prefix or tag instead`;
    if (kind === 'compress' && !ZSTD_AVAILABLE)
      return 'compress needs zstd in node:zlib, which this Node lacks (22.15 or later has it)';
    if ('encrypt' in r && !opts.stored) {
      const enc = opts.encryption;
      if (!enc)
        return (
          'this runtime has no keyring for encryption keys: set STRATA_KEYRING (kms in AWS with the stack prop ' +
          'policyEncryptionKeys, file:<dir> locally; npm start has one)'
        );
      if (enc.keys && !enc.keys.includes(r.encrypt.key))
        return (
          `key '${r.encrypt.key}' is not one this deployment may use (${enc.keyring}: ${enc.keys.join(', ') || 'none'}); ` +
          'name one of them, or grant the key to the deployment (the stack prop policyEncryptionKeys)'
        );
    }
  }
  return undefined;
}

/**
 * Why storeOnce cannot run in a namespace, or undefined. Its blobs are decided in the namespace's lowest durable tier
 * (coordinator/dedup.ts), which every acknowledged write must reach: write-back acknowledges from hot alone. An
 * encrypted value is bound to its key, so it cannot be shared.
 */
function storeOnceProblem(transforms: readonly TransformRule[], placement: Placement): string | undefined {
  if (!transforms.some((t) => t.storeOnce)) return undefined;
  if (placement.writeMode === 'write-back')
    return 'storeOnce needs write-through (its shared copies are decided in a durable tier every write reaches)';
  if (transforms.some((t) => t.encrypt))
    return 'storeOnce and encrypt cannot share a namespace: an encrypted value is bound to its key, so it cannot be shared';
  return undefined;
}

/** The transform rules of a namespace, as the coordinator reads them: compress and encrypt each from its own rules. */
function transformsOf(ns: string, rules: readonly PolicyRule[]): TransformRule[] {
  const compress = inScope(rules, ns, (r) => isTransform(r) && r.do.some((d) => 'compress' in d));
  const encrypt = inScope(rules, ns, (r) => isTransform(r) && r.do.some((d) => 'encrypt' in d));
  const once = inScope(rules, ns, (r) => isPlacement(r) && r.do.some((d) => 'storeOnce' in d));
  const out: TransformRule[] = once.map((r) => ({ rule: r.id, storeOnce: true as const }));
  for (const r of [...compress, ...encrypt]) {
    const scope = { ...(r.scope.prefix ? { prefix: r.scope.prefix } : {}), ...(r.scope.tag ? { tag: r.scope.tag } : {}) };
    for (const d of r.do) {
      if ('compress' in d && compress.includes(r)) out.push({ rule: r.id, ...scope, compress: { ...d.compress } });
      if ('encrypt' in d && encrypt.includes(r)) out.push({ rule: r.id, ...scope, encrypt: { key: d.encrypt.key } });
    }
  }
  return out;
}

/**
 * Compiles a parsed document. Throws {@link PolicyDocumentError} with every problem (a preset's bad parameter, a
 * rule this version cannot run, a placement that would leave the only copy in hot).
 */
export function compilePolicy(doc: PolicyDocument, opts: CompileOptions = {}): CompiledPolicy {
  const problems: PolicyProblem[] = [];
  const warnings: PolicyProblem[] = [];
  const rules = expand(doc, problems, opts);
  const index = new Map(doc.rules.map((r, i) => [r.id, i]));
  const ruleProblem = (rule: PolicyRule, message: string): PolicyProblem => {
    const i = index.get(rule.id);
    const ns = rule.scope.namespace;
    return { path: i !== undefined ? `rules[${i}]` : `namespaces.${ns}.preset`, rule: rule.id, message };
  };
  const problem = (rule: PolicyRule, message: string): void => void problems.push(ruleProblem(rule, message));
  // Warm as the only durable tier: refused, except in a stored document accepted before that was (CompileOptions.stored).
  const warmOnly = (rule: PolicyRule, message: string): void =>
    void (opts.stored ? warnings : problems).push(ruleProblem(rule, message));
  for (const r of rules) {
    const why =
      unsupported(r, opts) ??
      lambdaOriginProblem(r, opts) ??
      transformProblem(r, opts) ??
      transferProblem(r, opts) ??
      (r.scope.namespace === '*' && r.do.some((d) => 'storeOnce' in d)
        ? 'storeOnce is scoped to a namespace (its shared copies are collected namespace by namespace)'
        : undefined);
    if (why) problem(r, why);
    else {
      const trim = coldTrimProblem(r);
      if (trim) warmOnly(r, trim);
    }
    if ((r.scope.prefix || r.scope.tag) && r.do.some((d) => 'storeOnce' in d))
      problem(
        r,
        'storeOnce is scoped to a namespace (its shared copies are collected namespace by namespace), not a prefix or tag',
      );
  }
  const names = new Set<string>(['*', ...Object.keys(doc.namespaces), ...rules.map((r) => r.scope.namespace)]);
  const placements: Record<string, Placement> = {};
  const policies: Record<string, NamespacePolicy> = {};
  const transforms: Record<string, TransformRule[]> = {};
  const keyScopes: Record<string, KeyScopes | null> = {};
  for (const ns of names) {
    const t = transformsOf(ns, rules);
    if (t.length) transforms[ns] = t;
    const once = t.find((x) => x.storeOnce);
    const settings = { ...doc.namespaces['*']?.settings, ...(ns === '*' ? {} : doc.namespaces[ns]?.settings) };
    const nearCache = {
      ...doc.namespaces['*']?.settings?.nearCache,
      ...(ns === '*' ? {} : doc.namespaces[ns]?.settings?.nearCache),
    };
    const nsProblem = (message: string): void => void problems.push({ path: `namespaces.${ns}`, message });
    // One namespace's settings with a placement and read-through: the namespace's own, or one of its key classes'.
    const build = (placement: GroupPlacement, origin: unknown, extras: ScopeExtras = {}): NamespacePolicy | undefined => {
      const parsed = namespacePolicySchema.safeParse({
        ...settings,
        nearCache,
        writeMode: placement.writeMode,
        writeTiers: placement.writeTiers,
        writeAroundBytes: placement.writeAroundBytes ?? NEVER,
        ...(placement.flushIntervalMs !== undefined ? { flushIntervalMs: placement.flushIntervalMs } : {}),
        ...(origin ? { origin } : {}),
      });
      if (!parsed.success) nsProblem(parsed.error.issues[0]?.message ?? 'invalid');
      return parsed.success ? { ...parsed.data, ...extras } : undefined;
    };
    const compiled = compileNamespacePlacement(ns, rules, { rule: problem, namespace: nsProblem, warmOnly }, build);
    placements[ns] = compiled.placement;
    keyScopes[ns] = compiled.keyScopes;
    const dedupProblem = storeOnceProblem(t, compiled.placement);
    if (dedupProblem) problems.push({ path: `namespaces.${ns}`, rule: once?.rule, message: dedupProblem });
    const policy = build(compiled.base, compiled.origin);
    if (policy) policies[ns] = policy;
  }
  // A rule of `*` is checked once for each namespace that takes it: each problem is reported once.
  const once = (list: readonly PolicyProblem[]): PolicyProblem[] => {
    const seen = new Set<string>();
    return list.filter((p) => {
      const id = `${p.rule ?? p.path}\u0000${p.message}`;
      return !seen.has(id) && !!seen.add(id);
    });
  };
  const unique = once(problems);
  if (unique.length) throw new PolicyDocumentError(unique);
  const { '*': defaults, ...namespaces } = policies;
  const registry = new PolicyRegistry(
    { defaults, namespaces: namespaces as unknown as Record<string, Record<string, unknown>> },
    { transforms, keyScopes },
  );
  const warned = once(warnings);
  return { document: doc, rules, registry, placements, hash: policyHash(doc), ...(warned.length ? { warnings: warned } : {}) };
}

/** Parses then compiles: what the admin API and the start-up path use. */
export function compilePolicyInput(input: unknown, opts: CompileOptions = {}): CompiledPolicy {
  return compilePolicy(parsePolicyDocument(input), opts);
}

// ----------------------------------------------------------------------------- STRATA_NAMESPACES as a document

type Settings = NonNullable<PolicyDocument['namespaces'][string]['settings']>;

/**
 * Refuses (PolicyConfigError) namespace settings whose only durable tier is warm ({@link warmOnlyDurable}): the
 * writeTiers below hot, which a write-back write is flushed to. `ns` undefined: the defaults, which every namespace
 * without its own settings takes.
 */
function refuseWarmOnly(p: NamespacePolicy, ns: string | undefined): void {
  const tiers = sortTiers(p.writeTiers);
  if (!warmOnlyDurable(tiers)) return;
  const how = p.writeMode === 'write-back' && tiers.includes('hot') ? 'write-back, flushed to warm alone; ' : '';
  const whose = ns === undefined ? 'defaults: ' : '';
  throw new PolicyConfigError(
    `${whose}warm would hold the only durable copy of a write (${how}writeTiers ${JSON.stringify(tiers)}); ` +
      `${WARM_ONLY_DURABLE_WHY}. Add "cold" to writeTiers`,
    ns,
  );
}

function settingsOf(p: NamespacePolicy): Settings {
  return {
    defaultTtlSeconds: p.defaultTtlSeconds,
    hotResidencySeconds: p.hotResidencySeconds,
    promoteOnRead: p.promoteOnRead,
    tombstoneTtlMs: p.tombstoneTtlMs,
    nearCache: { ...p.nearCache },
  };
}

/** The rules that place writes as the settings `p` did (ids prefixed with `prefix`, scoped to `ns`). */
function placementRules(p: NamespacePolicy, ns: string, prefix: string): PolicyRule[] {
  const tiers = sortTiers(p.writeTiers);
  const durable = tiers.filter((t): t is 'warm' | 'cold' => t !== 'hot');
  const hasHot = tiers.includes('hot');
  const scope = { namespace: ns };
  const out: unknown[] = [];
  if (p.writeMode === 'write-back' && hasHot && durable.length) {
    out.push({ id: `${prefix}-place`, scope, on: { action: 'put' }, do: [{ store: { tiers: ['hot'] } }] });
    out.push({
      id: `${prefix}-flush`,
      scope,
      on: { timer: { everySeconds: p.flushIntervalMs / 1000 } },
      do: [{ copy: { from: 'hot', to: durable, what: [{ object: 'dirty', equals: true }] } }],
    });
  } else {
    out.push({ id: `${prefix}-place`, scope, on: { action: 'put' }, do: [{ store: { tiers } }] });
  }
  if (hasHot && durable.length && p.writeAroundBytes < NEVER)
    out.push({
      id: `${prefix}-write-around`,
      scope,
      on: { action: 'put' },
      when: [{ object: 'size', op: '>=', value: p.writeAroundBytes }],
      do: [{ store: { tiers: durable } }],
    });
  if (p.origin)
    out.push({ id: `${prefix}-read-through`, scope, on: { action: 'get' }, do: [{ retrieve: { origin: p.origin } }] });
  return out.map((r) => ruleSchema.parse(r));
}

const placementKey = (p: NamespacePolicy): string =>
  canonical([
    p.writeMode === 'write-back' && p.writeTiers.includes('hot'),
    sortTiers(p.writeTiers),
    p.writeAroundBytes,
    p.flushIntervalMs,
  ]);

/**
 * A deployment's namespace settings (STRATA_NAMESPACES: `defaults` and per-namespace overrides of writeMode,
 * writeTiers, writeAroundBytes, flushIntervalMs, origin and the rest) as the equivalent policy document: the
 * placement settings become rules (`deploy-…`), the others stay settings. Compiling the result gives back the
 * same settings (test/unit/policy-compile.test.ts checks it over random configurations).
 */
export function documentFromNamespaceConfig(input: NamespaceConfigInput = {}): PolicyDocument {
  const legacy = new PolicyRegistry(input);
  const defaults = legacy.for('*');
  refuseWarmOnly(defaults, undefined);
  for (const ns of legacy.configured()) refuseWarmOnly(legacy.for(ns), ns);
  const namespaces: Record<string, { settings: Settings }> = { '*': { settings: settingsOf(defaults) } };
  const rules = placementRules(defaults, '*', 'deploy');
  for (const ns of legacy.configured()) {
    const p = legacy.for(ns);
    namespaces[ns] = { settings: settingsOf(p) };
    const prefix = `deploy-${ns.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`.slice(0, 50);
    const own = placementRules(p, ns, prefix);
    // Only what differs from the defaults: a namespace with its own placement rules stops inheriting them.
    const differs = placementKey(p) !== placementKey(defaults);
    const originDiffers = canonical(p.origin ?? null) !== canonical(defaults.origin ?? null);
    rules.push(...own.filter((r) => (isOrigin(r) ? originDiffers : differs)));
  }
  return parsePolicyDocument({ namespaces, rules });
}
