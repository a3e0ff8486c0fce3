// The operator's switch over automatic node replacement, kept beside the ring so every checker and API sees it.
import { JsonDocStore, type CasStore } from '../ring/store.js';

/** `health/controls` in the ring store. */
export interface HealthControlsDocument {
  /** While true, the failure detector probes and reports but marks no node DOWN (so nothing is replaced). */
  paused: boolean;
  /** Who set it and why (the admin API records the caller's key name). */
  by?: string;
  reason?: string;
  /** ISO-8601. */
  at?: string;
}

const ID = 'controls';

/**
 * Pausing automatic replacement: a false-positive storm the checker's own caps do not catch (a long network
 * incident, planned maintenance) is stopped by hand, for every checker at once, and resumed the same way.
 */
export class HealthControls {
  private readonly docs: JsonDocStore<HealthControlsDocument>;

  constructor(cas: CasStore) {
    this.docs = new JsonDocStore(cas, 'health/');
  }

  /** The current setting (not paused when never set). */
  async get(): Promise<HealthControlsDocument> {
    return (await this.docs.get(ID)) ?? { paused: false };
  }

  /** Pauses or resumes; returns the new setting. */
  async set(paused: boolean, who: { by?: string; reason?: string } = {}): Promise<HealthControlsDocument> {
    const doc: HealthControlsDocument = { paused, ...who, at: new Date().toISOString() };
    if (!(await this.docs.get(ID))) {
      try {
        return await this.docs.create(ID, doc);
      } catch {
        // Created meanwhile: fall through to the update.
      }
    }
    return this.docs.update(ID, () => doc);
  }
}
