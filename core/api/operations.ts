import { randomBytes } from 'node:crypto';
import { NotFoundError, StrataError, TransformedScopeError, ValidationError } from '../errors.js';
import type { Coordinator } from '../coordinator/coordinator.js';
import type { ServedBy } from '../coordinator/types.js';
import { isStale, type EntryHeader } from '../model/entry.js';
import { validateKey } from '../model/keys.js';
import type { NewUpload, PresignedDownload, PresignedUrl, Presigning, Tier, UploadRecord } from '../tiers/tier.js';
import type { WorkflowService } from '../workflows/admin-service.js';
import type { PolicyAdmin } from '../policy/service.js';
import type { FiringHistory } from '../policy/evaluator.js';
import type { StoredFiringHistory } from '../policy/evaluator-store.js';
import type { ApiEvent, ApiResult } from './http.js';
import type { NodeAdmin } from './node-operations.js';
import { binary, bodyBytes, empty, header, json } from './http.js';
import { contentRange, parseRange } from './ranges.js';
import { callerIdentity } from './tenant-access.js';
import { type TenantAccess } from '../model/tenancy.js';
import {
  batchKeysSchema,
  batchPutSchema,
  completeUploadSchema,
  ifMatchHeader,
  ifNoneMatchHeader,
  ifNoneMatchRead,
  jsonBody,
  keyParams,
  notModified,
  nsParam,
  tagsHeader,
  touchSchema,
  ttlHeader,
  createUploadSchema,
  valueContentType,
} from './validation.js';
import { createMultipartUpload, multipartPresigner, requirePresigner } from './multipart-operations.js';
import { iso, writeBody } from '../coordinator/write-body.js';
import { completeAsynchronously, pollAsyncCompletion } from './async-complete.js';

/** What the API operations need; built once per container by the runtime. */
export interface ApiContext {
  coordinator: Coordinator;
  /** Largest value carried inline in a request or response (Lambda payloads are 6 MB, base64 adds a third). */
  inlineLimitBytes: number;
  /** The tier that hands out presigned URLs for large values (S3, or the local folder), if any. */
  presigner?: Tier & Presigning;
  /** Lifetime of presigned URLs. */
  urlTtlSeconds: number;
  /**
   * Tag invalidations of a namespace within a window of this many minutes share one sweep, started when it is over
   * (namespace-operations.ts); 0: none. @default 60
   */
  tagSweepWindowMinutes?: number;
  /**
   * Uploads whose staged object has at least this many bytes complete asynchronously (202, the upload-commit
   * workflow) where this runtime runs that workflow; 0: never (api/async-complete.ts). @default 1 GiB
   */
  asyncCompleteBytes?: number;
  /**
   * How an asynchronous completion starts its job: `s3-event`, by writing the upload's commit request, whose S3
   * event an EventBridge rule turns into the execution (the deployed API functions cannot reach Step Functions);
   * absent, through the workflow service (`npm start`'s runner).
   */
  uploadCommitTrigger?: 's3-event';
  /**
   * How a flush or an invalidation starts its sweep: `s3-event`, by writing a sweep request into the S3 tier, whose
   * S3 event an EventBridge rule turns into the execution; absent, through the workflow service.
   */
  sweepTrigger?: 's3-event';
  /**
   * The workflows the admin API starts and reports on (a local run's in-process runner). Absent: the admin routes
   * use the runtime's service (Step Functions, see composition/workflow-service-env.ts) or answer 503 WORKFLOWS_UNAVAILABLE.
   */
  workflows?: WorkflowService;
  /**
   * The policy engine's admin side (read, validate, replace, history, rollback of the policy document; a
   * PolicyAdministration over the ring store). Absent: the policy routes answer 503 POLICIES_UNAVAILABLE.
   */
  policyAdmin?: PolicyAdmin;
  /**
   * The background evaluator's firing history (core/policy/evaluator.ts), where this runtime runs one (`npm start`).
   * Absent: `GET /v1/admin/policy/firings` answers 503 POLICIES_UNAVAILABLE.
   */
  policyFirings?: FiringHistory;
  /** The scheduled evaluator's history in the policy store (AWS), read where no evaluator runs in-process. */
  storedFirings?: StoredFiringHistory;
  /** Which namespaces each API key may use (STRATA_TENANT_ACCESS); absent: not enforced (see api/tenant-access.ts). */
  tenantAccess?: TenantAccess;
  /**
   * The warm tier's ring and nodes, for the node admin routes (`/v1/admin/nodes...`: list, remove, the replacement
   * controls), where this runtime has a warm tier (composition/api-context.ts). Absent: those routes answer 503
   * TIER_UNAVAILABLE (permanent); replacing a node needs only the workflows.
   */
  nodeAdmin?: NodeAdmin;
}

