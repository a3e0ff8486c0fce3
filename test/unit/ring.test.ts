import {
  addNode,
  coalesce,
  initialRing,
  parseRingDocument,
  rangeIndexOf,
  rangesIn,
  rangesOfNode,
  removeNode,
  RingDocumentError,
  splitAt,
  type RingDocument,
} from '../../core/ring/document.js';
import {
  bigIntToPosition,
  evenStarts,
  positionToBigInt,
  RING_HASH,
  RING_MIN,
  ringHash,
  ringHashBytes,
} from '../../core/ring/hash.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CasConflictError,
  FileCasStore,
  InMemoryCasStore,
  JsonDocStore,
  RingPreconditionError,
  RingStore,
} from '../../core/ring/store.js';
import { RingRouter, RingView } from '../../core/ring/view.js';

const nodes = [
  { id: 'a', url: 'http://a:1' },
  { id: 'b', url: 'http://b:1' },
  { id: 'c', url: 'http://c:1' },
];

describe('ring hash', () => {
  it('is XXH64 (seed 0) over the UTF-8 of ns NUL key, as hex and as bytes', () => {
    // Reference values from an independent XXH64 implementation (the native @node-rs/xxhash), not from this one.
    expect(RING_HASH).toBe('xxh64');
    expect(ringHash('ns', 'key')).toBe('60e2dfd02ffe05b3');
    expect(ringHash('t', 'user42')).toBe('b8e5441aa735f144');
    expect(ringHash('ns', 'ключ🔑')).toBe('3c9865cd1b4c31e8');
    expect(ringHashBytes('ns', 'ключ🔑').toString('hex')).toBe('3c9865cd1b4c31e8');

    const h = ringHash('ns', 'key');
    expect(h).toMatch(/^[0-9a-f]{16}$/);
    expect(ringHashBytes('ns', 'key').toString('hex')).toBe(h);
    expect(ringHash('ns', 'key')).toBe(h);
    expect(ringHash('ns', 'key2')).not.toBe(h);
    expect(ringHash('n', 's\u0000key')).toBe(ringHash('n', 's\u0000key'));
  });

  it('spreads keys evenly over equal ranges', () => {
    const starts = evenStarts(8);
    const counts = new Array(8).fill(0);
    for (let i = 0; i < 16_000; i++)
      counts[
        rangeIndexOf(
          starts.map((start) => ({ start })),
          ringHash('t', `key-${i}`),
        )
      ]++;
    for (const c of counts) expect(Math.abs(c - 2000)).toBeLessThan(200);
  });

  it('converts positions to and from BigInt', () => {
    expect(positionToBigInt('ffffffffffffffff')).toBe(2n ** 64n - 1n);
    expect(bigIntToPosition(255n)).toBe('00000000000000ff');
    expect(() => bigIntToPosition(2n ** 64n)).toThrow(RangeError);
    expect(evenStarts(4)).toEqual([RING_MIN, '4000000000000000', '8000000000000000', 'c000000000000000']);
  });
});

describe('ring document', () => {
  it('deals ranges round-robin and validates structure', () => {
    const doc = initialRing(nodes, 2);
    expect(doc.version).toBe(1);
    expect(doc.ranges.map((r) => r.owner)).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
    expect(parseRingDocument(JSON.parse(JSON.stringify(doc)))).toEqual(doc);
    const bad = structuredClone(doc);
    bad.ranges[2]!.owner = 'nobody';
    expect(() => parseRingDocument(bad)).toThrow(/unknown node 'nobody'/);
    const unordered = structuredClone(doc);
    [unordered.ranges[1], unordered.ranges[2]] = [unordered.ranges[2]!, unordered.ranges[1]!];
    expect(() => parseRingDocument(unordered)).toThrow(/ascending/);
    const selfPending = structuredClone(doc);
    selfPending.ranges[0]!.pending = { target: 'a', session: 's' };
    expect(() => parseRingDocument(selfPending)).toThrow(/its own owner/);
  });

  it('splits without changing routing, and coalesces neighbours of one owner', () => {
    const doc = initialRing(nodes, 1);
    const before = new RingRouter(doc);
    splitAt(doc, '2000000000000000');
    splitAt(doc, '2000000000000000'); // idempotent
    expect(doc.ranges.map((r) => [r.start, r.owner])).toEqual([
      [RING_MIN, 'a'],
      ['2000000000000000', 'a'],
      ['5555555555555555', 'b'],
      ['aaaaaaaaaaaaaaaa', 'c'],
    ]);
    const after = new RingRouter(doc);
    for (let i = 0; i < 500; i++) {
      const p = ringHash('t', `k${i}`);
      expect(after.route(p).owner.id).toBe(before.route(p).owner.id);
    }
    expect(rangesIn(doc, { start: RING_MIN, end: '5555555555555555' })).toEqual([0, 1]);
    expect(() => rangesIn(doc, { start: RING_MIN, end: '3000000000000000' })).toThrow(RingDocumentError);
    coalesce(doc);
    expect(doc.ranges).toHaveLength(3);
  });

  it('routes to owners and pending targets, and lists a node’s ranges', () => {
    const doc = initialRing(nodes, 1);
    addNode(doc, { id: 'd', url: 'http://d:1' });
    doc.version = 2;
    doc.ranges[1]!.pending = { target: 'd', session: 's1' };
    doc.ranges[1]!.epoch = 2;
    const r = new RingRouter(parseRingDocument(doc));
    const route = r.route('6000000000000000');
    expect(route).toMatchObject({
      index: 1,
      owner: { id: 'b' },
      pending: { id: 'd' },
      span: { start: '5555555555555555', end: 'aaaaaaaaaaaaaaaa' },
    });
    expect(r.route('ffffffffffffffff')).toMatchObject({ owner: { id: 'c' }, span: { end: null } });
    expect(rangesOfNode(doc, 'd')).toEqual({
      owned: [],
      incoming: [{ start: '5555555555555555', end: 'aaaaaaaaaaaaaaaa', owner: 'b', session: 's1' }],
    });
    expect(() => removeNode(doc, 'd')).toThrow(/still owns or receives/);
  });
});

