/**
 * ReplaceNode end to end (issue 23, item 5): the synthesized state machine under aws-local-stepfunctions with the real
 * steps, real cache-node processes (the local fleet stands in for EC2), a coordinator writing warm + a cold folder
 * under load. A node is killed and marked DOWN; the workflow launches a replacement, hands it the dead node's ranges,
 * fills it from cold and terminates the dead one, while writes and reads go on: nothing acknowledged is lost, no read
 * goes back in time, and the fleet is back to four NORMAL nodes.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { StrataError } from '../../core/errors.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { markDown } from '../../core/ring/document.js';
import { ringHash } from '../../core/ring/hash.js';
import { RingView } from '../../core/ring/view.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { tempDir } from '../integration/warm-fixtures.js';
import { harness, type Harness } from './harness.js';

const NS = 'replace';

describe('ReplaceNode state machine (aws-local-stepfunctions, real cache nodes)', () => {
  let h: Harness;
  let cold: LocalFolderTier;
  let warm: WarmTier;
  let coordinator: Coordinator;
  const coldDir = tempDir('strata-replace-cold-');

  beforeEach(async () => {
    cold = new LocalFolderTier({ dir: coldDir.dir, fsync: false });
    h = await harness({ nodes: ['n1', 'n2', 'n3', 'n4'], tiers: {} });
    // A short lease, so writes skip the dead node soon after it is marked (nodes here do not poll: none is paused).
    await h.ring.update((d) => {
      d.leaseMs = 1000;
    });
    warm = new WarmTier({ ring: new RingView({ store: h.ring, refreshIntervalMs: 100 }), client: h.client, ownsRing: true });
    h.deps.tiers.warm = warm;
    h.deps.tiers.cold = cold;
    coordinator = new Coordinator({
      tiers: [warm, cold],
      policies: new PolicyRegistry({ defaults: { writeTiers: ['warm', 'cold'], nearCache: { enabled: false } } }),
      flushTimer: false,
      onBackgroundError: () => {},
    });
  }, 300_000);
  afterEach(async () => {
    await coordinator?.close();
    await h?.close();
    coldDir.remove();
  });

  it('replaces a killed node under load: its ranges on a new node, filled from cold, nothing lost or stale', async () => {
    const keys = Array.from({ length: 300 }, (_, i) => `key-${i}`);
    const acked = new Map<string, number>();
    for (const k of keys) acked.set(k, (await coordinator.put(NS, k, Buffer.from(`first ${k}`))).version);
    const before = (await h.ring.load())!;
    const onN2 = keys.filter(
      (k) => new RingView({ initial: before, refreshIntervalMs: 0 }).current()!.route(ringHash(NS, k)).owner.id === 'n2',
    );
    expect(onN2.length).toBeGreaterThan(0);

    await h.fleet.kill('n2');
    await h.ring.update((d, next) => markDown(d, 'n2', next, 'test: killed'));

    // Load while the replacement runs: writes may fail only until the lease of n2 has run out.
    const stale: string[] = [];
    let running = true;
    const load = (async () => {
      for (let i = 0; running; i++) {
        const k = keys[(i * 7) % keys.length]!;
        try {
          if (i % 2 === 0) acked.set(k, Math.max(acked.get(k)!, (await coordinator.put(NS, k, Buffer.from(`#${i}`))).version));
          else {
            const floor = acked.get(k)!;
            const v = (await coordinator.get(NS, k))?.entry.header.version ?? 0;
            if (v < floor) stale.push(`${k}: ${v} < ${floor}`);
          }
        } catch (e) {
          // Writes to n2's ranges fail until its lease has run out (acknowledged or not, never both).
          if (!(e instanceof StrataError)) throw e;
        }
      }
    })();
    const exec = h.runner.start('replace-node', { nodeId: 'n2', fillNamespaces: [NS], fillMaxMs: 200 });
    let done;
    try {
      done = await h.runner.wait(exec.name);
    } finally {
      running = false;
      await load;
    }
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('SUCCEEDED');
    expect(done.states).toEqual(
      expect.arrayContaining(['Begin', 'LaunchNode', 'CheckNode', 'TakeOver', 'TerminateDeadNode', 'Fill', 'Finish']),
    );

    const after = (await h.ring.load())!;
    expect(after.nodes).toHaveLength(4);
    expect(after.nodes.every((n) => n.state === 'NORMAL')).toBe(true);
    expect(after.nodes.some((n) => n.id === 'n2')).toBe(false);
    const fresh = after.nodes.find((n) => !['n1', 'n3', 'n4'].includes(n.id))!;
    // The new node owns exactly the ranges n2 owned.
    const owned = (d: typeof before, id: string) => d.ranges.filter((r) => r.owner === id).map((r) => r.start);
    expect(owned(after, fresh.id)).toEqual(owned(before, 'n2'));
    expect((await h.fleet.list()).some((n) => n.nodeId === 'n2')).toBe(false); // the dead instance terminated

    // Filled from cold: n2's keys are in warm again (peek: a read of warm alone, no fall-through).
    const filled = await Promise.all(onN2.map((k) => warm.get(NS, k, { peek: true })));
    expect(filled.filter((e) => e === undefined)).toEqual([]);
    expect(stale).toEqual([]);
    for (const [k, v] of acked) expect((await coordinator.get(NS, k))!.entry.header.version).toBeGreaterThanOrEqual(v);

    const p = (await h.progress.get(exec.name))!;
    expect(p).toMatchObject({ workflow: 'replace-node', total: 3, done: 3, outcome: 'succeeded' });
    expect(p.facts.recoveryMs).toEqual(expect.any(Number));
    expect(h.metrics.find((m) => m.key === 'nodeRecoveryMs')?.value).toBeGreaterThan(0);
  }, 300_000);

  it('refuses a node that is not DOWN before launching anything', async () => {
    const exec = h.runner.start('replace-node', { nodeId: 'n3' });
    const done = await h.runner.wait(exec.name);
    expect(done.status).toBe('FAILED');
    expect(done.states).not.toContain('LaunchNode');
    expect(JSON.stringify(done.error)).toMatch(/is NORMAL, not DOWN/);
    expect((await h.fleet.list()).length).toBe(4);
  }, 300_000);
});
