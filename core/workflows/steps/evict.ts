import * as z from 'zod';
import { parseWith } from '../../model/schemas.js';
import { NotFoundError, TierUnavailableError } from '../../errors.js';
import type { Entry } from '../../model/entry.js';
import { isLive } from '../../model/entry.js';
import { nodeIdSchema, parseRingDocument, type RingDocument } from '../../ring/document.js';
import { RingRouter, RingView } from '../../ring/view.js';
import type { Tier } from '../../tiers/tier.js';
import { mapLimit } from '../../util/concurrency.js';
import { NodeClient, StaleRouteError } from '../../nodes/node-client.js';
import { TokenBucket } from './token-bucket.js';
import { checksumMatches, copyVerified } from './verified-copy.js';

/**
 * Eviction from the warm tier to S3, as two bounded JSON-in/JSON-out steps for the EvictToS3
 * state machine:
 *
 *   planEviction  which nodes to evict from and how many bytes: nodes above their watermark (schedule, fill
 *                 alarm), or one named node, or every node when forced, each down to a target fill;
 *   evictBatch    evicts from one node for at most `maxMs`; the state machine calls it again with the returned
 *                 `cursor` until `done`.
 *
 * Victims are the node's own choice (`/v1/victims`): expired entries first, then its SIEVE order; pinned entries
 * are never named. Per victim:
 *
 * 1. skip it unless the node owns its range with no migration in flight (a former owner's leftovers go with the
 *    migration's cleanup; a range being streamed must not lose keys under the stream);
 * 2. an expired victim is dropped without a copy (no reader can see it; the cold tier would not return it either);
 * 3. otherwise read it from the node, check its bytes against the header's hash (corrupt data is not copied),
 *    wait for the bandwidth cap, copy it to the cold tier with a versioned put (never replacing a newer object)
 *    and read the copy's header back: version, size and hash must match (see verified-copy.ts);
 * 4. delete it from the node only if the node still holds that exact version (a conditional batch delete): a key
 *    rewritten during the copy keeps its new version on the node (the older copy in S3 is harmless, and is
 *    replaced by the next versioned write below).
 *
 * The hot tier is left alone: a hot copy of the evicted version is still that version (correct to serve), and a
 * hot location marker or a hot miss falls through the read path (hot → warm → cold) to the copy in S3.
 */
export interface EvictDeps {
  /** Client of the cache nodes (victims, reads, conditional deletes). */
  nodes: NodeClient;
  /** The ring: a cached view (refreshed after a stale route), or a loader of the current document. */
  ring: RingView | (() => Promise<RingDocument>);
  /** Where evicted entries go: S3 in AWS, the local folder tier locally. */
  cold: Tier;
  /** Milliseconds clock. @default Date.now */
  now?: () => number;
  /** For the bandwidth cap's waits. @default setTimeout-based */
  sleep?: (ms: number) => Promise<void>;
  /** Called after each page of victims with the running totals of the call. */
  onProgress?: (p: EvictProgress) => void;
}

export interface EvictProgress {
  nodeId: string;
  keys: number;
  bytes: number;
  freedBytes: number;
}

export const planEvictionInput = z
  .strictObject({
    /** Evict from this node only (whatever its fill; down to `targetFill`, default its watermark). */
    nodeId: nodeIdSchema.optional(),
    /** Evict from every node, below its watermark too (needs `targetFill` or `bytesPerNode`). */
    force: z.boolean().default(false),
    /** Fill ratio to evict down to. @default each node's watermark */
    targetFill: z.number().min(0).max(1).optional(),
    /** Evict this many (accounted) bytes from each chosen node instead of down to a fill. */
    bytesPerNode: z.number().int().positive().optional(),
  })
  .refine((i) => !i.force || i.targetFill !== undefined || i.bytesPerNode !== undefined, {
    message: 'force evicts from nodes below their watermark: say how much with targetFill or bytesPerNode',
    path: ['force'],
  });
