import * as z from 'zod';
import { evenStarts, isRingPosition, RING_MIN } from './hash.js';
import { formatIssues } from '../util/zod-issues.js';
import { takeoverSpent } from './takeover.js';

/**
 * The ring document: the authoritative map from the 64-bit hash space to cache nodes. It is stored durably and
 * changed only by compare-and-set (see store.ts); everyone else caches it by `version`.
 *
 * - `ranges` cover the whole space in order: range i is [start_i, start_{i+1}), the last one runs to the top.
 * - A range has one `owner` (serves its reads and writes) and, while it migrates, a `pending` target: writes to
 *   it are shadow-written to the target, reads stay on the owner (paper 004) until the handoff phase, when they
 *   move to the (complete) target just before it becomes the owner.
 * - `epoch` is the ring version at which the range's routing (owner or pending target) last changed. A node
 *   refuses a request whose ring version is older than the epoch of the key's range: the caller's route may miss
 *   a shadow target or point at a former owner, so it must refresh first. Ranges whose routing did not change
 *   keep their epoch, so a ring change only bounces the requests it concerns.
 */
export const NODE_STATES = ['JOINING', 'PARTIAL', 'NORMAL', 'LEAVING', 'DOWN'] as const;
export type NodeState = (typeof NODE_STATES)[number];

/**
 * How long a cache node may serve on the strength of one read of the ring store, by default (see `leaseMs`).
 * Three of the nodes' default 5 s polls: two polls may fail before a healthy node stops serving.
 */
export const DEFAULT_RING_LEASE_MS = 15_000;

const position = z.string().refine(isRingPosition, 'a ring position is 16 lowercase hex digits');
/** A cache node's id in the ring (on EC2 its instance id): the rule every step input that names a node checks too. */
export const nodeIdSchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'node ids are 1-64 characters of A-Z a-z 0-9 _ . : -');
const nodeId = nodeIdSchema;

export const ringNodeSchema = z.strictObject({
  id: nodeId,
  /** Base URL of the node's HTTP API (http://host:port). */
  url: z.string().url(),
  state: z.enum(NODE_STATES),
  /** Provider reference (EC2 instance id, local pid tag) for the fleet. */
  instance: z.string().optional(),
  /**
   * Availability Zone the node runs in, recorded when it joins (scale-in and scale-out keep the fleet spread over
   * the AZs). Optional: documents written before it existed parse unchanged. A cache node of an older version
   * parses nodes strictly and refuses a document carrying it; none runs on EC2, where ScaleOut could not launch
   * before this field came (AZ-aware placement).
   */
  az: z.string().min(1).max(64).optional(),
  addedAt: z.string(),
  /**
   * Set with state DOWN: when the health check marked it (epoch ms, the marker's clock) and why. Its ranges are
   * fenced: they serve no reads, and writes skip them once the node's lease has run out (see {@link downFenced}).
   */
  down: z
    .strictObject({
      at: z.number().int().min(0),
      reason: z.string().max(500),
    })
    .optional(),
});

export const pendingSchema = z.strictObject({
  target: nodeId,
  /** The migration session that set it. */
  session: z.string().min(1),
  /**
   * `copy` (default): reads stay on the owner while the target is filled. `handoff`: the copy is complete and
   * reads move to the target; writes still go to both, so readers on either version see every acknowledged
   * write. The next change makes the target the owner.
   */
  phase: z.enum(['copy', 'handoff']).optional(),
});

export const ringRangeSchema = z.strictObject({
  start: position,
  owner: nodeId,
  epoch: z.number().int().min(1),
  pending: pendingSchema.optional(),
  /**
   * Set when the range was handed over from a DOWN node (replaced, or removed to a neighbour): when (epoch ms, the
   * writer's clock). Until its window has passed, writes stamped before the hand-over skip the new owner, since a
   * caller that has not read this ring yet still writes around the DOWN node (see takeover.ts).
   */
  takenOver: z.strictObject({ at: z.number().int().min(0) }).optional(),
});

