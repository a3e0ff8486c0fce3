import { initialRing, parseRingDocument, type RingDocument } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { Migrator, type MigrationEvent } from '../../core/nodes/migration.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { eventually, localFleet, SECRET } from './warm-fixtures.js';
import { KEYS, summary, Workload } from './warm-workload.js';

interface Cluster {
  fleet: ReturnType<typeof localFleet>;
  store: RingStore;
  client: NodeClient;
  migrator: Migrator;
  events: MigrationEvent[];
  urls: Record<string, string>;
  close(): Promise<void>;
}

async function cluster(): Promise<Cluster> {
  const fleet = localFleet();
  const launched = await Promise.all(['n1', 'n2', 'n3'].map((id) => fleet.launch(id)));
  const urls = Object.fromEntries(launched.map((n) => [n.nodeId, n.url]));
  const cas = new InMemoryCasStore();
  const store = new RingStore(cas);
  const ring = await store.create(
    initialRing(
      launched.map((n) => ({ id: n.nodeId, url: n.url })),
      2,
    ),
  );
  const client = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  await Promise.all(launched.map((n) => client.pushRing(n.url, ring)));
  const events: MigrationEvent[] = [];
  const migrator = new Migrator({ ring: store, docs: cas, client, fleet, onEvent: (e) => events.push(e) });
  return {
    fleet,
    store,
    client,
    migrator,
    events,
    urls,
    close: async () => {
      await client.close();
      await fleet.closeAll();
    },
  };
}

async function nodeKeys(c: Cluster, ids: string[]): Promise<Record<string, number>> {
  return Object.fromEntries(await Promise.all(ids.map(async (id) => [id, (await c.client.stats(c.urls[id]!)).keys] as const)));
}

