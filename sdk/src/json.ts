/** Internal: JSON responses and option checks shared by the sub-clients (`workflows`, `cost`). Not exported from the package. */
import { StrataServerError, ValidationError } from './errors.js';
import { requestIdOf, type Transport } from './transport.js';

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
