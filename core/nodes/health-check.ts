// The failure detector of cache nodes: suspicion from the coordinators' call outcomes, confirmation by probes, and a
// DOWN mark written into the ring by compare-and-set, with caps so that a broken checker cannot take the fleet down.
import { markDown, type NodeState, type RingDocument, type RingNode } from '../ring/document.js';
import type { RingStore } from '../ring/store.js';
import type { LogLevel } from '../util/logger.js';
import type { HealthControls } from './health-controls.js';
import { probeAnswer, type BatchNodeProbe, type NodeProbe, type ProbeAnswer, type ProbeResult } from './health-probe.js';
import {
  MARKED_HISTORY,
  parseSnapshot,
  type HoldReason,
  type MarkedDown,
  type NodeHealthCheckerSnapshot,
  type TrackSnapshot,
} from './health-snapshot.js';

export interface NodeHealthCheckerOptions {
  /** The authoritative ring: read at every tick, and where DOWN marks are written (CAS). */
  ring: Pick<RingStore, 'load' | 'update'>;
  /**
   * Checks one node ({@link NodeProbe}), or all of a tick's at once ({@link BatchNodeProbe}). Called only for nodes
   * that are suspect or whose last probe failed (every serving node with {@link probeAll}), all of a tick's at once,
   * so it must bound its own time (a short timeout). A probe that throws counts as `unknown`.
   */
  probe: NodeProbe | BatchNodeProbe;
  /**
   * Probe every serving node at every tick, not only the suspects and the failing ones: for a checker that hears no
   * coordinator (the scheduled evaluator in AWS, where the coordinators' suspicion is not shared) and a probe
   * that costs the same for one node or the fleet (one EC2 call). @default false
   */
  probeAll?: boolean;
  /** Consecutive failed coordinator calls after which a node is suspect (and probed). @default 3 */
  suspectAfterFailures?: number;
  /**
   * How long a node's probes must have failed without a success in between before it is marked DOWN, in ms:
   * damps a node that restarts or stalls for a moment (a marked node serves nothing until it is replaced).
   * @default 5000
   */
  confirmMs?: number;
  /** How many failed probes in a row a marking also needs (one success starts the count over). @default 2 */
  confirmProbes?: number;
  /**
   * At most this many nodes of the ring are DOWN at once, counting those already DOWN in the document: the
   * fleet loses at most this much of its capacity to false positives before an operator looks. @default 1
   */
  maxDown?: number;
  /**
   * No node is marked while more than this fraction of the serving (not DOWN) nodes have failing probes: that
   * many at once is more likely the checker's own network than the nodes. A consequence worth knowing: a fleet
   * of one node is never marked (1 of 1 failing is above any fraction below 1). @default 0.5
   */
  maxSuspectFraction?: number;
  /** Start paused: probe and record, but mark nothing (see {@link NodeHealthChecker.pause}). @default false */
  paused?: boolean;
  /**
   * The operators' switch in the ring store (admin API `strata node replacement pause|resume`), read at each tick
   * that has a marking due: paused there is paused here, and a switch that cannot be read counts as paused.
   * @default none (only {@link paused} and pause() apply)
   */
  controls?: Pick<HealthControls, 'get'>;
  /** Called after each marking by this checker (e.g. to start the ReplaceNode workflow); errors are logged. */
  onMarked?: (marked: MarkedDown) => Promise<void> | void;
  /** Log lines: a warn for each marking and each hold (once per episode), an error for a failed tick. */
  log?: (level: LogLevel, message: string, fields: Record<string, unknown>) => void;
  /** Metrics: `NodeMarkedDown` (1, dims node) per marking; `NodeHealthHeld` (nodes held, dims reason) per held tick. */
  metric?: (name: string, value: number, dims?: Record<string, string>) => void;
  /**
   * The clock, wall-clock epoch ms: it is written into the DOWN record, which readers compare with their own.
   * @default Date.now
   */
  now?: () => number;
}

