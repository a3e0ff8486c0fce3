/**
 * A full warm node is not a written one (issue 19, item 2): a real cache-node process with a 1 MiB capacity refuses
 * a value it has no room for, and the coordinator must not acknowledge the write while the node keeps serving the
 * older version. It shadows that version with a location marker (which always fits) and acknowledges with the
 * tiers that took the value, or refuses with a typed 503 when none did.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { SwitchableTier } from '../helpers/tiers.js';
import { localFleet, SECRET, singleNodeRing } from './warm-fixtures.js';

describe('a full cache node', () => {
  const fleet = localFleet({ capacityBytes: 1024 * 1024 });
  const admin = new NodeClient({ secret: SECRET });
  let warm: WarmTier;

  beforeAll(async () => {
    const node = await fleet.launch('n1');
    const store = new RingStore(new InMemoryCasStore());
    const ring = await store.create(singleNodeRing('n1', node.url));
    await admin.pushRing(node.url, ring);
    warm = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET, timeoutMs: 5000 });
  });

  afterAll(async () => {
    await warm?.close();
    await admin.close();
    await fleet.closeAll();
  });

  /** Fills the 1 MiB node with values nobody reads again (20 x 64 KiB: more than it holds). */
  async function fill(c: Coordinator, ns: string): Promise<void> {
    for (let i = 0; i < 20; i++) await c.put(ns, `filler-${i}`, Buffer.alloc(64 * 1024, i));
  }

  it('shadows the older copy with a marker and acknowledges with the tiers that took the value', async () => {
    const cold = new SwitchableTier('cold', 64 * 1024 * 1024);
    // No hot tier: reads go to the warm node first, where the older version would still be live.
    const c = new Coordinator({
      tiers: [warm, cold],
      policies: new PolicyRegistry({ defaults: { writeTiers: ['warm', 'cold'], promoteOnRead: false } }),
      flushTimer: false,
    });
    const v1 = await c.put('shadow', 'k', Buffer.from('small v1'));
    expect(v1.tiers).toEqual(['warm', 'cold']);
    await fill(c, 'shadow');
    const v2 = await c.put('shadow', 'k', Buffer.alloc(200 * 1024, 2)); // does not fit any more
    expect(v2.tiers).toEqual(['cold']);
    expect((await warm.head('shadow', 'k'))!).toMatchObject({ version: v2.version, flags: { elsewhere: true } });
    const r = await c.get('shadow', 'k');
    expect(r).toMatchObject({ tier: 'cold', entry: { header: { version: v2.version } } });
    expect((await c.head('shadow', 'k'))!.header.version).toBe(v2.version);
  });

  it('refuses with 503 (reason full) when the namespace writes to the full node alone, and the old value stays', async () => {
    const c = new Coordinator({
      tiers: [warm],
      policies: new PolicyRegistry({ defaults: { writeTiers: ['warm'] } }),
      flushTimer: false,
    });
    const v1 = await c.put('alone', 'k', Buffer.from('v1'));
    await expect(c.put('alone', 'k', Buffer.alloc(512 * 1024))).rejects.toMatchObject({
      status: 503,
      code: 'TIER_UNAVAILABLE',
      details: { reason: 'full' },
    });
    expect((await c.get('alone', 'k'))!.entry.header.version).toBe(v1.version);
  });
});
