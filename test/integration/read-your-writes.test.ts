/**
 * Read-your-writes under concurrency: 32 workers write, delete and read overlapping keys through the SDK and
 * the local server over redis-server + LocalStack S3. Every read after a worker's own acknowledged write must
 * see that version or a newer one; afterwards every key must hold exactly the newest acknowledged write.
 */
import { StrataClient } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';

const WORKERS = 32;
const KEYS = 24;
const OPS_PER_WORKER = 40;

interface Ack {
  version: number;
  value: string | null; // null = deleted
}

describe('read-your-writes under concurrency', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi('redis+s3');
  });
  afterAll(async () => api?.close());

  it(`${WORKERS} concurrent writers and readers on ${KEYS} overlapping keys lose nothing and never read backwards`, async () => {
    const client = new StrataClient({ endpoint: api.url, namespace: 'ryw', retries: 2, timeoutMs: 20_000 });
    const newest = new Map<string, Ack>();
    const violations: string[] = [];
    const record = (key: string, ack: Ack) => {
      const cur = newest.get(key);
      if (!cur || ack.version > cur.version) newest.set(key, ack);
    };
    let seed = 0x9e3779b9; // mulberry32: reproducible and well mixed in the low bits
    const rand = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, w) => {
        const mine = new Map<string, number>(); // key -> version this worker last got acknowledged
        for (let i = 0; i < OPS_PER_WORKER; i++) {
          const key = `k${rand(KEYS)}`;
          const roll = rand(10);
          if (roll < 5) {
            const value = `w${w}-op${i}`;
            const ack = await client.put(key, value);
            mine.set(key, ack.version);
            record(key, { version: ack.version, value });
          } else if (roll < 6) {
            const ack = await client.delete(key);
            mine.set(key, ack.version);
            record(key, { version: ack.version, value: null });
          } else {
            const got = await client.get(key);
            const own = mine.get(key);
            // A later delete by someone else may hide the key; otherwise the version must not go backwards.
            if (own !== undefined && got && got.version < own)
              violations.push(`worker ${w} wrote ${key}@${own} then read @${got.version}`);
          }
        }
      }),
    );
    expect(violations).toEqual([]);
    expect(newest.size).toBeGreaterThan(KEYS / 2);
    for (const [key, ack] of newest) {
      const got = await client.get(key);
      if (ack.value === null) expect({ key, got: got?.text() }).toEqual({ key, got: undefined });
      else expect({ key, version: got?.version, value: got?.text() }).toEqual({ key, version: ack.version, value: ack.value });
    }
    // The same holds below the near cache and hot tier: the durable copy is the newest acknowledged write.
    const cold = api.ctx.coordinator.tierList().find((t) => t.name === 'cold')!;
    for (const [key, ack] of newest) {
      const e = await cold.get('ryw', key);
      expect({ key, version: e?.header.version, tombstone: !!e?.header.flags.tombstone }).toEqual({
        key,
        version: ack.version,
        tombstone: ack.value === null,
      });
    }
  }, 300_000);
});