/** One node as {@link NodeHealthChecker.status} shows it. */
export interface NodeHealthStatus {
  id: string;
  /** Its state in the last ring read (null: reported by coordinators but not in that ring). */
  state: NodeState | null;
  /** Failed coordinator calls since the last success (of a call or a probe). */
  consecutiveFailures: number;
  suspect: boolean;
  /** When a coordinator last reported on it (the `at` of {@link NodeHealthChecker.report}), or null. */
  lastReportAt: number | null;
  /** Failed probes since the last success (an `unknown` neither adds nor resets). */
  probeFailures: number;
  /** Since when (the checker's clock, ms) its probes have failed, or null. */
  failingSinceMs: number | null;
  lastProbe: { at: number; result: ProbeResult } | null;
  lastError: string | null;
}

export interface NodeHealthCheckerStatus {
  paused: boolean;
  /** Why the last tick held a due marking back, or undefined when it held none. */
  held?: HoldReason;
  /** When the current hold episode began (ms), or null. */
  heldSince: number | null;
  /** The version of the last ring read, 0 before the first tick. */
  ringVersion: number;
  /** When the last tick ran (ms), and why it failed if it did. */
  lastTickAt: number | null;
  lastTickError: string | null;
  /** At the last tick: nodes not DOWN, and those of them whose probes are failing (the storm rule's fraction). */
  probing: { serving: number; failing: number };
  nodes: NodeHealthStatus[];
  /** The last {@link MARKED_HISTORY} markings made by this checker, oldest first. */
  marked: MarkedDown[];
}

/** What one tick did. */
export interface TickResult {
  probed: string[];
  marked: string[];
  held?: HoldReason;
}

/** What the checker knows of one node: what a snapshot keeps, and its state in the last ring read. */
interface Track extends TrackSnapshot {
  state: NodeState | null;
}

type MarkOutcome = 'marked' | 'already' | 'gone' | 'cap';

/**
 * Decides when a cache node is DOWN and marks it so in the ring (document.ts {@link markDown}: its ranges are
 * fenced, callers refresh and fail over to the cold tier).
 *
 * - Suspicion: coordinators {@link report} every node call's outcome; `suspectAfterFailures` failures in a row
 *   make the node suspect, a success clears it.
 * - Confirmation: each {@link tick} probes the suspects and the nodes whose last probe failed. A node is marked
 *   DOWN once its probes have failed for `confirmMs` and `confirmProbes` probes in a row; any success (probe or
 *   coordinator call) starts it over, so a flapping node is not marked.
 * - Caps: at most `maxDown` DOWN nodes in the ring, and nothing is marked while more than `maxSuspectFraction`
 *   of the serving nodes fail their probes (the checker's own network, most likely).
 *
 * Several checkers may run against one store: the mark is a CAS that re-checks the node on the fresh document,
 * so a node is marked once. Nothing here is persisted by the checker itself: a restarted checker starts its counts
 * from zero, unless its owner keeps {@link snapshot} and gives it back with {@link restore}.
 */
export class NodeHealthChecker {
  private readonly ring: NodeHealthCheckerOptions['ring'];
  private readonly probe: NodeProbe | BatchNodeProbe;
  private readonly probeAll: boolean;
  private readonly suspectAfter: number;
  private readonly confirmMs: number;
  private readonly confirmProbes: number;
  private readonly maxDown: number;
  private readonly maxFraction: number;
  private readonly log: NonNullable<NodeHealthCheckerOptions['log']>;
  private readonly metric: NonNullable<NodeHealthCheckerOptions['metric']>;
  private readonly now: () => number;
  private readonly tracks = new Map<string, Track>();
  private readonly history: MarkedDown[] = [];
  private isPaused: boolean;
  private readonly controls: NodeHealthCheckerOptions['controls'];
  private readonly onMarked: NodeHealthCheckerOptions['onMarked'];
  private held: HoldReason | undefined = undefined;
  private heldSince: number | null = null;
  private ringVersion = 0;
  private lastTickAt: number | null = null;
  private lastTickError: string | null = null;
  private probing = { serving: 0, failing: 0 };
  private timer: NodeJS.Timeout | undefined = undefined;
  private running: Promise<void> | undefined = undefined;

