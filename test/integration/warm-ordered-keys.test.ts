/**
 * Ordered key listings over real cache-node processes: WarmTier.listOrdered (core/tiers/warm-ordered-keys.ts)
 * merging every node's page of GET /v1/keys-ordered (cachenode/src/key-order-routes.ts), compared with a sorted list
 * (compareKeys) of what was written; the node route's refusals; an unreachable node failing the listing; and a
 * listing paging all through a scale-out (ranges moving to a new node, then dropped at their sources), where every
 * key live for the whole listing is listed exactly once.
 */
import { TierUnavailableError } from '../../core/errors.js';
import { after, compareKeys, inKeyRange, type KeyRange, type OrderedKeysPage } from '../../core/model/key-order.js';
import { addNode, initialRing, markDown, type RingDocument } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { Migrator } from '../../core/nodes/migration.js';
import { NodeClient, NodeRequestError, StaleRouteError } from '../../core/nodes/node-client.js';
import { ORDERED_KEYS_MAX_LIMIT } from '../../core/nodes/wire.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { entry, eventually, launchedRing, localFleet, SECRET } from './warm-fixtures.js';

/** The keys of `all` in `r`, sorted: what a complete listing of `r` answers. */
function expected(all: Iterable<string>, r: KeyRange): string[] {
  return [...all].filter((k) => inKeyRange(k, r)).sort(compareKeys);
}

/** Checks the OrderedKeysPage contract: ordered, each key once, at most `limit`, not empty while `more`. */
function expectOrderedPage(page: OrderedKeysPage, limit: number): void {
  expect(page.keys.length).toBeLessThanOrEqual(limit);
  for (let i = 1; i < page.keys.length; i++) expect(compareKeys(page.keys[i - 1]!, page.keys[i]!)).toBeLessThan(0);
  if (page.more) expect(page.keys.length).toBeGreaterThan(0);
}

/** Pages through `r` with the tier until done (each page checked); answers the pages' keys in order. */
async function listAll(tier: WarmTier, ns: string, r: KeyRange, limit: number): Promise<{ keys: string[]; pages: number }> {
  const keys: string[] = [];
  let range = r;
  for (let pages = 1; ; pages++) {
    const page = await tier.listOrdered(ns, { ...range, limit });
    expectOrderedPage(page, limit);
    if (keys.length > 0 && page.keys.length > 0) expect(compareKeys(keys[keys.length - 1]!, page.keys[0]!)).toBeLessThan(0);
    keys.push(...page.keys);
    if (!page.more) return { keys, pages };
    range = after(range, page.keys[page.keys.length - 1]!);
  }
}

