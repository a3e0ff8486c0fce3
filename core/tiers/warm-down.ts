// How the warm tier treats the ranges of a node the ring marks DOWN: no reads, and writes skip them once fenced.
// Also the ranges taken over from one, while older writes may still skip them (ring/takeover.ts).
import { HybridLogicalClock } from '../model/hlc.js';
import { downFenced, leaseOf, type RingNode } from '../ring/document.js';
import { skipDeadlineMs, takeoverFloor, takeoverSettled } from '../ring/takeover.js';
import type { RingRouter, Route } from '../ring/view.js';

/** What a call does with a route: go ahead, or (DOWN) read nothing, skip the node, or fail until it is fenced. */
export type DownVerdict = 'serve' | 'miss' | 'skip' | 'wait';

/**
 * The warm tier's view of DOWN nodes (issue 23's items 2 and 3). A DOWN node's ranges serve no reads: the read
 * misses and the coordinator reads the next tier, which holds every acknowledged write (a write lands in all of a
 * namespace's durable tiers, and a policy whose only durable tier is warm is refused). A write skips a DOWN node
 * only once its lease has surely run out, so that it cannot be serving the value being replaced to a caller that
 * has not seen the mark yet; before that the write fails, as it did while the node was merely unreachable.
 *
 * The lease is counted from when this process first saw the mark (its monotonic clock), or from the mark's own
 * time when that is already a lease (and a second, for clock skew) in the past.
 */
export class DownFence {
  /** When this process first saw each DOWN mark, by `node@at`. */
  private readonly seen = new Map<string, number>();

  constructor(private readonly clock: { mono: () => number; wall: () => number } = DEFAULT_CLOCK) {}

  /** Whether `node` is DOWN and fenced now under `router`'s lease. */
  fenced(router: RingRouter, node: RingNode): boolean {
    if (!node.down) return false;
    const id = `${node.id}@${node.down.at}`;
    const now = this.clock.mono();
    let seenAt = this.seen.get(id);
    if (seenAt === undefined) {
      this.seen.set(id, (seenAt = now));
      if (this.seen.size > 1000) this.seen.delete(this.seen.keys().next().value!);
    }
    return downFenced(router.doc, node, { seenAt, now, wallNow: this.clock.wall() });
  }

  /** A read: `miss` when the node serving it is DOWN. */
  read(route: Route): DownVerdict {
    return route.reader.state === 'DOWN' ? 'miss' : 'serve';
  }

  /**
   * A write: `serve` when neither the owner nor a pending target is DOWN; `skip` when the owner is DOWN and fenced
   * (nothing to write), or when a put of `version` is older than the hand-over of a range taken from a DOWN node
   * (see {@link takenOverUntil}); `wait` when a DOWN node on the route is not fenced yet. A fenced DOWN pending
   * target is left out by {@link shadowTarget}. `version`: what a put writes (absent for a removal or a pin change,
   * which may always reach the owner: holding less never makes a node serve older).
   */
  write(router: RingRouter, route: Route, version?: number): DownVerdict {
    const owner = route.owner.state === 'DOWN';
    const target = route.pending?.state === 'DOWN';
    if (owner && !this.fenced(router, route.owner)) return 'wait';
    if (target && !this.fenced(router, route.pending!)) return 'wait';
    if (owner) return 'skip';
    return this.takenOverUntil(router, route, version) === undefined ? 'serve' : 'skip';
  }

  /**
   * When a put of `version` skips the route's nodes because the range was taken over from a DOWN node and the
   * version is older than the hand-over's floor (ring/takeover.ts): the time by which such a write must have ended
   * (monotonic, this process's clock), else it is not acknowledged. Undefined: it does not skip.
   */
  takenOverUntil(router: RingRouter, route: Route, version: number | undefined): number | undefined {
    const mark = route.range.takenOver;
    if (!mark || version === undefined) return undefined;
    const lease = leaseOf(router.doc);
    const wall = this.clock.wall();
    const settled = takeoverSettled(lease, mark.at);
    if (wall >= settled || HybridLogicalClock.timeOf(version) >= takeoverFloor(lease, mark.at)) return undefined;
    // Ended by T + D on this clock: by the time a fill begins (`settled` on its clock, skew allowed twice), done.
    return this.clock.mono() + (takeoverFloor(lease, mark.at) + skipDeadlineMs(lease) - wall);
  }

  /**
   * Whether writes on `route` need {@link write}'s rules key by key: a DOWN node on it, or a range taken over from
   * one (batches send the other keys without looking).
   */
  special(router: RingRouter, route: Route): boolean {
    if (route.owner.state === 'DOWN' || route.pending?.state === 'DOWN') return true;
    const mark = route.range.takenOver;
    return mark !== undefined && this.clock.wall() < takeoverSettled(leaseOf(router.doc), mark.at);
  }

  /** The pending target to shadow-write to, if any: none when it is DOWN (and fenced: see {@link write}). */
  static shadowTarget(route: Route): RingNode | undefined {
    return route.pending?.state === 'DOWN' ? undefined : route.pending;
  }
}

const DEFAULT_CLOCK = { mono: () => performance.now(), wall: () => Date.now() };
