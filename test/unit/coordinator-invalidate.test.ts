/**
 * Invalidation by tag, by prefix and of a whole namespace (issue 24, item 1): once the call returns, no read from any
 * coordinator returns an entry it covered, in any tier or near cache; a write after it is visible as usual, whichever
 * coordinator's clock runs ahead; and a read that cannot know what is invalidated fails closed.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import {
  apply,
  MAX_INVALIDATIONS_PER_SECOND,
  MAX_RECORDS_PER_NAMESPACE,
  type InvalidationDocument,
  type InvalidationRecord,
} from '../../core/coordinator/invalidations.js';
import { StrataError } from '../../core/errors.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { skewedPair } from '../helpers/skewed-pair.js';

const buf = (s: string) => Buffer.from(s);
/** Short leases keep the tests quick; the waits they imply are what the tests rely on. */
const LEASE = { invalidations: { leaseMs: 40 } };
const value = async (c: Coordinator, key: string) => (await c.get('ns', key))?.entry.value.toString();

describe('Coordinator.invalidate', () => {
  it('hides every entry with the tag from both coordinators, near caches included; other entries stay', async () => {
    const { a, b } = skewedPair(LEASE);
    await a.put('ns', 'p1', buf('1'), { tags: ['product:1', 'list'] });
    await a.put('ns', 'p2', buf('2'), { tags: ['product:2', 'list'] });
    await b.put('ns', 'other', buf('3'), { tags: ['product:3'] });
    // Both near caches hold copies.
    for (const c of [a, b]) expect(await value(c, 'p1')).toBe('1');
    await b.invalidate('ns', { tags: ['list'] }, 'test');
    for (const c of [a, b]) {
      expect(await c.get('ns', 'p1')).toBeUndefined();
      expect(await c.head('ns', 'p2')).toBeUndefined();
      expect((await c.getMany('ns', ['p1', 'p2', 'other'])).map((r) => r?.entry.value.toString())).toEqual([
        undefined,
        undefined,
        '3',
      ]);
    }
    // Another namespace is untouched.
    await a.put('ns2', 'p1', buf('x'), { tags: ['list'] });
    expect((await b.get('ns2', 'p1'))?.entry.value.toString()).toBe('x');
  });

  it('never caches in the near cache a copy read before the invalidation that covers it arrived', async () => {
    const { a, b } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('1'), { tags: ['t'] });
    const read = (await a.get('ns', 'k'))!.entry; // a read that then stalls before it fills the near cache
    await b.invalidate('ns', { tags: ['t'] }, 'test');
    expect(await a.get('ns', 'other')).toBeUndefined(); // a's lease ran out: it adopts the new generations
    // The stalled read fills now (its clock reading taken after the near cache dropped its copy, so only the
    // invalidation can refuse it).
    await new Promise((r) => setTimeout(r, 5));
    const near = a as unknown as { nearFill: (...x: unknown[]) => void; near: { time(): number } };
    near.nearFill('ns', 'k', read, a.policies.for('ns'), near.near.time());
    expect(await a.get('ns', 'k')).toBeUndefined();
  });

  it('hides keys under a prefix, and a flush hides the whole namespace', async () => {
    const { a, b } = skewedPair(LEASE);
    for (const k of ['user/1', 'user/2', 'users', 'org/1']) await a.put('ns', k, buf(k));
    await a.invalidate('ns', { prefix: 'user/' }, 'test');
    expect(await Promise.all(['user/1', 'user/2', 'users', 'org/1'].map((k) => value(b, k)))).toEqual([
      undefined,
      undefined,
      'users',
      'org/1',
    ]);
    await b.invalidate('ns', { flush: true }, 'test');
    expect(await Promise.all(['users', 'org/1'].map((k) => value(a, k)))).toEqual([undefined, undefined]);
    // The audit log has both, newest first.
    expect((await a.invalidationLog('ns')).map((r) => r.kind)).toEqual(['flush', 'prefix']);
  });

  it('a write after the call is visible, even from a coordinator whose clock runs a second behind', async () => {
    const { a, b } = skewedPair(LEASE);
    await b.put('ns', 'k', buf('old'), { tags: ['t'] });
    await a.invalidate('ns', { tags: ['t'] }, 'test'); // a's clock is a second ahead of b's
    const w = await b.put('ns', 'k', buf('new'), { tags: ['t'] });
    for (const c of [a, b]) expect(await value(c, 'k')).toBe('new');
    expect(w.version).toBeGreaterThan((await a.invalidationLog())[0]!.generation);
    await b.invalidate('ns', { prefix: 'k' }, 'test');
    await a.put('ns', 'k', buf('newer'));
    expect(await value(b, 'k')).toBe('newer');
  });

  it('covers a write acknowledged before the call by a coordinator whose clock runs a second ahead', async () => {
    const { a, b } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('ahead'), { tags: ['t'] }); // stamped a second ahead of b's clock
    await b.invalidate('ns', { tags: ['t'] }, 'test');
    for (const c of [a, b]) expect(await c.get('ns', 'k')).toBeUndefined();
  });

  it('hides a copy a promotion is installing, and a copy in a lower tier only', async () => {
    const { a, b, hot, cold } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('v'), { tags: ['t'] });
    await hot.delete('ns', 'k'); // only cold holds it: the next read promotes it into hot in the background
    const reading = b.get('ns', 'k');
    await a.invalidate('ns', { tags: ['t'] }, 'test');
    await reading; // a read concurrent with the call may see it
    await b.drain();
    for (const c of [a, b]) expect(await c.get('ns', 'k')).toBeUndefined();
    expect(await cold.get('ns', 'k')).toBeDefined(); // physically still there: removal is not on the request path
  });

  it('survives losing the hot tier: a new coordinator over the same durable tier still sees it', async () => {
    const { a, cold } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('v'), { tags: ['t'] });
    await a.invalidate('ns', { tags: ['t'] }, 'test');
    const fresh = new Coordinator({ tiers: [new MemoryTier({ name: 'hot', maxBytes: 1 << 20 }), cold], flushTimer: false });
    expect(await fresh.get('ns', 'k')).toBeUndefined();
  });

  it('fails closed: with the document unreadable once its lease ran out, reads and writes are 503', async () => {
    const { a, b, cold } = skewedPair(LEASE);
    await a.put('ns', 'k', buf('v'));
    await b.get('ns', 'k');
    cold.down = true;
    await new Promise((done) => setTimeout(done, 60)); // past the lease
    await expect(b.get('ns', 'k')).rejects.toMatchObject({ status: 503, code: 'TIER_UNAVAILABLE' });
    await expect(b.put('ns', 'k', buf('w'))).rejects.toMatchObject({ status: 503 });
    cold.down = false;
    await new Promise((done) => setTimeout(done, 300)); // past the retry back-off
    expect(await value(b, 'k')).toBe('v');
  });

  it('never returns a covered version, and keeps every write that started after the call, under concurrent writes', async () => {
    const { a, b } = skewedPair(LEASE);
    const before = await Promise.all(Array.from({ length: 20 }, (_, i) => a.put('ns', `k${i}`, buf('before'), { tags: ['t'] })));
    const racing = Array.from({ length: 20 }, (_, i) => b.put('ns', `k${i}`, buf('racing'), { tags: ['t'] }));
    await a.invalidate('ns', { tags: ['t'] }, 'test');
    await Promise.all(racing);
    for (let i = 0; i < 20; i += 2) await b.put('ns', `k${i}`, buf('after'), { tags: ['t'] });
    for (const c of [a, b]) {
      for (let i = 0; i < 20; i++) {
        const r = await c.get('ns', `k${i}`);
        if (i % 2 === 0) expect(r?.entry.value.toString()).toBe('after');
        else expect(r?.entry.value.toString()).not.toBe('before'); // a racing write may be ordered either side
        if (r) expect(before.some((w) => w.version === r.entry.header.version)).toBe(false);
      }
    }
  });

  it(`refuses more than ${MAX_INVALIDATIONS_PER_SECOND} calls per second per namespace with 429`, async () => {
    const c = new Coordinator({
      tiers: [new MemoryTier({ name: 'cold', maxBytes: 1 << 20 })],
      flushTimer: false,
      invalidations: { leaseMs: 1 },
      clock: new HybridLogicalClock(),
    });
    const calls = Array.from({ length: MAX_INVALIDATIONS_PER_SECOND + 1 }, (_, i) =>
      c.invalidate('ns', { tags: [`t${i}`] }, 'test').then(
        () => 'ok',
        (e: unknown) => (e as StrataError).code,
      ),
    );
    expect((await Promise.all(calls)).filter((r) => r === 'RATE_LIMITED')).toHaveLength(1);
  });
});

