import { ruleMode, type PolicyRule, type PolicyTier } from './document.js';
import { isFlushRule } from './evaluator.js';
import {
  WARM_ONLY_DURABLE_WHY,
  warmOnlyDurable,
  type KeyClass,
  type KeyScopes,
  type NamespacePolicy,
  type ScopeExtras,
} from './namespace-settings.js';

/**
 * Placement and retrieve rules (paper 003's store and retrieve) compiled per namespace: the namespace's own
 * placement, and the key classes its prefix- and tag-scoped rules and its retrieve-from-tiers rules make
 * (namespace-settings.ts KeyScopes), with the refusals that keep every acknowledged write readable.
 *
 * Which rule places a key: the most specific scope that takes it. The longest prefix first; at the same prefix, a
 * tag-scoped rule over one without a tag; between tags (a put carrying two), the first in the document (a preset's
 * rules come before the document's own); the namespace's rules last, and `*`'s only for a namespace with no
 * placement rules of its own. Two rules of the same scope and kind conflict and are refused. Reads are scoped by
 * namespace and prefix only: a get does not know an entry's tags before it has found it.
 */

/** What the foreground rules of a namespace compile to (validate shows it). */
export interface Placement extends GroupPlacement {
  readonly origin?: string;
  /** retrieve.tiers of the namespace's own retrieve rule: gets read only these tiers. */
  readonly readTiers?: readonly PolicyTier[];
  /** Prefix- and tag-scoped placement and retrieve rules, most specific first. */
  readonly scoped?: readonly ScopedPlacement[];
}

export interface GroupPlacement {
  readonly writeMode: NamespacePolicy['writeMode'];
  readonly writeTiers: readonly PolicyTier[];
  /** Values of at least this size skip hot; absent: none do. */
  readonly writeAroundBytes?: number;
  readonly flushIntervalMs?: number;
}

/** One scope's rules as validate shows them: its placement, its reads, or both. */
export interface ScopedPlacement extends Partial<GroupPlacement> {
  readonly prefix?: string;
  readonly tag?: string;
  readonly rules: readonly string[];
  readonly origin?: string;
  readonly readTiers?: readonly PolicyTier[];
}

type Origin = NonNullable<NamespacePolicy['origin']>;

/** How compile.ts reports a problem of a rule, or of the namespace. */
export interface PlacementReport {
  rule(rule: PolicyRule, message: string): void;
  namespace(message: string): void;
  /**
   * A placement whose only durable tier would be warm ({@link warmOnlyDurable}): refused like any problem of the
   * rule, except in a stored document accepted before this check existed (compile.ts: a warning).
   */
  warmOnly(rule: PolicyRule, message: string): void;
}

export interface NamespacePlacement {
  readonly placement: Placement;
  /** The namespace's own placement (its rules without prefix or tag) and read-through. */
  readonly base: GroupPlacement;
  readonly origin?: Origin;
  /** null: no scoped placement or retrieve-from-tiers rule; every key takes the namespace's policy. */
  readonly keyScopes: KeyScopes | null;
}

export const TIER_ORDER: readonly PolicyTier[] = ['hot', 'warm', 'cold'];
export const sortTiers = (t: readonly PolicyTier[]): PolicyTier[] => TIER_ORDER.filter((x) => t.includes(x));

export const isPlacement = (r: PolicyRule): boolean =>
  ruleMode(r) === 'foreground' && 'action' in r.on && r.on.action === 'put' && r.do.some((d) => 'store' in d || 'storeOnce' in d);
export const isOrigin = (r: PolicyRule): boolean =>
  'action' in r.on && r.on.action === 'get' && r.do.some((d) => 'retrieve' in d);

/** The rules of a namespace for one purpose: its own when it has any, else those for every namespace (`*`). */
export function inScope(rules: readonly PolicyRule[], ns: string, pick: (r: PolicyRule) => boolean): PolicyRule[] {
  const own = rules.filter((r) => r.scope.namespace === ns && pick(r));
  return own.length || ns === '*' ? own : rules.filter((r) => r.scope.namespace === '*' && pick(r));
}

