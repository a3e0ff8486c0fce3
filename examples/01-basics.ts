/**
 * The basics: write, read and delete keys with the SDK, with a TTL and tags, plus the two helpers most callers
 * want first: `getOrSet` (read-through with a loader) and the batch calls (`putMany` / `getMany`).
 *
 * Run it against a local Strata:
 *   npm start                                          # terminal 1: serves http://localhost:8080
 *   bash scripts/run-node.sh examples/01-basics.ts     # terminal 2
 * STRATA_ENDPOINT / STRATA_API_KEY point it elsewhere (a deployment's ApiUrl and a tenant's key).
 */
import { StrataClient } from '@strata-cache/sdk';

const strata = new StrataClient({
  endpoint: process.env.STRATA_ENDPOINT ?? 'http://localhost:8080',
  apiKey: process.env.STRATA_API_KEY,
  namespace: 'examples',
});

// A JSON value that expires in 10 minutes, tagged so that it can be recognised later.
const written = await strata.put('user:42', { name: 'Ada', plan: 'pro' }, { ttl: 600, tags: ['users', 'plan:pro'] });
console.log(
  `put user:42 -> version ${written.version}, tiers ${written.tiers.join('+')}, expires ${written.expiresAt?.toISOString()}`,
);

// Reads return the bytes plus metadata: which tier served them, the version, the expiry and the tags.
const item = await strata.get('user:42');
if (!item) throw new Error('user:42 should exist: it was just written');
const user = item.json<{ name: string; plan: string }>();
console.log(`get user:42 -> ${user.name} (${user.plan}) from the ${item.tier} tier, tags ${item.tags.join(',')}`);

// Strings are stored as UTF-8 text, bytes as they are.
await strata.put('greeting', 'hello, world', { ttl: 60 });
console.log(`get greeting -> "${(await strata.get('greeting'))?.text()}"`);

// Read-through: the loader runs only on a miss, and its result is cached for the next caller.
let loads = 0;
const loadReport = async () => {
  loads++;
  return { quarter: 'Q3', revenue: 1234 };
};
await strata.delete('report:q3'); // start from a miss, whatever an earlier run left
const first = await strata.getOrSet('report:q3', loadReport, { ttl: 3600 });
const second = await strata.getOrSet('report:q3', loadReport, { ttl: 3600 });
console.log(`getOrSet report:q3 -> first from ${first.tier}, then from ${second.tier}; loader ran ${loads} time(s)`);

// Batches: up to 100 keys per request (the SDK splits longer lists).
await strata.putMany(
  [1, 2, 3].map((n) => ({ key: `item:${n}`, value: { n } })),
  { ttl: 300, tags: ['items'] },
);
const items = await strata.getMany(['item:1', 'item:2', 'item:3', 'item:404']);
console.log(`getMany -> ${items.size} of 4 found: ${[...items.keys()].sort().join(', ')}`);

// Deletes leave a tombstone; a read after it finds nothing.
const { version } = await strata.delete('user:42');
console.log(`delete user:42 -> tombstone version ${version}; get now returns ${String(await strata.get('user:42'))}`);
await strata.deleteMany(['greeting', 'report:q3', 'item:1', 'item:2', 'item:3']);
console.log('basics: ok');
