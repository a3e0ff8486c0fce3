import { Pool, type Dispatcher } from 'undici';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import type { RingDocument } from '../ring/document.js';
import {
  decodeEntryHeader,
  encodeEntryHeader,
  encodeEntryRecordParts,
  ENTRY_HEADER,
  readRawRecords,
  readRecords,
  RecordReader,
  RECORD_ENTRY,
  RECORD_TRAILER,
  RECORDS_CONTENT_TYPE,
  RING_HEADER,
  SECRET_HEADER,
  type EntryRecord,
  type RawEntryRecord,
} from './wire.js';

/** The node could not be reached, timed out, or failed (5xx). */
export class NodeUnavailableError extends Error {
  constructor(
    readonly url: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`cache node ${url}: ${message}`, options);
    this.name = 'NodeUnavailableError';
  }
}

/** The node refused a key request (409): it does not own the range, or our ring is older than its last change. */
export class StaleRouteError extends Error {
  constructor(
    readonly url: string,
    readonly code: string,
    readonly ringVersion: number,
    readonly ring: RingDocument | null,
    message: string,
  ) {
    super(`cache node ${url}: ${message}`);
    this.name = 'StaleRouteError';
  }
}

/** Any other refusal (4xx): a bug or a misconfiguration (wrong secret), not an outage. */
export class NodeRequestError extends Error {
  constructor(
    readonly url: string,
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body?: unknown,
  ) {
    super(`cache node ${url}: ${status} ${code}: ${message}`);
    this.name = 'NodeRequestError';
  }
}

export interface NodeClientOptions {
  /** The fleet's shared secret. */
  secret: string;
  /** Bound on a key or batch request (connect, then headers, then each body gap). @default 2000 */
  timeoutMs?: number;
  /** Bound on range export/import/delete calls (their gaps, not their total). @default 60000 */
  bulkTimeoutMs?: number;
  /** Keep-alive connections per node. @default 16 */
  connectionsPerNode?: number;
  /** HTTP/1.1 pipelining depth per connection. @default 1 */
  pipelining?: number;
}

export interface ExportOptions {
  start: string;
  end: string | null;
  /** Resume after this storage key (hex), exclusive. */
  after?: string | null;
  limit?: number;
  /** Bytes per second (the node also applies its own cap). */
  rate?: number;
  signal?: AbortSignal;
}

export interface ExportTrailer {
  done: boolean;
  next: string | null;
  keys: number;
  bytes: number;
}

export interface ImportResult {
  applied: number;
  stale: number;
  full: number;
  bytes: number;
}

type Response = Dispatcher.ResponseData;

/**
 * HTTP client of cache nodes: one undici keep-alive Pool per node, every call bounded by a timeout, the shared
 * secret on every request. Used by WarmTier (key and batch calls, with the caller's ring version) and by the
 * migration steps (ranges, ring pushes).
 */
export class NodeClient {
  private readonly pools = new Map<string, Pool>();
  private readonly timeoutMs: number;
  private readonly bulkTimeoutMs: number;
  private readonly connections: number;
  private readonly pipelining: number;
  private readonly secret: string;
  private closed = false;

  constructor(opts: NodeClientOptions) {
    this.secret = opts.secret;
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.bulkTimeoutMs = opts.bulkTimeoutMs ?? 60_000;
    this.connections = opts.connectionsPerNode ?? 16;
    this.pipelining = opts.pipelining ?? 1;
  }

  private pool(url: string): Pool {
    let p = this.pools.get(url);
    if (!p) {
      if (this.closed) throw new NodeUnavailableError(url, 'client is closed');
      p = new Pool(url, {
        connections: this.connections,
        pipelining: this.pipelining,
        connectTimeout: this.timeoutMs,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        keepAliveTimeout: 30_000,
      });
      this.pools.set(url, p);
    }
    return p;
  }

