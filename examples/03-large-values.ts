/**
 * Large values: above the inline limit (4 MiB by default) the SDK does not send the bytes through the API.
 * It asks for an upload URL (presigned S3 in AWS, the local server's own upload route under `npm start`), PUTs
 * the bytes there without the API key, and completes the upload; a read of such a value is answered with a
 * redirect (303) to a download URL, which the SDK follows. The calls are the same `put` / `get` as for small
 * values: the `fetch` wrapper below only logs the requests, to show the flow.
 *
 * Run it against a local Strata:
 *   npm start                                                # terminal 1: serves http://localhost:8080
 *   bash scripts/run-node.sh examples/03-large-values.ts     # terminal 2
 * STRATA_ENDPOINT / STRATA_API_KEY point it elsewhere.
 */
import { createHash, randomBytes } from 'node:crypto';
import { StrataClient } from '@strata-cache/sdk';

const endpoint = process.env.STRATA_ENDPOINT ?? 'http://localhost:8080';
const requests: string[] = [];
const strata = new StrataClient({
  endpoint,
  apiKey: process.env.STRATA_API_KEY,
  namespace: 'examples',
  fetch: async (input, init) => {
    const url = new URL(String(input));
    const res = await fetch(input, init);
    // Shortened: transfer URLs carry a signed token (in the path locally, in the query string on S3).
    const where = `${url.origin === new URL(endpoint).origin ? '' : url.origin}${url.pathname}`;
    requests.push(`${init?.method ?? 'GET'} ${where.length > 60 ? `${where.slice(0, 60)}…` : where} -> ${res.status}`);
    return res;
  },
});

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex').slice(0, 16);
const value = randomBytes(6 * 1024 * 1024); // 6 MiB: above the 4 MiB inline limit
const written = await strata.put('dataset:2026-11', value, { ttl: 3600, contentType: 'application/octet-stream' });
console.log(`put dataset:2026-11 (${value.byteLength} bytes) -> version ${written.version}, tiers ${written.tiers.join('+')}`);
for (const line of requests.splice(0)) console.log(`  ${line}`);

const item = await strata.get('dataset:2026-11');
if (!item) throw new Error('dataset:2026-11 should exist: it was just written');
console.log(`get dataset:2026-11 -> ${item.value.byteLength} bytes from the ${item.tier} tier`);
for (const line of requests.splice(0)) console.log(`  ${line}`);
if (sha256(item.value) !== sha256(value)) throw new Error('the value read back differs from the one written');
console.log(`sha256 ${sha256(value)}… matches`);

await strata.delete('dataset:2026-11');
console.log('large-values: ok');
