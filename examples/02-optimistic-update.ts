/**
 * Concurrency-safe updates with versions: a read-modify-write loop that only writes over the version it read
 * (`ifMatch`), retrying when another writer got there first (`VersionConflictError`), and a create-only write
 * (`ifNoneMatch: '*'`) used as a simple lock.
 *
 * Run it against a local Strata:
 *   npm start                                                    # terminal 1: serves http://localhost:8080
 *   bash scripts/run-node.sh examples/02-optimistic-update.ts    # terminal 2
 * STRATA_ENDPOINT / STRATA_API_KEY point it elsewhere.
 */
import { StrataClient, VersionConflictError } from '@strata-cache/sdk';

const strata = new StrataClient({
  endpoint: process.env.STRATA_ENDPOINT ?? 'http://localhost:8080',
  apiKey: process.env.STRATA_API_KEY,
  namespace: 'examples',
});

/** Adds `by` to the counter stored under `key`, without losing a concurrent increment. */
async function increment(key: string, by: number): Promise<{ value: number; attempts: number }> {
  for (let attempts = 1; ; attempts++) {
    const current = await strata.get(key);
    const next = (current ? current.json<number>() : 0) + by;
    try {
      // Write only over the version read (or, for a new key, only if it still does not exist).
      await strata.put(key, next, current ? { ifMatch: current.version } : { ifNoneMatch: '*' });
      return { value: next, attempts };
    } catch (err) {
      if (err instanceof VersionConflictError && attempts < 20) continue; // someone else wrote: read again
      throw err;
    }
  }
}

await strata.delete('counter');
// Ten increments racing each other: every one lands, some after a conflict and a retry.
const results = await Promise.all(Array.from({ length: 10 }, () => increment('counter', 1)));
const retried = results.filter((r) => r.attempts > 1).length;
const final = (await strata.get('counter'))?.json<number>();
console.log(`counter -> ${final} after 10 concurrent increments (${retried} of them retried after a conflict)`);
if (final !== 10) throw new Error(`expected 10, got ${final}`);

// Create-only: the first writer gets the lock, the second is refused until the TTL lets it go.
await strata.delete('lock:nightly-job');
await strata.put('lock:nightly-job', 'worker-1', { ifNoneMatch: '*', ttl: 30 });
try {
  await strata.put('lock:nightly-job', 'worker-2', { ifNoneMatch: '*', ttl: 30 });
  throw new Error('the second create-only write should have been refused');
} catch (err) {
  if (!(err instanceof VersionConflictError)) throw err;
  console.log(`lock:nightly-job -> held by ${(await strata.get('lock:nightly-job'))?.text()}; worker-2 refused (${err.code})`);
}
await strata.deleteMany(['counter', 'lock:nightly-job']);
console.log('optimistic-update: ok');
