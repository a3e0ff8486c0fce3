import { leaseOf, parseRingDocument, type RingDocument } from '../../core/ring/document.js';
import { RingRouter } from '../../core/ring/view.js';
import type { NodeStore } from './store.js';

export type Role = 'owner' | 'target';

export interface Refusal {
  /** `fenced`: the node may serve nothing now (marked DOWN, or its lease on the ring ran out): answered with 503. */
  reason: 'no-ring' | 'stale-ring' | 'not-owner' | 'fenced';
  message: string;
}

/** The start of the node's last successful read of the ring store, on both clocks (ms). */
interface Confirmation {
  mono: number;
  wall: number;
}

const SYS_RING = 'ring';

/**
 * The node's cached ring and the ownership rule every key request passes:
 * - the caller's ring version must not be older than the epoch of the key's range (otherwise its route may
 *   lack a shadow target or point at a former owner);
 * - reads are served by the range's reader (the owner, or the pending target in the handoff phase); writes by
 *   the owner and by the pending target (shadow writes).
 * The ring is persisted in the node's store so a restarted node keeps refusing what it does not own.
 *
 * Fencing (a node that missed being marked DOWN must not serve what was written elsewhere meanwhile): a node the
 * ring marks DOWN serves nothing, and a node that polls the ring store serves only on a lease: within the ring's
 * `leaseMs` of the start of its last successful read of the store. A paused or partitioned node cannot renew it,
 * so it stops serving by itself; a writer may skip a DOWN node's ranges once that lease has surely run out
 * (`downFenced` in core/ring/document.ts). A restarted node holds no lease until its first read, which shows it
 * whether it was marked DOWN while away. The lease runs on the monotonic clock and the wall clock both, and ends
 * at the first to run out, so neither a suspended VM (the monotonic clock stands still) nor a clock step fools it.
 */
export class Ownership {
  private router: RingRouter | undefined;
  /** Whether the node serves on a lease (it polls a ring store); without one only a DOWN mark fences it. */
  private leased = false;
  private confirmed: Confirmation | undefined;

  constructor(
    readonly nodeId: string,
    private readonly store: NodeStore,
  ) {
    const saved = store.getSys<RingDocument>(SYS_RING);
    if (saved) {
      try {
        this.router = new RingRouter(parseRingDocument(saved));
      } catch {
        this.router = undefined; // an unreadable saved ring: wait for a push
      }
    }
  }

  get version(): number {
    return this.router?.version ?? 0;
  }

  get doc(): RingDocument | undefined {
    return this.router?.doc;
  }

  /**
   * Installs a newer document (persisted first). Returns whether it was newer. Either way the caller should
   * then wait for queued writes to settle before acknowledging, so whoever pushed knows every write accepted
   * under the previous version is durable (a migration's stream starts after that).
   */
  async install(input: unknown): Promise<boolean> {
    const doc = parseRingDocument(input);
    if (this.router && doc.version <= this.router.version) return false;
    await this.store.putSys(SYS_RING, doc);
    if (this.router && doc.version <= this.router.version) return false; // a newer one was installed meanwhile
    this.router = new RingRouter(doc);
    return true;
  }

  /** From now on the node serves only within its lease (see the class comment): it polls a ring store. */
  requireLease(): void {
    this.leased = true;
  }

  /** Records a successful read of the ring store that started at `started` (it renews the lease). */
  confirm(started: Confirmation): void {
    if (!this.confirmed || started.mono > this.confirmed.mono) this.confirmed = started;
  }

  /** Why the node may serve nothing now, or undefined when it may serve. */
  fenced(now: Confirmation = { mono: performance.now(), wall: Date.now() }): string | undefined {
    const r = this.router;
    const self = r?.node(this.nodeId);
    if (self?.state === 'DOWN')
      return `node '${this.nodeId}' was marked DOWN at ring version ${r!.version}: ${self.down?.reason ?? ''}`;
    if (!this.leased) return undefined;
    const c = this.confirmed;
    if (!c) return `node '${this.nodeId}' has not read the ring store since it started; it serves once it has`;
    const lease = r ? leaseOf(r.doc) : 0;
    const age = Math.max(now.mono - c.mono, now.wall - c.wall);
    if (age >= lease) return `node '${this.nodeId}' last read the ring store ${Math.round(age)} ms ago (lease ${lease} ms)`;
    return undefined;
  }

  check(position: string, clientVersion: number, write: boolean): Role | Refusal {
    const r = this.router;
    if (!r) return { reason: 'no-ring', message: 'this node has no ring yet' };
    const fenced = this.fenced();
    if (fenced) return { reason: 'fenced', message: fenced };
    const route = r.route(position);
    if (clientVersion < route.range.epoch) {
      return {
        reason: 'stale-ring',
        message: `range ${route.span.start} changed at ring version ${route.range.epoch}; the request used version ${clientVersion}`,
      };
    }
    if (write) {
      if (route.owner.id === this.nodeId) return 'owner';
      if (route.pending?.id === this.nodeId) return 'target';
    } else if (route.reader.id === this.nodeId) {
      return route.reader === route.owner ? 'owner' : 'target';
    }
    return {
      reason: 'not-owner',
      message: `node '${this.nodeId}' does not ${write ? 'take writes for' : 'serve'} range ${route.span.start} (owner '${route.owner.id}')`,
    };
  }

  /** Whether any part of [start, end) is owned by, or pending to, this node. */
  holdsAny(start: string, end: string | null): boolean {
    const r = this.router;
    if (!r) return false;
    const ranges = r.doc.ranges;
    for (let i = 0; i < ranges.length; i++) {
      const s = ranges[i]!.start;
      const e = ranges[i + 1]?.start ?? null;
      const overlaps = (end === null || s < end) && (e === null || e > start);
      if (overlaps && (ranges[i]!.owner === this.nodeId || ranges[i]!.pending?.target === this.nodeId)) return true;
    }
    return false;
  }

  /** The ranges this node owns and receives (the ownership view). */
  view(): {
    owned: { start: string; end: string | null; epoch: number; pendingTo?: string }[];
    incoming: { start: string; end: string | null; from: string; session: string }[];
  } {
    const r = this.router;
    if (!r) return { owned: [], incoming: [] };
    const owned: { start: string; end: string | null; epoch: number; pendingTo?: string }[] = [];
    const incoming: { start: string; end: string | null; from: string; session: string }[] = [];
    r.doc.ranges.forEach((range, i) => {
      const end = r.doc.ranges[i + 1]?.start ?? null;
      if (range.owner === this.nodeId)
        owned.push({
          start: range.start,
          end,
          epoch: range.epoch,
          ...(range.pending ? { pendingTo: range.pending.target } : {}),
        });
      if (range.pending?.target === this.nodeId)
        incoming.push({ start: range.start, end, from: range.owner, session: range.pending.session });
    });
    return { owned, incoming };
  }
}
