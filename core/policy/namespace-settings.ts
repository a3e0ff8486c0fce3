import * as z from 'zod';
import { NAMESPACE_PATTERN } from '../model/keys.js';
import { formatIssues } from '../util/zod-issues.js';

const MiB = 1024 * 1024;

/**
 * A Lambda function ARN, unqualified or with a version or alias (the Invoke API's FunctionName, full-ARN form:
 * https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html). Names and partial ARNs are not accepted: the IAM
 * grant (cdk/stacks/api-stack.ts) is on exactly the ARNs the deployment declares.
 */
export const LAMBDA_FUNCTION_ARN =
  /^arn:aws[a-z-]*:lambda:[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d:\d{12}:function:[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$/;

const tierName = z.enum(['hot', 'warm', 'cold']);

/** A day: the default of `hotResidencySeconds` (also used by tier migration, which copies into hot outside any policy). */
export const DEFAULT_HOT_RESIDENCY_SECONDS = 86_400;

/** Per-namespace placement and lifetime policy (validated; replaceable at runtime). */
export const namespacePolicySchema = z.strictObject({
  /**
   * write-through: acknowledged once the policy's durable tiers (warm/cold) hold the value.
   * write-back: acknowledged once the hot tier holds it, marked dirty, flushed below every flushIntervalMs.
   */
  writeMode: z.enum(['write-through', 'write-back']).default('write-through'),
  /** Tiers a write goes to (those configured in this deployment). */
  writeTiers: z.array(tierName).min(1).default(['hot', 'warm', 'cold']),
  /** Values of at least this many bytes skip the hot tier (write-around) and go to warm/cold only. */
  writeAroundBytes: z
    .number()
    .int()
    .positive()
    .default(1 * MiB),
  /** Write-back flush period. */
  flushIntervalMs: z.number().int().min(50).max(3_600_000).default(1000),
  /** TTL applied when a write names none; null = no expiry. */
  defaultTtlSeconds: z.number().int().min(1).max(31_536_000).nullable().default(null),
  /**
   * Longest a copy stays in the hot tier (its Redis TTL), never past the entry's own expiry. ElastiCache Serverless
   * evicts only keys with a TTL (volatile-lru) and refuses writes once full; with a residency every clean hot copy
   * is evictable. Dirty write-back copies get theirs when flushed.
   */
  hotResidencySeconds: z.number().int().min(1).max(31_536_000).default(DEFAULT_HOT_RESIDENCY_SECONDS),
  /** Promote lower-tier hits into upper tiers (off the critical path). */
  promoteOnRead: z.boolean().default(true),
  nearCache: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** Bound on staleness across containers: an L1 copy is dropped this long after it was cached. */
      ttlMs: z.number().int().min(1).max(60_000).default(1000),
      maxValueBytes: z
        .number()
        .int()
        .positive()
        .default(256 * 1024),
    })
    .prefault({}),
  /** How long a delete's tombstone shields the key in the hot tier and below. */
  tombstoneTtlMs: z
    .number()
    .int()
    .min(1000)
    .default(10 * 60_000),
  /**
   * Optional read-through origin (docs/POLICIES.md, "Read-through"): a miss fetches `url` with `{key}` replaced by
   * the URL-encoded key, or invokes the Lambda function `lambda` (an ARN the deployment declares) with the key.
   */
  origin: z
    .strictObject({
      url: z
        .string()
        .url()
        .refine((u) => u.includes('{key}'), 'origin.url must contain the {key} placeholder')
        .optional(),
      /** A function ARN (optionally with a version or alias), declared in the environment's config (api.lambdaOrigins). */
      lambda: z
        .string()
        .regex(
          LAMBDA_FUNCTION_ARN,
          'origin.lambda must be a Lambda function ARN: arn:aws:lambda:<region>:<account>:function:<name>[:<version or alias>]',
        )
        .optional(),
      timeoutMs: z.number().int().min(10).max(60_000).default(5000),
      ttlSeconds: z.number().int().min(1).max(31_536_000).nullable().default(300),
      headers: z.record(z.string(), z.string()).default({}),
      /** How long an origin 404 is remembered (a short-lived negative entry in the tiers); 0 = not at all. */
      negativeTtlSeconds: z.number().int().min(0).max(86_400).default(0),
      /** How long past its TTL an origin's value is still served (marked stale) while one refresh runs; 0 = never. */
      staleWhileRevalidateSeconds: z.number().int().min(0).max(86_400).default(0),
    })
    .superRefine((o, ctx) => {
      if ((o.url === undefined) === (o.lambda === undefined))
        ctx.addIssue({ code: 'custom', message: 'origin names exactly one of url (an HTTP origin) or lambda (a function ARN)' });
      if (o.lambda !== undefined && Object.keys(o.headers).length > 0)
        ctx.addIssue({ code: 'custom', message: 'origin.headers are sent to an HTTP origin (url) only, not to a Lambda origin' });
    })
    .optional(),
});

