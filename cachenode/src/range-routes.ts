// The cache node's range routes (migration): export and import of a key range, range delete and range statistics.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { isRingPosition, ringHashBytes } from '../../core/ring/hash.js';
import {
  encodeTrailerRecord,
  RecordReader,
  RECORD_ENTRY,
  RECORDS_CONTENT_TYPE,
  storeKeyAt,
  type EntryRecord,
} from '../../core/nodes/wire.js';
import type { NodeConfig } from './config.js';
import { HttpError, NOT_RECORDS, parseJson, validated } from './http-error.js';
import { drained, sendJson } from './http-reply.js';
import { PooledRecordWriter } from './record-writer.js';
import { JSON_LIMIT, readBody } from './request-body.js';
import type { RouteContext } from './route-context.js';
import { SlabPool } from './slab-pool.js';
import type { NodeStats } from './stats.js';
import type { NodeStore } from './store.js';

const SCAN_CHUNK = 256;
/** Keys per read of a rate-capped export (at 1 KiB values and 1 MiB/s, about 50 ms of transfer). */
const EXPORT_PACED_CHUNK = 48;
/** Bytes of records per socket write of an export. */
const EXPORT_WRITE_BYTES = 64 * 1024;

const rangeDeleteSchema = z.strictObject({
  start: z.string().refine(isRingPosition),
  end: z.string().refine(isRingPosition).nullable(),
  force: z.boolean().optional(),
});

/** Range requests: the streams and bulk operations of a migration between nodes. */
export class RangeRoutes {
  /** Export write buffers (see PooledRecordWriter). */
  private readonly exportSlabs = new SlabPool(EXPORT_WRITE_BYTES, 16);
  private readonly store: NodeStore;
  private readonly stats: NodeStats;
  private readonly config: NodeConfig;

  constructor(private readonly ctx: RouteContext) {
    this.store = ctx.store;
    this.stats = ctx.stats;
    this.config = ctx.config;
  }

  /**
   * Streams the live entries of [start, end) in key order as records, after the `after` cursor (a storage
   * key, hex), at most `limit` of them, at most `rate` bytes per second (and never above the node's cap). Ends
   * with a trailer `{ done, next, keys, bytes }`: `next` is the cursor to resume from. Reads committed state
   * after the writes queued before the request settle. `values=0` sends every record with an empty value (the
   * header keeps the real size): enumeration by header, without reading or sending values. `access=1` sends each
   * entry's access facts (store.ts `accessOf`) as an access record before its entry record, for the policies'
   * selections by idle time and reads; a pinned entry has none (unknown). Exports never count as reads.
   */
  async exportRange(query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const start = query.get('start') ?? '';
    const endQ = query.get('end');
    const end = endQ === null || endQ === '' ? null : endQ;
    if (!isRingPosition(start) || (end !== null && !isRingPosition(end))) {
      throw new HttpError('VALIDATION_FAILED', 'start and end must be ring positions (16 hex digits)');
    }
    const afterQ = query.get('after');
    const after = afterQ ? Buffer.from(afterQ, 'hex') : undefined;
    const limit = query.has('limit') ? Math.max(1, Number(query.get('limit'))) : Number.POSITIVE_INFINITY;
    const cap = this.config.exportRateBytesPerSec;
    const asked = query.has('rate') ? Number(query.get('rate')) : 0;
    const rate = cap > 0 && asked > 0 ? Math.min(cap, asked) : cap > 0 ? cap : asked > 0 ? asked : 0;
    const withValues = query.get('values') !== '0';
    const withAccess = query.get('access') === '1';
    await this.store.settle();
    res.statusCode = 200;
    res.setHeader('content-type', RECORDS_CONTENT_TYPE);
    let aborted = false;
    res.once('close', () => (aborted = true));
    req.resume();
    const started = performance.now();
    const out = new PooledRecordWriter(res, this.exportSlabs);
    let cursor: Buffer | undefined = after;
    let done = false;
    // Rate-capped exports read small chunks (a few tens of ms of transfer each) so the pacing stays smooth. Each
    // chunk's records are encoded into pooled buffers as they are read, and sent EXPORT_WRITE_BYTES per write.
    const chunkKeys = rate > 0 ? EXPORT_PACED_CHUNK : SCAN_CHUNK;
    while (!aborted) {
      let full = false;
      // A sweep stops early when a write finds the socket full (large values): then it waits for 'drain'.
      const swept = this.store.visitRange(
        start,
        end,
        cursor,
        Math.min(chunkKeys, limit - out.records),
        withValues,
        (sk, header, value) => {
          const access = withAccess ? this.store.accessOf(sk) : undefined;
          if (access && !out.addAccess(access)) full = true;
          if (!out.add(sk, header, value)) full = true;
          return !full;
        },
      );
      if (swept.last) cursor = swept.last;
      if (!out.flush()) full = true;
      done = swept.exhausted;
      if (done || out.records >= limit) break;
      if (full && !aborted) await drained(res);
      if (rate > 0 && !aborted) {
        const ahead = (out.bytes / rate) * 1000 - (performance.now() - started);
        if (ahead > 5) await new Promise((r) => setTimeout(r, ahead));
      }
    }
    if (aborted) return;
    res.end(
      encodeTrailerRecord({ done, next: done ? null : (cursor?.toString('hex') ?? null), keys: out.records, bytes: out.bytes }),
    );
  }

