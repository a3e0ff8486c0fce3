/**
 * The failure detector of cache nodes (core/nodes/health-check.ts): suspicion from coordinator reports,
 * confirmation by probes with flap damping, the DOWN mark by ring CAS, the caps against false-positive storms,
 * pause, status, the HTTP probe, and what AWS's scheduled checker needs: probing every node each tick (probeAll),
 * one call for the whole fleet (a batch probe) and its state kept between runs (snapshot / restore). A fake probe and an
 * injected clock: no real time is asserted on.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeHealthChecker, type NodeHealthCheckerOptions } from '../../core/nodes/health-check.js';
import { httpProbe, type BatchNodeProbe, type ProbeAnswer } from '../../core/nodes/health-probe.js';
import { MARKED_HISTORY } from '../../core/nodes/health-snapshot.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { addNode, initialRing, markDown, removeNode, type RingDocument, type RingNode } from '../../core/ring/document.js';
import { CasConflictError, InMemoryCasStore, RingStore, type CasStore } from '../../core/ring/store.js';

const NODES = ['a', 'b', 'c', 'd'].map((id) => ({ id, url: `http://${id}.test:7070` }));
const T0 = 1_700_000_000_000;
const REFUSED: ProbeAnswer = { result: 'down', detail: 'connect ECONNREFUSED 10.0.0.2:7070' };

/** A probe answering what the test says per node ('ok' by default), recording who it was asked about. */
class FakeProbe {
  readonly answers = new Map<string, ProbeAnswer | ((n: RingNode) => Promise<ProbeAnswer>)>();
  calls: string[] = [];
  readonly fn = async (n: RingNode): Promise<ProbeAnswer> => {
    this.calls.push(n.id);
    const a = this.answers.get(n.id) ?? 'ok';
    return typeof a === 'function' ? a(n) : a;
  };
  set(ids: string[], answer: ProbeAnswer): void {
    for (const id of ids) this.answers.set(id, answer);
  }
}

interface Ctx {
  cas: InMemoryCasStore;
  ring: RingStore;
  probe: FakeProbe;
  checker: NodeHealthChecker;
  logs: { level: string; message: string; fields: Record<string, unknown> }[];
  metrics: { name: string; value: number; dims?: Record<string, string> }[];
  clock: { t: number };
}

async function setup(
  opts: Partial<NodeHealthCheckerOptions> = {},
  nodes = NODES,
  shared?: { cas: CasStore; ring: RingStore },
): Promise<Ctx> {
  const cas = new InMemoryCasStore();
  const ring = shared?.ring ?? new RingStore(cas);
  if (!shared) await ring.create(initialRing(nodes, 2, new Date(T0)));
  const probe = new FakeProbe();
  const clock = { t: T0 };
  const logs: Ctx['logs'] = [];
  const metrics: Ctx['metrics'] = [];
  const checker = new NodeHealthChecker({
    ring,
    probe: probe.fn,
    now: () => clock.t,
    log: (level, message, fields) => logs.push({ level, message, fields }),
    metric: (name, value, dims) => metrics.push({ name, value, ...(dims ? { dims } : {}) }),
    ...opts,
  });
  return { cas, ring, probe, checker, logs, metrics, clock };
}

function failCalls(checker: NodeHealthChecker, id: string, n = 3): void {
  for (let i = 0; i < n; i++) checker.report(id, false);
}

/** Ticks at T0 + each offset (ms). */
async function tickAt(c: Ctx, ...offsets: number[]): Promise<string[]> {
  const marked: string[] = [];
  for (const o of offsets) {
    c.clock.t = T0 + o;
    marked.push(...(await c.checker.tick()).marked);
  }
  return marked;
}

async function stateOf(ring: RingStore, id: string): Promise<string | undefined> {
  return (await ring.load())!.nodes.find((n) => n.id === id)?.state;
}

function nodeStatus(checker: NodeHealthChecker, id: string) {
  return checker.status().nodes.find((n) => n.id === id);
}

