import * as z from 'zod';
import { parseWith, TAG_PATTERN } from '../../model/schemas.js';
import { StrataError, TierUnavailableError, ValidationError } from '../../errors.js';
import type { Entry, EntryHeader } from '../../model/entry.js';
import { isLive } from '../../model/entry.js';
import { MAX_KEY_BYTES, NAMESPACE_PATTERN } from '../../model/keys.js';
import type { Confirming, Pinning, Tier } from '../../tiers/tier.js';
import { supportsConfirming, supportsPinning, supportsScan } from '../../tiers/tier.js';
import { copyPendingToHot } from '../../coordinator/hot-promotion.js';
import { DEFAULT_HOT_RESIDENCY_SECONDS } from '../../policy/namespace-settings.js';
import { mapLimit } from '../../util/concurrency.js';
import { TokenBucket } from './token-bucket.js';
import { checksumMatches, copyHeader, copyVerified } from './verified-copy.js';

/**
 * Tier migration: move the keys of a namespace, a key prefix or a tag between tiers, as one
 * bounded, resumable JSON-in/JSON-out step (`tierMigrateBatch`) that the TierMigrate state machine calls until
 * `done`, passing back the returned `cursor` (the source tier's scan cursor).
 *
 * - `promote` (from a lower tier to an upper one): copy with a versioned put. A newer version in the upper tier
 *   (a concurrent write) is never replaced.
 * - `demote` (from an upper tier to a lower one): copy with a versioned put, verify the copy (version, size,
 *   hash; see verified-copy.ts), remove any older copy in a tier in between (it would otherwise be what readers
 *   find), then remove the original only if it is still that version. A key rewritten meanwhile keeps its new
 *   version where it is. Pinned entries stay (unpin them first).
 * - `pin` (in tier `to`, default `from`): sets the `pinned` flag of the selected entries there, copying them
 *   into `to` first when they are scanned from another tier. Pinned entries are never evicted (MemoryTier,
 *   cache nodes, evict-to-S3). The flag belongs to the version it was set on: a newer write starts unpinned, and
 *   a concurrent newer write is left as it is (counted in `skippedNewer`).
 * - `unpin`: clears the flag.
 *
 * Keys are enumerated with the source tier's `scan` (tiers/tier.ts): a key prefix never narrows a listing (every
 * tier stores keys encoded or hashed), so the whole namespace is scanned and filtered; a tag is a header filter.
 * Only live entries move (tombstones, location markers and expired entries are skipped).
 */
export interface TierMigrateDeps {
  hot?: Tier;
  warm?: Tier;
  cold?: Tier;
  /** Milliseconds clock. @default Date.now */
  now?: () => number;
  /** For the bandwidth cap's waits. @default setTimeout-based */
  sleep?: (ms: number) => Promise<void>;
  /** Called after each page with the running totals of the call. */
  onProgress?: (p: { scanned: number; moved: number; bytes: number }) => void;
}

const TIER_ORDER = ['hot', 'warm', 'cold'] as const;
type MigrateTier = (typeof TIER_ORDER)[number];
const tierName = z.enum(TIER_ORDER);