  /** Sends one request; network errors and timeouts become NodeUnavailableError. */
  private async request(url: string, opts: { path: string; method: Dispatcher.HttpMethod; headers?: Record<string, string>; body?: Buffer | string | AsyncIterable<Buffer> | null; bulk?: boolean; signal?: AbortSignal }): Promise<Response> {
    const timeout = opts.bulk ? this.bulkTimeoutMs : this.timeoutMs;
    try {
      return await this.pool(url).request({
        path: opts.path,
        method: opts.method,
        headers: { [SECRET_HEADER]: this.secret, ...opts.headers },
        body: (opts.body ?? null) as Dispatcher.DispatchOptions['body'],
        headersTimeout: timeout,
        bodyTimeout: timeout,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (e) {
      if (e instanceof NodeUnavailableError) throw e;
      throw new NodeUnavailableError(url, e instanceof Error ? e.message : String(e), { cause: e });
    }
  }

  /** Reads the whole body; a failure while reading is an outage. */
  private async bytes(url: string, res: Response): Promise<Buffer> {
    try {
      return Buffer.from(await res.body.arrayBuffer());
    } catch (e) {
      throw new NodeUnavailableError(url, `reading the response failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  private async json<T>(url: string, res: Response): Promise<T> {
    const b = await this.bytes(url, res);
    try {
      return JSON.parse(b.toString('utf8')) as T;
    } catch (e) {
      throw new NodeUnavailableError(url, 'answered with a body that is not JSON', { cause: e });
    }
  }

  /** Turns a non-2xx answer into the right error (consuming its body). */
  private async fail(url: string, res: Response): Promise<never> {
    const body = await this.bytes(url, res).catch(() => Buffer.alloc(0));
    let parsed: { error?: { code?: string; message?: string }; ringVersion?: number; ring?: RingDocument | null } = {};
    try {
      parsed = JSON.parse(body.toString('utf8')) as typeof parsed;
    } catch {
      /* not JSON */
    }
    const code = parsed.error?.code ?? `HTTP_${res.statusCode}`;
    const message = parsed.error?.message ?? `status ${res.statusCode}`;
    if (res.statusCode === 409 && (code === 'WRONG_NODE' || code === 'STALE_RING')) {
      throw new StaleRouteError(url, code, parsed.ringVersion ?? 0, parsed.ring ?? null, message);
    }
    if (res.statusCode >= 500) throw new NodeUnavailableError(url, `${res.statusCode} ${code}: ${message}`);
    throw new NodeRequestError(url, res.statusCode, code, message, parsed);
  }

  // ------------------------------------------------------------------ keys

  async get(url: string, ns: string, key: string, ringVersion: number): Promise<Entry | undefined> {
    const res = await this.request(url, { path: keyPath(ns, key), method: 'GET', headers: { [RING_HEADER]: String(ringVersion) } });
    if (res.statusCode === 404) {
      await res.body.dump();
      return undefined;
    }
    if (res.statusCode !== 200) return this.fail(url, res);
    const header = entryHeaderOf(url, res);
    return { header, value: await this.bytes(url, res) };
  }

  async head(url: string, ns: string, key: string, ringVersion: number): Promise<EntryHeader | undefined> {
    const res = await this.request(url, { path: keyPath(ns, key), method: 'HEAD', headers: { [RING_HEADER]: String(ringVersion) } });
    await res.body.dump();
    if (res.statusCode === 404) return undefined;
    if (res.statusCode !== 200) {
      if (res.statusCode === 409) throw new StaleRouteError(url, 'WRONG_NODE', Number(res.headers[RING_HEADER] ?? 0) || 0, null, 'range not served here');
      if (res.statusCode >= 500) throw new NodeUnavailableError(url, `status ${res.statusCode}`);
      throw new NodeRequestError(url, res.statusCode, `HTTP_${res.statusCode}`, `status ${res.statusCode}`);
    }
    return entryHeaderOf(url, res);
  }

  async put(url: string, ns: string, key: string, entry: Entry, ringVersion: number): Promise<WriteOutcome> {
    const res = await this.request(url, {
      path: keyPath(ns, key),
      method: 'PUT',
      headers: { [RING_HEADER]: String(ringVersion), [ENTRY_HEADER]: encodeEntryHeader(entry.header), 'content-type': 'application/octet-stream' },
      body: entry.value,
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json<WriteOutcome>(url, res);
  }

  async delete(url: string, ns: string, key: string, version: number | undefined, ringVersion: number): Promise<boolean> {
    const res = await this.request(url, { path: keyPath(ns, key) + (version === undefined ? '' : `?version=${version}`), method: 'DELETE', headers: { [RING_HEADER]: String(ringVersion) } });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ removed: boolean }>(url, res)).removed;
  }

  // ------------------------------------------------------------------ batches

  async getMany(url: string, ns: string, keys: string[], ringVersion: number): Promise<(Entry | undefined)[]> {
    const res = await this.request(url, { path: '/v1/batch/get', method: 'POST', headers: { [RING_HEADER]: String(ringVersion), 'content-type': 'application/json' }, body: JSON.stringify({ ns, keys }) });
    if (res.statusCode !== 200) return this.fail(url, res);
    const reader = new RecordReader();
    const records = reader.push(await this.bytes(url, res));
    if (records.length !== keys.length || reader.pending > 0) throw new NodeUnavailableError(url, `batch get answered ${records.length} records for ${keys.length} keys`);
    return records.map((r) => (r.type === RECORD_ENTRY ? r.entry : undefined));
  }

  async putMany(url: string, ns: string, items: { key: string; entry: Entry }[], ringVersion: number): Promise<WriteOutcome[]> {
    const body = Buffer.concat(items.flatMap((it) => encodeEntryRecordParts(ns, it.key, JSON.stringify(it.entry.header), it.entry.value)));
    const res = await this.request(url, { path: '/v1/batch/put', method: 'POST', headers: { [RING_HEADER]: String(ringVersion), 'content-type': RECORDS_CONTENT_TYPE }, body });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ outcomes: WriteOutcome[] }>(url, res)).outcomes;
  }

  async deleteMany(url: string, ns: string, keys: string[], ringVersion: number, versions?: (number | null)[]): Promise<boolean[]> {
    const res = await this.request(url, {
      path: '/v1/batch/delete',
      method: 'POST',
      headers: { [RING_HEADER]: String(ringVersion), 'content-type': 'application/json' },
      body: JSON.stringify({ ns, keys, ...(versions ? { versions } : {}) }),
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ removed: boolean[] }>(url, res)).removed;
  }

  // ------------------------------------------------------------------ ranges (migration)

  /**
   * Streams a range export: yields entry records, then returns the trailer. A stream that breaks before its
   * trailer throws NodeUnavailableError; the caller resumes from the last key it received.
   */
  async *exportRange(url: string, o: ExportOptions): AsyncGenerator<EntryRecord, ExportTrailer> {
    return yield* this.exportWith(url, o, readRecords) as AsyncGenerator<EntryRecord, ExportTrailer>;
  }

  /** As {@link exportRange}, with entry records left encoded (to forward them to an import as they are). */
  async *exportRangeRaw(url: string, o: ExportOptions): AsyncGenerator<RawEntryRecord, ExportTrailer> {
    return yield* this.exportWith(url, o, readRawRecords) as AsyncGenerator<RawEntryRecord, ExportTrailer>;
  }

  private async *exportWith(url: string, o: ExportOptions, read: typeof readRecords | typeof readRawRecords): AsyncGenerator<EntryRecord | RawEntryRecord, ExportTrailer> {
    const q = new URLSearchParams({ start: o.start, end: o.end ?? '' });
    if (o.after) q.set('after', o.after);
    if (o.limit) q.set('limit', String(o.limit));
    if (o.rate) q.set('rate', String(o.rate));
    const res = await this.request(url, { path: `/v1/range/export?${q}`, method: 'GET', bulk: true, ...(o.signal ? { signal: o.signal } : {}) });
    if (res.statusCode !== 200) return this.fail(url, res);
    let trailer: ExportTrailer | undefined;
    try {
      for await (const r of read(res.body)) {
        if (r.type === RECORD_ENTRY) yield r;
        else if (r.type === RECORD_TRAILER) trailer = r.data as unknown as ExportTrailer;
      }
    } catch (e) {
      throw new NodeUnavailableError(url, `export stream broke: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    } finally {
      if (!res.body.destroyed) res.body.destroy();
    }
    if (!trailer) throw new NodeUnavailableError(url, 'export stream ended without its trailer');
    return trailer;
  }

  /** Bulk, version-checked import of encoded entry records. */
  async importRecords(url: string, records: Buffer[] | AsyncIterable<Buffer>): Promise<ImportResult> {
    const body = Array.isArray(records) ? Buffer.concat(records) : records;
    const res = await this.request(url, { path: '/v1/range/import', method: 'POST', headers: { 'content-type': RECORDS_CONTENT_TYPE }, body, bulk: true });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json<ImportResult>(url, res);
  }

  async deleteRange(url: string, start: string, end: string | null, force = false): Promise<number> {
    const res = await this.request(url, { path: '/v1/range/delete', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ start, end, ...(force ? { force } : {}) }), bulk: true });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ deleted: number }>(url, res)).deleted;
  }

