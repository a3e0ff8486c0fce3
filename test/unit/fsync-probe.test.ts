import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probeFsync } from '../../bench/lib/fsync-probe.js';

describe('probeFsync (warm-node benchmark context)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'strata-fsync-probe-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('times both commit patterns on the given directory and leaves nothing behind', () => {
    const figures = probeFsync(dir, 10);
    expect(figures.map((f) => f.pattern)).toEqual(['sequential 36 KiB + fdatasync', '35 random 4 KiB pages + fdatasync']);
    for (const f of figures) {
      expect(f.syncs).toBe(10);
      expect(f.p50Ms).toBeGreaterThan(0);
      expect(f.p99Ms).toBeGreaterThanOrEqual(f.p50Ms);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it('fails on a directory that does not exist', () => {
    expect(() => probeFsync(join(dir, 'missing'), 1)).toThrow(/ENOENT/);
  });
});
