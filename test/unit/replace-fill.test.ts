import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { entry } from '../helpers/tiers.js';
import type { Entry } from '../../core/model/entry.js';
import { initialRing } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { ProgressStore, ScaleLocks } from '../../core/workflows/progress.js';
import { fillBatches, readChunk, replaceSteps } from '../../core/workflows/steps/replace-steps.js';

/** ReplaceNode's fill step over memory tiers standing in for hot, cold and the new node's warm ranges. */
async function setup(o: { keys: number; hotKeys?: string[]; takenOverAt?: number }) {
  const cas = new InMemoryCasStore();
  const ring = new RingStore(cas);
  const doc = initialRing([{ id: 'new', url: 'http://new.invalid:1' }], 1); // it owns everything
  if (o.takenOverAt !== undefined) doc.ranges[0]!.takenOver = { at: o.takenOverAt };
  await ring.create(doc);
  const cold = new MemoryTier({ name: 'cold' });
  const warm = new MemoryTier({ name: 'warm' });
  const hot = new MemoryTier({ name: 'hot' });
  // The keys offered to the node, in order, and the batch puts that carried them.
  const order: string[] = [];
  const batches: number[] = [];
  const put = warm.put.bind(warm);
  warm.put = (ns: string, key: string, e: Entry) => (order.push(key), put(ns, key, e));
  const putMany = warm.putMany.bind(warm);
  warm.putMany = (ns: string, items: { key: string; entry: Entry }[]) => {
    order.push(...items.map((it) => it.key));
    batches.push(items.length);
    return putMany(ns, items);
  };
  for (let i = 0; i < o.keys; i++) await cold.put('ns', `k${i}`, entry(10 + i, `value ${i}`));
  for (const k of o.hotKeys ?? []) await hot.put('ns', k, (await cold.get('ns', k))!);
  let clock = 0;
  const steps = replaceSteps({
    ring,
    nodes: undefined as never,
    progress: new ProgressStore(cas),
    locks: new ScaleLocks(cas),
    metric: () => {},
    // Each reading of the clock moves it 30 ms: a step's time budget is counted in clock readings.
    now: () => (clock += 30),
    sleep: async (ms) => void (clock += ms),
    fleetSubnets: [],
    tiers: { hot, warm, cold },
  });
  const options = { fillNamespaces: ['ns'], rateBytesPerSec: 1e9, fillMaxMs: 100 };
  const fill = (execution: string, cursor: string | null, fillMaxMs = options.fillMaxMs) =>
    steps.fill({ execution, workflow: 'replace-node', nodeId: 'new', cursor, options: { ...options, fillMaxMs } });
  return { fill, warm, order, batches, clock: { set: (ms: number) => (clock = ms), get: () => clock } };
}

describe("ReplaceNode's fill", () => {
  it('copies nothing until the hand-over window of its ranges has ended, then everything', async () => {
    // Taken over at 0 under the default 15 s lease: writes stamped before 17 s skip the node, and those writing
    // around it end by 22 s on their clocks; a copy of an older version waits until 24 s (ring/takeover.ts).
    const { fill, warm, order, clock } = await setup({ keys: 20, takenOverAt: 0 });
    const early = await fill('e0', null, 5000);
    expect(early).toMatchObject({ done: false, cursor: null, keys: 0 });
    expect(order).toHaveLength(0);
    expect(clock.get()).toBeGreaterThanOrEqual(5000); // it waited out its step's time first
    clock.set(24_000);
    expect(await fill('e0', early.cursor, 5000)).toMatchObject({ done: true, keys: 20 });
    expect((await warm.get('ns', 'k19'))?.header.version).toBe(29);
  });

  it('copies every key in steps that stop mid-page, skipping none and repeating none', async () => {
    const { fill, warm, order } = await setup({ keys: 450 });
    let cursor: string | null = null;
    let calls = 0;
    let copied = 0;
    for (;;) {
      const r = await fill('e1', cursor);
      calls++;
      copied += r.keys;
      if (r.done) break;
      cursor = r.cursor;
      expect(calls).toBeLessThan(500);
    }
    expect(calls).toBeGreaterThan(2); // the 100 ms budget (a few clock readings) cut pages short
    expect(copied).toBe(450);
    expect(new Set(order).size).toBe(order.length); // no key offered twice, though steps resumed mid-page
    for (let i = 0; i < 450; i++) expect((await warm.get('ns', `k${i}`))?.header.version).toBe(10 + i);
  });

  it('copies the keys hot holds first', async () => {
    const { fill, order } = await setup({ keys: 300, hotKeys: ['k250', 'k299'] });
    expect(await fill('e2', null, 600_000)).toMatchObject({ done: true, keys: 300 });
    expect(order.slice(0, 2).sort()).toEqual(['k250', 'k299']);
    expect(order).toHaveLength(302); // the cold pass offers them again, refused as not newer
  });

  it('writes to the node in batch puts of at most 64 entries, not one request per entry', async () => {
    const { fill, batches, order } = await setup({ keys: 300 });
    expect(await fill('e4', null, 600_000)).toMatchObject({ done: true, keys: 300 });
    expect(order).toHaveLength(300);
    expect(batches.length).toBeLessThanOrEqual(10);
    expect(Math.max(...batches)).toBeLessThanOrEqual(64);
  });

  it('cuts batches at 64 entries or 1 MiB of values, keeps the order, and sends a larger value alone', () => {
    const item = (key: string, bytes: number) => ({ key, entry: entry(1, 'x'.repeat(bytes)) });
    const small = Array.from({ length: 130 }, (_, i) => item(`s${i}`, 10));
    expect(fillBatches(small).map((b) => b.length)).toEqual([64, 64, 2]);
    const big = [item('a', 600_000), item('b', 600_000), item('huge', 3_000_000), item('c', 10)];
    expect(fillBatches(big).map((b) => b.map((it) => it.key))).toEqual([['a'], ['b'], ['huge'], ['c']]);
    expect(fillBatches([])).toEqual([]);
  });

  it('reads a chunk of at most 128 keys, or until 8 MiB of values are read (the step runs in a Lambda function)', async () => {
    const cold = new MemoryTier({ name: 'cold' });
    const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
    for (const [i, k] of keys.entries()) await cold.put('ns', k, entry(1, 'x'.repeat(i < 200 ? 100 : 200_000)));
    const all = () => true;
    const small = await readChunk(cold, 'ns', keys, 0, all);
    expect([small.end, small.live.length]).toEqual([128, 128]);
    // From k200 on, values of 200 KB: 8 MiB is passed within the second window of 32 reads.
    const large = await readChunk(cold, 'ns', keys, 200, all);
    expect([large.end, large.live.length]).toEqual([264, 64]);
    // Keys not wanted (outside the new node's ranges) are not read; those cold does not hold are skipped.
    const some = await readChunk(cold, 'ns', [...keys.slice(0, 10), 'gone'], 0, (k) => k !== 'k3');
    expect([some.end, some.live.map((it) => it.key)]).toEqual([11, keys.slice(0, 10).filter((k) => k !== 'k3')]);
    expect(some.live[0]!.entry.header.flags).toEqual({});
  });

  it('never replaces a newer version the node took meanwhile', async () => {
    const { fill, warm } = await setup({ keys: 3 });
    await warm.put('ns', 'k1', entry(1000, 'newer'));
    await fill('e3', null, 600_000);
    expect((await warm.get('ns', 'k1'))!.value.toString()).toBe('newer');
  });
});