export const ringDocumentSchema = z
  .strictObject({
    format: z.literal(1),
    version: z.number().int().min(1),
    updatedAt: z.string(),
    /**
     * A node serves key requests only within this many ms of the start of its last successful read of the ring
     * store, so a node that cannot learn it was marked DOWN (paused, partitioned) stops serving by itself, and a
     * writer may skip its ranges once the lease has run out. @default {@link DEFAULT_RING_LEASE_MS}
     */
    leaseMs: z.number().int().min(1000).max(600_000).optional(),
    nodes: z.array(ringNodeSchema).min(1),
    ranges: z.array(ringRangeSchema).min(1),
  })
  .superRefine((doc, ctx) => {
    const problem = ringProblem(doc);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * The document as a reader takes it: the same checks, but fields and node states this version does not know are
 * kept, not refused. A newer writer (a rolling upgrade's new nodes, a newer workflow) may add a field or a state;
 * a node of this version must keep routing by such a ring rather than drop it and refuse every request. An unknown
 * node state counts as neither NORMAL nor DOWN (the node keeps serving its ranges; nothing new is placed on it), an
 * unknown pending phase as `copy` (reads stay on the owner). A change older readers must not accept bumps `format`.
 * New documents are written to the strict schema ({@link ringDocumentSchema}), so a typo is still refused.
 */
const readableRingSchema = z
  .looseObject({
    ...ringDocumentSchema.shape,
    nodes: z
      .array(
        z.looseObject({
          ...ringNodeSchema.shape,
          state: z.string().min(1),
          down: ringNodeSchema.shape.down.unwrap().loose().optional(),
        }),
      )
      .min(1),
    ranges: z
      .array(
        z.looseObject({
          ...ringRangeSchema.shape,
          pending: z.looseObject({ ...pendingSchema.shape, phase: z.string().optional() }).optional(),
          takenOver: ringRangeSchema.shape.takenOver.unwrap().loose().optional(),
        }),
      )
      .min(1),
  })
  .superRefine((doc, ctx) => {
    const problem = ringProblem(doc as RingDocument);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export type RingNode = z.infer<typeof ringNodeSchema>;
export type RingRange = z.infer<typeof ringRangeSchema>;
export type RingDocument = z.infer<typeof ringDocumentSchema>;

/** One range with its end made explicit (null = the top of the space). */
export interface RangeSpan {
  start: string;
  end: string | null;
}

export class RingDocumentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RingDocumentError';
  }
}

/** What is wrong with a document's structure, or undefined when it is sound. */
export function ringProblem(doc: Pick<RingDocument, 'nodes' | 'ranges' | 'version'>): string | undefined {
  const ids = new Set<string>();
  for (const n of doc.nodes) {
    if (ids.has(n.id)) return `node '${n.id}' is listed twice`;
    ids.add(n.id);
  }
  if (doc.ranges[0]?.start !== RING_MIN) return `the first range must start at ${RING_MIN}`;
  for (let i = 0; i < doc.ranges.length; i++) {
    const r = doc.ranges[i]!;
    if (i > 0 && !(doc.ranges[i - 1]!.start < r.start))
      return `ranges must be in strictly ascending order of start (at ${r.start})`;
    if (!ids.has(r.owner)) return `range ${r.start} is owned by unknown node '${r.owner}'`;
    if (r.pending) {
      if (!ids.has(r.pending.target)) return `range ${r.start} is pending to unknown node '${r.pending.target}'`;
      if (r.pending.target === r.owner) return `range ${r.start} is pending to its own owner`;
    }
    if (r.epoch > doc.version) return `range ${r.start} has epoch ${r.epoch} above the document version ${doc.version}`;
  }
  for (const n of doc.nodes) {
    if (n.state === 'DOWN' && n.down === undefined) return `node '${n.id}': state DOWN and a down record go together`;
    if (n.down !== undefined && n.state !== 'DOWN') return `node '${n.id}': state DOWN and a down record go together`;
  }
  return undefined;
}

/**
 * Parses and checks a document (from a store, a node, or a 409 answer). Read as a reader takes it (fields and
 * states of newer versions kept: see readableRingSchema) unless `strict`, as for a document about to be created.
 */
export function parseRingDocument(input: unknown, opts: { strict?: boolean } = {}): RingDocument {
  const r = opts.strict
    ? ringDocumentSchema.safeParse(input)
    : (readableRingSchema.safeParse(input) as z.ZodSafeParseResult<RingDocument>);
  if (!r.success) throw new RingDocumentError(`invalid ring document: ${formatIssues(r.error.issues)}`);
  return r.data;
}

/**
 * A first ring: `rangesPerNode` equal ranges per node, dealt round-robin so each node's ranges are spread over
 * the space. Version 1.
 */
export function initialRing(
  nodes: { id: string; url: string; instance?: string }[],
  rangesPerNode = 1,
  now = new Date(),
): RingDocument {
  if (nodes.length === 0) throw new RingDocumentError('a ring needs at least one node');
  const starts = evenStarts(nodes.length * rangesPerNode);
  const doc: RingDocument = {
    format: 1,
    version: 1,
    updatedAt: now.toISOString(),
    nodes: nodes.map((n) => ({
      id: n.id,
      url: n.url,
      state: 'NORMAL' as const,
      ...(n.instance ? { instance: n.instance } : {}),
      addedAt: now.toISOString(),
    })),
    ranges: starts.map((start, i) => ({ start, owner: nodes[i % nodes.length]!.id, epoch: 1 })),
  };
  const problem = ringProblem(doc);
  if (problem) throw new RingDocumentError(problem);
  return doc;
}

export function cloneRing(doc: RingDocument): RingDocument {
  return structuredClone(doc);
}

export function spanOf(doc: RingDocument, index: number): RangeSpan {
  return { start: doc.ranges[index]!.start, end: doc.ranges[index + 1]?.start ?? null };
}

/** Index of the range holding `position` (binary search over the starts). */
export function rangeIndexOf(ranges: readonly { start: string }[], position: string): number {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ranges[mid]!.start <= position) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

export function findNode(doc: RingDocument, id: string): RingNode | undefined {
  return doc.nodes.find((n) => n.id === id);
}

export function requireNode(doc: RingDocument, id: string): RingNode {
  const n = findNode(doc, id);
  if (!n) throw new RingDocumentError(`node '${id}' is not in ring version ${doc.version}`);
  return n;
}

/** Whether `position` lies in [span.start, span.end). */
export function spanContains(span: RangeSpan, position: string): boolean {
  return position >= span.start && (span.end === null || position < span.end);
}

// ------------------------------------------------------------------ edits (in place, on a draft)

/**
 * Makes `at` a range boundary (no-op when it already is one). The new range inherits owner, pending target and
 * epoch: routing does not change, so no caller needs to refresh.
 */
export function splitAt(doc: RingDocument, at: string): void {
  if (!isRingPosition(at)) throw new RingDocumentError(`not a ring position: '${at}'`);
  const i = rangeIndexOf(doc.ranges, at);
  const r = doc.ranges[i]!;
  if (r.start === at) return;
  doc.ranges.splice(i + 1, 0, { ...structuredClone(r), start: at });
}

/** Indexes of the ranges exactly covering `span` (its bounds must be range boundaries). */
export function rangesIn(doc: RingDocument, span: RangeSpan): number[] {
  const first = doc.ranges.findIndex((r) => r.start === span.start);
  if (first < 0) throw new RingDocumentError(`${span.start} is not a range boundary in ring version ${doc.version}`);
  const out: number[] = [];
  for (let i = first; i < doc.ranges.length; i++) {
    const s = spanOf(doc, i);
    if (span.end !== null && s.start >= span.end) break;
    if (span.end !== null && (s.end === null || s.end > span.end))
      throw new RingDocumentError(`${span.end} is not a range boundary in ring version ${doc.version}`);
    out.push(i);
  }
  return out;
}

/**
 * Merges neighbours with the same owner, no pending target and the same hand-over mark (keeps the document small
 * after many migrations). The merged range takes the higher epoch, which is safe: a caller between the two epochs is
 * merely asked to refresh. Hand-over marks whose window ended a minute before `now` are dropped first: they no
 * longer change any route (takeover.ts), and a marked range must not merge with one the node held before, whose
 * writes may never skip it.
 */
export function coalesce(doc: RingDocument, now = Date.now()): void {
  for (const r of doc.ranges) if (r.takenOver && takeoverSpent(leaseOf(doc), r.takenOver.at, now)) delete r.takenOver;
  const out: RingRange[] = [];
  for (const r of doc.ranges) {
    const prev = out[out.length - 1];
    const same = prev && prev.owner === r.owner && !prev.pending && !r.pending && prev.takenOver?.at === r.takenOver?.at;
    if (same) prev.epoch = Math.max(prev.epoch, r.epoch);
    else out.push(r);
  }
  doc.ranges = out;
}

export function addNode(
  doc: RingDocument,
  node: { id: string; url: string; instance?: string; az?: string; state?: NodeState },
  now = new Date(),
): void {
  if (findNode(doc, node.id)) throw new RingDocumentError(`node '${node.id}' is already in the ring`);
  const extra = { ...(node.instance ? { instance: node.instance } : {}), ...(node.az ? { az: node.az } : {}) };
  doc.nodes.push({ id: node.id, url: node.url, state: node.state ?? 'JOINING', ...extra, addedAt: now.toISOString() });
}

export function setNodeState(doc: RingDocument, id: string, state: Exclude<NodeState, 'DOWN'>): void {
  const n = requireNode(doc, id);
  n.state = state;
  delete n.down;
}

/** The lease the nodes of `doc` serve under (see `leaseMs`). */
export function leaseOf(doc: Pick<RingDocument, 'leaseMs'>): number {
  return doc.leaseMs ?? DEFAULT_RING_LEASE_MS;
}

/**
 * Marks a node DOWN (no-op, returning false, when it already is). Its ranges' epochs move to `nextVersion`, so
 * the node itself, once it reads this version, and every caller still routing by an older one are refused for
 * them: a node that comes back serves nothing until it is replaced or removed.
 */
export function markDown(doc: RingDocument, id: string, nextVersion: number, reason: string, at = Date.now()): boolean {
  const n = requireNode(doc, id);
  if (n.state === 'DOWN') return false;
  n.state = 'DOWN';
  n.down = { at, reason: reason.slice(0, 500) };
  for (const r of doc.ranges) if (r.owner === id || r.pending?.target === id) r.epoch = nextVersion;
  return true;
}

/** Why a DOWN node's ranges cannot be handed over yet: a migration involving it is in flight. */
function pendingWith(doc: RingDocument, id: string): string | undefined {
  const r = doc.ranges.find((x) => x.pending && (x.owner === id || x.pending.target === id));
  return r
    ? `range ${r.start} is migrating (session ${r.pending!.session}) ${r.owner === id ? 'from' : 'to'} node '${id}': ` +
        'that migration must finish or roll back first'
    : undefined;
}

function requireDown(doc: RingDocument, id: string): RingNode {
  const n = requireNode(doc, id);
  if (n.state !== 'DOWN')
    throw new RingDocumentError(`node '${id}' is ${n.state}, not DOWN: only a DOWN node is replaced or removed this way`);
  const pending = pendingWith(doc, id);
  if (pending) throw new RingDocumentError(pending);
  return n;
}

/**
 * Replaces a DOWN node: `node` joins NORMAL and owns every range the dead one owned (epochs moved to
 * `nextVersion`, so callers and nodes routing by an older ring refresh), and the dead node leaves the ring. The new
 * node starts empty: its reads miss until it is filled, and misses are read from the next tier.
 */
export function replaceDownNode(
  doc: RingDocument,
  dead: string,
  node: { id: string; url: string; instance?: string; az?: string },
  nextVersion: number,
  now = new Date(),
): number {
  requireDown(doc, dead);
  addNode(doc, { ...node, state: 'NORMAL' }, now);
  let moved = 0;
  for (const r of doc.ranges) {
    if (r.owner !== dead) continue;
    r.owner = node.id;
    r.epoch = nextVersion;
    r.takenOver = { at: now.getTime() };
    moved++;
  }
  removeNode(doc, dead);
  coalesce(doc, now.getTime());
  return moved;
}

/**
 * Who takes each range of a DOWN node that is removed without a replacement: the next serving (NORMAL) owner
 * clockwise, as ScaleIn drains to. Refuses while a migration involves the node or when no NORMAL node is left.
 */
export function removalPlan(doc: RingDocument, dead: string): (RangeSpan & { to: string })[] {
  requireDown(doc, dead);
  const serving = new Set(doc.nodes.filter((n) => n.state === 'NORMAL').map((n) => n.id));
  if (serving.size === 0) throw new RingDocumentError(`no NORMAL node is left to take node '${dead}''s ranges`);
  const out: (RangeSpan & { to: string })[] = [];
  doc.ranges.forEach((r, i) => {
    if (r.owner !== dead) return;
    let to: string | undefined;
    for (let k = 1; k <= doc.ranges.length && !to; k++) {
      const next = doc.ranges[(i + k) % doc.ranges.length]!.owner;
      if (serving.has(next)) to = next;
    }
    out.push({ ...spanOf(doc, i), to: to! });
  });
  return out;
}

/**
 * Applies a {@link removalPlan} computed earlier: false (no change) when the document moved on so that the plan no
 * longer fits (the caller plans again). Epochs of the moved ranges go to `nextVersion`.
 */
export function applyRemoval(
  doc: RingDocument,
  dead: string,
  plan: (RangeSpan & { to: string })[],
  nextVersion: number,
  now = Date.now(),
): boolean {
  const fresh = removalPlan(doc, dead);
  const same =
    fresh.length === plan.length &&
    fresh.every((p, i) => p.start === plan[i]!.start && p.end === plan[i]!.end && p.to === plan[i]!.to);
  if (!same) return false;
  for (const r of doc.ranges) {
    if (r.owner !== dead) continue;
    r.owner = plan.find((p) => p.start === r.start)!.to;
    r.epoch = nextVersion;
    r.takenOver = { at: now };
  }
  removeNode(doc, dead);
  coalesce(doc, now);
  return true;
}

/**
 * Whether a DOWN node's lease has surely run out, so that it can no longer serve what it held and a write may
 * skip its ranges. `seenAt` is when the caller first saw it DOWN (its own clock, ms, e.g. performance.now()) and
 * `now` the same clock now: a lease counted from there needs no agreement between clocks. `wallNow` lets a caller
 * that saw the mark late (a fresh process) count from the mark's own time instead, with `skewMs` for the clocks.
 */
export function downFenced(
  doc: Pick<RingDocument, 'leaseMs'>,
  node: Pick<RingNode, 'down'>,
  seen: { seenAt: number; now: number; wallNow?: number; skewMs?: number },
): boolean {
  if (!node.down) return false;
  const lease = leaseOf(doc);
  if (seen.now - seen.seenAt >= lease) return true;
  return seen.wallNow !== undefined && seen.wallNow - node.down.at >= lease + (seen.skewMs ?? 1000);
}

/** Removes a node that owns nothing and is no range's pending target. */
export function removeNode(doc: RingDocument, id: string): void {
  if (doc.ranges.some((r) => r.owner === id || r.pending?.target === id))
    throw new RingDocumentError(`node '${id}' still owns or receives ranges`);
  doc.nodes = doc.nodes.filter((n) => n.id !== id);
}

/** Ranges (as spans) a node owns, and those it is the pending target of. */
export function rangesOfNode(
  doc: RingDocument,
  id: string,
): {
  owned: (RangeSpan & { epoch: number; pending?: RingRange['pending'] })[];
  incoming: (RangeSpan & { owner: string; session: string })[];
} {
  const owned: (RangeSpan & { epoch: number; pending?: RingRange['pending'] })[] = [];
  const incoming: (RangeSpan & { owner: string; session: string })[] = [];
  doc.ranges.forEach((r, i) => {
    const s = spanOf(doc, i);
    if (r.owner === id) owned.push({ ...s, epoch: r.epoch, ...(r.pending ? { pending: r.pending } : {}) });
    if (r.pending?.target === id) incoming.push({ ...s, owner: r.owner, session: r.pending.session });
  });
  return { owned, incoming };
}
