import { Coordinator } from '../../core/coordinator/coordinator.js';
import { StrataError, TierFencedError } from '../../core/errors.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import {
  applyRemoval,
  coalesce,
  DEFAULT_RING_LEASE_MS,
  downFenced,
  initialRing,
  markDown,
  parseRingDocument,
  removalPlan,
  replaceDownNode,
  setNodeState,
} from '../../core/ring/document.js';
import { RingRouter } from '../../core/ring/view.js';
import { reportLateHandOver, takeoverFloor, takeoverPublishedLate, takeoverSettled } from '../../core/ring/takeover.js';
import { captureLog } from '../helpers/log-capture.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { DownFence } from '../../core/tiers/warm-down.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';

const nodes = ['a', 'b', 'c'].map((id) => ({ id, url: `http://${id}.invalid:1` }));

describe('marking a node DOWN in the ring', () => {
  it('moves the epochs of its ranges (and only those) to the new version, with a down record', () => {
    const doc = initialRing(nodes, 2);
    expect(markDown(doc, 'b', 2, 'no answer', 1234)).toBe(true);
    doc.version = 2;
    const b = doc.nodes.find((n) => n.id === 'b')!;
    expect(b).toMatchObject({ state: 'DOWN', down: { at: 1234, reason: 'no answer' } });
    for (const r of doc.ranges) expect(r.epoch).toBe(r.owner === 'b' ? 2 : 1);
    expect(markDown(doc, 'b', 3, 'again')).toBe(false); // already DOWN: no new mark, no new epochs
    expect(() => parseRingDocument(doc)).not.toThrow();
  });

  it('refuses a DOWN state without its record, and a record without the state', () => {
    const doc = initialRing(nodes, 1);
    doc.nodes[0]!.state = 'DOWN';
    expect(() => parseRingDocument(doc)).toThrow(/state DOWN and a down record go together/);
    const back = initialRing(nodes, 1);
    markDown(back, 'a', 1, 'x');
    setNodeState(back, 'a', 'NORMAL'); // clears the record with the state
    expect(() => parseRingDocument(back)).not.toThrow();
  });

  it('is fenced only once the lease has run out, counted from when the caller saw it or from the mark', () => {
    const doc = initialRing(nodes, 1);
    markDown(doc, 'a', 1, 'x', 10_000);
    const a = doc.nodes[0]!;
    const lease = DEFAULT_RING_LEASE_MS;
    expect(downFenced(doc, a, { seenAt: 0, now: lease - 1 })).toBe(false);
    expect(downFenced(doc, a, { seenAt: 0, now: lease })).toBe(true);
    // A fresh caller that sees an old mark: the mark's own time plus the lease and a second for clock skew.
    expect(downFenced(doc, a, { seenAt: 0, now: 0, wallNow: 10_000 + lease + 999 })).toBe(false);
    expect(downFenced(doc, a, { seenAt: 0, now: 0, wallNow: 10_000 + lease + 1000 })).toBe(true);
    expect(downFenced({ leaseMs: 2000 }, a, { seenAt: 0, now: 2000 })).toBe(true);
    expect(downFenced(doc, doc.nodes[1]!, { seenAt: 0, now: 1e9 })).toBe(false); // not DOWN
  });
});

describe('the warm tier with a DOWN node (DownFence)', () => {
  function fence() {
    const clock = { mono: 0, wall: 0 };
    return { clock, fence: new DownFence({ mono: () => clock.mono, wall: () => clock.wall }) };
  }

  it('reads its ranges as misses, and holds writes back until its lease has run out, then skips it', () => {
    const doc = { ...initialRing(nodes, 1), leaseMs: 1000 };
    markDown(doc, 'b', 1, 'x', 0);
    const router = new RingRouter(doc);
    const onB = router.route(doc.ranges.find((r) => r.owner === 'b')!.start);
    const onA = router.route(doc.ranges.find((r) => r.owner === 'a')!.start);
    const { clock, fence: f } = fence();
    expect(f.read(onB)).toBe('miss');
    expect(f.read(onA)).toBe('serve');
    expect(f.write(router, onB)).toBe('wait'); // first seen now
    clock.mono = 999;
    expect(f.write(router, onB)).toBe('wait');
    clock.mono = 1000;
    expect(f.write(router, onB)).toBe('skip');
    expect(f.write(router, onA)).toBe('serve');
  });

  it('leaves a DOWN pending target out of the shadow writes once fenced, and waits before that', () => {
    const doc = { ...initialRing(nodes, 1), leaseMs: 1000 };
    doc.ranges[0]!.pending = { target: 'c', session: 's1' };
    markDown(doc, 'c', 1, 'x', 0);
    const router = new RingRouter(doc);
    const route = router.route(doc.ranges[0]!.start);
    const { clock, fence: f } = fence();
    expect(f.write(router, route)).toBe('wait');
    clock.mono = 1000;
    expect(f.write(router, route)).toBe('serve');
    expect(DownFence.shadowTarget(route)).toBeUndefined();
  });
});

