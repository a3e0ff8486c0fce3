/**
 * Typed errors raised by the Strata SDK.
 *
 * Every error the client raises for a Strata request is a {@link StrataError}. Server error responses
 * (`{ "error": { "code", "message", "details" } }`) are mapped to a subclass by `code`; responses that carry
 * no such body (a proxy's HTML 502, an S3 XML error from a presigned URL, API Gateway's `{ "message" }`) are
 * mapped by HTTP status instead and get the code `HTTP_ERROR`.
 *
 * The one exception is cancellation through a caller's `AbortSignal`: the client then rethrows
 * `signal.reason` unchanged, exactly as `fetch` does.
 */

import { PERMANENT_ERROR_DETAIL, type PolicyProblemWire, type ServerErrorCode } from './contract.js';

/** Error codes defined by the Strata HTTP API (docs/API.md); the list lives in contract.ts, shared with the server. */
export type { ServerErrorCode };

/**
 * Codes the client produces itself:
 * - `TIMEOUT`: an attempt exceeded `timeoutMs` (after all retries).
 * - `NETWORK_ERROR`: no HTTP response (connection refused/reset, DNS failure, ...).
 * - `HTTP_ERROR`: an error status whose body is not a Strata error envelope; the class follows the status.
 * - `INVALID_RESPONSE`: a success status with a body the client cannot understand.
 * - `COMPLETION_TIMEOUT`: an upload's asynchronous completion (202) was still running when the client's bounded
 *   wait ran out ({@link UploadCompletionTimeoutError}).
 */
export type ClientErrorCode = 'TIMEOUT' | 'NETWORK_ERROR' | 'HTTP_ERROR' | 'INVALID_RESPONSE' | 'COMPLETION_TIMEOUT';

/** Any code a {@link StrataError} can carry. Unknown server codes are passed through verbatim. */
export type StrataErrorCode = ServerErrorCode | ClientErrorCode | (string & {});

/** Constructor input shared by all error classes. */
export interface StrataErrorInit {
  code: StrataErrorCode;
  /** HTTP status, or `0` when no response was received (timeouts, network errors, client-side validation). */
  status: number;
  message: string;
  details?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
  /** Delay the server asked for via `retry-after`, in milliseconds. */
  retryAfterMs?: number | undefined;
  cause?: unknown;
}

/**
 * Base class of every error raised by the SDK.
 *
 * @example
 * ```ts
 * try {
 *   await client.put('k', 'v', { ifNoneMatch: '*' });
 * } catch (err) {
 *   if (err instanceof StrataError) console.error(err.code, err.status, err.details, err.requestId);
 *   throw err;
 * }
 * ```
 */
export class StrataError extends Error {
  /** The API error code (`VERSION_CONFLICT`, ...) or a client code (`TIMEOUT`, `NETWORK_ERROR`, `HTTP_ERROR`, ...). */
  readonly code: StrataErrorCode;
  /** HTTP status of the response, `0` when there was none. */
  readonly status: number;
  /** `error.details` from the response body (e.g. `{ field: 'ttl' }`), when present. */
  readonly details: Record<string, unknown> | undefined;
  /** Request id from `x-request-id` / `x-amzn-requestid` / `apigw-requestid`, when the response had one. */
  readonly requestId: string | undefined;
  /** `retry-after` of the response in milliseconds, when present. */
  readonly retryAfterMs: number | undefined;

  constructor(init: StrataErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.details = init.details;
    this.requestId = init.requestId;
    this.retryAfterMs = init.retryAfterMs;
  }

  /**
   * Whether the SDK's retry policy considers this error transient (429, 5xx, timeouts, network errors).
   *
   * @example
   * ```ts
   * if (err instanceof StrataError && err.retryable) scheduleLater();
   * ```
   */
  get retryable(): boolean {
    return false;
  }

  /**
   * True when the server marked the error permanent (`details.permanent`, contract.ts `PERMANENT_ERROR_DETAIL`): the
   * condition lasts until the deployment's configuration changes, e.g. a 503 `WORKFLOWS_UNAVAILABLE` because this
   * runtime has no workflows. Such an error is never {@link retryable}, whatever its status.
   */
  get permanent(): boolean {
    return this.details?.[PERMANENT_ERROR_DETAIL] === true;
  }

