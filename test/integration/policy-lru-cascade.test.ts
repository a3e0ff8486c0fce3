/**
 * Selection by access over a real cache node (paper 003's LRU cascade): the node records each entry's reads, the
 * warm tier's scan hands them to the data mover, and a move or delete by idleSeconds takes exactly the entries not
 * read for that long. What must hold: a restart never makes everything look idle; an entry without facts (a node
 * that predates them, a pinned entry) is never taken; the lru-cascade preset runs end to end through the background
 * evaluator, and every acknowledged write still reads back, those warm let go from cold. The preset's cascade is
 * inclusive (cold holds every write, the cascade frees warm by deleting its idle copies), not the paper's exclusive
 * one: a warm range lives on one cache node, so warm may never hold a write's only durable copy.
 *
 * Timing: the node keeps access times to the second, so the tests let one second pass between the writes and the
 * reads, then run the mover on an injected clock placed between the two; nothing asserts on elapsed time.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { LOGICAL_BITS } from '../../core/model/hlc.js';
import { NodeClient, type ExportOptions } from '../../core/nodes/node-client.js';
import type { EntryRecord } from '../../core/nodes/wire.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { runTransfer, type TransferSpec } from '../../core/policy/data-mover.js';
import { BackgroundEvaluator } from '../../core/policy/evaluator.js';
import { transferSpecOver } from '../../core/policy/job-runner.js';
import type { RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeStore } from '../../cachenode/src/store.js';
import type { ExportTrailer } from '../../core/nodes/node-client.js';
import { entry, eventually, localFleet, oneNodeWarmTier, SECRET, tempDir } from './warm-fixtures.js';

const HOUR_MS = 3600_000;
let counter = 0;
const freshNs = () => `lru${++counter}`;
const versionNow = (n = 0) => Date.now() * LOGICAL_BITS + n;

/** Waits until the wall clock is past `ms` (the node's access clock has whole seconds). */
async function clockPast(ms: number): Promise<void> {
  while (Date.now() <= ms) await new Promise((r) => setTimeout(r, ms - Date.now() + 5));
}

/** A client for a node that predates access facts: it never receives them (such a node ignores `access=1`). */
class OldNodeClient extends NodeClient {
  override exportRange(url: string, o: ExportOptions): AsyncGenerator<EntryRecord, ExportTrailer> {
    return super.exportRange(url, { ...o, access: false });
  }
}

describe('NodeStore access facts (an injected clock)', () => {
  const tmp = tempDir('strata-access-');
  afterAll(() => tmp.remove());

  it('records reads through get, not heads or range sweeps, and a reopened store starts every key at its start', async () => {
    let now = 1_700_000_000_000;
    const open = () => new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
    let store = open();
    const sk = (k: string) => Buffer.from(store.scan('0000000000000000', null, undefined, 10).find((i) => i.key === k)!.sk);
    await store.put('n', 'read', entry(1, 'r'));
    now += 10_000;
    await store.put('n', 'unread', entry(1, 'u'));
    await store.settle();
    now += 5_500;
    store.get('n', 'read');
    store.get('n', 'read');
    store.head('n', 'unread');
    store.visitRange('0000000000000000', null, undefined, 10, true, () => true);
    const start = store.startedAt;
    expect(store.accessOf(sk('read'))).toEqual({ lastAccessMs: start + 15_000, count: 2 });
    expect(store.accessOf(sk('unread'))).toEqual({ lastAccessMs: start + 10_000, count: 0 });
    await store.close();
    now += HOUR_MS;
    store = open();
    for (const k of ['read', 'unread']) expect(store.accessOf(sk(k))).toEqual({ lastAccessMs: now, count: 0 });
    await store.close();
  });
});

