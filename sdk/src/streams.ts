/**
 * Values as streams, for values too large to hold in memory: `getStream` hands the response body over as it
 * arrives (following the 303 to a presigned download without buffering), `putStream` uploads a stream in parts
 * through the API's multipart upload routes, holding at most `concurrency + 1` parts of `partSize` bytes at a
 * time. Internal: StrataClient's `getStream` / `putStream` call these.
 */
import { entryMeta, locationHeaders, readJson } from './answers.js';
import { UploadCompletionTimeoutError, VersionConflictError } from './errors.js';
import { completeUpload } from './completion.js';
import { checkKey, checkTags, encodeKey } from './encoding.js';
import { invalid, isObject, optionError } from './json.js';
import { discard, missingOrThrow, requestIdOf, type HttpRequest, type Transport } from './transport.js';
import type { FetchLike, PutOptions, PutResult, RequestOptions } from './types.js';

const MiB = 1024 * 1024;
/** S3's multipart rules (the server enforces them on every tier): parts 5 MiB..5 GiB but the last, at most 10,000. */
export const MIN_PART_BYTES = 5 * MiB;
export const MAX_PART_BYTES = 5 * 1024 * MiB;
export const MAX_PARTS = 10_000;
const DEFAULT_PART_BYTES = 8 * MiB;
const DEFAULT_CONCURRENCY = 3;
const MAX_REPLACED_RETRIES = 3;
/** A presigned download answered 412: the key was replaced between the redirect and the download. */
const REPLACED = Symbol('replaced');

/** Options of {@link StrataClient.getStream}. */
export interface GetStreamOptions extends RequestOptions {
  /** Bytes `start..end` (inclusive; `end` omitted: to the end of the value), answered 206. */
  range?: { start: number; end?: number | undefined } | undefined;
}

/** What {@link StrataClient.getStream} resolves: the entry's metadata and its bytes as a web stream. */
export interface ValueStream {
  key: string;
  version: number;
  /** The whole value's size in bytes (also for a range), when the server said. */
  size: number | undefined;
  contentType: string | undefined;
  tier: string;
  expiresAt: Date | null;
  tags: string[];
  /** The bytes `body` holds, when a range was asked for and served (inclusive offsets). */
  range?: { start: number; end: number } | undefined;
  /**
   * The bytes. Read it to the end or cancel it (it holds a connection); `Readable.fromWeb(body)` for a Node stream.
   * On Node a byte stream: a BYOB reader with one reused buffer reads it without allocating per chunk.
   */
  body: ReadableStream<Uint8Array>;
}

/** Options of {@link StrataClient.putStream}. Conditional writes (`ifMatch`, `ifNoneMatch`) are not offered for streams. */
export interface PutStreamOptions extends Omit<PutOptions, 'ifMatch' | 'ifNoneMatch'> {
  /** Bytes per part (5 MiB..5 GiB; default 8 MiB). The value can be at most 10,000 parts. */
  partSize?: number | undefined;
  /** Parts uploaded at once (1..16; default 3). Memory held: about `(concurrency + 1) * partSize`. */
  concurrency?: number | undefined;
}

/** What `putStream` reads: a web stream, a Node `Readable`, or any async iterable of bytes. */
export type StreamSource = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>;

/** What the streams need of the client. */
export interface StreamDeps {
  endpoint: string;
  transport: Transport;
  timeoutMs: number;
  transferTimeoutMs: number;
  /** The GET of a presigned download, when not the client's fetch (Node: the socket client of socket-http.ts). */
  downloadFetch?: FetchLike | undefined;
  inlineLimitBytes(): number;
  ns(opts: RequestOptions): string;
  put(key: string, value: Uint8Array, opts: PutOptions): Promise<PutResult>;
}

function keyUrl(d: StreamDeps, ns: string, key: string, what: 'keys' | 'uploads'): string {
  return `${d.endpoint}/v1/ns/${ns}/${what}/${encodeKey(key)}`;
}

function rangeHeader(range: GetStreamOptions['range']): Record<string, string> {
  if (range === undefined) return {};
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || start < 0) throw optionError('range.start', 'must be a whole number >= 0');
  if (end !== undefined && (!Number.isSafeInteger(end) || end < start))
    throw optionError('range.end', 'must be a whole number >= range.start (inclusive)');
  return { range: `bytes=${start}-${end ?? ''}` };
}

function streamOf(key: string, res: Response, meta: Headers): ValueStream {
  const { version, ...rest } = entryMeta(meta, res.headers);
  const cr = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '');
  const length = res.headers.get('content-length');
  const size = res.status === 206 ? (cr && cr[3] !== '*' ? Number(cr[3]) : undefined) : length ? Number(length) : undefined;
  return {
    key,
    version: version ?? 0,
    size,
    contentType: res.headers.get('content-type') ?? meta.get('content-type') ?? undefined,
    ...rest,
    ...(res.status === 206 && cr ? { range: { start: Number(cr[1]), end: Number(cr[2]) } } : {}),
    body: res.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() }),
  };
}