describe('NodeHealthChecker: suspicion', () => {
  it('suspects a node after suspectAfterFailures consecutive failed calls; a successful call starts the count over', async () => {
    const { checker } = await setup();
    failCalls(checker, 'b', 2);
    expect(checker.suspects()).toEqual([]);
    checker.report('b', false);
    expect(checker.suspects()).toEqual(['b']);
    checker.report('b', true);
    expect(checker.suspects()).toEqual([]);
    failCalls(checker, 'b', 2);
    expect(checker.suspects()).toEqual([]);

    const eager = (await setup({ suspectAfterFailures: 1 })).checker;
    eager.report('c', false);
    expect(eager.suspects()).toEqual(['c']);
  });

  it('probes only the suspects (and nodes whose last probe failed), not the whole fleet', async () => {
    const c = await setup();
    expect((await c.checker.tick()).probed).toEqual([]);
    failCalls(c.checker, 'b', 2);
    await c.checker.tick();
    expect(c.probe.calls).toEqual([]);
    c.checker.report('b', false);
    expect((await c.checker.tick()).probed).toEqual(['b']);
    expect(c.probe.calls).toEqual(['b']);
    // The probe answered: b is fine, so it is no longer suspect nor probed.
    expect(c.checker.suspects()).toEqual([]);
    await c.checker.tick();
    expect(c.probe.calls).toEqual(['b']);
  });
});

describe('NodeHealthChecker: confirmation and flap damping', () => {
  it('needs confirmMs of failing probes: two failed probes 1 s apart mark nothing', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 0, 1000, 4999)).toEqual([]);
    expect(nodeStatus(c.checker, 'b')).toMatchObject({ probeFailures: 3, failingSinceMs: T0, suspect: true });
    expect(await tickAt(c, 5000)).toEqual(['b']);
  });

  it('needs confirmProbes failed probes in a row: two probes over 10 s mark nothing when three are required', async () => {
    const c = await setup({ confirmProbes: 3 });
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 0, 10_000)).toEqual([]);
    expect(await tickAt(c, 11_000)).toEqual(['b']);
  });

  it('a successful probe in between starts the streak over', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 0, 3000);
    c.probe.set(['b'], 'ok');
    await tickAt(c, 4000);
    expect(nodeStatus(c.checker, 'b')).toMatchObject({ probeFailures: 0, failingSinceMs: null, consecutiveFailures: 0 });
    // It flaps back: the streak counts from its first failure after the success, not from T0.
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 5000, 6000, 9999)).toEqual([]);
    expect(await tickAt(c, 10_000)).toEqual(['b']);
  });

  it('a successful coordinator call also starts the streak over', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 0, 3000);
    c.checker.report('b', true);
    failCalls(c.checker, 'b');
    expect(await tickAt(c, 6000, 7000)).toEqual([]);
    expect(nodeStatus(c.checker, 'b')).toMatchObject({ probeFailures: 2, failingSinceMs: T0 + 6000 });
  });

  it('an unknown answer (or a probe that throws) neither counts as a failure nor ends the streak', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 0);
    c.probe.set(['b'], { result: 'unknown', detail: 'DescribeInstanceStatus throttled' });
    expect(await tickAt(c, 5000)).toEqual([]);
    c.probe.answers.set('b', () => Promise.reject(new Error('probe crashed')));
    expect(await tickAt(c, 6000)).toEqual([]);
    expect(nodeStatus(c.checker, 'b')).toMatchObject({
      probeFailures: 1,
      failingSinceMs: T0,
      lastProbe: { at: T0 + 6000, result: 'unknown' },
      lastError: 'probe crashed',
    });
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 7000)).toEqual(['b']);
  });
});