  constructor(opts: NodeHealthCheckerOptions) {
    this.ring = opts.ring;
    this.probe = opts.probe;
    this.probeAll = opts.probeAll ?? false;
    this.suspectAfter = atLeast('suspectAfterFailures', opts.suspectAfterFailures ?? 3, 1);
    this.confirmMs = atLeast('confirmMs', opts.confirmMs ?? 5000, 0);
    this.confirmProbes = atLeast('confirmProbes', opts.confirmProbes ?? 2, 1);
    this.maxDown = atLeast('maxDown', opts.maxDown ?? 1, 0);
    this.maxFraction = opts.maxSuspectFraction ?? 0.5;
    if (!(this.maxFraction >= 0 && this.maxFraction <= 1)) throw new RangeError('maxSuspectFraction must be within [0, 1]');
    this.isPaused = opts.paused ?? false;
    this.controls = opts.controls;
    this.onMarked = opts.onMarked;
    this.log = opts.log ?? (() => undefined);
    this.metric = opts.metric ?? (() => undefined);
    this.now = opts.now ?? Date.now;
  }

  // ------------------------------------------------------------------ suspicion (the coordinators' hot path)

  /**
   * One node call's outcome, from a coordinator. O(1) and no I/O: it only counts. A failure is an outage of the
   * node (unreachable, timed out, 5xx), not a refusal such as a stale route.
   */
  report(nodeId: string, ok: boolean, at: number = this.now()): void {
    let t = this.tracks.get(nodeId);
    if (ok) {
      // The node just served a call: whatever the probes saw is over.
      if (t) {
        resetStreak(t);
        t.lastReportAt = at;
      }
      return;
    }
    if (!t) {
      t = newTrack(nodeId, null);
      this.tracks.set(nodeId, t);
    }
    t.coordinatorFailures++;
    t.lastReportAt = at;
  }

  /** The nodes coordinators currently suspect (`suspectAfterFailures` failed calls in a row). */
  suspects(): string[] {
    return [...this.tracks.values()].filter((t) => this.isSuspect(t)).map((t) => t.id);
  }

  // ------------------------------------------------------------------ pause

  /** Keep probing and recording, but mark nothing (an operator investigating, a deployment in progress). */
  pause(): void {
    this.isPaused = true;
  }

  resume(): void {
    this.isPaused = false;
  }

  get paused(): boolean {
    return this.isPaused;
  }

  // ------------------------------------------------------------------ confirmation

  /**
   * Reads the ring, probes the nodes that are suspect or failing, and marks those confirmed DOWN unless a rule
   * holds the marking back. Throws only when the ring cannot be read; a failed marking is logged and retried at
   * the next tick.
   */
  async tick(now: number = this.now()): Promise<TickResult> {
    this.lastTickAt = now;
    let doc: RingDocument | undefined;
    try {
      doc = await this.ring.load();
      if (!doc) throw new Error('the ring store holds no document');
      this.lastTickError = null;
    } catch (e) {
      this.lastTickError = messageOf(e);
      throw e;
    }
    this.ringVersion = doc.version;
    const serving = this.sync(doc);

    const due = serving.filter((n) => {
      const t = this.tracks.get(n.id)!;
      return this.probeAll || this.isSuspect(t) || t.probeFailures > 0;
    });
    const answers = await this.probeNodes(due);
    for (const n of due) {
      const t = this.tracks.get(n.id);
      if (t && t.incarnation === incarnationOf(n)) record(t, answers.get(n.id) ?? 'unknown', now);
    }

    const failing = serving.filter((n) => (this.tracks.get(n.id)?.probeFailures ?? 0) > 0).length;
    this.probing = { serving: serving.length, failing };
    const confirmed = serving
      .map((n) => ({ node: n, t: this.tracks.get(n.id)! }))
      .filter(({ t }) => t.probeFailures >= this.confirmProbes && now - t.failingSince! >= this.confirmMs)
      .sort((a, b) => a.t.failingSince! - b.t.failingSince! || a.node.id.localeCompare(b.node.id));

    const marked: string[] = [];
    let held: HoldReason | undefined;
    let heldNodes: string[] = [];
    // A storm: more than the allowed fraction of the serving nodes failing at once. With one serving node, 1 of 1
    // is above any fraction below 1, so a single-node fleet is never marked. Kept so on purpose: the cold tier
    // would serve without it, but with no other node to compare, the checker cannot tell a dead node from its own
    // isolation, and a wrong mark fences the whole warm tier until the node is replaced.
    const storm = serving.length > 0 && failing / serving.length > this.maxFraction;
    const paused = this.isPaused || (confirmed.length > 0 && (await this.pausedByOperators()));
    if (confirmed.length > 0 && paused) [held, heldNodes] = ['paused', confirmed.map((c) => c.node.id)];
    else if (confirmed.length > 0 && storm) [held, heldNodes] = ['storm', confirmed.map((c) => c.node.id)];
    else {
      let down = doc.nodes.filter((n) => n.state === 'DOWN').length;
      for (const { node, t } of confirmed) {
        if (down >= this.maxDown) {
          held = 'cap';
          heldNodes.push(node.id);
          continue;
        }
        const outcome = await this.mark(node, t, now).catch((e: unknown) => {
          this.log('error', 'health check: marking a node DOWN failed', { node: node.id, error: messageOf(e) });
          return undefined;
        });
        if (outcome === 'marked' || outcome === 'already') {
          if (outcome === 'marked') marked.push(node.id);
          down++;
        } else if (outcome === 'cap') {
          held = 'cap';
          heldNodes.push(node.id);
        }
      }
    }
    this.noteHold(held, heldNodes, now, { serving: serving.length, failing });
    return { probed: due.map((n) => n.id), marked, ...(held ? { held } : {}) };
  }

