import { randomBytes, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { decodeHeader, type WriteOutcome } from '../../layers/core/model/entry.js';
import { validateKey, validateNamespace } from '../../layers/core/model/keys.js';
import { isRingPosition, ringHashBytes } from '../../layers/core/ring/hash.js';
import { casStoreFromUri, RingStore, type CasStore } from '../../layers/core/ring/store.js';
import { ErrorLogLimiter, formatErrorLogEntry } from '../../layers/core/util/error-log-limiter.js';
import {
  asciiJsonText,
  encodeAbsentRecord,
  encodeEntryRecordParts,
  encodeTrailerRecord,
  ENTRY_HEADER,
  RecordReader,
  RECORD_ENTRY,
  RECORDS_CONTENT_TYPE,
  RING_HEADER,
  SECRET_HEADER,
  storeKeyAt,
  type EntryRecord,
} from '../../layers/core/warm/wire.js';
import type { NodeConfig } from './config.js';
import { Ownership, type Refusal, type Role } from './ownership.js';
import { NodeStats, type Op } from './stats.js';
import { reportSinkFromUri, StatsReporter } from './stats-reporter.js';
import { PooledRecordWriter } from './record-writer.js';
import { SlabPool, SlabWriter } from './slab-pool.js';
import { NodeStore } from './store.js';

const MiB = 1024 * 1024;
const SCAN_CHUNK = 256;
/** Keys per read of a rate-capped export (at 1 KiB values and 1 MiB/s, about 50 ms of transfer). */
const EXPORT_PACED_CHUNK = 48;
/** Bytes of records per socket write of an export. */
const EXPORT_WRITE_BYTES = 64 * 1024;
const JSON_LIMIT = 16 * MiB;

/** An error with an HTTP status and a stable code (answered as JSON). */
class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const batchGetSchema = z.strictObject({ ns: z.string(), keys: z.array(z.string()).max(10_000) });
const batchDeleteSchema = z.strictObject({ ns: z.string(), keys: z.array(z.string()).max(10_000), versions: z.array(z.number().int().nullable()).optional() });
const batchPinSchema = z.strictObject({ ns: z.string(), keys: z.array(z.string()).max(10_000), versions: z.array(z.number().int()), pinned: z.boolean() }).refine((b) => b.versions.length === b.keys.length, { message: 'versions must give one version per key', path: ['versions'] });
const rangeDeleteSchema = z.strictObject({ start: z.string().refine(isRingPosition), end: z.string().refine(isRingPosition).nullable(), force: z.boolean().optional() });

/**
 * The cache node daemon: an HTTP/1.1 keep-alive server over a {@link NodeStore}.
 *
 * Every request must carry the shared secret (`x-strata-secret`, compared in constant time). Key requests carry
 * the caller's ring version (`x-strata-ring`) and are checked against the node's ring ({@link Ownership}):
 * refused with 409, the node's ring version and its ring document, when the node does not own the key's range
 * or the caller's ring is older than the range's last change. The check and the store's write decision happen
 * in the same synchronous step, so a ring install (which waits for queued writes to settle before answering)
 * cleanly separates writes accepted under the old ring from those under the new one.
 */
export class CacheNode {
  readonly nodeId: string;
  readonly store: NodeStore;
  readonly stats = new NodeStats();
  readonly ownership: Ownership;
  private readonly server: Server;
  /** The shared secret's bytes (compared in constant time; its length is no secret). */
  private readonly secretBytes: Buffer;
  /**
   * Response buffers of batch reads: 2 MiB each (a WarmTier batch asks for about 1 MiB of values), at most 16
   * (32 MiB) out at once; beyond that, responses copy per value.
   */
  private readonly slabs = new SlabPool(2 * 1024 * 1024, 16);
  /**
   * Request bodies of writes (batch and single puts): 2 MiB each, at most 16 out. The store references a large
   * value in place until its transaction commits, so a slab goes back only once the write has settled; beyond
   * 16, bodies get buffers of their own.
   */
  private readonly bodySlabs = new SlabPool(2 * 1024 * 1024, 16);
  /** Export write buffers (see PooledRecordWriter). */
  private readonly exportSlabs = new SlabPool(EXPORT_WRITE_BYTES, 16);
  private inFlight = 0;
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private sweeper?: NodeJS.Timeout;
  private ringPoller?: NodeJS.Timeout;
  private ringStore?: RingStore;
  private ringCas?: CasStore;
  /** Ring store reads that failed in a row (logged on the first, then every 12th). */
  private ringPollFailures = 0;
  /** A poll is under way (a slow store does not pile polls up). */
  private ringPolling = false;
  /** Writes this node's statistics report to the ring store (STRATA_NODE_STATS_INTERVAL_MS). */
  private statsReporter?: StatsReporter;
  private stopped?: Promise<void>;
  /**
   * Unexpected request failures (a failing disk fails every write): the first of each kind with its stack, then
   * one line per kind per 10 s with the count, not a stack per request.
   */
  private readonly failureLog = new ErrorLogLimiter({ write: (e) => console.error(formatErrorLogEntry(e, '[cachenode]')) });

  private constructor(
    readonly config: NodeConfig,
    store: NodeStore,
  ) {
    this.store = store;
    const saved = store.getSys<string>('nodeId');
    this.nodeId = config.nodeId ?? saved ?? `node-${randomBytes(6).toString('hex')}`;
    this.ownership = new Ownership(this.nodeId, store);
    this.secretBytes = Buffer.from(config.secret, 'utf8');
    this.server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 30_000 }, (req, res) => this.onRequest(req, res));
  }

  static async start(config: NodeConfig): Promise<CacheNode> {
    // A secret read from the ring store arrives after the configuration: a node must not start before it has it.
    if (config.secret.length < 16) {
      throw new Error('the cache node has no shared secret of 16+ characters (one from the ring store must be loaded before start)');
    }
    const store = new NodeStore({ dir: config.dataDir, capacityBytes: config.capacityBytes, watermark: config.watermark, sync: config.sync, applyIntervalMs: config.applyIntervalMs });
    const node = new CacheNode(config, store);
    if (store.getSys<string>('nodeId') !== node.nodeId) await store.putSys('nodeId', node.nodeId);
    node.server.listen(config.port, config.host);
    await once(node.server, 'listening');
    if (config.sweepMs > 0) {
      node.sweeper = setInterval(() => void store.sweepExpired().catch(() => undefined), config.sweepMs);
      node.sweeper.unref();
    }
    if (config.ringStore) {
      node.ringCas = casStoreFromUri(config.ringStore.uri, config.ringStore.s3Endpoint);
      node.ringStore = new RingStore(node.ringCas);
      void node.pollRing(); // not awaited: a slow or unreachable store must not hold up the start
      if (config.ringStore.pollMs > 0) {
        node.ringPoller = setInterval(() => void node.pollRing(), config.ringStore.pollMs);
        node.ringPoller.unref();
      }
      if (config.statsReports) {
        const { intervalMs, id } = config.statsReports;
        const sink = reportSinkFromUri(config.ringStore.uri, config.ringStore.s3Endpoint);
        const reportId = id ? { reportId: id } : {};
        node.statsReporter = new StatsReporter({ sink, nodeId: node.nodeId, ...reportId, intervalMs, stats: () => node.statsBody() });
        node.statsReporter.start();
      }
    }
    return node;
  }

  /** What GET /stats answers, and what the node's statistics reports carry. */
  statsBody(): Record<string, unknown> {
    return {
      nodeId: this.nodeId,
      ringVersion: this.ownership.version,
      ...this.store.stats(),
      ...this.stats.snapshot(),
      responseSlabs: this.slabs.stats,
      requestSlabs: this.bodySlabs.stats,
      ...(this.statsReporter ? { statsReports: { ...this.statsReporter.counters } } : {}),
    };
  }

  /**
   * Reads the ring store and installs a newer version than the node holds (as a push would). A node that missed
   * pushes (it was down, or a push failed) catches up by itself instead of waiting for a refused caller to bring
   * the ring. Never throws: a store outage is logged and the next poll tries again.
   */
  async pollRing(): Promise<boolean> {
    if (!this.ringStore || this.draining || this.ringPolling) return false;
    this.ringPolling = true;
    try {
      const doc = await this.ringStore.load();
      this.ringPollFailures = 0;
      if (!doc || doc.version <= this.ownership.version) return false;
      const installed = await this.ownership.install(doc);
      if (installed) await this.store.settle();
      return installed;
    } catch (e) {
      if (this.ringPollFailures++ % 12 === 0) console.error(JSON.stringify({ level: 'warn', msg: 'could not read the ring store', store: this.config.ringStore?.uri, error: e instanceof Error ? e.message : String(e) }));
      return false;
    } finally {
      this.ringPolling = false;
    }
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /**
   * Graceful shutdown: stop accepting connections, let in-flight requests finish (up to `drainMs`), close idle
   * keep-alive connections, then flush and close the store.
   */
  shutdown(): Promise<void> {
    this.stopped ??= (async () => {
      this.draining = true;
      if (this.sweeper) clearInterval(this.sweeper);
      if (this.ringPoller) clearInterval(this.ringPoller);
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      this.server.closeIdleConnections();
      if (this.inFlight > 0) {
        await Promise.race([new Promise<void>((r) => this.idleWaiters.push(r)), new Promise((r) => setTimeout(r, this.config.drainMs).unref())]);
      }
      this.server.closeAllConnections();
      await closed;
      // After the drain (its counters are final), before the store closes (the report reads it).
      await this.statsReporter?.stop(true);
      this.ringCas?.close?.();
      await this.store.close();
    })();
    return this.stopped;
  }

  // ------------------------------------------------------------------ dispatch

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    this.inFlight++;
    res.once('close', () => {
      if (--this.inFlight === 0 && this.draining) for (const w of this.idleWaiters.splice(0)) w();
    });
    if (this.draining) res.setHeader('connection', 'close');
    if (!this.authorized(req)) {
      this.stats.unauthorized++;
      res.setHeader('connection', 'close');
      this.sendError(res, new HttpError(401, 'UNAUTHORIZED', 'missing or wrong shared secret'));
      return;
    }
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    const method = req.method ?? 'GET';
    let op: Op | undefined;
    let p: Promise<void>;
    const t0 = performance.now();
    try {
      if (path.startsWith('/v1/kv/')) {
        op = method === 'GET' ? 'get' : method === 'HEAD' ? 'head' : method === 'PUT' ? 'put' : method === 'DELETE' ? 'delete' : undefined;
        if (!op) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here`);
        p = this.keyRequest(op, path, query, req, res);
      } else {
        const route = `${method} ${path}`;
        switch (route) {
          case 'POST /v1/batch/get':
            op = 'batchGet';
            p = this.batchGet(req, res);
            break;
          case 'POST /v1/batch/put':
            op = 'batchPut';
            p = this.batchPut(req, res);
            break;
          case 'POST /v1/batch/delete':
            op = 'batchDelete';
            p = this.batchDelete(req, res);
            break;
          case 'POST /v1/batch/pin':
            p = this.batchPin(req, res);
            break;
          case 'GET /v1/range/export':
            op = 'export';
            p = this.exportRange(query, req, res);
            break;
          case 'POST /v1/range/import':
            op = 'import';
            p = this.importRange(req, res);
            break;
          case 'POST /v1/range/delete':
            op = 'rangeDelete';
            p = this.deleteRange(req, res);
            break;
          case 'GET /v1/range/stats':
            p = this.rangeStats(query, res);
            break;
          case 'GET /v1/ownership':
            p = this.json(res, 200, { nodeId: this.nodeId, ringVersion: this.ownership.version, ...this.ownership.view() });
            break;
          case 'GET /v1/ring':
            p = this.json(res, this.ownership.doc ? 200 : 404, this.ownership.doc ?? { error: { code: 'NO_RING', message: 'this node has no ring yet' } });
            break;
          case 'PUT /v1/ring':
            p = this.installRing(req, res);
            break;
          case 'GET /v1/victims':
            p = this.victims(query, res);
            break;
          case 'GET /healthz':
            p = this.json(res, this.draining ? 503 : 200, { status: this.draining ? 'draining' : 'ok', nodeId: this.nodeId, ringVersion: this.ownership.version });
            break;
          case 'GET /stats':
            p = this.json(res, 200, this.statsBody());
            break;
          default:
            throw new HttpError(404, 'ROUTE_NOT_FOUND', `no route ${route}`);
        }
      }
    } catch (e) {
      p = Promise.reject(e);
    }
    p.then(
      () => op && this.stats.record(op, t0, true),
      (e: unknown) => {
        if (op) this.stats.record(op, t0, false);
        this.sendError(res, e);
      },
    );
  }

  private authorized(req: IncomingMessage): boolean {
    const given = req.headers[SECRET_HEADER];
    if (typeof given !== 'string') return false;
    // A byte comparison, not a digest per request (a SHA-256 per request was ~4% of a busy node's CPU).
    const bytes = Buffer.from(given, 'utf8');
    return bytes.length === this.secretBytes.length && timingSafeEqual(bytes, this.secretBytes);
  }

  // ------------------------------------------------------------------ single keys

  private async keyRequest(op: Op, path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rest = path.slice('/v1/kv/'.length);
    const slash = rest.indexOf('/');
    if (slash <= 0) throw new HttpError(400, 'VALIDATION_FAILED', 'path must be /v1/kv/{ns}/{key}');
    let ns: string;
    let key: string;
    try {
      ns = validateNamespace(rest.slice(0, slash));
      key = validateKey(decodeURIComponent(rest.slice(slash + 1)));
    } catch (e) {
      throw new HttpError(400, 'VALIDATION_FAILED', e instanceof Error ? e.message : 'invalid key');
    }
    const clientVersion = ringVersionOf(req);
    const hash = ringHashBytes(ns, key);
    const position = hash.toString('hex');
    const sk = storeKeyAt(hash, ns, key);
    if (op === 'get' || op === 'head') {
      this.authorize(position, clientVersion, false);
      this.stats.served();
      const e = this.store.getRaw(sk, op === 'get');
      if (!e) return this.json(res, 404, { error: { code: 'NOT_FOUND', message: 'no such key on this node' } });
      res.statusCode = 200;
      res.setHeader(ENTRY_HEADER, asciiJsonText(e.headerJson));
      res.setHeader('content-type', 'application/octet-stream');
      res.setHeader('content-length', e.value.length);
      if (op === 'head') {
        res.end();
        return;
      }
      return sendBuffer(res, e.value);
    }
    if (op === 'put') {
      const raw = req.headers[ENTRY_HEADER];
      if (typeof raw !== 'string') throw new HttpError(400, 'VALIDATION_FAILED', `${ENTRY_HEADER} header is required`);
      let header;
      try {
        header = decodeHeader(raw);
      } catch {
        throw new HttpError(400, 'VALIDATION_FAILED', `${ENTRY_HEADER} is not a valid entry header`);
      }
      const outcome = await this.withPooledBody(req, this.config.maxValueBytes, (value) => {
        // Ownership check and write decision in one synchronous step (see the class comment).
        this.countRole(this.authorize(position, clientVersion, true));
        return this.store.putAt(sk, { header, value });
      });
      return this.json(res, 200, outcome);
    }
    // delete
    const v = query.get('version');
    const version = v === null ? undefined : Number(v);
    if (version !== undefined && !Number.isSafeInteger(version)) throw new HttpError(400, 'VALIDATION_FAILED', 'version must be an integer');
    this.countRole(this.authorize(position, clientVersion, true));
    const removed = await this.store.removeKey(sk, version);
    return this.json(res, 200, { removed });
  }

  /** Applies the ownership rule; throws the 409 refusal. */
  private authorize(position: string, clientVersion: number, write: boolean): Role {
    const r = this.ownership.check(position, clientVersion, write);
    if (typeof r === 'string') return r;
    this.stats.refused++;
    throw this.refusal(r);
  }

  /** Writes: as the owner they count as served, as the pending target as shadow writes. */
  private countRole(role: Role): void {
    if (role === 'owner') this.stats.served();
    else this.stats.shadowWrites++;
  }

  private refusal(r: Refusal): HttpError {
    return new HttpError(409, r.reason === 'stale-ring' ? 'STALE_RING' : 'WRONG_NODE', r.message, { ringVersion: this.ownership.version, ring: this.ownership.doc ?? null });
  }

  // ------------------------------------------------------------------ batches

  /**
   * The body of a JSON batch over keys (`{ ns, keys, ... }`), validated, with each key's storage key and its
   * ownership role, checked against the caller's ring version (a refusal throws the 409).
   */
  private async keyedBatch<T extends { ns: string; keys: string[] }>(schema: z.ZodType<T>, req: IncomingMessage, write: boolean): Promise<{ body: T; ns: string; keys: string[]; sks: Buffer[]; roles: Role[] }> {
    const body = parseJson(schema, await readBody(req, JSON_LIMIT));
    const ns = validated(() => validateNamespace(body.ns));
    const keys = body.keys.map((k) => validated(() => validateKey(k)));
    const clientVersion = ringVersionOf(req);
    const sks = keys.map((k) => storeKeyAt(ringHashBytes(ns, k), ns, k));
    const roles = sks.map((sk) => this.authorize(sk.toString('hex', 0, 8), clientVersion, write));
    return { body, ns, keys, sks, roles };
  }

  private async batchGet(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { ns, keys, sks } = await this.keyedBatch(batchGetSchema, req, false);
    const parts: Buffer[] = [];
    let bytes = 0;
    // Values are copied once, from the store's transient views into a pooled slab, which goes back to the pool
    // when the response is done ('close' follows 'finish', when the last write has reached the socket, or an abort).
    const slab = new SlabWriter(this.slabs);
    res.once('close', () => slab.done());
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const found = this.store.readRaw(sks[i]!, (headerJson, view) => {
        const [head, value] = encodeEntryRecordParts(ns, k, headerJson, slab.copy(view));
        parts.push(head, value);
        bytes += head.length + value.length;
        return true;
      });
      if (!found) {
        parts.push(encodeAbsentRecord());
        bytes += parts[parts.length - 1]!.length;
      }
      this.stats.served();
    }
    res.statusCode = 200;
    res.setHeader('content-type', RECORDS_CONTENT_TYPE);
    res.setHeader('content-length', bytes);
    // One writev of all parts: values are sent from the slab, not copied again.
    res.cork();
    for (const p of parts) res.write(p);
    res.end();
    res.uncork();
  }

  private async batchPut(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const outcomes = await this.withPooledBody(req, this.config.maxValueBytes + JSON_LIMIT, (buf) => this.putRecords(req, buf));
    return this.json(res, 200, { outcomes });
  }

  /** The writes of a batch put body (entry records, values viewed in place). */
  private putRecords(req: IncomingMessage, buf: Buffer): Promise<WriteOutcome[]> {
    const reader = new RecordReader();
    const records = validated(() => reader.push(buf), NOT_RECORDS);
    if (reader.pending > 0) throw new HttpError(400, 'VALIDATION_FAILED', 'body ends inside a record');
    const items: EntryRecord[] = [];
    for (const r of records) {
      if (r.type !== RECORD_ENTRY) throw new HttpError(400, 'VALIDATION_FAILED', 'a batch put holds entry records only');
      validated(() => validateNamespace(r.ns));
      validated(() => validateKey(r.key));
      items.push(r);
    }
    const clientVersion = ringVersionOf(req);
    const keyed = items.map((it) => ({ ...it, sk: storeKeyAt(ringHashBytes(it.ns, it.key), it.ns, it.key) }));
    const roles = keyed.map((it) => this.authorize(it.sk.toString('hex', 0, 8), clientVersion, true));
    roles.forEach((r) => this.countRole(r));
    return this.store.putMany(keyed);
  }

  /**
   * Reads a write's body into a pooled slab (when one is free and the declared length fits), runs `write` on it
   * and gives the slab back once nothing refers to it: at once when reading the body failed or `write` resolved
   * (its writes are then durable); when `write` failed, once the store has settled, since it may have queued
   * writes that still read their values from the slab.
   */
  private async withPooledBody<T>(req: IncomingMessage, limit: number, write: (body: Buffer) => Promise<T>): Promise<T> {
    const slab = pooledBodyFits(req, this.bodySlabs.slabBytes, limit) ? this.bodySlabs.acquire() : undefined;
    if (!slab) return write(await readBody(req, limit));
    let body: Buffer;
    try {
      body = await readBody(req, limit, slab);
    } catch (e) {
      this.bodySlabs.release(slab);
      throw e;
    }
    let out: T;
    try {
      out = await write(body);
    } catch (e) {
      // Whatever it queued before failing still reads its values from the slab until the store settles (a
      // closed store never does: the slab is dropped with it).
      this.store.settle().then(() => this.bodySlabs.release(slab), () => undefined);
      throw e;
    }
    // Resolved: its writes are committed (and flushed), so the store holds no reference into the slab.
    this.bodySlabs.release(slab);
    return out;
  }

  private async batchDelete(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { body, sks, roles } = await this.keyedBatch(batchDeleteSchema, req, true);
    roles.forEach((r) => this.countRole(r));
    const removed = await this.store.removeMany(sks.map((sk, i) => ({ sk, version: body.versions?.[i] ?? undefined })));
    return this.json(res, 200, { removed });
  }

  /**
   * Sets or clears the pinned flag of each key at exactly its given version (tier migration's pin/unpin). A write:
   * refused (409) for keys of ranges this node neither owns nor receives. Answers `{ updated: boolean[] }`.
   */
  private async batchPin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { body, sks } = await this.keyedBatch(batchPinSchema, req, true);
    const updated = await Promise.all(sks.map((sk, i) => this.store.setPinned(sk, body.versions[i]!, body.pinned)));
    return this.json(res, 200, { updated });
  }

  // ------------------------------------------------------------------ ranges

  /**
   * Streams the live entries of [start, end) in key order as records, after the `after` cursor (a storage
   * key, hex), at most `limit` of them, at most `rate` bytes per second (and never above the node's cap). Ends
   * with a trailer `{ done, next, keys, bytes }`: `next` is the cursor to resume from. Reads committed state
   * after the writes queued before the request settle. `values=0` sends every record with an empty value (the
   * header keeps the real size): enumeration by header, without reading or sending values.
   */
  private async exportRange(query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const start = query.get('start') ?? '';
    const endQ = query.get('end');
    const end = endQ === null || endQ === '' ? null : endQ;
    if (!isRingPosition(start) || (end !== null && !isRingPosition(end))) throw new HttpError(400, 'VALIDATION_FAILED', 'start and end must be ring positions (16 hex digits)');
    const afterQ = query.get('after');
    const after = afterQ ? Buffer.from(afterQ, 'hex') : undefined;
    const limit = query.has('limit') ? Math.max(1, Number(query.get('limit'))) : Number.POSITIVE_INFINITY;
    const cap = this.config.exportRateBytesPerSec;
    const asked = query.has('rate') ? Number(query.get('rate')) : 0;
    const rate = cap > 0 && asked > 0 ? Math.min(cap, asked) : cap > 0 ? cap : asked > 0 ? asked : 0;
    const withValues = query.get('values') !== '0';
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
      const swept = this.store.visitRange(start, end, cursor, Math.min(chunkKeys, limit - out.records), withValues, (sk, header, value) => {
        if (!out.add(sk, header, value)) full = true;
        return !full;
      });
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
    res.end(encodeTrailerRecord({ done, next: done ? null : (cursor?.toString('hex') ?? null), keys: out.records, bytes: out.bytes }));
  }

  /**
   * Bulk, version-checked import of entry records (a migration's stream into its target). Only keys of ranges
   * this node owns or is the pending target of are accepted, so a stale or rolled-back migration cannot leave
   * data the node would never clean up. Answers counts: applied, stale (a newer version was there), full.
   */
  private async importRange(req: IncomingMessage, res: ServerResponse): Promise<void> {
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
        const check = this.ownership.check(sk.toString('hex', 0, 8), Number.MAX_SAFE_INTEGER, true);
        if (typeof check !== 'string') {
          this.stats.refused++;
          throw this.refusal(check);
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
    if (reader.pending > 0) throw new HttpError(400, 'VALIDATION_FAILED', 'body ends inside a record');
    await Promise.all(commits);
    return this.json(res, 200, { applied, stale, full, bytes });
  }

  /** Deletes every key of [start, end). Refused while the node owns or receives any of it, unless `force`. */
  private async deleteRange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = parseJson(rangeDeleteSchema, await readBody(req, JSON_LIMIT));
    if (!body.force && this.ownership.holdsAny(body.start, body.end)) {
      throw new HttpError(409, 'RANGE_HELD', `node '${this.nodeId}' still owns or receives part of [${body.start}, ${body.end ?? 'top'})`, { ringVersion: this.ownership.version });
    }
    const deleted = await this.store.deleteRange(body.start, body.end);
    return this.json(res, 200, { deleted });
  }

  private async rangeStats(query: URLSearchParams, res: ServerResponse): Promise<void> {
    const start = query.get('start') ?? '';
    const endQ = query.get('end');
    const end = endQ === null || endQ === '' ? null : endQ;
    if (!isRingPosition(start) || (end !== null && !isRingPosition(end))) throw new HttpError(400, 'VALIDATION_FAILED', 'start and end must be ring positions (16 hex digits)');
    const qq = query.has('quantile') ? Number(query.get('quantile')) : 0.5;
    if (!(qq > 0 && qq < 1)) throw new HttpError(400, 'VALIDATION_FAILED', 'quantile must be in (0, 1)');
    return this.json(res, 200, await this.store.rangeStats(start, end, qq));
  }

  private async installRing(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse((await readBody(req, JSON_LIMIT)).toString('utf8'));
    } catch {
      throw new HttpError(400, 'MALFORMED_JSON', 'body is not JSON');
    }
    let installed: boolean;
    try {
      installed = await this.ownership.install(body);
    } catch (e) {
      throw new HttpError(400, 'VALIDATION_FAILED', e instanceof Error ? e.message : 'invalid ring document');
    }
    // Writes accepted under the previous ring are durable before anyone acts on the new one.
    await this.store.settle();
    return this.json(res, 200, { installed, version: this.ownership.version });
  }

  private async victims(query: URLSearchParams, res: ServerResponse): Promise<void> {
    const limit = Math.min(10_000, Math.max(1, Number(query.get('limit') ?? 100) || 100));
    // Expired entries are found by a scan of LMDB: journaled writes waiting to be applied are applied first.
    await this.store.settle();
    const s = this.store.stats();
    return this.json(res, 200, { ...s, victims: this.store.victims(limit) });
  }

  // ------------------------------------------------------------------ responses

  private async json(res: ServerResponse, status: number, body: unknown): Promise<void> {
    const s = JSON.stringify(body);
    res.statusCode = status;
    res.setHeader('content-type', 'application/json');
    res.setHeader('content-length', Buffer.byteLength(s));
    res.end(s);
  }

  private sendError(res: ServerResponse, e: unknown): void {
    if (res.headersSent) {
      res.destroy(e instanceof Error ? e : undefined);
      return;
    }
    const he = e instanceof HttpError ? e : new HttpError(500, 'INTERNAL', 'internal error');
    if (he.status === 409) res.setHeader(RING_HEADER, String(this.ownership.version));
    if (!(e instanceof HttpError)) this.failureLog.report(e, 'request');
    void this.json(res, he.status, { error: { code: he.code, message: he.message }, ...he.extra });
  }
}

/** What a body that is not a sequence of wire records is told. */
const NOT_RECORDS = 'body is not a sequence of records';

function ringVersionOf(req: IncomingMessage): number {
  const v = req.headers[RING_HEADER];
  const n = typeof v === 'string' ? Number(v) : 0;
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** `fn()`, with what it throws turned into the caller's error (400), its message after `context` when given. */
function validated<T>(fn: () => T, context?: string): T {
  try {
    return fn();
  } catch (e) {
    const message = e instanceof Error ? e.message : 'invalid input';
    throw new HttpError(400, 'VALIDATION_FAILED', context ? `${context}: ${message}` : message);
  }
}

function parseJson<T>(schema: z.ZodType<T>, buf: Buffer): T {
  let raw: unknown;
  try {
    raw = JSON.parse(buf.toString('utf8'));
  } catch {
    throw new HttpError(400, 'MALFORMED_JSON', 'body is not JSON');
  }
  const r = schema.safeParse(raw);
  if (!r.success) throw new HttpError(400, 'VALIDATION_FAILED', r.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; '));
  return r.data;
}

/** Whether `req` declares a body length that fits a pooled slab of `slabBytes` (and the route's `limit`). */
function pooledBodyFits(req: IncomingMessage, slabBytes: number, limit: number): boolean {
  const n = declaredLength(req);
  return n !== undefined && Number.isSafeInteger(n) && n > 0 && n <= slabBytes && n <= limit;
}

/** The body length `req` declares (content-length; NaN when that is not a number), or undefined without one. */
function declaredLength(req: IncomingMessage): number | undefined {
  const declared = req.headers['content-length'];
  return declared === undefined ? undefined : Number(declared);
}

/**
 * Reads a request body into one buffer (preallocated from content-length when given: `into` when it is large
 * enough, else a new one), up to `limit` bytes.
 * Event callbacks rather than an async iterator: this runs on every write and the iterator costs more than
 * the copy.
 */
function readBody(req: IncomingMessage, limit: number, into?: Buffer): Promise<Buffer> {
  const length = declaredLength(req);
  if (length !== undefined && length > limit) return Promise.reject(new HttpError(413, 'PAYLOAD_TOO_LARGE', `body of ${length} bytes exceeds the limit of ${limit}`));
  return new Promise((resolve, reject) => {
    const sized = length !== undefined && Number.isSafeInteger(length);
    const out = sized ? (into && length <= into.length ? into.subarray(0, length) : Buffer.allocUnsafe(length)) : undefined;
    const chunks: Buffer[] = [];
    let at = 0;
    let failed = false;
    const fail = (e: HttpError) => {
      if (failed) return;
      failed = true;
      req.removeAllListeners('data');
      req.resume();
      reject(e);
    };
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      if (out) {
        if (at + chunk.length > out.length) return fail(new HttpError(400, 'VALIDATION_FAILED', 'body longer than content-length'));
        chunk.copy(out, at);
      } else {
        if (at + chunk.length > limit) return fail(new HttpError(413, 'PAYLOAD_TOO_LARGE', `body exceeds the limit of ${limit} bytes`));
        chunks.push(chunk);
      }
      at += chunk.length;
    });
    req.once('end', () => {
      if (failed) return;
      if (out) {
        if (at !== out.length) return fail(new HttpError(400, 'VALIDATION_FAILED', 'body shorter than content-length'));
        resolve(out);
      } else resolve(Buffer.concat(chunks, at));
    });
    req.once('error', (e) => fail(new HttpError(400, 'VALIDATION_FAILED', `request body failed: ${e.message}`)));
    // A request aborted mid-body ends in 'close' without 'end' (and not always with 'error').
    req.once('close', () => {
      if (!req.complete) fail(new HttpError(400, 'VALIDATION_FAILED', 'request aborted before its body ended'));
    });
  });
}

/** Resolves on 'drain', or when the response closes first (client gone). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

/** Sends a body, in 1 MiB slices with backpressure when large. */
async function sendBuffer(res: ServerResponse, value: Buffer): Promise<void> {
  if (value.length <= MiB) {
    res.end(value);
    return;
  }
  for (let at = 0; at < value.length; at += MiB) {
    if (res.destroyed) return;
    if (!res.write(value.subarray(at, Math.min(value.length, at + MiB)))) await drained(res);
  }
  res.end();
}
