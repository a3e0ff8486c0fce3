/**
 * Typed errors with stable codes. Every error a client can see maps to one HTTP status and one code;
 * the code is part of the public contract (the SDK maps it back to a class), the message is for humans.
 */
export type ErrorCode =
  | 'VALIDATION_FAILED'
  | 'MALFORMED_JSON'
  | 'NOT_FOUND'
  | 'ROUTE_NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'NAMESPACE_FORBIDDEN'
  | 'VERSION_CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'RATE_LIMITED'
  | 'ORIGIN_FAILED'
  | 'TIER_UNAVAILABLE'
  | 'EXECUTION_EXISTS'
  | 'WORKFLOWS_UNAVAILABLE'
  | 'INTERNAL';

/** HTTP status of every error code (the public contract: docs/API.md, the OpenAPI document). */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  VALIDATION_FAILED: 400,
  MALFORMED_JSON: 400,
  NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  /** The caller's API key is not for this namespace (api/tenant-access.ts). */
  NAMESPACE_FORBIDDEN: 403,
  VERSION_CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  ORIGIN_FAILED: 502,
  TIER_UNAVAILABLE: 503,
  /** A workflow execution with the requested name already exists (admin API). */
  EXECUTION_EXISTS: 409,
  /** The admin API cannot reach the workflows: not configured in this runtime, or Step Functions failed. */
  WORKFLOWS_UNAVAILABLE: 503,
  INTERNAL: 500,
};

export class StrataError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  /** Whether message and details may be shown to the caller (false only for INTERNAL). */
  readonly expose: boolean;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StrataError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = details;
    this.expose = code !== 'INTERNAL';
  }
  toJSON(): { error: { code: ErrorCode; message: string; details?: Record<string, unknown> } } {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

/** 400 naming the offending field. */
export class ValidationError extends StrataError {
  constructor(field: string, message: string, extra?: Record<string, unknown>) {
    super('VALIDATION_FAILED', `${field}: ${message}`, { field, ...extra });
    this.name = 'ValidationError';
  }
}

export class NotFoundError extends StrataError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('NOT_FOUND', message, details);
    this.name = 'NotFoundError';
  }
}

export class VersionConflictError extends StrataError {
  constructor(message: string, details: { expected?: number | '*'; current?: number | null }) {
    super('VERSION_CONFLICT', message, details);
    this.name = 'VersionConflictError';
  }
}

/** Raised by a tier when its backend cannot be reached or answers with an error. */
export class TierUnavailableError extends StrataError {
  readonly tier: string;
  constructor(tier: string, cause?: unknown) {
    super('TIER_UNAVAILABLE', `tier '${tier}' is unavailable`, { tier }, { cause });
    this.name = 'TierUnavailableError';
    this.tier = tier;
  }
}

export function isStrataError(e: unknown): e is StrataError {
  return e instanceof StrataError;
}
