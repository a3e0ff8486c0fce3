// Writing the cache node's responses: JSON answers, large bodies in slices, waiting for a full socket to drain.
import type { ServerResponse } from 'node:http';

export const MiB = 1024 * 1024;

export async function sendJson(res: ServerResponse, status: number, body: unknown): Promise<void> {
  const s = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', Buffer.byteLength(s));
  res.end(s);
}

/** Resolves on 'drain', or when the response closes first (client gone). */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

/** Sends a body, in 1 MiB slices with backpressure when large. */
export async function sendBuffer(res: ServerResponse, value: Buffer): Promise<void> {
  if (value.length <= MiB) {
    res.end(value);
    return;
  }
  for (let at = 0; at < value.length; at += MiB) {
    if (res.destroyed) return;
    if (!res.write(value.subarray(at, Math.min(value.length, at + MiB)))) await drained(res);
  }
  res.end();
}
