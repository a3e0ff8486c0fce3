/**
 * The hand-over window of a range taken from a DOWN node (a replacement, or a removal to a neighbour): which writes
 * skip its new owner, and until when: the arithmetic, which the warm tier applies (tiers/warm-down.ts), and the warning
 * when a hand-over was published too late for it.
 *
 * Why a window. A caller that has not read the ring since the hand-over still sees the range's owner DOWN and
 * writes around it, to the tiers below only. A caller that has read it writes to the new owner. If the second
 * wrote v1 to the new owner and the first then wrote v2 around it, the new owner would serve v1 after v2 was
 * acknowledged: nothing the first caller does reaches the new owner, so no node-side check can catch it.
 *
 * The rule that closes it, with `at` the hand-over time, L the ring lease and e the clock skew allowed (1 s):
 * - A caller skips a DOWN owner only on a ring it read from the store within F = 2/3 L, and the skipping write is
 *   acknowledged only if it ends within L of that read (else it fails, 503). A caller that has not seen the
 *   hand-over read the ring before it was published, so it stamps its skipping writes below `at` + (publishing
 *   time) + F + e, and they end by `at` + (publishing time) + L.
 * - The floor T = `at` + L + 2e is above every such stamp (publishing the ring takes well under D = L - F). A write
 *   stamped below T skips the new owner too, and must end by T + D on its caller's clock; one stamped at or above T
 *   goes to it. So the new owner holds no version below T, and every acknowledged version at or above T reached it:
 *   whatever it serves is the newest.
 * - Copies of older versions (the replacement's fill from cold, promotions, write-back flushes) skip it the same
 *   way until every skipping write has ended, at T + D + 2e (`settled`) on any clock: after that the tiers below
 *   hold the newest version of every key, and a copy is a versioned write like any other.
 */

import { log } from '../util/logger.js';

/** The clock skew between callers the window allows for (as the DOWN fence does: document.ts, downFenced). */
export const TAKEOVER_SKEW_MS = 1000;

/** F: how recent a ring read must be for a write to skip a DOWN owner. */
export function skipFreshMs(leaseMs: number): number {
  return Math.round((leaseMs * 2) / 3);
}

/** D: the time a write that skips a node has to end, after F (from its ring read) or after T (takeoverFloor). */
export function skipDeadlineMs(leaseMs: number): number {
  return leaseMs - skipFreshMs(leaseMs);
}

/** T: writes stamped (hybrid logical clock time) below this skip the new owner. */
export function takeoverFloor(leaseMs: number, at: number): number {
  return at + leaseMs + 2 * TAKEOVER_SKEW_MS;
}

/**
 * When the window ends (wall clock, ms): every write that skipped the new owner has ended or failed. Such a write
 * must end by T + D on its caller's clock; `settled` on a later reader's clock is after that whatever their skew.
 */
export function takeoverSettled(leaseMs: number, at: number): number {
  return takeoverFloor(leaseMs, at) + skipDeadlineMs(leaseMs) + 2 * TAKEOVER_SKEW_MS;
}

/** Whether a hand-over mark can be dropped from the ring: a minute past its window, it changes no route. */
export function takeoverSpent(leaseMs: number, at: number, now: number): boolean {
  return now >= takeoverSettled(leaseMs, at) + 60_000;
}

/**
 * How far past its allowance a hand-over marked at `at` was published, when its ring write ended at `publishedAt`
 * (the same clock), or undefined when in time. The window assumes the ring write lands within D + e of `at`: a
 * caller that read the ring just before then stamps its writes around the DOWN node below the floor. Later, such a
 * caller may stamp one above it, which the new owner never sees. Nothing can move the floor once callers use it,
 * so the steps that hand ranges over report it (a warning) for an operator to know.
 */
export function takeoverPublishedLate(leaseMs: number, at: number, publishedAt: number): number | undefined {
  const late = publishedAt - at - (skipDeadlineMs(leaseMs) + TAKEOVER_SKEW_MS);
  return late > 0 ? late : undefined;
}

/**
 * A warning when a hand-over of a DOWN node's ranges (`what`) was published later than its window allows
 * ({@link takeoverPublishedLate}): for about a lease, a read there may then return a version older than an
 * acknowledged write. Both ways of handing ranges over (nodes/node-removal.ts, ReplaceNode's TakeOver) report it.
 */
export function reportLateHandOver(leaseMs: number, at: number, publishedAt: number, what: string): void {
  const late = takeoverPublishedLate(leaseMs, at, publishedAt);
  if (late === undefined) return;
  log.warn(`hand-over published late: ${what}`, {
    publishMs: publishedAt - at,
    lateMs: Math.round(late),
    effect: 'for about a lease, a write that went around the DOWN node may be missing from the node that took its ranges',
  });
}
