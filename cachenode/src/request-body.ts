// Reading request bodies: into one buffer up to a limit (preallocated from content-length), or into a pooled slab.
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http-error.js';
import { MiB } from './http-reply.js';
import type { SlabPool } from './slab-pool.js';

/** Bound on a JSON request body. */
export const JSON_LIMIT = 16 * MiB;

/**
 * Reads a write's body into a slab of `pool` (when one is free and the declared length fits), runs `write` on it
 * and gives the slab back once nothing refers to it: at once when reading the body failed or `write` resolved
 * (its writes are then durable); when `write` failed, once `store` has settled, since it may have queued
 * writes that still read their values from the slab.
 */
export async function withPooledBody<T>(
  pool: SlabPool,
  store: { settle(): Promise<void> },
  req: IncomingMessage,
  limit: number,
  write: (body: Buffer) => Promise<T>,
): Promise<T> {
  const slab = pooledBodyFits(req, pool.slabBytes, limit) ? pool.acquire() : undefined;
  if (!slab) return write(await readBody(req, limit));
  let body: Buffer;
  try {
    body = await readBody(req, limit, slab);
  } catch (e) {
    pool.release(slab);
    throw e;
  }
  let out: T;
  try {
    out = await write(body);
  } catch (e) {
    // Whatever it queued before failing still reads its values from the slab until the store settles (a
    // closed store never does: the slab is dropped with it).
    store.settle().then(
      () => pool.release(slab),
      () => undefined,
    );
    throw e;
  }
  // Resolved: its writes are committed (and flushed), so the store holds no reference into the slab.
  pool.release(slab);
  return out;
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
export function readBody(req: IncomingMessage, limit: number, into?: Buffer): Promise<Buffer> {
  const length = declaredLength(req);
  if (length !== undefined && length > limit) {
    return Promise.reject(new HttpError('PAYLOAD_TOO_LARGE', `body of ${length} bytes exceeds the limit of ${limit}`));
  }
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
        if (at + chunk.length > out.length) return fail(new HttpError('VALIDATION_FAILED', 'body longer than content-length'));
        chunk.copy(out, at);
      } else {
        if (at + chunk.length > limit)
          return fail(new HttpError('PAYLOAD_TOO_LARGE', `body exceeds the limit of ${limit} bytes`));
        chunks.push(chunk);
      }
      at += chunk.length;
    });
    req.once('end', () => {
      if (failed) return;
      if (out) {
        if (at !== out.length) return fail(new HttpError('VALIDATION_FAILED', 'body shorter than content-length'));
        resolve(out);
      } else resolve(Buffer.concat(chunks, at));
    });
    req.once('error', (e) => fail(new HttpError('VALIDATION_FAILED', `request body failed: ${e.message}`)));
    // A request aborted mid-body ends in 'close' without 'end' (and not always with 'error').
    req.once('close', () => {
      if (!req.complete) fail(new HttpError('VALIDATION_FAILED', 'request aborted before its body ended'));
    });
  });
}