  /** Each node's answer: one probe per node, all at once, or one batch call; a probe that throws is `unknown`. */
  private async probeNodes(nodes: RingNode[]): Promise<ReadonlyMap<string, ProbeAnswer>> {
    const failed = (e: unknown): ProbeAnswer => ({ result: 'unknown', detail: messageOf(e) });
    if (nodes.length === 0) return new Map();
    const probe = this.probe;
    if (typeof probe !== 'function') {
      try {
        return await probe.many(nodes);
      } catch (e) {
        return new Map(nodes.map((n) => [n.id, failed(e)]));
      }
    }
    const answers = await Promise.all(nodes.map((n) => probe(n).catch(failed)));
    return new Map(nodes.map((n, i) => [n.id, answers[i]!]));
  }

  /** Brings the tracks in line with the ring: the serving nodes (fresh for a new incarnation), nothing else. */
  private sync(doc: RingDocument): RingNode[] {
    const serving = doc.nodes.filter((n) => n.state !== 'DOWN');
    const byId = new Map(serving.map((n) => [n.id, n]));
    // A DOWN node's episode is over, a node gone from the ring has none: forget both.
    for (const id of this.tracks.keys()) if (!byId.has(id)) this.tracks.delete(id);
    for (const n of serving) {
      const t = this.tracks.get(n.id);
      const incarnation = incarnationOf(n);
      if (!t) this.tracks.set(n.id, newTrack(n.id, incarnation, n.state));
      else if (t.incarnation !== null && t.incarnation !== incarnation)
        this.tracks.set(n.id, newTrack(n.id, incarnation, n.state));
      else {
        // First seen through a coordinator's report: its counts concern this node.
        t.incarnation = incarnation;
        t.state = n.state;
      }
    }
    return serving;
  }