export type PlanEvictionInput = z.input<typeof planEvictionInput>;

export interface PlannedNode {
  nodeId: string;
  url: string;
  /** Accounted bytes held, capacity, fill ratio and watermark, as the node reported them. */
  bytes: number;
  capacityBytes: number;
  fill: number;
  watermark: number;
  /** Accounted bytes to free: the `maxBytes` of this node's evictBatch calls. */
  targetBytes: number;
}

export interface EvictionPlan {
  ringVersion: number;
  nodes: PlannedNode[];
  /** Nodes not planned, and why (below target, unreachable, joining or leaving). */
  skipped: { nodeId: string; reason: string }[];
  totalBytes: number;
}

const nodeStatsSchema = z.looseObject({
  bytes: z.number(),
  capacityBytes: z.number(),
  fill: z.number(),
  watermark: z.number(),
  aboveWatermark: z.boolean(),
});

const cursorSchema = z.strictObject({
  keys: z.number().int().min(0),
  bytes: z.number().int().min(0),
  freedBytes: z.number().int().min(0),
  calls: z.number().int().min(0),
  /** Consecutive calls that freed nothing (two end the run: what is left cannot be evicted now). */
  idleCalls: z.number().int().min(0),
});
export type EvictCursor = z.infer<typeof cursorSchema>;

export const evictBatchInput = z.strictObject({
  nodeId: nodeIdSchema,
  /** Accounted bytes to free on the node over the whole run (the plan's targetBytes). */
  maxBytes: z.number().int().positive(),
  /** Keys to evict over the whole run. @default no limit */
  maxKeys: z.number().int().positive().optional(),
  /** Bandwidth cap of the copies to the cold tier, value bytes per second. @default none */
  rateBytesPerSec: z.number().positive().optional(),
  /** Return after about this long (a Lambda step must end well inside its timeout). */
  maxMs: z.number().int().min(100).max(900_000).default(60_000),
  /** Victims asked of the node at a time. */
  pageSize: z.number().int().min(1).max(1000).default(64),
  /** Victims copied at the same time (bounds memory: one value each). */
  concurrency: z.number().int().min(1).max(32).default(4),
  verify: z.enum(['head', 'content']).default('head'),
  /** Report lines returned per call (Step Functions payloads are limited to 256 KiB). */
  reportLimit: z.number().int().min(0).max(5000).default(200),
  cursor: cursorSchema.nullish(),
});
export type EvictBatchInput = z.input<typeof evictBatchInput>;

export type EvictOutcome = 'moved' | 'expired' | 'changed' | 'pinned' | 'not-owned' | 'migrating' | 'failed';

export interface EvictReportLine {
  ns: string;
  key: string;
  version: number;
  /** Value bytes copied (moved) or accounted bytes freed (expired). */
  bytes: number;
  outcome: EvictOutcome;
  reason?: string;
}

export type EvictStopReason = 'target-reached' | 'max-keys' | 'no-victims' | 'only-unevictable' | 'time' | 'idle';

export interface EvictBatchResult {
  nodeId: string;
  /** True when the run is over (see `reason`): stop calling. */
  done: boolean;
  reason: EvictStopReason;
  /** This call: keys moved to the cold tier and removed from the node, their value bytes, accounted bytes freed. */
  keys: number;
  bytes: number;
  freedBytes: number;
  /** Rewritten (or removed) on the node during the eviction: the node keeps its newer state. */
  skippedChanged: number;
  /** Expired: removed from the node without a copy. */
  skippedExpired: number;
  skippedPinned: number;
  /** In a range the node does not own (left over from a migration, removed by its cleanup). */
  skippedNotOwned: number;
  /** In a range with a migration in flight. */
  skippedMigrating: number;
  /** Copy or verification failed, or the source bytes do not match their hash: left on the node. */
  failed: number;
  /** Time spent waiting for the bandwidth cap. */
  waitedMs: number;
  report: EvictReportLine[];
  /** Report lines left out (over `reportLimit`). */
  reportTruncated: number;
  /** Totals of the run so far: pass it to the next call. */
  cursor: EvictCursor;
}