/**
 * What a policy document's scoped rules add to the settings of the keys of one scope (compile.ts, scoped-placement.ts).
 * Not settable in STRATA_NAMESPACES: only compiled key classes ({@link KeyScopes}) carry them.
 */
export interface ScopeExtras {
  /** `retrieve.tiers`: the tiers a get reads, top-down; absent: every tier. */
  readonly readTiers?: readonly PolicyTierName[];
  /**
   * Every tier some write of a key of this scope may put a value in (its tag-scoped placements differ): a write
   * puts a location marker into those of them it does not write, so no tier keeps an older version a reader finds.
   * Absent: the policy's writeTiers.
   */
  readonly footprint?: readonly PolicyTierName[];
  /** Tiers below hot that every acknowledged write of the scope's keys reaches, whatever its tags (tier-walk.ts). */
  readonly readDurable?: readonly PolicyTierName[];
  /** Hot may hold a version no durable tier has, for some write of the scope's keys (a tag-scoped write-back). */
  readonly readHotMayLead?: boolean;
}

export type PolicyTierName = z.infer<typeof tierName>;
export type NamespacePolicy = z.infer<typeof namespacePolicySchema> & ScopeExtras;
export type NamespacePolicyInput = z.input<typeof namespacePolicySchema>;

/**
 * Whether warm would hold the only durable copy of a write placed into `writeTiers` (write-back: hot and the tiers
 * its flush writes): the tiers below hot that take it before it is acknowledged are warm alone. A warm key range
 * lives on exactly one cache node, without a replica, so such a placement loses acknowledged writes with that node:
 * it is refused wherever a configuration enters (policy documents and presets: scoped-placement.ts, compile.ts;
 * STRATA_NAMESPACES: compile.ts documentFromNamespaceConfig), and the fix is to add cold. Static: the tiers the
 * deployment configures are not known here, so a durable set of exactly warm is refused whatever runs. Hot alone
 * (no durable tier at all) is write-back's case, decided where placement is compiled.
 */
export function warmOnlyDurable(writeTiers: readonly PolicyTierName[]): boolean {
  const durable = writeTiers.filter((t) => t !== 'hot');
  return durable.length > 0 && durable.every((t) => t === 'warm');
}

/** Why a placement whose only durable tier is warm is refused: the middle of every such message. */
export const WARM_ONLY_DURABLE_WHY =
  'a cache node that fails would lose it (each warm key range lives on exactly one node, without a replica)';

export const namespaceConfigSchema = z.strictObject({
  defaults: namespacePolicySchema.prefault({}),
  namespaces: z
    .record(
      z.string().regex(NAMESPACE_PATTERN, 'namespace names must match ' + NAMESPACE_PATTERN.source),
      z.record(z.string(), z.unknown()),
    )
    .default({}),
});

export type NamespaceConfigInput = z.input<typeof namespaceConfigSchema>;

/**
 * A compiled compress or encrypt rule (core/policy/compile.ts) as the coordinator applies it to a write: to keys
 * under `prefix` and values tagged `tag` when given, else to every value of the namespace.
 */
