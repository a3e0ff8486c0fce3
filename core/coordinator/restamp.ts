import type { HybridLogicalClock } from '../model/hlc.js';

/** One attempt at a versioned change: done, or refused because a tier holds `current`, a newer version. */
export type Attempt<T> = { ok: true; value: T } | { ok: false; current: number };

/** How many times a change is re-stamped before it gives up (see {@link restamp}). */
export const MAX_RESTAMPS = 8;

export interface RestampOptions<E> {
  /**
   * Conditional changes (If-Match, If-None-Match) are never re-stamped: the newer version is a conflict, and this
   * builds the error thrown for it.
   */
  conflict?: (current: number) => Error;
  /** Re-stamps allowed before `exhausted` decides. @default MAX_RESTAMPS */
  limit?: number;
  /** What a change that lost `limit` re-stamps in a row comes to: a result, or a throw. */
  exhausted: (version: number, current: number) => E;
}

/**
 * The one re-stamp loop behind put, delete and commitUpload. Stamps a version from the clock and tries; when a tier
 * refuses the attempt as stale, another writer got a newer version in first: the clock observes that version and
 * the change is re-stamped above it and tried again, so it is never silently dropped and the last change to be
 * acknowledged is the one readers see.
 *
 * Each re-stamp puts the change above every version seen so far, so losing `limit` times in a row means writers in
 * other processes keep writing the key concurrently; `exhausted` then decides (a write is acknowledged as
 * superseded, an upload asks to be committed again).
 */
export async function restamp<T, E = T>(
  clock: HybridLogicalClock,
  attempt: (version: number) => Promise<Attempt<T>>,
  opts: RestampOptions<E>,
): Promise<T | E> {
  const limit = opts.limit ?? MAX_RESTAMPS;
  let version = clock.next();
  for (let tries = 0; ; tries++) {
    const r = await attempt(version);
    if (r.ok) return r.value;
    if (opts.conflict) throw opts.conflict(r.current);
    if (tries >= limit) return opts.exhausted(version, r.current);
    clock.observe(r.current);
    version = clock.next();
  }
}
