/**
 * Multipart uploads (core/tiers/multipart.ts): `POST .../uploads/{key}` with `multipart: true` creates one, `.../parts`
 * hands out part URLs, `.../complete` with `parts` assembles and commits it (operations.ts completeUpload, through
 * Coordinator.commitUpload as any upload), `.../abort` drops it. Like every upload it belongs to its creator: an
 * upload that is not the caller's (another tenant, another ns or key) is 404 NOT_FOUND, as an unknown one.
 */
import { NotFoundError, permanentDetails, StrataError } from '../errors.js';
import { MAX_PARTS, MIN_PART_BYTES, MAX_PART_BYTES, supportsMultipart, type MultipartPresigning } from '../tiers/multipart.js';
import type { NewUpload, Presigning, Tier, UploadRecord } from '../tiers/tier.js';
import type { ApiEvent, ApiResult } from './http.js';
import { json } from './http.js';
import type { ApiContext } from './operations.js';
import { callerIdentity } from './tenant-access.js';
import { abortUploadSchema, jsonBody, keyParams, partUrlsSchema } from './validation.js';

function uploadPath(ns: string, key: string): string {
  return `/v1/ns/${ns}/uploads/${encodeURIComponent(key)}`;
}

/** The presigner, when it takes multipart uploads (503 permanent otherwise: a deployment setting). */
export function multipartPresigner(presigner: Tier & Presigning): Tier & Presigning & MultipartPresigning {
  if (supportsMultipart(presigner)) return presigner;
  throw new StrataError(
    'TIER_UNAVAILABLE',
    `the presigning tier '${presigner.name}' does not take multipart uploads; upload with one PUT`,
    permanentDetails(),
  );
}

/** Whether the record is this caller's upload of this ns/key (the test every upload route applies). */
export function ownedBy(owner: string | null, ns: string, key: string): (r: UploadRecord) => boolean {
  return (r) => r.owner === owner && r.ns === ns && r.key === key;
}

export function uploadNotFound(uploadId: string, ns: string, key: string): NotFoundError {
  return new NotFoundError(
    `upload '${uploadId}' not found for key '${key}' in namespace '${ns}': unknown, expired, already completed or aborted, ` +
      'created by another tenant, or created for another namespace or key',
    { uploadId },
  );
}

/** `createUpload` with `multipart: true`: the upload's id and where to get part URLs, complete and abort it. */
export async function createMultipartUpload(
  ctx: ApiContext,
  presigner: Tier & Presigning,
  upload: NewUpload,
): Promise<ApiResult> {
  const tier = multipartPresigner(presigner);
  const { expiresAt } = await tier.createMultipartUpload(upload, ctx.urlTtlSeconds);
  const base = uploadPath(upload.ns, upload.key);
  return json(200, {
    uploadId: upload.uploadId,
    ns: upload.ns,
    key: upload.key,
    multipart: true,
    expiresAt: new Date(expiresAt).toISOString(),
    partsUrl: `${base}/parts`,
    completeUrl: `${base}/complete`,
    abortUrl: `${base}/abort`,
    minPartBytes: MIN_PART_BYTES,
    maxPartBytes: MAX_PART_BYTES,
    maxParts: MAX_PARTS,
  });
}

/** `POST .../uploads/{key}/parts`: presigned PUT URLs for the listed parts of the caller's open multipart upload. */
export async function partUrls(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const body = jsonBody(event, partUrlsSchema);
  const tier = multipartPresigner(requirePresigner(ctx));
  const owner = callerIdentity(ctx.tenantAccess, event);
  const urls = await tier.presignParts(body.uploadId, [...new Set(body.partNumbers)], ownedBy(owner, ns, key), ctx.urlTtlSeconds);
  if (!urls) throw uploadNotFound(body.uploadId, ns, key);
  return json(200, {
    uploadId: body.uploadId,
    parts: urls.map((u) => ({ ...u, expiresAt: new Date(u.expiresAt).toISOString() })),
  });
}

/** `POST .../uploads/{key}/abort`: the caller's upload ends without a value (its parts are dropped); 204. */
export async function abortUpload(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const body = jsonBody(event, abortUploadSchema);
  const tier = multipartPresigner(requirePresigner(ctx));
  const owner = callerIdentity(ctx.tenantAccess, event);
  const claim = await tier.claimUpload(body.uploadId, ownedBy(owner, ns, key));
  if (!claim) throw uploadNotFound(body.uploadId, ns, key);
  try {
    await tier.abortUpload(claim);
  } catch (e) {
    await tier.releaseUpload(claim).catch(() => {});
    throw e;
  }
  return { statusCode: 204, headers: {}, body: '' };
}

/** The tier that hands out presigned URLs (uploads, downloads); 503 (permanent) where none is configured. */
export function requirePresigner(ctx: ApiContext): Tier & Presigning {
  if (!ctx.presigner)
    throw new StrataError(
      'TIER_UNAVAILABLE',
      'large values need a cold tier that supports presigned URLs (S3 or the local folder); none is configured',
      permanentDetails(),
    );
  return ctx.presigner;
}
