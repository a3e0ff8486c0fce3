// The RPC client of cache nodes (NodeClient): key, batch, range and ring operations over the HTTP exchange.
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../model/key-order.js';
import type { RingDocument } from '../ring/document.js';
import { NodeRequestError, NodeUnavailableError, ProtocolUnsupportedError, StaleRouteError } from './node-client-errors.js';
import { NodeConnections, type Exchange, type RequestSpec } from './node-exchange.js';
import {
  MIN_PEER_PROTOCOL,
  PRE_VERSIONING_PROTOCOL,
  PROTOCOL_FEATURES,
  PROTOCOL_HEADER,
  PROTOCOL_UNSUPPORTED,
  protocolOf,
  supports,
  type NodeErrorCode,
  type ProtocolFeature,
} from './protocol.js';
import {
  decodeEntryHeader,
  encodeEntryHeader,
  encodeEntryRecordParts,
  ENTRY_HEADER,
  ORDERED_KEYS_PATH,
  orderedKeysParams,
  readRawRecords,
  readRecords,
  RecordReader,
  RECORD_ACCESS,
  RECORD_ENTRY,
  RECORD_TRAILER,
  RECORDS_CONTENT_TYPE,
  RING_HEADER,
  type EntryAccess,
  type EntryRecord,
  type RawEntryRecord,
} from './wire.js';

export { NodeRequestError, NodeUnavailableError, ProtocolUnsupportedError, StaleRouteError } from './node-client-errors.js';

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
  /**
   * The oldest protocol version of a node this client talks to: an answer from an older node fails with
   * ProtocolUnsupportedError (core/nodes/protocol.ts). @default MIN_PEER_PROTOCOL
   */
  minPeerProtocol?: number;
}

/** What GET /healthz says, with the node's protocol version and build (filled in for nodes of before versioning). */
export interface NodeHealth {
  status: string;
  nodeId: string;
  ringVersion: number;
  /** The node's protocol version (1 for a node of before versioning, which does not say). */
  protocol: number;
  /** The oldest version the node accepts from callers. */
  minProtocol: number;
  /** The node's build label, `unknown` for a node of before versioning. */
  build: string;
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
  /**
   * Ask for each entry's access facts (`access=1`: {@link EntryRecord.access}). A node that predates them ignores
   * the flag, and its entries come without facts: unknown, never a guess.
   */
  access?: boolean;
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

/**
 * HTTP client of cache nodes: one keep-alive node:http Agent per node (at most `connectionsPerNode` sockets),
 * every call bounded by a timeout, the shared secret on every request. Used by WarmTier (key and batch calls,
 * with the caller's ring version) and by the migration steps (ranges, ring pushes).
 *
 * Node's own HTTP client, not undici: undici adds ~720 KiB to every Lambda bundle that reaches the warm tier.
 */
export class NodeClient {
  private readonly connections: NodeConnections;
  private readonly observers = new Set<(url: string, ok: boolean) => void>();

  constructor(opts: NodeClientOptions) {
    this.connections = new NodeConnections(
      opts.secret,
      opts.timeoutMs ?? 2000,
      opts.bulkTimeoutMs ?? 60_000,
      opts.connectionsPerNode ?? 16,
      opts.minPeerProtocol ?? MIN_PEER_PROTOCOL,
    );
  }

  /**
   * The protocol version `url` answered with last (1 for a node of before versioning), or undefined before its
   * first answer: a caller that needs to know asks {@link health} first.
   */
  protocolOf(url: string): number | undefined {
    return this.connections.protocolOf(url);
  }

  /** Whether the node at `url`, by its last answer, has `feature` (false before any answer: unknown is no). */
  supports(url: string, feature: ProtocolFeature): boolean {
    const v = this.protocolOf(url);
    return v !== undefined && supports(v, feature);
  }

  /**
   * Fails with ProtocolUnsupportedError unless the node at `url` has `feature`: for a feature a caller cannot do
   * without (one it can do without is skipped after {@link supports}). Asks the node's health when no answer came
   * from it yet.
   */
  async requireFeature(url: string, feature: ProtocolFeature): Promise<void> {
    const v = this.protocolOf(url) ?? (await this.health(url)).protocol;
    if (supports(v, feature)) return;
    throw new ProtocolUnsupportedError(
      url,
      `${feature} needs protocol version ${PROTOCOL_FEATURES[feature]}, and the cache node speaks version ${v}: ` +
        'upgrade the node first (cachenode/README.md "Protocol versions")',
      v,
    );
  }

