import * as http from 'node:http';
import * as https from 'node:https';
import type { Socket } from 'node:net';
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
  /** Keep-alive connections per node (the agent's maxSockets: further requests wait for a free one). @default 16 */
  connectionsPerNode?: number;
  /**
   * HTTP/1.1 pipelining depth per connection. Accepted for compatibility only: node:http sends one request per
   * connection at a time (depth 1, the default), so any other value is ignored.
   * @default 1
   */
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
  /** Records without their values (headers only; `header.size` keeps the real size): for enumeration. */
  headersOnly?: boolean;
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

type Method = 'GET' | 'HEAD' | 'PUT' | 'POST' | 'DELETE';
/** A body: one buffer or string, parts sent back to back (one writev), or a stream. */
type RequestBody = Buffer | readonly Buffer[] | string | AsyncIterable<Buffer> | null;

function isParts(b: RequestBody): b is readonly Buffer[] {
  return Array.isArray(b);
}

interface RequestSpec {
  path: string;
  method: Method;
  headers?: Record<string, string>;
  body?: RequestBody;
  bulk?: boolean;
  signal?: AbortSignal;
}

/** One node's connections: a keep-alive agent, and the exchanges in flight on it (for close and forget). */
interface NodeTarget {
  readonly agent: http.Agent;
  readonly request: typeof http.request;
  readonly host: string;
  readonly port: number;
  /** host, then the secret: the first headers of every request. */
  readonly headers: readonly string[];
  readonly inflight: Set<Exchange>;
  /** Set by close(): called when the last exchange in flight ends. */
  drained?: () => void;
}

/** Idle keep-alive connections are closed after this long (the node keeps them 65 s and announces it). */
const KEEP_ALIVE_MS = 30_000;
/** An unwanted body (a miss's) larger than this is not read to its end: its connection is closed instead. */
const DISCARD_LIMIT = 64 * 1024;
/**
 * Bodies above this (one socket read) are assembled in one buffer of their announced length as they arrive, not
 * concatenated at the end (the parts die young); up to MAX_PREALLOCATED, whatever a corrupt header announces.
 */
const BIG_BODY = 64 * 1024;
const MAX_PREALLOCATED = 256 * 1024 * 1024;

/**
 * HTTP client of cache nodes: one keep-alive node:http Agent per node (at most `connectionsPerNode` sockets),
 * every call bounded by a timeout, the shared secret on every request. Used by WarmTier (key and batch calls,
 * with the caller's ring version) and by the migration steps (ranges, ring pushes).
 *
 * Node's own HTTP client, not undici: undici adds ~720 KiB to every Lambda bundle that reaches the warm tier.
 */
export class NodeClient {
  private readonly targets = new Map<string, NodeTarget>();
  private readonly timeoutMs: number;
  private readonly bulkTimeoutMs: number;
  private readonly connections: number;
  private readonly secret: string;
  private closed = false;

  constructor(opts: NodeClientOptions) {
    this.secret = opts.secret;
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.bulkTimeoutMs = opts.bulkTimeoutMs ?? 60_000;
    this.connections = opts.connectionsPerNode ?? 16;
  }

  private target(url: string): NodeTarget {
    let t = this.targets.get(url);
    if (!t) {
      if (this.closed) throw new NodeUnavailableError(url, 'client is closed');
      let u: URL;
      try {
        u = new URL(url);
      } catch (e) {
        throw new NodeUnavailableError(url, 'invalid node URL', { cause: e });
      }
      const secure = u.protocol === 'https:';
      if (!secure && u.protocol !== 'http:') throw new NodeUnavailableError(url, `unsupported protocol ${u.protocol}`);
      const agentOptions: http.AgentOptions = { keepAlive: true, maxSockets: this.connections, maxFreeSockets: this.connections, timeout: KEEP_ALIVE_MS, scheduling: 'lifo' };
      t = {
        agent: secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
        request: secure ? https.request : http.request,
        host: u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname,
        port: u.port ? Number(u.port) : secure ? 443 : 80,
        headers: ['host', u.host, SECRET_HEADER, this.secret],
        inflight: new Set(),
      };
      this.targets.set(url, t);
    }
    return t;
  }

