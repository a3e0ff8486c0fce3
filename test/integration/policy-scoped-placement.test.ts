/**
 * Prefix- and tag-scoped placement and retrieve from named tiers (issue 22) over real tiers: redis-server as hot, a
 * cache-node process as warm, the local folder as cold. What each tier holds is read beside the coordinator (the
 * tiers' own API and their raw bytes at rest), and concurrent writers switching a key between placements, with
 * readers in another coordinator, never read a version older than one acknowledged before the read began.
 */
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { closeSharingTiers, startTierStack, type TierStack } from './tier-stack.js';

const NS = 'scoped';
const put = { action: 'put' } as const;
const POLICY = {
  rules: [
    { id: 'logs-cold', scope: { namespace: NS, prefix: 'logs/' }, on: put, do: [{ store: { tiers: ['cold'] } }] },
    { id: 'archive', scope: { namespace: NS, tag: 'archive' }, on: put, do: [{ store: { tiers: ['cold'] } }] },
    {
      id: 'scan-skips-hot',
      scope: { namespace: NS, prefix: 'scan/' },
      on: { action: 'get' },
      do: [{ retrieve: { tiers: ['warm', 'cold'] } }],
    },
  ],
};

describe('scoped placement and retrieve over redis, a cache node and a folder', () => {
  let stack: TierStack;
  let writer: Coordinator;
  let reader: Coordinator;

  const build = (): Coordinator =>
    new Coordinator({
      tiers: [stack.hot, stack.warm, stack.cold],
      policies: compilePolicyInput(POLICY).registry,
      flushTimer: false,
    });

  beforeAll(async () => {
    stack = await startTierStack('folder');
    writer = build();
    reader = build();
    await Promise.all([writer.ready(), reader.ready()]);
  });

  afterAll(async () => {
    await closeSharingTiers(writer, reader);
    await stack?.close();
  });

  const atRest = () => stack.atRest();

  it('keeps the value of a prefix placed in cold only out of hot and warm (markers there), even after reads', async () => {
    const marker = 'COLD-ONLY-7c1e';
    const w = await writer.put(NS, 'logs/1', Buffer.from(`${marker} line`));
    expect(w.tiers).toEqual(['cold']);
    const r = await reader.get(NS, 'logs/1');
    expect(r).toMatchObject({ tier: 'cold', entry: { header: { version: w.version } } });
    await reader.drain();
    // A location marker of the version written (no bytes): an older copy an earlier placement left there is shadowed.
    for (const t of [stack.hot, stack.warm])
      expect((await t.get(NS, 'logs/1'))!.header).toMatchObject({ version: w.version, size: 0, flags: { elsewhere: true } });
    const raw = await atRest();
    expect({ hot: raw.hot.includes(marker), warm: raw.warm.includes(marker), cold: raw.cold.includes(marker) }).toEqual({
      hot: false,
      warm: false,
      cold: true,
    });
    // The namespace's other keys keep its placement.
    expect((await writer.put(NS, 'user/1', Buffer.from('u'))).tiers).toEqual(['hot', 'warm', 'cold']);
  });

  it('places a tagged put by its tag rule, and shadows the older copies an untagged put left', async () => {
    const marker = 'ARCHIVED-4b2d';
    const first = await writer.put(NS, 'doc', Buffer.from('draft'));
    expect(first.tiers).toEqual(['hot', 'warm', 'cold']);
    const w = await writer.put(NS, 'doc', Buffer.from(`${marker} final`), { tags: ['archive'] });
    expect(w.tiers).toEqual(['cold']);
    // hot and warm keep a location marker of the new version, not the draft, and not the value.
    expect((await stack.hot.get(NS, 'doc'))!.header).toMatchObject({ version: w.version, flags: { elsewhere: true } });
    expect((await stack.warm.get(NS, 'doc'))!.header).toMatchObject({ version: w.version, flags: { elsewhere: true } });
    const raw = await atRest();
    expect({ hot: raw.hot.includes(marker), warm: raw.warm.includes(marker), cold: raw.cold.includes(marker) }).toEqual({
      hot: false,
      warm: false,
      cold: true,
    });
    const r = await reader.get(NS, 'doc');
    expect(r).toMatchObject({ tier: 'cold', entry: { header: { version: w.version, tags: ['archive'] } } });
    await reader.drain();
    // A read does not promote it where its placement does not write.
    expect((await stack.warm.get(NS, 'doc'))!.header.flags.elsewhere).toBe(true);
  });

  it('reads a scan prefix from warm and cold only, never from hot, and does not fill hot', async () => {
    const w = await writer.put(NS, 'scan/1', Buffer.from('row'));
    expect(w.tiers).toEqual(['hot', 'warm', 'cold']);
    await stack.hot.delete(NS, 'scan/1');
    const r = await reader.get(NS, 'scan/1');
    expect(r).toMatchObject({ tier: 'warm', entry: { header: { version: w.version } } });
    await reader.drain();
    expect(await stack.hot.head(NS, 'scan/1')).toBeUndefined();
    // A key outside the prefix still reads hot first and is promoted into it.
    const u = await writer.put(NS, 'user/2', Buffer.from('u'));
    await stack.hot.delete(NS, 'user/2');
    expect((await reader.get(NS, 'user/2'))!.tier).toBe('warm');
    await reader.drain();
    expect((await stack.hot.head(NS, 'user/2'))?.version).toBe(u.version);
  });

  it('never lets a reader see a version older than one acknowledged while writers switch placements', async () => {
    const keys = ['scan/c0', 'scan/c1', 'c2', 'c3', 'logs/c4'];
    const acked = new Map<string, number>();
    const stale: string[] = [];
    let reads = 0;
    let writes = 0;
    const until = Date.now() + 4000;
    const writerLoop = async (w: number): Promise<void> => {
      for (let i = 0; Date.now() < until; i++) {
        const key = keys[(w + i) % keys.length]!;
        // Half the writes carry the tag: the key moves between hot+warm+cold and cold only (logs/: cold either way).
        const tags = (w + i) % 2 ? ['archive'] : [];
        const r = await writer.put(NS, key, Buffer.from(`${w}:${i}`), { tags });
        writes++;
        if (r.version > (acked.get(key) ?? 0)) acked.set(key, r.version);
      }
    };
    const readerLoop = async (): Promise<void> => {
      for (let i = 0; Date.now() < until; i++) {
        const key = keys[i % keys.length]!;
        const floor = acked.get(key) ?? 0;
        const r = await reader.get(NS, key);
        reads++;
        const got = r?.entry.header.version ?? 0;
        if (got < floor) stale.push(`${key}: read ${got} after ${floor} was acknowledged (from ${r?.tier})`);
      }
    };
    await Promise.all([0, 1, 2].map(writerLoop).concat([readerLoop(), readerLoop(), readerLoop()]));
    await Promise.all([writer.drain(), reader.drain()]);
    expect(stale).toEqual([]);
    expect(writes).toBeGreaterThan(50);
    expect(reads).toBeGreaterThan(50);
    // Every key ends at its last acknowledged version, wherever it reads from.
    for (const key of keys) expect((await reader.get(NS, key))!.entry.header.version).toBe(acked.get(key));
  }, 300_000);

  it('never serves an older version after a runtime policy change moves a namespace out of hot and warm', async () => {
    // The writer and the reader switch policies at different moments, as two API containers do (each re-reads the
    // policy store on its own): the older copies the first placement left in hot and warm must stay unread.
    const moved = 'moved';
    const everywhere = compilePolicyInput({ rules: [] }).registry;
    const coldOnly = compilePolicyInput({
      rules: [{ id: 'cold-only', scope: { namespace: moved }, on: put, do: [{ store: { tiers: ['cold'] } }] }],
    }).registry;
    const keys = ['m0', 'm1', 'm2', 'm3'];
    const acked = new Map<string, number>();
    const stale: string[] = [];
    const until = Date.now() + 3000;
    let flips = 0;
    const flipper = (async () => {
      while (Date.now() < until) {
        const next = flips % 2 ? everywhere : coldOnly;
        writer.replacePolicies(next);
        await new Promise((r) => setTimeout(r, 40));
        reader.replacePolicies(next);
        flips++;
        await new Promise((r) => setTimeout(r, 80));
      }
    })();
    const writerLoop = async (w: number) => {
      for (let i = 0; Date.now() < until; i++) {
        const key = keys[(w + i) % keys.length]!;
        const r = await writer.put(moved, key, Buffer.from(`${w}:${i}`));
        if (r.version > (acked.get(key) ?? 0)) acked.set(key, r.version);
      }
    };
    const readerLoop = async () => {
      for (let i = 0; Date.now() < until; i++) {
        const key = keys[i % keys.length]!;
        const floor = acked.get(key) ?? 0;
        const r = await reader.get(moved, key);
        const got = r?.entry.header.version ?? 0;
        if (got < floor) stale.push(`${key}: read ${got} after ${floor} was acknowledged (from ${r?.tier})`);
      }
    };
    await Promise.all([writerLoop(0), writerLoop(1), readerLoop(), readerLoop(), flipper]);
    await Promise.all([writer.drain(), reader.drain()]);
    writer.replacePolicies(compilePolicyInput(POLICY).registry);
    reader.replacePolicies(compilePolicyInput(POLICY).registry);
    expect(stale).toEqual([]);
    expect(flips).toBeGreaterThan(4);
  }, 300_000);
});
