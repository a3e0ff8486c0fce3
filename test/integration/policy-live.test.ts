/**
 * A policy replaced at runtime, under load: two servers (two API containers, each with its own context) over one
 * redis-server hot tier, one LocalStack S3 bucket and one policy store. While 16 workers write and read overlapping
 * keys, an operator flips a namespace between write-through and write-back (low-latency) through the admin API. No
 * request may fail, no read may return a version older than one already acknowledged, and once the flips stop every
 * acknowledged write must reach S3, including those acknowledged from hot under write-back just before a flip to
 * write-through (the flusher keeps draining them).
 *
 * Across the two containers the namespace has no near cache: another container's write may take `nearCache.ttlMs`
 * to show through one (docs/API.md, "Consistency"), which a check across containers would count as reading
 * backwards. The near cache is exercised within one container, where it must keep every acknowledged write.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StrataClient } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';

const NS = 'live';
/** The namespace of the one-container runs, with its near cache. */
const NS_L1 = 'live-l1';
const WORKERS = 16;
const KEYS = 20;
const OPS_PER_WORKER = 60;

const noNearCache = { settings: { nearCache: { enabled: false } } };
const writeBack = { namespaces: { [NS]: { preset: 'low-latency', with: { flushSeconds: 0.2 }, ...noNearCache } } };
const writeThrough = { namespaces: { [NS]: { preset: 'write-through', ...noNearCache } } };
const writeBackL1 = { namespaces: { [NS_L1]: { preset: 'low-latency', with: { flushSeconds: 0.2 } } } };
const writeThroughL1 = { namespaces: { [NS_L1]: { preset: 'write-through' } } };