describe('scale-out 3 -> 4 under read/write load (real processes, 20,000 keys)', () => {
  it('incremental: zero errors, no acknowledged write lost, the new node serves before the migration ends; then scale-in drains it back', async () => {
    const c = await cluster();
    const w = new Workload(c.store);
    try {
      await w.load();
      w.start();
      await new Promise((r) => setTimeout(r, 500));
      const n4 = await c.fleet.launch('n4');
      c.urls.n4 = n4.url;
      expect(n4.allocationMs).toBeGreaterThan(0);
      const plan = await c.migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'incremental' });
      expect(plan.sessions).toHaveLength(3);
      const started = Date.now();
      await c.migrator.run(plan.id, { rateBytesPerSec: 400_000, graceMs: 200 });
      const ended = Date.now();
      await new Promise((r) => setTimeout(r, 300));
      const opsAtEnd = w.ops;
      await w.stop();
      expect(summary(w)).toBe(summary({ ...w, errors: [], staleReads: [] } as unknown as Workload));
      expect(w.ops).toBeGreaterThan(1000);
      expect(opsAtEnd).toBeGreaterThan(0);

      const ring = parseRingDocument(await c.store.load());
      expect(ring.nodes.find((n) => n.id === 'n4')!.state).toBe('NORMAL');
      expect(ring.ranges.some((r) => r.pending)).toBe(false);
      expect(ring.ranges.filter((r) => r.owner === 'n4').length).toBeGreaterThanOrEqual(1);

      // Step-wise: the new node served its first request while later sessions were still to come.
      const published = c.events.filter((e) => e.type === 'published').map((e) => e.at);
      expect(published).toHaveLength(3);
      const first = (await c.client.stats(n4.url)).firstServedAt!;
      expect(first).toBeGreaterThanOrEqual(started);
      expect(first).toBeLessThan(published[2]!);
      expect(first).toBeLessThan(ended);

      const { missing } = await w.verify(c.store);
      expect(missing).toEqual([]);

      // Sources drop what they handed over after the grace period; no key is lost or duplicated.
      await new Promise((r) => setTimeout(r, 250));
      await expect(c.migrator.cleanupDue(plan.id)).resolves.toBe(3);
      const counts = await nodeKeys(c, ['n1', 'n2', 'n3', 'n4']);
      expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(KEYS);
      expect(counts.n4).toBeGreaterThan(KEYS / 8);

      // Scale-in: drain n4 back to its successors under load, then it leaves the ring and is terminated.
      const w2 = new Workload(c.store);
      w2.acked.set(w.acked);
      w2.start(4);
      const drain = await c.migrator.planScaleIn({ node: 'n4', mode: 'incremental' });
      // The grace period (> the clients' 1 s ring refresh) lets stale clients move on before n4 is terminated.
      await c.migrator.run(drain.id, { rateBytesPerSec: 2_000_000, graceMs: 1500 });
      await w2.stop();
      expect(summary(w2)).toBe(summary({ ...w2, errors: [], staleReads: [] } as unknown as Workload));
      const after = parseRingDocument(await c.store.load());
      expect(after.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3']);
      expect(c.fleet.running('n4')).toBe(false);
      expect((await w2.verify(c.store)).missing).toEqual([]);
      await w2.close();
    } finally {
      await w.stop();
      await w.close();
      await c.close();
    }
  }, 300_000);

  it('parallel (baseline): zero errors, no acknowledged write lost, the new node serves only at the end', async () => {
    const c = await cluster();
    const w = new Workload(c.store);
    try {
      await w.load();
      w.start();
      const n4 = await c.fleet.launch('n4');
      c.urls.n4 = n4.url;
      const plan = await c.migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'parallel' });
      await c.migrator.run(plan.id, { rateBytesPerSec: 400_000, graceMs: 0 });
      await new Promise((r) => setTimeout(r, 300));
      await w.stop();
      expect(summary(w)).toBe(summary({ ...w, errors: [], staleReads: [] } as unknown as Workload));
      const streamed = c.events.filter((e) => e.type === 'streamed').map((e) => e.at);
      const published = c.events.filter((e) => e.type === 'published').map((e) => e.at);
      expect(streamed).toHaveLength(3);
      expect(published).toHaveLength(3);
      // Nothing is served by the new node before every stream has finished.
      expect((await c.client.stats(n4.url)).firstServedAt!).toBeGreaterThanOrEqual(Math.max(...streamed));
      const ring = parseRingDocument(await c.store.load());
      expect(ring.nodes.find((n) => n.id === 'n4')!.state).toBe('NORMAL');
      expect((await w.verify(c.store)).missing).toEqual([]);
      await expect(c.migrator.cleanupDue(plan.id)).resolves.toBe(3);
      const counts = await nodeKeys(c, ['n1', 'n2', 'n3', 'n4']);
      expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(KEYS);
    } finally {
      await w.stop();
      await w.close();
      await c.close();
    }
  }, 300_000);

  it('kill -9 of a source mid-stream: the run fails, the ring stays consistent, and resuming after a restart loses nothing', async () => {
    const c = await cluster();
    const w = new Workload(c.store);
    try {
      await w.load();
      const n4 = await c.fleet.launch('n4');
      c.urls.n4 = n4.url;
      const plan = await c.migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'incremental' });
      const victim = (await c.migrator.session(plan.sessions[0]!)).source;
      w.start(4);
      let killed = false;
      const killing = eventually(
        () => c.events.some((e) => e.type === 'progress' && e.session.id === plan.sessions[0] && e.session.copied.keys > 0),
        20_000,
        'first progress',
      ).then(async () => {
        await c.fleet.kill(victim, 'SIGKILL');
        killed = true;
      });
      // Small batches and a slow rate so the kill lands mid-stream.
      await expect(c.migrator.run(plan.id, { rateBytesPerSec: 100_000, batchBytes: 16 * 1024 })).rejects.toThrow();
      await killing;
      expect(killed).toBe(true);
      const mid = await c.migrator.session(plan.sessions[0]!);
      expect(mid.state).toBe('prepared');
      expect(mid.cursor).not.toBeNull();
      const copiedAtKill = mid.copied.keys;
      expect(copiedAtKill).toBeGreaterThan(0);
      expect(copiedAtKill).toBeLessThan(mid.planned.keys);
      // The ring is still a valid document: the span is pending to n4, still owned by the source.
      const ringMid = parseRingDocument(await c.store.load());
      expect(ringMid.ranges.filter((r) => r.pending?.session === mid.id).every((r) => r.owner === victim)).toBe(true);

      await c.fleet.restart(victim);
      await c.migrator.run(plan.id, { rateBytesPerSec: 1_000_000, graceMs: 0 });
      await new Promise((r) => setTimeout(r, 200));
      await w.stop();
      const done = await c.migrator.session(plan.sessions[0]!);
      // Resumed from the cursor: the span was not copied again from the start.
      expect(done.copied.keys).toBeLessThan(mid.planned.keys + copiedAtKill);
      expect(done.copied.keys).toBeGreaterThanOrEqual(mid.planned.keys);
      const ring: RingDocument = parseRingDocument(await c.store.load());
      expect(ring.ranges.some((r) => r.pending)).toBe(false);
      expect(ring.nodes.find((n) => n.id === 'n4')!.state).toBe('NORMAL');
      // Requests to the dead node's ranges failed while it was down (never acknowledged); nothing acknowledged is lost.
      expect((await w.verify(c.store)).missing).toEqual([]);
      expect(w.staleReads).toEqual([]);
    } finally {
      await w.stop();
      await w.close();
      await c.close();
    }
  }, 300_000);

  it('rollback before publish releases the pending span and clears the target copy', async () => {
    const c = await cluster();
    const w = new Workload(c.store);
    try {
      await w.load();
      const n4 = await c.fleet.launch('n4');
      const plan = await c.migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'parallel' });
      const sid = plan.sessions[0]!;
      await c.migrator.prepare(sid);
      const partial = await c.migrator.stream(sid, { rateBytesPerSec: 100_000, batchBytes: 8 * 1024, maxMs: 400 });
      expect(partial.done).toBe(false);
      expect((await c.client.stats(n4.url)).keys).toBeGreaterThan(0);
      w.start(4);
      await c.migrator.rollbackPlan(plan.id);
      await new Promise((r) => setTimeout(r, 300));
      await w.stop();
      expect(summary(w)).toBe(summary({ ...w, errors: [], staleReads: [] } as unknown as Workload));
      const ring = parseRingDocument(await c.store.load());
      expect(ring.ranges.some((r) => r.pending)).toBe(false);
      expect(ring.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3']);
      expect((await c.migrator.session(sid)).state).toBe('rolled-back');
      expect((await c.client.stats(n4.url)).keys).toBe(0);
      expect((await w.verify(c.store)).missing).toEqual([]);
    } finally {
      await w.stop();
      await w.close();
      await c.close();
    }
  }, 300_000);
});