  async rangeStats(url: string, start: string, end: string | null, quantile = 0.5): Promise<{ keys: number; bytes: number; cut: string | null }> {
    const q = new URLSearchParams({ start, end: end ?? '', quantile: String(quantile) });
    const res = await this.request(url, { path: `/v1/range/stats?${q}`, method: 'GET', bulk: true });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json(url, res);
  }

  // ------------------------------------------------------------------ ring and node state

  /** Installs a ring document on the node (ignored there unless newer); resolves once the node's earlier writes are durable. */
  async pushRing(url: string, doc: RingDocument): Promise<{ installed: boolean; version: number }> {
    const res = await this.request(url, { path: '/v1/ring', method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(doc), bulk: true });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json(url, res);
  }

  /** The node's ring document, or null when it has none. */
  async getRing(url: string): Promise<RingDocument | null> {
    const res = await this.request(url, { path: '/v1/ring', method: 'GET' });
    if (res.statusCode === 404) {
      await res.body.dump();
      return null;
    }
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json<RingDocument>(url, res);
  }

  async ownership(url: string): Promise<{ nodeId: string; ringVersion: number; owned: { start: string; end: string | null; epoch: number; pendingTo?: string }[]; incoming: { start: string; end: string | null; from: string; session: string }[] }> {
    return this.getJson(url, '/v1/ownership');
  }

