import * as z from 'zod';
import type { Coordinator } from '../../coordinator/coordinator.js';
import { ConfigError, StrataError } from '../../errors.js';
import { NAMESPACE_PATTERN } from '../../model/keys.js';
import { writeBody } from '../../coordinator/write-body.js';
import { COMMIT_REQUEST_SUFFIX, UPLOAD_ID_PATTERN } from '../../tiers/storage-key.js';
import type { Presigning, Tier } from '../../tiers/tier.js';
import {
  jobCommitted,
  jobFailed,
  jobStarted,
  type AsyncCompletion,
  type StoredUpload,
  type UploadRecords,
} from '../../tiers/upload-record.js';
import { firstStateInput } from './data-steps.js';
import type { ScaleDeps } from './scale-steps.js';

/**
 * UploadCommit: the asynchronous half of an upload's completion (api/async-complete.ts). The API request assembled
 * the parts (S3: CompleteMultipartUpload), claimed the upload and recorded the completion in the upload's record;
 * this step commits the staged bytes exactly as the synchronous completion does (Coordinator.commitUpload: a
 * versioned write stamped when it commits, the copy under the target's precondition, so a newer write acknowledged
 * meanwhile is never overwritten), then stores the PUT-like answer in the record for the owner's next poll. A
 * failure gives the upload back, with the failure in the record (the owner's next poll answers it, once).
 *
 * The input is the upload's identity and nothing else (no part list, no metadata: those stay in the record), far
 * below Step Functions' 256 KiB payload limit.
 */
export const uploadCommitRequest = z.strictObject({
  ns: z.string().regex(NAMESPACE_PATTERN, 'ns must be a namespace'),
  key: z.string().min(1).max(1024),
  uploadId: z.string().regex(UPLOAD_ID_PATTERN, 'uploadId must be an upload id'),
  /** Who completed it (api/tenant-access.ts callerIdentity): the record's owner, checked again here. */
  owner: z.string().max(512).nullable(),
  /** The claim the completion took: a job for an earlier claim finds the record moved on and does nothing. */
  claimId: z.string().min(1).max(64),
});
export type UploadCommitRequest = z.infer<typeof uploadCommitRequest>;

/**
 * A deployed execution's input: the S3 key of the upload's commit request (`<prefix>/_uploads/<id>.commit`), whose
 * creation event the EventBridge rule turned into this execution (cdk/stacks/workflows-stack.ts). The rest of the
 * upload's identity is read from its record.
 */
export const uploadCommitEvent = z.strictObject({
  object: z.string().regex(/(?:^|\/)_uploads\/[A-Za-z0-9_-]{8,64}\.commit$/, 'object must be an upload commit request key'),
});

/** What the step needs beyond the workflows' usual dependencies: built on first use (the step Lambda's tiers). */
export interface UploadCommitDeps {
  coordinator: Pick<Coordinator, 'commitUpload'>;
  presigner?: Tier & Presigning & Partial<UploadRecords>;
}

export type UploadCommitStepDeps = Pick<ScaleDeps, 'progress'> & { uploads?: () => UploadCommitDeps };

/** The record's failure entry for an error (a StrataError keeps its code; anything else is a tier failure). */
export function failureOf(e: unknown): NonNullable<AsyncCompletion['failure']> {
  if (e instanceof StrataError && e.expose)
    return { code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) };
  const message = e instanceof Error ? e.message : String(e);
  return { code: 'TIER_UNAVAILABLE', message: `the upload's asynchronous commit failed: ${message}` };
}

const failedInput = z.looseObject({
  error: z.looseObject({ Error: z.string().optional(), Cause: z.string().optional() }).optional(),
});