  /**
   * A plain object for structured logging.
   *
   * @example
   * ```ts
   * logger.error({ err: err instanceof StrataError ? err.toJSON() : err });
   * ```
   */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      code: this.code,
      status: this.status,
      message: this.message,
      details: this.details,
      requestId: this.requestId,
    };
  }
}

/** 400 `VALIDATION_FAILED` / `MALFORMED_JSON`, or invalid input rejected by the client before sending (`status` 0). `details.field` names the field. */
export class ValidationError extends StrataError {
  /** The offending field (`details.field`), when known. */
  get field(): string | undefined {
    const f = this.details?.field;
    return typeof f === 'string' ? f : undefined;
  }

  /**
   * Every problem of a refused policy document (`details.problems`: where, in which rule, what), when the server
   * listed them (`policies.put`, `policies.validate`); `undefined` for other validation errors.
   *
   * @example
   * ```ts
   * for (const p of err.problems ?? []) console.error(`${p.path}${p.rule ? ` (rule '${p.rule}')` : ''}: ${p.message}`);
   * ```
   */
  get problems(): PolicyProblemWire[] | undefined {
    const list = this.details?.problems;
    if (!Array.isArray(list)) return undefined;
    // Entries the client cannot show (no path or message) are left out rather than failing the whole error.
    return list.flatMap((p: unknown): PolicyProblemWire[] => {
      if (!isRecord(p) || typeof p.path !== 'string' || typeof p.message !== 'string') return [];
      return [{ path: p.path, ...(typeof p.rule === 'string' ? { rule: p.rule } : {}), message: p.message }];
    });
  }
}

/** 401/403: the API key is missing or not accepted (API Gateway answers `{ "message": "Forbidden" }`). */
export class AuthenticationError extends StrataError {}

/**
 * 403 `NAMESPACE_FORBIDDEN`: the API key is valid but not for this namespace (each tenant's key is granted a list
 * of namespaces). A subclass of {@link AuthenticationError}; not retried.
 */
export class NamespaceForbiddenError extends AuthenticationError {
  /** The namespace asked for (`details.namespace`). */
  get namespace(): string | undefined {
    const n = this.details?.namespace;
    return typeof n === 'string' ? n : undefined;
  }

  /** What the key is granted (`details.allowed`: names and `prefix*`), when the server said. */
  get allowed(): string[] | undefined {
    const a = this.details?.allowed;
    return Array.isArray(a) && a.every((x) => typeof x === 'string') ? (a as string[]) : undefined;
  }
}

/**
 * 404 `NOT_FOUND` (only raised where a miss is not a normal result, e.g. `workflows.wait` of an unknown execution:
 * `get` resolves undefined, `delete` of a missing key succeeds) or `ROUTE_NOT_FOUND` (wrong endpoint / base path).
 */
export class NotFoundError extends StrataError {}

/** 409 `VERSION_CONFLICT`: an `ifMatch` / `ifNoneMatch` precondition failed. */
export class VersionConflictError extends StrataError {
  /** The stored version (`details.current`), when the server reported it. */
  get current(): number | undefined {
    const c = this.details?.current;
    return typeof c === 'number' ? c : typeof c === 'string' && /^\d+$/.test(c) ? Number(c) : undefined;
  }
}

/** 413 `PAYLOAD_TOO_LARGE`. The client normally switches to the upload flow by itself; this surfaces only if that is impossible. */
export class PayloadTooLargeError extends StrataError {
  /** The inline limit in bytes (`details.limit`), when reported. */
  get limit(): number | undefined {
    const l = this.details?.limit;
    return typeof l === 'number' ? l : undefined;
  }
}

/** 415 `UNSUPPORTED_MEDIA_TYPE`. */
export class UnsupportedMediaTypeError extends StrataError {}

/** 416 `RANGE_NOT_SATISFIABLE`: the requested byte range starts at or past the end of the value (`getStream`'s `range`). */
export class RangeNotSatisfiableError extends StrataError {
  /** The value's size in bytes (`details.size`), when reported. */
  get size(): number | undefined {
    const s = this.details?.size;
    return typeof s === 'number' ? s : undefined;
  }
}