  /**
   * Sends one request and resolves with its exchange once the response headers are in; the caller then reads or
   * discards the body (always). Network errors, timeouts and aborts become NodeUnavailableError.
   */
  private request(url: string, spec: RequestSpec): Promise<Exchange> {
    const sent = this.connections.request(url, spec);
    if (this.observers.size === 0) return sent;
    return sent.then(
      (x) => (this.tell(url, true), x),
      (e: unknown) => {
        if (e instanceof NodeUnavailableError && !spec.signal?.aborted) this.tell(url, false);
        throw e;
      },
    );
  }

  /**
   * Calls `observer` with each request's reach: whether the node answered at all (any status) or could not be
   * reached in time. The failure detector's suspicion comes from here (core/nodes/health-check.ts). Returns a
   * function that stops the observing.
   */
  observe(observer: (url: string, ok: boolean) => void): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  private tell(url: string, ok: boolean): void {
    for (const o of this.observers) o(url, ok);
  }

  /** Reads the whole body; a failure while reading is an outage. */
  private async bytes(url: string, x: Exchange): Promise<Buffer> {
    try {
      return await x.bytes();
    } catch (e) {
      throw new NodeUnavailableError(url, `reading the response failed: ${e instanceof Error ? e.message : String(e)}`, {
        cause: e,
      });
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
    if (status === 409 && STALE_ROUTE_CODES.includes(code)) {
      throw new StaleRouteError(url, code, parsed.ringVersion ?? 0, parsed.ring ?? null, message);
    }
    if (status >= 500) throw new NodeUnavailableError(url, `${status} ${code}: ${message}`);
    if (code === PROTOCOL_UNSUPPORTED) throw new ProtocolUnsupportedError(url, message, this.protocolOf(url), parsed);
    throw new NodeRequestError(url, status, code, message, parsed);
  }

  // ------------------------------------------------------------------ keys

  /** `peek`: a background read, not counted as a use of the entry (its eviction order and access facts stay). */
  async get(url: string, ns: string, key: string, ringVersion: number, peek = false): Promise<Entry | undefined> {
    const res = await this.request(url, {
      path: peek ? `${keyPath(ns, key)}?peek=1` : keyPath(ns, key),
      method: 'GET',
      headers: { [RING_HEADER]: String(ringVersion) },
    });
    if (res.statusCode === 404) {
      await res.discard();
      return undefined;
    }
    if (res.statusCode !== 200) return this.fail(url, res);
    const value = await this.bytes(url, res);
    return { header: entryHeaderOf(url, res), value };
  }

  async head(url: string, ns: string, key: string, ringVersion: number): Promise<EntryHeader | undefined> {
    const res = await this.request(url, {
      path: keyPath(ns, key),
      method: 'HEAD',
      headers: { [RING_HEADER]: String(ringVersion) },
    });
    await res.discard();
    if (res.statusCode === 404) return undefined;
    if (res.statusCode !== 200) {
      if (res.statusCode === 409) {
        throw new StaleRouteError(url, 'WRONG_NODE', Number(res.headers[RING_HEADER] ?? 0) || 0, null, 'range not served here');
      }
      if (res.statusCode >= 500) throw new NodeUnavailableError(url, `status ${res.statusCode}`);
      throw new NodeRequestError(url, res.statusCode, `HTTP_${res.statusCode}`, `status ${res.statusCode}`);
    }
    return entryHeaderOf(url, res);
  }

  /**
   * A versioned write. `ifAbsent`: an exclusive create, applied only while the node holds no live record of the key;
   * a node that does not echo the condition back (one from before it) would have ignored it, and is an error.
   */
  async put(url: string, ns: string, key: string, entry: Entry, ringVersion: number, ifAbsent = false): Promise<WriteOutcome> {
    const res = await this.request(url, {
      path: keyPath(ns, key) + (ifAbsent ? '?ifAbsent=1' : ''),
      method: 'PUT',
      headers: {
        [RING_HEADER]: String(ringVersion),
        [ENTRY_HEADER]: encodeEntryHeader(entry.header),
        'content-type': 'application/octet-stream',
      },
      body: entry.value,
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    if (!ifAbsent) return this.json<WriteOutcome>(url, res);
    const { ifAbsent: honoured, ...outcome } = await this.json<WriteOutcome & { ifAbsent?: true }>(url, res);
    if (honoured !== true) {
      throw new NodeRequestError(url, 501, 'IF_ABSENT_UNSUPPORTED', 'the cache node ignored an exclusive create: upgrade it');
    }
    return outcome;
  }

  async delete(url: string, ns: string, key: string, version: number | undefined, ringVersion: number): Promise<boolean> {
    const res = await this.request(url, {
      path: keyPath(ns, key) + (version === undefined ? '' : `?version=${version}`),
      method: 'DELETE',
      headers: { [RING_HEADER]: String(ringVersion) },
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ removed: boolean }>(url, res)).removed;
  }

  // ------------------------------------------------------------------ batches

  async getMany(url: string, ns: string, keys: string[], ringVersion: number): Promise<(Entry | undefined)[]> {
    const res = await this.request(url, {
      path: '/v1/batch/get',
      method: 'POST',
      headers: { [RING_HEADER]: String(ringVersion), 'content-type': 'application/json' },
      body: JSON.stringify({ ns, keys }),
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    const reader = new RecordReader();
    const records = reader.push(await this.bytes(url, res));
    if (records.length !== keys.length || reader.pending > 0) {
      throw new NodeUnavailableError(url, `batch get answered ${records.length} records for ${keys.length} keys`);
    }
    return records.map((r) => (r.type === RECORD_ENTRY ? r.entry : undefined));
  }

  async putMany(url: string, ns: string, items: { key: string; entry: Entry }[], ringVersion: number): Promise<WriteOutcome[]> {
    const body = items.flatMap((it) => encodeEntryRecordParts(ns, it.key, JSON.stringify(it.entry.header), it.entry.value));
    const res = await this.request(url, {
      path: '/v1/batch/put',
      method: 'POST',
      headers: { [RING_HEADER]: String(ringVersion), 'content-type': RECORDS_CONTENT_TYPE },
      body,
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ outcomes: WriteOutcome[] }>(url, res)).outcomes;
  }

  async deleteMany(
    url: string,
    ns: string,
    keys: string[],
    ringVersion: number,
    versions?: (number | null)[],
  ): Promise<boolean[]> {
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
  async setPinned(
    url: string,
    ns: string,
    keys: string[],
    versions: number[],
    pinned: boolean,
    ringVersion: number,
  ): Promise<boolean[]> {
    const res = await this.request(url, {
      path: '/v1/batch/pin',
      method: 'POST',
      headers: { [RING_HEADER]: String(ringVersion), 'content-type': 'application/json' },
      body: JSON.stringify({ ns, keys, versions, pinned }),
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ updated: boolean[] }>(url, res)).updated;
  }

  // ------------------------------------------------------------------ key order

  /**
   * A page of the keys the node holds in `ns`, in key order (model/key-order.ts), whatever range it owns; the node
   * answers at most `ORDERED_KEYS_MAX_LIMIT` (wire.ts) keys whatever `q.limit` asks. A node whose ring is newer than
   * `ringVersion` refuses with StaleRouteError (STALE_RING, with its ring); a node built before the route fails with
   * ProtocolUnsupportedError (a listing cannot do without any node).
   */
  async listOrdered(url: string, ns: string, q: OrderedKeysQuery, ringVersion: number): Promise<OrderedKeysPage> {
    const res = await this.request(url, {
      path: `${ORDERED_KEYS_PATH}?${orderedKeysParams(ns, q)}`,
      method: 'GET',
      headers: { [RING_HEADER]: String(ringVersion) },
    });
    if (res.statusCode !== 200) {
      try {
        return await this.fail(url, res);
      } catch (e) {
        // No such route: a node built before it. Not an outage, and no retry helps; the message says what to do.
        if (!(e instanceof NodeRequestError) || e.code !== 'ROUTE_NOT_FOUND') throw e;
        const why = `the cache node has no ${ORDERED_KEYS_PATH} (a build from before ordered key listings): upgrade it`;
        throw new ProtocolUnsupportedError(url, why, this.protocolOf(url));
      }
    }
    const page = await this.json<OrderedKeysPage>(url, res);
    if (!Array.isArray(page.keys) || typeof page.more !== 'boolean' || (page.more && page.keys.length === 0)) {
      throw new NodeUnavailableError(url, 'answered a key listing that is not an ordered page');
    }
    return page;
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

  private async *exportWith(
    url: string,
    o: ExportOptions,
    read: typeof readRecords | typeof readRawRecords,
  ): AsyncGenerator<EntryRecord | RawEntryRecord, ExportTrailer> {
    const q = new URLSearchParams({ start: o.start, end: o.end ?? '' });
    if (o.after) q.set('after', o.after);
    if (o.limit) q.set('limit', String(o.limit));
    if (o.rate) q.set('rate', String(o.rate));
    if (o.headersOnly) q.set('values', '0');
    if (o.access) q.set('access', '1');
    const res = await this.request(url, {
      path: `/v1/range/export?${q}`,
      method: 'GET',
      bulk: true,
      ...(o.signal ? { signal: o.signal } : {}),
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    let trailer: ExportTrailer | undefined;
    // An access record describes the entry record right after it.
    let access: EntryAccess | undefined;
    try {
      for await (const r of read(res.stream())) {
        if (r.type === RECORD_ENTRY) {
          yield access && 'entry' in r ? { ...r, access } : r;
          access = undefined;
        } else if (r.type === RECORD_ACCESS) access = r.access;
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
    const res = await this.request(url, {
      path: '/v1/range/import',
      method: 'POST',
      headers: { 'content-type': RECORDS_CONTENT_TYPE },
      body,
      bulk: true,
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json<ImportResult>(url, res);
  }

  async deleteRange(url: string, start: string, end: string | null, force = false): Promise<number> {
    const res = await this.request(url, {
      path: '/v1/range/delete',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ start, end, ...(force ? { force } : {}) }),
      bulk: true,
    });
    if (res.statusCode !== 200) return this.fail(url, res);
    return (await this.json<{ deleted: number }>(url, res)).deleted;
  }

  async rangeStats(
    url: string,
    start: string,
    end: string | null,
    quantile = 0.5,
  ): Promise<{ keys: number; bytes: number; cut: string | null }> {
    const q = new URLSearchParams({ start, end: end ?? '', quantile: String(quantile) });
    const res = await this.request(url, { path: `/v1/range/stats?${q}`, method: 'GET', bulk: true });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json(url, res);
  }

  // ------------------------------------------------------------------ ring and node state

  /** Installs a ring document on the node (ignored there unless newer); resolves once the node's earlier writes are durable. */
  async pushRing(url: string, doc: RingDocument): Promise<{ installed: boolean; version: number }> {
    const res = await this.request(url, {
      path: '/v1/ring',
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(doc),
      bulk: true,
    });
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

  async ownership(url: string): Promise<{
    nodeId: string;
    ringVersion: number;
    owned: { start: string; end: string | null; epoch: number; pendingTo?: string }[];
    incoming: { start: string; end: string | null; from: string; session: string }[];
  }> {
    return this.getJson(url, '/v1/ownership');
  }

  async stats(url: string): Promise<
    Record<string, unknown> & {
      nodeId: string;
      keys: number;
      bytes: number;
      capacityBytes: number;
      fill: number;
      servedAsOwner: number;
      firstServedAt: number | null;
    }
  > {
    return this.getJson(url, '/stats');
  }

  /**
   * The node's next eviction victims: expired entries first, then its SIEVE order (pinned entries never). Each
   * call moves the node's SIEVE hand past the victims it names.
   */
  async victims(
    url: string,
    limit = 100,
  ): Promise<{
    aboveWatermark: boolean;
    bytesOverWatermark: number;
    victims: {
      ns: string;
      key: string;
      version: number;
      bytes: number;
      position: string;
      expiresAt: number | null;
      expired?: true;
    }[];
  }> {
    return this.getJson(url, `/v1/victims?limit=${limit}`);
  }

  /**
   * GET /healthz. `signal` ends the call early (a health probe's own, shorter bound): it fails as an outage. A node
   * of before versioning names no protocol or build: it reads as version 1, build `unknown` (degraded, not refused).
   */
  async health(url: string, signal?: AbortSignal): Promise<NodeHealth> {
    const res = await this.request(url, { path: '/healthz', method: 'GET', ...(signal ? { signal } : {}) });
    if (res.statusCode !== 200) return this.fail(url, res);
    const h = await this.json<Partial<NodeHealth> & Pick<NodeHealth, 'status' | 'nodeId' | 'ringVersion'>>(url, res);
    const protocol = h.protocol ?? protocolOf(res.headers[PROTOCOL_HEADER]) ?? PRE_VERSIONING_PROTOCOL;
    return { ...h, protocol, minProtocol: h.minProtocol ?? PRE_VERSIONING_PROTOCOL, build: h.build ?? 'unknown' };
  }

  private async getJson<T>(url: string, path: string, signal?: AbortSignal): Promise<T> {
    const res = await this.request(url, { path, method: 'GET', ...(signal ? { signal } : {}) });
    if (res.statusCode !== 200) return this.fail(url, res);
    return this.json<T>(url, res);
  }

  /** Closes (and forgets) the connections of one node, e.g. after it left the ring: requests in flight fail. */
  async forget(url: string): Promise<void> {
    this.connections.forget(url);
  }

  /** Takes no more requests, lets those in flight finish, then closes every connection. */
  async close(): Promise<void> {
    await this.connections.close();
  }
}

/** The refusals a caller answers by refreshing its ring (StaleRouteError). */
const STALE_ROUTE_CODES: readonly string[] = ['WRONG_NODE', 'STALE_RING'] satisfies NodeErrorCode[];

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