describe('selection by access over a cache node (warm) and the folder tier (cold)', () => {
  const fleet = localFleet();
  const nodes = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  const old = new OldNodeClient({ secret: SECRET, timeoutMs: 5000 });
  const folder = tempDir('strata-lru-cold-');
  let nodeId: string;
  let nodeUrl: string;
  let ringStore: RingStore;
  let warm: WarmTier;
  let cold: LocalFolderTier;

  beforeAll(async () => {
    ({ nodeId, url: nodeUrl, ringStore, warm } = await oneNodeWarmTier(fleet, nodes, 'lru1'));
    cold = new LocalFolderTier({ dir: folder.dir, fsync: false });
  });
  afterAll(async () => {
    await warm?.close();
    await cold?.close();
    await nodes.close();
    await old.close();
    await fleet.closeAll();
    folder.remove();
  });

  const move = (ns: string, what: TransferSpec['what'], from = warm): TransferSpec => ({
    rule: 'test',
    kind: 'move',
    ns,
    from,
    to: [cold],
    what,
    durable: [from, cold],
  });
  const idleAtLeast = (seconds: number): TransferSpec['what'] => [{ object: 'idleSeconds', op: '>=', value: seconds }];

  /**
   * Writes `keys`, lets a second pass, reads `read` (each as often as it appears), and answers a mover clock at which
   * whatever was read is idle just under an hour and whatever was not read, at least an hour.
   */
  async function writeThenRead(ns: string, keys: string[], read: string[]): Promise<number> {
    for (const [i, k] of keys.entries()) await warm.put(ns, k, entry(versionNow(i), `value ${k}`));
    const written = Date.now();
    await clockPast(written + 1000);
    const readFrom = Date.now();
    for (const k of read) expect((await warm.get(ns, k))!.value.toString()).toBe(`value ${k}`);
    // A read at or after readFrom is recorded no earlier than readFrom - 1 s (whole seconds): idle < 1 h here.
    return readFrom - 1000 + HOUR_MS;
  }

  it('the warm scan carries each entry’s reads, and a move by idleSeconds takes exactly the idle ones', async () => {
    const ns = freshNs();
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    const clock = await writeThenRead(ns, keys, ['b', 'd', 'd', 'f']);
    const { items } = await warm.scan(ns, { limit: 100 });
    const counts = Object.fromEntries(items.map((i) => [i.key, i.access?.count]));
    expect(counts).toEqual({ a: 0, b: 1, c: 0, d: 2, e: 0, f: 1 });
    // accessCount: a copy of what was read at least twice.
    const twice = await runTransfer({ ...move(ns, [{ object: 'accessCount', op: '>=', value: 2 }]), kind: 'copy' });
    expect(twice).toMatchObject({ scanned: 6, selected: 1, copied: 1 });
    await cold.delete(ns, 'd');
    const r = await runTransfer(move(ns, idleAtLeast(3600)), { now: () => clock });
    expect(r).toMatchObject({ scanned: 6, selected: 3, copied: 3, removed: 3 });
    for (const k of ['a', 'c', 'e']) {
      expect(await warm.head(ns, k)).toBeUndefined();
      expect((await cold.get(ns, k))!.value.toString()).toBe(`value ${k}`);
    }
    for (const k of ['b', 'd', 'f']) {
      expect((await warm.get(ns, k))!.value.toString()).toBe(`value ${k}`);
      expect(await cold.head(ns, k)).toBeUndefined();
    }
  });

  it('a background copy is not a read: entries it copies stay as idle as they were', async () => {
    const ns = freshNs();
    const clock = await writeThenRead(ns, ['p', 'q'], ['q']);
    // A backup of everything (a copy rule from warm to cold) reads each entry from the node with a peek.
    expect(await runTransfer({ ...move(ns, []), kind: 'copy' })).toMatchObject({ selected: 2, copied: 2 });
    const { items } = await warm.scan(ns, { limit: 100 });
    expect(Object.fromEntries(items.map((i) => [i.key, i.access?.count]))).toEqual({ p: 0, q: 1 });
    // So the unread one is still idle for the cascade.
    const r = await runTransfer({ ...move(ns, idleAtLeast(3600)), kind: 'delete' }, { now: () => clock });
    expect(r).toMatchObject({ selected: 1, removed: 1 });
    expect(await warm.head(ns, 'p')).toBeUndefined();
    expect((await cold.get(ns, 'p'))!.value.toString()).toBe('value p');
  });

  it('an export asked for access facts carries them; one that is not (an older client) gets none', async () => {
    const ns = freshNs();
    await warm.put(ns, 'k', entry(versionNow(), 'v'));
    await warm.get(ns, 'k');
    const records = async (access: boolean) => {
      const out: EntryRecord[] = [];
      const it = nodes.exportRange(nodeUrl, { start: '0000000000000000', end: null, headersOnly: true, access });
      for (let r = await it.next(); !r.done; r = await it.next()) if (r.value.ns === ns) out.push(r.value);
      return out;
    };
    expect((await records(true)).map((r) => r.access?.count)).toEqual([1]);
    expect((await records(false)).map((r) => r.access)).toEqual([undefined]);
  });

  it('never takes an entry whose facts are unknown: a node that predates them, or a pinned entry', async () => {
    const ns = freshNs();
    await writeThenRead(ns, ['x', 'y', 'pinned'], []);
    const pinned = (await warm.head(ns, 'pinned'))!;
    expect(await warm.setPinned(ns, 'pinned', pinned.version, true)).toBe(true);
    const farFuture = () => Date.now() + 1000 * HOUR_MS;
    const oldWarm = new WarmTier({ ring: new RingView({ store: ringStore, refreshIntervalMs: 0 }), client: old });
    try {
      const items = (await oldWarm.scan(ns, { limit: 100 })).items;
      expect(items.map((i) => i.access)).toEqual([undefined, undefined, undefined]);
      const viaOld = await runTransfer(move(ns, idleAtLeast(1), oldWarm), { now: farFuture });
      expect(viaOld).toMatchObject({ scanned: 3, selected: 0, removed: 0 });
    } finally {
      await oldWarm.close();
    }
    const r = await runTransfer(move(ns, idleAtLeast(1)), { now: farFuture });
    expect(r).toMatchObject({ scanned: 3, selected: 2, removed: 2 });
    expect(await warm.head(ns, 'pinned')).toBeDefined();
    expect(await cold.head(ns, 'pinned')).toBeUndefined();
  });

  it('a node restart does not make everything look idle: its entries count as accessed at its start', async () => {
    const ns = freshNs();
    // Idle for a second by the time the node stops, never read.
    await writeThenRead(ns, ['p', 'q', 'r'], []);
    const beforeRestart = Date.now();
    await fleet.stop(nodeId);
    await fleet.restart(nodeId);
    await eventually(async () => (await warm.head(ns, 'p').catch(() => undefined)) !== undefined, 10_000, 'the restarted node');
    const { items } = await warm.scan(ns, { limit: 100 });
    expect(items).toHaveLength(3);
    for (const i of items) {
      expect(i.access!.count).toBe(0);
      expect(i.access!.lastAccessMs).toBeGreaterThanOrEqual(beforeRestart);
    }
    // Just under an hour after the restart began, nothing has been idle for an hour.
    const none = await runTransfer(move(ns, idleAtLeast(3600)), { now: () => beforeRestart + HOUR_MS - 1 });
    expect(none).toMatchObject({ scanned: 3, selected: 0 });
    // An hour after the node started (whenever that was since), all of it has.
    const all = await runTransfer(move(ns, idleAtLeast(3600)), { now: () => Date.now() + HOUR_MS });
    expect(all).toMatchObject({ scanned: 3, selected: 3, removed: 3 });
  });

  it('lru-cascade keeps every write in cold and frees warm of what it has not read when warm fills', async () => {
    const ns = freshNs();
    const policy = compilePolicyInput(
      { namespaces: { [ns]: { preset: 'lru-cascade', with: { atFillPercent: 80, idleSeconds: 3600 } } } },
      { background: true },
    );
    const coordinator = new Coordinator({ tiers: [warm, cold], policies: policy.registry, flushTimer: false, hotFence: false });
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
    for (const k of keys) await coordinator.put(ns, k, Buffer.from(`${k} v1`));
    // Write-through to warm and cold: cold holds every acknowledged write, so no cache node holds the only copy.
    for (const k of keys) {
      expect((await warm.get(ns, k, { peek: true }))!.value.toString()).toBe(`${k} v1`);
      expect((await cold.get(ns, k))!.value.toString()).toBe(`${k} v1`);
    }
    const written = Date.now();
    await clockPast(written + 1000);
    const readFrom = Date.now();
    for (const k of ['k1', 'k3']) expect((await coordinator.get(ns, k))!.entry.value.toString()).toBe(`${k} v1`);
    const clock = readFrom - 1000 + HOUR_MS;
    let fill = 50;
    const evaluator = new BackgroundEvaluator({
      actions: {
        fleetSize: async () => 1,
        scaling: async () => false,
        scaleOut: async () => 'none',
        scaleIn: async () => 'none',
        transfer: (q) => runTransfer(transferSpecOver([warm, cold], q), { cancelled: q.cancelled, now: () => clock }),
      },
      state: async () => ({ tiers: { warm: { fillPercent: fill } } }),
    });
    expect(await evaluator.tick(policy)).toEqual([]);
    fill = 90;
    expect(await evaluator.tick(policy)).toEqual([
      expect.objectContaining({ rule: `${ns}-cascade`, response: 'delete', outcome: 'done' }),
    ]);
    await evaluator.idle();
    // Nothing is copied (cold has it all): the idle values only leave warm, which frees its room.
    expect(evaluator.firings(1)[0]).toMatchObject({
      outcome: 'done',
      detail: expect.stringMatching(/delete finished: 4 of 6 entries selected, 0 copied \(0 bytes\), 4 removed from the source/),
    });
    for (const k of ['k0', 'k2', 'k4', 'k5']) {
      expect(await warm.head(ns, k)).toBeUndefined();
      expect((await cold.get(ns, k))!.value.toString()).toBe(`${k} v1`);
    }
    // What warm read stays there, and in cold.
    for (const k of ['k1', 'k3']) {
      expect(await warm.head(ns, k)).toBeDefined();
      expect(await cold.head(ns, k)).toBeDefined();
    }
    // A write after the cascade lands in warm and cold, and wins over the older copy.
    await coordinator.put(ns, 'k0', Buffer.from('k0 v2'));
    expect((await cold.get(ns, 'k0'))!.value.toString()).toBe('k0 v2');
    for (const k of keys) {
      const got = await coordinator.get(ns, k);
      expect(got!.entry.value.toString()).toBe(k === 'k0' ? 'k0 v2' : `${k} v1`);
    }
    // A read of a value warm let go promotes it back into warm, where it arrives as just accessed (the cascade in reverse).
    await coordinator.drain();
    const back = (await warm.scan(ns, { limit: 100 })).items.find((i) => i.key === 'k2');
    expect(back?.access?.lastAccessMs).toBeGreaterThan(readFrom - 1000); // to the second
    // (The coordinator is not closed: that would close the tiers this file shares.)
  });
});
