/**
 * WarmTier.listOrdered's fan-out (core/tiers/warm-ordered-keys.ts) over stand-in nodes with the node route's rules
 * (a page of what the node holds, at most a few keys a request, STALE_RING when the caller's ring is older), so the
 * races of a real fleet can be staged exactly: a range moving and being dropped between two nodes' answers, a node
 * that cannot be reached, a DOWN node, a ring that keeps changing.
 */
import { TierUnavailableError } from '../../core/errors.js';
import { after, compareKeys, pageOfUnordered, type KeyRange, type OrderedKeysQuery } from '../../core/model/key-order.js';
import { addNode, initialRing, markDown, removeNode, type RingDocument } from '../../core/ring/document.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { NodeUnavailableError, StaleRouteError, type NodeClient } from '../../core/nodes/node-client.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';

/** Keys a stand-in node answers per request at most (the real cap is 1000): pages end at different keys. */
const NODE_CAP = 3;

interface StandIn {
  keys: Set<string>;
  /** The node's ring version: callers with an older one are refused. */
  version: number;
  reachable: boolean;
  asked: number;
  /** Runs before the node answers (a migration step happening meanwhile). */
  beforeAnswer?: () => Promise<void>;
}

describe('WarmTier.listOrdered over stand-in nodes', () => {
  let store: RingStore;
  let nodes: Record<string, StandIn>;
  let tier: WarmTier;

  const url = (id: string) => `http://${id}.test:7000`;
  const standIn = (keys: string[] = []): StandIn => ({ keys: new Set(keys), version: 1, reachable: true, asked: 0 });

  /** A NodeClient with only what the listing uses: the node route's rules over the stand-ins. */
  function client(): NodeClient {
    const byUrl = (u: string) => Object.entries(nodes).find(([id]) => url(id) === u)![1];
    return {
      async listOrdered(u: string, _ns: string, q: OrderedKeysQuery, ringVersion: number) {
        const n = byUrl(u);
        n.asked++;
        if (!n.reachable) throw new NodeUnavailableError(u, 'connect ECONNREFUSED');
        await n.beforeAnswer?.();
        if (ringVersion < n.version) {
          const ring = (await store.load())!;
          throw new StaleRouteError(u, 'STALE_RING', n.version, ring, 'stale');
        }
        return pageOfUnordered(n.keys, { ...q, limit: Math.min(q.limit, NODE_CAP) });
      },
      async getRing() {
        return (await store.load())!;
      },
    } as unknown as NodeClient;
  }

  /** Publishes a ring change; the given stand-ins install it (the others stay behind). */
  async function publish(edit: (d: RingDocument, next: number) => void, installOn: string[]): Promise<RingDocument> {
    const doc = await store.update(edit);
    for (const id of installOn) nodes[id]!.version = doc.version;
    return doc;
  }

  async function listAll(r: KeyRange, limit: number): Promise<string[]> {
    const out: string[] = [];
    let range = r;
    for (;;) {
      const page = await tier.listOrdered('ns', { ...range, limit });
      out.push(...page.keys);
      if (!page.more) return out;
      range = after(range, page.keys[page.keys.length - 1]!);
    }
  }

  beforeEach(async () => {
    store = new RingStore(new InMemoryCasStore());
    nodes = {
      a: standIn(['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'z9']),
      b: standIn(['b1', 'b2', '😀', '\uFFFF']),
    };
    await store.create(
      initialRing(
        [
          { id: 'a', url: url('a') },
          { id: 'b', url: url('b') },
        ],
        1,
      ),
    );
    tier = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), client: client() });
  });

  afterEach(() => tier.close());

  it('merges every node page and fills the page over rounds where one node page ends before the others', async () => {
    const all = [...nodes.a!.keys, ...nodes.b!.keys].sort(compareKeys);
    await expect(tier.listOrdered('ns', { limit: 5 })).resolves.toEqual({ keys: all.slice(0, 5), more: true });
    await expect(tier.listOrdered('ns', { limit: 100 })).resolves.toEqual({ keys: all, more: false });
    await expect(listAll({ from: { key: 'a3', inclusive: false }, to: { key: '😀', inclusive: true } }, 2)).resolves.toEqual(
      all.filter((k) => compareKeys(k, 'a3') > 0 && compareKeys(k, '😀') <= 0),
    );
  });

  it('asks every node again under the newer ring when one answers with it: a range moved and was dropped meanwhile', async () => {
    // c joined (holding nothing yet) before the listing starts; the tier has that ring.
    nodes.c = standIn();
    await publish((d) => addNode(d, { id: 'c', url: url('c') }), ['a', 'b', 'c']);
    // While the listing waits for a, a's keys move to c, the ring says so, and a drops them: c was asked before the
    // keys arrived, a answers after they left.
    nodes.a!.beforeAnswer = async () => {
      nodes.a!.beforeAnswer = undefined;
      for (const k of nodes.a!.keys) nodes.c!.keys.add(k);
      await publish((d) => d.ranges.forEach((r) => (r.owner = 'c')), ['a', 'b', 'c']);
      nodes.a!.keys.clear();
    };
    const all = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'z9', 'b1', 'b2', '😀', '\uFFFF'].sort(compareKeys);
    await expect(tier.listOrdered('ns', { limit: 100 })).resolves.toEqual({ keys: all, more: false });
    // c was asked again (it had nothing the first time), under the ring a answered with.
    expect(nodes.c!.asked).toBeGreaterThanOrEqual(2);
    expect(tier.staleRetries).toBeGreaterThan(0);
  });

  it('fails with TierUnavailableError while a node cannot be reached, unless a newer ring lists it no more or marks it DOWN', async () => {
    nodes.c = standIn(['c1']);
    await publish((d) => addNode(d, { id: 'c', url: url('c') }), ['a', 'b', 'c']);
    nodes.c.reachable = false;
    await expect(tier.listOrdered('ns', { limit: 100 })).rejects.toBeInstanceOf(TierUnavailableError);
    // Marked DOWN in the store (the nodes not told yet): the tier finds the newer ring and skips c from then on.
    await publish((d, next) => void markDown(d, 'c', next, 'unreachable'), []);
    // (The tier reads the store after an unreachable node at most every 250 ms: the failure above just did.)
    await new Promise((r) => setTimeout(r, 300));
    const page = await tier.listOrdered('ns', { limit: 100 });
    expect(page.keys).not.toContain('c1');
    const asked = nodes.c.asked;
    await tier.listOrdered('ns', { limit: 100 });
    expect(nodes.c.asked).toBe(asked);
    // Removed from the ring altogether: the same.
    await publish((d) => removeNode(d, 'c'), ['a', 'b']);
    await expect(tier.listOrdered('ns', { limit: 100 })).resolves.toMatchObject({ more: false });
  });

  it('gives up with TierUnavailableError when every round meets a newer ring', async () => {
    nodes.b!.beforeAnswer = async () => {
      await publish(() => undefined, ['b']);
    };
    await expect(tier.listOrdered('ns', { limit: 100 })).rejects.toBeInstanceOf(TierUnavailableError);
    expect(nodes.b!.asked).toBeGreaterThan(3);
  });
});
