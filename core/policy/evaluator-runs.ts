import { log } from '../util/logger.js';
import { errorText } from '../errors.js';
import type { CompiledPolicy } from './compile.js';
import { transferSummary } from './data-mover.js';
import { collectSummary } from './dedup-gc.js';
import { responseKind, ruleMode, type Condition, type PolicyResponse, type PolicyRule, type PolicyTier } from './document.js';
import type { EvaluatorActions, EvaluatorSnapshot, Firing, FiringOutcome, TransferRequest } from './evaluator.js';
import type { JobsPoll } from './jobs.js';

/**
 * The background evaluator's long runs: the copies, moves and deletes its rules start and the storeOnce blob
 * collections, carried out in process (`actions.transfer`, `actions.collectBlobs`: `npm start`) or queued on the
 * job board for a runner beside the tiers (`actions.jobs`: the scheduled evaluator in AWS, jobs.ts). One run per
 * rule and response at a time; each end is a firing of its own. What a tick needs of them between invocations is part
 * of the evaluator's snapshot.
 */

/** How much earlier than the last run's start a timer copy looks again (clock skew between writers). */
const SINCE_MARGIN_MS = 5_000;

export interface BackgroundRunsDeps {
  readonly actions: EvaluatorActions;
  /** Records a firing (the evaluator's history, log line and metric). */
  readonly record: (rule: string, response: string, outcome: FiringOutcome, detail: string, at: number) => Firing;
  readonly now: () => number;
  /** An action started at `at` (counted against controls.maxActionsPerMinute). */
  readonly started: (at: number) => void;
  /** The policy in force (a run whose rule left it stops). */
  readonly policy: () => CompiledPolicy | undefined;
  /** How often the blobs of each storeOnce namespace are collected. @default ten minutes */
  readonly blobCollectionMs?: number;
}

type RunsSnapshot = Pick<EvaluatorSnapshot, 'transferredSince' | 'collected' | 'jobs'>;

export class BackgroundRuns {
  /** Runs under way in this process, by rule and response; and when each timer copy last finished cleanly. */
  private readonly transfers = new Map<string, Promise<void>>();
  private readonly transferredSince = new Map<string, number>();
  /** storeOnce namespaces: when their blobs were last collected. */
  private readonly collected = new Map<string, number>();
  /** Jobs on the board (actions.jobs): whether some may be, the ids active at this tick, whether one waits for a runner. */
  private jobsOnBoard = false;
  private readonly queued = new Set<string>();
  private jobsWaiting = false;
  /** Why the board could not be read at this tick (nothing is queued then: a job might be running). */
  private boardError?: string;
  private closing = false;

  constructor(
    private readonly d: BackgroundRunsDeps,
    resume?: RunsSnapshot,
  ) {
    for (const [k, v] of Object.entries(resume?.transferredSince ?? {})) this.transferredSince.set(k, v);
    for (const [k, v] of Object.entries(resume?.collected ?? {})) this.collected.set(k, v);
    this.jobsOnBoard = resume?.jobs ?? false;
  }

  snapshot(): RunsSnapshot {
    return {
      ...(this.transferredSince.size ? { transferredSince: Object.fromEntries(this.transferredSince) } : {}),
      ...(this.collected.size ? { collected: Object.fromEntries(this.collected) } : {}),
      ...(this.jobsOnBoard ? { jobs: true } : {}),
    };
  }

  /** Whether a queued job has no runner at the end of this tick (the ticker then starts one: job-runner.ts). */
  get jobsWaitingForRunner(): boolean {
    return this.jobsWaiting;
  }

  /**
   * Starts a copy, move or delete in the background (or queues it for the job runner); its end is recorded as a
   * firing of its own.
   */
  async transfer(
    rule: PolicyRule,
    response: PolicyResponse,
    now: number,
    record: (o: FiringOutcome, d: string) => Firing,
  ): Promise<Firing> {
    const kind = responseKind(response) as 'copy' | 'move' | 'delete';
    const { transfer, jobs } = this.d.actions;
    if (!transfer && !jobs) return record('skipped', `${kind} is not run by this runtime`);
    const id = `${rule.id}\u0000${rule.do.indexOf(response)}`;
    if (this.transfers.has(id) || this.queued.has(id))
      return record('skipped', `the previous ${kind} of this rule is still running`);
    if (!transfer && this.boardError) return record('skipped', this.boardError);
    const spec = (
      response as Record<string, { from: PolicyTier; to?: PolicyTier[]; what: Condition[]; bandwidthBytesPerSecond?: number }>
    )[kind]!;
    const since = 'timer' in rule.on ? this.transferredSince.get(id) : undefined;
    const request: TransferRequest = {
      rule: rule.id,
      kind,
      ns: rule.scope.namespace,
      ...(rule.scope.prefix ? { prefix: rule.scope.prefix } : {}),
      ...(rule.scope.tag ? { tag: rule.scope.tag } : {}),
      from: spec.from,
      to: spec.to ?? [],
      what: spec.what,
      ...(spec.bandwidthBytesPerSecond ? { bytesPerSecond: spec.bandwidthBytesPerSecond } : {}),
      ...(since !== undefined ? { writtenSince: since - SINCE_MARGIN_MS } : {}),
      cancelled: () => {
        const p = this.d.policy();
        return this.closing || !p || !p.document.controls.backgroundEnabled || !p.rules.some((r) => r.id === rule.id);
      },
    };
    const where = `${rule.scope.namespace}${rule.scope.prefix ? `/${rule.scope.prefix}*` : ''}: ${spec.from}${
      spec.to?.length ? ` → ${spec.to.join(', ')}` : ''
    }${spec.bandwidthBytesPerSecond ? ` at most ${spec.bandwidthBytesPerSecond} B/s` : ''}`;
    const sinceNote = since !== undefined ? ', entries written since the last run' : '';
    if (!transfer) {
      const { cancelled: _cancelled, ...queued } = request;
      try {
        if (!(await jobs!.submit({ id, rule: rule.id, kind, transfer: queued })))
          return record('skipped', `the previous ${kind} of this rule is still running`);
      } catch (error) {
        return record('failed', `${kind} could not be queued: ${errorText(error)}`);
      }
      this.queuedJob(id, now);
      return record('done', `${kind} queued for the job runner (${where})${sinceNote}`);
    }
    this.d.started(now);
    const job = transfer(request).then(
      (r) => {
        if (!request.cancelled()) this.transferredSince.set(id, now);
        const stopped = request.cancelled() ? ' (stopped: the rule left the policy or background actions were switched off)' : '';
        this.d.record(rule.id, kind, 'done', `${kind} finished${stopped}: ${transferSummary(r)}`, this.d.now());
      },
      (error: unknown) => void this.d.record(rule.id, kind, 'failed', `${kind} failed: ${errorText(error)}`, this.d.now()),
    );
    this.transfers.set(
      id,
      job.finally(() => this.transfers.delete(id)),
    );
    return record('done', `${kind} started (${where})${sinceNote}`);
  }