describe('NodeHealthChecker: marking DOWN', () => {
  it('marks by CAS: a new version, the node DOWN with what was seen, its ranges fenced by a new epoch', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 0, 5200)).toEqual(['b']);

    const doc = (await c.ring.load())!;
    expect(doc.version).toBe(2);
    const b = doc.nodes.find((n) => n.id === 'b')!;
    const reason = '3 coordinator failures, 2 failed probes over 5.2 s: connect ECONNREFUSED 10.0.0.2:7070';
    expect(b).toMatchObject({ state: 'DOWN', down: { at: T0 + 5200, reason } });
    for (const r of doc.ranges) expect(r.epoch).toBe(r.owner === 'b' ? 2 : 1);
    expect(doc.nodes.filter((n) => n.state === 'DOWN').map((n) => n.id)).toEqual(['b']);

    const status = c.checker.status();
    expect(status.marked).toEqual([{ node: 'b', at: T0 + 5200, reason, ringVersion: 2 }]);
    expect(status.nodes.map((n) => n.id)).toEqual(['a', 'c', 'd']);
    expect(status.held).toBeUndefined();
    expect(JSON.parse(JSON.stringify(status))).toEqual(status);
    expect(c.metrics).toEqual([{ name: 'NodeMarkedDown', value: 1, dims: { node: 'b' } }]);
    expect(c.logs.filter((l) => l.level === 'warn')).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/marked cache node b DOWN/) }),
    ]);

    // A DOWN node is no longer probed, whatever coordinators report.
    failCalls(c.checker, 'b');
    c.probe.calls = [];
    await tickAt(c, 6000);
    expect(c.probe.calls).toEqual([]);
    expect(c.cas.writes).toBe(2);
  });

  it('is a no-op for a node already DOWN: not probed, nothing written', async () => {
    const c = await setup();
    await c.ring.update((d, v) => markDown(d, 'b', v, 'by hand', T0));
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 0, 6000)).toEqual([]);
    expect(c.probe.calls).toEqual([]);
    expect(c.cas.writes).toBe(2);
  });

  it('is a no-op when someone else marks the node DOWN while it is being confirmed', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 0);
    c.probe.answers.set('b', async () => {
      await c.ring.update((d, v) => markDown(d, 'b', v, 'another checker', T0));
      return REFUSED;
    });
    expect(await tickAt(c, 5000)).toEqual([]);
    const doc = (await c.ring.load())!;
    expect(doc.version).toBe(2);
    expect(doc.nodes.find((n) => n.id === 'b')!.down!.reason).toBe('another checker');
    expect(c.checker.status().marked).toEqual([]);
    expect(c.metrics.filter((m) => m.name === 'NodeMarkedDown')).toEqual([]);
    expect(c.logs).toContainEqual(expect.objectContaining({ level: 'info', message: expect.stringMatching(/already DOWN/) }));
  });

  it('is a no-op when the node left the ring (or was replaced under its id) while it was being confirmed', async () => {
    const c = await setup();
    const removeB = (d: RingDocument): void => {
      for (const r of d.ranges) if (r.owner === 'b') r.owner = 'a';
      removeNode(d, 'b');
    };
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 0);
    c.probe.answers.set('b', async () => {
      await c.ring.update(removeB);
      return REFUSED;
    });
    expect(await tickAt(c, 5000)).toEqual([]);
    expect(c.cas.writes).toBe(2);
    expect(await stateOf(c.ring, 'b')).toBeUndefined();
    expect(c.checker.status().nodes.map((n) => n.id)).toEqual(['a', 'c', 'd']);

    // A new b under the same id, added while the old one's probes ran: those probes were not about it.
    await c.ring.update((d) => addNode(d, { id: 'b', url: 'http://b.test:7070' }, new Date(T0)));
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 6000);
    c.probe.answers.set('b', async () => {
      await c.ring.update((d) => {
        removeNode(d, 'b');
        addNode(d, { id: 'b', url: 'http://b2.test:7070', state: 'JOINING' }, new Date(T0 + 11_000));
      });
      return REFUSED;
    });
    expect(await tickAt(c, 11_000)).toEqual([]);
    expect(await stateOf(c.ring, 'b')).toBe('JOINING');
    expect(c.checker.status().marked).toEqual([]);
  });

  it('two checkers racing on one store mark the node once (the loser finds it DOWN on its CAS retry)', async () => {
    const base = new InMemoryCasStore();
    const gated = new GatedCas(base);
    const ring = new RingStore(gated);
    await ring.create(initialRing(NODES, 2, new Date(T0)));
    const one = await setup({}, NODES, { cas: gated, ring });
    const two = await setup({}, NODES, { cas: gated, ring: new RingStore(gated) });
    for (const c of [one, two]) {
      failCalls(c.checker, 'b');
      c.probe.set(['b'], REFUSED);
      await tickAt(c, 0);
      c.clock.t = T0 + 5000;
    }
    // Both read the ring (tick, then update) before either writes.
    gated.holdWritesUntilReads(4);
    const [r1, r2] = await Promise.all([one.checker.tick(), two.checker.tick()]);
    expect([...r1.marked, ...r2.marked]).toEqual(['b']);
    expect(gated.conflicts).toBe(1);
    expect(base.writes).toBe(2);
    expect((await ring.load())!.version).toBe(2);
    expect(one.checker.status().marked.length + two.checker.status().marked.length).toBe(1);
  });
});

