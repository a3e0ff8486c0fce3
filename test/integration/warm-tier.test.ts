import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { TierUnavailableError } from '../../core/errors.js';
import { addNode, initialRing, type RingDocument } from '../../core/ring/document.js';
import { ringHash } from '../../core/ring/hash.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { SwitchableTier } from '../helpers/tiers.js';
import { entry, localFleet, SECRET } from './warm-fixtures.js';

describe('WarmTier over three cache node processes', () => {
  const fleet = localFleet();
  const admin = new NodeClient({ secret: SECRET });
  let store: RingStore;
  let urls: Record<string, string>;
  let ring: RingDocument;

  /** Writes a ring version to the store and pushes it to the given nodes (all by default). */
  async function publish(edit: (d: RingDocument, next: number) => void, pushTo?: string[]): Promise<RingDocument> {
    ring = await store.update(edit);
    await Promise.all((pushTo ?? Object.keys(urls)).map((id) => admin.pushRing(urls[id]!, ring)));
    return ring;
  }

  function ownerOf(key: string, ns = 't'): string {
    const pos = ringHash(ns, key);
    let i = 0;
    while (i + 1 < ring.ranges.length && ring.ranges[i + 1]!.start <= pos) i++;
    return ring.ranges[i]!.owner;
  }

  beforeAll(async () => {
    const launched = await Promise.all(['n1', 'n2', 'n3', 'n4'].map((id) => fleet.launch(id)));
    urls = Object.fromEntries(launched.map((n) => [n.nodeId, n.url]));
    store = new RingStore(new InMemoryCasStore());
    ring = await store.create(
      initialRing(
        ['n1', 'n2', 'n3'].map((id) => ({ id, url: urls[id]! })),
        2,
      ),
    );
    await Promise.all(Object.values(urls).map((u) => admin.pushRing(u, ring)));
  });

  afterAll(async () => {
    await admin.close();
    await fleet.closeAll();
  });

  function tier(opts: { timeoutMs?: number; initial?: RingDocument } = {}): WarmTier {
    const view = new RingView({ store, refreshIntervalMs: 0, ...(opts.initial ? { initial: opts.initial } : {}) });
    return new WarmTier({ ring: view, secret: SECRET, timeoutMs: opts.timeoutMs ?? 2000 });
  }

  it('routes each key to the owner of its range, singly and in batches grouped per node', async () => {
    const t = tier();
    const keys = Array.from({ length: 60 }, (_, i) => `route-${i}`);
    const outcomes = await t.putMany(
      't',
      keys.map((key, i) => ({ key, entry: entry(10 + i, `v${i}`) })),
    );
    expect(outcomes.every((o) => o.applied)).toBe(true);
    for (const k of keys.slice(0, 10)) {
      const owner = ownerOf(k);
      await expect(admin.get(urls[owner]!, 't', k, ring.version)).resolves.toBeDefined();
      for (const other of ['n1', 'n2', 'n3'].filter((n) => n !== owner)) {
        await expect(admin.get(urls[other]!, 't', k, ring.version)).rejects.toMatchObject({ code: 'WRONG_NODE' });
      }
    }
    const got = await t.getMany('t', [...keys, 'absent']);
    expect(got.slice(0, 60).map((e) => e!.value.toString())).toEqual(keys.map((_, i) => `v${i}`));
    expect(got[60]).toBeUndefined();
    await expect(t.get('t', 'route-5')).resolves.toMatchObject({ header: { version: 15 } });
    await expect(t.head('t', 'route-5')).resolves.toMatchObject({ version: 15 });
    await expect(t.has('t', 'route-5')).resolves.toBe(true);
    await expect(t.put('t', 'route-5', entry(14, 'older'))).resolves.toEqual({ applied: false, current: 15 });
    await expect(t.deleteMany('t', ['route-1', 'route-2', 'nope'])).resolves.toEqual([true, true, false]);
    await expect(t.delete('t', 'route-3', 999)).resolves.toBe(false);
    const stats = await t.stats();
    expect(stats).toMatchObject({ name: 'warm', kind: 'cachenode', ringVersion: ring.version, entries: expect.any(Number) });
    await t.ping();
    await t.close();
  });

  it('coalesces concurrent gets into batches sized by the values the node returned lately', async () => {
    const t = tier();
    const owner = ownerOf('big-0');
    // Twelve keys on one node, 300 KB each: a 1 MiB batch holds three of them.
    const keys: string[] = [];
    for (let i = 0; keys.length < 12; i++) if (ownerOf(`big-${i}`) === owner) keys.push(`big-${i}`);
    const value = Buffer.alloc(300 * 1024, 7);
    await t.putMany(
      't',
      keys.map((key) => ({ key, entry: entry(1, value) })),
    );
    // Nothing learnt yet: one batch of twelve.
    const first = { ...t.coalesced };
    const got = await Promise.all(keys.map((k) => t.get('t', k)));
    expect(got.every((e) => e?.value.equals(value))).toBe(true);
    expect(t.coalesced.requests - first.requests).toBe(1);
    // Now the node's values are known to be large: the same reads go as four batches of three.
    const second = { ...t.coalesced };
    const again = await Promise.all(keys.map((k) => t.get('t', k)));
    expect(again.every((e) => e?.value.equals(value))).toBe(true);
    expect({ requests: t.coalesced.requests - second.requests, operations: t.coalesced.operations - second.operations }).toEqual({
      requests: 4,
      operations: 12,
    });
    await t.close();
  });

  it('holds batches for a node while coalesceMaxInFlight requests to it are out, and sends what gathered as one', async () => {
    const view = new RingView({ store, refreshIntervalMs: 0 });
    const t = new WarmTier({ ring: view, secret: SECRET, timeoutMs: 10_000, coalesceMaxInFlight: 1 });
    const owner = ownerOf('held-0');
    const keys: string[] = [];
    for (let i = 0; keys.length < 6; i++) if (ownerOf(`held-${i}`) === owner) keys.push(`held-${i}`);
    await t.putMany(
      't',
      keys.map((key, i) => ({ key, entry: entry(1, `h${i}`) })),
    );
    const before = { ...t.coalesced };
    // The owner is stopped, so the first read stays in flight while the others arrive, each in a turn of its own.
    const pid = fleet.pid(owner)!;
    process.kill(pid, 'SIGSTOP');
    let reads: Promise<unknown>[];
    try {
      reads = [t.get('t', keys[0]!)];
      for (const k of keys.slice(1)) {
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => setImmediate(r));
        reads.push(t.get('t', k));
      }
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const got = (await Promise.all(reads)) as ({ value: Buffer } | undefined)[];
    expect(got.map((e) => e?.value.toString())).toEqual(keys.map((_, i) => `h${i}`));
    // One single read, then the five that waited in one batch (without the limit: five single reads).
    expect({ requests: t.coalesced.requests - before.requests, operations: t.coalesced.operations - before.operations }).toEqual({
      requests: 1,
      operations: 5,
    });
    await t.close();
  });

  it('retries after a stale route: adopts the ring a node sends back, or brings a lagging node up to date', async () => {
    const old = ring;
    // Move the range of key 'moved' to n4 (n4 has no data for it: fine for routing).
    const pos = ringHash('t', 'moved');
    const idx = ring.ranges.findIndex((r, i) => r.start <= pos && (ring.ranges[i + 1]?.start ?? 'g') > pos);
    await publish((d) => {
      addNode(d, { id: 'n4', url: urls.n4!, state: 'NORMAL' });
    });
    await publish(
      (d, next) => {
        d.ranges[idx]!.owner = 'n4';
        d.ranges[idx]!.epoch = next;
      },
      ['n1', 'n2', 'n3'],
    ); // n4 has not heard of it yet
    // A tier still on the old ring writes to the former owner, gets 409 with the new ring, retries on n4, which
    // is behind and answers 409 too: the tier pushes its (newer) ring there and retries once more.
    const t = tier({ initial: old });
    await expect(t.put('t', 'moved', entry(1, 'x'))).resolves.toEqual({ applied: true, current: 1 });
    expect(t.staleRetries).toBe(2);
    await expect(t.get('t', 'moved')).resolves.toMatchObject({ header: { version: 1 } });
    expect(t.staleRetries).toBe(2);
    expect((await admin.ownership(urls.n4!)).ringVersion).toBe(ring.version);
    // A fresh tier on the old ring recovers in one retry (every node knows the current ring now).
    const t2 = tier({ initial: old });
    await expect(t2.get('t', 'moved')).resolves.toMatchObject({ header: { version: 1 } });
    expect(t2.staleRetries).toBe(1);
    await Promise.all([t.close(), t2.close()]);
  });

  it('shadow-writes keys of a pending range to the target and keeps reads on the owner', async () => {
    const t = tier();
    const key = 'shadowed';
    const owner = ownerOf(key);
    const target = ['n1', 'n2', 'n3', 'n4'].find((n) => n !== owner)!;
    const pos = ringHash('t', key);
    const idx = ring.ranges.findIndex((r, i) => r.start <= pos && (ring.ranges[i + 1]?.start ?? 'g') > pos);
    await publish((d, next) => {
      d.ranges[idx]!.pending = { target, session: 'test' };
      d.ranges[idx]!.epoch = next;
    });
    await t.put('t', key, entry(5, 'both'));
    await t.delete('t', 'nothing-here');
    await expect(admin.get(urls[owner]!, 't', key, ring.version)).resolves.toMatchObject({ header: { version: 5 } });
    // The target takes writes for the range but does not serve its reads yet.
    await expect(admin.get(urls[target]!, 't', key, ring.version)).rejects.toMatchObject({ code: 'WRONG_NODE' });
    await t.putMany('t', [{ key, entry: entry(6, 'batch') }]);
    const targetStats = await admin.stats(urls[target]!);
    expect(targetStats.shadowWrites).toBeGreaterThanOrEqual(2);
    // Publish: the target owns it, with both writes.
    await publish((d, next) => {
      d.ranges[idx]!.owner = target;
      delete d.ranges[idx]!.pending;
      d.ranges[idx]!.epoch = next;
    });
    await expect(t.get('t', key)).resolves.toMatchObject({ header: { version: 6 }, value: Buffer.from('batch') });
    await t.close();
  });

  it('when a node cannot be reached, retries once if a newer ring in the store routes elsewhere (a node that left)', async () => {
    // A node owning several ranges: one of them moves away, another stays.
    const from = ['n1', 'n2', 'n3', 'n4'].find((n) => ring.ranges.filter((r) => r.owner === n).length >= 2)!;
    const to = ['n1', 'n2', 'n3', 'n4'].find((n) => n !== from)!;
    const rangeOf = (k: string) => {
      const p = ringHash('t', k);
      return ring.ranges.findIndex((r, i) => r.start <= p && (ring.ranges[i + 1]?.start ?? 'g') > p);
    };
    const candidates = Array.from({ length: 500 }, (_, i) => `left-${i}`).filter((k) => ownerOf(k) === from);
    const key = candidates[0]!;
    const idx = rangeOf(key);
    const unmoved = candidates.find((k) => rangeOf(k) !== idx)!;
    const old = ring;
    await publish((d, next) => {
      d.ranges[idx]!.owner = to;
      d.ranges[idx]!.epoch = next;
    });
    const fresh = tier();
    await fresh.put('t', key, entry(3, 'moved'));
    await fleet.kill(from, 'SIGKILL');
    try {
      const stale = tier({ initial: old });
      await expect(stale.get('t', key)).resolves.toMatchObject({ header: { version: 3 } });
      await expect(stale.put('t', key, entry(4, 'again'))).resolves.toEqual({ applied: true, current: 4 });
      expect(stale.staleRetries).toBeGreaterThanOrEqual(1);
      // A key whose owner did not change fails as before: the node is simply down.
      await expect(stale.get('t', unmoved)).rejects.toBeInstanceOf(TierUnavailableError);
      await Promise.all([stale.close(), fresh.close()]);
    } finally {
      await fleet.restart(from);
    }
  });

  it('plugs in between hot and cold: a dead or hung node makes the coordinator fall through', async () => {
    const hot = new SwitchableTier('hot');
    const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
    const warm = tier({ timeoutMs: 500 });
    const c = new Coordinator({
      tiers: [hot, warm, cold],
      policies: new PolicyRegistry({ defaults: { nearCache: { enabled: false } } }),
      flushTimer: false,
      onBackgroundError: () => {},
    });
    const put = await c.put('t', 'layered', Buffer.from('v1'));
    expect(put.tiers).toEqual(['hot', 'warm', 'cold']);
    hot.down = true;
    await expect(c.get('t', 'layered')).resolves.toMatchObject({ tier: 'warm' });
    // Hang the owner (SIGSTOP): the call times out and the read falls through to cold.
    const owner = ownerOf('layered');
    process.kill(fleet.pid(owner)!, 'SIGSTOP');
    try {
      const started = Date.now();
      await expect(warm.get('t', 'layered')).rejects.toBeInstanceOf(TierUnavailableError);
      expect(Date.now() - started).toBeLessThan(10_000); // a stopped node never answers: this bounds a hang
      await expect(c.get('t', 'layered')).resolves.toMatchObject({ tier: 'cold' });
    } finally {
      process.kill(fleet.pid(owner)!, 'SIGCONT');
    }
    // Kill it: connection refused is immediate.
    await fleet.kill(owner, 'SIGKILL');
    await expect(warm.put('t', 'layered', entry(Number.MAX_SAFE_INTEGER - 1, 'x'))).rejects.toBeInstanceOf(TierUnavailableError);
    await expect(c.get('t', 'layered')).resolves.toMatchObject({ tier: 'cold' });
    // A write that cannot reach warm is not acknowledged.
    await expect(c.put('t', 'layered', Buffer.from('v2'))).rejects.toBeInstanceOf(TierUnavailableError);
    await expect(warm.ping()).rejects.toBeInstanceOf(TierUnavailableError);
    await fleet.restart(owner);
    await expect(c.get('t', 'layered')).resolves.toMatchObject({ tier: 'warm' });
    await c.close();
  });
});