/** A tier whose node for every key is DOWN and fenced. */
class FencedTier extends MemoryTier {
  override put(): Promise<never> {
    return Promise.reject(new TierFencedError(this.name, 'b'));
  }
}

describe('a write while a durable tier is fenced for the key', () => {
  const registry = (writeTiers: string[]) =>
    new PolicyRegistry({ defaults: { writeTiers: writeTiers as never, nearCache: { enabled: false } } });

  it('is acknowledged from the other durable tiers, and the fenced one is not named as holding it', async () => {
    const cold = new MemoryTier({ name: 'cold' });
    const c = new Coordinator({
      tiers: [new FencedTier({ name: 'warm' }), cold],
      policies: registry(['warm', 'cold']),
      flushTimer: false,
    });
    const w = await c.put('ns', 'k', Buffer.from('v'));
    expect(w.tiers).toEqual(['cold']);
    expect((await cold.get('ns', 'k'))!.value.toString()).toBe('v');
    await expect(c.delete('ns', 'k')).resolves.toBeDefined(); // a tombstone skips it too
    await c.close();
  });

  it('is refused with 503 when the skipping write ended after its deadline (a takeover may have missed it)', async () => {
    class LateTier extends MemoryTier {
      override put(): Promise<never> {
        return Promise.reject(new TierFencedError(this.name, 'b', performance.now() - 1));
      }
    }
    const cold = new MemoryTier({ name: 'cold' });
    const c = new Coordinator({
      tiers: [new LateTier({ name: 'warm' }), cold],
      policies: registry(['warm', 'cold']),
      flushTimer: false,
    });
    await expect(c.put('ns', 'k', Buffer.from('v'))).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
    await expect(c.delete('ns', 'k')).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE' });
    await c.close();
  });

  it('is refused with 503 when the fenced tier would be its only durable copy', async () => {
    // (A policy whose only durable tier is warm is refused at configuration: a fenced tier named cold stands in.)
    const c = new Coordinator({ tiers: [new FencedTier({ name: 'cold' })], policies: registry(['cold']), flushTimer: false });
    const err = await c.put('ns', 'k', Buffer.from('v')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StrataError);
    expect((err as StrataError).code).toBe('TIER_UNAVAILABLE');
    expect((err as StrataError).message).toMatch(/its cache node is DOWN/);
    await c.close();
  });
});

describe("handing a DOWN node's ranges over", () => {
  const four = ['a', 'b', 'c', 'd'].map((id) => ({ id, url: `http://${id}.invalid:1` }));

  it('replaces it: the new node owns exactly its ranges, NORMAL, at new epochs, and it leaves the ring', () => {
    const doc = initialRing(four, 2);
    markDown(doc, 'b', 2, 'x');
    doc.version = 2;
    const owned = doc.ranges.filter((r) => r.owner === 'b').map((r) => r.start);
    const moved = replaceDownNode(doc, 'b', { id: 'e', url: 'http://e.invalid:1', az: 'az-1' }, 3);
    doc.version = 3;
    expect(moved).toBe(owned.length);
    expect(doc.nodes.map((n) => n.id).sort()).toEqual(['a', 'c', 'd', 'e']);
    expect(doc.nodes.find((n) => n.id === 'e')).toMatchObject({ state: 'NORMAL', az: 'az-1' });
    for (const r of doc.ranges) if (owned.includes(r.start)) expect(r).toMatchObject({ owner: 'e', epoch: 3 });
    expect(() => parseRingDocument(doc)).not.toThrow();
  });

  it('refuses a node that is not DOWN, or one a migration involves', () => {
    const doc = initialRing(four, 1);
    expect(() => replaceDownNode(structuredClone(doc), 'b', { id: 'e', url: 'http://e.invalid:1' }, 2)).toThrow(
      /is NORMAL, not DOWN/,
    );
    doc.ranges.find((r) => r.owner === 'a')!.pending = { target: 'b', session: 's1' };
    markDown(doc, 'b', 1, 'x');
    expect(() => replaceDownNode(doc, 'b', { id: 'e', url: 'http://e.invalid:1' }, 2)).toThrow(
      /migrating \(session s1\) to node 'b'/,
    );
    expect(() => removalPlan(doc, 'b')).toThrow(/must finish or roll back first/);
  });

  it('removes it: each range goes to the next NORMAL owner clockwise, and a stale plan is not applied', () => {
    const doc = initialRing(four, 2);
    markDown(doc, 'c', 1, 'x');
    const plan = removalPlan(doc, 'c');
    for (const p of plan) {
      const i = doc.ranges.findIndex((r) => r.start === p.start);
      expect(p.to).toBe(doc.ranges[(i + 1) % doc.ranges.length]!.owner); // round-robin: the next one is never c
    }
    const changed = structuredClone(doc);
    changed.ranges.find((r) => r.start === plan[0]!.start)!.owner = 'a'; // the ring moved on meanwhile
    expect(applyRemoval(changed, 'c', plan, 2)).toBe(false);
    expect(applyRemoval(doc, 'c', plan, 2)).toBe(true);
    doc.version = 2;
    expect(doc.nodes.some((n) => n.id === 'c')).toBe(false);
    expect(() => parseRingDocument(doc)).not.toThrow();
  });
});