const scoped = (r: PolicyRule): boolean => !!r.scope.prefix || !!r.scope.tag;
const sameScope = (a: PolicyRule, b: PolicyRule): boolean => a.scope.prefix === b.scope.prefix && a.scope.tag === b.scope.tag;

/** " for keys under 'p/' tagged 't'": where a scoped rule applies, for messages. */
function scopeText(prefix: string | undefined, tag: string | undefined): string {
  return `${prefix ? ` for keys under '${prefix}'` : ''}${tag ? ` for values tagged '${tag}'` : ''}`;
}

const PRECEDENCE =
  'a key is placed by the most specific scope (the longest prefix, then a tag over none, then the first tag rule ' +
  'in the document), so two rules of one scope conflict: keep one';

/** The size from which a `when` sends values elsewhere (`size >= N` or `size > N`), or a reason it cannot. */
function sizeFloor(rule: PolicyRule): number | string {
  const [c, ...more] = rule.when;
  if (!c || more.length || !('object' in c) || c.object !== 'size' || !('op' in c) || (c.op !== '>=' && c.op !== '>'))
    return 'a placement rule may have no condition, or one "size >= N" (write-around); other conditions are not supported yet';
  return c.op === '>=' ? Math.max(1, Math.ceil(c.value)) : Math.floor(c.value) + 1;
}

const tiersOf = (r: PolicyRule): PolicyTier[] =>
  sortTiers(r.do.flatMap((d) => ('store' in d ? d.store.tiers : 'storeOnce' in d ? d.storeOnce.tiers : [])));

/** The placement one scope's rules make (the namespace's: no prefix, no tag), as placement always compiled. */
function groupPlacement(
  placing: readonly PolicyRule[],
  flush: PolicyRule | undefined,
  where: string,
  report: PlacementReport,
): GroupPlacement {
  const plain = placing.filter((r) => r.when.length === 0);
  const sized = placing.filter((r) => r.when.length > 0);
  const more = where ? `; ${PRECEDENCE}` : '';
  if (plain.length > 1)
    report.namespace(`more than one placement rule without a condition${where}: ${plain.map((r) => r.id).join(', ')}${more}`);
  if (sized.length > 1) report.namespace(`more than one write-around rule${where}: ${sized.map((r) => r.id).join(', ')}${more}`);
  const base = plain[0];
  if (!base && where && sized[0])
    report.rule(sized[0], `a write-around rule${where} needs a placement rule of the same scope without a condition`);
  let writeTiers: PolicyTier[] = base ? tiersOf(base) : [...TIER_ORDER];
  let writeMode: GroupPlacement['writeMode'] = 'write-through';
  let flushIntervalMs: number | undefined;
  if (base && writeTiers.length === 1 && writeTiers[0] === 'hot') {
    if (!flush) {
      report.rule(
        base,
        `the only copy of a value${where} would be in hot, which evicts on its own: add a timer rule that copies dirty values ` +
          'from hot to warm or cold (write-back, see the low-latency preset), or store into a durable tier too',
      );
    } else {
      const copy = flush.do[0] as { copy: { to: PolicyTier[] } };
      const seconds = (flush.on as { timer: { everySeconds: number } }).timer.everySeconds;
      writeTiers = sortTiers(['hot', ...copy.copy.to]);
      writeMode = 'write-back';
      flushIntervalMs = Math.round(seconds * 1000);
    }
  }
  if (base && warmOnlyDurable(writeTiers))
    report.warmOnly(base, warmOnlyMessage(base, writeMode === 'write-back' ? flush : undefined, where));
  let writeAroundBytes: number | undefined;
  const around = sized[0];
  if (around) {
    const floor = sizeFloor(around);
    const expected = writeTiers.filter((t) => t !== 'hot');
    const got = tiersOf(around);
    if (typeof floor === 'string') report.rule(around, floor);
    else if (!writeTiers.includes('hot') || got.join() !== expected.join())
      report.rule(
        around,
        `a write-around rule stores large values into the placement's tiers below hot (${expected.join(', ') || 'none'}); ` +
          'other tiers are not supported yet',
      );
    else writeAroundBytes = floor;
  }
  for (const r of placing)
    if ('action' in r.on && r.on.tier) report.rule(r, 'a placement rule names its tiers in store, not in on.tier');
  return {
    writeMode,
    writeTiers,
    ...(writeAroundBytes !== undefined ? { writeAroundBytes } : {}),
    ...(flushIntervalMs !== undefined ? { flushIntervalMs } : {}),
  };
}