export interface TransformRule {
  /** The rule's id, for errors and docs. */
  readonly rule: string;
  readonly prefix?: string;
  readonly tag?: string;
  readonly compress?: { readonly minBytes: number; readonly level: number };
  readonly encrypt?: { readonly key: string };
  /** Identical values stored once, shared (coordinator/dedup.ts). */
  readonly storeOnce?: true;
}

/**
 * The keys of a namespace whose placement or reads scoped rules decide (prefix and tag scopes, retrieve from named
 * tiers). Keys fall in classes by the longest prefix any such rule names; each class's policies are compiled once,
 * so a request resolves its policy by one scan of the prefixes and allocates nothing.
 */
export interface KeyScopes {
  /** Longest prefix first; the last one is '' (every key). */
  readonly classes: readonly KeyClass[];
}

export interface KeyClass {
  readonly prefix: string;
  /** Reads of the class's keys, and writes that carry none of `tagged`'s tags. */
  readonly policy: NamespacePolicy;
  /** Tag-scoped placements for writes carrying the tag, most specific first: the first a write carries decides. */
  readonly tagged: readonly { readonly tag: string; readonly policy: NamespacePolicy }[];
}

/** What a policy document adds to the namespace settings (compile.ts). */
export interface PolicyExtras {
  /** Compress and encrypt rules per namespace (`*`: every namespace without its own). */
  readonly transforms?: Readonly<Record<string, readonly TransformRule[]>>;
  /**
   * Key classes per namespace (`*`: every namespace not named); null: the namespace has no scoped placement or
   * retrieve rules of its own kind, and every key takes {@link PolicyRegistry.for}.
   */
  readonly keyScopes?: Readonly<Record<string, KeyScopes | null>>;
}

const NO_TRANSFORMS: readonly TransformRule[] = Object.freeze([]);

/** What to do to one value: the first compress rule and the first encrypt rule whose scope takes it. */
export interface ValueTransformChoice {
  readonly compress?: TransformRule['compress'];
  readonly encrypt?: TransformRule['encrypt'];
  readonly storeOnce?: true;
  /** The rules that chose them. */
  readonly rules: readonly string[];
}

/** Resolves the effective policy of a namespace: defaults overlaid with the namespace's own settings. */
export class PolicyRegistry {
  private readonly resolved = new Map<string, NamespacePolicy>();
  private readonly defaults: NamespacePolicy;
  private readonly overrides: Record<string, Record<string, unknown>>;
  private readonly transformRules: Readonly<Record<string, readonly TransformRule[]>>;
  private readonly keyScopes: Readonly<Record<string, KeyScopes | null>>;
  /** Whether any namespace has key classes: without, every request takes the namespace's policy as before. */
  private readonly scoped: boolean;

  constructor(input: NamespaceConfigInput = {}, extras: PolicyExtras = {}) {
    this.transformRules = extras.transforms ?? {};
    this.keyScopes = extras.keyScopes ?? {};
    this.scoped = Object.values(this.keyScopes).some((s) => s !== null);
    const parsed = namespaceConfigSchema.safeParse(input);
    if (!parsed.success) throw new PolicyConfigError(parsed.error);
    this.defaults = parsed.data.defaults;
    this.overrides = parsed.data.namespaces;
    // Validate every namespace now so a bad config fails at start-up, not on the first request.
    for (const ns of Object.keys(this.overrides)) this.for(ns);
  }

  for(ns: string): NamespacePolicy {
    let p = this.resolved.get(ns);
    if (!p) {
      const own = this.overrides[ns];
      if (!own) return this.defaults;
      const merged = {
        ...this.defaults,
        ...own,
        nearCache: { ...this.defaults.nearCache, ...(own.nearCache as object | undefined) },
      };
      const parsed = namespacePolicySchema.safeParse(merged);
      if (!parsed.success) throw new PolicyConfigError(parsed.error, ns);
      p = parsed.data;
      this.resolved.set(ns, p);
    }
    return p;
  }

