import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeLocationMarker, makeTombstone } from '../../core/model/entry.js';
import { keyShard } from '../../core/model/keys.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import {
  supportsKeyListing,
  supportsPinning,
  supportsScan,
  type ScanItem,
  type Scanning,
  type Tier,
} from '../../core/tiers/tier.js';
import { entry } from '../helpers/tiers.js';

/** Every page of a scan, in order (the cursor must end as null within `maxPages`). */
async function scanAll(
  tier: Scanning,
  ns: string,
  opts: { prefix?: string; limit: number },
  maxPages = 1000,
): Promise<{ items: ScanItem[]; pages: number }> {
  const items: ScanItem[] = [];
  let cursor: string | null = null;
  for (let pages = 1; pages <= maxPages; pages++) {
    const page = await tier.scan(ns, { ...opts, cursor });
    expect(page.items.length).toBeLessThanOrEqual(opts.limit);
    items.push(...page.items);
    cursor = page.cursor;
    if (cursor === null) return { items, pages };
  }
  throw new Error('scan did not finish');
}

/** Keys that sort in awkward ways and encode to different lengths (segments, unicode, separators). */
const KEYS = ['a', 'a/b', 'a:b', 'ab', 'abc', 'b', 'user:1', 'user:10', 'user:2', 'user:ü', 'x'.repeat(400), '../up', '日本'];

/** The scan contract, for any tier that stores what it is given and can list it. */
function scanContract(name: string, make: () => { tier: Tier & Scanning; now?: { t: number }; cleanup?: () => void }) {
  describe(`${name}.scan`, () => {
    let tier: Tier & Scanning;
    let cleanup: (() => void) | undefined;
    beforeEach(() => {
      ({ tier, cleanup } = make());
    });
    afterEach(async () => {
      await tier.close();
      cleanup?.();
    });

    it('lists every key of the namespace once, over pages of any size, with the stored headers', async () => {
      for (const [i, k] of KEYS.entries()) await tier.put('ns1', k, entry(100 + i, `v-${k}`, { tags: i % 2 ? ['odd'] : [] }));
      for (const k of ['a', 'zz']) await tier.put('ns2', k, entry(1, 'other namespace'));
      for (const limit of [1, 2, 5, 100]) {
        const { items, pages } = await scanAll(tier, 'ns1', { limit });
        expect(items.map((i) => i.key).sort()).toEqual([...KEYS].sort());
        expect(pages).toBeGreaterThanOrEqual(Math.ceil(KEYS.length / limit));
        for (const it of items) {
          const i = KEYS.indexOf(it.key);
          expect(it.header).toMatchObject({
            version: 100 + i,
            size: Buffer.byteLength(`v-${it.key}`),
            tags: i % 2 ? ['odd'] : [],
          });
        }
      }
      await expect(scanAll(tier, 'ns2', { limit: 10 })).resolves.toMatchObject({ items: [{ key: 'a' }, { key: 'zz' }] });
      await expect(tier.scan('empty', { limit: 10 })).resolves.toEqual({ items: [], cursor: null });
    });

    it('filters by key prefix (a prefix of the user key, not of the stored form)', async () => {
      for (const k of KEYS) await tier.put('ns1', k, entry(1, k));
      const keys = async (prefix: string) => (await scanAll(tier, 'ns1', { prefix, limit: 3 })).items.map((i) => i.key).sort();
      await expect(keys('user:')).resolves.toEqual(['user:1', 'user:10', 'user:2', 'user:ü']);
      await expect(keys('user:1')).resolves.toEqual(['user:1', 'user:10']);
      await expect(keys('a')).resolves.toEqual(['a', 'a/b', 'a:b', 'ab', 'abc']);
      await expect(keys('xx')).resolves.toEqual(['x'.repeat(400)]);
      await expect(keys('日')).resolves.toEqual(['日本']);
      await expect(keys('nothing')).resolves.toEqual([]);
    });

    it('lists tombstones and location markers as they are, never expired entries', async () => {
      await tier.put('ns1', 'live', entry(1, 'v'));
      await tier.put('ns1', 'deleted', makeTombstone(2, 3_600_000));
      await tier.put('ns1', 'elsewhere', makeLocationMarker(3, null));
      await tier.put('ns1', 'expired', entry(4, 'v', { expiresAt: Date.now() - 1 }));
      const { items } = await scanAll(tier, 'ns1', { limit: 10 });
      const byKey = Object.fromEntries(items.map((i) => [i.key, i.header]));
      expect(Object.keys(byKey).sort()).toEqual(['deleted', 'elsewhere', 'live']);
      expect(byKey.deleted!.flags.tombstone).toBe(true);
      expect(byKey.elsewhere!.flags.elsewhere).toBe(true);
    });

    it('keeps its place while keys before the cursor are removed (a demote deletes what it listed)', async () => {
      for (const k of KEYS) await tier.put('ns1', k, entry(1, k));
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await tier.scan('ns1', { cursor, limit: 4 });
        for (const it of page.items) {
          seen.push(it.key);
          await tier.delete('ns1', it.key, it.header.version);
        }
        cursor = page.cursor;
      } while (cursor !== null);
      expect(seen.sort()).toEqual([...KEYS].sort());
      await expect(tier.scan('ns1', { limit: 100 })).resolves.toEqual({ items: [], cursor: null });
    });
  });
}

scanContract('MemoryTier', () => ({ tier: new MemoryTier({ maxBytes: 1024 * 1024 }) }));

scanContract('LocalFolderTier', () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-scan-'));
  return { tier: new LocalFolderTier({ dir, fsync: false }), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
});

