/** Internal: JSON responses and option checks shared by the sub-clients (`workflows`, `cost`). Not exported from the package. */
import { StrataServerError, ValidationError } from './errors.js';
import { requestIdOf, type HttpRequest, type RetryMode, type Transport } from './transport.js';

/** What a sub-client ({@link StrataClient.workflows}, {@link StrataClient.cost}) needs from the client. @internal */
export interface SubClientTransport {
  endpoint: string;
  transport: Transport;
  timeoutMs: number;
}

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `INVALID_RESPONSE`: a success status with a body the client cannot use. */
export function invalid(status: number, message: string, requestId?: string): StrataServerError {
  return new StrataServerError({ code: 'INVALID_RESPONSE', status, message, requestId });
}

/** An invalid argument, caught before anything is sent (`status` 0, `err.field` = `field`). */
export function optionError(field: string, message: string): ValidationError {
  return new ValidationError({ code: 'VALIDATION_FAILED', status: 0, message: `${field}: ${message}`, details: { field } });
}

/** The response body as JSON; `INVALID_RESPONSE` when it is not JSON. */
export async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw invalid(res.status, `expected JSON from the server (HTTP ${res.status}), got: ${text.slice(0, 200)}`, requestIdOf(res));
  }
}

/**
 * A sub-client's request: authenticated, with the call's signal and timeout (the client's timeout by default), and a
 * JSON body when one is given.
 */
export function subClientRequest(
  t: SubClientTransport,
  method: string,
  url: string,
  opts: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined },
  retryMode: RetryMode = 'idempotent',
  body?: unknown,
): HttpRequest {
  return {
    method,
    url,
    auth: true,
    retryMode,
    signal: opts.signal,
    timeoutMs: opts.timeoutMs ?? t.timeoutMs,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  };
}
