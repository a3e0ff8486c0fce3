/**
 * The background copy, move and delete responses (core/policy/data-mover.ts, paper 003 Table 1) over real tiers:
 * a cache-node process as warm and the local folder tier as cold, driven directly and through the background
 * evaluator as a threshold copy and a timer copy fire (the paper's Persistent backup and low-durability push, written
 * as rules: the presets of those names write cold with every write instead, since a warm range lives on one cache
 * node, so they need neither). What must hold: the selection takes exactly what it
 * names; a copy never replaces a newer version; a move never removes a newer write from the source; a delete never
 * removes the last durable copy; a copy made while its key was deleted is withdrawn; the bandwidth cap paces the
 * copy (an injected clock, so no timing assert).
 */
import { LOGICAL_BITS } from '../../core/model/hlc.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { runTransfer, type TransferSpec } from '../../core/policy/data-mover.js';
import { BackgroundEvaluator } from '../../core/policy/evaluator.js';
import type { PolicyState } from '../../core/policy/preview.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import type { Tier } from '../../core/tiers/tier.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { transferOver } from '../../scripts/local/policy-evaluator.js';
import { entry, localFleet, oneNodeWarmTier, SECRET, tempDir } from './warm-fixtures.js';

const KiB = 1024;
let counter = 0;
/** A fresh namespace per test: the tiers are shared by the whole file. */
const freshNs = () => `mv${++counter}`;
/** A version issued `agoMs` before now. */
const versionAgo = (agoMs: number, n = 0) => (Date.now() - agoMs) * LOGICAL_BITS + n;