/** The ring, either way it may be given; refreshed after a node said our route was stale. */
class RingSource {
  constructor(private readonly ring: EvictDeps['ring']) {}

  async router(): Promise<RingRouter> {
    try {
      return this.ring instanceof RingView ? await this.ring.ready() : new RingRouter(parseRingDocument(await this.ring()));
    } catch (e) {
      throw new TierUnavailableError('warm', e);
    }
  }

  async refresh(e: StaleRouteError, current: RingRouter): Promise<RingRouter> {
    const view = this.ring;
    if (!(view instanceof RingView)) return this.router().catch(() => current);
    try {
      if (e.ring) view.adopt(e.ring);
    } catch {
      /* an invalid document: read the store instead */
    }
    const cur = view.current();
    if (cur && cur.version > current.version) return cur;
    return view.refresh().catch(() => view.current() ?? current);
  }
}

/** Which nodes to evict from, and how many bytes from each (see the module comment). */
export async function planEviction(deps: Pick<EvictDeps, 'nodes' | 'ring'>, raw: unknown): Promise<EvictionPlan> {
  const i = parseWith(planEvictionInput, raw ?? {}, 'input');
  const router = await new RingSource(deps.ring).router();
  const doc = router.doc;
  const owners = new Set(doc.ranges.map((r) => r.owner));
  let candidates: RingDocument['nodes'];
  const skipped: EvictionPlan['skipped'] = [];
  if (i.nodeId) {
    const n = router.node(i.nodeId);
    if (!n)
      throw new NotFoundError(
        `node '${i.nodeId}' is not in ring version ${doc.version} (nodes: ${doc.nodes.map((x) => x.id).join(', ')})`,
        { nodeId: i.nodeId },
      );
    candidates = [n];
  } else {
    candidates = doc.nodes.filter((n) => {
      const why =
        n.state === 'JOINING'
          ? 'joining: receives ranges'
          : n.state === 'LEAVING'
            ? 'leaving: being drained'
            : !owners.has(n.id)
              ? 'owns no range'
              : undefined;
      if (why) skipped.push({ nodeId: n.id, reason: why });
      return !why;
    });
  }
  const nodes: PlannedNode[] = [];
  await Promise.all(
    candidates.map(async (n) => {
      let s: z.infer<typeof nodeStatsSchema>;
      try {
        s = nodeStatsSchema.parse(await deps.nodes.stats(n.url));
      } catch (e) {
        skipped.push({ nodeId: n.id, reason: `unreachable: ${e instanceof Error ? e.message : String(e)}` });
        return;
      }
      if (!i.nodeId && !i.force && !s.aboveWatermark) {
        skipped.push({ nodeId: n.id, reason: `below its watermark (fill ${s.fill.toFixed(3)} < ${s.watermark})` });
        return;
      }
      const targetBytes = i.bytesPerNode ?? Math.max(0, Math.ceil(s.bytes - (i.targetFill ?? s.watermark) * s.capacityBytes));
      if (targetBytes <= 0) {
        skipped.push({ nodeId: n.id, reason: `already at or below the target fill (${s.fill.toFixed(3)})` });
        return;
      }
      nodes.push({
        nodeId: n.id,
        url: n.url,
        bytes: s.bytes,
        capacityBytes: s.capacityBytes,
        fill: s.fill,
        watermark: s.watermark,
        targetBytes,
      });
    }),
  );
  nodes.sort((a, b) => b.fill - a.fill || a.nodeId.localeCompare(b.nodeId));
  skipped.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { ringVersion: doc.version, nodes, skipped, totalBytes: nodes.reduce((s, n) => s + n.targetBytes, 0) };
}

type Victim = Awaited<ReturnType<NodeClient['victims']>>['victims'][number];

