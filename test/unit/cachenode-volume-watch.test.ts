/**
 * The cache node's lost-volume check (cachenode/src/volume-watch.ts): the data directory it opened must still be
 * there, be the same directory, and hold the marker token read or written at start. A deleted directory, one
 * recreated empty, or another volume's marker is a lost volume; a healthy directory never is.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VOLUME_MARKER, VolumeWatch } from '../../cachenode/src/volume-watch.js';

describe('VolumeWatch', () => {
  let root: string;
  let dir: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'strata-volume-'));
    dir = join(root, 'data');
    mkdirSync(dir);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('writes a marker once and keeps it: a reopened directory is the same volume', async () => {
    const w = VolumeWatch.open(dir);
    const token = readFileSync(join(dir, VOLUME_MARKER), 'utf8');
    expect(token).toMatch(/^[0-9a-f]{32}\n$/);
    expect(await w.check()).toBeUndefined();
    expect(await w.check()).toBeUndefined();
    VolumeWatch.open(dir);
    expect(readFileSync(join(dir, VOLUME_MARKER), 'utf8')).toBe(token);
    expect(await w.check()).toBeUndefined();
  });

  it('finds a deleted data directory (rm -rf), and keeps saying so', async () => {
    const w = VolumeWatch.open(dir);
    rmSync(dir, { recursive: true, force: true });
    expect(await w.check()).toMatch(/data directory .* is gone/);
    mkdirSync(dir); // recreated by anyone: still not the volume opened
    expect(await w.check()).toMatch(/is gone/);
  });

  it('finds a directory recreated in its place, even one given the old marker back', async () => {
    const w = VolumeWatch.open(dir);
    const token = readFileSync(join(dir, VOLUME_MARKER), 'utf8');
    renameSync(dir, join(root, 'old'));
    mkdirSync(dir);
    writeFileSync(join(dir, VOLUME_MARKER), token);
    expect(await w.check()).toMatch(/was replaced/);
  });

  it("finds another volume's marker in the directory, and a marker deleted alone", async () => {
    const w = VolumeWatch.open(dir);
    writeFileSync(join(dir, VOLUME_MARKER), 'f'.repeat(32) + '\n');
    expect(await w.check()).toMatch(/holds another volume/);
    const v = VolumeWatch.open(dir); // a node started on that volume takes its marker
    expect(await v.check()).toBeUndefined();
    rmSync(join(dir, VOLUME_MARKER));
    expect(await v.check()).toMatch(/is gone/);
  });

  it('calls back once, with the reason, within a check period of the loss', async () => {
    const w = VolumeWatch.open(dir);
    const reasons: string[] = [];
    w.start(20, (r) => reasons.push(r));
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(reasons).toEqual([]);
      const lostAt = Date.now();
      rmSync(dir, { recursive: true, force: true });
      while (reasons.length === 0 && Date.now() - lostAt < 2000) await new Promise((r) => setTimeout(r, 5));
      expect(Date.now() - lostAt).toBeLessThan(500);
      await new Promise((r) => setTimeout(r, 100));
      expect(reasons).toHaveLength(1);
      expect(reasons[0]).toMatch(/is gone/);
    } finally {
      w.stop();
    }
  });
});
