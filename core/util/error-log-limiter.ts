import { inspect } from 'node:util';
import { isStrataError } from '../errors.js';
import { log } from './logger.js';

/**
 * Rate-limits logs of repeated failures. A hot loop that fails on every iteration (a background promotion per
 * read while the hot tier is down, a 5xx per request while no tier answers) must not log a stack per failure:
 * a Redis outage once wrote 400,000 lines in 30 s, which costs money in CloudWatch Logs, drowns every other line
 * and slows the process that writes them.
 *
 * Failures are grouped into kinds: what failed (`what`, e.g. `promotion`) plus the shape of the error (name,
 * code, message with numbers and ids blanked, and the same of its cause). The first occurrence of a kind is
 * written whole, with its stack; later ones are counted, and a kind with a count writes at most one summary
 * line per interval ("background promotion failed 12,345 times in the last 10 s: TierUnavailableError tier 'hot'
 * is unavailable"). Memory is bounded: at most `maxKinds` kinds are kept (the least recently seen is dropped,
 * its count written first), and at most `maxNewKindsPerInterval` first occurrences are written whole per
 * interval; past that, new kinds are counted under one "other errors" kind per `what`, so errors whose messages
 * are all different (a key in each message) cannot turn the limiter back into a flood.
 */

export interface ErrorLogEntry {
  /** `first`: the first occurrence of its kind (write it whole, with the stack); `repeated`: a count of later ones. */
  type: 'first' | 'repeated';
  /** What failed, as reported (`promotion`, `write-back flush`, ...). */
  what: string;
  /** One line naming the error: "TierUnavailableError tier 'hot' is unavailable (cause: Error: connect ECONNREFUSED)". */
  summary: string;
  /** The occurrence itself (`first`), or the latest one counted (`repeated`). */
  error: unknown;
  /** The details given with that occurrence (e.g. a request id). */
  details?: Readonly<Record<string, unknown>>;
  /** Occurrences this entry covers: 1 for `first`. */
  count: number;
  /** Milliseconds the counted occurrences span (since the kind's previous line): 0 for `first`. */
  periodMs: number;
  /** Errors of kinds past the limits, counted together per `what`; `summary` names the latest. */
  otherKinds?: boolean;
}

export interface ErrorLogLimiterOptions {
  /** At most one summary line per kind per interval. @default 10000 */
  intervalMs?: number;
  /** Kinds remembered at once. @default 64 */
  maxKinds?: number;
  /** First occurrences written whole (with their stack) per interval, over all kinds. @default 8 */
  maxNewKindsPerInterval?: number;
  /** A kind not seen for this long is forgotten: its next occurrence is written whole again. @default 10 intervals */
  forgetAfterMs?: number;
  /** Where entries go. @default one text line per entry (the first with its stack) on stderr: {@link formatErrorLogEntry} */
  write?: (entry: ErrorLogEntry) => void;
  /** @default Date.now */
  now?: () => number;
  /**
   * Runs `fn` after `ms`, so counts are written when failures stop rather than at the next failure. @default an
   * unref'd setTimeout; `null`: no timer (the counts wait for the next report of their kind, or {@link flush}).
   */
  schedule?: ((fn: () => void, ms: number) => void) | null;
}

interface Kind {
  what: string;
  otherKinds: boolean;
  /** Occurrences not yet written. */
  count: number;
  /** When the kind's last line was written (the start of the current count). */
  since: number;
  lastSeen: number;
  latest: unknown;
  latestDetails?: Readonly<Record<string, unknown>>;
}

export class ErrorLogLimiter {
  private readonly intervalMs: number;
  private readonly maxKinds: number;
  private readonly maxNew: number;
  private readonly forgetAfterMs: number;
  private readonly write: (entry: ErrorLogEntry) => void;
  private readonly now: () => number;
  private readonly schedule: ((fn: () => void, ms: number) => void) | null;
  /** In least-recently-seen order (a kind is moved to the end when seen). */
  private readonly kinds = new Map<string, Kind>();
  private newKindsWindow = Number.NEGATIVE_INFINITY;
  private newKindsWritten = 0;
  private timerArmed = false;