describe('a range taken over from a DOWN node (ring/takeover.ts)', () => {
  const four = ['a', 'b', 'c', 'd'].map((id) => ({ id, url: `http://${id}.invalid:1` }));
  const lease = DEFAULT_RING_LEASE_MS;
  /** A version stamped at wall time `ms`. */
  const stampedAt = (ms: number) => new HybridLogicalClock(() => ms).next();

  it('is marked with the hand-over time, by a replacement and by a removal, and the mark survives parsing', () => {
    const doc = initialRing(four, 2);
    markDown(doc, 'b', 2, 'x');
    replaceDownNode(doc, 'b', { id: 'e', url: 'http://e.invalid:1' }, 3, new Date(5000));
    doc.version = 3;
    for (const r of doc.ranges) expect(r.takenOver).toEqual(r.owner === 'e' ? { at: 5000 } : undefined);
    expect(parseRingDocument(doc, { strict: true }).ranges.filter((r) => r.takenOver)).toHaveLength(2);
    markDown(doc, 'c', 4, 'x');
    const plan = removalPlan(doc, 'c');
    expect(applyRemoval(doc, 'c', plan, 4, 7000)).toBe(true);
    const taken = doc.ranges.filter((r) => r.takenOver?.at === 7000);
    expect(taken.map((r) => r.start).sort()).toEqual(plan.map((p) => p.start).sort());
  });

  it('does not merge with a range its owner held before, and loses its mark a minute after its window', () => {
    const doc = initialRing(four, 1);
    markDown(doc, 'b', 2, 'x');
    const plan = removalPlan(doc, 'b'); // b's range goes to its clockwise neighbour c, next to c's own range
    expect(plan).toEqual([expect.objectContaining({ to: 'c' })]);
    applyRemoval(doc, 'b', plan, 3, 1000);
    expect(doc.ranges.filter((r) => r.owner === 'c')).toHaveLength(2); // one marked, one not: kept apart
    coalesce(doc, takeoverSettled(lease, 1000) + 59_999);
    expect(doc.ranges.filter((r) => r.owner === 'c')).toHaveLength(2);
    coalesce(doc, takeoverSettled(lease, 1000) + 60_000);
    expect(doc.ranges.filter((r) => r.owner === 'c')).toEqual([expect.not.objectContaining({ takenOver: expect.anything() })]);
  });

  it('skips the new owner for puts stamped below the floor until the window ends, and for nothing else', () => {
    const doc = initialRing(four, 1);
    markDown(doc, 'b', 2, 'x');
    replaceDownNode(doc, 'b', { id: 'e', url: 'http://e.invalid:1' }, 3, new Date(10_000));
    doc.version = 3;
    const router = new RingRouter(doc);
    const onE = router.route(doc.ranges.find((r) => r.owner === 'e')!.start);
    const onA = router.route(doc.ranges.find((r) => r.owner === 'a')!.start);
    const clock = { mono: 0, wall: 10_500 };
    const f = new DownFence({ mono: () => clock.mono, wall: () => clock.wall });
    const floor = takeoverFloor(lease, 10_000);
    expect(floor).toBe(10_000 + lease + 2000);
    expect(f.read(onE)).toBe('serve'); // what it holds is never older than an acknowledged write
    expect(f.write(router, onE, stampedAt(floor - 1))).toBe('skip');
    expect(f.write(router, onE, stampedAt(floor))).toBe('serve');
    expect(f.write(router, onE)).toBe('serve'); // a removal or pin change
    expect(f.write(router, onA, stampedAt(floor - 1))).toBe('serve'); // another node's range
    expect(f.special(router, onE)).toBe(true);
    expect(f.special(router, onA)).toBe(false);
    // A skipping write must end by T + D on the wall clock: as a monotonic deadline, that far from now.
    expect(f.takenOverUntil(router, onE, stampedAt(floor - 1))).toBe(floor + lease / 3 - clock.wall);
    clock.wall = takeoverSettled(lease, 10_000);
    expect(f.write(router, onE, stampedAt(floor - 1))).toBe('serve'); // a fill's copy, once every skip has ended
    expect(f.special(router, onE)).toBe(false);
  });

  it('is reported when its ring write landed later than the window allows', () => {
    // D + e = 5 s + 1 s at the default lease: a caller that read the ring just before may stamp above the floor after.
    expect(takeoverPublishedLate(lease, 1000, 7000)).toBeUndefined();
    expect(takeoverPublishedLate(lease, 1000, 7250)).toBe(250);
    const logs = captureLog();
    try {
      reportLateHandOver(lease, 1000, 7000, 'on time');
      reportLateHandOver(lease, 1000, 9000, 'e taking over b');
    } finally {
      logs.restore();
    }
    expect(logs.lines()).toEqual([
      expect.objectContaining({ level: 'warn', msg: 'hand-over published late: e taking over b', lateMs: 2000 }),
    ]);
  });

  it('skips the new owner for an older put even while its range migrates to a DOWN (fenced) target', () => {
    const doc = initialRing(four, 1);
    markDown(doc, 'b', 2, 'x');
    replaceDownNode(doc, 'b', { id: 'e', url: 'http://e.invalid:1' }, 3, new Date(10_000));
    const range = doc.ranges.find((r) => r.owner === 'e')!;
    range.pending = { target: 'c', session: 's1' };
    markDown(doc, 'c', 3, 'y', 10_000);
    doc.version = 3;
    const router = new RingRouter(doc);
    const route = router.route(range.start);
    const clock = { mono: 0, wall: 10_500 };
    const f = new DownFence({ mono: () => clock.mono, wall: () => clock.wall });
    const older = stampedAt(takeoverFloor(lease, 10_000) - 1);
    expect(f.write(router, route, older)).toBe('wait'); // c is not fenced yet
    clock.mono = lease;
    expect(f.write(router, route, older)).toBe('skip');
    expect(f.write(router, route, stampedAt(takeoverFloor(lease, 10_000)))).toBe('serve'); // to e only
    expect(DownFence.shadowTarget(route)).toBeUndefined();
  });
});

