/**
 * What the service reports about itself: health and per-tier statistics (hits, misses, entries, bytes), and the
 * cost model: cache placements (ElastiCache, EC2 + EBS cache nodes, S3 classes) ranked for a workload by
 * monthly cost per unit of speedup. The same numbers as `npx strata stats` and `npx strata cost`.
 *
 * Run it against a local Strata:
 *   npm start                                                  # terminal 1: serves http://localhost:8080
 *   bash scripts/run-node.sh examples/04-stats-and-cost.ts     # terminal 2
 * STRATA_ENDPOINT / STRATA_API_KEY point it elsewhere.
 */
import { StrataClient } from '@strata-cache/sdk';

const strata = new StrataClient({
  endpoint: process.env.STRATA_ENDPOINT ?? 'http://localhost:8080',
  apiKey: process.env.STRATA_API_KEY,
  namespace: 'examples',
});

const health = await strata.health();
const tierStates = Object.entries(health.tiers).map(([name, t]) => `${name} (${t.kind}) ${t.ok ? 'up' : 'DOWN'}`);
console.log(`health -> ${health.status}: ${tierStates.join(', ')}`);

// Some traffic, so that the counters move: one miss, then hits.
await strata.delete('stats:probe');
await strata.get('stats:probe');
await strata.put('stats:probe', 'x', { ttl: 60 });
for (let i = 0; i < 5; i++) await strata.get('stats:probe');

const stats = await strata.stats();
console.log(`stats -> up ${stats.uptimeSeconds} s`);
for (const t of stats.tiers) {
  const lookups = t.hits + t.misses;
  const ratio = lookups > 0 ? `${((100 * t.hits) / lookups).toFixed(1)}% hits` : 'no lookups yet';
  console.log(`  ${t.name.padEnd(5)} ${t.kind.padEnd(13)} ${String(t.entries ?? '-').padStart(6)} entries  ${ratio}`);
}

// Where should 500 values of 1 MB, read 2,000 times a month, live? Ranked by C/S (cost per unit speedup).
const placements = await strata.cost.placements({ valueSize: '1MB', keys: 500, requestsPerMonth: 2000, top: 5 });
console.log(`cost -> catalog ${placements.catalog.id}, ${placements.region}, ranked by ${placements.rankBy}:`);
for (const r of placements.recommendations) {
  console.log(
    `  #${r.rank} ${r.placement.id.padEnd(28)} $${r.cost.total.toFixed(2).padStart(8)}/month  speedup ${r.speedup.toFixed(2)}`,
  );
}
// `placements.text` is the full table that `npx strata cost --value-size 1MB --keys 500 --requests-per-month 2000` prints.
await strata.delete('stats:probe');
console.log('stats-and-cost: ok');