/** 429 `RATE_LIMITED`: throttled by the usage plan. Retried automatically, honouring `retry-after`. */
export class RateLimitedError extends StrataError {
  override get retryable(): boolean {
    return true;
  }
}

/** 502 `ORIGIN_FAILED`: the read-through origin failed. Retried automatically, unless {@link StrataError.permanent}. */
export class OriginError extends StrataError {
  override get retryable(): boolean {
    return !this.permanent;
  }
}

/**
 * 503 `TIER_UNAVAILABLE`, or any 5xx other than 500 without a Strata error body (e.g. a proxy's HTML 502/504). Retried
 * automatically, unless the server marked it {@link StrataError.permanent}.
 */
export class UnavailableError extends StrataError {
  override get retryable(): boolean {
    return !this.permanent;
  }
}

/**
 * 503 `WORKFLOWS_UNAVAILABLE` (admin API): the deployment has no workflows configured, or Step Functions could not
 * be reached. A subclass of {@link UnavailableError}, retried like it: not when the server marked it
 * {@link StrataError.permanent} (not configured here), else yes (a Step Functions call failed).
 */
export class WorkflowsUnavailableError extends UnavailableError {}

/**
 * 503 `POLICIES_UNAVAILABLE` (admin API): the deployment has no policy store, or it could not be reached; or, for the
 * firing history, no background evaluator runs there. A subclass of {@link UnavailableError}, retried like it: not
 * when the server marked it {@link StrataError.permanent} (not configured here), else yes (the store failed).
 */
export class PoliciesUnavailableError extends UnavailableError {}

/**
 * 409 `TRANSFORMED_SCOPE`: the key's policy compresses or encrypts its values, whose bytes never go through a
 * presigned URL; put and get the value through the API instead. Not retried.
 */
export class TransformedScopeError extends StrataError {}

/**
 * 503 `KEY_UNAVAILABLE`: the encryption key a value needs cannot be used (KMS, or a local key file). Retried unless
 * {@link StrataError.permanent} (the key is gone or disabled; `details.key` names it).
 */
export class KeyUnavailableError extends UnavailableError {}

/** 409 `EXECUTION_EXISTS` (admin API): a workflow execution with the requested name already exists. */
export class ExecutionExistsError extends StrataError {
  /** The execution name (`details.execution`), when reported. */
  get execution(): string | undefined {
    const e = this.details?.execution;
    return typeof e === 'string' ? e : undefined;
  }
}

/** An attempt exceeded `timeoutMs` and every retry did too (or `workflows.wait` ran out of time). `status` is 0. */
export class TimeoutError extends StrataError {
  override get retryable(): boolean {
    return true;
  }
}

/**
 * An upload's completion answered `202` (the server commits a large upload asynchronously) and was still running
 * when `completeTimeoutMs` ran out. The upload is not lost: its commit goes on, and completing it again with the
 * same {@link uploadId} answers `202` while it runs and the write's result once it is done (docs/API.md, "Multipart
 * uploads"). Not retryable: a new upload would send every byte again. `status` is 0.
 */
export class UploadCompletionTimeoutError extends StrataError {
  /** The upload still completing (`details.uploadId`). */
  get uploadId(): string | undefined {
    const id = this.details?.uploadId;
    return typeof id === 'string' ? id : undefined;
  }
}

/** No HTTP response was received (connection refused or reset, DNS failure, TLS failure, ...). `status` is 0; `cause` holds the underlying error. */
export class NetworkError extends StrataError {
  /**
   * True when the connection could not be established at all (ECONNREFUSED, ENOTFOUND, ...), so the server cannot
   * have processed the request. Conditional writes are retried only in that case.
   */
  readonly connectFailed: boolean;

  constructor(init: StrataErrorInit & { connectFailed?: boolean | undefined }) {
    super(init);
    this.connectFailed = init.connectFailed ?? false;
  }

  override get retryable(): boolean {
    return true;
  }
}

/**
 * 500 `INTERNAL`, an unknown code/status, or a response the client cannot parse (`INVALID_RESPONSE`). 5xx instances
 * are retried, unless {@link StrataError.permanent}.
 */
export class StrataServerError extends StrataError {
  override get retryable(): boolean {
    return this.status >= 500 && !this.permanent;
  }
}

