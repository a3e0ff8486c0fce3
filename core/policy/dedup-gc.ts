import { BLOB_KEY_PREFIX, blobKey, isBlobKey, isLive, type EntryHeader } from '../model/entry.js';
import { HybridLogicalClock } from '../model/hlc.js';
import { supportsScan, type Scanning, type Tier } from '../tiers/tier.js';

/**
 * The storeOnce garbage collector: removes the blobs of a namespace that no key refers to any more. The protocol
 * with writers is described in coordinator/dedup.ts; in short, a blob is first condemned (a versioned write in the
 * authority, the namespace's lowest durable tier), the keys are scanned again, and only blobs still unreferenced are
 * removed, each only at the version it was condemned at (a writer that referred to it meanwhile rewrote it at a newer
 * one). Copies in the other tiers go after, and only versions at or below the condemned one.
 */

export interface CollectOptions {
  readonly ns: string;
  /** The namespace's lowest durable tier: where blobs and the keys referring to them are decided. */
  readonly authority: Tier;
  /** Every tier (copies of removed blobs are removed from each). */
  readonly tiers: readonly Tier[];
  /** Blobs younger than this are left for a later run (a writer may be about to refer to them). @default 60 s */
  readonly graceMs?: number;
  readonly pageSize?: number;
  readonly now?: () => number;
  /** Between the condemnation and the second scan (tests use it to interleave a writer). */
  readonly afterCondemn?: () => Promise<void>;
  /**
   * Stop between pages and between blobs once this time has come (epoch ms, on `now`'s clock): the result is then
   * `incomplete`, and a later run goes on safely: the blobs condemned so far stay condemned, and its first scan takes
   * them up again (the scheduled job runner's budget per invocation).
   */
  readonly deadline?: number;
}

export interface CollectResult {
  /** Blobs the namespace holds in the authority. */
  blobs: number;
  /** Keys referring to a blob. */
  references: number;
  /** Blobs found unreferenced and marked. */
  condemned: number;
  /** Blobs removed (unreferenced in both scans). */
  removed: number;
  /** Condemned blobs a writer referred to again before they were removed. */
  reprieved: number;
  /** The run stopped at its deadline: run again. */
  incomplete?: true;
}

class OutOfTime extends Error {}

interface Scanned {
  blobs: Map<string, EntryHeader>;
  referenced: Set<string>;
}

async function scanAll(tier: Tier & Scanning, ns: string, pageSize: number, now: number, late: () => boolean): Promise<Scanned> {
  const out: Scanned = { blobs: new Map(), referenced: new Set() };
  let cursor: string | null = null;
  do {
    if (late()) throw new OutOfTime();
    const page = await tier.scan(ns, { cursor, limit: pageSize });
    cursor = page.cursor;
    for (const { key, header } of page.items) {
      if (!isLive(header, now)) continue;
      if (isBlobKey(key)) out.blobs.set(key.slice(BLOB_KEY_PREFIX.length), header);
      else if (header.encoding?.blob) out.referenced.add(header.encoding.blob);
    }
  } while (cursor !== null);
  return out;
}

export async function collectBlobs(o: CollectOptions): Promise<CollectResult> {
  const authority = o.authority;
  if (!supportsScan(authority)) throw new Error(`tier '${authority.name}' cannot enumerate its blobs`);
  const now = o.now ?? Date.now;
  const grace = o.graceMs ?? 60_000;
  const page = o.pageSize ?? 500;
  const clock = new HybridLogicalClock(now);
  const late = () => o.deadline !== undefined && now() >= o.deadline;
  const result: CollectResult = { blobs: 0, references: 0, condemned: 0, removed: 0, reprieved: 0 };
  try {
    await collect(o, authority, { now, grace, page, clock, late }, result);
  } catch (e) {
    if (!(e instanceof OutOfTime)) throw e;
    result.incomplete = true;
  }
  return result;
}

async function collect(
  o: CollectOptions,
  authority: Tier & Scanning,
  c: { now: () => number; grace: number; page: number; clock: HybridLogicalClock; late: () => boolean },
  result: CollectResult,
): Promise<void> {
  const { now, grace, page, clock, late } = c;
  const first = await scanAll(authority, o.ns, page, now(), late);
  result.blobs = first.blobs.size;
  result.references = first.referenced.size;
  // Condemn: unreferenced blobs old enough (and those a run before this one condemned already).
  const condemned = new Map<string, number>();
  for (const [address, h] of first.blobs) {
    if (first.referenced.has(address)) continue;
    if (late()) throw new OutOfTime();
    if (h.flags.condemned) {
      condemned.set(address, h.version);
      continue;
    }
    if (now() - HybridLogicalClock.timeOf(h.version) < grace) continue;
    const e = await authority.get(o.ns, blobKey(address));
    if (!e || e.header.version !== h.version) continue; // rewritten since the scan
    clock.observe(h.version);
    const version = clock.next();
    const out = await authority.put(o.ns, blobKey(address), {
      header: { ...e.header, version, flags: { condemned: true } },
      value: e.value,
    });
    if (out.applied) {
      condemned.set(address, version);
      result.condemned++;
    }
  }
  if (condemned.size === 0) return;
  await o.afterCondemn?.();
  // The second scan: a key written since the first one saves its blob.
  const second = await scanAll(authority, o.ns, page, now(), late);
  for (const [address, version] of condemned) {
    if (late()) throw new OutOfTime();
    if (second.referenced.has(address)) {
      result.reprieved++;
      continue;
    }
    // Only the condemned version: a writer that referred to the blob since rewrote it at a newer one.
    if (!(await authority.delete(o.ns, blobKey(address), version))) {
      result.reprieved++;
      continue;
    }
    result.removed++;
    for (const t of o.tiers) {
      if (t === authority) continue;
      const h = await t.head(o.ns, blobKey(address)).catch(() => undefined);
      if (h && h.version <= version) await t.delete(o.ns, blobKey(address), h.version).catch(() => false);
    }
  }
}

/** A collection's counts as a firing's detail. */
export function collectSummary(ns: string, r: CollectResult): string {
  return (
    `blob collection in ${ns}: ${r.blobs} blobs, ${r.references} keys referring to them, ` +
    `${r.removed} unreferenced removed${r.condemned ? `, ${r.condemned} condemned` : ''}` +
    `${r.reprieved ? `, ${r.reprieved} referred to again` : ''}`
  );
}