  /** Marks one node DOWN by CAS, re-checking on the fresh document (gone, replaced, already DOWN, the cap). */
  private async mark(node: RingNode, t: Track, now: number): Promise<MarkOutcome> {
    const secs = ((now - t.failingSince!) / 1000).toFixed(1);
    const coordinator = `${t.coordinatorFailures} coordinator failure${t.coordinatorFailures === 1 ? '' : 's'}`;
    const probes = `${t.probeFailures} failed probe${t.probeFailures === 1 ? '' : 's'} over ${secs} s`;
    const reason = `${coordinator}, ${probes}${t.lastError ? `: ${t.lastError}` : ''}`;
    let outcome = 'gone' as MarkOutcome;
    // Re-run on the freshest document after a lost race: the other writer may have marked this very node.
    const written = await this.ring.update((draft, nextVersion) => {
      outcome = this.markable(draft, node);
      if (outcome !== 'marked') return false;
      markDown(draft, node.id, nextVersion, reason, Math.round(now));
      return true;
    });
    this.ringVersion = Math.max(this.ringVersion, written.version);
    if (outcome === 'cap') return outcome;
    // Marked here or elsewhere, or gone: either way this node's episode is over.
    this.tracks.delete(node.id);
    if (outcome === 'marked') {
      const entry = { node: node.id, at: now, reason, ringVersion: written.version };
      this.history.push(entry);
      if (this.history.length > MARKED_HISTORY) this.history.splice(0, this.history.length - MARKED_HISTORY);
      this.metric('NodeMarkedDown', 1, { node: node.id });
      this.log('warn', `health check: marked cache node ${node.id} DOWN`, { ...entry, url: node.url });
      try {
        await this.onMarked?.(entry);
      } catch (e) {
        this.log('error', `health check: acting on cache node ${node.id} DOWN failed`, { node: node.id, error: messageOf(e) });
      }
    } else {
      this.log('info', `health check: cache node ${node.id} was ${outcome === 'already' ? 'already DOWN' : 'gone'}`, {
        node: node.id,
        ringVersion: written.version,
      });
    }
    return outcome;
  }

  /** Whether `node` may be marked in `draft` ('marked'), or why not. */
  private markable(draft: RingDocument, node: RingNode): MarkOutcome {
    const cur = draft.nodes.find((n) => n.id === node.id);
    // Removed, or replaced under the same id since the probes: those were about another node.
    if (!cur || incarnationOf(cur) !== incarnationOf(node)) return 'gone';
    if (cur.state === 'DOWN') return 'already';
    if (draft.nodes.filter((n) => n.state === 'DOWN').length >= this.maxDown) return 'cap';
    return 'marked';
  }

  /** Records the tick's hold: the metric at every held tick, a log line when an episode begins or ends. */
  private noteHold(
    held: HoldReason | undefined,
    nodes: string[],
    now: number,
    probing: { serving: number; failing: number },
  ): void {
    if (held) this.metric('NodeHealthHeld', nodes.length, { reason: held });
    if (held !== this.held) {
      if (held) {
        const why = {
          paused: 'the checker is paused',
          cap: `${this.maxDown} node(s) may be DOWN at once`,
          storm:
            `${probing.failing} of ${probing.serving} serving nodes fail their probes (above ${this.maxFraction}),` +
            " more likely the checker's own network",
        }[held];
        this.log('warn', `health check: not marking ${nodes.join(', ')} DOWN: ${why}`, { held, nodes, ...probing });
      } else this.log('info', 'health check: markings are no longer held', { was: this.held });
      this.heldSince = held ? now : null;
    }
    this.held = held;
  }

  /** The operators' switch; unreadable counts as paused (no marking on a guess). */
  private async pausedByOperators(): Promise<boolean> {
    if (!this.controls) return false;
    try {
      return (await this.controls.get()).paused;
    } catch (e) {
      this.log('warn', 'health check: the replacement controls could not be read; marking nothing', { error: messageOf(e) });
      return true;
    }
  }

  private isSuspect(t: Track): boolean {
    return t.coordinatorFailures >= this.suspectAfter;
  }

  // ------------------------------------------------------------------ persistence

  /**
   * What to keep until the next run ({@link NodeHealthCheckerSnapshot}): the tracks of the nodes with a streak of
   * failures (sorted by id), the markings made, the hold in progress. Two snapshots of a checker that saw nothing
   * new are equal, so an owner may compare them (as JSON) to skip a write.
   */
  snapshot(): NodeHealthCheckerSnapshot {
    const tracks = [...this.tracks.values()]
      .filter((t) => t.coordinatorFailures > 0 || t.probeFailures > 0)
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((t): TrackSnapshot => ({
        id: t.id,
        incarnation: t.incarnation,
        coordinatorFailures: t.coordinatorFailures,
        lastReportAt: t.lastReportAt,
        probeFailures: t.probeFailures,
        failingSince: t.failingSince,
        lastProbe: t.lastProbe ? { ...t.lastProbe } : null,
        lastError: t.lastError,
      }));
    return {
      format: 1,
      tracks,
      marked: this.history.map((m) => ({ ...m })),
      ...(this.held ? { held: this.held } : {}),
      heldSince: this.heldSince,
    };
  }

