// Rolling a migration back, and fencing its steps once it is: what core/nodes/migration.ts's Migrator delegates here.
import { coalesce, removeNode, spanOf, type RangeSpan, type RingDocument } from '../ring/document.js';
import { RingPreconditionError, type JsonDocStore, type RingStore } from '../ring/store.js';
import type { MigrationEvent, MigrationPlan, MigrationSession } from './migration.js';
import type { NodeClient } from './node-client.js';

/**
 * Who asks a step of a plan to act: the Step Functions execution running it (its name), when a workflow does. A
 * plan records the execution that planned it; a step of another execution is refused.
 */
export interface StepFence {
  execution?: string;
}

/** The Migrator's parts a rollback and the fence checks use. */
export interface RollbackDeps {
  ring: RingStore;
  sessions: JsonDocStore<MigrationSession>;
  plans: JsonDocStore<MigrationPlan>;
  client: NodeClient;
  push(doc: RingDocument, first: string[], o: { required?: string[]; warn?: (message: string) => void }): Promise<void>;
  emit(e: MigrationEvent): void;
  now(): number;
  warn(message: string): void;
}

/**
 * Throws when a step of `plan` must not act: the plan is being (or was) rolled back, or the step belongs to another
 * execution than the one that planned it. The error is permanent (`RingPreconditionError`: Step Functions does not
 * retry it). Checked against the persisted plan at the moment a step would act.
 */
export function checkPlanLive(plan: MigrationPlan, fence: StepFence, what: string): void {
  if (fence.execution && plan.execution && fence.execution !== plan.execution)
    throw new RingPreconditionError(
      `${what}: plan ${plan.id} belongs to execution '${plan.execution}', not '${fence.execution}'`,
    );
  if (plan.rollback || plan.state === 'rolling-back' || plan.state === 'rolled-back') {
    const by = plan.rollback?.execution ? ` by execution '${plan.rollback.execution}'` : '';
    const why = plan.rollback?.reason ? ` after ${plan.rollback.reason}` : '';
    throw new RingPreconditionError(`${what}: plan ${plan.id} was rolled back${by}${why}; its steps no longer act`);
  }
}

/** Throws (permanently) when `s` was rolled back: its steps no longer act. */
export function checkSessionLive(s: MigrationSession, what: string): void {
  if (s.state === 'rolled-back') throw new RingPreconditionError(`${what}: session ${s.id} was rolled back`);
}

const MAX_FENCED_ATTEMPTS = 16;

/**
 * A ring compare-and-set that lands only while `check` (a fresh read of the plan and session documents, throwing
 * when a step must not act) still holds. The check is made after loading the ring and the write is conditional on
 * that very version, so it cannot land after a rollback's ring edit: a rollback first marks the plan (or session)
 * and then always writes a new ring version. Either this edit lands first (and the rollback's edit, made on top
 * of it, undoes it), or its version check fails and the next check sees the mark.
 */
export async function fencedRingUpdate(
  ring: RingStore,
  check: () => Promise<void>,
  edit: (draft: RingDocument, nextVersion: number) => void | boolean,
): Promise<RingDocument> {
  for (let attempt = 0; ; attempt++) {
    const seen = (await ring.load())?.version;
    await check();
    let moved = false;
    const doc = await ring.update((d, next) => {
      if (d.version !== seen) {
        moved = true; // checked against an older version: check again
        return false;
      }
      return edit(d, next);
    });
    if (!moved) return doc;
    if (attempt + 1 >= MAX_FENCED_ATTEMPTS) throw new Error('the ring kept changing while a migration step tried to edit it');
  }
}

