// The cache node's request errors (an HTTP status and a stable code, answered as JSON) and input validation.
import type { z } from 'zod';
import { NODE_ERROR_STATUS, type NodeErrorCode } from '../../core/nodes/protocol.js';
import { formatIssues } from '../../core/util/zod-issues.js';

/** An error with a stable code (answered as JSON), at the HTTP status the protocol gives that code. */
export class HttpError extends Error {
  readonly status: number;
  constructor(
    readonly code: NodeErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.status = NODE_ERROR_STATUS[code];
  }
}

/** What a body that is not a sequence of wire records is told. */
export const NOT_RECORDS = 'body is not a sequence of records';

/** `fn()`, with what it throws turned into the caller's error (400), its message after `context` when given. */
export function validated<T>(fn: () => T, context?: string): T {
  try {
    return fn();
  } catch (e) {
    const message = e instanceof Error ? e.message : 'invalid input';
    throw new HttpError('VALIDATION_FAILED', context ? `${context}: ${message}` : message);
  }
}

export function parseJson<T>(schema: z.ZodType<T>, buf: Buffer): T {
  let raw: unknown;
  try {
    raw = JSON.parse(buf.toString('utf8'));
  } catch {
    throw new HttpError('MALFORMED_JSON', 'body is not JSON');
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    throw new HttpError('VALIDATION_FAILED', formatIssues(r.error.issues, { root: '(body)' }));
  }
  return r.data;
}
