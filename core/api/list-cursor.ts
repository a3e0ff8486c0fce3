/**
 * The opaque cursor of `GET /v1/ns/{ns}/keys`: where the next page starts (the last key the previous page
 * examined), bound to the caller, the namespace and the range it was issued for, and signed (HMAC-SHA256 under a
 * secret every coordinator shares: coordinator/system-secret.ts). A cursor of another tenant, namespace or range,
 * or one edited by hand, is refused with 400: it could not name a key the caller may not list anyway (the range
 * is the caller's own), but a cursor that silently changed what a listing covers would be a worse surprise.
 *
 * `<base64url(JSON claims)>.<base64url(HMAC)>`; the claims carry the last key in the clear (base64url is not
 * encryption): a cursor is as private as the keys on the page that returned it.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { ValidationError } from '../errors.js';
import type { KeyRange } from '../model/key-order.js';

const CONTEXT = 'strata-list-cursor:v1:';

interface Claims {
  /** The listing: a digest of the caller, the namespace and the range. */
  l: string;
  /** The last key examined. */
  a: string;
}

/** What a cursor is bound to: the same caller, namespace and range (limit and metadata may change page to page). */
export interface CursorScope {
  caller: string;
  ns: string;
  range: KeyRange;
}

function listingDigest(s: CursorScope): string {
  const r = s.range;
  const canonical = JSON.stringify([s.caller, s.ns, r.prefix ?? null, r.from ?? null, r.to ?? null]);
  return createHash('sha256').update(canonical).digest('base64url').slice(0, 22);
}

function mac(secret: Buffer, payload: string): Buffer {
  return createHmac('sha256', secret)
    .update(CONTEXT + payload)
    .digest();
}

export function encodeListCursor(secret: Buffer, scope: CursorScope, last: string): string {
  const claims: Claims = { l: listingDigest(scope), a: last };
  const payload = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
  return `${payload}.${mac(secret, payload).toString('base64url')}`;
}

/** The last key a cursor names; 400 VALIDATION_FAILED (field `cursor`) when it is not one of this listing's. */
export function decodeListCursor(secret: Buffer, scope: CursorScope, cursor: string): string {
  const refuse = (why: string) =>
    new ValidationError('cursor', `${why}; pass back the cursor of the previous page unchanged, or start again without one`);
  const [payload, sig, extra] = cursor.split('.');
  if (!payload || !sig || extra !== undefined) throw refuse('not a listing cursor');
  const expected = mac(secret, payload);
  const given = Buffer.from(sig, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refuse('the cursor is not one Strata issued');
  let claims: Partial<Claims>;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Partial<Claims>;
  } catch {
    throw refuse('not a listing cursor');
  }
  if (typeof claims.a !== 'string' || typeof claims.l !== 'string') throw refuse('not a listing cursor');
  if (claims.l !== listingDigest(scope))
    throw refuse('the cursor belongs to another listing (another caller, namespace, prefix or bounds)');
  return claims.a;
}
