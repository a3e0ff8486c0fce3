import { copyForTier, isLive, type EntryHeader } from '../model/entry.js';
import { HybridLogicalClock } from '../model/hlc.js';
import { supportsScan, type AccessFacts, type Tier } from '../tiers/tier.js';
import type { Condition } from './document.js';
import { compare } from './preview.js';

/**
 * The background copy, move and delete responses (paper 003, Table 1): one namespace of one tier enumerated page by
 * page, each entry that the rule's selection takes copied into the target tiers, then (move) removed from the
 * source, or (delete) removed from the source. Paced to a bandwidth cap when the rule sets one (the paper's backup
 * at 40 KB/s, which keeps a large copy from raising foreground latency).
 *
 * Nothing acknowledged is lost and nothing deleted comes back:
 *  - every copy is a versioned write: a target that holds a newer version (or a newer tombstone) keeps it;
 *  - each entry is read from the source just before it is written (not when the scan listed it), and after the
 *    write the source is asked again: when the key was deleted meanwhile, the copy just made is removed from the
 *    target (version-conditional), so a tombstone that expired during a slow write cannot let a copy resurrect it;
 *  - a move removes the source's copy only when it is still exactly the version every target now holds (a newer
 *    write that landed in the source meanwhile stays);
 *  - a delete never removes the last durable copy: only when another durable tier holds that version or a newer one.
 */

/** A copy, move or delete to carry out (compiled from a rule by the evaluator's caller). */
export interface TransferSpec {
  readonly rule: string;
  readonly kind: 'copy' | 'move' | 'delete';
  readonly ns: string;
  readonly prefix?: string;
  readonly tag?: string;
  readonly from: Tier;
  /** Targets of a copy or move (none for a delete). */
  readonly to: readonly Tier[];
  /** Object conditions (size, ageSeconds, idleSeconds, accessCount, dirty, tag, contentType), all of which must hold. */
  readonly what: readonly Condition[];
  readonly bytesPerSecond?: number;
  /**
   * The tiers whose copy counts as durable (a delete keeps an entry unless one of these other than the source holds
   * its version).
   */
  readonly durable: readonly Tier[];
  /** Only entries written at or after this time (epoch ms of their version): what an earlier run did not copy. */
  readonly writtenSince?: number;
}

export interface TransferResult {
  scanned: number;
  /** Entries the selection took. */
  selected: number;
  /** Entries written into at least one target. */
  copied: number;
  /** Entries removed from the source (move, delete). */
  removed: number;
  /** Selected entries left alone: the targets held them already or newer, the key changed, or (delete) no other copy. */
  unchanged: number;
  /** Copies removed again because the key was deleted while they were made. */
  withdrawn: number;
  bytes: number;
  /** Milliseconds spent waiting for the bandwidth cap. */
  throttledMs: number;
  /**
   * Where to go on (a later run's {@link MoverOptions.resume}) when the run stopped at its deadline before the end;
   * absent when it reached the end (or was cancelled).
   */
  resume?: TransferResume;
}

/**
 * A place in a run: the scan page to list again (its cursor) and the last key of it already done. Scan cursors are
 * stable across time (a warm cursor is a place in the hash space, valid across ring changes; S3's and the folder's are
 * keys), so a run stopped in one invocation goes on in another.
 */
export interface TransferResume {
  readonly cursor: string | null;
  /** The page's last key done (its entries up to this one are skipped); absent: none of the page yet. */
  readonly after?: string;
}

export interface MoverOptions {
  /** Entries per scan page. @default 100 */
  readonly pageSize?: number;
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Stops the run between entries (the rule left the policy, background actions were switched off). */
  readonly cancelled?: () => boolean;
  /** After each page. */
  readonly onProgress?: (r: Readonly<TransferResult>) => void;
  /** Where an earlier run stopped (its result's `resume`). */
  readonly resume?: TransferResume;
  /**
   * Stop before an entry that would start (or, capped, be paced) past this time (epoch ms, on `now`'s clock): the
   * result's `resume` says where to go on. The scheduled executor's budget per invocation (job-runner.ts).
   */
  readonly deadline?: number;
}

