import { errorFromResponse, PayloadTooLargeError, VersionConflictError } from './errors.js';
import {
  checkKey,
  checkNamespace,
  checkTags,
  chunk,
  encodeKey,
  encodeValue,
  fromBase64,
  makeItem,
  mapLimit,
  parseDate,
  toBase64,
  type EncodedValue,
} from './encoding.js';
import { discard, missingOrThrow, requestIdOf, Transport, type HttpRequest, type RetryMode } from './transport.js';
import type {
  CacheItem,
  CacheValue,
  DeleteManyResult,
  DeleteOptions,
  DeleteResult,
  FetchLike,
  GetOptions,
  HealthResponse,
  NotModified,
  PutManyItem,
  PutManyOptions,
  PutManyResult,
  PutOptions,
  PutResult,
  RequestOptions,
  StatsResponse,
  StrataClientOptions,
  TouchOptions,
} from './types.js';
import { CostClient } from './cost.js';
import { PoliciesClient } from './policies.js';
import { NodesClient } from './nodes.js';
import { checkPrefix, invalidationTags, NamespacesClient, parseInvalidation, type InvalidationResult } from './invalidation.js';
import { iterateKeys, listQuery, parseKeyPage, type KeyPage, type ListedKey, type ListKeysOptions } from './listing.js';
import { uploadValue } from './uploads.js';
import { socketFetch } from './socket-http.js';
import { SDK_VERSION } from './version.js';
import { WorkflowsClient } from './workflows.js';
import {
  asNumber,
  batchItems,
  itemFromHeaders,
  locationHeaders,
  notModifiedFrom,
  parseVersion,
  putResult,
  readJson,
  stringArray,
} from './answers.js';
import { invalid, isObject, optionError, type Json } from './json.js';
import {
  getStream,
  putStream,
  type GetStreamOptions,
  type PutStreamOptions,
  type StreamDeps,
  type StreamSource,
  type ValueStream,
} from './streams.js';

/**
 * Keys that cannot travel in a URL path: the WHATWG URL parser behind `fetch` removes `.`/`..` segments even when
 * percent-encoded (`%2E%2E`), so `/keys/%2E%2E` would reach `/v1/ns/{ns}/`. The client sends these two keys through
 * the batch endpoints, where keys travel in the JSON body.
 */
const DOT_KEYS: ReadonlySet<string> = new Set(['.', '..']);

/** A presigned download answered 412: the key was replaced between the redirect and the download. */
const REPLACED = Symbol('replaced');
/** How often `get` asks again when the value keeps being replaced under its download. */
const MAX_REPLACED_RETRIES = 3;
/** Items per batch request (the API's limit). */
export const BATCH_SIZE = 100;
/** Batch requests of one `getMany`/`putMany`/`deleteMany` in flight at once. */
const BATCH_CONCURRENCY = 4;

const DEFAULTS = {
  namespace: 'default',
  timeoutMs: 5_000,
  transferTimeoutMs: 120_000,
  retries: 3,
  retryBaseDelayMs: 50,
  retryMaxDelayMs: 2_000,
  maxRetryAfterMs: 5_000,
  inlineLimitBytes: 4 * 1024 * 1024,
} as const;

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw optionError(name, 'must be a finite number >= 0');
  return value;
}

function positive(name: string, value: number | undefined, fallback: number): number {
  const v = nonNegative(name, value, fallback);
  if (v === 0) throw optionError(name, 'must be > 0');
  return v;
}

/**
 * Client for the Strata HTTP API (v1).
 *
 * - Every call takes an optional `ns` overriding the client's `namespace`, an `AbortSignal` and a `timeoutMs`.
 * - Each attempt has its own timeout; failed attempts are retried with full-jitter exponential backoff on 429, 5xx,
 *   timeouts and network errors, never on other 4xx. `retry-after` (429/503) is honoured up to `maxRetryAfterMs`.
 * - Conditional writes (`ifMatch` / `ifNoneMatch`) are retried only when the server certainly did not process the
 *   request (429, connection not established); see the README.
 *
 * @example
 * ```ts
 * import { StrataClient } from '@strata-cache/sdk';
 *
 * const strata = new StrataClient({ endpoint: 'http://localhost:8080', apiKey: process.env.STRATA_API_KEY, namespace: 'app' });
 * await strata.put('user:42', { name: 'Ada' }, { ttl: 300, tags: ['users'] });
 * const item = await strata.get('user:42');
 * console.log(item?.json<{ name: string }>().name); // "Ada"
 * ```
 */