describe('ordered key listings over three cache node processes', () => {
  const fleet = localFleet();
  const admin = new NodeClient({ secret: SECRET });
  let store: RingStore;
  let urls: Record<string, string>;
  let ring: RingDocument;
  let tier: WarmTier;
  const written = new Set<string>();

  /** Writes a ring version to the store and pushes it to every node (the tier learns it from their refusals). */
  async function publish(edit: (d: RingDocument, next: number) => void): Promise<void> {
    ring = await store.update(edit);
    await Promise.all(Object.values(urls).map((u) => admin.pushRing(u, ring)));
  }

  beforeAll(async () => {
    const launched = await Promise.all(['n1', 'n2', 'n3'].map((id) => fleet.launch(id)));
    urls = Object.fromEntries(launched.map((n) => [n.nodeId, n.url]));
    store = new RingStore(new InMemoryCasStore());
    ring = await store.create(
      initialRing(
        launched.map((n) => ({ id: n.nodeId, url: n.url })),
        2,
      ),
    );
    await Promise.all(Object.values(urls).map((u) => admin.pushRing(u, ring)));
    tier = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET });
    // ASCII, keys above U+FFFF (surrogate pairs in JavaScript, after U+E000-U+FFFF in UTF-8), prefixes of each
    // other, a combining sequence beside its precomposed form.
    const keys = [
      ...Array.from({ length: 300 }, (_, i) => `item/${String(i).padStart(4, '0')}`),
      ...Array.from({ length: 64 }, (_, i) => `${String.fromCodePoint(0x1f600 + i)}-${i}`),
      ...Array.from({ length: 16 }, (_, i) => `${String.fromCodePoint(0x10000 + i * 4099)}`),
      ...['\uE000', '\uFFFF', 'é', 'e\u0301', 'a', 'a/b', 'a/c', 'a b', 'Z', '~'],
    ];
    for (let i = 0; i < keys.length; i += 100) {
      const outcomes = await tier.putMany(
        'lk',
        keys.slice(i, i + 100).map((key) => ({ key, entry: entry(1, `v-${key}`) })),
      );
      expect(outcomes.every((o) => o.applied)).toBe(true);
    }
    for (const k of keys) written.add(k);
    await tier.putMany(
      'lk-other',
      ['item/0001', 'b'].map((key) => ({ key, entry: entry(1) })),
    );
  });

  afterAll(async () => {
    await tier.close();
    await admin.close();
    await fleet.closeAll();
  });

  it('lists a namespace across the nodes in UTF-8 key order: prefix, bounds, limits and paging to the end', async () => {
    const cases: [KeyRange, number][] = [
      [{}, 7],
      [{}, 50],
      [{}, 5000],
      [{ prefix: 'item/01' }, 4],
      [{ prefix: 'a' }, 1],
      [{ from: { key: 'item/0100', inclusive: true }, to: { key: 'item/0200', inclusive: false } }, 33],
      [{ from: { key: 'item/0100', inclusive: false }, to: { key: 'item/0200', inclusive: true }, prefix: 'item/01' }, 9],
      // Everything above U+FFFF, then everything up to the first of them: the UTF-8 order, not the UTF-16 one.
      [{ from: { key: '\uFFFF', inclusive: false } }, 10],
      [{ to: { key: '\u{10000}', inclusive: true } }, 25],
      [{ prefix: 'nothing' }, 10],
    ];
    for (const [range, limit] of cases) {
      const want = expected(written, range);
      const { keys, pages } = await listAll(tier, 'lk', range, limit);
      expect(keys).toEqual(want);
      // The tier fills every page but the last, even where one node's page ends before the others'.
      expect(pages).toBe(Math.max(1, Math.ceil(want.length / limit)));
    }
    const all = (await tier.listOrdered('lk', { limit: 1000 })).keys;
    expect(all.indexOf('\uFFFF')).toBeLessThan(all.indexOf('\u{10000}'));
    expect(all.indexOf('\u{10000}')).toBeLessThan(all.indexOf('😀-0'));
    await expect(tier.listOrdered('lk-other', { limit: 10 })).resolves.toEqual({ keys: ['b', 'item/0001'], more: false });
    // Every node lists only what it holds: together, the namespace.
    const perNode = await Promise.all(Object.values(urls).map((u) => admin.listOrdered(u, 'lk', { limit: 1000 }, ring.version)));
    for (const p of perNode) expect(p.keys.length).toBeGreaterThan(0);
    expect(perNode.flatMap((p) => p.keys).sort(compareKeys)).toEqual(expected(written, {}));
  });

  it('fills a page past the per-node cap over several rounds, and drops deleted keys once the nodes applied them', async () => {
    const keys = Array.from({ length: 3000 }, (_, i) => `big-${String(i).padStart(5, '0')}`);
    for (let i = 0; i < keys.length; i += 500) {
      await tier.putMany(
        'lk-big',
        keys.slice(i, i + 500).map((key) => ({ key, entry: entry(1) })),
      );
    }
    const node = await admin.listOrdered(urls.n1!, 'lk-big', { limit: 5000 }, ring.version);
    expect(node).toMatchObject({ more: true });
    expect(node.keys).toHaveLength(ORDERED_KEYS_MAX_LIMIT);
    await expect(tier.listOrdered('lk-big', { limit: 2500 })).resolves.toEqual({ keys: keys.slice(0, 2500), more: true });
    expect((await listAll(tier, 'lk-big', {}, 1200)).keys).toEqual(keys);

    await expect(tier.deleteMany('lk-big', ['big-00001', 'big-02999'])).resolves.toEqual([true, true]);
    // Until a node applies a removal it may still list the key (a listing may name dead keys); never after.
    await eventually(async () => (await listAll(tier, 'lk-big', {}, 1000)).keys.length === 2998, 10_000, 'removals applied');
    expect((await listAll(tier, 'lk-big', {}, 1000)).keys).toEqual(keys.filter((k) => k !== 'big-00001' && k !== 'big-02999'));
  });

  it('answers the node route only to callers with the secret and a ring as new as its own, with a valid query', async () => {
    const stranger = new NodeClient({ secret: 'not-the-secret-0123456789' });
    try {
      await expect(stranger.listOrdered(urls.n1!, 'lk', { limit: 5 }, ring.version)).rejects.toMatchObject({
        status: 401,
        code: 'UNAUTHORIZED',
      });
    } finally {
      await stranger.close();
    }
    const stale = admin.listOrdered(urls.n1!, 'lk', { limit: 5 }, ring.version - 1);
    await expect(stale).rejects.toBeInstanceOf(StaleRouteError);
    await expect(stale).rejects.toMatchObject({ code: 'STALE_RING', ringVersion: ring.version });
    await expect(admin.listOrdered(urls.n1!, 'lk', { limit: 0 }, ring.version)).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(admin.listOrdered(urls.n1!, 'Not A Namespace', { limit: 5 }, ring.version)).rejects.toBeInstanceOf(
      NodeRequestError,
    );
    // A node behind the caller answers: it holds every key it held under its older ring.
    await expect(admin.listOrdered(urls.n1!, 'lk', { prefix: 'a/', limit: 5 }, ring.version + 10)).resolves.toMatchObject({
      more: false,
    });
  });

  it('fails with TierUnavailableError while a listed node cannot be reached, and skips it once it is DOWN', async () => {
    // A node that joined the ring but never came up: the tier learns the ring from the nodes' STALE_RING refusals.
    await publish((d) => addNode(d, { id: 'ghost', url: 'http://127.0.0.1:9' }));
    await expect(tier.listOrdered('lk', { limit: 10 })).rejects.toBeInstanceOf(TierUnavailableError);
    await publish((d, next) => void markDown(d, 'ghost', next, 'never came up'));
    const { keys } = await listAll(tier, 'lk', {}, 100);
    expect(keys).toEqual(expected(written, {}));
    expect(tier.staleRetries).toBeGreaterThan(0);
  });
});

