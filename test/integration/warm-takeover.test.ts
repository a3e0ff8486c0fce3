/**
 * A DOWN cache node is replaced while two coordinators route by different rings: one has read the replacement, the
 * other still sees the node DOWN and writes around it. No read may return a version older than one acknowledged
 * (ring/takeover.ts). Real cache-node processes, a file ring store, a real local folder as the cold tier; each
 * coordinator reads the ring store only when the test (or the write path) asks, so their reads can be held apart.
 * The ring's lease is 1 s (production: 15 s): skips need a ring read within 667 ms, and the hand-over's floor is
 * 3 s after it.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { initialRing, markDown, replaceDownNode, type RingDocument } from '../../core/ring/document.js';
import { ringHash } from '../../core/ring/hash.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import { takeoverFloor } from '../../core/ring/takeover.js';
import { RingView } from '../../core/ring/view.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { localFleet, SECRET, tempDir } from './warm-fixtures.js';

const LEASE_MS = 1000;
const NS = 'takeover';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a replaced cache node while coordinators route by different rings', () => {
  let fleet: ReturnType<typeof localFleet>;
  let ringStore: RingStore;
  let client: NodeClient;
  let urls: Map<string, string>;
  let a: { c: Coordinator; view: RingView };
  let b: { c: Coordinator; view: RingView };
  const dirs: { remove(): void }[] = [];

  beforeAll(async () => {
    const ringDir = tempDir('strata-takeover-ring-');
    const coldDir = tempDir('strata-takeover-cold-');
    dirs.push(ringDir, coldDir);
    fleet = localFleet({ env: { STRATA_NODE_RING_STORE: `file:${ringDir.dir}`, STRATA_NODE_RING_POLL_MS: '100' } });
    const launched = await Promise.all(['n1', 'n2', 'n3'].map((id) => fleet.launch(id)));
    urls = new Map(launched.map((n) => [n.nodeId, n.url]));
    ringStore = new RingStore(new FileCasStore(ringDir.dir));
    const first = initialRing(
      launched.slice(0, 2).map((n) => ({ id: n.nodeId, url: n.url })),
      2,
    );
    const ring = await ringStore.create({ ...first, leaseMs: LEASE_MS });
    client = new NodeClient({ secret: SECRET, timeoutMs: 500 });
    await Promise.all(launched.map((n) => client.pushRing(n.url, ring)));
    const coordinator = () => {
      // No background refresh: this coordinator reads the ring store when the test says, or when a write needs it.
      const view = new RingView({ store: ringStore, refreshIntervalMs: 0 });
      const c = new Coordinator({
        tiers: [new WarmTier({ ring: view, client, ownsRing: true }), new LocalFolderTier({ dir: coldDir.dir, fsync: false })],
        policies: new PolicyRegistry({ defaults: { writeTiers: ['warm', 'cold'], nearCache: { enabled: false } } }),
        flushTimer: false,
        onBackgroundError: () => {},
      });
      return { c, view };
    };
    a = coordinator();
    b = coordinator();
    await Promise.all([a.c.ready(), b.c.ready()]);
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled([a?.c.close(), b?.c.close()]);
    await client?.close();
    await fleet?.closeAll();
    for (const d of dirs) d.remove();
  });

  /** A key of NS that `node` owns under `ring`. */
  function keyOn(ring: RingDocument, node: string, tag: string): string {
    const view = new RingView({ initial: ring, refreshIntervalMs: 0 });
    try {
      for (let i = 0; ; i++) {
        const key = `${tag}-${i}`;
        if (view.current()!.route(ringHash(NS, key)).owner.id === node) return key;
      }
    } finally {
      view.close();
    }
  }

  it('never serves the replacement’s older copy of a key written around it by a caller with the older ring', async () => {
    const ring = (await ringStore.load())!;
    const key = keyOn(ring, 'n1', 'k');
    await a.c.put(NS, key, Buffer.from('v0'));

    // n1 dies and is marked DOWN; both coordinators see it and wait out its lease, so both skip it from now on.
    await fleet.kill('n1');
    await ringStore.update((d, next) => markDown(d, 'n1', next, 'test: killed'));
    await Promise.all([a.view.refresh(), b.view.refresh()]);
    // 503 until fenced
    for (const c of [a.c, b.c]) await expect(c.put(NS, key, Buffer.from('down'))).rejects.toThrow(/unavailable/);
    await sleep(LEASE_MS + 100);

    // B reads the ring just before the replacement is published, A just after: held apart.
    await b.view.refresh();
    const replaced = await ringStore.update((d, next) => {
      replaceDownNode(d, 'n1', { id: 'n3', url: urls.get('n3')! }, next);
    });
    await client.pushRing(urls.get('n3')!, replaced);
    await a.view.refresh();
    expect(a.view.current()!.route(ringHash(NS, key)).owner.id).toBe('n3');
    expect(b.view.current()!.route(ringHash(NS, key)).owner.id).toBe('n1'); // B still writes around n1

    const v1 = await a.c.put(NS, key, Buffer.from('v1-through-A'));
    const v2 = await b.c.put(NS, key, Buffer.from('v2-through-B'));
    expect(v2.version).toBeGreaterThan(v1.version);
    expect(b.view.current()!.route(ringHash(NS, key)).owner.id).toBe('n1'); // its ring was fresh enough to skip on
    // Before the fix, A's write went to n3 and A read 'v1-through-A' back from it.
    expect((await a.c.get(NS, key))?.entry.value.toString()).toBe('v2-through-B');
    expect((await b.c.get(NS, key))?.entry.value.toString()).toBe('v2-through-B');
    // Stamped below the hand-over's floor, neither write reached the new node.
    expect(await client.get(urls.get('n3')!, NS, key, replaced.version)).toBeUndefined();

    // Past the floor, writes reach the new node again, from both: B's ring is now too old to skip on, so it reads
    // the store first and routes to n3.
    const floor = takeoverFloor(LEASE_MS, replaced.ranges.find((r) => r.owner === 'n3')!.takenOver!.at);
    await sleep(Math.max(0, floor - Date.now() + 50));
    const v3 = await a.c.put(NS, key, Buffer.from('v3-through-A'));
    expect(HybridLogicalClock.timeOf(v3.version)).toBeGreaterThanOrEqual(floor);
    expect((await client.get(urls.get('n3')!, NS, key, replaced.version))?.value.toString()).toBe('v3-through-A');
    const v4 = await b.c.put(NS, key, Buffer.from('v4-through-B'));
    expect(v4.tiers).toEqual(['warm', 'cold']);
    expect(b.view.current()!.route(ringHash(NS, key)).owner.id).toBe('n3');
    expect((await a.c.get(NS, key))?.entry.value.toString()).toBe('v4-through-B');
  }, 60_000);
});