describe('RingStore (compare-and-set)', () => {
  it('creates once, then every update is version + 1 by CAS', async () => {
    const store = new RingStore(new InMemoryCasStore());
    await expect(store.load()).resolves.toBeUndefined();
    await store.create(initialRing(nodes, 1));
    await expect(store.create(initialRing(nodes, 1))).rejects.toBeInstanceOf(CasConflictError);
    const v2 = await store.update((d, next) => {
      d.ranges[0]!.epoch = next;
    });
    expect(v2.version).toBe(2);
    expect((await store.load())!.ranges[0]!.epoch).toBe(2);
    // "Nothing to do" writes nothing.
    const same = await store.update(() => false);
    expect(same.version).toBe(2);
  });

  it('re-runs an edit on the fresh document after losing a race, so concurrent edits both land', async () => {
    const cas = new InMemoryCasStore();
    const store = new RingStore(cas);
    await store.create(initialRing(nodes, 1));
    const results = await Promise.all(
      ['d', 'e', 'f', 'g'].map((id) =>
        store.update((d) => {
          addNode(d, { id, url: `http://${id}:1` });
        }),
      ),
    );
    const final = (await store.load())!;
    expect(final.version).toBe(5);
    expect(final.nodes.map((n) => n.id).sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    expect(new Set(results.map((r) => r.version)).size).toBe(4);
  });

  it('refuses an edit that would break the document, and lets an edit abort', async () => {
    const store = new RingStore(new InMemoryCasStore());
    await store.create(initialRing(nodes, 1));
    await expect(store.update((d) => void (d.ranges[0]!.owner = 'ghost'))).rejects.toThrow(/invalid ring/);
    await expect(
      store.update(() => {
        throw new RingPreconditionError('no longer applies');
      }),
    ).rejects.toBeInstanceOf(RingPreconditionError);
    expect((await store.load())!.version).toBe(1);
  });

  it('JSON documents follow the same CAS discipline', async () => {
    const docs = new JsonDocStore<{ n: number }>(new InMemoryCasStore(), 'sessions/');
    await docs.create('s1', { n: 0 });
    await Promise.all(Array.from({ length: 5 }, () => docs.update('s1', (d) => ({ n: d.n + 1 }))));
    await expect(docs.get('s1')).resolves.toEqual({ n: 5 });
  });
});

describe('FileCasStore (local run)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-cas-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has the same compare-and-set semantics, across store instances (processes) sharing the folder', async () => {
    const a = new FileCasStore(dir);
    const b = new FileCasStore(dir);
    const e1 = await a.put('x/doc.json', '{"n":1}', null);
    await expect(b.put('x/doc.json', '{"n":1}', null)).rejects.toBeInstanceOf(CasConflictError);
    await expect(b.get('x/doc.json')).resolves.toEqual({ body: '{"n":1}', etag: e1 });
    await b.put('x/doc.json', '{"n":2}', e1);
    await expect(a.put('x/doc.json', '{"n":3}', e1)).rejects.toBeInstanceOf(CasConflictError);
    await expect(a.get('missing')).resolves.toBeUndefined();
  });

  it('serialises concurrent ring edits from several instances', async () => {
    const stores = Array.from({ length: 4 }, () => new RingStore(new FileCasStore(join(dir, 'ring'))));
    await stores[0]!.create(initialRing(nodes, 1));
    await Promise.all(stores.map((s, i) => s.update((d) => addNode(d, { id: `x${i}`, url: `http://x${i}:1` }))));
    const final = (await stores[0]!.load())!;
    expect(final.version).toBe(5);
    expect(final.nodes).toHaveLength(7);
  });
});

describe('RingView', () => {
  it('only moves forward, shares one store read among concurrent refreshes, and notifies', async () => {
    const cas = new InMemoryCasStore();
    const store = new RingStore(cas);
    const doc = await store.create(initialRing(nodes, 1));
    const view = new RingView({ store, refreshIntervalMs: 0 });
    expect(view.version).toBe(0);
    const seen: number[] = [];
    view.onChange((r) => seen.push(r.version));
    const [a, b] = await Promise.all([view.refresh(), view.refresh()]);
    expect(a).toBe(b);
    const newer: RingDocument = { ...structuredClone(doc), version: 5 };
    expect(view.adopt(newer)).toBe(true);
    expect(view.adopt(doc)).toBe(false);
    expect(view.version).toBe(5);
    await view.refresh(); // the store still has version 1: ignored
    expect(view.version).toBe(5);
    expect(seen).toEqual([1, 5]);
    view.close();
  });

  it('knows how long ago it last read the store, which a pushed document does not renew', async () => {
    const store = new RingStore(new InMemoryCasStore());
    const doc = await store.create(initialRing(nodes, 1));
    const view = new RingView({ store, refreshIntervalMs: 0 });
    expect(view.age()).toBe(Infinity); // never read: too old to skip a DOWN node on
    await view.refresh();
    expect(view.age()).toBeLessThan(1000);
    await new Promise((r) => setTimeout(r, 30));
    const before = view.age();
    view.adopt({ ...structuredClone(doc), version: 2 });
    expect(view.age()).toBeGreaterThanOrEqual(before); // newer, but the store may hold newer still
    view.close();
    expect(new RingView({ initial: doc, refreshIntervalMs: 0 }).age()).toBe(0); // no store: what is pushed is all
  });
});
