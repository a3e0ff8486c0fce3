/**
 * An upload's completion, as one promise: the server commits a large upload asynchronously and answers `202` with a
 * `Retry-After` (docs/API.md, "Multipart uploads"); completing the same upload again is the poll, answering `202`
 * while the commit runs and the write's `200` once it is done. `put` above the inline limit and `putStream` (and so
 * the CLI's upload commands) complete through here.
 */
import { putResult, readJson } from './answers.js';
import { UploadCompletionTimeoutError } from './errors.js';
import { parseRetryAfter, type HttpRequest, type Transport } from './transport.js';
import type { PutResult } from './types.js';

/** How long a completion may stay `202` before the client gives up (the server's job runs at most 15 minutes). */
export const DEFAULT_COMPLETE_TIMEOUT_MS = 20 * 60_000;
/** Bounds of the pause between polls, whatever `Retry-After` says. */
const MIN_POLL_MS = 250;
const MAX_POLL_MS = 30_000;

type Answer = { done: PutResult } | { waitMs: number };

/**
 * Sends `req` (the completion) and, while it answers `202`, sends it again after the server's `Retry-After`, for at
 * most `completeTimeoutMs` in all; then {@link UploadCompletionTimeoutError}. Errors are the completion's own.
 */
export async function completeUpload(
  transport: Transport,
  req: HttpRequest,
  at: { ns: string; key: string; uploadId: string },
  o: { completeTimeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {},
): Promise<PutResult> {
  const budget = o.completeTimeoutMs ?? DEFAULT_COMPLETE_TIMEOUT_MS;
  const deadline = Date.now() + budget;
  for (;;) {
    const answer = await transport.send(req, async (res): Promise<Answer> => {
      const body = await readJson(res);
      if (res.status !== 202) return { done: putResult(body, at.ns, at.key, res.status) };
      const header = parseRetryAfter(res.headers.get('retry-after'));
      const suggested = typeof body.retryAfterSeconds === 'number' ? body.retryAfterSeconds * 1000 : undefined;
      return { waitMs: Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, header ?? suggested ?? 1000)) };
    });
    if ('done' in answer) return answer.done;
    const left = deadline - Date.now();
    if (left <= 0)
      throw new UploadCompletionTimeoutError({
        code: 'COMPLETION_TIMEOUT',
        status: 0,
        message:
          `upload '${at.uploadId}' of '${at.key}' was still completing after ${Math.round(budget / 1000)} s; ` +
          'complete it again with the same uploadId to follow it',
        details: { uploadId: at.uploadId, ns: at.ns, key: at.key },
      });
    await sleep(Math.min(answer.waitMs, left), o.signal);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
