import { randomBytes } from 'node:crypto';
import { FLEET_SECRET_KEY } from './node-reports.js';
import { CasConflictError, type CasStore } from './store.js';

/**
 * The fleet's shared secret as a ring-store document (FLEET_SECRET_KEY, node-reports.ts): the body is the secret
 * itself, nothing else, so an operator can read it with `aws s3 cp` and every reader agrees on its bytes.
 *
 * It is created once, by whoever needs it first (the workflow steps before any node is launched, a coordinator
 * that starts before any workflow ran), with a conditional create: S3 answers a PutObject with If-None-Match: *
 * on an existing key with 412 Precondition Failed (or 409 on a concurrent conditional write), so of two creators
 * exactly one writes and the other reads the winner's secret. S3 is strongly consistent for reads after writes,
 * so that read sees it.
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html#ConsistencyModel
 */

/** Shortest secret the nodes and coordinators accept (the nodes refuse shorter ones at start). */
export const FLEET_SECRET_MIN_LENGTH = 16;

/** 48 random bytes as base64url: 64 characters, every one valid in an HTTP header value. */
export function newFleetSecret(): string {
  return randomBytes(48).toString('base64url');
}

/** The stored secret cannot be used (too short, or characters an HTTP header cannot carry). */
export class FleetSecretInvalidError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FleetSecretInvalidError';
  }
}

/**
 * The secret stored in `cas`, or undefined when none was created yet. Throws FleetSecretInvalidError for a stored
 * secret nobody could use, and what the store throws when it cannot be read (CasStoreUnavailableError).
 */
export async function readStoredFleetSecret(cas: CasStore): Promise<string | undefined> {
  const got = await cas.get(FLEET_SECRET_KEY);
  if (!got) return undefined;
  const secret = got.body.trim();
  // Visible ASCII only: the secret travels in the x-strata-secret header.
  if (secret.length < FLEET_SECRET_MIN_LENGTH || !/^[\x21-\x7e]+$/.test(secret)) {
    throw new FleetSecretInvalidError(
      `the fleet secret stored at '${FLEET_SECRET_KEY}' is unusable: ` +
        `it must be at least ${FLEET_SECRET_MIN_LENGTH} visible ASCII characters (got ${secret.length} characters)`,
    );
  }
  return secret;
}

/** Attempts before giving up when conditional creates keep conflicting and no secret becomes readable. */
const ENSURE_ATTEMPTS = 5;

/**
 * The secret stored in `cas`, created first (conditional create) when there is none. `created` tells whether
 * this call wrote it. Concurrent callers all end with the same secret: the one whose create S3 accepted.
 */
export async function ensureFleetSecret(
  cas: CasStore,
  generate: () => string = newFleetSecret,
): Promise<{ secret: string; created: boolean }> {
  for (let attempt = 1; ; attempt++) {
    let existing: string | undefined;
    try {
      existing = await readStoredFleetSecret(cas);
    } catch (e) {
      // S3 answers a GET of a missing key with 403 to a caller without s3:ListBucket
      // (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, Permissions): try the create, which
      // fails with 412 if the secret does exist (then the next read shows it), or is refused if this caller may
      // not write it either (then that error says so).
      if (!isAccessDenied(e)) throw e;
    }
    if (existing) return { secret: existing, created: false };
    const secret = generate();
    try {
      await cas.put(FLEET_SECRET_KEY, secret, null);
      return { secret, created: true };
    } catch (e) {
      if (!(e instanceof CasConflictError)) throw e;
      // Lost to another creator (412), or a conflicting concurrent write (409): read what won. A 409 can leave
      // nothing written, hence the loop.
      if (attempt >= ENSURE_ATTEMPTS) {
        const message = `could not create or read the fleet secret at '${FLEET_SECRET_KEY}' after ${attempt} conflicting attempts`;
        throw new Error(message, { cause: e });
      }
      await new Promise((r) => setTimeout(r, Math.random() * 50 * attempt));
    }
  }
}

/** An S3 403 (the ring store wraps the SDK's error as its cause). */
function isAccessDenied(e: unknown): boolean {
  const cause = (e as { cause?: { $metadata?: { httpStatusCode?: number } } }).cause;
  return cause?.$metadata?.httpStatusCode === 403;
}
