import type { CompiledPolicy } from './compile.js';
import { ruleMode } from './document.js';

/**
 * The scheduled evaluator's clock in AWS. EventBridge schedules fire at most once a minute, so a minute's execution
 * of the ticker (an Express state machine started every minute: invoke the evaluator, wait, invoke again) carries the
 * background timers under a minute: the evaluator answers whether to tick again in this minute, and after how long.
 * A policy without sub-minute timers ticks once a minute (one invocation), which is all its idle cost.
 */

/** The contract of the evaluator Lambda with the ticker state machine (its input, and its output as the next input). */
export interface TickEvent {
  /** When this minute's execution began (ISO); absent on its first invocation. */
  readonly startedAt?: string;
  /** Ticks so far in this execution. */
  readonly ticks?: number;
}

export interface TickResult {
  readonly startedAt: string;
  readonly ticks: number;
  /** Tick again in this execution (a Wait state of `waitSeconds`, then the evaluator again); false: this minute is done. */
  readonly again: boolean;
  /** Seconds to wait before the next tick (1..59). */
  readonly waitSeconds: number;
  /** A queued background job has no runner: start the job runner (without waiting for it) before going on. */
  readonly runJobs?: boolean;
}

/** An execution ticks for at most this long, so that it ends before the next one starts. */
export const TICK_WINDOW_MS = 55_000;

/** The shortest background timer of a policy, in whole seconds (at least 1), or undefined when it has none. */
export function shortestTimerSeconds(policy: CompiledPolicy): number | undefined {
  let shortest: number | undefined;
  for (const r of policy.rules) {
    if (ruleMode(r) !== 'background' || !('timer' in r.on)) continue;
    const s = Math.max(1, Math.ceil(r.on.timer.everySeconds));
    shortest = shortest === undefined ? s : Math.min(shortest, s);
  }
  return shortest;
}

/** What the ticker does after a tick at `now` (ms) of the execution that began at `startedAt` (ms). */
export function nextTick(
  policy: CompiledPolicy,
  startedAt: number,
  now: number,
  flushSeconds?: number,
): Pick<TickResult, 'again' | 'waitSeconds'> {
  // Whole seconds: the state machine's Wait takes an integer (SecondsPath), so a 1.5 s flush interval waits 2 s.
  const flush = flushSeconds === undefined ? undefined : Math.max(1, Math.ceil(flushSeconds));
  const timers = [shortestTimerSeconds(policy), flush].filter((s): s is number => s !== undefined);
  const every = timers.length ? Math.min(...timers) : 60;
  const waitSeconds = Math.min(59, Math.max(1, every));
  return { again: every < 60 && now + waitSeconds * 1000 < startedAt + TICK_WINDOW_MS, waitSeconds };
}
