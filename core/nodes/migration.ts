import { randomBytes } from 'node:crypto';
import {
  addNode,
  coalesce,
  rangesIn,
  rangesOfNode,
  removeNode,
  requireNode,
  setNodeState,
  spanOf,
  splitAt,
  type NodeState,
  type RangeSpan,
  type RingDocument,
} from '../ring/document.js';
import { JsonDocStore, RingPreconditionError, RingStore, type CasStore } from '../ring/store.js';
import type { FleetProvider } from './fleet.js';
import { finishHandOffEdit, planHandOff, settleRolledBackHandOff, type HandOffDeps, type HandOffRequest } from './hand-off.js';
import {
  checkPlanLive,
  checkSessionLive,
  fencedRingUpdate,
  rollbackPlan,
  rollbackSession,
  type RollbackDeps,
  type StepFence,
} from './migration-rollback.js';
import { NodeClient, NodeRequestError } from './node-client.js';
import { storeKey } from './wire.js';

/**
 * Range migration between cache nodes (paper 004), as resumable steps with their progress persisted in a CAS
 * store (a session document per source → target stream, a plan document per scale operation). Each step is
 * idempotent ("make it so"), so a driver — {@link Migrator.run} here, a Step Functions state machine later — can
 * re-run the step it was in after a crash:
 *
 *   plan      pick the spans to move: the fullest range of each source node cut at its median key (paper 000);
 *   prepare   mark the span pending to the target (ring CAS, pushed to target and source): writes are now
 *             shadow-written to the target, reads stay on the source;
 *   stream    copy the span source → target: cursor-based, throttled, resumable from the persisted cursor;
 *   publish   hand reads over to the target, then flip ownership to it (two ring CASes, pushed to target
 *             first): it serves the span from now on;
 *   cleanup   after a grace period, the source drops the span;
 *   rollback  (before publish) release the pending mark and drop the target's partial copy; from then on the
 *             plan's steps refuse to act (migration-rollback.ts).
 *
 * Modes: `incremental` runs one session at a time and publishes each as soon as it is streamed (the new node
 * serves step by step); `parallel` (the Cassandra baseline) prepares and streams every session at once and
 * publishes them together at the end. Scale-in drains a node's ranges to their successors the same way, and a
 * hand-off (a rolling upgrade's step: hand-off.ts) moves every range of one node to a freshly launched one.
 */
export type MigrationMode = 'incremental' | 'parallel';
export type SessionState = 'planned' | 'prepared' | 'streamed' | 'published' | 'cleaned' | 'rolled-back';

export interface MigrationSession {
  id: string;
  plan: string;
  source: string;
  target: string;
  span: RangeSpan;
  state: SessionState;
  /** Storage key (hex) of the last entry the target took; the stream resumes after it. */
  cursor: string | null;
  copied: { keys: number; bytes: number; applied: number; stale: number };
  createdAt: string;
  updatedAt: string;
  preparedAt?: string;
  streamedAt?: string;
  publishedAt?: string;
  /** Epoch ms after which the source may drop the span. */
  cleanAfter?: number;
  rolledBackAt?: string;
  /** Keys and bytes the source held in the span at planning time. */
  planned: { keys: number; bytes: number };
  /** What its rollback could not do (a node it could not reach). */
  rollbackWarnings?: string[];
}

export interface MigrationPlan {
  id: string;
  kind: 'scale-out' | 'scale-in' | 'hand-off';
  mode: MigrationMode;
  /** scale-out: the joining node; scale-in and hand-off: the leaving node. */
  node: string;
  /** hand-off: the node taking over every range of `node`. */
  target?: string;
  sessions: string[];
  /** `rolling-back` from the start of a rollback: its steps refuse to act from then on. */
  state: 'running' | 'rolling-back' | 'done' | 'rolled-back';
  /** The workflow execution that planned it: only its steps act on it. */
  execution?: string;
  /** Set when a rollback began (the plan stays `done` when some of its sessions were published before). */
  rollback?: { at: string; execution?: string; reason?: string; warnings: string[] };
  createdAt: string;
  updatedAt: string;
}