/** The result counter of each outcome. */
const COUNTERS = {
  moved: 'keys',
  expired: 'skippedExpired',
  changed: 'skippedChanged',
  pinned: 'skippedPinned',
  'not-owned': 'skippedNotOwned',
  migrating: 'skippedMigrating',
  failed: 'failed',
} as const satisfies Record<EvictOutcome, keyof EvictBatchResult>;

/** What happened to one victim before the deletes: final, or waiting for its conditional delete. */
type Handled = { final: EvictReportLine } | { remove: Victim; as: 'moved' | 'expired'; valueBytes: number };

/** Evicts from one node for at most `maxMs` (see the module comment); call again with `cursor` until `done`. */
export async function evictBatch(deps: EvictDeps, raw: unknown): Promise<EvictBatchResult> {
  const i = parseWith(evictBatchInput, raw, 'input');
  const now = deps.now ?? Date.now;
  const deadline = now() + i.maxMs;
  const ring = new RingSource(deps.ring);
  let router = await ring.router();
  const node = router.node(i.nodeId);
  if (!node) throw new NotFoundError(`node '${i.nodeId}' is not in ring version ${router.version}`, { nodeId: i.nodeId });
  const bucket = i.rateBytesPerSec
    ? new TokenBucket({
        ratePerSec: i.rateBytesPerSec,
        ...(deps.now ? { now: deps.now } : {}),
        ...(deps.sleep ? { sleep: deps.sleep } : {}),
      })
    : undefined;
  const before: EvictCursor = i.cursor ?? { keys: 0, bytes: 0, freedBytes: 0, calls: 0, idleCalls: 0 };
  const out: EvictBatchResult = {
    nodeId: i.nodeId,
    done: false,
    reason: 'time',
    keys: 0,
    bytes: 0,
    freedBytes: 0,
    skippedChanged: 0,
    skippedExpired: 0,
    skippedPinned: 0,
    skippedNotOwned: 0,
    skippedMigrating: 0,
    failed: 0,
    waitedMs: 0,
    report: [],
    reportTruncated: 0,
    cursor: before,
  };
  const record = (line: EvictReportLine): void => {
    out[COUNTERS[line.outcome]]++;
    if (line.outcome === 'moved') out.bytes += line.bytes;
    if (out.report.length < i.reportLimit) out.report.push(line);
    else out.reportTruncated++;
  };
  const line = (v: Victim, outcome: EvictOutcome, bytes = 0, reason?: string): EvictReportLine => ({
    ns: v.ns,
    key: v.key,
    version: v.version,
    bytes,
    outcome,
    ...(reason ? { reason } : {}),
  });

  /** Steps 1-3 of the module comment for one victim. */
  const handle = async (v: Victim, r: RingRouter): Promise<Handled> => {
    const route = r.route(v.position);
    if (route.owner.id !== i.nodeId) return { final: line(v, route.pending?.id === i.nodeId ? 'migrating' : 'not-owned') };
    if (route.pending) return { final: line(v, 'migrating') };
    if (v.expired) return { remove: v, as: 'expired', valueBytes: 0 };
    let e: Entry | undefined;
    try {
      e = await deps.nodes.get(node.url, v.ns, v.key, r.version);
    } catch (err) {
      if (err instanceof StaleRouteError)
        return { final: line(v, 'not-owned', 0, 'the node refused the route: the ring changed') };
      throw new TierUnavailableError('warm', err);
    }
    if (!e) {
      // Expired since it was named (the node no longer returns it), or removed meanwhile.
      if (v.expiresAt !== null && v.expiresAt <= now()) return { remove: v, as: 'expired', valueBytes: 0 };
      return { final: line(v, 'changed', 0, 'removed from the node meanwhile') };
    }
    if (e.header.version !== v.version) return { final: line(v, 'changed', 0, `rewritten: version ${e.header.version}`) };
    if (e.header.flags.pinned) return { final: line(v, 'pinned') };
    if (isLive(e.header) && checksumMatches(e.value, e.header.hash) === false)
      return { final: line(v, 'failed', 0, 'the bytes on the node do not match their hash: not copied') };
    if (bucket) await bucket.take(e.value.length);
    const copied = await copyVerified(deps.cold, v.ns, v.key, e, i.verify);
    if (!copied.ok) return { final: line(v, 'failed', 0, copied.reason) };
    return { remove: v, as: 'moved', valueBytes: e.value.length };
  };

  const seen = new Set<string>();
  for (;;) {
    const freed = before.freedBytes + out.freedBytes;
    const keys = before.keys + out.keys;
    if (freed >= i.maxBytes) {
      out.reason = 'target-reached';
      out.done = true;
      break;
    }
    if (i.maxKeys !== undefined && keys >= i.maxKeys) {
      out.reason = 'max-keys';
      out.done = true;
      break;
    }
    if (now() >= deadline) break;
    let page: Awaited<ReturnType<NodeClient['victims']>>;
    try {
      page = await deps.nodes.victims(node.url, Math.min(i.pageSize, i.maxKeys === undefined ? i.pageSize : i.maxKeys - keys));
    } catch (err) {
      throw new TierUnavailableError('warm', err);
    }
    if (page.victims.length === 0) {
      out.reason = 'no-victims';
      out.done = true;
      break;
    }
    const fresh = page.victims.filter((v) => !seen.has(`${v.ns}\u0000${v.key}`));
    if (fresh.length === 0) {
      // The node's hand came round to victims this call already handled: what is left cannot go now.
      out.reason = 'only-unevictable';
      out.done = true;
      break;
    }
    // The victims needed to reach the byte target, in the node's order (the rest of the page stays).
    const chosen: Victim[] = [];
    let planned = freed;
    for (const v of fresh) {
      if (planned >= i.maxBytes) break;
      chosen.push(v);
      seen.add(`${v.ns}\u0000${v.key}`);
      planned += v.bytes;
    }
    const handled = await mapLimit(chosen, i.concurrency, (v) => handle(v, router));
    // Step 4: conditional deletes, one batch per namespace.
    const byNs = new Map<string, Extract<Handled, { remove: Victim }>[]>();
    for (const h of handled) {
      if ('final' in h) record(h.final);
      else byNs.set(h.remove.ns, [...(byNs.get(h.remove.ns) ?? []), h]);
    }
    for (const [ns, group] of byNs) {
      let removed: boolean[];
      try {
        removed = await deps.nodes.deleteMany(
          node.url,
          ns,
          group.map((g) => g.remove.key),
          router.version,
          group.map((g) => g.remove.version),
        );
      } catch (err) {
        if (!(err instanceof StaleRouteError)) throw new TierUnavailableError('warm', err);
        router = await ring.refresh(err, router);
        for (const g of group)
          record(line(g.remove, 'not-owned', 0, 'the node refused the delete: the ring changed (the copy below is harmless)'));
        continue;
      }
      group.forEach((g, j) => {
        if (!removed[j]) {
          record(line(g.remove, 'changed', 0, 'rewritten during the eviction: the node keeps the new version'));
          return;
        }
        out.freedBytes += g.remove.bytes;
        record(line(g.remove, g.as, g.as === 'moved' ? g.valueBytes : g.remove.bytes));
      });
    }
    deps.onProgress?.({ nodeId: i.nodeId, keys: out.keys, bytes: out.bytes, freedBytes: out.freedBytes });
  }
  out.waitedMs = Math.round(bucket?.waitedMs ?? 0);
  const idleCalls = out.freedBytes > 0 ? 0 : before.idleCalls + 1;
  if (!out.done && idleCalls >= 2) {
    out.done = true;
    out.reason = 'idle';
  }
  out.cursor = {
    keys: before.keys + out.keys,
    bytes: before.bytes + out.bytes,
    freedBytes: before.freedBytes + out.freedBytes,
    calls: before.calls + 1,
    idleCalls,
  };
  return out;
}