/** `GET` a key as a stream (undefined when it does not exist), following a 303 with the range sent on. */
export async function getStream(d: StreamDeps, key: string, opts: GetStreamOptions = {}): Promise<ValueStream | undefined> {
  checkKey(key);
  if (key === '.' || key === '..') throw optionError('key', `the key "${key}" cannot be streamed (it has no URL path); use get`);
  const range = rangeHeader(opts.range);
  const url = keyUrl(d, d.ns(opts), key, 'keys');
  const common = { signal: opts.signal, retryMode: 'idempotent' as const, stream: true };
  for (let attempt = 0; ; attempt++) {
    const req: HttpRequest = {
      ...common,
      method: 'GET',
      url,
      auth: true,
      headers: range,
      timeoutMs: opts.timeoutMs ?? d.timeoutMs,
      accept: [303, 404],
    };
    const first = await d.transport.send(req, async (res) => {
      if (res.status === 404) return missingOrThrow(res, `GET ${url}`);
      if (res.status !== 303) return streamOf(key, res, res.headers);
      const location = res.headers.get('location');
      await discard(res);
      if (!location) throw invalid(303, 'redirect without a location header', requestIdOf(res));
      return { location: new URL(location, url).toString(), meta: res.headers };
    });
    if (first === undefined || !('location' in first)) return first;
    const got = await d.transport.send(
      {
        ...common,
        method: 'GET',
        url: first.location,
        // The location serves the version the redirect describes, given the headers it names, and honours Range.
        headers: { ...locationHeaders(first.meta), ...range },
        auth: false,
        timeoutMs: d.transferTimeoutMs,
        accept: [404, 412],
        fetch: d.downloadFetch,
      },
      async (res) => {
        if (res.status === 404 || res.status === 412) {
          await discard(res);
          return res.status === 404 ? undefined : REPLACED;
        }
        return streamOf(key, res, first.meta);
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
 * The source's bytes cut into parts of exactly `size` bytes, the last one shorter (or empty for an empty source),
 * each filled into a buffer from `take` (putStream reuses the buffers of parts already sent).
 */
async function* partsOf(source: StreamSource, size: number, take: () => Uint8Array): AsyncGenerator<Uint8Array> {
  let part = take();
  let filled = 0;
  const text = new TextEncoder();
  const chunks: AsyncIterable<Uint8Array | string> =
    'getReader' in source ? webChunks(source as ReadableStream<Uint8Array>) : (source as AsyncIterable<Uint8Array | string>);
  for await (const raw of chunks) {
    let chunk = typeof raw === 'string' ? text.encode(raw) : raw;
    while (chunk.byteLength > 0) {
      const n = Math.min(size - filled, chunk.byteLength);
      part.set(chunk.subarray(0, n), filled);
      filled += n;
      chunk = chunk.subarray(n);
      if (filled === size) {
        yield part;
        part = take();
        filled = 0;
      }
    }
  }
  yield part.subarray(0, filled);
}

async function* webChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Frees the part buffers once every part is sent, rather than at the garbage collector's next full collection:
 * detached (transferred to an empty buffer), their backing stores go at once. Where `transfer` is missing they are
 * left to the collector.
 */
function release(buffers: Uint8Array[]): void {
  for (const b of buffers.splice(0)) (b.buffer as { transfer?: (n: number) => ArrayBuffer }).transfer?.(0);
}

function whole(name: string, v: number | undefined, fallback: number, min: number, max: number): number {
  if (v === undefined) return fallback;
  if (!Number.isSafeInteger(v) || v < min || v > max) throw optionError(name, `must be a whole number in ${min}..${max}`);
  return v;
}

/**
 * Uploads `source` in parts (a value that fits in one part and the inline limit is sent with one PUT), then completes
 * the upload; on a failure the upload is aborted (best effort) and the error raised.
 */
export async function putStream(
  d: StreamDeps,
  key: string,
  source: StreamSource,
  opts: PutStreamOptions = {},
): Promise<PutResult> {
  checkKey(key);
  checkTags(opts.tags);
  const partSize = whole('partSize', opts.partSize, DEFAULT_PART_BYTES, MIN_PART_BYTES, MAX_PART_BYTES);
  const concurrency = whole('concurrency', opts.concurrency, DEFAULT_CONCURRENCY, 1, 16);
  const contentType = opts.contentType ?? 'application/octet-stream';
  const ns = d.ns(opts);
  // Part buffers are reused once their part is sent: a steady (concurrency + 1) of them, rather than a new 8 MiB
  // buffer per part that the garbage collector frees late (external memory), which had doubled the client's RSS.
  const spare: Uint8Array[] = [];
  const made: Uint8Array[] = [];
  const fresh = (): Uint8Array => {
    const part = new Uint8Array(partSize);
    made.push(part);
    return part;
  };
  const parts = partsOf(source, partSize, () => spare.pop() ?? fresh());
  const first = (await parts.next()).value!;
  if (first.byteLength < partSize && first.byteLength <= d.inlineLimitBytes()) {
    await parts.return(undefined);
    return d.put(key, first, { ...opts, contentType });
  }
  const base = keyUrl(d, ns, key, 'uploads');
  const api = (path: string, retryMode: HttpRequest['retryMode'] = 'idempotent'): HttpRequest => ({
    method: 'POST',
    url: `${base}${path}`,
    auth: true,
    retryMode,
    signal: opts.signal,
    timeoutMs: opts.timeoutMs ?? d.timeoutMs,
    headers: { 'content-type': 'application/json' },
  });
  const created = await d.transport.send(
    { ...api(''), body: JSON.stringify({ multipart: true, contentType, ttl: opts.ttl, tags: opts.tags }) },
    async (res) => readJson(res),
  );
  if (typeof created.uploadId !== 'string') throw invalid(200, 'multipart upload response without uploadId');
  const uploadId = created.uploadId;
  const etags: string[] = [];
  const sendPart = async (partNumber: number, bytes: Uint8Array): Promise<void> => {
    // Minting a URL changes nothing and a part PUT again replaces the earlier one: both are retried as reads are.
    const minted = await d.transport.send(
      { ...api('/parts'), body: JSON.stringify({ uploadId, partNumbers: [partNumber] }) },
      async (res) => readJson(res),
    );
    const url = Array.isArray(minted.parts) && isObject(minted.parts[0]) ? minted.parts[0] : undefined;
    if (!url || typeof url.url !== 'string') throw invalid(200, 'part URL response without parts[0].url');
    const headers: Record<string, string> = {};
    if (isObject(url.headers)) for (const [k, v] of Object.entries(url.headers)) if (typeof v === 'string') headers[k] = v;
    etags[partNumber - 1] = await d.transport.send(
      {
        method: 'PUT',
        url: new URL(url.url, `${d.endpoint}/`).toString(),
        headers,
        body: bytes,
        bodyAsStream: true,
        auth: false,
        retryMode: 'idempotent',
        signal: opts.signal,
        timeoutMs: d.transferTimeoutMs,
      },
      async (res) => {
        await discard(res);
        const etag = res.headers.get('etag');
        if (!etag) throw invalid(res.status, `part ${partNumber}: the part URL answered without an etag header`);
        return etag;
      },
    );
  };
  try {
    const inflight = new Set<Promise<void>>();
    let partNumber = 0;
    for (let part: Uint8Array | undefined = first; part !== undefined;) {
      if (++partNumber > MAX_PARTS)
        throw optionError('partSize', `the value needs more than ${MAX_PARTS} parts of ${partSize} bytes; use larger parts`);
      const bytes = part;
      const sent: Promise<void> = sendPart(partNumber, bytes).finally(() => {
        inflight.delete(sent);
        if (bytes.byteLength === partSize) spare.push(bytes);
      });
      sent.catch(() => {}); // raised by the race or Promise.all below
      inflight.add(sent);
      if (inflight.size >= concurrency) await Promise.race(inflight);
      const next = await parts.next();
      // The last part is the short one; a source that ends on a part boundary leaves an empty one, not sent.
      part = next.done || next.value.byteLength === 0 ? undefined : next.value;
    }
    await Promise.all(inflight);
    release(made);
    const body = { uploadId, parts: etags.map((etag, i) => ({ partNumber: i + 1, etag })) };
    // Completing is not repeated after an ambiguous failure: the first may have committed (see StrataClient.put).
    // It joins the parts (S3's CompleteMultipartUpload "could take several minutes"; the folder tier copies them) and
    // copies the value into place: the transfer timeout, not the per-request one.
    const complete = { ...api('/complete', 'conditional'), timeoutMs: Math.max(d.transferTimeoutMs, opts.timeoutMs ?? 0) };
    // A large upload may complete asynchronously (202): polled with the same request until it answers the write.
    return await completeUpload(d.transport, { ...complete, body: JSON.stringify(body) }, { ns, key, uploadId }, opts);
  } catch (err) {
    await parts.return(undefined).catch(() => {});
    // Still committing in the background: the upload is the caller's to follow (err.uploadId), not to drop.
    if (err instanceof UploadCompletionTimeoutError) throw err;
    await d.transport.send({ ...api('/abort'), signal: undefined, body: JSON.stringify({ uploadId }) }, discard).catch(() => {});
    throw err;
  }
}