describe('NodeHealthChecker: caps against false positives', () => {
  it('marks at most maxDown nodes, holding the rest back (cap), and counts nodes already DOWN in the ring', async () => {
    const c = await setup();
    for (const id of ['b', 'c']) failCalls(c.checker, id);
    c.probe.set(['b', 'c'], REFUSED);
    // 2 of 4 failing is not above the storm fraction (0.5): one is marked, the cap holds the other.
    await tickAt(c, 0);
    const r = await c.checker.tick(T0 + 5000);
    expect(r).toMatchObject({ marked: ['b'], held: 'cap' });
    expect(await stateOf(c.ring, 'c')).toBe('NORMAL');
    expect(c.checker.status()).toMatchObject({ held: 'cap', heldSince: T0 + 5000 });
    expect(c.metrics).toContainEqual({ name: 'NodeHealthHeld', value: 1, dims: { reason: 'cap' } });
    await tickAt(c, 6000, 7000);
    expect(await stateOf(c.ring, 'c')).toBe('NORMAL');
    // One warn line for the marking, one for the hold episode (not one per tick).
    expect(c.logs.filter((l) => l.level === 'warn').map((l) => l.fields.held ?? 'marked')).toEqual(['marked', 'cap']);

    // A node marked DOWN by someone else counts too.
    const d = await setup();
    await d.ring.update((doc, v) => markDown(doc, 'a', v, 'earlier', T0));
    failCalls(d.checker, 'b');
    d.probe.set(['b'], REFUSED);
    expect(await tickAt(d, 0, 5000)).toEqual([]);
    expect(d.checker.status().held).toBe('cap');
    expect(d.cas.writes).toBe(2);

    // Held before any CAS: the tick reads the ring once and writes nothing.
    const counted = new GatedCas(d.cas);
    const f = await setup({}, NODES, { cas: counted, ring: new RingStore(counted) });
    failCalls(f.checker, 'b');
    f.probe.set(['b'], REFUSED);
    await tickAt(f, 0, 5000);
    expect(counted.reads).toBe(2);
    expect(f.checker.status().held).toBe('cap');

    const e = await setup({ maxDown: 2 });
    for (const id of ['b', 'c']) failCalls(e.checker, id);
    e.probe.set(['b', 'c'], REFUSED);
    expect((await tickAt(e, 0, 5000)).sort()).toEqual(['b', 'c']);
  });

  it('re-checks the cap on the document it writes: a node marked DOWN elsewhere meanwhile holds the marking', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    await tickAt(c, 0);
    c.probe.answers.set('b', async () => {
      await c.ring.update((d, v) => markDown(d, 'c', v, 'another checker', T0));
      return REFUSED;
    });
    const r = await c.checker.tick(T0 + 5000);
    expect(r).toMatchObject({ marked: [], held: 'cap' });
    expect(await stateOf(c.ring, 'b')).toBe('NORMAL');
    expect(c.cas.writes).toBe(2);
  });

  it('marks nothing while more than maxSuspectFraction of the serving nodes fail their probes (storm)', async () => {
    const c = await setup();
    for (const id of ['b', 'c', 'd']) failCalls(c.checker, id);
    c.probe.set(['b', 'c', 'd'], REFUSED);
    expect(await tickAt(c, 0, 5000, 10_000, 15_000)).toEqual([]);
    expect(c.cas.writes).toBe(1);
    expect(c.checker.status()).toMatchObject({ held: 'storm', heldSince: T0 + 5000, probing: { serving: 4, failing: 3 } });
    const warns = c.logs.filter((l) => l.level === 'warn');
    expect(warns).toHaveLength(1);
    expect(warns[0]!.message).toMatch(/3 of 4 serving nodes fail/);
    expect(c.metrics.filter((m) => m.name === 'NodeHealthHeld')).toHaveLength(3);
    expect(c.metrics).toContainEqual({ name: 'NodeHealthHeld', value: 3, dims: { reason: 'storm' } });

    // The episode ends when the others answer again: the one still failing (since T0) is then marked.
    c.probe.set(['c', 'd'], 'ok');
    expect(await tickAt(c, 16_000)).toEqual(['b']);
    expect(c.checker.status().held).toBeUndefined();
  });

  it('never marks the node of a single-node fleet (1 of 1 failing is above the fraction)', async () => {
    const c = await setup({}, NODES.slice(0, 1));
    failCalls(c.checker, 'a');
    c.probe.set(['a'], REFUSED);
    expect(await tickAt(c, 0, 5000, 60_000)).toEqual([]);
    expect(c.checker.status().held).toBe('storm');
    expect(c.cas.writes).toBe(1);
  });
});