function entryHeaders(h: EntryHeader, served: ServedBy | string): Record<string, string> {
  const out: Record<string, string> = {
    'x-strata-tier': served,
    'x-strata-version': String(h.version),
    etag: `"${h.version}"`,
  };
  // An origin's value under stale-while-revalidate expires at its TTL (staleAt); past it, it is served marked stale.
  const expiresAt = h.staleAt ?? h.expiresAt;
  if (expiresAt !== null) out['x-strata-expires-at'] = new Date(expiresAt).toISOString();
  if (isStale(h)) out['x-strata-stale'] = 'true';
  if (h.tags.length) out['x-strata-tags'] = h.tags.join(',');
  return out;
}

function uploadPath(ns: string, key: string): string {
  return `/v1/ns/${ns}/uploads/${encodeURIComponent(key)}`;
}

export async function getKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const condition = ifNoneMatchRead(event);
  const r = await ctx.coordinator.get(ns, key);
  if (!r) throw new NotFoundError(`key '${key}' not found in namespace '${ns}'`, { ns, key });
  const h = r.entry.header;
  // The version the client holds is the one a read finds now: 304, no body (RFC 9110 §15.4.5: the headers a 200
  // would send, etag included). Any other version, newer or (never) older, is sent as usual.
  if (notModified(condition, h.version)) return empty(304, entryHeaders(h, r.tier));
  // A compressed or encrypted value is served inline: its stored bytes are not the value (no presigned URL).
  if (h.size > ctx.inlineLimitBytes && ctx.presigner && !r.transformed) {
    const url = await presignCurrent(ctx, ctx.presigner, ns, key, h.version);
    // The headers describe the version the location serves (which fails once that version is replaced).
    const served = url.header.version === h.version ? r.tier : ctx.presigner.name;
    return empty(303, { ...entryHeaders(url.header, served), location: url.url, ...locationHeaders(url) });
  }
  // A Range header applies to the value served here; for a 303 the client sends it on to the location.
  const range = parseRange(header(event, 'range'), r.entry.value.length);
  const type = h.contentType ?? 'application/octet-stream';
  const served = { ...entryHeaders(h, r.tier), 'accept-ranges': 'bytes' };
  if (!range) return binary(200, r.entry.value, type, served);
  const part = r.entry.value.subarray(range.start, range.end + 1);
  return binary(206, part, type, { ...served, 'content-range': contentRange(range) });
}

export async function headKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const condition = ifNoneMatchRead(event);
  const r = await ctx.coordinator.head(ns, key);
  // The same answer as GET (RFC 9110 §9.3.2), so the JSON content type the document states: HTTP drops the body.
  if (!r) throw new NotFoundError(`key '${key}' not found in namespace '${ns}'`, { ns, key });
  if (notModified(condition, r.header.version)) return empty(304, entryHeaders(r.header, r.tier));
  return empty(200, {
    ...entryHeaders(r.header, r.tier),
    'content-type': r.header.contentType ?? 'application/octet-stream',
    'x-strata-size': String(r.header.size),
  });
}

export async function putKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const contentType = valueContentType(event);
  const ttlSeconds = ttlHeader(event);
  const tags = tagsHeader(event);
  const ifMatch = ifMatchHeader(event);
  const ifNoneMatch = ifNoneMatchHeader(event);
  const value = bodyBytes(event);
  if (value.length > ctx.inlineLimitBytes) {
    throw new StrataError(
      'PAYLOAD_TOO_LARGE',
      `value is ${value.length} bytes; values above ${ctx.inlineLimitBytes} bytes go through an upload URL (POST ${uploadPath(ns, key)})`,
      { limit: ctx.inlineLimitBytes, size: value.length, uploadUrl: uploadPath(ns, key) },
    );
  }
  const w = await ctx.coordinator.put(ns, key, value, { ttlSeconds, tags, contentType, ifMatch, ifNoneMatch });
  const headers = entryHeaders(
    { version: w.version, expiresAt: w.expiresAt, tags: tags ?? [], size: w.size, hash: '', flags: {} },
    w.tiers.join(','),
  );
  return json(200, { ns, key, ...writeBody(w) }, headers);
}

/**
 * `PATCH`: a new TTL (`{ "ttl": seconds }`, or `null` for none) without sending the value again; a write of metadata
 * with a new version, `if-match` applying as to a PUT (Coordinator.touch).
 */
export async function touchKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const ifMatch = ifMatchHeader(event);
  const { ttl } = jsonBody(event, touchSchema);
  const w = await ctx.coordinator.touch(ns, key, { ttlSeconds: ttl, ifMatch, maxBytes: ctx.inlineLimitBytes });
  return json(200, { ns, key, ...writeBody(w) }, { 'x-strata-version': String(w.version), etag: `"${w.version}"` });
}