type ErrorClass = new (init: StrataErrorInit) => StrataError;

/** The class of every server error code (a code missing here does not compile; test/unit/contract-drift.test.ts checks the statuses). */
const BY_CODE: Record<ServerErrorCode, ErrorClass> = {
  VALIDATION_FAILED: ValidationError,
  MALFORMED_JSON: ValidationError,
  NOT_FOUND: NotFoundError,
  ROUTE_NOT_FOUND: NotFoundError,
  METHOD_NOT_ALLOWED: StrataServerError,
  NAMESPACE_FORBIDDEN: NamespaceForbiddenError,
  VERSION_CONFLICT: VersionConflictError,
  TRANSFORMED_SCOPE: TransformedScopeError,
  PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  UNSUPPORTED_MEDIA_TYPE: UnsupportedMediaTypeError,
  RANGE_NOT_SATISFIABLE: RangeNotSatisfiableError,
  RATE_LIMITED: RateLimitedError,
  ORIGIN_FAILED: OriginError,
  TIER_UNAVAILABLE: UnavailableError,
  EXECUTION_EXISTS: ExecutionExistsError,
  WORKFLOWS_UNAVAILABLE: WorkflowsUnavailableError,
  POLICIES_UNAVAILABLE: PoliciesUnavailableError,
  KEY_UNAVAILABLE: KeyUnavailableError,
  INTERNAL: StrataServerError,
};

function classForStatus(status: number): ErrorClass {
  switch (status) {
    case 400:
      return ValidationError;
    case 401:
    case 403:
      return AuthenticationError;
    case 404:
      return NotFoundError;
    case 409:
      return VersionConflictError;
    case 413:
      return PayloadTooLargeError;
    case 415:
      return UnsupportedMediaTypeError;
    case 416:
      return RangeNotSatisfiableError;
    case 429:
      return RateLimitedError;
    case 500:
      return StrataServerError;
    default:
      return status > 500 && status < 600 ? UnavailableError : StrataServerError;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Input for {@link errorFromResponse}. */
export interface ErrorResponseInfo {
  status: number;
  /** The raw response body (may be empty, HTML, XML, JSON). */
  body: string;
  requestId?: string | undefined;
  retryAfterMs?: number | undefined;
  /** What was being done, for messages of bodies without one, e.g. `GET /v1/ns/app/keys/a`. */
  context?: string | undefined;
}

/**
 * Maps an HTTP error response to the matching {@link StrataError} subclass. Strata error envelopes are mapped by
 * `code`; anything else (HTML, XML, empty, API Gateway's `{ "message" }`) by status with the code `HTTP_ERROR`.
 *
 * @example
 * ```ts
 * const err = errorFromResponse({ status: 502, body: '<html>Bad Gateway</html>' });
 * err instanceof UnavailableError; // true, err.code === 'HTTP_ERROR'
 * ```
 */
export function errorFromResponse(info: ErrorResponseInfo): StrataError {
  let parsed: unknown;
  try {
    parsed = info.body ? JSON.parse(info.body) : undefined;
  } catch {
    parsed = undefined;
  }
  const common = { status: info.status, requestId: info.requestId, retryAfterMs: info.retryAfterMs };
  const envelope = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
  if (envelope && typeof envelope.code === 'string') {
    const code = envelope.code;
    const Cls = (BY_CODE as Record<string, ErrorClass | undefined>)[code] ?? classForStatus(info.status);
    const message = typeof envelope.message === 'string' && envelope.message ? envelope.message : `${code} (HTTP ${info.status})`;
    return new Cls({ ...common, code, message, details: isRecord(envelope.details) ? envelope.details : undefined });
  }
  const Cls = classForStatus(info.status);
  const gatewayMessage = isRecord(parsed) && typeof parsed.message === 'string' ? parsed.message : undefined;
  const snippet = info.body.replace(/\s+/g, ' ').trim().slice(0, 200);
  const where = info.context ? ` for ${info.context}` : '';
  const message = gatewayMessage ?? `HTTP ${info.status}${where}${snippet ? `: ${snippet}` : ''}`;
  return new Cls({ ...common, code: 'HTTP_ERROR', message, details: info.body ? { body: info.body.slice(0, 1024) } : undefined });
}