/** Why a spec cannot run in this deployment, or undefined. */
export function transferProblem(spec: Pick<TransferSpec, 'from' | 'kind'>): string | undefined {
  if (!supportsScan(spec.from)) return `tier '${spec.from.name}' (${spec.from.kind}) cannot enumerate what it holds`;
  return undefined;
}

/**
 * Whether an entry meets every object condition of a selection: its header, and for `idleSeconds` / `accessCount`
 * the access facts its tier's scan reported. Idle time is `now` less the later of its last access and its version's
 * time (an entry never read is idle since it was written, arrived in the tier, or the tier's process started,
 * whichever is latest). Unknown facts (a tier or cache node that does not track them) never select: data is never
 * moved on a guess.
 */
export function selects(h: EntryHeader, what: readonly Condition[], now: number, access?: AccessFacts): boolean {
  for (const c of what) {
    if (!('object' in c)) continue;
    if (c.object === 'dirty') {
      if (!!h.flags.dirty !== c.equals) return false;
    } else if (c.object === 'tag') {
      if (!h.tags.includes(c.equals)) return false;
    } else if (c.object === 'contentType') {
      if (!(h.contentType ?? 'application/octet-stream').startsWith(c.startsWith)) return false;
    } else if (c.object === 'size') {
      if (!compare(h.encoding?.size ?? h.size, c.op, c.value)) return false;
    } else if (c.object === 'ageSeconds') {
      if (!compare((now - HybridLogicalClock.timeOf(h.version)) / 1000, c.op, c.value)) return false;
    } else if (c.object === 'idleSeconds') {
      if (!access) return false;
      const last = Math.max(access.lastAccessMs, HybridLogicalClock.timeOf(h.version));
      if (!compare((now - last) / 1000, c.op, c.value)) return false;
    } else if (c.object === 'accessCount') {
      if (!access || !compare(access.count, c.op, c.value)) return false;
    } else {
      return false; // a condition this version does not know: never select on it
    }
  }
  return true;
}

export async function runTransfer(spec: TransferSpec, opts: MoverOptions = {}): Promise<TransferResult> {
  const from = spec.from;
  if (!supportsScan(from)) throw new Error(transferProblem(spec));
  const now = opts.now ?? Date.now;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const r: TransferResult = {
    scanned: 0,
    selected: 0,
    copied: 0,
    removed: 0,
    unchanged: 0,
    withdrawn: 0,
    bytes: 0,
    throttledMs: 0,
  };
  const started = now();
  const deadline = opts.deadline ?? Infinity;
  /** Waits for the cap; false when the wait would pass the deadline (the entry is left for the next run). */
  const pace = async (): Promise<boolean> => {
    if (!spec.bytesPerSecond) return now() < deadline;
    // Smooth pacing: never ahead of `bytesPerSecond` since the start (the next entry waits for the time its bytes take).
    const due = started + (r.bytes / spec.bytesPerSecond) * 1000 - now();
    if (now() + Math.max(0, due) >= deadline) return false;
    if (due > 0) {
      r.throttledMs += due;
      await sleep(due);
    }
    return true;
  };
  let cursor: string | null = opts.resume?.cursor ?? null;
  let after = opts.resume?.after;
  do {
    if (now() >= deadline) {
      r.resume = { cursor, ...(after !== undefined ? { after } : {}) };
      return r;
    }
    const listed = cursor;
    const page = await from.scan(spec.ns, { prefix: spec.prefix, cursor, limit: opts.pageSize ?? 100 });
    cursor = page.cursor;
    // A resumed page: skip what the earlier run did (all of it up to its last key; the whole page again when that key
    // is no longer listed, which only repeats versioned copies).
    let skipping = after !== undefined && page.items.some((i) => i.key === after);
    let last = skipping ? after : undefined;
    for (const item of page.items) {
      if (skipping) {
        skipping = item.key !== after;
        continue;
      }
      if (opts.cancelled?.()) return r;
      const h = item.header;
      const live = isLive(h, now()) && !h.flags.pending && (!spec.tag || h.tags.includes(spec.tag));
      const recent = spec.writtenSince === undefined || HybridLogicalClock.timeOf(h.version) >= spec.writtenSince;
      // A pending hot copy is an unconfirmed promotion, never served: not copied either.
      const take = live && recent && selects(h, spec.what, now(), item.access);
      if (take && !(await pace())) {
        r.resume = { cursor: listed, ...(last !== undefined ? { after: last } : {}) };
        return r;
      }
      r.scanned++;
      last = item.key;
      if (!take) continue;
      r.selected++;
      const done = spec.kind === 'delete' ? await deleteOne(spec, item.key, h) : await copyOne(spec, item.key, r);
      if (done === 'removed') r.removed++;
      else if (done === 'unchanged') r.unchanged++;
    }
    after = undefined;
    opts.onProgress?.(r);
  } while (cursor !== null);
  return r;
}

