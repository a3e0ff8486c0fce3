// The cache node's entry routes: single keys (/v1/kv/{ns}/{key}) and batches over keys (/v1/batch/*).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { decodeHeader, type WriteOutcome } from '../../core/model/entry.js';
import { validateStoredKey, validateNamespace } from '../../core/model/keys.js';
import { ringHashBytes } from '../../core/ring/hash.js';
import {
  asciiJsonText,
  encodeAbsentRecord,
  encodeEntryRecordParts,
  ENTRY_HEADER,
  RecordReader,
  RECORD_ENTRY,
  RECORDS_CONTENT_TYPE,
  storeKeyAt,
  type EntryRecord,
} from '../../core/nodes/wire.js';
import type { NodeConfig } from './config.js';
import { HttpError, NOT_RECORDS, parseJson, validated } from './http-error.js';
import { sendBuffer, sendJson } from './http-reply.js';
import type { Role } from './ownership.js';
import { JSON_LIMIT, readBody, withPooledBody } from './request-body.js';
import { ringVersionOf, type RouteContext } from './route-context.js';
import { SlabPool, SlabWriter } from './slab-pool.js';
import type { NodeStats, Op } from './stats.js';
import type { NodeStore } from './store.js';

const batchGetSchema = z.strictObject({ ns: z.string(), keys: z.array(z.string()).max(10_000) });
const batchDeleteSchema = z.strictObject({
  ns: z.string(),
  keys: z.array(z.string()).max(10_000),
  versions: z.array(z.number().int().nullable()).optional(),
});
const batchPinSchema = z
  .strictObject({
    ns: z.string(),
    keys: z.array(z.string()).max(10_000),
    versions: z.array(z.number().int()),
    pinned: z.boolean(),
  })
  .refine((b) => b.versions.length === b.keys.length, { message: 'versions must give one version per key', path: ['versions'] });

/** Key and batch requests, each checked against the caller's ring version (see CacheNode, server.ts). */
export class EntryRoutes {
  /**
   * Response buffers of batch reads: 2 MiB each (a WarmTier batch asks for about 1 MiB of values), at most 16
   * (32 MiB) out at once; beyond that, responses copy per value.
   */
  readonly slabs = new SlabPool(2 * 1024 * 1024, 16);
  /**
   * Request bodies of writes (batch and single puts): 2 MiB each, at most 16 out. The store references a large
   * value in place until its transaction commits, so a slab goes back only once the write has settled; beyond
   * 16, bodies get buffers of their own.
   */
  readonly bodySlabs = new SlabPool(2 * 1024 * 1024, 16);
  private readonly store: NodeStore;
  private readonly stats: NodeStats;
  private readonly config: NodeConfig;

  constructor(private readonly ctx: RouteContext) {
    this.store = ctx.store;
    this.stats = ctx.stats;
    this.config = ctx.config;
  }

  // ------------------------------------------------------------------ single keys

  async keyRequest(op: Op, path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rest = path.slice('/v1/kv/'.length);
    const slash = rest.indexOf('/');
    if (slash <= 0) throw new HttpError('VALIDATION_FAILED', 'path must be /v1/kv/{ns}/{key}');
    let ns: string;
    let key: string;
    try {
      ns = validateNamespace(rest.slice(0, slash));
      key = validateStoredKey(decodeURIComponent(rest.slice(slash + 1)));
    } catch (e) {
      throw new HttpError('VALIDATION_FAILED', e instanceof Error ? e.message : 'invalid key');
    }
    const clientVersion = ringVersionOf(req);
    const hash = ringHashBytes(ns, key);
    const position = hash.toString('hex');
    const sk = storeKeyAt(hash, ns, key);
    if (op === 'get' || op === 'head') {
      this.ctx.authorize(position, clientVersion, false);
      this.stats.served();
      // A background read (a policy's copy or move: `peek=1`) is not a use: it leaves the eviction order and the
      // entry's access facts as they were, or a nightly backup would make everything look recently read.
      const e = this.store.getRaw(sk, op === 'get' && query.get('peek') !== '1');
      if (!e) return sendJson(res, 404, { error: { code: 'NOT_FOUND', message: 'no such key on this node' } });
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
      if (typeof raw !== 'string') throw new HttpError('VALIDATION_FAILED', `${ENTRY_HEADER} header is required`);
      let header;
      try {
        header = decodeHeader(raw);
      } catch {
        throw new HttpError('VALIDATION_FAILED', `${ENTRY_HEADER} is not a valid entry header`);
      }
      const ifAbsent = query.get('ifAbsent') === '1';
      const outcome = await withPooledBody(this.bodySlabs, this.store, req, this.config.maxValueBytes, (value) => {
        // Ownership check and write decision in one synchronous step (see CacheNode's class comment).
        this.ctx.countRole(this.ctx.authorize(position, clientVersion, true));
        return this.store.putAt(sk, { header, value }, undefined, ifAbsent);
      });
      // Echoed so a client can tell this node honoured the condition (a node from before it ignores the query and
      // would apply the create over a record the client must not overwrite).
      return sendJson(res, 200, ifAbsent ? { ...outcome, ifAbsent: true } : outcome);
    }
    // delete
    const v = query.get('version');
    const version = v === null ? undefined : Number(v);
    if (version !== undefined && !Number.isSafeInteger(version)) {
      throw new HttpError('VALIDATION_FAILED', 'version must be an integer');
    }
    this.ctx.countRole(this.ctx.authorize(position, clientVersion, true));
    const removed = await this.store.removeKey(sk, version);
    return sendJson(res, 200, { removed });
  }

