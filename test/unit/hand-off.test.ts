/**
 * The hand-off migration (core/nodes/hand-off.ts through the Migrator): planning, the ring edit that ends it, and the
 * settling of both nodes after a rollback, over an in-memory ring store and a recording stand-in for the cache nodes
 * (the sessions' streaming is the shared migration code, run with real nodes in test/workflows/rolling-upgrade.test.ts).
 */
import { finishHandOffEdit } from '../../core/nodes/hand-off.js';
import { Migrator } from '../../core/nodes/migration.js';
import type { NodeClient } from '../../core/nodes/node-client.js';
import { initialRing, ringProblem, type RingDocument } from '../../core/ring/document.js';
import { InMemoryCasStore, RingPreconditionError, RingStore } from '../../core/ring/store.js';

class FakeNodes {
  calls: string[] = [];
  async rangeStats(url: string, start: string, end: string | null) {
    this.calls.push(`rangeStats ${url} ${start}..${end ?? 'top'}`);
    return { keys: 10, bytes: 1000, cut: null };
  }
  async pushRing(url: string, doc: RingDocument) {
    this.calls.push(`pushRing ${url} v${doc.version}`);
    return { installed: true, version: doc.version };
  }
  async deleteRange(url: string, start: string, end: string | null) {
    this.calls.push(`deleteRange ${url} ${start}..${end ?? 'top'}`);
    return 0;
  }
}

const url = (id: string) => `http://127.0.0.1:9/${id}`;
const NEW = { id: 'n4', url: url('n4'), instance: 'i-n4', az: 'local-b' };

async function setup() {
  const cas = new InMemoryCasStore();
  const ring = new RingStore(cas);
  await ring.create(
    initialRing(
      ['n1', 'n2', 'n3'].map((id) => ({ id, url: url(id), instance: `i-${id}` })),
      2,
    ),
  );
  const nodes = new FakeNodes();
  const migrator = new Migrator({ ring, docs: cas, client: nodes as unknown as NodeClient });
  return { ring, nodes, migrator };
}

describe('Migrator.planHandOff', () => {
  it('adds the new node as JOINING, marks the old one LEAVING, and plans one whole-range session per range it owns', async () => {
    const { ring, nodes, migrator } = await setup();
    const before = (await ring.load())!;
    const owned = before.ranges.filter((r) => r.owner === 'n2').map((r) => r.start);
    const plan = await migrator.planHandOff({ from: 'n2', target: NEW, mode: 'incremental', execution: 'e1' });
    expect(plan).toMatchObject({ kind: 'hand-off', node: 'n2', target: 'n4', mode: 'incremental', execution: 'e1' });
    const doc = (await ring.load())!;
    expect(doc.nodes.find((n) => n.id === 'n4')).toMatchObject({ state: 'JOINING', instance: 'i-n4', az: 'local-b' });
    expect(doc.nodes.find((n) => n.id === 'n2')!.state).toBe('LEAVING');
    const sessions = await Promise.all(plan.sessions.map((id) => migrator.session(id)));
    expect(sessions.map((s) => [s.source, s.target, s.span.start, s.state])).toEqual(
      owned.map((start) => ['n2', 'n4', start, 'planned']),
    );
    // Each session is the whole range: it ends where the next range starts.
    for (const s of sessions) {
      const i = doc.ranges.findIndex((r) => r.start === s.span.start);
      expect(s.span.end).toBe(doc.ranges[i + 1]?.start ?? null);
      expect(s.planned).toEqual({ keys: 10, bytes: 1000 });
    }
    // The new node learns the ring first (it takes shadow writes next), then the node handing over.
    expect(nodes.calls.filter((c) => c.startsWith('pushRing')).slice(0, 2)).toEqual([
      `pushRing ${url('n4')} v${doc.version}`,
      `pushRing ${url('n2')} v${doc.version}`,
    ]);
  });

  it('refuses a node that is not NORMAL, or that a migration involves, leaving the ring as it was', async () => {
    const { ring, migrator } = await setup();
    await ring.update((d) => {
      d.nodes.find((n) => n.id === 'n3')!.state = 'LEAVING';
      const r = d.ranges.find((x) => x.owner === 'n1')!;
      r.pending = { target: 'n3', session: 'other' };
    });
    const before = (await ring.load())!;
    await expect(migrator.planHandOff({ from: 'n3', target: NEW, mode: 'incremental' })).rejects.toThrow(
      new RingPreconditionError("node 'n3' is LEAVING: only a NORMAL node is handed off"),
    );
    await expect(migrator.planHandOff({ from: 'n1', target: NEW, mode: 'incremental' })).rejects.toBeInstanceOf(
      RingPreconditionError,
    );
    expect((await ring.load())!.version).toBe(before.version);
  });
});

