/**
 * The version of the cache-node protocol (what coordinators, workflow steps and nodes say to each other over HTTP)
 * and the node's error codes: written once here, imported by the node daemon (cachenode/src) and by its client
 * (node-client.ts), so both sides agree on what a version means and what a refusal is called.
 *
 * Every request carries the caller's version (`x-strata-protocol`), every answer the node's. A request without the
 * header comes from a peer of before versioning: version 1, what every node and coordinator up to 0.1.0 spoke. A
 * node refuses a peer older than the oldest it still talks to (400 `PROTOCOL_UNSUPPORTED`), and a client refuses a
 * node older than that in the same way, so two builds more than the compatibility window apart never half-talk.
 * cachenode/README.md ("Protocol versions") says what each version added and how a rolling upgrade stays safe.
 *
 * Plain data and small functions only: both the node and the client import this file.
 */

/** The request header with the caller's protocol version, and the answer header with the node's. */
export const PROTOCOL_HEADER = 'x-strata-protocol';

/** The version every peer of before versioning spoke (and sends implicitly: no header). */
export const PRE_VERSIONING_PROTOCOL = 1;

/**
 * What each version added. A version that only adds (a flag a node honours or ignores, an answer field, a record
 * type sent only when asked for) keeps the previous one in the window; one that removes or changes bumps the
 * minimum below.
 */
export const PROTOCOL_VERSIONS = {
  1: 'key, batch, range export/import/delete/stats, ring, victims, health and stats requests; access facts on exports',
  2: 'the protocol header both ways, PROTOCOL_UNSUPPORTED refusals, protocol and build on /healthz, VOLUME_LOST',
} as const satisfies Record<number, string>;

/** The version this build speaks. */
export const PROTOCOL_VERSION = 2;

/**
 * The oldest version this build talks to (the compatibility window: N-1). A fleet mid-upgrade holds builds of
 * both, so neither side may need anything the other lacks: a feature of a newer version is used only after asking
 * {@link supports}, and otherwise skipped or refused with `ProtocolUnsupportedError` (node-client-errors.ts).
 */
export const MIN_PEER_PROTOCOL = 1;

/** This build's version as a header value. */
const CURRENT = String(PROTOCOL_VERSION);

/**
 * Features a caller must check before using them with a node, and the version that brought each. A feature left
 * out is in every version of the window. How a caller handles a node without one is decided per feature (and
 * documented in cachenode/README.md): it degrades (does without) or fails with `ProtocolUnsupportedError`.
 */
export const PROTOCOL_FEATURES = {
  /** /healthz names the node's protocol and build (older nodes: version 1, build unknown; callers degrade). */
  healthIdentity: 2,
  /** The node watches its data volume and stops with VOLUME_LOST when it goes (older nodes: no check; nothing to do). */
  volumeWatch: 2,
} as const satisfies Record<string, number>;

export type ProtocolFeature = keyof typeof PROTOCOL_FEATURES;

/** Whether a peer of protocol `version` has `feature`. */
export function supports(version: number, feature: ProtocolFeature): boolean {
  return version >= PROTOCOL_FEATURES[feature];
}

/**
 * The protocol version a header value names: absent means a peer of before versioning; anything but a positive
 * integer is undefined (refused as unsupported: a peer we cannot read is one we cannot promise anything to).
 */
export function protocolOf(header: string | string[] | undefined): number | undefined {
  if (header === CURRENT) return PROTOCOL_VERSION; // every request and answer of a fleet on one build
  if (header === undefined) return PRE_VERSIONING_PROTOCOL;
  if (typeof header !== 'string' || !/^[1-9][0-9]{0,5}$/.test(header)) return undefined;
  return Number(header);
}

/**
 * Why a peer speaking `peer` is refused by a side whose oldest accepted version is `min`, or undefined when it is
 * not. The message names both sides' versions and what to do, since it ends up in an operator's log.
 */
export function protocolRefusal(peer: number | undefined, min: number, who: 'node' | 'client'): string | undefined {
  if (peer !== undefined && peer >= min) return undefined;
  const said = peer === undefined ? 'an unreadable protocol version' : `protocol version ${peer}`;
  const other = who === 'node' ? 'the caller' : 'the cache node';
  return (
    `${other} speaks ${said}; this ${who === 'node' ? 'cache node' : 'client'} speaks version ${PROTOCOL_VERSION} and ` +
    `accepts versions ${min} and newer: upgrade ${other} (a rolling upgrade moves one release at a time, ` +
    `cachenode/README.md "Protocol versions")`
  );
}

/** The refusal's code (both sides). */
export const PROTOCOL_UNSUPPORTED = 'PROTOCOL_UNSUPPORTED';

/**
 * Every error code a cache node answers, with its HTTP status: the node's half of the protocol, written once. The
 * node builds its errors from this table (cachenode/src/http-error.ts) and the client reads codes by these names.
 */
export const NODE_ERROR_STATUS = {
  VALIDATION_FAILED: 400,
  MALFORMED_JSON: 400,
  /** The caller speaks a protocol version older than the node's minimum (or one it cannot read). */
  PROTOCOL_UNSUPPORTED: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  NO_RING: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  /** The node does not serve the key's range under its ring. */
  WRONG_NODE: 409,
  /** The caller's ring is older than the last change of the key's range. */
  STALE_RING: 409,
  /** A range delete of a range the node owns or receives. */
  RANGE_HELD: 409,
  PAYLOAD_TOO_LARGE: 413,
  INTERNAL: 500,
  /** The ring marks the node DOWN, or its lease ran out: the caller reads the next tier. */
  FENCED: 503,
  /** The node's data directory is gone or replaced under it: it serves nothing and is about to exit. */
  VOLUME_LOST: 503,
} as const satisfies Record<string, number>;

export type NodeErrorCode = keyof typeof NODE_ERROR_STATUS;

/** A build label: `STRATA_NODE_BUILD` when the deployment sets one (a commit, an image tag), else the package's. */
export function buildLabel(env: NodeJS.ProcessEnv, packageVersion: string | undefined): string {
  const set = env.STRATA_NODE_BUILD?.trim();
  return set ? set.slice(0, 100) : packageVersion ? `strata@${packageVersion}` : 'unknown';
}
