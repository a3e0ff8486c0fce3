/** Internal: one HTTP exchange with per-attempt timeouts, retries and error mapping. Not exported from the package. */
import { errorFromResponse, NetworkError, RateLimitedError, StrataError, TimeoutError } from './errors.js';
import type { FetchLike, RetryInfo } from './types.js';

/**
 * - `idempotent`: retried on 429, 5xx, timeouts and network errors (reads, unconditional writes); never an error the
 *   server marked permanent (`details.permanent`, e.g. a 503 for workflows this runtime does not have: see
 *   `StrataError.permanent`).
 * - `conditional`: `if-match` / `if-none-match` writes. A retry after an ambiguous failure (5xx, timeout, reset
 *   connection) could see the first attempt's own write and fail with a spurious 409, or a 409 could hide that the
 *   write happened. They are therefore retried only when the server certainly did not process the request: 429
 *   (throttled before the handler) and connections that could not be established.
 */
export type RetryMode = 'idempotent' | 'conditional';

export interface HttpRequest {
  method: string;
  url: string;
  headers?: Record<string, string> | undefined;
  body?: Uint8Array | string | undefined;
  /** Send `x-api-key` (false for presigned URLs). */
  auth: boolean;
  retryMode: RetryMode;
  signal?: AbortSignal | undefined;
  timeoutMs: number;
  /** Non-2xx statuses handed to `read` instead of being raised (e.g. 404 on GET, 303, 503 on health). */
  accept?: readonly number[] | undefined;
  /**
   * The body is streamed to the caller after `read` returns: `timeoutMs` then covers the wait for the response's
   * headers only, not the transfer (a 1 GB body takes longer than any per-request timeout).
   */
  stream?: boolean | undefined;
  /**
   * Send the `body` bytes as a stream of views over them, with their `content-length` (Node only; elsewhere as
   * bytes). Node's fetch copies a byte body several times before it sends it: for a stream upload's parts in flight
   * (4 of 8 MiB) that was ~130 MiB of copies; views cost nothing.
   */
  bodyAsStream?: boolean | undefined;
  /** This request's fetch instead of the client's: on Node, the socket client of socket-http.ts for downloads. */
  fetch?: FetchLike | undefined;
}

const IN_NODE = typeof process !== 'undefined' && typeof process.versions?.node === 'string';
const VIEW_BYTES = 256 * 1024;

/**
 * `bytes` as a web stream of views over them (no copy), for one attempt. In Node the views are Buffers over the same
 * memory: Node's HTTP client copies a chunk that is a plain Uint8Array into a new Buffer before writing it.
 */
function viewsOf(bytes: Uint8Array): ReadableStream<Uint8Array> {
  const NodeBuffer = (globalThis as { Buffer?: { from(b: ArrayBufferLike, offset: number, length: number): Uint8Array } }).Buffer;
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.byteLength) return controller.close();
      const length = Math.min(VIEW_BYTES, bytes.byteLength - offset);
      controller.enqueue(
        NodeBuffer ? NodeBuffer.from(bytes.buffer, bytes.byteOffset + offset, length) : bytes.subarray(offset, offset + length),
      );
      offset += length;
    },
  });
}

/** The body and headers of one attempt's fetch. */
function bodyInit(req: HttpRequest, headers: Record<string, string>): RequestInit {
  if (req.body === undefined) return { headers };
  if (req.bodyAsStream && IN_NODE && req.body instanceof Uint8Array) {
    const init = { headers: { ...headers, 'content-length': String(req.body.byteLength) }, body: viewsOf(req.body) };
    return { ...init, duplex: 'half' } as RequestInit;
  }
  return { headers, body: req.body as NonNullable<RequestInit['body']> };
}

/**
 * A signal that aborts after `ms` unless `settle()` is called first (then it never aborts on its own). Not
 * `AbortSignal.timeout`: its timer keeps the signal, and through fetch's abort listener the request and its body,
 * alive until it fires; a stream upload's parts (8 MiB each, a transfer timeout of minutes) then piled up in memory.
 */
function deadline(ms: number): { signal: AbortSignal; settle: () => void } {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new DOMException(`timed out after ${ms} ms`, 'TimeoutError')), ms);
  // As AbortSignal.timeout's, the timer alone does not keep a process alive.
  (timer as { unref?: () => void }).unref?.();
  return { signal: ctl.signal, settle: () => clearTimeout(timer) };
}

export interface TransportConfig {
  fetch: FetchLike;
  apiKey: string | undefined;
  userAgent: string;
  retries: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  maxRetryAfterMs: number;
  onRetry: ((info: RetryInfo) => void) | undefined;
}

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Codes found on an error, its `cause` chain and `AggregateError.errors` (undici wraps the socket error). */
function errorCodes(err: unknown, depth = 0): string[] {
  if (typeof err !== 'object' || err === null || depth > 5) return [];
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  const own = typeof e.code === 'string' ? [e.code] : [];
  const nested = Array.isArray(e.errors) ? e.errors.flatMap((x) => errorCodes(x, depth + 1)) : [];
  return [...own, ...nested, ...errorCodes(e.cause, depth + 1)];
}