describe('a ring document written by a newer version', () => {
  function newer() {
    const doc = initialRing(nodes, 1) as unknown as Record<string, unknown> & {
      nodes: Record<string, unknown>[];
      ranges: Record<string, unknown>[];
    };
    doc.placementHints = { zones: 3 }; // a field this version does not know
    doc.nodes[0]!.protocol = 3;
    doc.nodes[1]!.state = 'DRAINING'; // a state this version does not know
    doc.ranges[0]!.weight = 2;
    doc.ranges[0]!.pending = { target: 'c', session: 's1', phase: 'verify' };
    return doc;
  }

  it('is read, with what this version does not know kept, and routed by as far as it is understood', () => {
    const doc = parseRingDocument(newer());
    expect((doc as unknown as Record<string, unknown>).placementHints).toEqual({ zones: 3 }); // kept for a later write
    const router = new RingRouter(doc);
    const route = router.route(doc.ranges[0]!.start);
    expect(route.reader.id).toBe(route.owner.id); // an unknown phase: reads stay on the owner
    expect(route.pending?.id).toBe('c'); // writes still reach the target
    const draining = router.route(doc.ranges[1]!.start);
    expect(new DownFence().write(router, draining)).toBe('serve'); // an unknown state is not DOWN
  });

  it('is refused when created (strict), so a typo in a new document is still caught', () => {
    expect(() => parseRingDocument(newer(), { strict: true })).toThrow(/invalid ring document/);
    expect(() => parseRingDocument({ ...initialRing(nodes, 1), format: 2 })).toThrow(/invalid ring document/); // a break bumps format
  });
});