export function uploadCommitSteps(d: UploadCommitStepDeps) {
  const deps = (): UploadCommitDeps & { presigner: Tier & Presigning & UploadRecords } => {
    const u = d.uploads?.();
    const p = u?.presigner;
    if (!u || !p || typeof p.changeUploadRecord !== 'function' || typeof p.readUploadRecord !== 'function')
      throw new ConfigError('the upload-commit workflow needs the tiers with presigned uploads (S3, or the local folder)');
    return { ...u, presigner: p as Tier & Presigning & UploadRecords };
  };
  /** The record, when it is still this job's (claimed by its claim, handed to a job, for this owner, ns and key). */
  const ours = (u: StoredUpload | undefined, r: UploadCommitRequest): u is StoredUpload =>
    !!u &&
    u.state === 'claimed' &&
    u.claimId === r.claimId &&
    u.completion?.claimId === r.claimId &&
    u.owner === r.owner &&
    u.ns === r.ns &&
    u.key === r.key;
  /**
   * The upload's identity from the execution's input: given whole (started through the workflow service), or read
   * from the record named by the commit request's key (started by its S3 event). Undefined: no job to run there.
   */
  const identify = async (
    request: Record<string, unknown>,
    presigner: UploadRecords,
  ): Promise<{ r: UploadCommitRequest; u: StoredUpload | undefined } | undefined> => {
    if (!('object' in request)) {
      const r = uploadCommitRequest.parse(request);
      return { r, u: await presigner.readUploadRecord(r.uploadId) };
    }
    const { object } = uploadCommitEvent.parse(request);
    const uploadId = object.slice(object.lastIndexOf('/') + 1, -COMMIT_REQUEST_SUFFIX.length);
    const u = await presigner.readUploadRecord(uploadId);
    if (!u?.completion) return undefined;
    return { r: { ns: u.ns, key: u.key, uploadId, owner: u.owner, claimId: u.completion.claimId }, u };
  };
  const progress = (exec: string, phase: string, done: number) =>
    d.progress
      .update(exec, 'upload-commit', (p) => {
        p.total = 1;
        p.done = done;
        p.phase = phase;
      })
      .catch(() => {}); // the record, not the progress document, is what the owner's poll reads

  return {
    /** Commits the upload (the whole job: one step). */
    async commit(raw: Record<string, unknown>) {
      const { exec, request } = firstStateInput(raw, 'upload-commit');
      const { coordinator, presigner } = deps();
      const found = await identify(request, presigner);
      if (!found) return { committed: false };
      const { r, u } = found;
      // Not this job's any more (a later claim, given back, or never handed to a job): nothing to do, and nothing
      // to record either, the record belongs to whoever holds it now.
      if (!ours(u, r)) return { uploadId: r.uploadId, committed: false };
      // One execution per claim: an event delivered twice (EventBridge delivers at least once) commits once.
      const took = await presigner.changeUploadRecord(r.uploadId, (cur) => jobStarted(cur, r.claimId, exec));
      if (!took) return { uploadId: r.uploadId, committed: false };
      await progress(exec, `committing upload '${r.uploadId}' to '${r.ns}/${r.key}'`, 0);
      const c = took.completion!;
      let w;
      try {
        w = await coordinator.commitUpload(r.ns, r.key, r.uploadId, {
          ...(c.ttlSeconds !== undefined ? { ttlSeconds: c.ttlSeconds } : {}),
          ...(c.tags !== undefined ? { tags: c.tags } : {}),
          ...(c.contentType !== undefined ? { contentType: c.contentType } : {}),
        });
      } catch (e) {
        await presigner.changeUploadRecord(r.uploadId, (cur) => jobFailed(cur, r.claimId, failureOf(e)));
        throw e;
      }
      const result = { ns: r.ns, key: r.key, ...writeBody(w) };
      await presigner.changeUploadRecord(r.uploadId, (cur) => jobCommitted(cur, r.claimId, result));
      await progress(exec, `committed version ${w.version}`, 1);
      return { uploadId: r.uploadId, committed: true, version: w.version, size: w.size };
    },

    /**
     * The state machine's catch: the commit step failed without recording it (cut off at its timeout, or its
     * Lambda failed to run). Gives the upload back with the failure, unless the step already did.
     */
    async failed(raw: Record<string, unknown>) {
      const { error, ...rest } = failedInput.parse(raw);
      const { exec, request } = firstStateInput(rest, 'upload-commit');
      const { presigner } = deps();
      const found = await identify(request, presigner);
      if (!found) return { committed: false };
      const { r } = found;
      const why = [error?.Error, error?.Cause].filter(Boolean).join(': ') || 'unknown error';
      const failure = { code: 'TIER_UNAVAILABLE', message: `the upload's asynchronous commit failed: ${why}` };
      // Only the execution that took the job (or one that failed before any did) speaks for it.
      await presigner.changeUploadRecord(r.uploadId, (cur) =>
        cur.completion?.execution !== undefined && cur.completion.execution !== exec
          ? undefined
          : jobFailed(cur, r.claimId, failure),
      );
      return { uploadId: r.uploadId, committed: false };
    },
  };
}