/** Names a rule's namespace in messages: `namespace 'x'`, or every namespace for a rule scoped to `*`. */
export const namespaceText = (ns: string): string => (ns === '*' ? "every namespace ('*')" : `namespace '${ns}'`);

/**
 * Why a placement whose only durable tier is warm is refused, naming the rules that make it (`flush`: the write-back
 * flush whose tiers below hot are warm alone) and what to change.
 */
function warmOnlyMessage(base: PolicyRule, flush: PolicyRule | undefined, where: string): string {
  const how = flush
    ? `rule '${base.id}' acknowledges it from hot and rule '${flush.id}' flushes it to warm alone`
    : `rule '${base.id}'`;
  const kind = base.do.some((d) => 'storeOnce' in d) ? 'storeOnce' : 'store';
  const fix = flush
    ? `Add 'cold' to the flush's tiers (copy.to of rule '${flush.id}')`
    : `Add 'cold' to the write tiers (${kind}.tiers)`;
  return `${namespaceText(base.scope.namespace)}${where}: warm would hold the only durable copy of a write (${how}); ${WARM_ONLY_DURABLE_WHY}. ${fix}`;
}

interface Group {
  readonly prefix: string;
  readonly tag?: string;
  readonly rules: readonly PolicyRule[];
  /** Where its first rule is in the rule list: document order among tags. */
  readonly order: number;
  readonly placement: GroupPlacement;
  /** Names the placement in messages. */
  readonly name: string;
}

interface ReadGroup {
  readonly prefix: string;
  readonly rule: PolicyRule;
  readonly tiers?: readonly PolicyTier[];
  readonly origin?: Origin;
}

/** Groups rules by scope (prefix and tag), in the order their first rule comes. */
function byScope(rules: readonly PolicyRule[]): PolicyRule[][] {
  const out: PolicyRule[][] = [];
  for (const r of rules) {
    const g = out.find((x) => sameScope(x[0]!, r));
    if (g) g.push(r);
    else out.push([r]);
  }
  return out;
}

function readsOf(ns: string, rules: readonly PolicyRule[], report: PlacementReport): ReadGroup[] {
  const out: ReadGroup[] = [];
  for (const same of byScope(inScope(rules, ns, isOrigin))) {
    const usable = same.filter((r) => {
      const spec = (r.do.find((d) => 'retrieve' in d) as { retrieve: { tiers?: PolicyTier[]; origin?: Origin } }).retrieve;
      if (r.scope.tag) {
        report.rule(
          r,
          "a get does not know an entry's tags before it has found it, so a retrieve rule cannot be scoped by tag: " +
            'scope it by namespace or key prefix',
        );
        return false;
      }
      if (!spec.tiers && !spec.origin) {
        report.rule(r, 'retrieve names the tiers a get reads (tiers), an origin to read through (origin), or both');
        return false;
      }
      if (spec.tiers && sortTiers(spec.tiers).join() !== spec.tiers.join()) {
        report.rule(
          r,
          `retrieve.tiers are read top-down, each tier once (hot, warm, cold): a lower tier may hold an older copy than ` +
            `the one above it; write [${sortTiers(spec.tiers).join(', ')}]`,
        );
        return false;
      }
      return true;
    });
    if (same.length > 1)
      report.namespace(
        `more than one read-through (retrieve) rule${scopeText(same[0]!.scope.prefix, undefined)}: ` +
          same.map((r) => r.id).join(', '),
      );
    const rule = usable[0];
    if (!rule) continue;
    const spec = (rule.do.find((d) => 'retrieve' in d) as { retrieve: { tiers?: PolicyTier[]; origin?: Origin } }).retrieve;
    out.push({
      prefix: rule.scope.prefix ?? '',
      rule,
      ...(spec.tiers ? { tiers: spec.tiers } : {}),
      ...(spec.origin ? { origin: spec.origin } : {}),
    });
  }
  return out;
}

