import { CasConflictError, type CasStore } from '../ring/store.js';
import type { EvaluatorSnapshot, Firing, FiringHistory } from './evaluator.js';

/**
 * The scheduled evaluator's memory between ticks (AWS: each tick is a Lambda invocation), kept beside the policy
 * documents: `policies/evaluator/state.json`, written by compare-and-set. Of two ticks that overlap (two minutes'
 * ticker executions meeting), the second to save loses and its changes are dropped: the next tick evaluates again
 * from the first one's state (a timer fires at most once for both; a firing in the lost state is in the log and the
 * metric, not in the history). The admin API reads the firing history from here where no evaluator runs in-process.
 */
export const EVALUATOR_STATE_KEY = 'policies/evaluator/state.json';

interface StoredState {
  readonly savedAt: string;
  readonly evaluator: EvaluatorSnapshot;
}

export class EvaluatorStateStore {
  constructor(private readonly cas: CasStore) {}

  /** The state the last tick saved, with its etag for the next save; undefined before the first tick. */
  async load(): Promise<{ snapshot: EvaluatorSnapshot; etag: string } | undefined> {
    const got = await this.cas.get(EVALUATOR_STATE_KEY);
    if (!got) return undefined;
    const stored = JSON.parse(got.body) as StoredState;
    return { snapshot: stored.evaluator, etag: got.etag };
  }

  /** Saves a tick's state over the one it loaded (`etag`, null when none); false when another tick saved first. */
  async save(snapshot: EvaluatorSnapshot, etag: string | null, now = new Date()): Promise<boolean> {
    const body: StoredState = { savedAt: now.toISOString(), evaluator: snapshot };
    try {
      await this.cas.put(EVALUATOR_STATE_KEY, JSON.stringify(body), etag);
      return true;
    } catch (e) {
      if (e instanceof CasConflictError) return false;
      throw e;
    }
  }
}

/** The firing history as the scheduled evaluator left it, for the admin API (newest first). */
export class StoredFiringHistory {
  constructor(private readonly store: EvaluatorStateStore) {}

  async firings(limit = 50): Promise<Firing[]> {
    const got = await this.store.load();
    return got ? got.snapshot.history.slice(-limit).reverse() : [];
  }
}

/** A history read in-process or from the store, as the admin route reads either. */
export type AnyFiringHistory = FiringHistory | StoredFiringHistory;