export async function deleteKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const d = await ctx.coordinator.delete(ns, key, { ifMatch: ifMatchHeader(event) });
  return empty(204, { 'x-strata-version': String(d.version) });
}

function batchKeys(keys: string[]): string[] {
  return keys.map((k, i) => validateKey(k, `body.keys[${i}]`));
}

export async function batchGet(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const ns = nsParam(event);
  const keys = batchKeys(jsonBody(event, batchKeysSchema).keys);
  const results = await ctx.coordinator.getMany(ns, keys);
  let budget = ctx.inlineLimitBytes;
  const items = results.map((r, i) => {
    if (!r) return { key: keys[i]!, found: false };
    const h = r.entry.header;
    budget -= h.size;
    if (budget < 0) {
      // Too much to carry inline in one response: point at the download URL instead of the bytes (the key's own
      // URL for a compressed or encrypted value, which has no presigned URL).
      const key = encodeURIComponent(keys[i]!);
      return {
        key: keys[i]!,
        found: true,
        version: h.version,
        expiresAt: iso(h.expiresAt),
        tier: r.tier,
        size: h.size,
        tooLarge: true,
        downloadUrl: r.transformed ? `/v1/ns/${ns}/keys/${key}` : `/v1/ns/${ns}/downloads/${key}`,
      };
    }
    return {
      key: keys[i]!,
      found: true,
      value: r.entry.value.toString('base64'),
      version: h.version,
      expiresAt: iso(h.expiresAt),
      tier: r.tier,
      contentType: h.contentType ?? 'application/octet-stream',
      tags: h.tags,
    };
  });
  return json(200, { items });
}

export async function batchPut(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const ns = nsParam(event);
  const body = jsonBody(event, batchPutSchema);
  let total = 0;
  const items = body.items.map((it, i) => {
    const key = validateKey(it.key, `body.items[${i}].key`);
    const value = Buffer.from(it.value, 'base64');
    total += value.length;
    if (total > ctx.inlineLimitBytes) {
      throw new StrataError(
        'PAYLOAD_TOO_LARGE',
        `batch values add up to more than ${ctx.inlineLimitBytes} bytes; split the batch or upload large values one by one`,
        { limit: ctx.inlineLimitBytes, field: `body.items[${i}].value` },
      );
    }
    return { key, value, opts: { ttlSeconds: it.ttl, tags: it.tags, contentType: it.contentType ?? 'application/octet-stream' } };
  });
  const written = await ctx.coordinator.putMany(ns, items);
  return json(200, { items: written.map((w, i) => ({ key: items[i]!.key, ...writeBody(w) })) });
}

export async function batchDelete(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const ns = nsParam(event);
  const keys = batchKeys(jsonBody(event, batchKeysSchema).keys);
  const deleted = await ctx.coordinator.deleteMany(ns, keys);
  return json(200, { items: deleted.map((d, i) => ({ key: keys[i]!, version: d.version })) });
}

/**
 * Headers the client must send to the 303's location (S3 signs `If-Match` into its URLs), each as
 * `x-strata-location-<name>`: a redirect cannot carry request headers, so the client copies them (the SDK does).
 */
function locationHeaders(url: PresignedUrl): Record<string, string> {
  return Object.fromEntries(Object.entries(url.headers).map(([k, v]) => [`x-strata-location-${k.toLowerCase()}`, v]));
}

/**
 * A download URL for the live version, which the presigning tier serves until that version is replaced (then 412).
 * Usually the presigner holds the version `wanted` (uploads commit there, writes go through it); when it is behind,
 * the value is copied down first, so the URL never serves an older version than the one the caller just saw.
 */
async function presignCurrent(
  ctx: ApiContext,
  presigner: Tier & Presigning,
  ns: string,
  key: string,
  wanted: number,
): Promise<PresignedDownload> {
  const first = await presigner.presignDownload(ns, key, ctx.urlTtlSeconds).catch((e: unknown) => {
    if (e instanceof NotFoundError) return undefined;
    throw e;
  });
  if (first && first.header.version >= wanted) return first;
  await ctx.coordinator.ensureIn(presigner.name, ns, key);
  return presigner.presignDownload(ns, key, ctx.urlTtlSeconds);
}

/**
 * Hands out an upload URL bound to its creator: the upload's record (tiers/upload-record.ts) holds the caller's
 * identity (api/tenant-access.ts `callerIdentity`), ns, key and the metadata given here, which the completion
 * applies. The id is random (144 bits) but is no capability: the URL only takes the bytes, once.
 */
