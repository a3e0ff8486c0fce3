import type { StrataError } from './errors.js';

/** The `fetch` signature the client uses (the global `fetch` by default). */
export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** Information passed to {@link StrataClientOptions.onRetry} before each retry. */
export interface RetryInfo {
  /** The attempt that just failed, starting at 1. */
  attempt: number;
  /** How long the client waits before the next attempt. */
  delayMs: number;
  /** Why the attempt failed. */
  error: StrataError;
  method: string;
  url: string;
}

/** Options of {@link StrataClient}. */
export interface StrataClientOptions {
  /** Base URL of the API: the API Gateway stage URL (e.g. `https://abc.execute-api.eu-west-1.amazonaws.com/prod`) or `http://localhost:8080`. */
  endpoint: string;
  /** Tenant API key, sent as `x-api-key` (never to presigned URLs). */
  apiKey?: string | undefined;
  /** Namespace used when a call does not pass `ns`. Default `"default"`. */
  namespace?: string | undefined;
  /** Per-attempt timeout in milliseconds (connect + response + body). Default 5000. */
  timeoutMs?: number | undefined;
  /** Per-attempt timeout for transfers to/from presigned URLs (large values). Default 120000. */
  transferTimeoutMs?: number | undefined;
  /** Retries after the first attempt (so `retries: 3` means up to 4 attempts). Default 3. */
  retries?: number | undefined;
  /** Base of the full-jitter exponential backoff: attempt n waits `random(0, min(retryMaxDelayMs, retryBaseDelayMs * 2^(n-1)))`. Default 50. */
  retryBaseDelayMs?: number | undefined;
  /** Upper bound of one backoff delay. Default 2000. */
  retryMaxDelayMs?: number | undefined;
  /** Upper bound for a server's `retry-after` (429/503). Default 5000. */
  maxRetryAfterMs?: number | undefined;
  /** Values whose encoded size is above this go through the upload-URL flow. Default 4 MiB. */
  inlineLimitBytes?: number | undefined;
  /** A `fetch` implementation (for tests, proxies, custom agents). Default: global `fetch`. */
  fetch?: FetchLike | undefined;
  /** `user-agent` header. Default `strata-sdk-js/<version> node/<version>`. */
  userAgent?: string | undefined;
  /** Called before every retry (logging, metrics). */
  onRetry?: ((info: RetryInfo) => void) | undefined;
}