  // ------------------------------------------------------------------ batches

  /**
   * The body of a JSON batch over keys (`{ ns, keys, ... }`), validated, with each key's storage key and its
   * ownership role, checked against the caller's ring version (a refusal throws the 409).
   */
  private async keyedBatch<T extends { ns: string; keys: string[] }>(
    schema: z.ZodType<T>,
    req: IncomingMessage,
    write: boolean,
  ): Promise<{ body: T; ns: string; keys: string[]; sks: Buffer[]; roles: Role[] }> {
    const body = parseJson(schema, await readBody(req, JSON_LIMIT));
    const ns = validated(() => validateNamespace(body.ns));
    const keys = body.keys.map((k) => validated(() => validateStoredKey(k)));
    const clientVersion = ringVersionOf(req);
    const sks = keys.map((k) => storeKeyAt(ringHashBytes(ns, k), ns, k));
    const roles = sks.map((sk) => this.ctx.authorize(sk.toString('hex', 0, 8), clientVersion, write));
    return { body, ns, keys, sks, roles };
  }

  async batchGet(req: IncomingMessage, res: ServerResponse): Promise<void> {
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

  async batchPut(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const limit = this.config.maxValueBytes + JSON_LIMIT;
    const outcomes = await withPooledBody(this.bodySlabs, this.store, req, limit, (buf) => this.putRecords(req, buf));
    return sendJson(res, 200, { outcomes });
  }

  /** The writes of a batch put body (entry records, values viewed in place). */
  private putRecords(req: IncomingMessage, buf: Buffer): Promise<WriteOutcome[]> {
    const reader = new RecordReader();
    const records = validated(() => reader.push(buf), NOT_RECORDS);
    if (reader.pending > 0) throw new HttpError('VALIDATION_FAILED', 'body ends inside a record');
    const items: EntryRecord[] = [];
    for (const r of records) {
      if (r.type !== RECORD_ENTRY) throw new HttpError('VALIDATION_FAILED', 'a batch put holds entry records only');
      validated(() => validateNamespace(r.ns));
      validated(() => validateStoredKey(r.key));
      items.push(r);
    }
    const clientVersion = ringVersionOf(req);
    const keyed = items.map((it) => ({ ...it, sk: storeKeyAt(ringHashBytes(it.ns, it.key), it.ns, it.key) }));
    const roles = keyed.map((it) => this.ctx.authorize(it.sk.toString('hex', 0, 8), clientVersion, true));
    roles.forEach((r) => this.ctx.countRole(r));
    return this.store.putMany(keyed);
  }

  async batchDelete(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { body, sks, roles } = await this.keyedBatch(batchDeleteSchema, req, true);
    roles.forEach((r) => this.ctx.countRole(r));
    const removed = await this.store.removeMany(sks.map((sk, i) => ({ sk, version: body.versions?.[i] ?? undefined })));
    return sendJson(res, 200, { removed });
  }

  /**
   * Sets or clears the pinned flag of each key at exactly its given version (tier migration's pin/unpin). A write:
   * refused (409) for keys of ranges this node neither owns nor receives. Answers `{ updated: boolean[] }`.
   */
  async batchPin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { body, sks } = await this.keyedBatch(batchPinSchema, req, true);
    const updated = await Promise.all(sks.map((sk, i) => this.store.setPinned(sk, body.versions[i]!, body.pinned)));
    return sendJson(res, 200, { updated });
  }
}