describe("ReplaceNode's fill without fillNamespaces", () => {
  // In AWS the failure detector starts replace-node with no namespaces (it cannot know them): the fill then walks
  // every namespace the cold tier holds, which the cold tiers list (a folder, or an S3 common prefix, each).
  async function setupListed() {
    const dir = mkdtempSync(join(tmpdir(), 'strata-fill-'));
    const cas = new InMemoryCasStore();
    const ring = new RingStore(cas);
    await ring.create(initialRing([{ id: 'new', url: 'http://new.invalid:1' }], 1));
    const cold = new LocalFolderTier({ dir, fsync: false });
    const warm = new MemoryTier({ name: 'warm' });
    let clock = 0;
    const steps = replaceSteps({
      ring,
      nodes: undefined as never,
      progress: new ProgressStore(cas),
      locks: new ScaleLocks(cas),
      metric: () => {},
      now: () => (clock += 30),
      fleetSubnets: [],
      tiers: { warm, cold },
    });
    const fill = (cursor: string | null, extra: Record<string, unknown> = {}) =>
      steps.fill({
        execution: 'e-listed',
        workflow: 'replace-node',
        nodeId: 'new',
        cursor,
        options: { rateBytesPerSec: 1e9, fillMaxMs: 600_000, ...extra },
      });
    return { dir, cold, warm, fill };
  }

  it('fills every namespace cold lists, and none when given an empty list', async () => {
    const { dir, cold, warm, fill } = await setupListed();
    try {
      for (const ns of ['alpha', 'beta']) for (let i = 0; i < 5; i++) await cold.put(ns, `k${i}`, entry(1 + i, `${ns} ${i}`));
      expect(await fill(null, { fillNamespaces: [] })).toMatchObject({ done: true, keys: 0 });
      expect(await fill(null)).toMatchObject({ done: true, keys: 10 });
      for (const ns of ['alpha', 'beta']) expect((await warm.get(ns, 'k4'))?.value.toString()).toBe(`${ns} 4`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('goes on by name when a namespace appears before the cursor between two steps', async () => {
    const { dir, cold, warm, fill } = await setupListed();
    try {
      await cold.put('bravo', 'k', entry(1, 'b'));
      await cold.put('delta', 'k', entry(1, 'd'));
      // A cursor left in 'delta' (index 1 of [bravo, delta]); then 'charlie' is created: 'delta' is index 2 now.
      const cursor = JSON.stringify({ ns: 1, name: 'delta', pass: 'cold', scan: null });
      await cold.put('charlie', 'k', entry(1, 'c'));
      expect(await fill(cursor)).toMatchObject({ done: true, keys: 1 });
      expect((await warm.get('delta', 'k'))?.value.toString()).toBe('d');
      expect(await warm.get('charlie', 'k')).toBeUndefined(); // before the cursor: not revisited
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