  /**
   * Bulk, version-checked import of entry records (a migration's stream into its target). Only keys of ranges
   * this node owns or is the pending target of are accepted, so a stale or rolled-back migration cannot leave
   * data the node would never clean up. Answers counts: applied, stale (a newer version was there), full.
   */
  async importRange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reader = new RecordReader(this.config.maxValueBytes + 64 * 1024);
    let applied = 0;
    let stale = 0;
    let full = 0;
    let bytes = 0;
    const commits: Promise<void>[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      const items: (EntryRecord & { sk: Buffer })[] = [];
      for (const r of validated(() => reader.push(chunk), NOT_RECORDS)) {
        if (r.type !== RECORD_ENTRY) continue;
        const sk = storeKeyAt(ringHashBytes(r.ns, r.key), r.ns, r.key);
        const check = this.ctx.ownership.check(sk.toString('hex', 0, 8), Number.MAX_SAFE_INTEGER, true);
        if (typeof check !== 'string') {
          this.stats.refused++;
          throw this.ctx.refusal(check);
        }
        items.push({ ...r, sk });
      }
      if (items.length === 0) continue;
      commits.push(
        // Bulk: straight to LMDB (large transactions already; the journal would only write them twice).
        this.store.putMany(items, { bulk: true }).then((outcomes) => {
          for (const o of outcomes) {
            if (o.applied) applied++;
            else if (o.full) full++;
            else stale++;
          }
        }),
      );
    }
    if (reader.pending > 0) throw new HttpError('VALIDATION_FAILED', 'body ends inside a record');
    await Promise.all(commits);
    return sendJson(res, 200, { applied, stale, full, bytes });
  }

  /** Deletes every key of [start, end). Refused while the node owns or receives any of it, unless `force`. */
  async deleteRange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = parseJson(rangeDeleteSchema, await readBody(req, JSON_LIMIT));
    if (!body.force && this.ctx.ownership.holdsAny(body.start, body.end)) {
      const message = `node '${this.ctx.nodeId}' still owns or receives part of [${body.start}, ${body.end ?? 'top'})`;
      throw new HttpError('RANGE_HELD', message, { ringVersion: this.ctx.ownership.version });
    }
    const deleted = await this.store.deleteRange(body.start, body.end);
    return sendJson(res, 200, { deleted });
  }

  async rangeStats(query: URLSearchParams, res: ServerResponse): Promise<void> {
    const start = query.get('start') ?? '';
    const endQ = query.get('end');
    const end = endQ === null || endQ === '' ? null : endQ;
    if (!isRingPosition(start) || (end !== null && !isRingPosition(end))) {
      throw new HttpError('VALIDATION_FAILED', 'start and end must be ring positions (16 hex digits)');
    }
    const qq = query.has('quantile') ? Number(query.get('quantile')) : 0.5;
    if (!(qq > 0 && qq < 1)) throw new HttpError('VALIDATION_FAILED', 'quantile must be in (0, 1)');
    return sendJson(res, 200, await this.store.rangeStats(start, end, qq));
  }
}