export const tierMigrateInput = z
  .strictObject({
    selector: z.strictObject({
      ns: z
        .string()
        .regex(NAMESPACE_PATTERN, 'namespace must be 1-63 characters of a-z, 0-9, "_" or "-", starting with a letter or digit'),
      /** Keys starting with this string. */
      prefix: z.string().min(1).max(MAX_KEY_BYTES).optional(),
      /** Keys carrying this tag. */
      tag: z.string().regex(TAG_PATTERN, 'tags are 1-64 characters of A-Z, a-z, 0-9, "_", ".", ":" or "-"').optional(),
    }),
    action: z.enum(['promote', 'demote', 'pin', 'unpin']),
    /** The tier scanned for the selected keys. */
    from: tierName,
    /** promote/demote: the tier the keys go to; pin/unpin: the tier they are pinned in (default `from`). */
    to: tierName.optional(),
    /** The previous call's cursor; absent or null = from the start. */
    cursor: z.string().min(1).max(4096).nullish(),
    /** Selected keys handled per call. */
    maxKeys: z.number().int().min(1).max(100_000).default(1000),
    /** Return after about this long (a Lambda step must end well inside its timeout). */
    maxMs: z.number().int().min(100).max(900_000).default(60_000),
    /** Entries asked of the source tier's scan at a time. */
    pageSize: z.number().int().min(1).max(1000).default(100),
    /** Bandwidth cap of the copies, value bytes per second. @default none */
    rateBytesPerSec: z.number().positive().optional(),
    /** Keys moved at the same time (bounds memory: one value each). */
    concurrency: z.number().int().min(1).max(32).default(4),
    verify: z.enum(['head', 'content']).default('head'),
    /** Report lines returned per call (Step Functions payloads are limited to 256 KiB). */
    reportLimit: z.number().int().min(0).max(5000).default(200),
  })
  .superRefine((i, ctx) => {
    const rank = (t: MigrateTier) => TIER_ORDER.indexOf(t);
    if (i.action === 'promote' || i.action === 'demote') {
      if (!i.to) ctx.addIssue({ code: 'custom', path: ['to'], message: `${i.action} needs the target tier` });
      else if (i.action === 'promote' && !(rank(i.to) < rank(i.from)))
        ctx.addIssue({ code: 'custom', path: ['to'], message: `promote moves keys up: '${i.to}' is not above '${i.from}'` });
      else if (i.action === 'demote' && !(rank(i.to) > rank(i.from)))
        ctx.addIssue({ code: 'custom', path: ['to'], message: `demote moves keys down: '${i.to}' is not below '${i.from}'` });
    }
    if (i.action === 'unpin' && i.to && i.to !== i.from)
      ctx.addIssue({ code: 'custom', path: ['to'], message: 'unpin clears the flag where the keys are: give only `from`' });
  });
export type TierMigrateInput = z.input<typeof tierMigrateInput>;

export type MigrateOutcome = 'moved' | 'already-there' | 'newer' | 'changed' | 'pinned' | 'full' | 'failed';

export interface MigrateReportLine {
  key: string;
  version: number;
  bytes: number;
  outcome: MigrateOutcome;
  reason?: string;
}

export interface TierMigrateResult {
  /** True once the source tier's scan is complete: stop calling. */
  done: boolean;
  /** Pass to the next call (null when done). */
  cursor: string | null;
  /** Entries the scan returned, and those the selector kept (live, prefix, tag). */
  scanned: number;
  matched: number;
  /** Promoted, demoted, pinned or unpinned; and the value bytes copied. */
  moved: number;
  bytes: number;
  /** The target already held this version (or the flag was already as asked). */
  alreadyThere: number;
  /** The target holds a newer version (a concurrent write): left as it is. */
  skippedNewer: number;
  /** Rewritten or removed in the source meanwhile: the newer state stays where it is. */
  skippedChanged: number;
  /** demote: pinned in the source tier. */
  skippedPinned: number;
  /** The target had no room (a bounded memory tier, a full cache node). */
  full: number;
  failed: number;
  waitedMs: number;
  report: MigrateReportLine[];
  reportTruncated: number;
}