export interface StreamOptions {
  /** Bytes per second asked of the source (the node caps it too). 0 = the node's cap. */
  rateBytesPerSec?: number;
  /** Bytes per import request. @default 1 MiB */
  batchBytes?: number;
  /** Return (done: false) after this long, for step drivers with time limits. */
  maxMs?: number;
  signal?: AbortSignal;
}

export type { StepFence } from './migration-rollback.js';

export interface RunOptions extends StreamOptions {
  /** How long a source keeps a published span before cleanup may drop it. @default 60000 */
  graceMs?: number;
}

export type MigrationEvent =
  | { type: 'planned' | 'prepared' | 'streamed' | 'published' | 'cleaned' | 'rolled-back'; session: MigrationSession; at: number }
  | { type: 'progress'; session: MigrationSession; at: number }
  | { type: 'finished'; plan: MigrationPlan; at: number };

export interface MigratorOptions {
  ring: RingStore;
  /** Where sessions and plans live (the same store as the ring is fine). */
  docs: CasStore;
  client: NodeClient;
  /** For scale-in's final termination. */
  fleet?: FleetProvider;
  onEvent?: (e: MigrationEvent) => void;
  /** Reports failed best-effort ring pushes (to nodes not involved in a step). */
  onWarning?: (message: string) => void;
  now?: () => number;
}

export class MigrationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

const MiB = 1024 * 1024;
const CHECKPOINT_MS = 500;