export class StrataClient {
  /** The endpoint without a trailing slash. */
  readonly endpoint: string;
  /** The default namespace. */
  readonly namespace: string;
  private readonly transport: Transport;
  private readonly timeoutMs: number;
  private readonly transferTimeoutMs: number;
  private readonly downloadFetch: FetchLike | undefined;
  private inlineLimitBytes: number;
  private readonly inflight = new Map<string, Promise<CacheItem>>();
  /** Fresh uploads tried after an ambiguous failure of one (`retries`). */
  private readonly uploadRetries: number;
  /**
   * The admin API's workflows: start scale-out / scale-in / evict-to-s3 / tier-migrate / replace-node executions, follow their
   * progress, list recent ones. Needs an admin API key in AWS.
   *
   * @example
   * ```ts
   * const { execution } = await strata.workflows.start('scale-out', { mode: 'parallel' });
   * const done = await strata.workflows.wait(execution, { onProgress: (d) => console.log(d.progress?.phase) });
   * ```
   */
  readonly workflows: WorkflowsClient;
  /**
   * The deployment's cost model: cache placements ranked for a workload by monthly cost and C/S, the Tables III and
   * IV of Chiu & Agrawal (2010) recomputed, and the price catalogs. What the `strata cost` command prints.
   *
   * @example
   * ```ts
   * const { recommendations, text } = await strata.cost.placements({ valueSize: '1MB', keys: 500, requestsPerMonth: 2000, persistent: true });
   * console.log(recommendations[0]?.placement.id); // s3:STANDARD
   * ```
   */
  readonly cost: CostClient;
  /**
   * The admin API's policy: read the policy in force, check a candidate document, replace it by compare-and-set
   * (`ifVersion`), read who changed it when, and roll back. Needs an admin API key in AWS.
   *
   * @example
   * ```ts
   * const { version, document } = await strata.policies.get();
   * await strata.policies.put({ ...document, description: 'freeze' }, { ifVersion: version, reason: 'release freeze' });
   * ```
   */
  readonly policies: PoliciesClient;
  /**
   * The admin API's cache nodes (the warm tier): list them as the ring has them, replace or remove a DOWN one, and
   * pause or resume automatic replacement (`nodes.replacement`). Needs an admin API key in AWS.
   *
   * @example
   * ```ts
   * const { nodes } = await strata.nodes.list();
   * const run = await strata.nodes.replace('n3', { fillNamespaces: ['sessions'] });
   * await strata.nodes.replacement.pause('network incident');
   * ```
   */
  readonly nodes: NodesClient;
  /**
   * The admin API's namespace routes: flush any tenant's namespace, and the audit log of invalidations and flushes.
   * Needs an admin API key in AWS.
   */
  readonly namespaces: NamespacesClient;

