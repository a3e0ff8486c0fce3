import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { contentHash } from '../../core/model/keys.js';
import type { Entry } from '../../core/model/entry.js';
import { addNode, cloneRing, initialRing, type RingDocument } from '../../core/ring/document.js';
import { RING_MIN } from '../../core/ring/hash.js';
import { NodeClient, StaleRouteError } from '../../core/nodes/node-client.js';
import { encodeEntryRecord } from '../../core/nodes/wire.js';
import type { NodeConfig } from './config.js';
import { CacheNode } from './server.js';

export interface WarmupReport {
  ms: number;
  /** Requests the scratch node answered (refusals of ranges it no longer held included). */
  requests: number;
  rounds: number;
}

/** Rounds of the warm-up workload at most (each about 70 requests); the time budget usually ends it first. */
const MAX_ROUNDS = 200;
const KEYS = 512;
const BATCH = 32;
const PEER = 'warmup-peer';

/**
 * Boot warm-up: before a node takes traffic, it serves a short workload of every kind of request it will serve
 * (batch and single gets and puts, heads and deletes, ring installs with pending targets, range stats, paced and
 * unpaced exports, imports, ordered key listings, victims, stats) to a scratch node of its own: a second {@link CacheNode} in this
 * process, on a temporary data directory and a loopback port, driven through the same HTTP client coordinators
 * use. The scratch node is closed and its directory removed before the real node listens.
 *
 * Why: V8 compiles a function to optimized code once it is hot, on background threads that share the process's
 * CPU. Without a warm-up, that happens exactly when a node is under the most pressure: a source's export path
 * when its migration session starts, a new node's read path when its first range is published. On a node with a
 * small CPU budget, that stalls it for hundreds of milliseconds, and in a closed loop every client waits on the
 * slowest node (bench `scale-out`: sessions whose source had exported before dipped about half as deep). Code
 * compiled here serves the real node: optimized code belongs to the functions, not to a node instance.
 */
export async function warmUp(config: NodeConfig, budgetMs: number): Promise<WarmupReport> {
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'strata-warmup-'));
  let scratch: CacheNode;
  try {
    scratch = await CacheNode.start({
      ...config,
      dataDir: dir,
      port: 0,
      host: '127.0.0.1',
      nodeId: 'warmup',
      sweepMs: 0,
      ringStore: undefined,
      capacityBytes: 256 * 1024 * 1024,
      // The scratch directory is removed at the end: that is no lost volume.
      volumeCheckMs: 0,
    });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const client = new NodeClient({ secret: config.secret, connectionsPerNode: 8 });
  const url = `http://127.0.0.1:${scratch.port}`;
  let rounds = 0;
  let requests = 0;
  // The ring sequence takes ranges away and hands reads over: refusals are part of the workload.
  const call = (p: Promise<unknown>): Promise<void> =>
    p.then(
      () => void requests++,
      (e: unknown) => {
        if (!(e instanceof StaleRouteError)) throw e;
        requests++;
      },
    );
  try {
    const rings = ringSequence(url);
    let ring = rings[0]!;
    await client.pushRing(url, ring);
    const small = Buffer.alloc(1024, 0x61);
    const large = Buffer.alloc(100 * 1024, 0x62);
    let version = 1;
    const entry = (value: Buffer): Entry => ({
      header: { version: version++, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} },
      value,
    });
    const keys = Array.from({ length: KEYS }, (_, i) => `k${i}`);
    while (rounds < MAX_ROUNDS && performance.now() - started < budgetMs) {
      const r = rounds++;
      const v = ring.version;
      const batch = Array.from({ length: BATCH }, (_, i) => keys[(r * BATCH + i) % KEYS]!);
      // Batches from several callers at once, as a coordinator's coalescer sends them.
      await Promise.all([
        call(
          client.putMany(
            url,
            'w',
            batch.map((key) => ({ key, entry: entry(small) })),
            v,
          ),
        ),
        call(client.getMany(url, 'w', batch, v)),
        call(
          client.getMany(
            url,
            'w',
            batch.map((k) => `${k}-absent`),
            v,
          ),
        ),
        call(client.put(url, 'w', `big${r % 4}`, entry(large), v)),
        call(client.get(url, 'w', batch[0]!, v)),
        call(client.head(url, 'w', batch[1]!, v)),
        call(client.delete(url, 'w', `${batch[2]}-absent`, undefined, v)),
      ]);
      if (r % 4 === 0) {
        const exported: Buffer[] = [];
        for await (const rec of client.exportRangeRaw(url, { start: RING_MIN, end: null, limit: 256 })) exported.push(rec.raw);
        requests++;
        for await (const rec of client.exportRangeRaw(url, { start: RING_MIN, end: null, limit: 64, rate: 64 * 1024 * 1024 }))
          void rec;
        requests++;
        // Back into itself: records it holds are stale there; a few fresh ones are applied (or refused).
        await call(
          client.importRecords(url, [
            ...exported,
            ...batch.slice(0, 4).map((k) => encodeEntryRecord('w', `${k}-imported-${r}`, entry(small))),
          ]),
        );
        await call(client.rangeStats(url, RING_MIN, null));
        await call(client.listOrdered(url, 'w', { prefix: 'k', from: { key: batch[0]!, inclusive: false }, limit: 64 }, v));
        await call(client.victims(url, 16));
        await call(client.stats(url));
      }
      if (r % 8 === 0) {
        ring = rings[(r / 8 + 1) % rings.length]!;
        await call(client.pushRing(url, ring));
      }
    }
  } finally {
    await client.close();
    await scratch.shutdown();
    rmSync(dir, { recursive: true, force: true });
  }
  return { ms: Math.round(performance.now() - started), requests, rounds };
}

/**
 * Ring documents a migration goes through, for the scratch node: it owns everything, then the upper half is
 * pending to a peer (copy, then handoff), then the peer owns it; and over again, with rising versions.
 */
function ringSequence(url: string): RingDocument[] {
  const out: RingDocument[] = [];
  const base = initialRing([{ id: 'warmup', url }], 2);
  addNode(base, { id: PEER, url: 'http://127.0.0.1:9' });
  const at = (doc: RingDocument, edit: (d: RingDocument) => void): RingDocument => {
    const d = cloneRing(doc);
    d.version = (out[out.length - 1]?.version ?? 0) + 1;
    edit(d);
    out.push(d);
    return d;
  };
  for (let cycle = 0; cycle < 8; cycle++) {
    at(base, (d) => d.ranges.forEach((r) => ((r.owner = 'warmup'), (r.epoch = d.version))));
    at(base, (d) => ((d.ranges[1]!.pending = { target: PEER, session: `warmup-${cycle}` }), (d.ranges[1]!.epoch = d.version)));
    at(
      base,
      (d) => (
        (d.ranges[1]!.pending = { target: PEER, session: `warmup-${cycle}`, phase: 'handoff' }),
        (d.ranges[1]!.epoch = d.version)
      ),
    );
    at(base, (d) => ((d.ranges[1]!.owner = PEER), (d.ranges[1]!.epoch = d.version)));
  }
  return out;
}
