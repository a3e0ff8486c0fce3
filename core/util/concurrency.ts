/** Small async helpers shared by the tiers and the coordinator. */

/** Maps with at most `limit` calls in flight, preserving order; the first rejection rejects the whole call. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i]!, i);
      } catch (e) {
        failed = true; // stop handing out more items
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Rejects after `ms` unless `p` settles first (the timer never outlives the race). */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms))),
  ]).finally(() => clearTimeout(timer));
}