/** Whether every range overlapping `span` is owned by `node` with nothing pending (a publish that landed). */
function spanOwnedBy(doc: RingDocument, span: RangeSpan, node: string): boolean {
  let any = false;
  for (let i = 0; i < doc.ranges.length; i++) {
    const s = spanOf(doc, i);
    const overlaps = (span.end === null || s.start < span.end) && (s.end === null || s.end > span.start);
    if (!overlaps) continue;
    const r = doc.ranges[i]!;
    if (r.owner !== node || r.pending) return false;
    any = true;
  }
  return any;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Drops the target's partial copy of a rolled-back span, best effort: a target that cannot be reached (dead, or
 * about to be terminated by the workflow) keeps it, and the next prepare of that span onto it clears it first.
 */
async function dropTargetCopy(d: RollbackDeps, s: MigrationSession, url: string | undefined, warn: (m: string) => void) {
  if (!url) return;
  await d.client
    .deleteRange(url, s.span.start, s.span.end)
    .catch((e: unknown) =>
      warn(
        `rollback of ${s.id}: the partial copy on '${s.target}' was not dropped (${errorText(e)}); ` +
          'the next prepare of that span onto it clears it',
      ),
    );
}

/**
 * Undoes a session that is not published (the CLI's `rollback SESSION`): marks it rolled back (from then on its
 * steps refuse), releases its pending mark in a ring edit (the source never stopped owning the span), pushes that
 * ring to the nodes (best effort: a dead source or target must not block it), and drops the target's partial
 * copy (best effort). Idempotent: a rollback that failed midway is finished by calling it again.
 */
export async function rollbackSession(d: RollbackDeps, sessionId: string): Promise<MigrationSession> {
  const at = new Date(d.now()).toISOString();
  const s = await d.sessions.update(sessionId, (cur) => {
    if (cur.state === 'published' || cur.state === 'cleaned')
      throw new RingPreconditionError(`session ${cur.id} is ${cur.state}: published spans are moved back by another migration`);
    return cur.state === 'rolled-back' ? undefined : { ...cur, state: 'rolled-back', rolledBackAt: at, updatedAt: at };
  });
  const before = await d.ring.load();
  const doc = await d.ring.update((r, next) => {
    for (const x of r.ranges) {
      if (x.pending?.session !== s.id) continue;
      delete x.pending;
      x.epoch = next;
    }
    return true; // always a new version: see fencedRingUpdate
  });
  const warnings: string[] = [];
  const warn = (m: string) => (warnings.push(m), d.warn(m));
  await d.push(doc, [s.target, s.source], { required: [], warn });
  await dropTargetCopy(d, s, before?.nodes.find((n) => n.id === s.target)?.url, warn);
  const u = warnings.length ? await d.sessions.update(s.id, (cur) => ({ ...cur, rollbackWarnings: warnings.slice(0, 10) })) : s;
  d.emit({ type: 'rolled-back', session: u, at: d.now() });
  return u;
}

/**
 * Rolls a plan back. Published spans stay with their new owner; the rest goes back as it was:
 *
 * 1. the fence: the plan is marked `rolling-back` (with who and why), so that from now on no step of its
 *    sessions acts (each checks the plan when it would: see {@link checkPlanLive}, {@link fencedRingUpdate});
 * 2. one ring edit, always a new version: every pending mark of the plan's sessions released, and the node
 *    settled (a joining node that owns nothing leaves the ring, one that owns ranges is NORMAL; a leaving node is
 *    NORMAL again; a DOWN node stays DOWN). A publish that landed before it is kept (its session is published);
 * 3. that ring pushed to the nodes, best effort: a dead source or target must not block the rollback;
 * 4. each session not published marked rolled back, its target's partial copy dropped (best effort);
 * 5. the plan `rolled-back` (`done` when some session was published), with what could not be done in
 *    `rollback.warnings`.
 *
 * Idempotent: a rollback that failed midway is finished by calling it again. A plan that is done is left as is.
 */