  /** A job just queued (a copy, move or delete counts among the minute's background actions; a collection does not). */
  private queuedJob(id: string, now: number, counted = true): void {
    if (counted) this.d.started(now);
    this.queued.add(id);
    this.jobsOnBoard = true;
    this.jobsWaiting = true;
  }

  /**
   * The board's news at the start of a tick (only while jobs may be on it): the jobs that finished become firings (a
   * timer copy's next run then takes what was written since it was queued), the rest are still running.
   */
  async pollJobs(): Promise<void> {
    const jobs = this.d.actions.jobs;
    this.queued.clear();
    this.jobsWaiting = false;
    this.boardError = undefined;
    if (!jobs || !this.jobsOnBoard) return;
    let polled: JobsPoll;
    try {
      polled = await jobs.poll();
    } catch (error) {
      // Unknown: any rule's job may still be running, so nothing is queued at this tick; the next one looks again.
      log.warn('policy evaluator: the background job board could not be read', { error });
      this.boardError = `the background job board could not be read (${errorText(error)})`;
      return;
    }
    for (const job of polled.finished) {
      const f = job.finished!;
      this.d.record(job.rule, job.kind === 'collect' ? 'storeOnce' : job.kind, f.outcome, f.detail, f.at);
      if (job.kind !== 'collect' && f.outcome === 'done') this.transferredSince.set(job.id, job.queuedAt);
    }
    for (const id of polled.active) this.queued.add(id);
    this.jobsWaiting = polled.waiting;
    this.jobsOnBoard = polled.active.length > 0;
  }

  /**
   * Starts the blob collection of every storeOnce namespace whose last one is `blobCollectionMs` old (the first at
   * the first tick), in the background like a copy; its end is a firing of the storeOnce rule.
   */
  async collectDue(policy: CompiledPolicy, now: number): Promise<void> {
    const { collectBlobs: collect, jobs } = this.d.actions;
    if ((!collect && !jobs) || !policy.document.controls.backgroundEnabled) return;
    const every = this.d.blobCollectionMs ?? 600_000;
    for (const rule of policy.rules) {
      if (ruleMode(rule) !== 'foreground' || !rule.do.some((d) => 'storeOnce' in d)) continue;
      const ns = rule.scope.namespace;
      if (ns === '*') continue; // blobs are collected per namespace: the namespaces with their own storeOnce rule
      const id = `${rule.id}\u0000gc`;
      const last = this.collected.get(ns);
      if (this.transfers.has(id) || this.queued.has(id) || (last !== undefined && now - last < every)) continue;
      if (!collect) {
        if (this.boardError) continue;
        try {
          if (await jobs!.submit({ id, rule: rule.id, kind: 'collect', ns })) this.queuedJob(id, now, false);
          this.collected.set(ns, now);
        } catch (error) {
          this.d.record(rule.id, 'storeOnce', 'failed', `blob collection in ${ns} could not be queued: ${errorText(error)}`, now);
        }
        continue;
      }
      this.collected.set(ns, now);
      const job = collect(ns).then(
        (r) => {
          if (r.condemned || r.removed || r.reprieved)
            this.d.record(rule.id, 'storeOnce', 'done', collectSummary(ns, r), this.d.now());
        },
        (error: unknown) =>
          void this.d.record(
            rule.id,
            'storeOnce',
            'failed',
            `blob collection in ${ns} failed: ${errorText(error)}`,
            this.d.now(),
          ),
      );
      this.transfers.set(
        id,
        job.finally(() => this.transfers.delete(id)),
      );
    }
  }

  /** Resolves once every background copy, move and delete under way has finished (tests). */
  async idle(): Promise<void> {
    while (this.transfers.size) await Promise.all([...this.transfers.values()]);
  }

  /** Stops the copies, moves and deletes under way (between two entries) and waits for them (shutdown). */
  async close(): Promise<void> {
    this.closing = true;
    await this.idle();
  }
}