/** `retry-after` as delta-seconds or an HTTP date, in milliseconds. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

export function requestIdOf(res: Response): string | undefined {
  return (
    res.headers.get('x-request-id') ?? res.headers.get('x-amzn-requestid') ?? res.headers.get('apigw-requestid') ?? undefined
  );
}

/**
 * A 404 answered to a read of one thing: undefined when the thing does not exist (`NOT_FOUND`), else the error
 * (`ROUTE_NOT_FOUND` is a wrong endpoint or an older server, not a missing thing).
 */
export async function missingOrThrow(res: Response, context: string): Promise<undefined> {
  const err = errorFromResponse({ status: res.status, body: await res.text(), requestId: requestIdOf(res), context });
  if (err.code === 'NOT_FOUND') return undefined;
  throw err;
}

/** The URL without its query string (presigned URLs carry credentials there), for messages. */
function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return url.split('?')[0] ?? url;
  }
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. @internal */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export async function discard(res: Response): Promise<void> {
  try {
    await res.body?.cancel();
  } catch {
    /* already consumed or closed */
  }
}

export class Transport {
  constructor(private readonly cfg: TransportConfig) {}

  /**
   * Sends `req`, retrying per its `retryMode`, and hands a successful (2xx or accepted) response to `read`. `read`
   * runs inside the attempt, so the per-attempt timeout also covers reading the body.
   */
  async send<T>(req: HttpRequest, read: (res: Response) => Promise<T>): Promise<T> {
    const context = `${req.method} ${redact(req.url)}`;
    const headers: Record<string, string> = { ...req.headers };
    if (req.auth) {
      headers['user-agent'] = this.cfg.userAgent;
      if (this.cfg.apiKey) headers['x-api-key'] = this.cfg.apiKey;
    }
    for (let attempt = 1; ; attempt++) {
      if (req.signal?.aborted) throw req.signal.reason;
      const attemptDeadline = deadline(req.timeoutMs);
      const timeout = attemptDeadline.signal;
      const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
      let error: StrataError;
      try {
        const res = await (req.fetch ?? this.cfg.fetch)(req.url, {
          method: req.method,
          ...bodyInit(req, headers),
          signal,
          redirect: 'manual',
        });
        if (req.stream) attemptDeadline.settle();
        if ((res.status >= 200 && res.status < 300) || req.accept?.includes(res.status)) return await read(res);
        const body = await res.text();
        error = errorFromResponse({
          status: res.status,
          body,
          requestId: requestIdOf(res),
          retryAfterMs: parseRetryAfter(res.headers.get('retry-after')),
          context,
        });
      } catch (err) {
        if (req.signal?.aborted) throw req.signal.reason;
        if (err instanceof StrataError) {
          error = err;
        } else if (timeout.aborted) {
          error = new TimeoutError({
            code: 'TIMEOUT',
            status: 0,
            message: `${context} timed out after ${req.timeoutMs} ms`,
            cause: err,
          });
        } else {
          const codes = errorCodes(err);
          const detail =
            codes[0] ?? (err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err));
          error = new NetworkError({
            code: 'NETWORK_ERROR',
            status: 0,
            message: `${context} failed: ${detail}`,
            details: codes.length ? { errno: codes[0] } : undefined,
            connectFailed: codes.some((c) => CONNECT_CODES.has(c)),
            cause: err,
          });
        }
      } finally {
        attemptDeadline.settle();
      }
      const delayMs = this.retryDelay(error, attempt, req.retryMode);
      if (delayMs === undefined) throw error;
      this.cfg.onRetry?.({ attempt, delayMs, error, method: req.method, url: redact(req.url) });
      await sleep(delayMs, req.signal);
    }
  }

  /** The delay before the next attempt, or undefined when `error` must be raised. */
  private retryDelay(error: StrataError, attempt: number, mode: RetryMode): number | undefined {
    if (attempt > this.cfg.retries || !error.retryable) return undefined;
    if (mode === 'conditional' && !(error instanceof RateLimitedError) && !(error instanceof NetworkError && error.connectFailed))
      return undefined;
    if (error.retryAfterMs !== undefined && (error.status === 429 || error.status === 503))
      return Math.min(error.retryAfterMs, this.cfg.maxRetryAfterMs);
    const ceiling = Math.min(this.cfg.retryMaxDelayMs, this.cfg.retryBaseDelayMs * 2 ** (attempt - 1));
    return Math.floor(Math.random() * ceiling);
  }
}