  constructor(opts: ErrorLogLimiterOptions = {}) {
    this.intervalMs = Math.max(1, opts.intervalMs ?? 10_000);
    this.maxKinds = Math.max(1, opts.maxKinds ?? 64);
    this.maxNew = Math.max(1, opts.maxNewKindsPerInterval ?? 8);
    this.forgetAfterMs = Math.max(this.intervalMs, opts.forgetAfterMs ?? 10 * this.intervalMs);
    this.write = opts.write ?? ((entry) => log.error(formatErrorLogEntry(entry)));
    this.now = opts.now ?? Date.now;
    this.schedule =
      opts.schedule === undefined
        ? (fn, ms) => {
            setTimeout(fn, ms).unref();
          }
        : opts.schedule;
  }

  /** Records one failure of `what`: written now when its kind is new, else counted for a later summary line. */
  report(error: unknown, what: string, details?: Readonly<Record<string, unknown>>): void {
    const now = this.now();
    let id = `${what}\u0000${errorShape(error)}`;
    let kind = this.live(id, now);
    if (!kind) {
      if (now - this.newKindsWindow >= this.intervalMs) {
        this.newKindsWindow = now;
        this.newKindsWritten = 0;
      }
      if (this.newKindsWritten < this.maxNew) {
        this.newKindsWritten++;
        this.remember(
          id,
          { what, otherKinds: false, count: 0, since: now, lastSeen: now, latest: error, latestDetails: details },
          now,
        );
        this.emit({
          type: 'first',
          what,
          summary: errorSummary(error),
          error,
          ...(details ? { details } : {}),
          count: 1,
          periodMs: 0,
        });
        return;
      }
      // Too many new kinds this interval: count it with the other unusual errors of `what`.
      id = `${what}\u0000*`;
      kind =
        this.live(id, now) ??
        this.remember(id, { what, otherKinds: true, count: 0, since: now, lastSeen: now, latest: error }, now);
    }
    kind.count++;
    kind.lastSeen = now;
    kind.latest = error;
    kind.latestDetails = details;
    this.touch(id, kind);
    if (now - kind.since >= this.intervalMs) this.summarise(kind, now);
    else this.arm(kind.since + this.intervalMs - now);
  }

  /** Writes every pending count now (at shutdown, or from tests). */
  flush(): void {
    const now = this.now();
    for (const kind of this.kinds.values()) if (kind.count > 0) this.summarise(kind, now);
  }

  /** Kinds currently remembered (for tests and stats). */
  get size(): number {
    return this.kinds.size;
  }

  /** The kind remembered under `id`, unless it was idle past `forgetAfterMs` (then it is dropped). */
  private live(id: string, now: number): Kind | undefined {
    const kind = this.kinds.get(id);
    if (!kind || now - kind.lastSeen <= this.forgetAfterMs) return kind;
    this.drop(id, kind, now);
    return undefined;
  }

  private remember(id: string, kind: Kind, now: number): Kind {
    while (this.kinds.size >= this.maxKinds) {
      const [oldId, old] = this.kinds.entries().next().value!;
      this.drop(oldId, old, now);
    }
    this.kinds.set(id, kind);
    return kind;
  }

  private drop(id: string, kind: Kind, now: number): void {
    if (kind.count > 0) this.summarise(kind, now);
    this.kinds.delete(id);
  }

  /** Moves a kind to the end of the map's order, so the front is always the least recently seen one. */
  private touch(id: string, kind: Kind): void {
    this.kinds.delete(id);
    this.kinds.set(id, kind);
  }