export async function createUpload(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const { multipart, ...opts } = jsonBody(event, createUploadSchema, { optional: true });
  const presigner = requirePresigner(ctx);
  const transform = ctx.coordinator.policies.transformFor(ns, key, opts.tags);
  if (transform) throw new TransformedScopeError(ns, key, transform.rules, 'upload');
  const uploadId = randomBytes(18).toString('base64url');
  const upload: NewUpload = {
    uploadId,
    owner: callerIdentity(ctx.tenantAccess, event),
    ns,
    key,
    ...(opts.ttl !== undefined ? { ttlSeconds: opts.ttl } : {}),
    ...(opts.tags !== undefined ? { tags: opts.tags } : {}),
    ...(opts.contentType !== undefined ? { contentType: opts.contentType } : {}),
  };
  if (multipart) return createMultipartUpload(ctx, presigner, upload);
  const url = await presigner.presignUpload(upload, ctx.urlTtlSeconds);
  return json(200, { uploadId, ns, key, ...url, expiresAt: iso(url.expiresAt), completeUrl: `${uploadPath(ns, key)}/complete` });
}

/**
 * Completes the caller's own upload of this key, once: the record is claimed atomically (of concurrent completions
 * exactly one proceeds; the others get 409 VERSION_CONFLICT, and 404 once it is completed), then committed with the
 * metadata given at creation; a field given again here wins (`ttl: null` included). An upload that is unknown,
 * expired, completed, or was created by another tenant (or key) or for another ns/key is 404 NOT_FOUND: which of
 * these is not said, so another tenant learns nothing about it. A large staged object is committed asynchronously
 * (202; the owner polls by completing again: async-complete.ts).
 */
export async function completeUpload(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const body = jsonBody(event, completeUploadSchema);
  const presigner = requirePresigner(ctx);
  const owner = callerIdentity(ctx.tenantAccess, event);
  const accept = (r: UploadRecord) => r.owner === owner && r.ns === ns && r.key === key;
  // The owner's poll of an asynchronous completion (async-complete.ts); anyone else goes on to the 404 below.
  const polled = await pollAsyncCompletion(ctx, presigner, body.uploadId, accept);
  if (polled) return polled;
  const claim = await presigner.claimUpload(body.uploadId, accept);
  if (!claim) {
    throw new NotFoundError(
      `upload '${body.uploadId}' not found for key '${key}' in namespace '${ns}': unknown, expired, already completed, ` +
        'created by another tenant, or created for another namespace or key',
      { uploadId: body.uploadId },
    );
  }
  const rec = claim.record;
  const opts = {
    ttlSeconds: body.ttl !== undefined ? body.ttl : rec.ttlSeconds,
    tags: body.tags ?? rec.tags,
    contentType: body.contentType ?? rec.contentType,
  };
  let w;
  try {
    // A multipart upload's parts become its staged bytes first; a single-PUT upload has them already.
    if (body.parts && !rec.multipart)
      throw new ValidationError('body.parts', 'this upload took one PUT of the whole value: complete it without parts');
    if (body.parts) await multipartPresigner(presigner).completeParts(claim, body.parts);
    else if (rec.multipart)
      throw new ValidationError('body.parts', 'a multipart upload completes with its parts: [{ partNumber, etag }, ...]');
    // A large staged object is committed by the upload-commit workflow: 202, and the owner polls.
    const started = await completeAsynchronously(ctx, presigner, claim, opts);
    if (started) return started;
    w = await ctx.coordinator.commitUpload(ns, key, body.uploadId, opts);
  } catch (e) {
    // Not completed (or completed and the tier already marked it so, which this leaves alone): the owner may retry.
    await presigner.releaseUpload(claim).catch(() => {});
    throw e;
  }
  return json(200, { ns, key, ...writeBody(w) });
}

/**
 * A URL for the current version, bound to it (S3: signed `If-Match`, sent with `headers`; the local folder: the
 * version in the token): once the key holds another version the URL answers 412 (404 once it is gone), never
 * other bytes than `version` and `size` describe.
 */
export async function downloadUrl(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const presigner = requirePresigner(ctx);
  const h = await ctx.coordinator.head(ns, key);
  if (!h) throw new NotFoundError(`key '${key}' not found in namespace '${ns}'`, { ns, key });
  if (h.transformed) throw new TransformedScopeError(ns, key, [], 'download');
  const url = await presignCurrent(ctx, presigner, ns, key, h.header.version);
  const { version, size } = url.header;
  return json(200, { url: url.url, method: 'GET', headers: url.headers, expiresAt: iso(url.expiresAt), version, size });
}

export async function stats(ctx: ApiContext): Promise<ApiResult> {
  return json(200, await ctx.coordinator.stats());
}

export async function health(ctx: ApiContext): Promise<ApiResult> {
  const h = await ctx.coordinator.health();
  return json(h.status === 'down' ? 503 : 200, h);
}
