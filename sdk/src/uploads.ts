/**
 * `put` of a value above the inline limit, whole in memory (StrataClient.put; `putStream` streams it in parts
 * instead, streams.ts): an upload URL, one PUT of the bytes to it, then the completion.
 */
import type { EncodedValue } from './encoding.js';
import { encodeKey } from './encoding.js';
import { StrataError } from './errors.js';
import { readJson } from './answers.js';
import { completeUpload } from './completion.js';
import { invalid, isObject, optionError } from './json.js';
import type { StreamDeps } from './streams.js';
import { discard, type HttpRequest } from './transport.js';
import type { PutOptions, PutResult } from './types.js';

interface UploadTicket {
  uploadId: string;
  url: string;
  method: string;
  headers: Record<string, string>;
}

function apiRequest(url: string, opts: PutOptions, body: unknown, timeoutMs: number): HttpRequest {
  return {
    method: 'POST',
    url,
    auth: true,
    retryMode: 'conditional',
    signal: opts.signal,
    timeoutMs,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  };
}

/**
 * Requests an upload URL, PUTs the bytes there (no API key), then completes. The URL takes one PUT and an upload
 * completes once, so neither step is repeated after a failure that may have reached the server (the repeat would
 * be refused); the whole flow is, up to `retries` times, with a new upload (at worst the value is written twice,
 * alike).
 */
export async function uploadValue(
  d: StreamDeps,
  retries: number,
  ns: string,
  key: string,
  enc: EncodedValue,
  opts: PutOptions,
): Promise<PutResult> {
  if (opts.ifMatch !== undefined || opts.ifNoneMatch !== undefined) {
    throw optionError(
      opts.ifMatch !== undefined ? 'if-match' : 'if-none-match',
      `conditional writes are not supported for values above the inline limit (${enc.bytes.byteLength} bytes)`,
    );
  }
  const base = `${d.endpoint}/v1/ns/${ns}/uploads/${encodeKey(key)}`;
  for (let attempt = 0; ; attempt++) {
    // Requesting a ticket is retried by the transport (an unused ticket is only garbage).
    const request = { contentType: enc.contentType, ttl: opts.ttl, tags: opts.tags };
    const ticketRequest = {
      ...apiRequest(base, opts, request, opts.timeoutMs ?? d.timeoutMs),
      retryMode: 'idempotent' as const,
    };
    const ticket = await d.transport.send(ticketRequest, async (res): Promise<UploadTicket> => {
      const body = await readJson(res);
      if (typeof body.uploadId !== 'string' || typeof body.url !== 'string') {
        throw invalid(res.status, 'upload response without uploadId/url');
      }
      const headers: Record<string, string> = {};
      if (isObject(body.headers)) for (const [k, v] of Object.entries(body.headers)) if (typeof v === 'string') headers[k] = v;
      return { uploadId: body.uploadId, url: body.url, method: typeof body.method === 'string' ? body.method : 'PUT', headers };
    });
    try {
      return await uploadWith(d, ticket, base, ns, key, enc, opts);
    } catch (err) {
      if (!(err instanceof StrataError) || !err.retryable || attempt >= retries) throw err;
    }
  }
}

/** PUT the bytes to the ticket's URL (no API key), then complete: each once (see {@link uploadValue}). */
async function uploadWith(
  d: StreamDeps,
  ticket: UploadTicket,
  base: string,
  ns: string,
  key: string,
  enc: EncodedValue,
  opts: PutOptions,
): Promise<PutResult> {
  await d.transport.send(
    {
      method: ticket.method,
      url: new URL(ticket.url, `${d.endpoint}/`).toString(),
      headers: ticket.headers,
      body: enc.bytes,
      auth: false,
      retryMode: 'conditional',
      signal: opts.signal,
      timeoutMs: d.transferTimeoutMs,
    },
    discard,
  );
  // Completing moves the bytes into place server-side (an S3 copy of the whole value): given the transfer timeout,
  // as putStream's completion is, not the per-request one.
  const complete = apiRequest(
    `${base}/complete`,
    opts,
    { uploadId: ticket.uploadId },
    Math.max(d.transferTimeoutMs, opts.timeoutMs ?? 0),
  );
  // A large upload may complete asynchronously (202): polled here, so the caller sees one promise.
  return completeUpload(d.transport, complete, { ns, key, uploadId: ticket.uploadId }, opts);
}