  private summarise(kind: Kind, now: number): void {
    const entry: ErrorLogEntry = {
      type: 'repeated',
      what: kind.what,
      summary: errorSummary(kind.latest),
      error: kind.latest,
      ...(kind.latestDetails ? { details: kind.latestDetails } : {}),
      count: kind.count,
      periodMs: now - kind.since,
      ...(kind.otherKinds ? { otherKinds: true } : {}),
    };
    kind.count = 0;
    kind.since = now;
    this.emit(entry);
  }

  private emit(entry: ErrorLogEntry): void {
    try {
      this.write(entry);
    } catch {
      // A broken log sink must not fail the work that reported the error.
    }
  }

  /** One timer for all kinds: when it fires, due counts are written and it re-arms while counts remain. */
  private arm(ms: number): void {
    if (this.timerArmed || !this.schedule) return;
    this.timerArmed = true;
    this.schedule(
      () => {
        this.timerArmed = false;
        const now = this.now();
        let next = Number.POSITIVE_INFINITY;
        for (const kind of this.kinds.values()) {
          if (kind.count === 0) continue;
          if (now - kind.since >= this.intervalMs) this.summarise(kind, now);
          else next = Math.min(next, kind.since + this.intervalMs - now);
        }
        if (next !== Number.POSITIVE_INFINITY) this.arm(next);
      },
      Math.max(1, ms),
    );
  }
}

/**
 * The default text of an entry: the first occurrence with its stack (and causes, as util.inspect prints them),
 * a summary on one line.
 */
export function formatErrorLogEntry(entry: ErrorLogEntry, prefix = '[strata] background'): string {
  const head = `${prefix} ${entry.what} failed`;
  if (entry.type === 'first') return `${head}: ${inspect(entry.error, { depth: 4, breakLength: Number.POSITIVE_INFINITY })}`;
  const times = `${entry.count.toLocaleString('en-US')} ${entry.count === 1 ? 'time' : 'times'}`;
  const other = entry.otherKinds ? ' with errors of other kinds (too many kinds to list), the latest' : '';
  return `${head} ${times} in the last ${formatPeriod(entry.periodMs)}${other}: ${entry.summary}`;
}

function formatPeriod(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = Math.round(ms / 1000);
  return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
}

const MAX_SUMMARY = 300;

/** "Name message (cause: Name: message)" on one line, at most 300 characters. */
export function errorSummary(error: unknown): string {
  const one = (e: unknown): string => {
    if (e instanceof Error) {
      // A Strata error's class names its code already; a system error's code (ECONNRESET) is worth showing.
      const code = isStrataError(e) ? undefined : (e as { code?: unknown }).code;
      const withCode = typeof code === 'string' && code !== e.name && !e.message.includes(code) ? ` [${code}]` : '';
      return `${e.name}${withCode} ${e.message}`.trim();
    }
    return typeof e === 'string' ? e : inspect(e, { depth: 1, breakLength: Number.POSITIVE_INFINITY });
  };
  let text = one(error);
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause !== undefined) text += ` (cause: ${one(cause)})`;
  text = text.replace(/\s+/g, ' ');
  return text.length > MAX_SUMMARY ? `${text.slice(0, MAX_SUMMARY - 1)}…` : text;
}

/**
 * What makes two errors the same kind: name, code and message with numbers, hex ids and addresses blanked, for
 * the error and its cause. "timed out after 1003 ms" and "timed out after 998 ms" are one kind.
 */
export function errorShape(error: unknown): string {
  const one = (e: unknown): string => {
    if (e instanceof Error) {
      const code = (e as { code?: unknown }).code;
      return `${e.name}|${typeof code === 'string' || typeof code === 'number' ? code : ''}|${blank(e.message)}`;
    }
    return `${typeof e}|${blank(typeof e === 'string' ? e : String(e))}`;
  };
  const cause = error instanceof Error ? error.cause : undefined;
  return cause === undefined ? one(error) : `${one(error)}<-${one(cause)}`;
}

function blank(message: string): string {
  return message
    .slice(0, 200)
    .replace(/\b[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b/gi, '#')
    .replace(/\d+/g, '#');
}
