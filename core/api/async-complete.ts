/**
 * Asynchronous upload completion. On S3 the committed value is copied from the staging object (CopyObject, or a
 * multipart copy above the copy threshold), which for a value of several GiB takes longer than API Gateway lets a
 * request run (29 s). A completion whose staged object is at least `asyncCompleteBytes`, in a runtime that runs the
 * upload-commit workflow, therefore answers `202` and leaves the copy and the versioned commit to that workflow
 * (workflows/steps/upload-commit-steps.ts); the parts were assembled in the request already (S3's
 * CompleteMultipartUpload is quick), so the job's input is the upload's identity alone. Deployed, the job is started
 * by the S3 event of the upload's commit request (an EventBridge rule), since the API functions' VPC has no route
 * to Step Functions; `npm start` starts it through its workflow service.
 *
 * The owner polls by completing again (same uploadId): `202` while the job runs, then `200` with the answer the job
 * stored in the upload's record (exactly what the synchronous completion answers), or the job's failure as a typed
 * error once, the upload given back so the next completion starts over. Anyone else's completion finds no upload of
 * theirs (`404 NOT_FOUND`, as before): the poll reads the record only for its owner.
 */
import { ERROR_STATUS, StrataError, type ErrorCode } from '../errors.js';
import type { Presigning, Tier, UploadClaim, UploadRecord } from '../tiers/tier.js';
import {
  asyncPoll,
  failureTold,
  handedToJob,
  hasUploadRecords,
  jobNotStarted,
  recordOf,
  type AsyncCompletion,
} from '../tiers/upload-record.js';
import { canStartWorkflow, startWorkflow } from './admin-operations.js';
import type { ApiResult } from './http.js';
import { json } from './http.js';
import type { ApiContext } from './operations.js';

const GiB = 1024 ** 3;

/**
 * Staged objects from this size complete asynchronously (STRATA_ASYNC_COMPLETE_BYTES). 1 GiB: a CopyObject of that
 * much within one bucket takes seconds (S3 copies at tens to hundreds of MB/s per object), well inside API Gateway's
 * 29 s; several GiB (and any multipart copy, above 5 GiB) may not. Smaller completions stay synchronous: one
 * request, no polling.
 */
export const DEFAULT_ASYNC_COMPLETE_BYTES = GiB;

/** The poll interval suggested for a copy of `bytes`: a second per GiB, 1 to 30 s. */
export function retryAfterSeconds(bytes: number | undefined): number {
  return Math.min(30, Math.max(1, Math.ceil((bytes ?? GiB) / GiB)));
}

function accepted(uploadId: string, bytes: number | undefined): ApiResult {
  const seconds = retryAfterSeconds(bytes);
  return json(202, { uploadId, status: 'completing', retryAfterSeconds: seconds }, { 'retry-after': String(seconds) });
}

/**
 * The owner's poll of an asynchronous completion: `202` while its job runs, `200` with the stored answer once
 * committed, the failure (thrown, once) when it failed. Undefined when there is nothing to report (no job, or the
 * upload is not the caller's): the completion then proceeds as a synchronous one would.
 */
export async function pollAsyncCompletion(
  ctx: ApiContext,
  presigner: Tier & Presigning,
  uploadId: string,
  accept: (r: UploadRecord) => boolean,
): Promise<ApiResult | undefined> {
  if (!hasUploadRecords(presigner)) return undefined;
  const u = await presigner.readUploadRecord(uploadId);
  // Not the caller's: nothing is read out of it and nothing changes; the claim below answers 404 as for any stranger.
  if (!u || !accept(recordOf(u))) return undefined;
  const poll = asyncPoll(u, Date.now());
  if (poll.state === 'running') return accepted(uploadId, u.completion?.bytes);
  if (poll.state === 'committed') {
    // Another process committed it: this container answers the write, so its own reads must show it from now on.
    ctx.coordinator.forgetNear(recordOf(u).ns, recordOf(u).key);
    return json(200, poll.result);
  }
  if (poll.state === 'failed') {
    // Told once: of two polls racing, one answers the failure and the other goes on as a new completion would.
    if (!(await presigner.changeUploadRecord(uploadId, failureTold))) return undefined;
    const { code, message, details } = poll.failure;
    const known = Object.hasOwn(ERROR_STATUS, code) ? (code as ErrorCode) : 'TIER_UNAVAILABLE';
    throw new StrataError(known, message, { ...details, uploadId, completion: 'failed' });
  }
  return undefined;
}

/**
 * Hands the claimed upload's commit to the upload-commit workflow when its staged object is large enough and this
 * runtime can run the workflow: `202`. Undefined to commit in the request (small, no workflows, or not enabled).
 */
export async function completeAsynchronously(
  ctx: ApiContext,
  presigner: Tier & Presigning,
  claim: UploadClaim,
  opts: Pick<AsyncCompletion, 'ttlSeconds' | 'tags' | 'contentType'>,
): Promise<ApiResult | undefined> {
  const threshold = ctx.asyncCompleteBytes ?? DEFAULT_ASYNC_COMPLETE_BYTES;
  if (threshold === 0 || !hasUploadRecords(presigner)) return undefined;
  // Deployed, the API functions run in a VPC without a route to Step Functions (no NAT, no interface endpoint: an
  // idle environment pays for neither): a commit request object's S3 event starts the job. Locally, the runner.
  const viaS3Event = ctx.uploadCommitTrigger === 's3-event';
  if (viaS3Event ? typeof presigner.requestCommit !== 'function' : !canStartWorkflow(ctx, 'upload-commit')) return undefined;
  const { uploadId, owner, ns, key } = claim.record;
  const bytes = await presigner.stagedBytes(uploadId);
  if (bytes === undefined || bytes < threshold) return undefined;
  const kept = {
    ...(opts.ttlSeconds !== undefined ? { ttlSeconds: opts.ttlSeconds } : {}),
    ...(opts.tags !== undefined ? { tags: opts.tags } : {}),
    ...(opts.contentType !== undefined ? { contentType: opts.contentType } : {}),
    bytes,
  };
  const handed = await presigner.changeUploadRecord(uploadId, (u) => handedToJob(u, claim.claimId, kept, Date.now()));
  if (!handed) return undefined; // the claim was lost meanwhile: the synchronous commit refuses it as before
  const input = { ns, key, uploadId, owner, claimId: claim.claimId };
  try {
    if (viaS3Event) await presigner.requestCommit!(uploadId, JSON.stringify(input));
    // Named after the claim: a retried start of the same claim starts no second job (EXECUTION_EXISTS).
    else await startWorkflow(ctx, 'upload-commit', input, `upload-${uploadId}-${claim.claimId}`);
  } catch (e) {
    await presigner.changeUploadRecord(uploadId, (u) => jobNotStarted(u, claim.claimId)).catch(() => {});
    throw e;
  }
  return accepted(uploadId, bytes);
}