describe('NodeHealthChecker: probing every node (probeAll) and batch probes', () => {
  it('with probeAll, probes every serving node at each tick with no coordinator report, and marks one confirmed', async () => {
    // AWS: no coordinator suspicion reaches the scheduled checker yet, so every node is probed (one EC2 call for all).
    const c = await setup({ probeAll: true, confirmMs: 50_000 });
    expect((await c.checker.tick(T0)).probed).toEqual(['a', 'b', 'c', 'd']);
    expect(c.checker.suspects()).toEqual([]);
    c.probe.set(['b'], { result: 'down', detail: 'EC2 instance i-0b is stopped' });
    c.probe.calls = [];
    expect(await tickAt(c, 60_000)).toEqual([]);
    expect(c.probe.calls.sort()).toEqual(['a', 'b', 'c', 'd']);
    // The second failed tick a minute later confirms it (2 probes, 50 s or more apart).
    expect(await tickAt(c, 120_000)).toEqual(['b']);
    const b = (await c.ring.load())!.nodes.find((n) => n.id === 'b')!;
    expect(b.down!.reason).toBe('0 coordinator failures, 2 failed probes over 60.0 s: EC2 instance i-0b is stopped');
    // A DOWN node is not probed any more, even with probeAll.
    c.probe.calls = [];
    await tickAt(c, 180_000);
    expect(c.probe.calls.sort()).toEqual(['a', 'c', 'd']);
  });

  it('without probeAll, a healthy fleet is never probed (the local checker, fed by suspicion)', async () => {
    const c = await setup();
    await tickAt(c, 0, 60_000);
    expect(c.probe.calls).toEqual([]);
  });

  it('asks a batch probe once per tick about all the due nodes; a node it leaves out, or a batch that throws, is unknown', async () => {
    const calls: string[][] = [];
    let answers = new Map<string, ProbeAnswer>([['b', REFUSED]]);
    const batch: BatchNodeProbe = {
      many: async (nodes) => {
        calls.push(nodes.map((n) => n.id));
        return answers;
      },
    };
    const c = await setup({ probe: batch, probeAll: true });
    await tickAt(c, 0);
    expect(calls).toEqual([['a', 'b', 'c', 'd']]);
    // a, c and d were left out: unknown (no evidence either way), b failed once.
    expect(nodeStatus(c.checker, 'a')).toMatchObject({ probeFailures: 0, lastProbe: { at: T0, result: 'unknown' } });
    expect(nodeStatus(c.checker, 'b')).toMatchObject({ probeFailures: 1, failingSinceMs: T0 });
    answers = new Map();
    batch.many = async () => {
      throw new Error('DescribeInstanceStatus: ThrottlingException');
    };
    await tickAt(c, 5000);
    expect(nodeStatus(c.checker, 'b')).toMatchObject({
      probeFailures: 1,
      lastProbe: { at: T0 + 5000, result: 'unknown' },
      lastError: 'DescribeInstanceStatus: ThrottlingException',
    });
    // No call at all when nothing is due (no probeAll, no suspect).
    const idle = await setup({ probe: { many: async (n) => (calls.push(n.map((x) => x.id)), new Map()) } });
    calls.length = 0;
    await tickAt(idle, 0);
    expect(calls).toEqual([]);
  });
});