describe('an ordered listing during a scale-out 2 -> 3 (real processes)', () => {
  it('lists every key live for the whole listing exactly once per pass, while ranges move to the new node and are dropped at their sources', async () => {
    const fleet = localFleet();
    const client = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
    let tier: WarmTier | undefined;
    let writer: WarmTier | undefined;
    try {
      const { cas, store } = await launchedRing(fleet, client, ['n1', 'n2']);
      const migrator = new Migrator({ ring: store, docs: cas, client, fleet });
      // The listing's tier learns every ring change from the nodes (refresh off); the writer's reads the store.
      tier = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), client });
      writer = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 100 }), secret: SECRET });

      const base = Array.from({ length: 3000 }, (_, i) => `k/${String(i).padStart(5, '0')}${i % 7 === 0 ? '😀' : ''}`);
      for (let i = 0; i < base.length; i += 500) {
        await writer.putMany(
          'mig',
          base.slice(i, i + 500).map((key) => ({ key, entry: entry(1, 'x'.repeat(200)) })),
        );
      }
      const sorted = [...base].sort(compareKeys);

      // New keys keep arriving under another prefix: acknowledged before a pass starts, they must be in it too.
      const acknowledged = new Set<string>();
      let writing = true;
      const writes = (async () => {
        for (let i = 0; writing; i++) {
          const key = `w/${String(i).padStart(6, '0')}`;
          await writer!.put('mig', key, entry(1, 'new'));
          acknowledged.add(key);
        }
      })().catch((e: unknown) => {
        failure ??= e;
      });

      let passes = 0;
      let migrating = true;
      let failure: unknown;
      const listing = (async () => {
        while (migrating || passes < 2) {
          const before = new Set(acknowledged);
          const { keys } = await listAll(tier!, 'mig', {}, 97);
          // Ordered and each key once across the pages (listAll checks page to page); nothing unknown.
          expect(new Set(keys).size).toBe(keys.length);
          expect(keys.filter((k) => k.startsWith('k/'))).toEqual(sorted);
          const listedNew = new Set(keys.filter((k) => k.startsWith('w/')));
          for (const k of before) expect(listedNew.has(k)).toBe(true);
          for (const k of listedNew) expect(k).toMatch(/^w\/\d{6}$/);
          passes++;
        }
      })().catch((e: unknown) => {
        failure ??= e;
      });

      const n3 = await fleet.launch('n3');
      const plan = await migrator.planScaleOut({ target: { id: 'n3', url: n3.url }, mode: 'incremental' });
      await migrator.run(plan.id, { rateBytesPerSec: 300_000, graceMs: 100 });
      await new Promise((r) => setTimeout(r, 150));
      // The sources drop the ranges they gave away while the listing goes on.
      await expect(migrator.cleanupDue(plan.id)).resolves.toBe(plan.sessions.length);
      const passesDuringMigration = passes;
      migrating = false;
      await listing;
      writing = false;
      await writes;
      if (failure) throw failure;

      expect(passesDuringMigration).toBeGreaterThan(0);
      // The listing met the ring changes (the nodes' refusals), and went on under each newer ring.
      expect(tier.staleRetries).toBeGreaterThan(0);
      // Once the sources applied their drops, each key is on exactly one node: the new one holds its share.
      const latest = (await store.load())!;
      const nodeKeys = async (url: string): Promise<string[]> => {
        const out: string[] = [];
        let range: KeyRange = { prefix: 'k/' };
        for (;;) {
          const page = await client.listOrdered(url, 'mig', { ...range, limit: ORDERED_KEYS_MAX_LIMIT }, latest.version);
          out.push(...page.keys);
          if (!page.more) return out;
          range = after(range, page.keys[page.keys.length - 1]!);
        }
      };
      let held: string[][] = [];
      await eventually(
        async () => {
          held = await Promise.all(latest.nodes.map((n) => nodeKeys(n.url)));
          return held.reduce((a, k) => a + k.length, 0) === base.length;
        },
        10_000,
        'range drops applied',
      );
      expect(held.flat().sort(compareKeys)).toEqual(sorted);
      expect(held[latest.nodes.findIndex((n) => n.id === 'n3')]!.length).toBeGreaterThan(0);
    } finally {
      await tier?.close();
      await writer?.close();
      await client.close();
      await fleet.closeAll();
    }
  });
});