export async function rollbackPlan(
  d: RollbackDeps,
  planId: string,
  o: { execution?: string; reason?: string } = {},
): Promise<MigrationPlan> {
  const at = new Date(d.now()).toISOString();
  const marked = await d.plans.update(planId, (cur) =>
    cur.state === 'running'
      ? {
          ...cur,
          state: 'rolling-back',
          rollback: {
            at,
            ...(o.execution ? { execution: o.execution } : {}),
            ...(o.reason ? { reason: o.reason.slice(0, 500) } : {}),
            warnings: [],
          },
          updatedAt: at,
        }
      : undefined,
  );
  if (marked.state !== 'rolling-back') return marked; // done, or rolled back already
  const plan = marked;
  const sessions = await Promise.all(plan.sessions.map(async (id) => (await d.sessions.get(id))!));
  const ids = new Set(plan.sessions);
  const before = (await d.ring.load())!;

  const flipped = new Set<string>();
  const doc = await d.ring.update((r, next) => {
    flipped.clear();
    for (const s of sessions) if (s.state === 'streamed' && spanOwnedBy(r, s.span, s.target)) flipped.add(s.id);
    for (const x of r.ranges) {
      if (!x.pending || !ids.has(x.pending.session)) continue;
      delete x.pending;
      x.epoch = next;
    }
    const n = r.nodes.find((x) => x.id === plan.node);
    if (n && plan.kind === 'scale-in' && n.state === 'LEAVING') n.state = 'NORMAL';
    if (n && plan.kind === 'scale-out') {
      const owns = r.ranges.some((x) => x.owner === n.id || x.pending?.target === n.id);
      if (!owns) removeNode(r, n.id);
      else if (n.state === 'JOINING' || n.state === 'PARTIAL') n.state = 'NORMAL';
    }
    coalesce(r);
    return true; // always a new version, even with nothing to release: see fencedRingUpdate
  });

  const warnings: string[] = [];
  const warn = (m: string) => (warnings.push(m), d.warn(m));
  const involved = [...new Set(sessions.flatMap((s) => [s.target, s.source]))];
  await d.push(doc, involved, { required: [], warn });
  // A joining node that left the ring still gets the ring without it: it then holds nothing of the plan's spans, so
  // it takes no more shadow writes or imports for them and lets its partial copies be dropped.
  for (const n of before.nodes.filter((x) => involved.includes(x.id) && !doc.nodes.some((y) => y.id === x.id)))
    await d.client
      .pushRing(n.url, doc)
      .catch((e: unknown) => warn(`ring version ${doc.version} not pushed to '${n.id}': ${errorText(e)}`));

  let anyPublished = false;
  for (const s of sessions) {
    if (s.state === 'published' || s.state === 'cleaned') {
      anyPublished = true;
      continue;
    }
    if (flipped.has(s.id)) {
      // Its publish landed just before the rollback's edit: the target owns the span, the session is published.
      anyPublished = true;
      const u = await d.sessions.update(s.id, (cur) =>
        cur.state === 'streamed'
          ? { ...cur, state: 'published', publishedAt: at, cleanAfter: d.now(), updatedAt: at }
          : undefined,
      );
      d.emit({ type: 'published', session: u, at: d.now() });
      continue;
    }
    if (s.state !== 'rolled-back') {
      await dropTargetCopy(d, s, before.nodes.find((n) => n.id === s.target)?.url, warn);
      const u = await d.sessions.update(s.id, (cur) =>
        cur.state === 'published' || cur.state === 'cleaned'
          ? undefined
          : { ...cur, state: 'rolled-back', rolledBackAt: at, updatedAt: new Date(d.now()).toISOString() },
      );
      d.emit({ type: 'rolled-back', session: u, at: d.now() });
    }
  }

  return d.plans.update(planId, (cur) => ({
    ...cur,
    state: anyPublished ? 'done' : 'rolled-back',
    rollback: { ...cur.rollback!, warnings: [...(cur.rollback?.warnings ?? []), ...warnings].slice(0, 20) },
    updatedAt: new Date(d.now()).toISOString(),
  }));
}