/** One call of the tier migration (see the module comment). */
export async function tierMigrateBatch(deps: TierMigrateDeps, raw: unknown): Promise<TierMigrateResult> {
  const i = parseWith(tierMigrateInput, raw, 'input');
  const now = deps.now ?? Date.now;
  const deadline = now() + i.maxMs;
  const tierOf = (name: MigrateTier, field: 'from' | 'to'): Tier => {
    const t = deps[name];
    if (!t) throw new ValidationError(field, `no '${name}' tier is configured in this deployment`);
    return t;
  };
  const source = tierOf(i.from, 'from');
  if (!supportsScan(source)) throw new ValidationError('from', `tier '${i.from}' (${source.kind}) cannot enumerate its keys`);
  const target = tierOf(i.to ?? i.from, 'to');
  let pinTier: (Tier & Pinning) | undefined;
  if (i.action === 'pin' || i.action === 'unpin') {
    if (!supportsPinning(target))
      throw new ValidationError(
        'to',
        `tier '${target.name}' (${target.kind}) cannot pin entries: it has no eviction of its own to exempt them from (the memory hot tier and the warm tier can)`,
      );
    pinTier = target;
  }
  // Tiers strictly between source and target (demote): an older copy there would outlive the original.
  const between = TIER_ORDER.slice(TIER_ORDER.indexOf(i.from) + 1, TIER_ORDER.indexOf(i.to ?? i.from)).flatMap((n) =>
    deps[n] ? [deps[n]] : [],
  );
  const bucket = i.rateBytesPerSec
    ? new TokenBucket({
        ratePerSec: i.rateBytesPerSec,
        ...(deps.now ? { now: deps.now } : {}),
        ...(deps.sleep ? { sleep: deps.sleep } : {}),
      })
    : undefined;

  const out: TierMigrateResult = {
    done: false,
    cursor: i.cursor ?? null,
    scanned: 0,
    matched: 0,
    moved: 0,
    bytes: 0,
    alreadyThere: 0,
    skippedNewer: 0,
    skippedChanged: 0,
    skippedPinned: 0,
    full: 0,
    failed: 0,
    waitedMs: 0,
    report: [],
    reportTruncated: 0,
  };
  const record = (l: MigrateReportLine): void => {
    const counter = (
      {
        moved: 'moved',
        'already-there': 'alreadyThere',
        newer: 'skippedNewer',
        changed: 'skippedChanged',
        pinned: 'skippedPinned',
        full: 'full',
        failed: 'failed',
      } as const
    )[l.outcome];
    out[counter]++;
    if (l.outcome === 'moved') out.bytes += l.bytes;
    if (out.report.length < i.reportLimit) out.report.push(l);
    else out.reportTruncated++;
  };
  const line = (key: string, version: number, outcome: MigrateOutcome, bytes = 0, reason?: string): MigrateReportLine => ({
    key,
    version,
    bytes,
    outcome,
    ...(reason ? { reason } : {}),
  });
  const ns = i.selector.ns;

  /** The live entry of the source at the scanned version (or newer), or the outcome that ends its handling. */
  const read = async (key: string, h: EntryHeader): Promise<Entry | MigrateReportLine> => {
    const e = await source.get(ns, key);
    if (!e || !isLive(e.header)) return line(key, h.version, 'changed', 0, 'removed from the source meanwhile');
    if (checksumMatches(e.value, e.header.hash) === false)
      return line(key, e.header.version, 'failed', 0, 'the bytes in the source do not match their hash');
    return e;
  };

  const copyUp = async (key: string, e: Entry): Promise<MigrateReportLine | undefined> => {
    if (bucket) await bucket.take(e.value.length);
    if (target === deps.hot && supportsConfirming(target)) return copyToHot(target, key, e);
    const o = await target.put(ns, key, { header: copyHeader(e.header, e.value.length), value: e.value });
    if (o.applied) return undefined;
    if (o.full) return line(key, e.header.version, 'full', 0, `tier '${target.name}' has no room`);
    if (o.current !== null && o.current > e.header.version)
      return line(key, e.header.version, 'newer', 0, `tier '${target.name}' holds version ${o.current}`);
    return undefined; // the same version was there already
  };

  /** Into the hot tier: pending until the tiers below still hold the version (coordinator/hot-promotion.ts). */
  const copyToHot = async (hot: Tier & Confirming, key: string, e: Entry): Promise<MigrateReportLine | undefined> => {
    const v = e.header.version;
    const below = TIER_ORDER.slice(1, TIER_ORDER.indexOf(i.from) + 1).flatMap((n) => (deps[n] ? [deps[n]] : []));
    const o = await copyPendingToHot(
      hot,
      ns,
      key,
      { header: copyHeader(e.header, e.value.length), value: e.value },
      below,
      DEFAULT_HOT_RESIDENCY_SECONDS * 1000,
    );
    if (o.result === 'full') return line(key, v, 'full', 0, `tier '${hot.name}' has no room`);
    if (o.result === 'newer') return line(key, v, 'newer', 0, `tier '${o.tier}' holds version ${o.version}`);
    if (o.result === 'changed') return line(key, v, 'changed', 0, `no longer in tier '${o.tier}' at this version`);
    return undefined;
  };

  const promote = async (key: string, h: EntryHeader): Promise<MigrateReportLine> => {
    // Checked first so a value the target already has (or has outgrown) is not read at all.
    const there = await target.head(ns, key);
    if (there && there.version >= h.version) return line(key, h.version, there.version > h.version ? 'newer' : 'already-there');
    const e = await read(key, h);
    if (!('header' in e)) return e;
    return (await copyUp(key, e)) ?? line(key, e.header.version, 'moved', e.value.length);
  };

  const demote = async (key: string, h: EntryHeader): Promise<MigrateReportLine> => {
    if (h.flags.pinned) return line(key, h.version, 'pinned', 0, `pinned in '${source.name}': unpin it first`);
    const e = await read(key, h);
    if (!('header' in e)) return e;
    if (e.header.flags.pinned) return line(key, e.header.version, 'pinned', 0, `pinned in '${source.name}': unpin it first`);
    if (bucket) await bucket.take(e.value.length);
    const copied = await copyVerified(target, ns, key, e, i.verify);
    if (!copied.ok) return line(key, e.header.version, copied.full ? 'full' : 'failed', 0, copied.reason);
    // An older entry in a tier in between (a value, or a tombstone: a reader stops at either) would be what readers
    // find once the original is gone: remove it, conditionally on its version.
    for (const t of between) {
      const old = await t.head(ns, key);
      if (!old || old.version >= e.header.version || (await t.delete(ns, key, old.version))) continue;
      const again = await t.head(ns, key);
      if (again && again.version < e.header.version)
        return line(
          key,
          e.header.version,
          'changed',
          0,
          `tier '${t.name}' holds an older entry that changed while being removed: the original stays`,
        );
    }
    if (!(await source.delete(ns, key, e.header.version)))
      return line(key, e.header.version, 'changed', 0, 'rewritten during the move: the source keeps the new version');
    return line(key, e.header.version, 'moved', e.value.length);
  };

  const pin = async (key: string, h: EntryHeader): Promise<MigrateReportLine> => {
    let version = h.version;
    let bytes = 0;
    if (source !== target) {
      const e = await read(key, h);
      if (!('header' in e)) return e;
      version = e.header.version;
      const there = await target.head(ns, key);
      if (there && there.version > version)
        return line(key, version, 'newer', 0, `tier '${target.name}' holds version ${there.version}`);
      if (there?.version === version && there.flags.pinned) return line(key, version, 'already-there');
      if (!there || there.version < version) {
        const problem = await copyUp(key, e);
        if (problem) return problem;
        bytes = e.value.length;
      }
    } else if (h.flags.pinned) return line(key, version, 'already-there');
    if (await pinTier!.setPinned(ns, key, version, true)) return line(key, version, 'moved', bytes);
    const cur = await target.head(ns, key);
    return cur && cur.version > version
      ? line(key, version, 'newer', 0, `rewritten: version ${cur.version}`)
      : line(key, version, 'changed', 0, 'removed meanwhile');
  };

  const unpin = async (key: string, h: EntryHeader): Promise<MigrateReportLine> => {
    if (!h.flags.pinned) return line(key, h.version, 'already-there');
    if (await pinTier!.setPinned(ns, key, h.version, false)) return line(key, h.version, 'moved');
    return line(key, h.version, 'changed', 0, 'rewritten or removed meanwhile (a newer version starts unpinned)');
  };

  const act = { promote, demote, pin, unpin }[i.action];
  const want = (h: EntryHeader): boolean => isLive(h, now()) && (i.selector.tag === undefined || h.tags.includes(i.selector.tag));
  let handled = 0;
  try {
    while (handled < i.maxKeys && now() < deadline) {
      const page = await source.scan(ns, {
        ...(i.selector.prefix ? { prefix: i.selector.prefix } : {}),
        cursor: out.cursor,
        limit: Math.min(i.pageSize, i.maxKeys - handled),
      });
      out.scanned += page.items.length;
      const selected = page.items.filter((it) => want(it.header));
      out.matched += selected.length;
      handled += selected.length;
      const lines = await mapLimit(selected, i.concurrency, (it) => act(it.key, it.header));
      lines.forEach(record);
      out.cursor = page.cursor;
      deps.onProgress?.({ scanned: out.scanned, moved: out.moved, bytes: out.bytes });
      if (page.cursor === null) {
        out.done = true;
        break;
      }
    }
  } catch (e) {
    throw e instanceof StrataError ? e : new TierUnavailableError(`${i.from}->${i.to ?? i.from}`, e);
  }
  out.waitedMs = Math.round(bucket?.waitedMs ?? 0);
  return out;
}
