import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { round } from './measure.js';

/** Latency of one write pattern followed by fdatasync, in milliseconds. */
export interface FsyncFigures {
  pattern: string;
  syncs: number;
  p50Ms: number;
  p99Ms: number;
}

const PAGE = 4096;
const FILE_PAGES = 4096; // a 16 MiB file: about the size of the 1 KB bench's LMDB file
const GROUP_BYTES = 36 * 1024; // what ~32 puts of 1 KB (with keys and headers) append to a log
const PAGES_PER_GROUP = 35; // leaf and branch pages one LMDB commit of ~32 puts of 1 KB dirties (hash-ordered keys)

/**
 * What one durable group commit costs on the disk under `dir`, measured directly: a sequential 36 KiB write and
 * 35 scattered 4 KiB page writes, each followed by fdatasync, in a preallocated file (so neither changes the
 * file's size). A B+-tree keyed by hash (LMDB, as the cache node stores) dirties one random leaf page per small
 * put, so its commits are the second pattern; a log's are the first (the same ~32 puts either way). The warm-node
 * benchmark prints both beside its PUT figures: how long a durable group commit takes on this host's disk.
 */
export function probeFsync(dir: string, syncs = 300): FsyncFigures[] {
  const file = join(dir, 'fsync-probe.bin');
  const fd = openSync(file, 'w+');
  try {
    const page = Buffer.alloc(PAGE, 0x5a);
    for (let p = 0; p < FILE_PAGES; p++) writeSync(fd, page, 0, PAGE, p * PAGE);
    fdatasyncSync(fd);
    const group = Buffer.alloc(GROUP_BYTES, 0x5a);
    const groupsInFile = Math.floor((FILE_PAGES * PAGE) / GROUP_BYTES);
    // A fixed pseudo-random page sequence (32-bit LCG, high bits), so runs are comparable.
    let seed = 12345;
    const nextPage = () => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      return (seed >>> 12) % FILE_PAGES;
    };
    return [
      time(`sequential ${GROUP_BYTES / 1024} KiB + fdatasync`, syncs, (i) => {
        writeSync(fd, group, 0, GROUP_BYTES, (i % groupsInFile) * GROUP_BYTES);
        fdatasyncSync(fd);
      }),
      time(`${PAGES_PER_GROUP} random 4 KiB pages + fdatasync`, syncs, () => {
        for (let k = 0; k < PAGES_PER_GROUP; k++) writeSync(fd, page, 0, PAGE, nextPage() * PAGE);
        fdatasyncSync(fd);
      }),
    ];
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
}

function time(pattern: string, syncs: number, step: (i: number) => void): FsyncFigures {
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 10_000_000, numberOfSignificantValueDigits: 3 });
  try {
    for (let i = 0; i < syncs; i++) {
      const t0 = performance.now();
      step(i);
      h.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
    }
    return { pattern, syncs, p50Ms: round(h.getValueAtPercentile(50) / 1000), p99Ms: round(h.getValueAtPercentile(99) / 1000) };
  } finally {
    h.destroy();
  }
}
