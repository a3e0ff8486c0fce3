/**
 * The upload record both presigning tiers keep next to a staged upload (`_uploads/<id>.json`): the
 * {@link UploadRecord} plus where its completion stands. The tiers store it and change it atomically (S3: If-Match
 * on the record object; the folder tier: a per-record lock); the rules for a change live here, once.
 */
import { randomBytes } from 'node:crypto';
import { VersionConflictError } from '../errors.js';
import {
  MAX_UPLOAD_URL_SECONDS,
  UPLOAD_CLAIM_LEASE_MS,
  UPLOAD_COMPLETE_GRACE_MS,
  type NewUpload,
  type UploadClaim,
  type UploadRecord,
} from './tier.js';

export type UploadState = 'open' | 'claimed' | 'completed';

export interface StoredUpload extends UploadRecord {
  state: UploadState;
  /** Set while claimed (and kept once completed): which completion holds it, and since when. */
  claimId?: string;
  claimedAt?: number;
}

/** Whole seconds in 1..MAX_UPLOAD_URL_SECONDS (default 900). */
export function uploadUrlSeconds(requested: number): number {
  const s = Number.isFinite(requested) ? Math.floor(requested) : 900;
  return Math.max(1, Math.min(MAX_UPLOAD_URL_SECONDS, s));
}

/** A fresh record for an upload whose URL lasts `seconds` from `now`. */
export function openUpload(upload: NewUpload, now: number, seconds: number): StoredUpload {
  const urlExpiresAt = now + seconds * 1000;
  return { ...upload, urlExpiresAt, completeBy: urlExpiresAt + UPLOAD_COMPLETE_GRACE_MS, state: 'open' };
}

export function encodeUpload(u: StoredUpload): string {
  return JSON.stringify(u);
}

/** The stored record, or undefined when the text is not one (treated as an unknown upload). */
export function decodeUpload(text: string, uploadId: string): StoredUpload | undefined {
  let v: Partial<StoredUpload>;
  try {
    v = JSON.parse(text) as Partial<StoredUpload>;
  } catch {
    return undefined;
  }
  if (!v || typeof v !== 'object' || v.uploadId !== uploadId || typeof v.ns !== 'string' || typeof v.key !== 'string')
    return undefined;
  if (!(v.owner === null || typeof v.owner === 'string')) return undefined;
  if (typeof v.urlExpiresAt !== 'number' || typeof v.completeBy !== 'number') return undefined;
  if (v.state !== 'open' && v.state !== 'claimed' && v.state !== 'completed') return undefined;
  return v as StoredUpload;
}

/** The record as callers see it (without the completion state). */
export function recordOf(u: StoredUpload): UploadRecord {
  const { state: _s, claimId: _c, claimedAt: _a, ...record } = u;
  return record;
}

/**
 * The record after a claim, or undefined when it cannot be claimed: unknown to `accept` (not the caller's: the
 * caller learns nothing more), completed, or past `completeBy`. Throws VERSION_CONFLICT when another completion
 * holds a claim that is not stale (only the upload's own caller gets this far).
 */
export function claimed(u: StoredUpload, accept: (r: UploadRecord) => boolean, now: number): StoredUpload | undefined {
  const record = recordOf(u);
  if (!accept(record) || u.state === 'completed' || now > u.completeBy) return undefined;
  if (u.state === 'claimed' && now - (u.claimedAt ?? 0) < UPLOAD_CLAIM_LEASE_MS) {
    throw new VersionConflictError(`upload '${u.uploadId}' is being completed by another request`, {});
  }
  return { ...u, state: 'claimed', claimId: randomBytes(9).toString('base64url'), claimedAt: now };
}

export function claimOf(u: StoredUpload): UploadClaim {
  return { record: recordOf(u), claimId: u.claimId! };
}

/** The record after `claim` is given back (open again); undefined when the claim is no longer the current one. */
export function released(u: StoredUpload, claim: UploadClaim): StoredUpload | undefined {
  if (u.state !== 'claimed' || u.claimId !== claim.claimId) return undefined;
  const { claimId: _c, claimedAt: _a, ...rest } = u;
  return { ...rest, state: 'open' };
}

/** The record once its bytes are in place: never claimable again. */
export function completed(u: StoredUpload): StoredUpload {
  return { ...u, state: 'completed' };
}

/** Whether a commit of this upload into (ns, key) may proceed: it is claimed, for exactly that key. */
export function committable(u: StoredUpload | undefined, ns: string, key: string): boolean {
  return !!u && u.state === 'claimed' && u.ns === ns && u.key === key;
}
