/** Shared fixtures of the warm-tier suites (cache nodes, ring, migration). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initialRing, type RingDocument } from '../../core/ring/document.js';
import { LocalFleet } from '../../core/nodes/local-fleet.js';
import type { NodeClient } from '../../core/nodes/node-client.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';

export const SECRET = 'test-secret-0123456789abcdef';

/** Entries for direct tier/store calls: the same builder the unit tests use. */
export { entry } from '../helpers/tiers.js';

export function tempDir(prefix: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fleet of local processes in a fresh temp dir (removed by close()). */
export function localFleet(
  opts: { capacityBytes?: number; env?: Record<string, string> } = {},
): LocalFleet & { closeAll(): Promise<void> } {
  const tmp = tempDir('strata-fleet-');
  // A start bound of 2 minutes, not the default 30 s: a hang bound. On a loaded CI machine, a harness starting four
  // nodes together (each compiling its TypeScript through tsx) has taken over 60 s in all.
  const fleet = new LocalFleet({ rootDir: tmp.dir, secret: SECRET, startTimeoutMs: 120_000, ...opts }) as LocalFleet & {
    closeAll(): Promise<void>;
  };
  fleet.closeAll = async () => {
    await fleet.close();
    tmp.remove();
  };
  return fleet;
}

/**
 * Nodes `ids` of `fleet` launched, a ring over them (`perNode` ranges per node) created in a fresh in-memory
 * store and pushed to each: the start of every multi-node suite.
 */
export async function launchedRing(fleet: LocalFleet, client: NodeClient, ids: readonly string[], perNode = 2) {
  const launched = await Promise.all(ids.map((id) => fleet.launch(id)));
  const cas = new InMemoryCasStore();
  const store = new RingStore(cas);
  const ring = await store.create(
    initialRing(
      launched.map((n) => ({ id: n.nodeId, url: n.url })),
      perNode,
    ),
  );
  await Promise.all(launched.map((n) => client.pushRing(n.url, ring)));
  return { launched, cas, store, ring };
}

export function singleNodeRing(id: string, url: string): RingDocument {
  return initialRing([{ id, url }], 1);
}

/** One node of `fleet` launched as `id`, owning the whole ring (in memory), and a warm tier over it. */
export async function oneNodeWarmTier(
  fleet: LocalFleet,
  nodes: NodeClient,
  id: string,
): Promise<{ nodeId: string; url: string; ringStore: RingStore; warm: WarmTier }> {
  const node = await fleet.launch(id);
  const ringStore = new RingStore(new InMemoryCasStore());
  const ring = await ringStore.create(singleNodeRing(node.nodeId, node.url));
  await nodes.pushRing(node.url, ring);
  const warm = new WarmTier({ ring: new RingView({ store: ringStore, refreshIntervalMs: 0 }), client: nodes });
  return { nodeId: node.nodeId, url: node.url, ringStore, warm };
}

/** Polls `probe` until true (or throws after `ms`). */
export async function eventually(probe: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
