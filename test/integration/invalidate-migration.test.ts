/**
 * An invalidation racing a scale-out migration (issue 24, item 8), with real cache-node processes: once the call
 * returns, no read from either coordinator returns an entry it covers, whether the entry is read from the range's
 * source, from its target while the range streams, or after ownership flipped; and no write after the call is lost.
 * The check is on the entry read (coordinator/invalidations.ts), wherever it came from; this shows it with copies
 * that really move between processes while reads and writes go on.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { Migrator, type MigrationEvent } from '../../core/nodes/migration.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { parseRingDocument } from '../../core/ring/document.js';
import { RingView } from '../../core/ring/view.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { launchedRing, localFleet, SECRET } from './warm-fixtures.js';

const NS = 'inv';
const KEYS = 3000;
const key = (i: number) => (i % 2 === 0 ? `p/${i}` : `q/${i}`);

describe('invalidation during a scale-out migration (real processes)', () => {
  it('covered entries stay hidden wherever the migration has them, and writes after the call are never lost', async () => {
    const fleet = localFleet();
    const client = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
    const { cas, store } = await launchedRing(fleet, client, ['n1', 'n2', 'n3']);
    // The invalidations document lives in the lowest tier, shared by both coordinators as S3 is in AWS; the entries
    // live in the warm tier alone, so every read of them goes to the nodes the migration is moving them between.
    const durable = new MemoryTier({ name: 'cold', maxBytes: 16 * 1024 * 1024 });
    const policies = new PolicyRegistry({
      defaults: { writeTiers: ['warm'], nearCache: { enabled: true }, promoteOnRead: false },
    });
    const coordinators = [0, 1].map(
      () =>
        new Coordinator({
          tiers: [
            new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 200 }), secret: SECRET, timeoutMs: 5000 }),
            durable,
          ],
          nearCache: new MemoryTier({ name: 'l1', maxBytes: 4 * 1024 * 1024 }),
          policies,
          invalidations: { leaseMs: 150 },
          flushTimer: false,
          onBackgroundError: () => {},
        }),
    );
    const [a, b] = coordinators as [Coordinator, Coordinator];
    const events: MigrationEvent[] = [];
    const migrator = new Migrator({ ring: store, docs: cas, client, fleet, onEvent: (e) => events.push(e) });
    const violations: string[] = [];
    const errors: string[] = [];
    /** Per key: the newest version acknowledged after the invalidation returned (0: none). */
    const after = new Float64Array(KEYS);
    let generation = Infinity;
    let stop = false;
    try {
      for (let i = 0; i < KEYS; i += 100)
        await Promise.all(Array.from({ length: 100 }, (_, j) => a.put(NS, key(i + j), Buffer.from(`before ${i + j}`))));
      // Near caches hold copies too.
      await b.getMany(NS, Array.from({ length: KEYS }, (_, i) => key(i)).slice(0, 500));

      const readers = [a, b].map(async (c) => {
        while (!stop) {
          const i = Math.floor(Math.random() * KEYS);
          const invalidatedAt = generation;
          try {
            const r = await c.get(NS, key(i));
            // Only p/ keys are covered, and only once the call returned: a read that started after it may return
            // nothing, or a write made after it, never a version at or below the generation.
            if (i % 2 === 0 && invalidatedAt !== Infinity && r && r.entry.header.version <= invalidatedAt)
              violations.push(`${key(i)}: read version ${r.entry.header.version} <= generation ${invalidatedAt}`);
            if (i % 2 === 1 && !r) violations.push(`${key(i)}: an uncovered key went missing`);
          } catch (e) {
            errors.push(`${key(i)}: ${(e as Error).message}`);
          }
        }
      });
      const writers = [a, b].map(async (c) => {
        while (!stop) {
          const i = 2 * Math.floor((Math.random() * KEYS) / 2);
          const started = generation;
          try {
            const w = await c.put(NS, key(i), Buffer.from(`after ${i}`));
            if (started !== Infinity && !w.superseded) after[i] = Math.max(after[i]!, w.version);
          } catch (e) {
            errors.push(`${key(i)}: ${(e as Error).message}`);
          }
        }
      });

      const n4 = await fleet.launch('n4');
      const plan = await migrator.planScaleOut({ target: { id: 'n4', url: n4.url }, mode: 'incremental' });
      const migration = migrator.run(plan.id, { rateBytesPerSec: 150_000, graceMs: 300 });
      // Mid-migration: at least one range streaming or handed over, others still to come.
      while (!events.some((e) => e.type === 'prepared')) await new Promise((r) => setTimeout(r, 20));
      const inv = await b.invalidate(NS, { prefix: 'p/' }, 'test');
      generation = inv.generation;
      const finishedAfterCall = !events.some((e) => e.type === 'finished');
      await migration;
      await new Promise((r) => setTimeout(r, 500));
      stop = true;
      await Promise.all([...readers, ...writers]);

      expect(finishedAfterCall).toBe(true);
      expect(parseRingDocument(await store.load()).nodes.find((n) => n.id === 'n4')!.state).toBe('NORMAL');
      expect(errors.slice(0, 5)).toEqual([]);
      expect(violations.slice(0, 5)).toEqual([]);
      // Every p/ key: never a covered version (at or below the generation); a write acknowledged after the call is
      // read at least at its version. (A write that started before the call and ended after it may be either.)
      const fresh = new WarmTier({ ring: new RingView({ store, refreshIntervalMs: 0 }), secret: SECRET });
      const check = new Coordinator({ tiers: [fresh, durable], policies, flushTimer: false, onBackgroundError: () => {} });
      const lost: string[] = [];
      for (let i = 0; i < KEYS; i += 2) {
        const r = await check.get(NS, key(i));
        const v = r?.entry.header.version;
        if ((v !== undefined && v <= generation) || (after[i]! > 0 && (v === undefined || v < after[i]!)))
          lost.push(`${key(i)}: read ${v ?? 'nothing'}, generation ${generation}, acknowledged after: ${after[i]}`);
      }
      expect(lost.slice(0, 5)).toEqual([]);
      expect(after.some((v) => v > generation)).toBe(true);
      await check.close();
    } finally {
      stop = true;
      await Promise.all(coordinators.map((c) => c.close()));
      await client.close();
      await fleet.closeAll();
    }
  }, 300_000);
});