/** Copies one entry into the targets (then, for a move, removes it from the source). */
async function copyOne(spec: TransferSpec, key: string, r: TransferResult): Promise<'copied' | 'removed' | 'unchanged'> {
  const { ns, from } = spec;
  // Read now, not at scan time: the version written is one the source holds at this moment. A peek: the copy is not
  // a use of the entry (a backup must not make everything look recently read to an LRU cascade).
  const entry = await from.get(ns, key, { peek: true });
  if (!entry || !isLive(entry.header) || entry.header.flags.pending) return 'unchanged';
  const version = entry.header.version;
  let wrote = false;
  let everywhere = true;
  for (const target of spec.to) {
    const there = await target.head(ns, key);
    if (there && there.version >= version) continue;
    const out = await target.put(ns, key, copyForTier(entry));
    if (out.applied) {
      wrote = true;
      r.bytes += entry.value.length;
    } else if ((out.current ?? 0) < version) everywhere = false; // refused for room (full): not there
  }
  if (wrote) {
    // The key deleted (or rewritten and deleted) since the read: withdraw the copies just made.
    const now = await from.head(ns, key);
    if (!now || !isLive(now)) {
      for (const target of spec.to) if (await target.delete(ns, key, version)) r.withdrawn++;
      return 'unchanged';
    }
    r.copied++;
  }
  if (spec.kind === 'move' && everywhere) {
    if (await from.delete(ns, key, version)) return 'removed';
  }
  return wrote ? 'copied' : 'unchanged';
}

/** Removes one entry from the source, only when another durable tier holds its version or a newer one. */
async function deleteOne(spec: TransferSpec, key: string, h: EntryHeader): Promise<'removed' | 'unchanged'> {
  for (const other of spec.durable) {
    if (other === spec.from) continue;
    const there = await other.head(spec.ns, key);
    if (there && there.version >= h.version) {
      return (await spec.from.delete(spec.ns, key, h.version)) ? 'removed' : 'unchanged';
    }
  }
  return 'unchanged';
}

/** A run's counts as a firing's detail. */
export function transferSummary(r: TransferResult): string {
  const parts = [`${r.selected} of ${r.scanned} entries selected`, `${r.copied} copied (${r.bytes} bytes)`];
  if (r.removed) parts.push(`${r.removed} removed from the source`);
  if (r.unchanged) parts.push(`${r.unchanged} left as they were`);
  if (r.withdrawn) parts.push(`${r.withdrawn} copies withdrawn (deleted meanwhile)`);
  if (r.throttledMs) parts.push(`${Math.round(r.throttledMs)} ms paced by the bandwidth cap`);
  return parts.join(', ');
}

/** The counts of a run that went on from where an earlier one stopped, added to the earlier one's. */
export function addTransferResults(a: TransferResult | undefined, b: TransferResult): TransferResult {
  if (!a) return b;
  const keys = ['scanned', 'selected', 'copied', 'removed', 'unchanged', 'withdrawn', 'bytes', 'throttledMs'] as const;
  const sum = { ...b };
  for (const k of keys) sum[k] = a[k] + b[k];
  return sum;
}
