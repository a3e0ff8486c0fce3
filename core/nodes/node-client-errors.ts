// The errors NodeClient raises: a node unavailable (outage), a stale route (409), any other refusal (4xx).
import type { RingDocument } from '../ring/document.js';

/** The node could not be reached, timed out, or failed (5xx). */
export class NodeUnavailableError extends Error {
  constructor(
    readonly url: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`cache node ${url}: ${message}`, options);
    this.name = 'NodeUnavailableError';
  }
}

/** The node refused a key request (409): it does not own the range, or our ring is older than its last change. */
export class StaleRouteError extends Error {
  constructor(
    readonly url: string,
    readonly code: string,
    readonly ringVersion: number,
    readonly ring: RingDocument | null,
    message: string,
  ) {
    super(`cache node ${url}: ${message}`);
    this.name = 'StaleRouteError';
  }
}

/** Any other refusal (4xx): a bug or a misconfiguration (wrong secret), not an outage. */
export class NodeRequestError extends Error {
  constructor(
    readonly url: string,
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body?: unknown,
  ) {
    super(`cache node ${url}: ${status} ${code}: ${message}`);
    this.name = 'NodeRequestError';
  }
}

/**
 * The two sides speak no common protocol version (core/nodes/protocol.ts): the node refused our version (400
 * PROTOCOL_UNSUPPORTED), or the node speaks one older than this client accepts or than a feature needs. An upgrade
 * out of order, not an outage: retrying cannot help, the message says which side to upgrade.
 */
export class ProtocolUnsupportedError extends NodeRequestError {
  constructor(
    url: string,
    message: string,
    /** The node's version, when known. */
    readonly nodeProtocol: number | undefined,
    body?: unknown,
  ) {
    super(url, 400, 'PROTOCOL_UNSUPPORTED', message, body);
    this.name = 'ProtocolUnsupportedError';
  }
}
