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
  /** A completion the upload-commit workflow runs (see {@link AsyncCompletion}). */
  completion?: AsyncCompletion;
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
  const { state: _s, claimId: _c, claimedAt: _a, completion: _p, ...record } = u;
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
  // A claim the upload-commit workflow holds lasts as long as its job may run, not a request's lease.
  const lease = u.completion ? ASYNC_COMPLETION_LEASE_MS : UPLOAD_CLAIM_LEASE_MS;
  if (u.state === 'claimed' && now - (u.claimedAt ?? 0) < lease) {
    throw new VersionConflictError(`upload '${u.uploadId}' is being completed by another request`, {});
  }
  // A new claim starts afresh: an earlier job's completion (failed, or lost) no longer applies.
  const { completion: _p, ...rest } = u;
  return { ...rest, state: 'claimed', claimId: randomBytes(9).toString('base64url'), claimedAt: now };
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

// ---- asynchronous completions (api/async-complete.ts, workflows/steps/upload-commit-steps.ts) ------------------

/**
 * A completion handed to the upload-commit workflow: the claim it runs under, the metadata the completion asked for
 * (the job's input stays `{ ns, key, uploadId, owner, claimId }`: no part list, no metadata), and how it ended.
 * Kept in the upload's record so that any API container answers the owner's polls.
 */
export interface AsyncCompletion {
  claimId: string;
  startedAt: number;
  ttlSeconds?: number | null;
  tags?: string[];
  contentType?: string;
  /**
   * The execution committing it, set by the job's first step (compare-and-set): an event delivered twice starts two
   * executions, and only the first to set this commits.
   */
  execution?: string;
  /** The staged size, for the poll interval suggested. */
  bytes?: number;
  /** The PUT-like answer, once committed (the record is then `completed`). */
  result?: Record<string, unknown>;
  /**
   * Why the job failed (the record is then `open` again, or `completed` when the failure came after the commit, as a
   * synchronous completion's would); answered to the owner's next poll, once.
   */
  failure?: { code: string; message: string; details?: Record<string, unknown> };
}

/**
 * How long a poll reports a job as running without hearing from it. The job's step runs at most 15 minutes (Lambda's
 * limit), the state machine's catch records a failure right after; past this the job is taken for lost.
 */
export const ASYNC_COMPLETION_LEASE_MS = 20 * 60_000;

/** The record of a claimed upload whose commit the workflow now runs; undefined when `claimId` no longer holds it. */
export function handedToJob(
  u: StoredUpload,
  claimId: string,
  opts: Pick<AsyncCompletion, 'ttlSeconds' | 'tags' | 'contentType' | 'bytes'>,
  now: number,
): StoredUpload | undefined {
  if (u.state !== 'claimed' || u.claimId !== claimId) return undefined;
  return { ...u, claimedAt: now, completion: { ...opts, claimId, startedAt: now } };
}

/** The record once `execution` took the job (undefined: the claim moved on, or another execution has it). */
export function jobStarted(u: StoredUpload, claimId: string, execution: string): StoredUpload | undefined {
  const c = u.completion;
  if (u.state !== 'claimed' || u.claimId !== claimId || c?.claimId !== claimId) return undefined;
  if (c.execution !== undefined && c.execution !== execution) return undefined;
  return { ...u, completion: { ...c, execution } };
}

/** The record once the job's commit answered `result` (it is completed already: the tier marked it so). */
export function jobCommitted(u: StoredUpload, claimId: string, result: Record<string, unknown>): StoredUpload | undefined {
  if (u.state !== 'completed' || u.completion?.claimId !== claimId) return undefined;
  return { ...u, completion: { ...u.completion, result } };
}

/**
 * The record after the job failed: given back (open, as a failed synchronous completion leaves it) with the failure
 * kept for the owner's next poll. Undefined when the job's claim no longer holds it.
 */