  async stats(url: string): Promise<Record<string, unknown> & { nodeId: string; keys: number; bytes: number; capacityBytes: number; fill: number; servedAsOwner: number; firstServedAt: number | null }> {
    return this.getJson(url, '/stats');
  }

  async victims(url: string, limit = 100): Promise<{ aboveWatermark: boolean; bytesOverWatermark: number; victims: { ns: string; key: string; version: number; bytes: number; position: string }[] }> {
    return this.getJson(url, `/v1/victims?limit=${limit}`);
  }

  async health(url: string): Promise<{ status: string; nodeId: string; ringVersion: number }> {
    return this.getJson(url, '/healthz');
  }

  private async getJson<T>(url: string, path: string): Promise<T> {
    const res = await this.request(url, { path, method: 'GET' });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json<T>(url, res);
  }

  /** Closes (and forgets) the pool of one node, e.g. after it left the ring. */
  async forget(url: string): Promise<void> {
    const p = this.pools.get(url);
    this.pools.delete(url);
    await p?.destroy().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.close().catch(() => p.destroy())));
  }
}

export function keyPath(ns: string, key: string): string {
  return `/v1/kv/${ns}/${encodeURIComponent(key)}`;
}

function entryHeaderOf(url: string, res: Response): EntryHeader {
  const raw = res.headers[ENTRY_HEADER];
  if (typeof raw !== 'string') throw new NodeUnavailableError(url, `answer lacks the ${ENTRY_HEADER} header`);
  try {
    return decodeEntryHeader(raw);
  } catch (e) {
    throw new NodeUnavailableError(url, `answer has a corrupt ${ENTRY_HEADER} header`, { cause: e });
  }
}