describe('background copy, move and delete (a cache node as warm, the folder tier as cold)', () => {
  const fleet = localFleet();
  const nodes = new NodeClient({ secret: SECRET, timeoutMs: 5000 });
  const folder = tempDir('strata-mover-cold-');
  let warm: WarmTier;
  let cold: LocalFolderTier;

  beforeAll(async () => {
    ({ warm } = await oneNodeWarmTier(fleet, nodes, 'm1'));
    cold = new LocalFolderTier({ dir: folder.dir, fsync: false });
  });
  afterAll(async () => {
    await warm?.close();
    await cold?.close();
    await nodes.close();
    await fleet.closeAll();
    folder.remove();
  });

  /** The background evaluator as npm start builds it, over this file's warm and cold tiers (no fleet to resize). */
  const evaluatorOver = (state: () => PolicyState, now?: () => number) =>
    new BackgroundEvaluator({
      actions: {
        fleetSize: async () => 1,
        scaling: async () => false,
        scaleOut: async () => 'none',
        scaleIn: async () => 'none',
        transfer: transferOver([warm, cold]),
      },
      state: async () => state(),
      ...(now ? { now } : {}),
    });

  const spec = (ns: string, extra: Partial<TransferSpec> = {}): TransferSpec => ({
    rule: 'test',
    kind: 'copy',
    ns,
    from: warm,
    to: [cold],
    what: [],
    durable: [warm, cold],
    ...extra,
  });

  it('copies exactly what the selection takes, and keeps a newer version the target already holds', async () => {
    const ns = freshNs();
    const v = versionAgo(0);
    await warm.put(ns, 'big', entry(v, Buffer.alloc(8 * KiB, 1), { tags: ['keep'] }));
    await warm.put(ns, 'small', entry(v + 1, 'tiny', { tags: ['keep'] }));
    await warm.put(ns, 'untagged', entry(v + 2, Buffer.alloc(8 * KiB, 2)));
    await warm.put(ns, 'newer-below', entry(v + 3, Buffer.alloc(8 * KiB, 3), { tags: ['keep'] }));
    await cold.put(ns, 'newer-below', entry(v + 100, 'newer'));
    const r = await runTransfer(spec(ns, { tag: 'keep', what: [{ object: 'size', op: '>=', value: 4 * KiB }] }));
    expect(r).toMatchObject({ scanned: 4, selected: 2, copied: 1, unchanged: 1, removed: 0, bytes: 8 * KiB });
    expect((await cold.head(ns, 'big'))?.version).toBe(v);
    expect(await cold.head(ns, 'small')).toBeUndefined();
    expect(await cold.head(ns, 'untagged')).toBeUndefined();
    expect((await cold.get(ns, 'newer-below'))!.value.toString()).toBe('newer');
  });

  it('copies only what was written since the last run when told (a timer rule after its first run)', async () => {
    const ns = freshNs();
    await warm.put(ns, 'old', entry(versionAgo(60_000), 'old'));
    await warm.put(ns, 'new', entry(versionAgo(0), 'new'));
    const r = await runTransfer(spec(ns, { writtenSince: Date.now() - 30_000 }));
    expect(r).toMatchObject({ scanned: 2, selected: 1, copied: 1 });
    expect(await cold.head(ns, 'old')).toBeUndefined();
  });

  it('paces a copy to its bandwidth cap', async () => {
    const ns = freshNs();
    const v = versionAgo(0);
    for (let i = 0; i < 10; i++) await warm.put(ns, `k${i}`, entry(v + i, Buffer.alloc(4 * KiB, i)));
    let clock = 1_000_000;
    const sleeps: number[] = [];
    const r = await runTransfer(spec(ns, { bytesPerSecond: 4 * KiB }), {
      now: () => clock,
      sleep: async (ms) => {
        sleeps.push(ms);
        clock += ms;
      },
    });
    expect(r.copied).toBe(10);
    // 40 KiB at 4 KiB/s: every entry after the first waits for the one before it, one second each.
    expect(sleeps).toEqual(Array.from({ length: 9 }, () => 1000));
    expect(r.throttledMs).toBe(9000);
    // Without a cap nothing waits.
    const uncapped = await runTransfer(spec(freshNs()), { sleep: async () => void sleeps.push(-1) });
    expect(uncapped.throttledMs).toBe(0);
  });

  it('moves entries, but never removes a newer write that reached the source during the move', async () => {
    const ns = freshNs();
    const v = versionAgo(0);
    await warm.put(ns, 'a', entry(v, 'a1'));
    await warm.put(ns, 'b', entry(v + 1, 'b1'));
    // The copy of 'b' into cold is the moment a newer write of 'b' lands in warm.
    const racing: Tier = Object.create(cold) as Tier;
    racing.put = async (n, k, e) => {
      if (k === 'b') await warm.put(ns, 'b', entry(v + 50, 'b2'));
      return cold.put(n, k, e);
    };
    const r = await runTransfer(spec(ns, { kind: 'move', to: [racing] }));
    expect(r).toMatchObject({ copied: 2, removed: 1 });
    expect(await warm.head(ns, 'a')).toBeUndefined();
    expect((await cold.get(ns, 'a'))!.value.toString()).toBe('a1');
    expect((await warm.get(ns, 'b'))!.value.toString()).toBe('b2');
  });

  it('withdraws a copy made while its key was deleted (no resurrection once tombstones expire)', async () => {
    const ns = freshNs();
    await warm.put(ns, 'gone', entry(versionAgo(0), 'doomed'));
    const deleting: Tier = Object.create(cold) as Tier;
    deleting.put = async (n, k, e) => {
      const out = await cold.put(n, k, e);
      await warm.delete(ns, 'gone'); // deleted, and its tombstone already expired, while the copy was written
      return out;
    };
    const r = await runTransfer(spec(ns, { to: [deleting] }));
    expect(r).toMatchObject({ withdrawn: 1, copied: 0 });
    expect(await cold.head(ns, 'gone')).toBeUndefined();
  });

  it('deletes from a tier only where another durable tier holds the version or a newer one', async () => {
    const ns = freshNs();
    const v = versionAgo(0);
    await warm.put(ns, 'backed', entry(v, 'x'));
    await cold.put(ns, 'backed', entry(v, 'x'));
    await warm.put(ns, 'only-copy', entry(v + 1, 'y'));
    await warm.put(ns, 'older-below', entry(v + 2, 'z2'));
    await cold.put(ns, 'older-below', entry(v - 5, 'z1'));
    const r = await runTransfer(spec(ns, { kind: 'delete', to: [] }));
    expect(r).toMatchObject({ selected: 3, removed: 1, unchanged: 2 });
    expect(await warm.head(ns, 'backed')).toBeUndefined();
    expect((await warm.get(ns, 'only-copy'))!.value.toString()).toBe('y');
    expect((await warm.get(ns, 'older-below'))!.value.toString()).toBe('z2');
  });

  it("a capped copy backs warm up to cold when warm passes its fill threshold (the paper's Persistent backup)", async () => {
    const ns = freshNs();
    const policy = compilePolicyInput(
      {
        rules: [
          {
            id: 'backup',
            scope: { namespace: ns },
            on: { threshold: { tier: 'warm', metric: 'fillPercent', op: '>=', value: 50 } },
            do: [{ copy: { from: 'warm', to: ['cold'], bandwidthBytesPerSecond: 1024 * KiB } }],
          },
        ],
      },
      { background: true },
    );
    // What warm holds and cold does not (written before the namespace's placement included cold, say).
    const v = versionAgo(0);
    for (let i = 0; i < 5; i++) await warm.put(ns, `p${i}`, entry(v + i, `value ${i}`));
    expect(await cold.head(ns, 'p0')).toBeUndefined();
    let fill = 10;
    const evaluator = evaluatorOver(() => ({ tiers: { warm: { fillPercent: fill } } }));
    expect(await evaluator.tick(policy)).toEqual([]);
    fill = 60;
    const fired = await evaluator.tick(policy);
    expect(fired).toEqual([
      expect.objectContaining({
        rule: 'backup',
        response: 'copy',
        outcome: 'done',
        detail: expect.stringMatching(/copy started .*warm → cold at most 1048576 B\/s/),
      }),
    ]);
    await evaluator.idle();
    expect(evaluator.firings(1)[0]).toMatchObject({
      outcome: 'done',
      detail: expect.stringMatching(/copy finished: 5 of 5 entries selected, 5 copied/),
    });
    for (let i = 0; i < 5; i++) expect((await cold.get(ns, `p${i}`))!.value.toString()).toBe(`value ${i}`);
    // Edge-triggered: still above the threshold, it does not copy again.
    expect(await evaluator.tick(policy)).toEqual([]);
  });

  it("a timer copy pushes warm to cold, each run only what is new since the last (the paper's low-durability push)", async () => {
    const ns = freshNs();
    const policy = compilePolicyInput(
      {
        rules: [
          {
            id: 'push-to-cold',
            scope: { namespace: ns },
            on: { timer: { everySeconds: 60 } },
            do: [{ copy: { from: 'warm', to: ['cold'] } }],
          },
        ],
      },
      { background: true },
    );
    let now = Date.now();
    const evaluator = evaluatorOver(
      () => ({ tiers: {} }),
      () => now,
    );
    await warm.put(ns, 'first', entry(versionAgo(0), 'one'));
    expect(await evaluator.tick(policy)).toEqual([]); // the first tick starts the clock
    now += 60_000;
    await evaluator.tick(policy);
    await evaluator.idle();
    expect((await cold.get(ns, 'first'))!.value.toString()).toBe('one');
    // Written on the evaluator's clock (a minute on from the first run's start).
    await warm.put(ns, 'second', entry(now * LOGICAL_BITS, 'two'));
    now += 60_000;
    const [started] = await evaluator.tick(policy);
    expect(started!.detail).toMatch(/entries written since the last run/);
    await evaluator.idle();
    expect(evaluator.firings(1)[0]!.detail).toMatch(/1 of 2 entries selected, 1 copied/);
    expect((await cold.get(ns, 'second'))!.value.toString()).toBe('two');
  });
});