/** Options accepted by every call. */
export interface RequestOptions {
  /** Namespace for this call; overrides the client's `namespace`. */
  ns?: string | undefined;
  /** Cancels the call (including retries and backoff); the call then rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout for this call; overrides the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
}

/** Options of {@link StrataClient.put}. */
export interface PutOptions extends RequestOptions {
  /** Time to live in whole seconds (1..31536000). Omit for no expiry. */
  ttl?: number | undefined;
  /** Up to 16 tags matching `[A-Za-z0-9_.:-]{1,64}`. */
  tags?: readonly string[] | undefined;
  /** Overrides the content type derived from the value (bytes: `application/octet-stream`, string: `text/plain; charset=utf-8`, other: `application/json`). */
  contentType?: string | undefined;
  /** Write only if the stored version is this one, or with `'*'` only if the key exists (`if-match`). */
  ifMatch?: number | '*' | undefined;
  /** `'*'`: write only if the key does not exist (`if-none-match: *`). */
  ifNoneMatch?: '*' | undefined;
  /**
   * A value above the inline limit: how long its upload's completion may stay asynchronous (`202`, a large upload the
   * server commits in the background, polled as its `Retry-After` says) before the call fails with
   * UploadCompletionTimeoutError (default 20 minutes).
   */
  completeTimeoutMs?: number | undefined;
}

/** Options of {@link StrataClient.delete}. */
export interface DeleteOptions extends RequestOptions {
  /** Delete only if the stored version is this one, or with `'*'` only if the key exists (`if-match`). */
  ifMatch?: number | '*' | undefined;
}

/** Options of {@link StrataClient.touch}. */
export interface TouchOptions extends RequestOptions {
  /** The new time to live in whole seconds (1..31536000), or `null` for none. */
  ttl: number | null;
  /** Touch only if the stored version is this one, or with `'*'` only if the key exists (`if-match`). */
  ifMatch?: number | '*' | undefined;
}

/** Options of {@link StrataClient.putMany}: defaults applied to items that do not set their own. */
export interface PutManyOptions extends RequestOptions {
  ttl?: number | undefined;
  tags?: readonly string[] | undefined;
}

/**
 * A value to store. `Uint8Array`/`ArrayBuffer`/`ArrayBufferView` are stored as bytes, strings as UTF-8 text, and
 * anything else (objects, arrays, numbers, booleans, `null`) as JSON.
 */
export type CacheValue = Uint8Array | ArrayBuffer | ArrayBufferView | string | number | boolean | null | object;

/** Options of {@link StrataClient.get}. */
export interface GetOptions extends RequestOptions {
  /**
   * The version the caller holds (a read's `version`): while it is still the stored one, `get` resolves a
   * {@link NotModified} and the value is not transferred (`if-none-match`, answered 304).
   */
  ifNoneMatch?: number | undefined;
}

/** What `get` with `ifNoneMatch` resolves while the stored version is still that one (304 Not Modified). */
export interface NotModified {
  key: string;
  notModified: true;
  /** The stored version: the one the caller holds. */
  version: number;
  expiresAt: Date | null;
  /** The tier that served the read. */
  tier: string;
  tags: string[];
}

/** A cached entry as returned by reads. */
export interface CacheItem {
  key: string;
  /** The raw stored bytes. */
  value: Uint8Array;
  /** Entry version (monotonic per key). */
  version: number;
  /** Expiry, or `null` when the entry does not expire. */
  expiresAt: Date | null;
  /** The tier that served the read (`l1`, `hot`, `warm`, `cold`, `origin`), or `loader` for a value `getOrSet` just loaded. */
  tier: string;
  contentType?: string | undefined;
  tags: string[];
  /** The value decoded as UTF-8. */
  text(): string;
  /** The value parsed as JSON. */
  json<T = unknown>(): T;
}

/** Result of a write. */
export interface PutResult {
  ns: string;
  key: string;
  version: number;
  expiresAt: Date | null;
  /** Stored size in bytes. */
  size: number;
  /** Tiers written (`hot`, `cold`, ...). */
  tiers: string[];
  /**
   * False while the write lives in the hot tier alone (a write-back namespace, not yet flushed): it is lost if
   * the hot tier loses it first. True once a durable tier holds it (always, for write-through namespaces).
   */
  durable: boolean;
}

/** One item of {@link StrataClient.putMany}. */
export interface PutManyItem {
  key: string;
  value: CacheValue;
  ttl?: number | undefined;
  tags?: readonly string[] | undefined;
  contentType?: string | undefined;
}

/** Result per item of {@link StrataClient.putMany}, in input order. */
export interface PutManyResult {
  key: string;
  version: number;
  expiresAt: Date | null;
  size: number;
}

/** Result of a delete: the tombstone's version. */
export interface DeleteResult {
  version: number;
}

/** Result per key of {@link StrataClient.deleteMany}, in input order. */
export interface DeleteManyResult {
  key: string;
  version: number;
}

/** `GET /v1/health`. */
export interface HealthResponse {
  status: 'ok' | 'degraded' | (string & {});
  tiers: Record<string, { kind: string; ok: boolean; [extra: string]: unknown }>;
  [extra: string]: unknown;
}

/** One tier in `GET /v1/stats` (docs/API.md, "Service"). */
export interface TierStats {
  /** `l1` (the near cache), `hot`, `warm`, `cold`. */
  name: string;
  /** `memory`, `redis`, `warm`, `s3`, `local-folder`, ... */
  kind: string;
  /** When the tier can count them (not S3). */
  entries?: number | undefined;
  bytes?: number | undefined;
  /** This process's reads of the tier since it started. */
  hits: number;
  misses: number;
  errors: number;
  /** False when the tier could not report its sizes (it then carries only name, kind and the counters). */
  ok: boolean;
  /** What the kind adds: `capacityBytes`, `evictions`, `nodes`, `bucket`, ... */
  [extra: string]: unknown;
}

/** `GET /v1/stats`: counters of the process that answered (a Lambda container in AWS), not of the deployment. */
export interface StatsResponse {
  uptimeSeconds: number;
  tiers: TierStats[];
  /** Hits from a lower tier copied up. */
  promotions: number;
  /** Write-back entries flushed to their durable tiers. */
  flushed: number;
  /** The hot tier's fence, when there is a hot tier above a lower one (docs/API.md, "Consistency"). */
  hotFence?: { active: boolean; leaseMs: number; bumps: number; unknownHotCopies: number } | undefined;
  [extra: string]: unknown;
}