  /** The key classes of a namespace, or undefined when its keys all take {@link for}. */
  private classesOf(ns: string): readonly KeyClass[] | undefined {
    if (!this.scoped) return undefined;
    const own = this.keyScopes[ns];
    return (own === undefined ? this.keyScopes['*'] : own)?.classes;
  }

  private classOf(ns: string, key: string): KeyClass | undefined {
    const classes = this.classesOf(ns);
    if (!classes) return undefined;
    for (const c of classes) if (key.startsWith(c.prefix)) return c;
    return undefined;
  }

  /**
   * The policy a write of `key` carrying `tags` is placed by: its class's tag-scoped placement for the first tag
   * that has one, else its class's (the longest prefix a rule names, else the namespace's).
   */
  forKey(ns: string, key: string, tags: readonly string[] | undefined): NamespacePolicy {
    const c = this.classOf(ns, key);
    if (!c) return this.for(ns);
    if (tags?.length) for (const t of c.tagged) if (tags.includes(t.tag)) return t.policy;
    return c.policy;
  }

  /**
   * The policy a read of `key` follows (its tiers, read-through, when its answer is certain): tags are not known
   * before the entry is found, so reads are scoped by prefix only.
   */
  forRead(ns: string, key: string): NamespacePolicy {
    return this.classOf(ns, key)?.policy ?? this.for(ns);
  }

  /** Whether keys of `ns` may take different policies (getMany then reads them class by class). */
  hasKeyScopes(ns: string): boolean {
    return this.classesOf(ns) !== undefined;
  }

  /** The compress and encrypt rules in force for a namespace (its own, else those of `*`). */
  transforms(ns: string): readonly TransformRule[] {
    return this.transformRules[ns] ?? this.transformRules['*'] ?? NO_TRANSFORMS;
  }

  /**
   * What to do to a value written to `key` with `tags`, or undefined when nothing: the fast path of every write in
   * a namespace without transform rules is the one lookup in {@link transforms}.
   */
  transformFor(ns: string, key: string, tags: readonly string[] | undefined): ValueTransformChoice | undefined {
    const all = this.transforms(ns);
    if (all.length === 0) return undefined;
    let compress: TransformRule | undefined;
    let encrypt: TransformRule | undefined;
    let storeOnce: TransformRule | undefined;
    for (const t of all) {
      if ((t.prefix !== undefined && !key.startsWith(t.prefix)) || (t.tag !== undefined && !tags?.includes(t.tag))) continue;
      if (t.compress && !compress) compress = t;
      if (t.encrypt && !encrypt) encrypt = t;
      if (t.storeOnce && !storeOnce) storeOnce = t;
    }
    if (!compress && !encrypt && !storeOnce) return undefined;
    return {
      ...(compress ? { compress: compress.compress } : {}),
      ...(encrypt ? { encrypt: encrypt.encrypt } : {}),
      ...(storeOnce ? { storeOnce: true as const } : {}),
      rules: [...new Set([compress?.rule, encrypt?.rule, storeOnce?.rule].filter((r): r is string => !!r))],
    };
  }

  /** Every namespace with its own settings. */
  configured(): string[] {
    return Object.keys(this.overrides);
  }

  /** Shortest write-back flush interval in force (drives the flush timer). */
  minFlushIntervalMs(): number | null {
    const scoped = Object.values(this.keyScopes).flatMap((s) =>
      (s?.classes ?? []).flatMap((c) => [c.policy, ...c.tagged.map((t) => t.policy)]),
    );
    const all = [this.defaults, ...this.configured().map((n) => this.for(n)), ...scoped].filter(
      (p) => p.writeMode === 'write-back',
    );
    return all.length ? Math.min(...all.map((p) => p.flushIntervalMs)) : null;
  }
}

export class PolicyConfigError extends Error {
  constructor(error: z.ZodError | string, ns?: string) {
    const where = ns ? `namespace '${ns}'` : 'namespace configuration';
    super(`invalid ${where}: ${typeof error === 'string' ? error : formatIssues(error.issues)}`);
    this.name = 'PolicyConfigError';
  }
}