describe('NodeHealthChecker: snapshot and restore (a checker that lives one tick at a time)', () => {
  /** One tick of a fresh checker restored from `saved`, as the evaluator runs it; returns its new snapshot. */
  async function oneTick(c: Ctx, saved: unknown, at: number, opts: Partial<NodeHealthCheckerOptions> = {}) {
    const checker = new NodeHealthChecker({
      ring: c.ring,
      probe: c.probe.fn,
      probeAll: true,
      confirmMs: 50_000,
      now: () => T0 + at,
      log: (level, message, fields) => c.logs.push({ level, message, fields }),
      metric: (name, value, dims) => c.metrics.push({ name, value, ...(dims ? { dims } : {}) }),
      ...opts,
    });
    if (saved !== undefined) expect(checker.restore(saved)).toBe(true);
    const result = await checker.tick();
    return { result, snapshot: JSON.parse(JSON.stringify(checker.snapshot())) as unknown, checker };
  }

  it('keeps the streaks across runs: two runs a minute apart mark a node, as one long-lived checker would', async () => {
    const c = await setup();
    c.probe.set(['b'], { result: 'down', detail: 'EC2 instance i-0b is terminated' });
    const first = await oneTick(c, undefined, 0);
    expect(first.result.marked).toEqual([]);
    expect(first.snapshot).toEqual({
      format: 1,
      tracks: [
        {
          id: 'b',
          incarnation: `http://b.test:7070||${new Date(T0).toISOString()}`,
          coordinatorFailures: 0,
          lastReportAt: null,
          probeFailures: 1,
          failingSince: T0,
          lastProbe: { at: T0, result: 'down' },
          lastError: 'EC2 instance i-0b is terminated',
        },
      ],
      marked: [],
      heldSince: null,
    });
    // Without the snapshot, the next run would start over and never confirm.
    expect((await oneTick(c, undefined, 60_000)).result.marked).toEqual([]);
    const second = await oneTick(c, first.snapshot, 60_000);
    expect(second.result.marked).toEqual(['b']);
    expect(second.snapshot).toMatchObject({ tracks: [], marked: [{ node: 'b', at: T0 + 60_000, ringVersion: 2 }] });
  });

  it('does not change while the fleet stays healthy, so its owner writes nothing', async () => {
    const c = await setup();
    const first = await oneTick(c, undefined, 0);
    expect(first.snapshot).toEqual({ format: 1, tracks: [], marked: [], heldSince: null });
    let saved = first.snapshot;
    for (const at of [60_000, 120_000, 180_000]) {
      const next = await oneTick(c, saved, at);
      expect(next.snapshot).toEqual(saved);
      saved = next.snapshot;
    }
    // An unknown answer of a healthy node (the API failed) leaves nothing to remember either.
    c.probe.set(['a'], { result: 'unknown', detail: 'RequestLimitExceeded' });
    expect((await oneTick(c, saved, 240_000)).snapshot).toEqual(saved);
  });

  it('keeps a hold episode across runs: one warn line for it, not one per run', async () => {
    const c = await setup();
    for (const id of ['b', 'c', 'd']) c.probe.set([id], REFUSED);
    let saved: unknown;
    for (const at of [0, 60_000, 120_000, 180_000]) saved = (await oneTick(c, saved, at)).snapshot;
    expect(saved).toMatchObject({ held: 'storm', heldSince: T0 + 60_000 });
    expect(c.logs.filter((l) => l.level === 'warn')).toHaveLength(1);
    expect(c.metrics.filter((m) => m.name === 'NodeHealthHeld')).toHaveLength(3);
  });

  it('forgets, at the next tick, a track whose node was replaced under its id or left the ring', async () => {
    const c = await setup();
    c.probe.set(['b'], REFUSED);
    const first = await oneTick(c, undefined, 0);
    await c.ring.update((d) => {
      for (const r of d.ranges) if (r.owner === 'b') r.owner = 'a';
      removeNode(d, 'b');
      addNode(d, { id: 'b', url: 'http://b2.test:7070' }, new Date(T0 + 1000));
    });
    // The new b fails too, but its streak starts now: the old one's first failure does not count for it.
    const second = await oneTick(c, first.snapshot, 60_000);
    expect(second.result.marked).toEqual([]);
    expect(second.snapshot).toMatchObject({ tracks: [{ id: 'b', probeFailures: 1, failingSince: T0 + 60_000 }] });
    // Gone from the ring: gone from the snapshot.
    await c.ring.update((d) => {
      for (const r of d.ranges) if (r.owner === 'b') r.owner = 'a';
      removeNode(d, 'b');
    });
    expect((await oneTick(c, second.snapshot, 120_000)).snapshot).toMatchObject({ tracks: [] });
  });

  it('refuses what is not a snapshot, and keeps at most MARKED_HISTORY markings', async () => {
    const c = await setup();
    const checker = c.checker;
    for (const bad of [
      undefined,
      null,
      'x',
      { format: 2, tracks: [], marked: [], heldSince: null },
      { format: 1, tracks: {}, marked: [], heldSince: null },
      { format: 1, tracks: [{ id: 'b', probeFailures: -1 }], marked: [], heldSince: null },
      { format: 1, tracks: [], marked: [], held: 'bored', heldSince: 1 },
      { format: 1, tracks: [], marked: [{ node: 'b' }], heldSince: null },
    ])
      expect({ bad, restored: checker.restore(bad) }).toEqual({ bad, restored: false });
    const track = (id: string) => ({
      id,
      incarnation: null,
      coordinatorFailures: 0,
      lastReportAt: null,
      probeFailures: 1,
      failingSince: T0,
      lastProbe: null,
      lastError: null,
    });
    expect(checker.restore({ format: 1, tracks: [track('b'), track('b')], marked: [], heldSince: null })).toBe(false);
    const marked = Array.from({ length: MARKED_HISTORY + 5 }, (_, i) => ({ node: `n${i}`, at: i, reason: 'r', ringVersion: i }));
    expect(checker.restore({ format: 1, tracks: [track('b')], marked, heldSince: null })).toBe(true);
    const status = checker.status();
    expect(status.marked).toHaveLength(MARKED_HISTORY);
    expect(status.marked[0]!.node).toBe('n5');
    expect(nodeStatus(checker, 'b')).toMatchObject({ probeFailures: 1, failingSinceMs: T0 });
  });
});