function newId(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

export class Migrator {
  readonly sessions: JsonDocStore<MigrationSession>;
  readonly plans: JsonDocStore<MigrationPlan>;
  private readonly ring: RingStore;
  private readonly client: NodeClient;
  private readonly now: () => number;

  constructor(private readonly opts: MigratorOptions) {
    this.ring = opts.ring;
    this.client = opts.client;
    this.sessions = new JsonDocStore(opts.docs, 'migrations/sessions/');
    this.plans = new JsonDocStore(opts.docs, 'migrations/plans/');
    this.now = opts.now ?? Date.now;
  }

  // ------------------------------------------------------------------ planning

  /**
   * Plans a scale-out to `target` (added to the ring as JOINING if new): one session per source node, moving
   * the lower part of the source's fullest range, cut at its median key hash (quantile `cut`, default 0.5).
   */
  async planScaleOut(o: {
    target: { id: string; url: string; instance?: string; az?: string };
    mode: MigrationMode;
    sources?: string[];
    cut?: number;
    /** The workflow execution planning it: only its steps may act on the plan. */
    execution?: string;
  }): Promise<MigrationPlan> {
    const doc = await this.ring.update((d) => {
      if (d.nodes.some((n) => n.id === o.target.id)) return false;
      addNode(d, { ...o.target, state: 'JOINING' });
    });
    await this.push(doc, [o.target.id]);
    const sources = o.sources ?? doc.nodes.filter((n) => n.id !== o.target.id && n.state === 'NORMAL').map((n) => n.id);
    const planId = newId('p-');
    const sessions: MigrationSession[] = [];
    for (const source of sources) {
      const url = requireNode(doc, source).url;
      const owned = rangesOfNode(doc, source).owned.filter((r) => !r.pending);
      let best: { span: RangeSpan; keys: number; bytes: number; cut: string | null } | undefined;
      for (const r of owned) {
        const s = await this.client.rangeStats(url, r.start, r.end, o.cut ?? 0.5);
        if (!best || s.keys > best.keys) best = { span: { start: r.start, end: r.end }, ...s };
      }
      if (!best?.cut) continue; // nothing worth moving from this source
      const lower = await this.client.rangeStats(url, best.span.start, best.cut);
      sessions.push(
        this.newSession(planId, sessions.length, source, o.target.id, { start: best.span.start, end: best.cut }, lower),
      );
    }
    return this.createPlan(planId, 'scale-out', o.mode, o.target.id, sessions, o.execution);
  }

  /** Plans draining `node`: each of its ranges goes to its successor (the next range's owner clockwise that is not leaving). */
  async planScaleIn(o: { node: string; mode: MigrationMode; execution?: string }): Promise<MigrationPlan> {
    const doc = await this.ring.update((d) => {
      const n = requireNode(d, o.node);
      if (n.state === 'LEAVING') return false;
      setNodeState(d, o.node, 'LEAVING');
    });
    await this.push(doc, [o.node]);
    const url = requireNode(doc, o.node).url;
    const planId = newId('p-');
    const sessions: MigrationSession[] = [];
    doc.ranges.forEach((r, i) => {
      if (r.owner !== o.node || r.pending) return;
      let j = (i + 1) % doc.ranges.length;
      while (
        j !== i &&
        (doc.ranges[j]!.owner === o.node || doc.nodes.find((n) => n.id === doc.ranges[j]!.owner)?.state === 'LEAVING')
      )
        j = (j + 1) % doc.ranges.length;
      if (j === i) throw new MigrationError(`node '${o.node}' is the only node left: nowhere to drain it to`);
      sessions.push(
        this.newSession(planId, sessions.length, o.node, doc.ranges[j]!.owner, spanOf(doc, i), { keys: 0, bytes: 0 }),
      );
    });
    for (const s of sessions)
      s.planned = await this.client.rangeStats(url, s.span.start, s.span.end).then(({ keys, bytes }) => ({ keys, bytes }));
    return this.createPlan(planId, 'scale-in', o.mode, o.node, sessions, o.execution);
  }

  /**
   * Plans handing every range of `from` over to a new node (a rolling upgrade replaces nodes this way): see
   * {@link planHandOff}. {@link finish} then removes `from` from the ring; {@link rollbackPlan} settles both nodes.
   */
  async planHandOff(o: HandOffRequest): Promise<MigrationPlan> {
    return planHandOff(this.handOffDeps(), o);
  }

  private newSession(
    plan: string,
    i: number,
    source: string,
    target: string,
    span: RangeSpan,
    planned: { keys: number; bytes: number },
  ): MigrationSession {
    const at = new Date(this.now()).toISOString();
    return {
      id: `${plan}-s${i}`,
      plan,
      source,
      target,
      span,
      state: 'planned',
      cursor: null,
      copied: { keys: 0, bytes: 0, applied: 0, stale: 0 },
      createdAt: at,
      updatedAt: at,
      planned,
    };
  }

  private async createPlan(
    id: string,
    kind: MigrationPlan['kind'],
    mode: MigrationMode,
    node: string,
    sessions: MigrationSession[],
    execution?: string,
    target?: string,
  ): Promise<MigrationPlan> {
    for (const s of sessions) {
      await this.sessions.create(s.id, s);
      this.emit({ type: 'planned', session: s, at: this.now() });
    }
    const at = new Date(this.now()).toISOString();
    return this.plans.create(id, {
      id,
      kind,
      mode,
      node,
      sessions: sessions.map((s) => s.id),
      state: 'running',
      ...(target ? { target } : {}),
      ...(execution ? { execution } : {}),
      createdAt: at,
      updatedAt: at,
    });
  }

  // ------------------------------------------------------------------ steps

  /**
   * Marks the session's span pending to its target (after clearing any stale copy the target holds). Refused
   * (`RingPreconditionError`) once the plan or the session is rolled back, or for a step of another execution.
   */
  async prepare(sessionId: string, fence: StepFence = {}): Promise<MigrationSession> {
    const s = await this.session(sessionId);
    await this.checkLive(s, fence, 'prepare');
    if (s.state !== 'planned' && s.state !== 'prepared') return s;
    const before = await this.ring.load();
    const targetUrl = requireNode(before!, s.target).url;
    if (s.state === 'planned') {
      // A clean slate: a copy left by an earlier, abandoned attempt could hold keys the source has since dropped.
      await this.client.deleteRange(targetUrl, s.span.start, s.span.end).catch((e: unknown) => {
        if (!(e instanceof NodeRequestError && e.status === 409)) throw e;
      });
    }
    const doc = await fencedRingUpdate(
      this.ring,
      () => this.checkLive(s.id, fence, 'prepare'),
      (d, next) => {
        splitAt(d, s.span.start);
        if (s.span.end !== null) splitAt(d, s.span.end);
        let changed = false;
        for (const i of rangesIn(d, s.span)) {
          const r = d.ranges[i]!;
          if (r.pending?.session === s.id) continue;
          if (r.owner !== s.source)
            throw new RingPreconditionError(`range ${r.start} is owned by '${r.owner}', not '${s.source}'`);
          if (r.pending) throw new RingPreconditionError(`range ${r.start} is already pending to '${r.pending.target}'`);
          r.pending = { target: s.target, session: s.id };
          r.epoch = next;
          changed = true;
        }
        return changed;
      },
    );
    // The target first (it must take shadow writes before anyone sends them), then the source (from then on it
    // refuses writers that do not shadow). Both must acknowledge: the stream starts after them.
    await this.push(doc, [s.target, s.source]);
    if (s.state === 'planned') {
      const at = new Date(this.now()).toISOString();
      const updated = await this.sessions.update(s.id, (cur) => {
        checkSessionLive(cur, 'prepare');
        return cur.state === 'planned' ? { ...cur, state: 'prepared', preparedAt: at, updatedAt: at } : undefined;
      });
      this.emit({ type: 'prepared', session: updated, at: this.now() });
      return updated;
    }
    return s;
  }

  /**
   * Copies the span from source to target, resuming after the persisted cursor. Resolves `done: true` when the
   * span is fully copied (state `streamed`), `done: false` when `maxMs` ran out. A broken stream throws after
   * persisting how far it got; calling again resumes.
   */
  async stream(sessionId: string, o: StreamOptions & StepFence = {}): Promise<{ done: boolean; session: MigrationSession }> {
    let s = await this.session(sessionId);
    await this.checkLive(s, o, 'stream');
    if (s.state === 'streamed' || s.state === 'published' || s.state === 'cleaned') return { done: true, session: s };
    if (s.state !== 'prepared') throw new MigrationError(`session ${s.id} is ${s.state}, not prepared`);
    const doc = (await this.ring.load())!;
    const sourceUrl = requireNode(doc, s.source).url;
    const targetUrl = requireNode(doc, s.target).url;
    const batchBytes = o.batchBytes ?? MiB;
    const started = this.now();
    let cursor = s.cursor;
    const copied = { ...s.copied };
    let lastCheckpoint = this.now();
    let outOfTime = false;

    const checkpoint = async (state?: SessionState) => {
      const at = new Date(this.now()).toISOString();
      // A rolled-back plan's stream stops at its next checkpoint (and never records progress over the rollback).
      await this.assertLive(s.plan, o, 'stream');
      s = await this.sessions.update(s.id, (cur) => {
        checkSessionLive(cur, 'stream');
        return { ...cur, cursor, copied: { ...copied }, updatedAt: at, ...(state ? { state, streamedAt: at } : {}) };
      });
      lastCheckpoint = this.now();
      this.emit({ type: state === 'streamed' ? 'streamed' : 'progress', session: s, at: this.now() });
    };

    let batch: Buffer[] = [];
    let batchSize = 0;
    let batchLast: { ns: string; key: string } | undefined;
    const flush = async () => {
      if (batch.length === 0) return;
      const res = await this.client.importRecords(targetUrl, batch);
      if (res.full > 0) throw new MigrationError(`target '${s.target}' is full (${res.full} entries refused)`);
      copied.keys += batch.length;
      copied.bytes += batchSize;
      copied.applied += res.applied;
      copied.stale += res.stale;
      cursor = storeKey(batchLast!.ns, batchLast!.key).toString('hex');
      batch = [];
      batchSize = 0;
      if (this.now() - lastCheckpoint >= CHECKPOINT_MS) await checkpoint();
    };

    try {
      // Records go from the export to the import as they are (no decoding and re-encoding of entries).
      const it = this.client.exportRangeRaw(sourceUrl, {
        start: s.span.start,
        end: s.span.end,
        after: cursor,
        ...(o.rateBytesPerSec ? { rate: o.rateBytesPerSec } : {}),
        ...(o.signal ? { signal: o.signal } : {}),
      });
      try {
        let r = await it.next();
        while (!r.done) {
          batch.push(r.value.raw);
          batchSize += r.value.raw.length;
          batchLast = r.value;
          if (batchSize >= batchBytes) await flush();
          if (o.maxMs !== undefined && this.now() - started >= o.maxMs) {
            outOfTime = true;
            break;
          }
          r = await it.next();
        }
      } finally {
        await it.return(undefined as never).catch(() => undefined); // closes the export stream when we stop early
      }
      await flush();
      if (outOfTime) {
        await checkpoint();
        return { done: false, session: s };
      }
      await checkpoint('streamed');
      return { done: true, session: s };
    } catch (e) {
      // Keep what the target has acknowledged; the next call resumes there.
      await checkpoint().catch(() => undefined);
      throw e;
    }
  }

  /**
   * Hands the sessions' spans over to their targets (one session in incremental mode, all of them in parallel
   * mode), in two ring CASes, each pushed to the targets and then the sources before the next:
   * 1. handoff: reads move to the target while writes still reach both nodes, so a reader still routing by the
   *    previous version (to the source) and one routing by this one (to the target) both see every
   *    acknowledged write;
   * 2. flip: the target owns the span; the source, which refuses callers of older versions since step 1,
   *    takes no more writes for it.
   * `targetState` is the joining node's state afterwards (default: PARTIAL when it was JOINING).
   */
  async publish(
    sessionIds: string[],
    o: { graceMs?: number; targetState?: NodeState } & StepFence = {},
  ): Promise<MigrationSession[]> {
    const sessions = await Promise.all(sessionIds.map((id) => this.session(id)));
    // Both ring edits land only while no session's plan is rolled back (checked inside each compare-and-set).
    const live = async () => {
      for (const s of sessions) await this.checkLive(s.id, o, 'publish');
    };
    await live();
    for (const s of sessions) {
      if (s.state !== 'streamed' && s.state !== 'published' && s.state !== 'cleaned')
        throw new MigrationError(`session ${s.id} is ${s.state}: stream it before publishing`);
    }
    const todo = sessions.filter((s) => s.state === 'streamed');
    const order = [...new Set(todo.map((s) => s.target)), ...new Set(todo.map((s) => s.source))];
    const handoff = await fencedRingUpdate(this.ring, live, (d, next) => {
      let changed = false;
      for (const s of todo) {
        for (const i of rangesIn(d, s.span)) {
          const r = d.ranges[i]!;
          if (r.owner === s.target && !r.pending) continue; // already flipped
          if (r.pending?.session !== s.id) throw new RingPreconditionError(`range ${r.start} is not pending for session ${s.id}`);
          if (r.pending.phase === 'handoff') continue;
          r.pending.phase = 'handoff';
          r.epoch = next;
          changed = true;
        }
      }
      return changed;
    });
    await this.push(handoff, order);
    const doc = await fencedRingUpdate(this.ring, live, (d, next) => {
      let changed = false;
      for (const s of todo) {
        for (const i of rangesIn(d, s.span)) {
          const r = d.ranges[i]!;
          if (r.owner === s.target && !r.pending) continue;
          if (r.pending?.session !== s.id) throw new RingPreconditionError(`range ${r.start} is not pending for session ${s.id}`);
          r.owner = s.target;
          delete r.pending;
          r.epoch = next;
          changed = true;
        }
        const t = requireNode(d, s.target);
        const state = o.targetState ?? (t.state === 'JOINING' ? 'PARTIAL' : t.state);
        if (t.state !== state) {
          t.state = state;
          changed = true;
        }
      }
      return changed;
    });
    await this.push(doc, order);
    const at = new Date(this.now()).toISOString();
    const out: MigrationSession[] = [];
    for (const s of sessions) {
      if (s.state !== 'streamed') {
        out.push(s);
        continue;
      }
      const u = await this.sessions.update(s.id, (cur) =>
        cur.state === 'streamed'
          ? { ...cur, state: 'published', publishedAt: at, cleanAfter: this.now() + (o.graceMs ?? 60_000), updatedAt: at }
          : undefined,
      );
      this.emit({ type: 'published', session: u, at: this.now() });
      out.push(u);
    }
    return out;
  }

  /** After the grace period (or with `force`), the source drops the published span. */
  async cleanup(sessionId: string, o: { force?: boolean } & StepFence = {}): Promise<MigrationSession> {
    const s = await this.session(sessionId);
    await this.checkLive(s, o, 'cleanup');
    if (s.state === 'cleaned') return s;
    if (s.state !== 'published') throw new MigrationError(`session ${s.id} is ${s.state}, not published`);
    if (!o.force && this.now() < (s.cleanAfter ?? 0))
      throw new MigrationError(`session ${s.id}: grace period runs until ${new Date(s.cleanAfter!).toISOString()}`);
    const doc = (await this.ring.load())!;
    const source = doc.nodes.find((n) => n.id === s.source);
    if (source) await this.client.deleteRange(source.url, s.span.start, s.span.end);
    const at = new Date(this.now()).toISOString();
    const u = await this.sessions.update(s.id, (cur) => ({ ...cur, state: 'cleaned', updatedAt: at }));
    this.emit({ type: 'cleaned', session: u, at: this.now() });
    return u;
  }

  /** Cleans every published session of a plan whose grace period is over. */
  async cleanupDue(planId: string): Promise<number> {
    const plan = await this.plan(planId);
    let n = 0;
    for (const id of plan.sessions) {
      const s = await this.session(id);
      if (s.state === 'published' && this.now() >= (s.cleanAfter ?? 0)) {
        await this.cleanup(id);
        n++;
      }
    }
    return n;
  }

  /**
   * Undoes a session that is not published: marks it rolled back (its steps refuse from then on), releases the
   * pending mark (the source never stopped owning the span) and drops the target's partial copy. Neither node
   * needs to be reachable: a target that cannot be reached keeps its copy (the next prepare of that span onto it
   * clears it first), a source that cannot be reached learns the ring from the store or its next caller.
   */
  async rollback(sessionId: string): Promise<MigrationSession> {
    return rollbackSession(this.rollbackDeps(), sessionId);
  }

  // ------------------------------------------------------------------ drivers

  /**
   * Runs (or resumes) a plan to the end: incremental = one session at a time, each published when streamed;
   * parallel = all prepared, streamed concurrently, published together. Sessions already past a step skip it.
   * Then {@link finish}. A failure throws with every session's progress persisted: call again to resume, or
   * {@link rollbackPlan}.
   */
  async run(planId: string, o: RunOptions = {}): Promise<MigrationPlan> {
    const plan = await this.plan(planId);
    if (plan.state !== 'running') return plan;
    const last = plan.sessions.length - 1;
    // A node joining (scale-out, hand-off) is PARTIAL from its first range on and NORMAL with its last.
    const joins = plan.kind !== 'scale-in';
    const joinState = (i: number): NodeState | undefined => (joins ? (i === last ? 'NORMAL' : 'PARTIAL') : undefined);
    if (plan.mode === 'incremental') {
      for (const [i, id] of plan.sessions.entries()) {
        const s = await this.session(id);
        if (s.state === 'rolled-back') continue;
        await this.prepare(id);
        await this.streamToEnd(id, o);
        await this.publish([id], { graceMs: o.graceMs, targetState: joinState(i) });
      }
    } else {
      const live = [];
      for (const id of plan.sessions) if ((await this.session(id)).state !== 'rolled-back') live.push(id);
      for (const id of live) await this.prepare(id);
      await Promise.all(live.map((id) => this.streamToEnd(id, o)));
      await this.publish(live, { graceMs: o.graceMs, targetState: joins ? 'NORMAL' : undefined });
    }
    return this.finish(planId, { terminateAfterMs: o.graceMs ?? 60_000 });
  }

  private async streamToEnd(id: string, o: StreamOptions): Promise<void> {
    for (;;) {
      const r = await this.stream(id, o);
      if (r.done) return;
    }
  }

  /**
   * Ends a plan whose sessions are all published (or rolled back): scale-out makes the node NORMAL (if it owns
   * anything) and merges neighbouring ranges; scale-in removes the drained node from the ring and, with a fleet,
   * terminates it after `terminateAfterMs` (run() passes its grace period); a hand-off does the same to the node
   * handed off, and makes the new one NORMAL.
   */
  async finish(planId: string, o: { terminateAfterMs?: number } & StepFence = {}): Promise<MigrationPlan> {
    const plan = await this.plan(planId);
    if (plan.state === 'done' && !plan.rollback) return plan;
    checkPlanLive(plan, o, 'finish');
    const sessions = await Promise.all(plan.sessions.map((id) => this.session(id)));
    const open = sessions.filter((s) => s.state !== 'published' && s.state !== 'cleaned' && s.state !== 'rolled-back');
    if (open.length)
      throw new MigrationError(`plan ${planId}: sessions not finished: ${open.map((s) => `${s.id} (${s.state})`).join(', ')}`);
    const doc = await fencedRingUpdate(
      this.ring,
      () => this.assertLive(planId, o, 'finish').then(() => undefined),
      (d) => {
        const before = JSON.stringify([d.nodes, d.ranges]);
        if (plan.kind === 'scale-out') {
          const owns = d.ranges.some((r) => r.owner === plan.node);
          const n = d.nodes.find((x) => x.id === plan.node);
          if (n && owns) n.state = 'NORMAL';
        } else if (plan.kind === 'hand-off') {
          finishHandOffEdit(d, plan);
        } else {
          if (d.ranges.some((r) => r.owner === plan.node || r.pending?.target === plan.node))
            throw new RingPreconditionError(`node '${plan.node}' still owns ranges`);
          if (d.nodes.some((x) => x.id === plan.node)) removeNode(d, plan.node);
        }
        coalesce(d);
        return JSON.stringify([d.nodes, d.ranges]) !== before;
      },
    );
    await this.push(doc, []);
    if (plan.kind !== 'scale-out' && this.opts.fleet) {
      // Callers that have not yet seen the ring without the node may still send it a request or two: give them
      // the grace period to refresh before the node (and its volume) goes away.
      if (o.terminateAfterMs) await new Promise((r) => setTimeout(r, o.terminateAfterMs));
      await this.opts.fleet.terminate(plan.node);
    }
    const at = new Date(this.now()).toISOString();
    const done = await this.plans.update(planId, (cur) => {
      if (cur.state === 'done' && !cur.rollback) return undefined;
      checkPlanLive(cur, o, 'finish');
      return { ...cur, state: 'done', updatedAt: at };
    });
    this.emit({ type: 'finished', plan: done, at: this.now() });
    return done;
  }

  /**
   * Rolls back every session of the plan that is not published (published spans stay with their new owner) and
   * fences the plan: from the start of the rollback no step of its sessions acts. Needs none of the nodes to be
   * reachable (see migration-rollback.ts). `execution` and `reason`: who rolled it back and why, for the record
   * and for the errors of the steps it refuses.
   */
  async rollbackPlan(planId: string, o: { execution?: string; reason?: string } = {}): Promise<MigrationPlan> {
    await this.plan(planId);
    const plan = await rollbackPlan(this.rollbackDeps(), planId, o);
    // The rollback settles the nodes of scale-outs and scale-ins; a hand-off's two nodes are settled here.
    if (plan.kind === 'hand-off' && plan.rollback) await settleRolledBackHandOff(this.handOffDeps(), plan);
    return plan;
  }

  // ------------------------------------------------------------------ helpers

  async session(id: string): Promise<MigrationSession> {
    const s = await this.sessions.get(id);
    if (!s) throw new MigrationError(`no migration session '${id}'`);
    return s;
  }

  async plan(id: string): Promise<MigrationPlan> {
    const p = await this.plans.get(id);
    if (!p) throw new MigrationError(`no migration plan '${id}'`);
    return p;
  }

  /**
   * The plan, read now, if a step of it may act: throws `RingPreconditionError` (permanent) once it is rolled back
   * or when `fence` names another execution than the one that planned it.
   */
  async assertLive(planId: string, fence: StepFence = {}, what = 'step'): Promise<MigrationPlan> {
    const plan = await this.plan(planId);
    checkPlanLive(plan, fence, what);
    return plan;
  }

  /** Throws when a step of the session (read now when given by id) must not act: it or its plan is rolled back. */
  private async checkLive(session: MigrationSession | string, fence: StepFence, what: string): Promise<void> {
    const s = typeof session === 'string' ? await this.session(session) : session;
    checkSessionLive(s, what);
    await this.assertLive(s.plan, fence, what);
  }

  private handOffDeps(): HandOffDeps {
    return {
      ring: this.ring,
      client: this.client,
      push: (doc, first, o) => this.push(doc, first, o),
      newPlanId: () => newId('p-'),
      newSession: (...a) => this.newSession(...a),
      createPlan: (...a) => this.createPlan(...a),
      warn: (m) => this.opts.onWarning?.(m),
    };
  }

  private rollbackDeps(): RollbackDeps {
    return {
      ring: this.ring,
      sessions: this.sessions,
      plans: this.plans,
      client: this.client,
      push: (doc, first, o) => this.push(doc, first, o),
      emit: (e) => this.emit(e),
      now: this.now,
      warn: (m) => this.opts.onWarning?.(m),
    };
  }

  /**
   * Pushes a ring version to nodes: the `first` ones in order, each of which must acknowledge (they act on it
   * next), then every other node in parallel, best effort (a node that misses it is brought up to date by the
   * first caller it refuses).
   */
  async push(
    doc: RingDocument,
    first: string[],
    o: { required?: string[]; warn?: (message: string) => void } = {},
  ): Promise<void> {
    const required = new Set(o.required ?? first);
    const warn = o.warn ?? ((m: string) => this.opts.onWarning?.(m));
    const byId = new Map(doc.nodes.map((n) => [n.id, n]));
    const done = new Set<string>();
    for (const id of first) {
      if (done.has(id)) continue;
      done.add(id);
      const n = byId.get(id);
      if (!n) continue;
      try {
        await this.client.pushRing(n.url, doc);
      } catch (e) {
        if (required.has(id))
          throw new MigrationError(
            `node '${id}' did not take ring version ${doc.version}: ${e instanceof Error ? e.message : String(e)}`,
            { cause: e },
          );
        warn(`ring version ${doc.version} not pushed to '${id}': ${String(e)}`);
      }
    }
    await Promise.all(
      doc.nodes
        .filter((n) => !done.has(n.id))
        .map((n) =>
          this.client
            .pushRing(n.url, doc)
            .catch((e: unknown) => warn(`ring version ${doc.version} not pushed to '${n.id}': ${String(e)}`)),
        ),
    );
  }

  private emit(e: MigrationEvent): void {
    this.opts.onEvent?.(e);
  }
}
