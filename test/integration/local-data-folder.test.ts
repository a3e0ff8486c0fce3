/**
 * `npm start` keeps two things in its data folder (STRATA_LOCAL_DIR): the folder tier's namespaces, one folder
 * each, and with STRATA_LOCAL_NODES the local warm tier (cache-node data and ring), wiped at every start. The warm
 * tier used to live in `<dir>/warm`, the folder of a namespace named `warm`, whose entries each start deleted.
 * Real cache-node processes (scripts/local/local-warm.ts), started twice as two `npm start` runs would.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Entry } from '../../core/model/entry.js';
import { contentHash, validateNamespace } from '../../core/model/keys.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { LOCAL_WARM_FOLDER, RESERVED_LOCAL_FOLDERS } from '../../core/tiers/storage-key.js';
import { removeLegacyWarmFolders, startLocalWarm } from '../../scripts/local/local-warm.js';

function entry(version: number, value: string): Entry {
  const v = Buffer.from(value);
  return { header: { version, expiresAt: null, size: v.length, hash: contentHash(v), tags: [], flags: {} }, value: v };
}

/** Names a namespace could share with what the local run keeps, in the old layout and the new one. */
const COLLIDING = ['warm', 'nodes', 'ring', 'n1', 'uploads', 'warm-nodes'];

describe('the local data folder: namespaces and the local warm tier', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'strata-data-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('no folder the local run owns can be a namespace', () => {
    expect(RESERVED_LOCAL_FOLDERS).toContain(LOCAL_WARM_FOLDER);
    for (const f of RESERVED_LOCAL_FOLDERS) {
      expect(() => validateNamespace(f)).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    }
  });

  it('a namespace named warm (or like any folder of the local warm tier) keeps its entries across restarts', async () => {
    const cold = new LocalFolderTier({ dir, fsync: false });
    for (const ns of COLLIDING) expect(await cold.put(ns, 'k', entry(1, `value of ${ns}`))).toMatchObject({ applied: true });
    for (let run = 1; run <= 2; run++) {
      const warm = await startLocalWarm({ nodes: 1, dataDir: dir });
      try {
        expect(warm.ringDir).toBe(join(dir, LOCAL_WARM_FOLDER, 'ring'));
        // Every top-level folder is a namespace the test wrote or one the local run owns, never both.
        const owned = readdirSync(dir).filter((f) => !COLLIDING.includes(f));
        expect(owned).toEqual([LOCAL_WARM_FOLDER]);
        for (const f of owned) expect(() => validateNamespace(f)).toThrow();
      } finally {
        await warm.close();
      }
      for (const ns of COLLIDING)
        expect([run, ns, (await cold.get(ns, 'k'))?.value.toString()]).toEqual([run, ns, `value of ${ns}`]);
    }
    // The folder tier does not count or sweep the cache nodes' files as its own.
    const stats = await cold.stats();
    expect(stats.entries).toBe(COLLIDING.length);
  }, 300_000);

  it('after an upgrade: removes the old warm tier from <dir>/warm, and keeps the entries of the namespace warm there', async () => {
    const cold = new LocalFolderTier({ dir, fsync: false });
    await cold.put('warm', 'k', entry(1, 'kept'));
    // What an earlier version's local warm tier left: node data and a ring, in the namespace's folder.
    mkdirSync(join(dir, 'warm', 'nodes', 'n1'), { recursive: true });
    writeFileSync(join(dir, 'warm', 'nodes', 'n1', 'data.mdb'), 'x');
    mkdirSync(join(dir, 'warm', 'ring'), { recursive: true });
    writeFileSync(join(dir, 'warm', 'ring', 'ring.json'), '{}');
    expect(removeLegacyWarmFolders(dir)).toBe(true);
    expect(readdirSync(join(dir, 'warm')).every((f) => /^[0-9a-f]{2}$/.test(f))).toBe(true);
    expect((await cold.get('warm', 'k'))?.value.toString()).toBe('kept');
    expect(removeLegacyWarmFolders(dir)).toBe(false);

    // Without a namespace warm, the old folder goes entirely.
    const other = mkdtempSync(join(tmpdir(), 'strata-data-'));
    try {
      mkdirSync(join(other, 'warm', 'ring'), { recursive: true });
      expect(removeLegacyWarmFolders(other)).toBe(true);
      expect(existsSync(join(other, 'warm'))).toBe(false);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('the folder tier leaves the local warm tier alone: not counted in its stats, not swept', async () => {
    const cold = new LocalFolderTier({ dir, fsync: false });
    await cold.put('app', 'k', entry(1, 'v'));
    const nodeDir = join(dir, LOCAL_WARM_FOLDER, 'nodes', 'n1');
    mkdirSync(nodeDir, { recursive: true });
    writeFileSync(join(nodeDir, 'segment.e'), 'not an entry');
    writeFileSync(join(nodeDir, '.tmp-journal'), 'the node owns this');
    const old = new Date(Date.now() - 2 * 3_600_000);
    utimesSync(join(nodeDir, '.tmp-journal'), old, old);
    expect((await cold.stats()).entries).toBe(1);
    await cold.sweep();
    expect(readdirSync(nodeDir).sort()).toEqual(['.tmp-journal', 'segment.e']);
  });
});