describe('NodeHealthChecker: pause, status and loop', () => {
  it('while paused it probes and records but marks nothing, and says so; resumed, it marks', async () => {
    const c = await setup({ paused: true });
    failCalls(c.checker, 'b');
    c.probe.set(['b'], REFUSED);
    expect(await tickAt(c, 0, 5000, 9000)).toEqual([]);
    expect(c.probe.calls).toEqual(['b', 'b', 'b']);
    expect(c.checker.status()).toMatchObject({ paused: true, held: 'paused' });
    expect(nodeStatus(c.checker, 'b')).toMatchObject({ probeFailures: 3, lastError: 'connect ECONNREFUSED 10.0.0.2:7070' });
    expect(c.cas.writes).toBe(1);
    expect(c.logs).toContainEqual(
      expect.objectContaining({ level: 'warn', fields: expect.objectContaining({ held: 'paused' }) }),
    );

    c.checker.resume();
    expect(c.checker.paused).toBe(false);
    expect(await tickAt(c, 10_000)).toEqual(['b']);
    expect(c.checker.status()).toMatchObject({ paused: false, marked: [expect.objectContaining({ node: 'b' })] });

    c.checker.pause();
    failCalls(c.checker, 'c');
    c.probe.set(['c'], REFUSED);
    expect(await tickAt(c, 20_000, 30_000)).toEqual([]);
    expect(c.checker.status().held).toBe('paused');
  });

  it('reports every serving node in its status', async () => {
    const c = await setup();
    failCalls(c.checker, 'c', 2);
    await c.checker.tick();
    expect(c.checker.status()).toMatchObject({
      paused: false,
      ringVersion: 1,
      lastTickAt: T0,
      lastTickError: null,
      marked: [],
      nodes: [
        { id: 'a', state: 'NORMAL', consecutiveFailures: 0, suspect: false, failingSinceMs: null, lastProbe: null },
        expect.objectContaining({ id: 'b' }),
        { id: 'c', state: 'NORMAL', consecutiveFailures: 2, suspect: false, lastReportAt: T0, lastError: null },
        expect.objectContaining({ id: 'd' }),
      ],
    });
  });

  it('start() ticks in the background, never two ticks at once, and a failing tick does not stop the loop', async () => {
    const c = await setup();
    failCalls(c.checker, 'b');
    let release!: () => void;
    c.probe.answers.set('b', () => new Promise<ProbeAnswer>((r) => (release = () => r('ok'))));
    c.checker.start(2);
    await eventually(() => c.probe.calls.length === 1);
    await new Promise((r) => setTimeout(r, 30));
    expect(c.probe.calls).toEqual(['b']);
    release();
    await c.checker.stop();

    const broken = await setup({}, NODES, { cas: new InMemoryCasStore(), ring: new RingStore(new InMemoryCasStore()) });
    broken.checker.start(2);
    await eventually(() => broken.logs.filter((l) => l.message.includes('tick failed')).length >= 2);
    await broken.checker.stop();
    expect(broken.checker.status().lastTickError).toMatch(/holds no document/);
  });
});

