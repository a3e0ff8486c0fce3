import type { Tier } from '../tiers/tier.js';
import { errorText } from '../errors.js';
import { log } from '../util/logger.js';
import type { CompiledPolicy } from './compile.js';
import { addTransferResults, runTransfer, transferSummary, type TransferResult, type TransferSpec } from './data-mover.js';
import { collectBlobs, collectSummary, type CollectResult } from './dedup-gc.js';
import type { BackgroundJob, JobBoard, QueuedTransfer } from './jobs.js';

/**
 * The job runner: carries out the copies, moves, deletes and blob collections the scheduled evaluator queued
 * (jobs.ts), beside the tiers (in AWS a function in the VPC that the ticker starts when a job waits). It takes the
 * jobs in the order they were queued, one at a time, each under a lease, and works until its deadline: a copy that
 * is not done by then leaves its place (the scan page and the last key done) and its counts on the board, and the
 * next invocation goes on from there; a collection that is not done runs again (what it condemned stays condemned).
 * Before each job and between entries it checks the policy in force: a job whose rule left the policy, or with
 * background actions switched off, stops and is reported as such. The semantics of each entry are data-mover.ts's
 * and dedup-gc.ts's, the same as `npm start`'s in-process evaluator.
 */

/** How long one invocation of the job runner works, by default (in AWS its function's timeout leaves a minute past it). */
export const JOB_RUNNER_BUDGET_MS = 5 * 60_000;

export interface JobRunnerOptions {
  readonly board: Pick<JobBoard, 'update'>;
  /** This runtime's tiers, top-down (hot, warm, cold); warm and cold are the durable ones a delete checks. */
  readonly tiers: readonly Tier[];
  /** The policy in force now. */
  readonly policy: () => CompiledPolicy;
  /** Epoch ms: no job starts after it, and runs stop at it. */
  readonly deadline: number;
  /** Who holds the leases (the invocation's request id). */
  readonly owner: string;
  /** How long past the deadline a lease holds (a runner that died blocks its job this long). @default 60 s */
  readonly leaseSlackMs?: number;
  readonly now?: () => number;
  readonly pageSize?: number;
}

export interface JobRunReport {
  /** Jobs worked on. */
  readonly ran: number;
  /** Of them, the ones that ended (done, failed or stopped). */
  readonly finished: number;
}

/** The tiers of a queued request, by name. */
export function transferSpecOver(tiers: readonly Tier[], q: QueuedTransfer): TransferSpec {
  const named = (name: string): Tier => {
    const t = tiers.find((x) => x.name === name);
    if (!t) throw new Error(`this deployment has no ${name} tier`);
    return t;
  };
  return {
    rule: q.rule,
    kind: q.kind,
    ns: q.ns,
    ...(q.prefix ? { prefix: q.prefix } : {}),
    ...(q.tag ? { tag: q.tag } : {}),
    from: named(q.from),
    to: q.to.map(named),
    what: q.what,
    ...(q.bytesPerSecond ? { bytesPerSecond: q.bytesPerSecond } : {}),
    ...(q.writtenSince !== undefined ? { writtenSince: q.writtenSince } : {}),
    durable: tiers.filter((t) => t.name !== 'hot'),
  };
}

/** Where a storeOnce namespace's blobs are decided: the lowest durable tier its writes go to. */
export function blobAuthority(tiers: readonly Tier[], policy: CompiledPolicy, ns: string): Tier {
  const writes = policy.registry.for(ns).writeTiers as readonly string[];
  const authority = tiers.filter((t) => t.name !== 'hot' && writes.includes(t.name)).at(-1);
  if (!authority) throw new Error(`namespace '${ns}' writes to no durable tier`);
  return authority;
}

/** Why a job must stop now (its rule left the policy, background actions are off), or undefined. */
function stopReason(policy: CompiledPolicy, job: BackgroundJob): string | undefined {
  if (!policy.document.controls.backgroundEnabled) return 'background actions were switched off';
  if (!policy.rules.some((r) => r.id === job.rule)) return 'the rule left the policy';
  return undefined;
}

export async function runJobs(o: JobRunnerOptions): Promise<JobRunReport> {
  const now = o.now ?? Date.now;
  let ran = 0;
  let finished = 0;
  while (now() < o.deadline) {
    const claimedAt = now();
    const job = await o.board.update((jobs) => {
      const next = jobs
        .filter((j) => !j.finished && (!j.lease || j.lease.until <= claimedAt))
        .sort((a, b) => a.queuedAt - b.queuedAt)[0];
      if (!next) return undefined;
      const lease = { by: o.owner, until: o.deadline + (o.leaseSlackMs ?? 60_000) };
      return { jobs: jobs.map((j) => (j.id === next.id ? { ...j, lease } : j)), value: { ...next, lease } };
    });
    if (!job) break;
    ran++;
    const after = await runOne(o, job, now).catch((error: unknown): Partial<BackgroundJob> => ({
      finished: { at: now(), outcome: 'failed', detail: `${label(job)} failed: ${errorText(error)}` },
    }));
    if (after.finished) {
      finished++;
      log[after.finished.outcome === 'failed' ? 'warn' : 'info']('policy job ended', {
        job: job.id.replace('\u0000', '#'),
        outcome: after.finished.outcome,
        detail: after.finished.detail,
      });
    }
    // Its new state, lease released; a job no longer on the board (or leased by another runner since: ours expired)
    // is left as it is.
    await o.board.update((jobs) => {
      const i = jobs.findIndex((j) => j.id === job.id && j.lease?.by === o.owner);
      if (i < 0) return undefined;
      const { lease: _released, ...rest } = jobs[i]!;
      jobs[i] = { ...rest, ...after };
      return { jobs, value: true };
    });
  }
  return { ran, finished };
}

function label(job: BackgroundJob): string {
  return job.kind === 'collect' ? `blob collection in ${job.ns}` : job.kind;
}

async function runOne(o: JobRunnerOptions, job: BackgroundJob, now: () => number): Promise<Partial<BackgroundJob>> {
  const stop = stopReason(o.policy(), job);
  if (stop) return { finished: { at: now(), outcome: 'skipped', detail: `${label(job)} stopped: ${stop}` } };
  const runs = (job.progress?.runs ?? 0) + 1;
  if (job.kind === 'collect') {
    const ns = job.ns!;
    const r: CollectResult = await collectBlobs({
      ns,
      authority: blobAuthority(o.tiers, o.policy(), ns),
      tiers: o.tiers,
      deadline: o.deadline,
      now,
    });
    if (r.incomplete) return { progress: { runs } };
    return { finished: { at: now(), outcome: 'done', detail: collectSummary(ns, r), collected: r } };
  }
  const spec = transferSpecOver(o.tiers, job.transfer!);
  let stopped: string | undefined;
  const r = await runTransfer(spec, {
    ...(job.progress?.resume ? { resume: job.progress.resume } : {}),
    deadline: o.deadline,
    now,
    ...(o.pageSize ? { pageSize: o.pageSize } : {}),
    cancelled: () => (stopped ??= stopReason(o.policy(), job)) !== undefined,
  });
  const { resume, ...counts } = r;
  const total: TransferResult = addTransferResults(job.progress?.result, counts);
  if (resume && !stopped) return { progress: { resume, result: total, runs } };
  const note = stopped ? ` (stopped: ${stopped})` : '';
  return {
    finished: {
      at: now(),
      outcome: stopped ? 'skipped' : 'done',
      detail: `${job.kind} finished${note}: ${transferSummary(total)}${runs > 1 ? ` (${runs} runs)` : ''}`,
      result: total,
    },
  };
}