describe('LocalFolderTier.namespaces', () => {
  it('lists the namespace folders, sorted, and not the staged uploads or stray folders', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-scan-'));
    try {
      const t = new LocalFolderTier({ dir, fsync: false });
      expect(await t.namespaces()).toEqual([]);
      for (const ns of ['web', 'api-2', 'sessions']) await t.put(ns, 'k', entry(1, 'v'));
      mkdirSync(join(dir, '_uploads'), { recursive: true });
      mkdirSync(join(dir, '.tmp'), { recursive: true });
      writeFileSync(join(dir, 'notes'), 'a file, not a namespace');
      expect(await t.namespaces()).toEqual(['api-2', 'sessions', 'web']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('LocalFolderTier.scan with match', () => {
  // A replacement node's fill keeps a quarter of a namespace: reading every other entry's header made it four times
  // slower than the copies it had to make.
  it('reads no header of a key the caller does not want, and still pages through every wanted key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-scan-'));
    try {
      const t = new LocalFolderTier({ dir, fsync: false });
      const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
      for (const [i, k] of keys.entries()) await t.put('ns', k, entry(i + 1, `v-${k}`));
      const wanted = (k: string) => Number(k.slice(1)) % 4 === 0;
      const read: string[] = [];
      // The tier reads entry files through its EntryFiles (local-entry-files.ts).
      const files = (t as unknown as { files: { readHeader: (path: string) => Promise<unknown> } }).files;
      const readHeader = files.readHeader.bind(files);
      files.readHeader = (path) => {
        read.push(path);
        return readHeader(path);
      };
      const { items } = await scanAll({ scan: (ns, o) => t.scan(ns, { ...o, match: wanted }) }, 'ns', { limit: 3 });
      expect(items.map((i) => i.key).sort()).toEqual(keys.filter(wanted).sort());
      expect(read).toHaveLength(keys.filter(wanted).length);
      // Its keys: the same wanted keys, over the same pages, and no header read at all.
      read.length = 0;
      const listed: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await t.keys('ns', { limit: 3, cursor, match: wanted });
        listed.push(...page.keys);
        cursor = page.cursor;
      } while (cursor !== null);
      expect(listed.sort()).toEqual(keys.filter(wanted).sort());
      expect(read).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('LocalFolderTier.scan on disk', () => {
  it('ignores temp files, folders that are not shards and files that are not entries', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-scan-'));
    try {
      const t = new LocalFolderTier({ dir, fsync: false });
      await t.put('ns', 'k', entry(1, 'v'));
      const shard = join(dir, 'ns', keyShard('ns', 'k'));
      writeFileSync(join(shard, '.tmp-abc'), 'half-written');
      writeFileSync(join(shard, 'stray.e'), 'not base32 of anything valid here'); // a name that decodes to a different path
      mkdirSync(join(dir, 'ns', 'zz'), { recursive: true }); // not a shard name
      writeFileSync(join(dir, 'ns', 'zz', 'x.e'), 'x');
      const page = await t.scan('ns', { limit: 10 });
      expect(page).toEqual({ items: [{ key: 'k', header: expect.objectContaining({ version: 1 }) }], cursor: null });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('capability guards', () => {
  it('name what each tier supports', () => {
    const m = new MemoryTier();
    expect(supportsScan(m)).toBe(true);
    expect(supportsPinning(m)).toBe(true);
    const f = new LocalFolderTier({ dir: join(tmpdir(), 'never-created') });
    expect(supportsScan(f)).toBe(true);
    expect(supportsPinning(f)).toBe(false);
    expect([supportsKeyListing(f), supportsKeyListing(m)]).toEqual([true, false]);
  });
});

describe('MemoryTier pinning', () => {
  it('pins and unpins exactly the version it is given, in place', async () => {
    const t = new MemoryTier();
    await t.put('ns', 'k', entry(5, 'five', { tags: ['t'] }));
    await expect(t.setPinned('ns', 'k', 4, true)).resolves.toBe(false);
    await expect(t.setPinned('ns', 'nope', 5, true)).resolves.toBe(false);
    await expect(t.setPinned('ns', 'k', 5, true)).resolves.toBe(true);
    const e = await t.get('ns', 'k');
    expect(e!.header).toMatchObject({ version: 5, tags: ['t'], flags: { pinned: true } });
    expect(e!.value.toString()).toBe('five');
    // A newer write starts unpinned.
    await t.put('ns', 'k', entry(6, 'six'));
    expect((await t.head('ns', 'k'))!.flags.pinned).toBeUndefined();
    await expect(t.setPinned('ns', 'k', 5, false)).resolves.toBe(false);
    await t.setPinned('ns', 'k', 6, true);
    await expect(t.setPinned('ns', 'k', 6, false)).resolves.toBe(true);
    expect((await t.head('ns', 'k'))!.flags).toEqual({});
  });

  it('never evicts a pinned entry, and refuses writes with full once only pinned entries are left', async () => {
    const t = new MemoryTier({ maxBytes: 8_000 });
    const kb = Buffer.alloc(1000, 7);
    for (let i = 0; i < 5; i++) {
      await t.put('ns', `p${i}`, entry(1, kb));
      await t.setPinned('ns', `p${i}`, 1, true);
    }
    // Plenty of pressure: only unpinned keys go.
    for (let i = 0; i < 50; i++) await t.put('ns', `u${i}`, entry(1, kb));
    for (let i = 0; i < 5; i++) await expect(t.has('ns', `p${i}`)).resolves.toBe(true);
    expect((await t.stats()).evictions).toBeGreaterThan(0);
    // Pin what is left: nothing can make room any more.
    for (const { key } of (await t.scan('ns', { prefix: 'u', limit: 100 })).items) await t.setPinned('ns', key, 1, true);
    await expect(t.put('ns', 'one-more', entry(1, kb))).resolves.toMatchObject({ applied: false, full: true });
  });
});