async function eventually(what: string, probe: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a policy replaced at runtime under concurrent load', () => {
  let a: TestApi;
  let b: TestApi;
  let storeDir: string;
  beforeAll(async () => {
    storeDir = mkdtempSync(join(tmpdir(), 'strata-policy-store-'));
    const env = { STRATA_POLICY_STORE: `file:${storeDir}`, STRATA_POLICY_REFRESH_MS: '200' };
    a = await startTestApi('redis+s3', env, { build: { policyTimer: true } });
    // The second server shares the first one's tiers, as a second API container would.
    b = await startTestApi('redis+s3', { ...env, STRATA_S3_BUCKET: a.bucket! }, { build: { policyTimer: true } });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    rmSync(storeDir, { recursive: true, force: true });
  });

  /**
   * 16 workers write and read overlapping keys of `ns` through both servers (or `one` of them) while the admin API
   * cycles through `policies`; resolves with how many versions were put, once no error and no read older than one
   * acknowledged was seen, both servers are on the last version and every acknowledged write is in S3.
   */
  async function flipUnderLoad(policies: readonly unknown[], { ns = NS, one }: { ns?: string; one?: TestApi } = {}) {
    const servers = one ? [one] : [a, b];
    const clients = servers.map((s) => new StrataClient({ endpoint: s.url, namespace: ns, retries: 0, timeoutMs: 20_000 }));
    const admin = new StrataClient({ endpoint: a.url, retries: 0 });
    const newest = new Map<string, number>(); // key -> newest acknowledged version
    const errors: string[] = [];
    const violations: string[] = [];
    // The first policy is in force in both servers before the load begins (the namespace's settings among them).
    const first = await admin.policies.put(policies[0]!, {
      ifVersion: (await admin.policies.get()).version,
      reason: 'flip 0',
    });
    await eventually('both servers on the first policy', () =>
      [a, b].every((s) => s.ctx.livePolicy?.current.view.version === first.version),
    );
    let flips = 1;
    let stop = false;
    const flipper = (async () => {
      while (!stop) {
        const cur = await admin.policies.get();
        await admin.policies.put(policies[flips % policies.length]!, { ifVersion: cur.version, reason: `flip ${flips}` });
        flips++;
        await new Promise((r) => setTimeout(r, 120));
      }
    })();
    let seed = 0x2545f491;
    const rand = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, w) => {
        for (let i = 0; i < OPS_PER_WORKER; i++) {
          const key = `k${rand(KEYS)}`;
          const client = clients[rand(2) % clients.length]!;
          try {
            if (rand(2) === 0) {
              const ack = await client.put(key, `w${w}-${i}`);
              if (ack.version > (newest.get(key) ?? 0)) newest.set(key, ack.version);
            } else {
              const floor = newest.get(key) ?? 0;
              const got = await client.get(key);
              if ((got?.version ?? 0) < floor) violations.push(`${key}: read v${got?.version} after v${floor} was acknowledged`);
            }
          } catch (e) {
            errors.push(`${key}: ${(e as Error).message}`);
          }
        }
      }),
    );
    stop = true;
    await flipper;
    expect({ errors, violations }).toEqual({ errors: [], violations: [] });
    expect(flips).toBeGreaterThanOrEqual(2);

    // Both servers end on the last version written.
    const last = await admin.policies.get();
    await eventually('both servers on the last policy', () =>
      [a, b].every((s) => s.ctx.livePolicy?.current.view.version === last.version),
    );
    // Every acknowledged write reaches S3, whichever policy acknowledged it.
    const cold = a.ctx.tiers.find((t) => t.name === 'cold')!;
    await eventually('every acknowledged write in S3', async () => {
      for (const [key, version] of newest) {
        const e = await cold.get(ns, key);
        if (!e || e.header.version < version) return false;
      }
      return true;
    });
    const trail = await admin.policies.versions({ limit: 100 });
    expect(trail[0]).toMatchObject({ version: last.version, reason: `flip ${flips - 1}` });
    return flips;
  }

  it('loses no write, never reads backwards and fails no request while the policy flips', async () => {
    const before = (await new StrataClient({ endpoint: a.url, retries: 0 }).policies.get()).version;
    const flips = await flipUnderLoad([writeBack, writeThrough]);
    expect((await new StrataClient({ endpoint: a.url, retries: 0 }).policies.versions({ limit: 100 })).length).toBe(
      before + flips,
    );
  });

  it('within one container, its near cache keeps every acknowledged write while the policy flips', async () => {
    await flipUnderLoad([writeBackL1, writeThroughL1], { ns: NS_L1, one: b });
    expect((await b.ctx.coordinator.stats()).tiers.find((t) => t.name === 'l1')!.hits).toBeGreaterThan(0);
  });

  const coldOnly = {
    namespaces: { [NS]: noNearCache },
    rules: [{ id: 'cold-only', scope: { namespace: NS }, on: { action: 'put' }, do: [{ store: { tiers: ['cold'] } }] }],
  };

  it('shadows the copy an earlier placement left in hot when a write skips hot', async () => {
    // Without the location marker a write that skips hot leaves there, a read (which walks hot first) would return
    // the older copy.
    const admin = new StrataClient({ endpoint: a.url, retries: 0 });
    const client = new StrataClient({ endpoint: a.url, namespace: NS, retries: 0 });
    const inForce = async (doc: unknown) => {
      const put = await admin.policies.put(doc, { ifVersion: (await admin.policies.get()).version });
      await eventually('both servers on it', () => [a, b].every((s) => s.ctx.livePolicy?.current.view.version === put.version));
    };
    await inForce(writeThrough);
    await client.put('moved', 'in hot and S3');
    await inForce(coldOnly);
    const ack = await client.put('moved', 'in S3 only');
    for (const s of [a, b]) {
      const got = await new StrataClient({ endpoint: s.url, namespace: NS, retries: 0 }).get('moved');
      expect({ version: got?.version, value: got ? Buffer.from(got.value).toString() : undefined }).toEqual({
        version: ack.version,
        value: 'in S3 only',
      });
    }
  });

  it('never reads backwards while placement moves the namespace out of hot and back under load', async () => {
    expect(await flipUnderLoad([writeThrough, coldOnly, writeBack, coldOnly])).toBeGreaterThanOrEqual(4);
  });

  it('writes down what write-back acknowledged when the policy switches to write-through, without waiting for traffic', async () => {
    const admin = new StrataClient({ endpoint: a.url, retries: 0 });
    const client = new StrataClient({ endpoint: a.url, namespace: NS, retries: 0 });
    const slow = { namespaces: { [NS]: { preset: 'low-latency', with: { flushSeconds: 600 } } } };
    let cur = await admin.policies.get();
    cur = await admin.policies.put(slow, { ifVersion: cur.version, reason: 'write-back, flushed every 10 min' });
    await eventually('server a on write-back', () => a.ctx.livePolicy?.current.view.version === cur.version);
    // Writes acknowledged from hot alone (durable: false). A write hot cannot take (full of dirty data, or busy with
    // another suite's fault) goes through instead and proves nothing here, so write until ten went write-back.
    const dirty = new Map<string, number>();
    for (let i = 0; dirty.size < 10 && i < 500; i++) {
      const ack = await client.put(`wb${i}`, `v${i}`);
      if (ack.durable === false) dirty.set(`wb${i}`, ack.version);
    }
    expect(dirty.size).toBe(10);
    await admin.policies.put(writeThrough, { ifVersion: cur.version, reason: 'back to write-through' });
    // No request reaches server a from here on: only its flusher can write the dirty entries down.
    const cold = a.ctx.tiers.find((t) => t.name === 'cold')!;
    await eventually('the write-back data in S3', async () => {
      for (const [key, version] of dirty) if ((await cold.get(NS, key))?.header.version !== version) return false;
      return true;
    });
  });
});