/**
 * Why a retrieve rule may not read `tiers` for keys that `writers` place, or undefined. A get reads the listed
 * tiers top-down and stops at the first that holds the key; so each must hold the newest acknowledged version or
 * nothing: a write-back write is acknowledged from hot alone (hot must be read), and a write-through write may leave
 * only a location marker in a full tier (every durable tier it writes must be read).
 */
function retrieveProblem(read: ReadGroup, tiers: readonly PolicyTier[], writers: readonly Group[]): string | undefined {
  for (const w of writers) {
    const where = scopeText(read.prefix || undefined, undefined) || ' for this namespace';
    if (w.placement.writeMode === 'write-back' && !tiers.includes('hot'))
      return (
        `retrieve rule '${read.rule.id}' skips hot${where}, but ${w.name} acknowledges their writes from hot alone ` +
        '(write-back: the newest copy is only in hot until flushed), so a get could return an older version: list hot ' +
        'first in retrieve.tiers, or make that placement write-through'
      );
    const missing = w.placement.writeTiers.filter((t) => t !== 'hot' && !tiers.includes(t));
    if (missing.length)
      return (
        `retrieve rule '${read.rule.id}' does not read ${missing.join(', ')}${where}, where ${w.name} writes their ` +
        `values (${w.placement.writeTiers.join(', ')}; a full tier keeps only a location marker and the value lives in ` +
        'another), so a get could miss an acknowledged write: list every durable tier that placement writes'
      );
  }
  return undefined;
}

/**
 * Compiles a namespace's placement and retrieve rules: its own placement, and (when it has scoped placement rules
 * or retrieve-from-tiers rules) its key classes. `build` makes a class's policy from the namespace's settings.
 */