describe('the invalidations document', () => {
  const record = (over: Partial<InvalidationRecord>): InvalidationRecord => ({
    id: 1,
    ns: 'ns',
    kind: 'tags',
    generation: 100,
    at: '2026-01-01T00:00:00.000Z',
    by: 'test',
    ...over,
  });
  const empty: InvalidationDocument = { version: 0, namespaces: {}, log: [] };

  it('a flush drops the tag and prefix generations it supersedes; a prefix drops the longer prefixes under it', () => {
    let doc = apply(empty, record({ tags: ['a', 'b'], generation: 100 }));
    doc = apply(doc, record({ kind: 'prefix', prefix: 'user/1', generation: 110 }));
    doc = apply(doc, record({ kind: 'prefix', prefix: 'user/', generation: 120 }));
    expect(doc.namespaces.ns!.prefixes).toEqual({ 'user/': 120 });
    doc = apply(doc, record({ tags: ['c'], generation: 200 }));
    doc = apply(doc, record({ kind: 'flush', generation: 150 }));
    expect(doc.namespaces.ns).toEqual({ all: 150, tags: { c: 200 }, prefixes: {} });
    expect(doc.log).toHaveLength(5);
    expect(doc.version).toBe(5);
  });

  it(`refuses a new tag above ${MAX_RECORDS_PER_NAMESPACE} kept in a namespace, with 429 and what to do`, () => {
    const tags = Array.from({ length: MAX_RECORDS_PER_NAMESPACE }, (_, i) => `t${i}`);
    const full = apply(empty, record({ tags }));
    expect(() => apply(full, record({ tags: ['t0'] }))).not.toThrow(); // raising a kept one is fine
    const err = (() => {
      try {
        apply(full, record({ tags: ['new'] }));
      } catch (e) {
        return e;
      }
    })();
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429, details: { limit: MAX_RECORDS_PER_NAMESPACE } });
    expect((err as Error).message).toMatch(/flush the namespace/);
  });
});
