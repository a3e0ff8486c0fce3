/**
 * What eviction asks of a cache node: victims (expired first, then SIEVE order, never pinned ones), pinning in
 * place at an exact version, and headers-only exports for enumeration. On the LMDB store directly and through a
 * real node process.
 */
import { RING_MIN } from '../../core/ring/hash.js';
import { NodeClient, StaleRouteError } from '../../core/nodes/node-client.js';
import { storeKey } from '../../core/nodes/wire.js';
import { NodeStore } from '../../cachenode/src/store.js';
import { entry, localFleet, SECRET, singleNodeRing, tempDir } from './warm-fixtures.js';

describe('NodeStore victims and pins (LMDB on a temp dir)', () => {
  const tmp = tempDir('strata-victims-');
  let store: NodeStore;
  let now = 1_000_000;

  beforeEach(() => {
    tmp.remove();
    now = 1_000_000;
    store = new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
  });
  afterEach(() => store.close());
  afterAll(() => tmp.remove());

  it('names expired entries first (marked expired), then live ones in SIEVE order', async () => {
    for (let i = 0; i < 6; i++) await store.put('n', `k${i}`, entry(1, 'v', i === 4 ? { expiresAt: now + 10 } : {}));
    now += 20; // k4 expired
    await store.settle(); // the expiry scan reads LMDB (the node's victims endpoint settles first too)
    const v = store.victims(3);
    expect(v.map((x) => x.key)).toEqual(['k4', 'k0', 'k1']);
    expect(v[0]).toMatchObject({ expired: true, expiresAt: 1_000_010, version: 1 });
    expect(v[1]!.expired).toBeUndefined();
    // Still there (nobody removed it): named first again; the hand moved past k0 and k1.
    expect(store.victims(3).map((x) => x.key)).toEqual(['k4', 'k2', 'k3']);
    await store.remove('n', 'k4', 1);
    expect(store.victims(2).map((x) => x.key)).toEqual(['k5', 'k0']);
  });

  it('never names a pinned entry; an unpinned one comes back at the newest end', async () => {
    for (let i = 0; i < 4; i++) await store.put('n', `k${i}`, entry(1));
    await expect(store.setPinned(storeKey('n', 'k0'), 1, true)).resolves.toBe(true);
    await expect(store.setPinned(storeKey('n', 'k1'), 2, true)).resolves.toBe(false); // not that version
    await expect(store.setPinned(storeKey('n', 'nope'), 1, true)).resolves.toBe(false);
    expect(store.victims(10).map((x) => x.key)).toEqual(['k1', 'k2', 'k3']);
    expect(store.get('n', 'k0')!.header.flags.pinned).toBe(true);
    await expect(store.setPinned(storeKey('n', 'k0'), 1, false)).resolves.toBe(true);
    expect(store.get('n', 'k0')!.header.flags.pinned).toBeUndefined();
    expect(store.victims(10).map((x) => x.key)).toContain('k0');
  });

  it('pins the version it is given even right after it was written (queued writes settle first)', async () => {
    const w = store.put('n', 'fresh', entry(7, 'seven'));
    await expect(store.setPinned(storeKey('n', 'fresh'), 7, true)).resolves.toBe(true);
    await w;
    expect(store.get('n', 'fresh')).toMatchObject({ header: { version: 7, flags: { pinned: true } } });
    expect(store.get('n', 'fresh')!.value.toString()).toBe('seven');
    // A newer write starts unpinned and is named again.
    await store.put('n', 'fresh', entry(8, 'eight'));
    expect(store.get('n', 'fresh')!.header.flags.pinned).toBeUndefined();
    expect(store.victims(5).map((x) => x.key)).toEqual(['fresh']);
  });

  it('keeps pinned entries out of the order across a restart, and accounts the header change', async () => {
    await store.put('n', 'a', entry(1, 'x'));
    await store.put('n', 'b', entry(1, 'y'));
    const before = store.stats().bytes;
    await store.setPinned(storeKey('n', 'a'), 1, true);
    // The stored header grew by the flag ({"flags":{}} -> {"flags":{"pinned":true}}).
    expect(store.stats().bytes).toBe(before + Buffer.byteLength('"pinned":true'));
    await store.close();
    store = new NodeStore({ dir: tmp.dir, capacityBytes: 1024 * 1024, sync: 'commit', now: () => now });
    expect(store.stats().bytes).toBe(before + Buffer.byteLength('"pinned":true'));
    expect(store.victims(10).map((x) => x.key)).toEqual(['b']);
  });

  it('scans headers without values when asked', async () => {
    await store.put('n', 'a', entry(1, 'some value'));
    await store.settle(); // scans read LMDB
    const [withValue] = store.scan(RING_MIN, null, undefined, 10);
    const [headerOnly] = store.scan(RING_MIN, null, undefined, 10, false);
    expect(withValue!.value.toString()).toBe('some value');
    expect(headerOnly!.value.length).toBe(0);
    expect(JSON.parse(headerOnly!.headerJson)).toMatchObject({ version: 1, size: 10 });
  });
});

describe('cache node pin and headers-only export (real process)', () => {
  const fleet = localFleet();
  const client = new NodeClient({ secret: SECRET });
  let url: string;

  beforeAll(async () => {
    url = (await fleet.launch('p1')).url;
    await client.pushRing(url, singleNodeRing('p1', url));
  });
  afterAll(async () => {
    await client.close();
    await fleet.closeAll();
  });

  it('pins in place over HTTP, per key and version; pinned keys are not victims', async () => {
    for (let i = 0; i < 5; i++) await client.put(url, 't', `k${i}`, entry(3, `v${i}`), 1);
    await expect(client.setPinned(url, 't', ['k0', 'k1', 'k2'], [3, 2, 3], true, 1)).resolves.toEqual([true, false, true]);
    const { victims } = await client.victims(url, 10);
    expect(victims.map((v) => v.key).sort()).toEqual(['k1', 'k3', 'k4']);
    await expect(client.get(url, 't', 'k0', 1)).resolves.toMatchObject({ header: { version: 3, flags: { pinned: true } } });
    await expect(client.setPinned(url, 't', ['k0'], [3], false, 1)).resolves.toEqual([true]);
    await expect(client.get(url, 't', 'k0', 1)).resolves.toMatchObject({ header: { flags: {} } });
    // A pin is a write: a caller without a ring is refused like any other writer.
    await expect(client.setPinned(url, 't', ['k0'], [3], true, 0)).rejects.toBeInstanceOf(StaleRouteError);
    // Bad input gets a 400 with a code.
    await expect(client.setPinned(url, 't', ['k0', 'k1'], [3], true, 1)).rejects.toMatchObject({
      status: 400,
      code: 'VALIDATION_FAILED',
    });
  });

  it('exports headers only when asked (sizes kept, values empty)', async () => {
    await client.put(url, 'h', 'big', entry(1, Buffer.alloc(50_000, 1)), 1);
    const full: number[] = [];
    const bare: number[] = [];
    for await (const r of client.exportRange(url, { start: RING_MIN, end: null }))
      if (r.ns === 'h') full.push(r.entry.value.length);
    for await (const r of client.exportRange(url, { start: RING_MIN, end: null, headersOnly: true }))
      if (r.ns === 'h') bare.push(r.entry.header.size * 1000 + r.entry.value.length);
    expect(full).toEqual([50_000]);
    expect(bare).toEqual([50_000 * 1000]);
  });
});