describe('httpProbe', () => {
  let server: Server | undefined;
  let client: NodeClient | undefined;
  afterEach(async () => {
    await client?.close();
    server?.closeAllConnections();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    server = undefined;
    client = undefined;
  });

  async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<RingNode> {
    server = createServer(handler);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return ringNode(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  }

  const json = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  it('maps a healthy answer to ok, and a draining (503) or refused (403) one to unknown', async () => {
    let status = 200;
    const node = await serve((_req, res) =>
      status === 403
        ? json(res, 403, { error: { code: 'FORBIDDEN', message: 'wrong secret' } })
        : json(res, status, { status: status === 200 ? 'ok' : 'draining', nodeId: 'a', ringVersion: 1 }),
    );
    client = new NodeClient({ secret: 's' });
    const probe = httpProbe(client, 1000);
    expect(await probe(node)).toBe('ok');
    status = 503;
    expect(await probe(node)).toMatchObject({ result: 'unknown' });
    status = 403;
    expect(await probe(node)).toMatchObject({ result: 'unknown', detail: expect.stringMatching(/403/) });
  });

  it('maps a refused connection and no answer within its timeout to down', async () => {
    const node = await serve(() => undefined); // never answers
    client = new NodeClient({ secret: 's' });
    expect(await httpProbe(client, 50)(node)).toEqual({ result: 'down', detail: 'no answer within 50 ms' });

    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    expect(await httpProbe(client, 1000)(ringNode(`http://127.0.0.1:${port}`))).toEqual({
      result: 'down',
      detail: expect.stringMatching(/ECONNREFUSED/),
    });
  });
});

function ringNode(url: string): RingNode {
  return { id: 'a', url, state: 'NORMAL', addedAt: new Date(T0).toISOString() };
}

async function eventually(probe: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A CAS store whose writes can be held until a number of reads happened (to make two writers race). */
class GatedCas implements CasStore {
  conflicts = 0;
  reads = 0;
  private needed = 0;
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => undefined;

  constructor(private readonly inner: CasStore) {}

  holdWritesUntilReads(n: number): void {
    this.reads = 0;
    this.needed = n;
    this.gate = new Promise<void>((r) => (this.open = r));
  }

  async get(key: string): Promise<{ body: string; etag: string } | undefined> {
    const got = await this.inner.get(key);
    if (++this.reads >= this.needed) this.open();
    return got;
  }

  async put(key: string, body: string, ifEtag: string | null): Promise<string> {
    await this.gate;
    try {
      return await this.inner.put(key, body, ifEtag);
    } catch (e) {
      if (e instanceof CasConflictError) this.conflicts++;
      throw e;
    }
  }
}
