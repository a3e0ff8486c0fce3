/**
 * storeOnce (paper 003, Table 1) over real tiers: redis-server as hot, a cache-node process as warm, LocalStack S3 or
 * the folder tier as cold. Identical values written under many keys are stored once per tier and read back under
 * each; the garbage collector removes a blob once no key refers to it, never one a key refers to, including when a
 * writer refers to it again while it is being collected; and under concurrent identical writes, deletes and
 * collections, no acknowledged write is lost and no deleted key comes back.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { BLOB_KEY_PREFIX } from '../../core/model/entry.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { collectBlobs } from '../../core/policy/dedup-gc.js';
import { supportsScan, type Tier } from '../../core/tiers/tier.js';
import { startTierStack, type ColdKind, type TierStack } from './tier-stack.js';

const SHARED = Buffer.from('a large shared attachment; '.repeat(400));

/** Keys and blobs a tier holds in `ns` (its scan, tombstones and expired entries left out). */
async function census(tier: Tier, ns: string): Promise<{ blobs: number; blobBytes: number; keys: number }> {
  if (!supportsScan(tier)) throw new Error('no scan');
  const out = { blobs: 0, blobBytes: 0, keys: 0 };
  let cursor: string | null = null;
  do {
    const page = await tier.scan(ns, { cursor, limit: 500 });
    cursor = page.cursor;
    for (const { key, header } of page.items) {
      if (header.flags.tombstone || header.flags.elsewhere) continue;
      if (key.startsWith(BLOB_KEY_PREFIX)) {
        out.blobs++;
        out.blobBytes += header.size;
      } else out.keys++;
    }
  } while (cursor !== null);
  return out;
}

