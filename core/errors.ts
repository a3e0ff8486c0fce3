/**
 * Typed errors with stable codes. Every error a client can see maps to one HTTP status and one code;
 * the code is part of the public contract (the SDK maps it back to a class), the message is for humans.
 */
import { PERMANENT_ERROR_DETAIL, SERVER_ERROR_STATUS, type ServerErrorCode } from '../sdk/src/contract.js';

/** Every error code a client can see; written once in the SDK's contract (sdk/src/contract.ts), plain data. */
export type ErrorCode = ServerErrorCode;

/** HTTP status of every error code (the public contract: docs/API.md, the OpenAPI document, sdk/src/contract.ts). */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = SERVER_ERROR_STATUS;

/**
 * Base of every API error: `name` is the class's own name (so subclasses do not set it; bundles keep class names,
 * cdk/lib/packaging.ts), `options.cause` is ES2022's `{ cause }`.
 */
export class StrataError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  /** Whether message and details may be shown to the caller (false only for INTERNAL). */
  readonly expose: boolean;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = details;
    this.expose = code !== 'INTERNAL';
  }
  toJSON(): { error: { code: ErrorCode; message: string; details?: Record<string, unknown> } } {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
  /** Retrying cannot help (something is not configured here): clients do not retry, and no `retry-after` is sent. */
  get permanent(): boolean {
    return this.details?.[PERMANENT_ERROR_DETAIL] === true;
  }
}

/**
 * `details` marked permanent (`"permanent": true`): the condition lasts until the deployment changes, so the SDK
 * does not retry the request even when its status (503) is otherwise retried.
 */
export function permanentDetails(details?: Record<string, unknown>): Record<string, unknown> {
  return { ...details, [PERMANENT_ERROR_DETAIL]: true };
}

/** 400 naming the offending field. */
export class ValidationError extends StrataError {
  constructor(field: string, message: string, extra?: Record<string, unknown>) {
    super('VALIDATION_FAILED', `${field}: ${message}`, { field, ...extra });
  }
}

export class NotFoundError extends StrataError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('NOT_FOUND', message, details);
  }
}

export class VersionConflictError extends StrataError {
  constructor(message: string, details: { expected?: number | '*'; current?: number | null }) {
    super('VERSION_CONFLICT', message, details);
  }
}

/** Raised by a tier when its backend cannot be reached or answers with an error. */
export class TierUnavailableError extends StrataError {
  readonly tier: string;
  constructor(tier: string, cause?: unknown) {
    super('TIER_UNAVAILABLE', `tier '${tier}' is unavailable`, { tier }, { cause });
    this.tier = tier;
  }
}

/**
 * A write skipped part of a tier on purpose: the cache node that holds the key's range is DOWN and fenced (it can
 * serve nothing, see core/ring/document.ts `downFenced`), so the tier can neither take the value nor return an
 * older one; or the node took the range over from a DOWN node and holds no version this old (ring/takeover.ts).
 * The write stands if another durable tier took it (core/coordinator/tier-writer.ts). Anything that does not know
 * this error sees a TierUnavailableError, the safe reading.
 */
export class TierFencedError extends TierUnavailableError {
  constructor(
    tier: string,
    readonly node: string,
    /**
     * When the write that skipped the node must have ended (performance.now()), so that a cache node that takes the
     * range over later cannot miss it (ring/takeover.ts). Past it, the write is not acknowledged.
     */
    readonly until = Infinity,
    /** The node is not DOWN: it took the range over from one, after this write was stamped (ring/takeover.ts). */
    takenOver = false,
  ) {
    const why = takenOver ? 'took its range over from a DOWN node after this version was stamped' : 'is DOWN and fenced';
    super(tier, new Error(`cache node '${node}' ${why}`));
  }

  /** Whether the write that skipped the node ended too late to be acknowledged. */
  late(): boolean {
    return performance.now() > this.until;
  }
}

/**
 * 409 TRANSFORMED_SCOPE: the key's policy compresses or encrypts its values, and what was asked (an upload URL, a
 * download URL) would hand out their bytes untransformed or transformed. The value goes through the API instead.
 */
export class TransformedScopeError extends StrataError {
  constructor(ns: string, key: string, rules: readonly string[], what: 'upload' | 'download') {
    const how = what === 'upload' ? `PUT it through the API instead (up to the inline limit)` : 'GET it through the API instead';
    const stored = what === 'upload' ? 'to be stored' : 'stored';
    super(
      'TRANSFORMED_SCOPE',
      `key '${key}' in namespace '${ns}' is ${stored} transformed (compressed, encrypted or shared) ` +
        `${rules.length ? `(rule ${rules.join(', ')}) ` : ''}and its bytes never go through a presigned URL; ${how}`,
      { ns, key, ...(rules.length ? { rule: rules[0], rules: [...rules] } : {}) },
    );
  }
}

/** What went wrong, as text for a log field or a firing's detail: an Error's message, else the value. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function isStrataError(e: unknown): e is StrataError {
  return e instanceof StrataError;
}

/**
 * Bad configuration found at start-up (an environment variable, a tenant map): the message names the setting and
 * what it expects. Not an API error: it stops the process (or the Lambda's initialization) instead of a request.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
