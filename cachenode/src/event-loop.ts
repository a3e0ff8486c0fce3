/**
 * Letting the event loop breathe: long loops over LMDB (journal apply, range statistics) yield between chunks so
 * that requests keep being answered while they run.
 */

/** Resolves on the next turn of the event loop (after pending I/O callbacks). */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
