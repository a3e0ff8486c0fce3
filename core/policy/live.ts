import { log } from '../util/logger.js';
import type { PolicyAdministration } from './admin.js';
import type { CompiledPolicy } from './compile.js';
import type { PolicyView } from './service.js';

/**
 * The policy in force in one process, kept up to date from the policy store: coordinators cache the compiled
 * policy by version and pick up a new one within a bounded time, without a redeploy.
 *
 * Two ways to stay fresh, for two kinds of process:
 *  - a long-lived server (`npm start`, a cache node) polls every `refreshMs` on a timer;
 *  - a Lambda container, frozen between invocations, cannot count on timers: each request calls
 *    {@link refreshIfStale}, which starts a refresh in the background once the copy is `refreshMs` old and makes
 *    the request wait for it only when the copy is older than `maxStaleMs` (a container thawed after a long idle).
 * So a change is in force everywhere within `maxStaleMs` plus one read of the store. A store that cannot be read
 * leaves the last good policy in force (logged, retried at the next refresh): an outage of S3 does not change how
 * data is placed.
 */

export interface LivePolicyOptions {
  readonly admin: PolicyAdministration;
  /** Called with each new policy (a different version or document) after the first. */
  readonly onChange: (next: CompiledPolicy, view: PolicyView, previous: PolicyView) => void;
  /** How old the cached copy may get before a refresh starts. */
  readonly refreshMs: number;
  /** How old it may get before a request waits for the refresh. @default 4 × refreshMs */
  readonly maxStaleMs?: number;
  /** The longest a request waits for a stale copy's refresh before it goes on with it. @default 1000 */
  readonly maxWaitMs?: number;
  /** Poll on a timer (long-lived processes). @default false */
  readonly timer?: boolean;
  readonly now?: () => number;
}

export class LivePolicy {
  private view: PolicyView;
  private compiled: CompiledPolicy;
  private checkedAt: number;
  private inflight?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private failures = 0;
  private readonly now: () => number;

  private constructor(
    private readonly opts: LivePolicyOptions,
    first: { view: PolicyView; compiled: CompiledPolicy },
    checkedAt: number,
  ) {
    this.view = first.view;
    this.compiled = first.compiled;
    this.now = opts.now ?? Date.now;
    this.checkedAt = checkedAt;
    if (opts.timer) {
      this.timer = setInterval(() => void this.refresh(), opts.refreshMs);
      this.timer.unref();
    }
  }

  /**
   * Starts from the deployment's policy without reading the store (a context is built synchronously): the first
   * request waits for the first read (its copy counts as infinitely old), and a timer, when asked for, reads at once.
   */
  static fromDeployment(opts: LivePolicyOptions, deployment: CompiledPolicy): LivePolicy {
    const view: PolicyView = { version: 0, source: 'deployment', document: deployment.document, hash: deployment.hash };
    const live = new LivePolicy(opts, { view, compiled: deployment }, Number.NEGATIVE_INFINITY);
    if (opts.timer) void live.refresh();
    return live;
  }

  /** The policy in force here now. */
  get current(): { readonly view: PolicyView; readonly compiled: CompiledPolicy } {
    return { view: this.view, compiled: this.compiled };
  }

  /** Per request (Lambda): refresh in the background when due, and wait only when the copy is too old. */
  refreshIfStale(): Promise<void> | undefined {
    const age = this.now() - this.checkedAt;
    if (age < this.opts.refreshMs) return undefined;
    const pending = this.refresh();
    if (age < (this.opts.maxStaleMs ?? 4 * this.opts.refreshMs)) return undefined;
    // A slow store (S3 retrying) must not hold requests: after maxWaitMs they go on with the policy in force, and
    // the read completes in the background.
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.opts.maxWaitMs ?? 1000)));
    return Promise.race([pending, waited]).finally(() => clearTimeout(timer));
  }

  /** Resolves once the read under way, if any, has landed (never starts one). */
  settled(): Promise<void> {
    return this.inflight ?? Promise.resolve();
  }

  /** Reads the store once (concurrent callers share the read); never throws. */
  refresh(): Promise<void> {
    this.inflight ??= this.read().finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async read(): Promise<void> {
    try {
      const next = await this.opts.admin.effectiveIfNewer(this.view.version);
      this.checkedAt = this.now();
      if (this.failures > 0) log.info('policy store readable again', { failures: this.failures });
      this.failures = 0;
      if (!next || (next.view.version === this.view.version && next.view.hash === this.view.hash)) return;
      const previous = this.view;
      this.view = next.view;
      this.compiled = next.compiled;
      log.info('policy in force', {
        version: next.view.version,
        previous: previous.version,
        source: next.view.source,
        hash: next.view.hash,
      });
      // A stored version accepted before Strata refused what it does (compile.ts CompiledPolicy.warnings).
      if (next.compiled.warnings?.length)
        log.warn('the policy in force would be refused if put today: put a corrected version', {
          version: next.view.version,
          problems: next.compiled.warnings.map((w) => `${w.path}${w.rule ? ` (rule '${w.rule}')` : ''}: ${w.message}`),
        });
      this.opts.onChange(next.compiled, next.view, previous);
    } catch (error) {
      // Retried at the next refresh; the policy in force stays. One line per run of failures, not per request.
      this.checkedAt = this.now();
      if (this.failures++ === 0) log.warn('policy store unreadable: the policy in force stays until it can be read', { error });
    }
  }
}