export function jobFailed(
  u: StoredUpload,
  claimId: string,
  failure: NonNullable<AsyncCompletion['failure']>,
): StoredUpload | undefined {
  if (u.claimId !== claimId || u.completion?.claimId !== claimId || u.completion.result || u.completion.failure) return undefined;
  // Committed, then failed (e.g. its hot copy): as a synchronous completion would, the owner hears of the failure,
  // and the upload, completed, cannot be taken again.
  if (u.state === 'completed') return { ...u, completion: { ...u.completion, failure } };
  if (u.state !== 'claimed') return undefined;
  const { claimId: _c, claimedAt: _a, ...rest } = u;
  return { ...rest, state: 'open', completion: { ...u.completion, failure } };
}

/** What the owner's completion request finds of an asynchronous completion. */
export type AsyncPoll =
  | { state: 'running'; startedAt: number }
  | { state: 'committed'; result: Record<string, unknown> }
  | { state: 'failed'; failure: NonNullable<AsyncCompletion['failure']> }
  | { state: 'none' };

/** The poll's answer for the record, which `accept` already found to be the caller's. */
export function asyncPoll(u: StoredUpload, now: number): AsyncPoll {
  const c = u.completion;
  if (!c) return { state: 'none' };
  if (u.state === 'completed' && c.result) return { state: 'committed', result: c.result };
  if (c.failure) return { state: 'failed', failure: c.failure };
  const live = now - c.startedAt < ASYNC_COMPLETION_LEASE_MS;
  if (u.state === 'claimed' && u.claimId === c.claimId && live) return { state: 'running', startedAt: c.startedAt };
  // Committed, but the job was cut off before it stored its answer: running until the lease ends, then as today
  // (a completed upload is NOT_FOUND).
  if (u.state === 'completed' && live) return { state: 'running', startedAt: c.startedAt };
  return { state: 'none' };
}

/** The record once the owner was told of the failure: the next completion starts over (no failure, no job). */
export function failureTold(u: StoredUpload): StoredUpload | undefined {
  if (!u.completion?.failure) return undefined;
  const { completion: _c, ...rest } = u;
  return rest;
}

/** The record after a job that never started is given back: open, without its completion. */
export function jobNotStarted(u: StoredUpload, claimId: string): StoredUpload | undefined {
  if (u.state !== 'claimed' || u.claimId !== claimId) return undefined;
  const { claimId: _c, claimedAt: _a, completion: _p, ...rest } = u;
  return { ...rest, state: 'open' };
}

/**
 * A presigning tier whose upload records an asynchronous completion can use (both do: S3 and the local folder): the
 * staged size decides sync or async, the record carries the job's state between API containers.
 */
export interface UploadRecords {
  /** Bytes staged for the upload (a multipart upload's once assembled); undefined when nothing is staged. */
  stagedBytes(uploadId: string): Promise<number | undefined>;
  /** The stored record with its completion state; undefined when there is none. */
  readUploadRecord(uploadId: string): Promise<StoredUpload | undefined>;
  /** Atomic read-modify-write of the record; `change` answering undefined writes nothing (and so answers undefined). */
  changeUploadRecord(uploadId: string, change: (u: StoredUpload) => StoredUpload | undefined): Promise<StoredUpload | undefined>;
  /**
   * Writes the upload's commit request (`_uploads/<id>.commit`), whose creation starts the upload-commit workflow
   * through S3's event to EventBridge (a deployment whose API functions cannot reach Step Functions). Optional: the
   * folder tier has no such events (`npm start` starts the workflow in-process).
   */
  requestCommit?(uploadId: string, body: string): Promise<void>;
}

export function hasUploadRecords(t: object): t is UploadRecords {
  const r = t as Partial<UploadRecords>;
  return (
    typeof r.stagedBytes === 'function' && typeof r.changeUploadRecord === 'function' && typeof r.readUploadRecord === 'function'
  );
}