  /**
   * Takes back what {@link snapshot} kept, in place of what this checker holds (a fresh checker's nothing). The next
   * {@link tick} reconciles it with the ring: a node gone, DOWN or replaced under its id since is forgotten. A value
   * that is not a snapshot (another format, a damaged document) is refused: returns false and changes nothing, and
   * the checker starts from zero, which delays a marking but never makes one.
   */
  restore(snapshot: unknown): boolean {
    const s = parseSnapshot(snapshot);
    if (!s) return false;
    this.tracks.clear();
    for (const t of s.tracks) this.tracks.set(t.id, { ...t, state: null, lastProbe: t.lastProbe ? { ...t.lastProbe } : null });
    this.history.splice(0, this.history.length, ...s.marked.slice(-MARKED_HISTORY).map((m) => ({ ...m })));
    this.held = s.held;
    this.heldSince = s.heldSince;
    return true;
  }

  // ------------------------------------------------------------------ status and loop

  /** A JSON-able snapshot, for an admin route or a log line. */
  status(): NodeHealthCheckerStatus {
    return {
      paused: this.isPaused,
      ...(this.held ? { held: this.held } : {}),
      heldSince: this.heldSince,
      ringVersion: this.ringVersion,
      lastTickAt: this.lastTickAt,
      lastTickError: this.lastTickError,
      probing: { ...this.probing },
      nodes: [...this.tracks.values()]
        .map((t) => ({
          id: t.id,
          state: t.state,
          consecutiveFailures: t.coordinatorFailures,
          suspect: this.isSuspect(t),
          lastReportAt: t.lastReportAt,
          probeFailures: t.probeFailures,
          failingSinceMs: t.failingSince,
          lastProbe: t.lastProbe ? { ...t.lastProbe } : null,
          lastError: t.lastError,
        }))
        .sort((a, b) => a.id.localeCompare(b.id)),
      marked: this.history.map((m) => ({ ...m })),
    };
  }

  /**
   * Ticks every `intervalMs` in this process (an unref'd timer: it keeps no process alive). A tick still running
   * when the next is due makes that one skip, and a tick that throws is logged; the loop goes on. The probes'
   * timeout should stay well below the interval. No-op when already started.
   */
  start(intervalMs = 1000): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.tick()
        .then(
          () => undefined,
          (e: unknown) => this.log('error', 'health check: tick failed', { error: messageOf(e) }),
        )
        .finally(() => (this.running = undefined));
    }, intervalMs);
    this.timer.unref();
  }

  /** Stops the loop; resolves once a tick in progress has ended. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}

function atLeast(name: string, value: number, min: number): number {
  if (!Number.isFinite(value) || value < min) throw new RangeError(`${name} must be a number >= ${min} (got ${value})`);
  return value;
}

function newTrack(id: string, incarnation: string | null, state: NodeState | null = null): Track {
  return {
    id,
    incarnation,
    state,
    coordinatorFailures: 0,
    lastReportAt: null,
    probeFailures: 0,
    failingSince: null,
    lastProbe: null,
    lastError: null,
  };
}

function resetStreak(t: Track): void {
  t.coordinatorFailures = 0;
  t.probeFailures = 0;
  t.failingSince = null;
  t.lastError = null;
}

function record(t: Track, answer: ProbeAnswer, now: number): void {
  const { result, detail } = probeAnswer(answer);
  t.lastProbe = { at: now, result };
  if (result === 'ok') return resetStreak(t);
  if (result === 'down') {
    t.probeFailures++;
    t.failingSince ??= now;
    t.lastError = detail ?? 'the probe failed';
  } else {
    // No evidence either way (the provider's API failed, an odd answer): the streak neither grows nor ends.
    t.lastError = detail ?? 'the probe could not tell';
  }
}

function incarnationOf(n: RingNode): string {
  return `${n.url}|${n.instance ?? ''}|${n.addedAt}`;
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