  /**
   * Sends one request and resolves with its exchange once the response headers are in; the caller then reads or
   * discards the body (always). Network errors, timeouts and aborts become NodeUnavailableError.
   */
  private request(url: string, spec: RequestSpec): Promise<Exchange> {
    let t: NodeTarget;
    try {
      t = this.target(url);
    } catch (e) {
      return Promise.reject(e);
    }
    if (spec.signal?.aborted) return Promise.reject(new NodeUnavailableError(url, abortReason(spec.signal).message, { cause: spec.signal.reason }));
    try {
      return new Exchange(url, t, spec, spec.bulk ? this.bulkTimeoutMs : this.timeoutMs).head;
    } catch (e) {
      // node:http refused the request itself (e.g. a header value it cannot send).
      return Promise.reject(new NodeUnavailableError(url, e instanceof Error ? e.message : String(e), { cause: e }));
    }
  }

  /** Reads the whole body; a failure while reading is an outage. */
  private async bytes(url: string, x: Exchange): Promise<Buffer> {
    try {
      return await x.bytes();
    } catch (e) {
      throw new NodeUnavailableError(url, `reading the response failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  private async json<T>(url: string, x: Exchange): Promise<T> {
    const b = await this.bytes(url, x);
    try {
      return JSON.parse(b.toString('utf8')) as T;
    } catch (e) {
      throw new NodeUnavailableError(url, 'answered with a body that is not JSON', { cause: e });
    }
  }

  /** Turns a non-2xx answer into the right error (consuming its body). */
  private async fail(url: string, x: Exchange): Promise<never> {
    const status = x.statusCode;
    const body = await x.bytes().catch(() => Buffer.alloc(0));
    let parsed: { error?: { code?: string; message?: string }; ringVersion?: number; ring?: RingDocument | null } = {};
    try {
      parsed = JSON.parse(body.toString('utf8')) as typeof parsed;
    } catch {
      /* not JSON */
    }
    const code = parsed.error?.code ?? `HTTP_${status}`;
    const message = parsed.error?.message ?? `status ${status}`;
    if (status === 409 && (code === 'WRONG_NODE' || code === 'STALE_RING')) {
      throw new StaleRouteError(url, code, parsed.ringVersion ?? 0, parsed.ring ?? null, message);
    }
    if (status >= 500) throw new NodeUnavailableError(url, `${status} ${code}: ${message}`);
    throw new NodeRequestError(url, status, code, message, parsed);
  }

  // ------------------------------------------------------------------ keys

  async get(url: string, ns: string, key: string, ringVersion: number): Promise<Entry | undefined> {
    const res = await this.request(url, { path: keyPath(ns, key), method: 'GET', headers: { [RING_HEADER]: String(ringVersion) } });
    if (res.statusCode === 404) {
      await res.discard();
      return undefined;
    }
    if (res.statusCode !== 200) return this.fail(url, res);
    const value = await this.bytes(url, res);
    return { header: entryHeaderOf(url, res), value };
  }

  async head(url: string, ns: string, key: string, ringVersion: number): Promise<EntryHeader | undefined> {
    const res = await this.request(url, { path: keyPath(ns, key), method: 'HEAD', headers: { [RING_HEADER]: String(ringVersion) } });
    await res.discard();
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
    const body = items.flatMap((it) => encodeEntryRecordParts(ns, it.key, JSON.stringify(it.entry.header), it.entry.value));
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

  /** Sets or clears the pinned flag of each key at exactly its version (a write: owner or pending target). */
  async setPinned(url: string, ns: string, keys: string[], versions: number[], pinned: boolean, ringVersion: number): Promise<boolean[]> {
    const res = await this.request(url, { path: '/v1/batch/pin', method: 'POST', headers: { [RING_HEADER]: String(ringVersion), 'content-type': 'application/json' }, body: JSON.stringify({ ns, keys, versions, pinned }) });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ updated: boolean[] }>(url, res)).updated;
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
    if (o.headersOnly) q.set('values', '0');
    const res = await this.request(url, { path: `/v1/range/export?${q}`, method: 'GET', bulk: true, ...(o.signal ? { signal: o.signal } : {}) });
    if (res.statusCode !== 200) return this.fail(url, res);
    let trailer: ExportTrailer | undefined;
    try {
      for await (const r of read(res.stream())) {
        if (r.type === RECORD_ENTRY) yield r;
        else if (r.type === RECORD_TRAILER) trailer = r.data as unknown as ExportTrailer;
      }
    } catch (e) {
      throw new NodeUnavailableError(url, `export stream broke: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    } finally {
      res.destroy();
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
      await res.discard();
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

  /**
   * The node's next eviction victims: expired entries first, then its SIEVE order (pinned entries never). Each
   * call moves the node's SIEVE hand past the victims it names.
   */
  async victims(url: string, limit = 100): Promise<{ aboveWatermark: boolean; bytesOverWatermark: number; victims: { ns: string; key: string; version: number; bytes: number; position: string; expiresAt: number | null; expired?: true }[] }> {
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

  /** Closes (and forgets) the connections of one node, e.g. after it left the ring: requests in flight fail. */
  async forget(url: string): Promise<void> {
    const t = this.targets.get(url);
    if (!t) return;
    this.targets.delete(url);
    for (const x of [...t.inflight]) x.abort(new Error('the client forgot this node'));
    t.agent.destroy();
  }

  /** Takes no more requests, lets those in flight finish, then closes every connection. */
  async close(): Promise<void> {
    this.closed = true;
    const targets = [...this.targets.values()];
    this.targets.clear();
    await Promise.all(
      targets.map(async (t) => {
        if (t.inflight.size > 0) await new Promise<void>((resolve) => (t.drained = resolve));
        t.agent.destroy();
      }),
    );
  }
}

export function keyPath(ns: string, key: string): string {
  return `/v1/kv/${ns}/${encodeURIComponent(key)}`;
}

function entryHeaderOf(url: string, res: Exchange): EntryHeader {
  const raw = res.headers[ENTRY_HEADER];
  if (typeof raw !== 'string') throw new NodeUnavailableError(url, `answer lacks the ${ENTRY_HEADER} header`);
  try {
    return decodeEntryHeader(raw);
  } catch (e) {
    throw new NodeUnavailableError(url, `answer has a corrupt ${ENTRY_HEADER} header`, { cause: e });
  }
}

function noop(): void {}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error(signal.reason === undefined ? 'request aborted' : `request aborted: ${String(signal.reason)}`);
}

const kExchange = Symbol('strata.exchange');
type Req = http.ClientRequest & { [kExchange]?: Exchange };
type Res = http.IncomingMessage & { [kExchange]?: Exchange };

/** A body being read to its end. */
interface BodyRead {
  chunks: Buffer[];
  size: number;
  /** A body of announced length above one socket read: copied here as it arrives (chunks are not kept). */
  out: Buffer | undefined;
  resolve(b: Buffer): void;
  reject(e: unknown): void;
}

/**
 * One request and its response on a pooled connection. Bounded by an idle timeout of `timeoutMs` (the bound
 * undici applied: connecting, then waiting for the headers, then each gap in the body, each in turn), counted
 * from when a connection is assigned (a request waiting for a free connection is not timed, as with undici). A
 * body the caller has not read yet does not count as a stall: the node is not the slow side. The socket goes
 * back to the agent once the body has been read to its end; any failure, timeout or abort destroys it.
 *
 * Event handlers are shared functions that find their exchange on the request or response (no closures per
 * request on the hot path).
 */
class Exchange {
  readonly head: Promise<Exchange>;
  private readonly req: Req;
  private res: Res | undefined;
  private resolveHead!: (x: Exchange) => void;
  private rejectHead!: (e: unknown) => void;
  private timer: NodeJS.Timeout | undefined = undefined;
  /** When the exchange last made progress (Date.now()). */
  last = 0;
  private connected = false;
  private finished = false;
  /** The first error of the exchange (ours: timeout, abort; or the connection's). */
  private error: Error | undefined = undefined;
  private body: BodyRead | undefined = undefined;
  private readonly method: Method;
  private readonly signal: AbortSignal | undefined;
  private readonly onAbort: (() => void) | undefined;

  constructor(
    private readonly url: string,
    private readonly target: NodeTarget,
    spec: RequestSpec,
    private readonly timeoutMs: number,
  ) {
    this.head = new Promise<Exchange>((resolve, reject) => {
      this.resolveHead = resolve;
      this.rejectHead = reject;
    });
    this.method = spec.method;
    this.signal = spec.signal;
    const body = spec.body ?? null;
    // Headers as a flat list: node:http then renders them at once, with no per-header bookkeeping.
    const headers = [...target.headers];
    if (spec.headers) for (const k in spec.headers) headers.push(k, spec.headers[k]!);
    if (typeof body === 'string') headers.push('content-length', String(Buffer.byteLength(body)));
    else if (Buffer.isBuffer(body)) headers.push('content-length', String(body.length));
    else if (isParts(body)) headers.push('content-length', String(body.reduce((n, b) => n + b.length, 0)));
    const req: Req = target.request({ agent: target.agent, host: target.host, port: target.port, path: spec.path, method: spec.method, headers });
    this.req = req;
    req[kExchange] = this;
    target.inflight.add(this);
    req.on('socket', onReqSocket);
    req.on('response', onReqResponse);
    req.on('error', onReqError);
    req.on('close', onReqClose);
    if (this.signal) {
      const signal = this.signal;
      this.onAbort = () => this.abort(abortReason(signal));
      signal.addEventListener('abort', this.onAbort);
    }
    if (body === null) req.end();
    else if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else if (isParts(body)) {
      // Parts go out in one writev, so values are not first copied into one buffer.
      req.cork();
      for (const b of body) req.write(b);
      req.uncork();
      req.end();
    } else void this.pump(body);
  }

  get statusCode(): number {
    return this.res!.statusCode ?? 0;
  }

  get headers(): http.IncomingHttpHeaders {
    return this.res!.headers;
  }

  /** The whole body. */
  bytes(): Promise<Buffer> {
    const res = this.res!;
    if (res.errored || this.error) return Promise.reject(res.errored ?? this.error);
    if (res.destroyed || this.body) return Promise.reject(new Error('the response was already closed or read'));
    // A HEAD answer announces the length of a body it does not have.
    const length = this.method === 'HEAD' ? 0 : Number(res.headers['content-length']);
    return new Promise<Buffer>((resolve, reject) => {
      this.body = { chunks: [], size: 0, out: length > BIG_BODY && length <= MAX_PREALLOCATED ? Buffer.allocUnsafeSlow(length) : undefined, resolve, reject };
      res.on('data', onResData);
      res.on('end', onResEnd);
      res.on('error', onResError);
      res.on('close', onResClose);
    });
  }

  /** The body as it arrives (with backpressure); the caller destroys the exchange if it stops early. */
  async *stream(): AsyncGenerator<Buffer> {
    for await (const chunk of this.res!) {
      this.last = Date.now();
      yield chunk as Buffer;
    }
  }

  /**
   * Drops the body: reads a small one to its end, so that the connection is free again when this resolves (the
   * caller's next request reuses it); closes the connection instead when the body is large or of unknown size.
   */
  async discard(): Promise<void> {
    const res = this.res!;
    if (res.destroyed) return;
    const length = Number(res.headers['content-length'] ?? DISCARD_LIMIT + 1);
    if (this.method === 'HEAD' || res.complete || length <= DISCARD_LIMIT) await this.bytes().catch(noop);
    else this.abort(new Error('response discarded'));
  }

  /**
   * Ends the exchange now if it has not ended: a response received in full is drained (its connection is kept),
   * any other is aborted (its connection closed).
   */
  destroy(): void {
    if (this.finished) return;
    if (this.res?.complete && !this.res.destroyed) this.res.resume();
    else this.abort(new Error('response abandoned'));
  }

  /** Fails the exchange with `e`: the pending request rejects, a body being read fails; the socket is destroyed. */
  abort(e: Error): void {
    if (this.finished) return;
    this.error ??= e;
    if (this.res) this.res.destroy(e);
    else this.req.destroy(e);
  }

  /** @internal A connection was assigned (new or reused): the clock starts. */
  started(socket: Socket): void {
    this.last = Date.now();
    this.timer = setTimeout(onTimer, this.timeoutMs, this);
    if (socket.connecting) {
      socket.once('connect', () => {
        this.connected = true;
        this.last = Date.now();
      });
    } else this.connected = true;
  }

  /** @internal */
  responded(res: Res): void {
    this.res = res;
    this.last = Date.now();
    res[kExchange] = this;
    // Errors while the caller holds the response are its to see (bytes, stream); never unhandled.
    res.on('error', noop);
    this.resolveHead(this);
  }

  /** @internal */
  failed(e: Error): void {
    this.error ??= e;
    if (!this.res) this.rejectHead(new NodeUnavailableError(this.url, this.error.message, { cause: this.error }));
  }

  /** @internal The timer fired: fail if nothing moved for timeoutMs, else wait for the rest. */
  tick(): void {
    this.timer = undefined;
    if (this.finished || this.res?.complete) return;
    const idle = Date.now() - this.last;
    // Body data the caller has not read yet: the caller is the slow side, not the node.
    const waiting = this.res !== undefined && this.res.readableLength > 0;
    if (idle < this.timeoutMs || waiting) {
      this.timer = setTimeout(onTimer, waiting ? this.timeoutMs : this.timeoutMs - idle, this);
      return;
    }
    const phase = !this.connected ? 'connecting' : !this.res ? 'waiting for the response' : 'waiting for the rest of the response';
    this.abort(new Error(`timed out after ${this.timeoutMs} ms ${phase}`));
  }

  /** @internal The request is over (response read to its end, or connection closed): release everything. */
  closed(): void {
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort);
    if (!this.res) this.rejectHead(new NodeUnavailableError(this.url, this.error?.message ?? 'the connection closed before the response', this.error ? { cause: this.error } : undefined));
    const t = this.target;
    t.inflight.delete(this);
    if (t.inflight.size === 0) t.drained?.();
  }

  /** @internal */
  bodyData(c: Buffer): void {
    this.last = Date.now();
    const b = this.body!;
    if (!b.out) b.chunks.push(c);
    else if (b.size + c.length <= b.out.length) c.copy(b.out, b.size);
    else return this.abort(new Error('the body is longer than its content-length')); // node:http prevents it
    b.size += c.length;
  }

  /** @internal */
  bodyEnd(): void {
    const b = this.body!;
    if (b.out) b.resolve(b.size === b.out.length ? b.out : b.out.subarray(0, b.size));
    else b.resolve(b.chunks.length === 1 ? b.chunks[0]! : Buffer.concat(b.chunks, b.size));
  }

  /** @internal */
  bodyFailed(e: unknown): void {
    this.body!.reject(e);
  }

  /** @internal */
  bodyClosed(): void {
    if (!this.res!.complete) this.body!.reject(this.error ?? new Error('the connection closed before the response ended'));
  }

  /** Writes a streamed request body, with backpressure; a failing source fails the request. */
  private async pump(body: AsyncIterable<Buffer>): Promise<void> {
    const req = this.req;
    try {
      for await (const chunk of body) {
        if (req.destroyed) return;
        this.last = Date.now();
        if (!req.write(chunk)) await drainOrClose(req);
      }
      if (!req.destroyed) req.end();
    } catch (e) {
      this.abort(e instanceof Error ? e : new Error(String(e)));
    }
  }
}

function onReqSocket(this: Req, socket: Socket): void {
  this[kExchange]!.started(socket);
}
function onReqResponse(this: Req, res: Res): void {
  this[kExchange]!.responded(res);
}
function onReqError(this: Req, e: Error): void {
  this[kExchange]!.failed(e);
}
function onReqClose(this: Req): void {
  this[kExchange]!.closed();
}
function onTimer(x: Exchange): void {
  x.tick();
}
function onResData(this: Res, c: Buffer): void {
  this[kExchange]!.bodyData(c);
}
function onResEnd(this: Res): void {
  this[kExchange]!.bodyEnd();
}
function onResError(this: Res, e: Error): void {
  this[kExchange]!.bodyFailed(e);
}
function onResClose(this: Res): void {
  this[kExchange]!.bodyClosed();
}

function drainOrClose(req: http.ClientRequest): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      req.off('drain', done);
      req.off('close', done);
      resolve();
    };
    req.on('drain', done);
    req.on('close', done);
  });
}
