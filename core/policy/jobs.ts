import { CasConflictError, type CasStore } from '../ring/store.js';
import type { TransferResult, TransferResume } from './data-mover.js';
import type { CollectResult } from './dedup-gc.js';
import type { FiringOutcome, TransferRequest } from './evaluator.js';

/**
 * The background jobs of the scheduled evaluator (AWS): the copies, moves, deletes and storeOnce collections its rules
 * start, which outlive the tick that started them. The evaluator runs outside the VPC and reaches no tier, so it queues
 * each job here, beside its state (`policies/evaluator/jobs.json`, by compare-and-set), and the ticker starts the job
 * runner in the VPC (job-runner.ts), which works through them with a time budget per invocation, leaving a resumable
 * place after each page; a job that needs more than one invocation goes on in the next. When a job ends, the runner
 * marks it finished; the evaluator's next tick records the firing and takes it off the board.
 *
 * Both sides write the board by compare-and-set, re-reading and re-applying their change when the other wrote first,
 * so neither loses the other's change. A runner holds a job by a lease (until a time): one runner per job at once, and
 * a runner that died leaves a lease that expires, after which another goes on from the last place saved.
 */
export const JOBS_KEY = 'policies/evaluator/jobs.json';

/** A copy, move or delete as queued: the request without its in-process cancellation (the runner judges that). */
export type QueuedTransfer = Omit<TransferRequest, 'cancelled'>;

export interface BackgroundJob {
  /** The rule and response (`<rule>\0<index>`), or `<rule>\0gc` for a collection: one job per id at a time. */
  readonly id: string;
  readonly rule: string;
  readonly kind: 'copy' | 'move' | 'delete' | 'collect';
  /** What to copy, move or delete (kind copy, move, delete). */
  readonly transfer?: QueuedTransfer;
  /** The namespace whose blobs to collect (kind collect). */
  readonly ns?: string;
  /** Epoch ms. */
  readonly queuedAt: number;
  /** How far it got: the place to go on from, and the counts so far. */
  readonly progress?: { readonly resume?: TransferResume; readonly result?: TransferResult; readonly runs: number };
  /** The runner working on it, until when. */
  readonly lease?: { readonly by: string; readonly until: number };
  readonly finished?: {
    readonly at: number;
    readonly outcome: FiringOutcome;
    readonly detail: string;
    readonly result?: TransferResult;
    readonly collected?: CollectResult;
  };
}

interface Board {
  readonly jobs: BackgroundJob[];
}

/** At most this many jobs wait on the board (one per rule and response; a runaway policy cannot grow it further). */
export const MAX_JOBS = 100;

/** What the evaluator sees of the board at a tick. */
export interface JobsPoll {
  /** Ids of the jobs queued or under way. */
  readonly active: readonly string[];
  /** Jobs that finished since the last poll (taken off the board by this poll). */
  readonly finished: readonly BackgroundJob[];
  /** Whether some active job has no runner now (none started yet, or its lease expired): start the runner. */
  readonly waiting: boolean;
}

export class JobBoard {
  constructor(
    private readonly cas: CasStore,
    private readonly now: () => number = Date.now,
  ) {}

  async list(): Promise<BackgroundJob[]> {
    const got = await this.cas.get(JOBS_KEY);
    return got ? (JSON.parse(got.body) as Board).jobs : [];
  }

  /**
   * Applies `change` to the jobs by compare-and-set, again on the newest board when another writer saved first.
   * `change` returns the new list, or undefined to write nothing. Resolves with what it returned.
   */
  async update<T>(change: (jobs: BackgroundJob[]) => { jobs: BackgroundJob[]; value: T } | undefined): Promise<T | undefined> {
    for (let attempt = 0; ; attempt++) {
      const got = await this.cas.get(JOBS_KEY);
      const jobs = got ? (JSON.parse(got.body) as Board).jobs : [];
      const next = change(jobs.map((j) => ({ ...j })));
      if (!next) return undefined;
      try {
        await this.cas.put(JOBS_KEY, JSON.stringify({ jobs: next.jobs } satisfies Board), got?.etag ?? null);
        return next.value;
      } catch (e) {
        if (!(e instanceof CasConflictError) || attempt >= 9) throw e;
        // Two writers at most in practice (the evaluator and a runner): a short jittered wait keeps them apart.
        await new Promise((r) => setTimeout(r, Math.random() * 25 * (attempt + 1)));
      }
    }
  }

  /** Queues a job; false when one with its id is on the board already (still running, or finished and not yet seen). */
  async submit(job: Omit<BackgroundJob, 'queuedAt'>): Promise<boolean> {
    const queued: BackgroundJob = { ...job, queuedAt: this.now() };
    const done = await this.update((jobs) => {
      if (jobs.some((j) => j.id === job.id)) return { jobs, value: false };
      if (jobs.length >= MAX_JOBS) throw new Error(`the background job board is full (${MAX_JOBS} jobs)`);
      return { jobs: [...jobs, queued], value: true };
    });
    return done ?? false;
  }

  /** The evaluator's view at a tick; takes the finished jobs off the board (one write, only when some finished). */
  async poll(): Promise<JobsPoll> {
    const now = this.now();
    const view = (jobs: readonly BackgroundJob[]) => {
      const active = jobs.filter((j) => !j.finished);
      return {
        active: active.map((j) => j.id),
        waiting: active.some((j) => !j.lease || j.lease.until <= now),
      };
    };
    const jobs = await this.list();
    if (!jobs.some((j) => j.finished)) return { ...view(jobs), finished: [] };
    const polled = await this.update((current) => {
      const finished = current.filter((j) => j.finished);
      const left = current.filter((j) => !j.finished);
      return { jobs: left, value: { ...view(left), finished } };
    });
    return polled!;
  }
}