  /**
   * @throws {ValidationError} when an option is invalid (`status` 0).
   * @example
   * ```ts
   * const strata = new StrataClient({ endpoint: 'https://abc.execute-api.eu-west-1.amazonaws.com/prod', apiKey: 'k', namespace: 'app', timeoutMs: 2000 });
   * ```
   */
  constructor(options: StrataClientOptions) {
    if (!options || typeof options.endpoint !== 'string') throw optionError('endpoint', 'is required');
    let url: URL;
    try {
      url = new URL(options.endpoint);
    } catch {
      throw optionError('endpoint', `is not a URL: ${options.endpoint}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw optionError('endpoint', 'must be an http(s) URL');
    this.endpoint = options.endpoint.replace(/\/+$/, '');
    this.namespace = checkNamespace(options.namespace ?? DEFAULTS.namespace);
    this.timeoutMs = positive('timeoutMs', options.timeoutMs, DEFAULTS.timeoutMs);
    this.transferTimeoutMs = positive('transferTimeoutMs', options.transferTimeoutMs, DEFAULTS.transferTimeoutMs);
    this.inlineLimitBytes = nonNegative('inlineLimitBytes', options.inlineLimitBytes, DEFAULTS.inlineLimitBytes);
    const fetchImpl = options.fetch ?? globalThis.fetch;
    // A fetch of the caller's own is used for everything; else, on Node, presigned downloads go over a socket read
    // into one reused buffer (see socket-http.ts: fetch's per-read chunks cost the client tens of MiB of RSS).
    this.downloadFetch = options.fetch === undefined ? socketFetch() : undefined;
    if (typeof fetchImpl !== 'function') throw optionError('fetch', 'no global fetch: pass options.fetch');
    const runtime = typeof process !== 'undefined' && process.version ? ` node/${process.version}` : '';
    this.uploadRetries = Math.floor(nonNegative('retries', options.retries, DEFAULTS.retries));
    this.transport = new Transport({
      fetch: fetchImpl,
      apiKey: options.apiKey,
      userAgent: options.userAgent ?? `strata-sdk-js/${SDK_VERSION}${runtime}`,
      retries: Math.floor(nonNegative('retries', options.retries, DEFAULTS.retries)),
      retryBaseDelayMs: nonNegative('retryBaseDelayMs', options.retryBaseDelayMs, DEFAULTS.retryBaseDelayMs),
      retryMaxDelayMs: nonNegative('retryMaxDelayMs', options.retryMaxDelayMs, DEFAULTS.retryMaxDelayMs),
      maxRetryAfterMs: nonNegative('maxRetryAfterMs', options.maxRetryAfterMs, DEFAULTS.maxRetryAfterMs),
      onRetry: options.onRetry,
    });
    const sub = { endpoint: this.endpoint, transport: this.transport, timeoutMs: this.timeoutMs };
    this.workflows = new WorkflowsClient(sub);
    this.cost = new CostClient(sub);
    this.policies = new PoliciesClient(sub);
    this.nodes = new NodesClient(sub);
    this.namespaces = new NamespacesClient(sub);
  }

  /**
   * Reads a key. Resolves `undefined` when it does not exist (404 `NOT_FOUND`, also after expiry or delete).
   * Large values (303 to a presigned URL) are downloaded transparently, without the API key.
   *
   * @example
   * ```ts
   * const item = await strata.get('user:42');
   * if (item) console.log(item.version, item.tier, item.expiresAt, item.json());
   * const other = await strata.get('feature-flags', { ns: 'config' });
   * // Revalidate a copy held by the caller: the value is transferred only when it changed.
   * const fresh = await strata.get('user:42', { ifNoneMatch: item.version });
   * if (fresh && 'notModified' in fresh) console.log('still', fresh.version);
   * ```
   */
  get(key: string, opts?: RequestOptions & { ifNoneMatch?: undefined }): Promise<CacheItem | undefined>;
  get(key: string, opts: GetOptions): Promise<CacheItem | NotModified | undefined>;
  async get(key: string, opts: GetOptions = {}): Promise<CacheItem | NotModified | undefined> {
    const { ifNoneMatch } = opts;
    if (ifNoneMatch !== undefined && !(Number.isSafeInteger(ifNoneMatch) && ifNoneMatch >= 0))
      throw optionError('ifNoneMatch', `must be a version (a whole number >= 0), got ${String(ifNoneMatch)}`);
    if (DOT_KEYS.has(key)) {
      if (ifNoneMatch !== undefined)
        throw optionError('if-none-match', `conditional reads are not supported for the key "${key}"`);
      return (await this.getMany([key], opts)).get(key);
    }
    const url = this.keyUrl(this.ns(opts), key);
    const headers: Record<string, string> = ifNoneMatch === undefined ? {} : { 'if-none-match': `"${ifNoneMatch}"` };
    for (let attempt = 0; ; attempt++) {
      const first = await this.transport.send(this.req('GET', url, opts, { headers, accept: [303, 304, 404] }), async (res) => {
        if (res.status === 404) return missingOrThrow(res, `GET ${url}`);
        if (res.status === 304) {
          await discard(res);
          return notModifiedFrom(key, res);
        }
        if (res.status === 303) {
          const location = res.headers.get('location');
          await discard(res);
          if (!location) throw invalid(303, 'redirect without a location header', requestIdOf(res));
          return { location: new URL(location, url).toString(), meta: res.headers };
        }
        return itemFromHeaders(key, new Uint8Array(await res.arrayBuffer()), res.headers);
      });
      if (first === undefined || 'notModified' in first || !('location' in first)) return first;
      const { location, meta } = first;
      const got = await this.transport.send(
        // The location serves the version the redirect describes, given the headers it names (S3: a signed If-Match).
        {
          method: 'GET',
          url: location,
          headers: locationHeaders(meta),
          auth: false,
          retryMode: 'idempotent',
          signal: opts.signal,
          timeoutMs: this.transferTimeoutMs,
          accept: [404, 412],
        },
        async (res) => {
          if (res.status === 404 || res.status === 412) {
            // 404: deleted or expired since the redirect, a miss. 412: replaced since the redirect: ask again.
            await discard(res);
            return res.status === 404 ? undefined : REPLACED;
          }
          return itemFromHeaders(key, new Uint8Array(await res.arrayBuffer()), meta, res.headers);
        },
      );
      if (got !== REPLACED) return got;
      if (attempt >= MAX_REPLACED_RETRIES) {
        const message = `'${key}' kept being replaced between the redirect and its download; read it again`;
        throw new VersionConflictError({ code: 'VERSION_CONFLICT', status: 412, message });
      }
    }
  }

  /**
   * Reads a key as a stream: the bytes arrive as `body` (a web `ReadableStream`; `Readable.fromWeb(body)` for a Node
   * stream) without being held in memory, also through the 303 to a presigned download. `range` asks for bytes
   * `start..end` (206; `item.range` says what came). Resolves `undefined` when the key does not exist.
   *
   * On Node the presigned download is read over a socket of its own into one reused buffer, paused while no read
   * waits. A BYOB reader (`body.getReader({ mode: 'byob' })`, one buffer handed back each read) gets the bytes copied
   * into its view, nothing allocated per chunk; a default reader (`for await`, `Readable.fromWeb`) gets a new chunk
   * of at most 8 KiB a read. A 1 GiB round trip peaked at ~113 MiB RSS either way (sdk/README.md, "Notes").
   *
   * @throws {RangeNotSatisfiableError} when `range.start` is at or past the end of the value (`err.size`).
   * @example
   * ```ts
   * const item = await strata.getStream('backup.tar');
   * if (item) await pipeline(Readable.fromWeb(item.body), createWriteStream('backup.tar'));
   * const head = await strata.getStream('backup.tar', { range: { start: 0, end: 511 } });
   * ```
   */
  getStream(key: string, opts?: GetStreamOptions): Promise<ValueStream | undefined> {
    return getStream(this.streams(), key, opts);
  }

  /**
   * Writes a key from a stream (web `ReadableStream`, Node `Readable`, or any async iterable of bytes) of any length,
   * in parts of `partSize` bytes (default 8 MiB) through a multipart upload, `concurrency` parts at once (default 3):
   * memory stays near `(concurrency + 1) * partSize`. A stream that fits in one part and the inline limit is sent
   * with one PUT. Resolves what `put` resolves; a failed upload is aborted.
   *
   * @example
   * ```ts
   * await strata.putStream('backup.tar', createReadStream('backup.tar'), { contentType: 'application/x-tar', ttl: 86400 });
   * ```
   */
  putStream(key: string, body: StreamSource, opts?: PutStreamOptions): Promise<PutResult> {
    return putStream(this.streams(), key, body, opts);
  }

  /**
   * Whether a key exists (`HEAD`), without transferring the value.
   *
   * @example
   * ```ts
   * if (!(await strata.has('report:2024'))) await strata.put('report:2024', buildReport());
   * ```
   */
  async has(key: string, opts: RequestOptions = {}): Promise<boolean> {
    if (DOT_KEYS.has(key)) return (await this.getMany([key], opts)).has(key);
    const url = this.keyUrl(this.ns(opts), key);
    return this.transport.send(this.req('HEAD', url, opts, { accept: [404] }), async (res) => {
      await discard(res);
      return res.status !== 404;
    });
  }

  /**
   * Writes a key. Bytes are stored as-is, strings as UTF-8 text, anything else as JSON (the content type follows
   * unless `contentType` is given). Values above `inlineLimitBytes` (or rejected with 413) are sent through the
   * upload-URL flow automatically.
   *
   * @throws {VersionConflictError} when `ifMatch` / `ifNoneMatch` fails (`err.current` is the stored version).
   * @example
   * ```ts
   * const { version } = await strata.put('user:42', { name: 'Ada' }, { ttl: 300, tags: ['users', 'tenant:7'] });
   * await strata.put('user:42', { name: 'Ada L.' }, { ifMatch: version }); // optimistic concurrency
   * await strata.put('lock:job', 'owner-1', { ifNoneMatch: '*', ttl: 30 }); // create only
   * await strata.put('blob', new Uint8Array([1, 2, 3]), { contentType: 'application/x-thing' });
   * ```
   */
  async put(key: string, value: CacheValue, opts: PutOptions = {}): Promise<PutResult> {
    const ns = this.ns(opts);
    checkKey(key);
    checkTags(opts.tags);
    return this.putEncoded(ns, key, encodeValue(value, opts.contentType), opts);
  }

  /**
   * Deletes a key; resolves the tombstone's version. Deleting is idempotent: a key that does not exist (or expired)
   * gets a tombstone and a version too, no error.
   *
   * @throws {VersionConflictError} when `ifMatch` does not match the stored version (a missing key included).
   * @example
   * ```ts
   * const { version } = await strata.delete('user:42');
   * await strata.delete('user:43', { ifMatch: 17 });
   * ```
   */
  async delete(key: string, opts: DeleteOptions = {}): Promise<DeleteResult> {
    if (DOT_KEYS.has(key)) {
      if (opts.ifMatch !== undefined) throw optionError('if-match', `conditional deletes are not supported for the key "${key}"`);
      const [res] = await this.deleteMany([key], opts);
      return { version: res!.version };
    }
    const url = this.keyUrl(this.ns(opts), key);
    const headers: Record<string, string> = {};
    if (opts.ifMatch !== undefined) headers['if-match'] = String(opts.ifMatch);
    const mode: RetryMode = opts.ifMatch !== undefined ? 'conditional' : 'idempotent';
    return this.transport.send(this.req('DELETE', url, opts, { headers, retryMode: mode }), async (res) => {
      let version = parseVersion(res.headers.get('x-strata-version'));
      if (version === undefined && res.status !== 204) version = asNumber((await readJson(res)).version);
      else await discard(res);
      if (version === undefined) throw invalid(res.status, 'delete response without x-strata-version', requestIdOf(res));
      return { version };
    });
  }

  /**
   * Gives a key a new time to live without sending its value again (`PATCH`): `ttl` in whole seconds, or `null` for
   * none. A write of metadata: the value, tags and content type stay, and the entry gets a new version (a write that
   * lands meanwhile is never undone: the touch applies to it). Values above the server's inline limit are refused
   * (`PayloadTooLargeError`): `put` them again with the new `ttl`.
   *
   * @throws {NotFoundError} when the key does not exist; {@link VersionConflictError} when `ifMatch` does not match.
   * @example
   * ```ts
   * await strata.touch('session:9', { ttl: 1800 }); // extend a session by half an hour from now
   * await strata.touch('report:q3', { ttl: null }); // keep it until it is deleted
   * ```
   */
  async touch(key: string, opts: TouchOptions): Promise<PutResult> {
    checkKey(key);
    const ttl = opts?.ttl;
    if (ttl !== null && !(Number.isInteger(ttl) && ttl >= 1 && ttl <= 31_536_000))
      throw optionError('ttl', `must be a whole number of seconds from 1 to 31536000, or null for none; got ${String(ttl)}`);
    if (DOT_KEYS.has(key)) throw optionError('key', `touch is not supported for the key "${key}"`);
    const ns = this.ns(opts);
    const headers: Record<string, string> = {};
    if (opts.ifMatch !== undefined) headers['if-match'] = String(opts.ifMatch);
    const mode: RetryMode = opts.ifMatch !== undefined ? 'conditional' : 'idempotent';
    const req = this.req('PATCH', this.keyUrl(ns, key), opts, { headers, retryMode: mode });
    return this.sendJson(req, { ttl }, (body, status) => putResult(body, ns, key, status));
  }

  /**
   * Invalidates every entry carrying any of `tags` (`POST /v1/ns/{ns}/invalidate`): once it resolves, no reader
   * anywhere gets one of them, however many there are (about a second, whatever the count); writes after it are
   * visible as usual. At most 64 tags per call; `RateLimitedError` above 10 calls per second per namespace.
   *
   * @example
   * ```ts
   * await strata.put('product:42', json, { tags: ['product:42', 'catalog'] });
   * await strata.invalidateTags(['catalog']); // every page built from the catalog is gone
   * ```
   */
  async invalidateTags(tags: readonly string[], opts: RequestOptions = {}): Promise<InvalidationResult> {
    return this.invalidateScope({ tags: invalidationTags(tags) }, opts);
  }

  /** Invalidates every key of the namespace that starts with `prefix`, as {@link invalidateTags} does. */
  async invalidatePrefix(prefix: string, opts: RequestOptions = {}): Promise<InvalidationResult> {
    return this.invalidateScope({ prefix: checkPrefix(prefix) }, opts);
  }

  /**
   * Flushes the namespace (`DELETE /v1/ns/{ns}`): every key written before the call is gone for every reader once it
   * resolves. `confirm` must repeat the namespace's name.
   */
  async flush(opts: RequestOptions & { confirm: string }): Promise<InvalidationResult> {
    const ns = this.ns(opts);
    const url = `${this.endpoint}/v1/ns/${ns}?${new URLSearchParams({ confirm: opts.confirm })}`;
    return this.transport.send(this.req('DELETE', url, opts), async (res) => parseInvalidation(await readJson(res), res.status));
  }

  private invalidateScope(scope: { tags: string[] } | { prefix: string }, opts: RequestOptions): Promise<InvalidationResult> {
    const ns = this.ns(opts);
    return this.sendJson(this.req('POST', `${this.endpoint}/v1/ns/${ns}/invalidate`, opts), scope, (body, status) =>
      parseInvalidation(body, status),
    );
  }

  /**
   * Every key of the namespace in key order (UTF-8 bytes), within bounds, fetched a page at a time as the loop goes
   * (`GET /v1/ns/{ns}/keys`). Never a deleted, expired or invalidated key; a key that stays written for the whole
   * loop comes exactly once, keys written or deleted meanwhile may or may not. With `metadata: true` each item is a
   * {@link ListedKey} with its version, size, expiry, tags and tiers; otherwise the key itself.
   *
   * @example
   * ```ts
   * for await (const key of strata.keys({ prefix: 'user:' })) console.log(key);
   * for await (const k of strata.keys({ start: 'a', end: 'b', metadata: true })) console.log(k.key, k.size);
   * ```
   */
  keys(opts?: ListKeysOptions & { metadata?: false | undefined }): AsyncIterable<string>;
  keys(opts: ListKeysOptions & { metadata: true }): AsyncIterable<ListedKey>;
  keys(opts: ListKeysOptions = {}): AsyncIterable<string | ListedKey> {
    listQuery(opts, null); // options are checked before the first iteration, not at the first page
    const all = iterateKeys((cursor) => this.listKeys({ ...opts, cursor }));
    if (opts.metadata) return all;
    return (async function* () {
      for await (const k of all) yield k.key;
    })();
  }

  /** One page of {@link keys}: pass its `cursor` back (with the same prefix and bounds) for the next one. */
  async listKeys(opts: ListKeysOptions & { cursor?: string | null | undefined } = {}): Promise<KeyPage> {
    const ns = this.ns(opts);
    const url = `${this.endpoint}/v1/ns/${ns}/keys?${listQuery(opts, opts.cursor)}`;
    return this.transport.send(this.req('GET', url, opts), async (res) =>
      parseKeyPage(await readJson(res), res.status, requestIdOf(res)),
    );
  }

  /**
   * Reads many keys with `POST /batch/get`, 100 keys per request. Missing keys are absent from the map.
   *
   * @example
   * ```ts
   * const items = await strata.getMany(['a', 'b', 'c']);
   * for (const [key, item] of items) console.log(key, item.text());
   * ```
   */
  async getMany(keys: readonly string[], opts: RequestOptions = {}): Promise<Map<string, CacheItem>> {
    const ns = this.ns(opts);
    const unique = [...new Set(keys)];
    unique.forEach(checkKey);
    const url = `${this.endpoint}/v1/ns/${ns}/batch/get`;
    const out = new Map<string, CacheItem>();
    await mapLimit(chunk(unique, BATCH_SIZE), BATCH_CONCURRENCY, async (batch) => {
      const items = await this.sendJson(this.req('POST', url, opts), { keys: batch }, (body, status) =>
        batchItems(body, batch.length, status),
      );
      for (const it of items) {
        if (it.found !== true || typeof it.key !== 'string' || typeof it.value !== 'string') continue;
        out.set(
          it.key,
          makeItem({
            key: it.key,
            value: fromBase64(it.value),
            version: asNumber(it.version) ?? 0,
            expiresAt: parseDate(it.expiresAt),
            tier: typeof it.tier === 'string' ? it.tier : 'unknown',
            contentType: typeof it.contentType === 'string' ? it.contentType : undefined,
            tags: stringArray(it.tags),
          }),
        );
      }
    });
    return out;
  }

  /**
   * Writes many keys with `POST /batch/put`, 100 items per request (fewer when their bytes add up above
   * `inlineLimitBytes`; an item above it alone goes through `put`'s upload flow). Results follow input order.
   * Not atomic across requests: when one fails, earlier or concurrent ones may already be written.
   *
   * @example
   * ```ts
   * await strata.putMany([
   *   { key: 'a', value: 'alpha' },
   *   { key: 'b', value: { n: 2 }, ttl: 60, tags: ['nums'] },
   * ], { ttl: 300 }); // default ttl for items without one
   * ```
   */
  async putMany(items: readonly PutManyItem[], opts: PutManyOptions = {}): Promise<PutManyResult[]> {
    const ns = this.ns(opts);
    checkTags(opts.tags);
    const encoded = items.map((it, index) => {
      checkKey(it.key);
      checkTags(it.tags);
      return { index, item: it, enc: encodeValue(it.value, it.contentType) };
    });
    type Entry = (typeof encoded)[number];
    const results = new Array<PutManyResult>(items.length);
    const large: Entry[] = [];
    const batches: Entry[][] = [];
    let current: Entry[] = [];
    let bytes = 0;
    for (const e of encoded) {
      const size = e.enc.bytes.byteLength;
      if (size > this.inlineLimitBytes) {
        large.push(e);
        continue;
      }
      if (current.length === BATCH_SIZE || (current.length > 0 && bytes + size > this.inlineLimitBytes)) {
        batches.push(current);
        current = [];
        bytes = 0;
      }
      current.push(e);
      bytes += size;
    }
    if (current.length) batches.push(current);

    const url = `${this.endpoint}/v1/ns/${ns}/batch/put`;
    await mapLimit(batches, BATCH_CONCURRENCY, async (batch) => {
      const payload = {
        items: batch.map(({ item, enc }) => ({
          key: item.key,
          value: toBase64(enc.bytes),
          ttl: item.ttl ?? opts.ttl,
          tags: item.tags ?? opts.tags,
          contentType: enc.contentType,
        })),
      };
      const out = await this.sendJson(this.req('POST', url, opts), payload, (body, status) =>
        batchItems(body, batch.length, status),
      );
      batch.forEach((e, i) => {
        const r = out[i]!;
        results[e.index] = {
          key: typeof r.key === 'string' ? r.key : e.item.key,
          version: asNumber(r.version) ?? 0,
          expiresAt: parseDate(r.expiresAt),
          size: asNumber(r.size) ?? e.enc.bytes.byteLength,
        };
      });
    });
    for (const e of large) {
      const r = await this.putEncoded(ns, e.item.key, e.enc, {
        ...opts,
        ttl: e.item.ttl ?? opts.ttl,
        tags: e.item.tags ?? opts.tags,
      });
      results[e.index] = { key: r.key, version: r.version, expiresAt: r.expiresAt, size: r.size };
    }
    return results;
  }

  /**
   * Deletes many keys with `POST /batch/delete`, 100 keys per request. Results (tombstone versions) follow input order.
   *
   * @example
   * ```ts
   * const results = await strata.deleteMany(['a', 'b']);
   * ```
   */
  async deleteMany(keys: readonly string[], opts: RequestOptions = {}): Promise<DeleteManyResult[]> {
    const ns = this.ns(opts);
    keys.forEach(checkKey);
    const url = `${this.endpoint}/v1/ns/${ns}/batch/delete`;
    const batches = chunk(keys, BATCH_SIZE);
    const done = await mapLimit(batches, BATCH_CONCURRENCY, async (batch) => {
      const items = await this.sendJson(this.req('POST', url, opts), { keys: batch }, (body, status) =>
        batchItems(body, batch.length, status),
      );
      return items.map((r, i) => ({ key: typeof r.key === 'string' ? r.key : batch[i]!, version: asNumber(r.version) ?? 0 }));
    });
    return done.flat();
  }

  /**
   * Returns the cached entry, or on a miss calls `loader`, stores its value (with `opts`) and returns it as an item
   * with `tier: 'loader'`. Concurrent calls for the same namespace and key on this client share one read, one
   * loader call and one write; the first caller's options (including its signal) apply to the shared work.
   * With `ifNoneMatch: '*'`, losing a race against another writer returns the winner's entry.
   *
   * @example
   * ```ts
   * const user = await strata.getOrSet('user:42', () => db.users.find(42), { ttl: 300 });
   * console.log(user.json());
   * ```
   */
  async getOrSet(key: string, loader: () => CacheValue | Promise<CacheValue>, opts: PutOptions = {}): Promise<CacheItem> {
    const ns = this.ns(opts);
    checkKey(key);
    checkTags(opts.tags);
    const id = `${ns}\u0000${key}`;
    const pending = this.inflight.get(id);
    if (pending) return pending;
    // The read takes the call's namespace, signal and timeout, not the write's preconditions (`ifNoneMatch: '*'`
    // of a create-only write is no version the caller holds).
    const read: RequestOptions = { ns: opts.ns, signal: opts.signal, timeoutMs: opts.timeoutMs };
    const work = (async (): Promise<CacheItem> => {
      const hit = await this.get(key, read);
      if (hit) return hit;
      const value = await loader();
      if (value === undefined) throw optionError('value', 'the loader resolved undefined; nothing to cache');
      const enc = encodeValue(value, opts.contentType);
      let res: PutResult;
      try {
        res = await this.putEncoded(ns, key, enc, opts);
      } catch (err) {
        if (err instanceof VersionConflictError && opts.ifNoneMatch === '*') {
          const winner = await this.get(key, read);
          if (winner) return winner;
        }
        throw err;
      }
      return makeItem({
        key,
        value: enc.bytes,
        version: res.version,
        expiresAt: res.expiresAt,
        tier: 'loader',
        contentType: enc.contentType,
        tags: [...(opts.tags ?? [])],
      });
    })();
    this.inflight.set(id, work);
    try {
      return await work;
    } finally {
      this.inflight.delete(id);
    }
  }

  /**
   * Service statistics (`GET /v1/stats`).
   *
   * @example
   * ```ts
   * const { tiers } = await strata.stats();
   * for (const t of tiers) console.log(t.name, t.hits, t.misses);
   * ```
   */
  async stats(opts: Omit<RequestOptions, 'ns'> = {}): Promise<StatsResponse> {
    return this.transport.send(
      this.req('GET', `${this.endpoint}/v1/stats`, opts),
      async (res) => (await readJson(res)) as unknown as StatsResponse,
    );
  }

  /**
   * Service health (`GET /v1/health`). A 503 health report (no tier up) resolves too, with its `status`; it is not retried.
   *
   * @example
   * ```ts
   * const h = await strata.health();
   * if (h.status !== 'ok') console.warn('degraded tiers', h.tiers);
   * ```
   */
  async health(opts: Omit<RequestOptions, 'ns'> = {}): Promise<HealthResponse> {
    return this.transport.send(this.req('GET', `${this.endpoint}/v1/health`, opts, { accept: [503] }), async (res) => {
      const text = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      if (isObject(body) && typeof body.status === 'string') return body as HealthResponse;
      if (res.status === 503)
        throw errorFromResponse({ status: 503, body: text, requestId: requestIdOf(res), context: 'GET /v1/health' });
      throw invalid(res.status, `unexpected health response: ${text.slice(0, 200)}`, requestIdOf(res));
    });
  }

  // --- internals ---------------------------------------------------------------------------------------------

  private streams(): StreamDeps {
    return {
      endpoint: this.endpoint,
      transport: this.transport,
      timeoutMs: this.timeoutMs,
      transferTimeoutMs: this.transferTimeoutMs,
      downloadFetch: this.downloadFetch,
      inlineLimitBytes: () => this.inlineLimitBytes,
      ns: (opts) => this.ns(opts),
      put: (key, value, opts) => this.put(key, value, opts),
    };
  }

  private ns(opts: RequestOptions): string {
    return opts.ns === undefined ? this.namespace : checkNamespace(opts.ns);
  }

  private keyUrl(ns: string, key: string): string {
    return `${this.endpoint}/v1/ns/${ns}/keys/${encodeKey(key)}`;
  }

  private req(
    method: string,
    url: string,
    opts: RequestOptions,
    extra: { headers?: Record<string, string>; retryMode?: RetryMode; accept?: number[] } = {},
  ): HttpRequest {
    return {
      method,
      url,
      auth: true,
      retryMode: extra.retryMode ?? 'idempotent',
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? this.timeoutMs,
      headers: extra.headers ?? {},
      ...(extra.accept ? { accept: extra.accept } : {}),
    };
  }

  private sendJson<T>(req: HttpRequest, payload: unknown, parse: (body: Json, status: number) => T): Promise<T> {
    return this.transport.send(
      { ...req, headers: { ...req.headers, 'content-type': 'application/json' }, body: JSON.stringify(payload) },
      async (res) => parse(await readJson(res), res.status),
    );
  }

  private async putEncoded(ns: string, key: string, enc: EncodedValue, opts: PutOptions): Promise<PutResult> {
    if (DOT_KEYS.has(key)) return this.putDotKey(ns, key, enc, opts);
    if (enc.bytes.byteLength > this.inlineLimitBytes) return uploadValue(this.streams(), this.uploadRetries, ns, key, enc, opts);
    const headers: Record<string, string> = { 'content-type': enc.contentType };
    if (opts.ttl !== undefined) headers['x-strata-ttl'] = String(opts.ttl);
    if (opts.tags !== undefined && opts.tags.length > 0) headers['x-strata-tags'] = opts.tags.join(',');
    if (opts.ifMatch !== undefined) headers['if-match'] = String(opts.ifMatch);
    if (opts.ifNoneMatch !== undefined) headers['if-none-match'] = opts.ifNoneMatch;
    const conditional = opts.ifMatch !== undefined || opts.ifNoneMatch !== undefined;
    const req = this.req('PUT', this.keyUrl(ns, key), opts, { headers, retryMode: conditional ? 'conditional' : 'idempotent' });
    try {
      return await this.transport.send({ ...req, body: enc.bytes }, async (res) =>
        putResult(await readJson(res), ns, key, res.status),
      );
    } catch (err) {
      // The server's inline limit is lower than ours: remember it and use the upload flow.
      if (!(err instanceof PayloadTooLargeError) || conditional) throw err;
      const limit = err.limit;
      if (limit !== undefined && limit > 0 && limit < this.inlineLimitBytes) this.inlineLimitBytes = limit;
      return uploadValue(this.streams(), this.uploadRetries, ns, key, enc, opts);
    }
  }

  /** `.` and `..` (see DOT_KEYS): a one-item `batch/put`. */
  private async putDotKey(ns: string, key: string, enc: EncodedValue, opts: PutOptions): Promise<PutResult> {
    if (opts.ifMatch !== undefined || opts.ifNoneMatch !== undefined) {
      throw optionError(
        opts.ifMatch !== undefined ? 'if-match' : 'if-none-match',
        `conditional writes are not supported for the key "${key}"`,
      );
    }
    if (enc.bytes.byteLength > this.inlineLimitBytes)
      throw optionError('value', `values above the inline limit are not supported for the key "${key}"`);
    const payload = {
      items: [{ key, value: toBase64(enc.bytes), ttl: opts.ttl, tags: opts.tags, contentType: enc.contentType }],
    };
    const [r] = await this.sendJson(this.req('POST', `${this.endpoint}/v1/ns/${ns}/batch/put`, opts), payload, (body, status) =>
      batchItems(body, 1, status),
    );
    return { ...putResult(r!, ns, key, 200), size: asNumber(r!.size) ?? enc.bytes.byteLength };
  }
}