describe.each(['folder', 's3'] as ColdKind[])('storeOnce over redis, a cache node and %s', (coldKind) => {
  let stack: TierStack;
  let coordinator: Coordinator;
  let n = 0;
  const freshNs = () => `once${++n}`;
  const policyFor = (ns: string) => compilePolicyInput({ namespaces: { [ns]: { preset: 'dedup' } } }).registry;
  const collect = (ns: string, extra: Partial<Parameters<typeof collectBlobs>[0]> = {}) =>
    collectBlobs({ ns, authority: stack.cold, tiers: [stack.hot, stack.warm, stack.cold], graceMs: 0, ...extra });

  beforeAll(async () => {
    stack = await startTierStack(coldKind);
  });
  afterAll(async () => {
    await coordinator?.close();
    await stack?.close();
  });
  const coordinatorFor = (ns: string): Coordinator => {
    const c = new Coordinator({
      tiers: [stack.hot, stack.warm, stack.cold],
      policies: policyFor(ns),
      flushTimer: false,
      hotFence: false,
    });
    coordinator = c;
    return c;
  };

  it('stores identical values once per tier and reads each key back', async () => {
    const ns = freshNs();
    const c = coordinatorFor(ns);
    for (let i = 0; i < 20; i++) expect((await c.put(ns, `copy${i}`, SHARED)).size).toBe(SHARED.length);
    await c.put(ns, 'other', Buffer.from('something else'));
    for (const tier of [stack.hot, stack.warm, stack.cold]) {
      const seen = await census(tier, ns);
      expect({ tier: tier.name, ...seen }).toEqual({
        tier: tier.name,
        blobs: 2,
        blobBytes: SHARED.length + 'something else'.length,
        keys: 21,
      });
    }
    for (let i = 0; i < 20; i++) expect((await c.get(ns, `copy${i}`))!.entry.value).toEqual(SHARED);
    expect(await c.head(ns, 'copy3')).toMatchObject({ header: { size: SHARED.length }, transformed: true });
  });

  it('collects a blob once no key refers to it, and never before', async () => {
    const ns = freshNs();
    const c = coordinatorFor(ns);
    await c.put(ns, 'a', SHARED);
    await c.put(ns, 'b', SHARED);
    await c.delete(ns, 'a');
    expect(await collect(ns)).toMatchObject({ blobs: 1, references: 1, removed: 0 });
    expect((await c.get(ns, 'b'))!.entry.value).toEqual(SHARED);
    await c.delete(ns, 'b');
    expect(await collect(ns)).toMatchObject({ blobs: 1, references: 0, condemned: 1, removed: 1 });
    for (const tier of [stack.hot, stack.warm, stack.cold]) expect((await census(tier, ns)).blobs).toBe(0);
    expect(await c.get(ns, 'b')).toBeUndefined();
    // Written again later: a new blob, read back.
    await c.put(ns, 'c', SHARED);
    expect((await c.get(ns, 'c'))!.entry.value).toEqual(SHARED);
  });

  it('keeps a blob a writer refers to while the collector is removing it', async () => {
    const ns = freshNs();
    const c = coordinatorFor(ns);
    await c.put(ns, 'old', SHARED);
    await c.delete(ns, 'old');
    // Between the condemnation and the collector's second scan, a new key refers to the same content.
    const r = await collect(ns, { afterCondemn: async () => void (await c.put(ns, 'new', SHARED)) });
    expect(r).toMatchObject({ condemned: 1, removed: 0, reprieved: 1 });
    expect((await c.get(ns, 'new'))!.entry.value).toEqual(SHARED);
    // The writer looked again after writing its key and saw the condemnation: the blob is live again, unflagged.
    expect((await stack.cold.head(ns, `${BLOB_KEY_PREFIX}${(await stack.cold.head(ns, 'new'))!.encoding!.blob}`))!.flags).toEqual(
      {},
    );
    expect(await collect(ns)).toMatchObject({ removed: 0, references: 1 });
  });

  it('rewrites a blob the collector removed between a writer checking for it and writing its key', async () => {
    const ns = freshNs();
    // The writer's key reaches cold only once the gate opens: the collector runs in between.
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const gated: Tier = Object.create(stack.cold) as Tier;
    gated.put = async (n, k, e, o) => {
      if (k === 'late') await gate;
      return stack.cold.put(n, k, e, o);
    };
    const c = new Coordinator({
      tiers: [stack.hot, stack.warm, gated],
      policies: policyFor(ns),
      flushTimer: false,
      hotFence: false,
    });
    await c.put(ns, 'early', SHARED);
    await c.delete(ns, 'early');
    const writing = c.put(ns, 'late', SHARED); // finds the blob live, then writes its key (held at the gate)
    await new Promise((r) => setTimeout(r, 50));
    expect(await collect(ns)).toMatchObject({ condemned: 1, removed: 1 }); // it saw no key referring to it
    open();
    await writing; // looked again after writing its key: the blob was gone, so it wrote it again
    expect((await c.get(ns, 'late'))!.entry.value).toEqual(SHARED);
    await c.drain(); // not close(): the tiers are shared by the whole file
  });

  it('never loses an acknowledged write nor resurrects a deleted key under concurrent writes, deletes and collections', async () => {
    const ns = freshNs();
    const c = coordinatorFor(ns);
    const values = [SHARED, Buffer.from('second shared value '.repeat(50))];
    const last = new Map<string, { version: number; value: Buffer | undefined }>();
    let seed = 7;
    const rand = (k: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % k;
    };
    let collecting = true;
    const collector = (async () => {
      let runs = 0;
      while (collecting || runs < 1) {
        await collect(ns);
        runs++;
      }
      return runs;
    })();
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        for (let i = 0; i < 25; i++) {
          const key = `k${rand(5)}`;
          if (rand(3) === 0) {
            const d = await c.delete(ns, key);
            if (d.version > (last.get(key)?.version ?? 0)) last.set(key, { version: d.version, value: undefined });
          } else {
            const value = values[rand(2)]!;
            const w = await c.put(ns, key, value);
            if (w.version > (last.get(key)?.version ?? 0)) last.set(key, { version: w.version, value });
          }
        }
      }),
    );
    collecting = false;
    expect(await collector).toBeGreaterThanOrEqual(1);
    await collect(ns); // one more, after the writers stopped
    for (const [key, want] of last) {
      const got = await c.get(ns, key);
      expect({ key, value: got?.entry.value.toString() }).toEqual({ key, value: want.value?.toString() });
    }
  });
});