describe('ending a hand-off', () => {
  it('finish: the new node is NORMAL and the old one leaves the ring, once it owns nothing', async () => {
    const { ring, migrator } = await setup();
    const plan = await migrator.planHandOff({ from: 'n2', target: NEW, mode: 'incremental' });
    const doc = structuredClone((await ring.load())!);
    expect(() => finishHandOffEdit(doc, plan)).toThrow("node 'n2' still owns ranges");
    for (const r of doc.ranges) if (r.owner === 'n2') r.owner = 'n4';
    finishHandOffEdit(doc, plan);
    expect(doc.nodes.map((n) => [n.id, n.state])).toEqual([
      ['n1', 'NORMAL'],
      ['n3', 'NORMAL'],
      ['n4', 'NORMAL'],
    ]);
  });

  it('a rollback before anything was published: the new node leaves the ring, the old one is NORMAL with every range', async () => {
    const { ring, migrator } = await setup();
    const before = (await ring.load())!;
    const plan = await migrator.planHandOff({ from: 'n2', target: NEW, mode: 'incremental', execution: 'e1' });
    await migrator.prepare(plan.sessions[0]!, { execution: 'e1' });
    expect((await ring.load())!.ranges.some((r) => r.pending)).toBe(true);
    const rolled = await migrator.rollbackPlan(plan.id, { execution: 'e1', reason: 'test' });
    expect(rolled.state).toBe('rolled-back');
    const doc = (await ring.load())!;
    expect(ringProblem(doc)).toBeUndefined();
    expect(doc.ranges.filter((r) => r.pending)).toEqual([]);
    expect(doc.nodes.map((n) => [n.id, n.state])).toEqual([
      ['n1', 'NORMAL'],
      ['n2', 'NORMAL'],
      ['n3', 'NORMAL'],
    ]);
    expect(doc.ranges.map((r) => [r.start, r.owner])).toEqual(before.ranges.map((r) => [r.start, r.owner]));
    // Idempotent: a second rollback changes nothing.
    await migrator.rollbackPlan(plan.id, { execution: 'e1' });
    expect((await ring.load())!.version).toBe(doc.version);
  });

  it('a rollback after one range was published: both nodes stay NORMAL, each with its share; after the last, the old node leaves', async () => {
    const { ring, migrator } = await setup();
    const plan = await migrator.planHandOff({ from: 'n2', target: NEW, mode: 'incremental', execution: 'e1' });
    const [first, second] = await Promise.all(plan.sessions.map((id) => migrator.session(id)));
    // As publish leaves it: the first range owned by the new node, its session published.
    await ring.update((d) => {
      d.ranges.find((r) => r.start === first!.span.start)!.owner = 'n4';
    });
    await migrator.sessions.update(first!.id, (s) => ({ ...s, state: 'published' }));
    await migrator.rollbackPlan(plan.id, { execution: 'e1', reason: 'test' });
    let doc = (await ring.load())!;
    expect(ringProblem(doc)).toBeUndefined();
    expect(doc.nodes.map((n) => [n.id, n.state])).toEqual([
      ['n1', 'NORMAL'],
      ['n2', 'NORMAL'],
      ['n3', 'NORMAL'],
      ['n4', 'NORMAL'],
    ]);
    expect(doc.ranges.find((r) => r.start === first!.span.start)!.owner).toBe('n4');
    expect(doc.ranges.find((r) => r.start === second!.span.start)!.owner).toBe('n2');

    // Every range handed over before the failure (it came after the last publish): the old node leaves the ring.
    const again = await setup();
    const p2 = await again.migrator.planHandOff({ from: 'n2', target: NEW, mode: 'incremental', execution: 'e2' });
    await again.ring.update((d) => {
      for (const r of d.ranges) if (r.owner === 'n2') r.owner = 'n4';
    });
    for (const id of p2.sessions) await again.migrator.sessions.update(id, (s) => ({ ...s, state: 'published' }));
    await again.migrator.rollbackPlan(p2.id, { execution: 'e2', reason: 'test' });
    doc = (await again.ring.load())!;
    expect(ringProblem(doc)).toBeUndefined();
    expect(doc.nodes.map((n) => [n.id, n.state])).toEqual([
      ['n1', 'NORMAL'],
      ['n3', 'NORMAL'],
      ['n4', 'NORMAL'],
    ]);
  });
});