export function compileNamespacePlacement(
  ns: string,
  rules: readonly PolicyRule[],
  report: PlacementReport,
  build: (placement: GroupPlacement, origin: Origin | undefined, extras: ScopeExtras) => NamespacePolicy | undefined,
): NamespacePlacement {
  const placing = inScope(rules, ns, isPlacement);
  const flushes = inScope(rules, ns, isFlushRule);
  const unscopedFlush = flushes.find((f) => !scoped(f));
  const groups: Group[] = [];
  const own = placing.filter((r) => !scoped(r));
  const base = groupPlacement(own, unscopedFlush ?? flushes[0], '', report);
  const baseRule = own.find((r) => r.when.length === 0) ?? own[0];
  const defaultName = baseRule
    ? `placement rule '${baseRule.id}'`
    : `the default placement (no store rule: ${base.writeTiers.join(', ')})`;
  groups.push({ prefix: '', rules: own, order: -1, placement: base, name: defaultName });
  for (const same of byScope(placing.filter(scoped))) {
    const { prefix, tag } = same[0]!.scope;
    const flush = flushes.find((f) => sameScope(f, same[0]!)) ?? unscopedFlush;
    const placement = groupPlacement(same, flush, scopeText(prefix, tag), report);
    const first = same.find((r) => r.when.length === 0) ?? same[0]!;
    groups.push({
      prefix: prefix ?? '',
      ...(tag ? { tag } : {}),
      rules: same,
      order: rules.indexOf(same[0]!),
      placement,
      name: `placement rule '${first.id}'`,
    });
  }
  if (groups.length > 1 && placing.some((r) => r.do.some((d) => 'storeOnce' in d)))
    report.namespace(
      'storeOnce places every value of its namespace: prefix- and tag-scoped placement rules cannot share a namespace with it',
    );
  const reads = readsOf(ns, rules, report);
  const baseRead = reads.find((r) => r.prefix === '');
  const view = viewOf(base, baseRead, groups, reads);
  const needsClasses = groups.length > 1 || reads.some((r) => r.prefix !== '' || r.tiers);
  if (!needsClasses) return { placement: view, base, ...(baseRead?.origin ? { origin: baseRead.origin } : {}), keyScopes: null };

  const prefixes = [...new Set(['', ...groups.map((g) => g.prefix), ...reads.map((r) => r.prefix)])].sort(
    (a, b) => b.length - a.length,
  );
  const longest = <T extends { prefix: string }>(xs: readonly T[], p: string): T | undefined =>
    xs
      .filter((x) => p.startsWith(x.prefix))
      .reduce<T | undefined>((a, x) => (!a || x.prefix.length > a.prefix.length ? x : a), undefined);
  const classes: KeyClass[] = [];
  for (const p of prefixes) {
    const untagged = longest(
      groups.filter((g) => !g.tag),
      p,
    )!;
    // Tag rules at least as specific as the untagged one: a put carrying the tag takes them (most specific first).
    const tagged = groups
      .filter((g) => g.tag && p.startsWith(g.prefix) && g.prefix.length >= untagged.prefix.length)
      .sort((a, b) => b.prefix.length - a.prefix.length || a.order - b.order);
    const writers = [untagged, ...tagged];
    const read = longest(reads, p);
    if (read?.tiers) {
      const why = retrieveProblem(read, read.tiers, writers);
      if (why) report.rule(read.rule, why);
    }
    const extras: ScopeExtras = tagged.length
      ? {
          footprint: sortTiers(writers.flatMap((w) => w.placement.writeTiers)),
          readDurable: TIER_ORDER.filter((t) => t !== 'hot' && writers.every((w) => w.placement.writeTiers.includes(t))),
          readHotMayLead: tagged.some((w) => w.placement.writeMode === 'write-back'),
        }
      : {};
    const policy = build(untagged.placement, read?.origin, { ...extras, ...(read?.tiers ? { readTiers: read.tiers } : {}) });
    const taggedPolicies = tagged.map((t) => ({
      tag: t.tag!,
      policy: build(t.placement, undefined, { footprint: extras.footprint }),
    }));
    if (!policy || taggedPolicies.some((t) => !t.policy)) continue;
    classes.push({ prefix: p, policy, tagged: taggedPolicies as KeyClass['tagged'] });
  }
  return { placement: view, base, ...(baseRead?.origin ? { origin: baseRead.origin } : {}), keyScopes: { classes } };
}

/** The placement validate shows: the namespace's, its origin and retrieve tiers, and every scoped rule's. */
function viewOf(
  base: GroupPlacement,
  baseRead: ReadGroup | undefined,
  groups: readonly Group[],
  reads: readonly ReadGroup[],
): Placement {
  const scopedViews: ScopedPlacement[] = groups
    .filter((g) => g.prefix || g.tag)
    .map((g) => ({
      ...(g.prefix ? { prefix: g.prefix } : {}),
      ...(g.tag ? { tag: g.tag } : {}),
      rules: g.rules.map((r) => r.id),
      ...g.placement,
    }));
  for (const r of reads.filter((x) => x.prefix)) {
    scopedViews.push({
      prefix: r.prefix,
      rules: [r.rule.id],
      ...(r.origin ? { origin: r.origin.url ?? r.origin.lambda } : {}),
      ...(r.tiers ? { readTiers: r.tiers } : {}),
    });
  }
  scopedViews.sort((a, b) => (b.prefix?.length ?? 0) - (a.prefix?.length ?? 0) || Number(!!b.tag) - Number(!!a.tag));
  return {
    ...base,
    ...(baseRead?.origin ? { origin: baseRead.origin.url ?? baseRead.origin.lambda } : {}),
    ...(baseRead?.tiers ? { readTiers: baseRead.tiers } : {}),
    ...(scopedViews.length ? { scoped: scopedViews } : {}),
  };
}
