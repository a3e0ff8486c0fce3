import { randomBytes } from 'node:crypto';
import { NotFoundError, StrataError } from '../errors.js';
import type { Coordinator, ServedBy } from '../coordinator/coordinator.js';
import type { EntryHeader } from '../model/entry.js';
import { validateKey } from '../model/keys.js';
import type { Presigning, Tier } from '../tiers/tier.js';
import type { WorkflowService } from '../workflows/service.js';
import type { ApiEvent, ApiResult } from './http.js';
import { binary, bodyBytes, empty, json } from './http.js';
import type { TenantAccess } from './tenant-access.js';
import {
  batchKeysSchema,
  batchPutSchema,
  completeUploadSchema,
  ifMatchHeader,
  ifNoneMatchHeader,
  jsonBody,
  keyParams,
  nsParam,
  tagsHeader,
  ttlHeader,
  uploadRequestSchema,
  valueContentType,
} from './validation.js';

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
   * The workflows the admin API starts and reports on (a local run's in-process runner). Absent: the admin routes
   * use the runtime's service (Step Functions, see runtime/workflows.ts) or answer 503 WORKFLOWS_UNAVAILABLE.
   */
  workflows?: WorkflowService;
  /** Which namespaces each API key may use (STRATA_TENANT_ACCESS); absent: not enforced (see api/tenant-access.ts). */
  tenantAccess?: TenantAccess;
}

function entryHeaders(h: EntryHeader, served: ServedBy | string): Record<string, string> {
  const out: Record<string, string> = {
    'x-strata-tier': served,
    'x-strata-version': String(h.version),
    etag: `"${h.version}"`,
  };
  if (h.expiresAt !== null) out['x-strata-expires-at'] = new Date(h.expiresAt).toISOString();
  if (h.tags.length) out['x-strata-tags'] = h.tags.join(',');
  return out;
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

function uploadPath(ns: string, key: string): string {
  return `/v1/ns/${ns}/uploads/${encodeURIComponent(key)}`;
}

export async function getKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const r = await ctx.coordinator.get(ns, key);
  if (!r) throw new NotFoundError(`key '${key}' not found in namespace '${ns}'`, { ns, key });
  const h = r.entry.header;
  if (h.size > ctx.inlineLimitBytes && ctx.presigner) {
    const url = await ctx.presigner.presignDownload(ns, key, ctx.urlTtlSeconds);
    return empty(303, { ...entryHeaders(h, r.tier), location: url.url });
  }
  return binary(200, r.entry.value, h.contentType ?? 'application/octet-stream', entryHeaders(h, r.tier));
}

export async function headKey(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const r = await ctx.coordinator.head(ns, key);
  if (!r) return empty(404);
  return empty(200, { ...entryHeaders(r.header, r.tier), 'content-type': r.header.contentType ?? 'application/octet-stream', 'x-strata-size': String(r.header.size) });
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
    throw new StrataError('PAYLOAD_TOO_LARGE', `value is ${value.length} bytes; values above ${ctx.inlineLimitBytes} bytes go through an upload URL (POST ${uploadPath(ns, key)})`, { limit: ctx.inlineLimitBytes, size: value.length, uploadUrl: uploadPath(ns, key) });
  }
  const w = await ctx.coordinator.put(ns, key, value, { ttlSeconds, tags, contentType, ifMatch, ifNoneMatch });
  const headers = entryHeaders({ version: w.version, expiresAt: w.expiresAt, tags: tags ?? [], size: w.size, hash: '', flags: {} }, w.tiers.join(','));
  return json(200, { ns, key, version: w.version, expiresAt: iso(w.expiresAt), size: w.size, tiers: w.tiers, ...(w.superseded ? { superseded: true } : {}) }, headers);
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
      // Too much to carry inline in one response: point at the download URL instead of the bytes.
      return { key: keys[i]!, found: true, version: h.version, expiresAt: iso(h.expiresAt), tier: r.tier, size: h.size, tooLarge: true, downloadUrl: `/v1/ns/${ns}/downloads/${encodeURIComponent(keys[i]!)}` };
    }
    return { key: keys[i]!, found: true, value: r.entry.value.toString('base64'), version: h.version, expiresAt: iso(h.expiresAt), tier: r.tier, contentType: h.contentType ?? 'application/octet-stream', tags: h.tags };
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
      throw new StrataError('PAYLOAD_TOO_LARGE', `batch values add up to more than ${ctx.inlineLimitBytes} bytes; split the batch or upload large values one by one`, { limit: ctx.inlineLimitBytes, field: `body.items[${i}].value` });
    }
    return { key, value, opts: { ttlSeconds: it.ttl, tags: it.tags, contentType: it.contentType ?? 'application/octet-stream' } };
  });
  const written = await ctx.coordinator.putMany(ns, items);
  return json(200, { items: written.map((w, i) => ({ key: items[i]!.key, version: w.version, expiresAt: iso(w.expiresAt), size: w.size, tiers: w.tiers })) });
}

export async function batchDelete(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const ns = nsParam(event);
  const keys = batchKeys(jsonBody(event, batchKeysSchema).keys);
  const deleted = await ctx.coordinator.deleteMany(ns, keys);
  return json(200, { items: deleted.map((d, i) => ({ key: keys[i]!, version: d.version })) });
}

function requirePresigner(ctx: ApiContext): Tier & Presigning {
  if (!ctx.presigner) throw new StrataError('TIER_UNAVAILABLE', 'large values need a cold tier that supports presigned URLs (S3 or the local folder); none is configured');
  return ctx.presigner;
}

export async function createUpload(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const opts = jsonBody(event, uploadRequestSchema, { optional: true });
  const presigner = requirePresigner(ctx);
  const uploadId = randomBytes(18).toString('base64url');
  const url = await presigner.presignUpload(uploadId, ctx.urlTtlSeconds, opts.contentType);
  return json(200, { uploadId, ns, key, ...url, expiresAt: iso(url.expiresAt), completeUrl: `${uploadPath(ns, key)}/complete` });
}

export async function completeUpload(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const body = jsonBody(event, completeUploadSchema);
  requirePresigner(ctx);
  const w = await ctx.coordinator.commitUpload(ns, key, body.uploadId, { ttlSeconds: body.ttl, tags: body.tags, contentType: body.contentType });
  return json(200, { ns, key, version: w.version, expiresAt: iso(w.expiresAt), size: w.size, tiers: w.tiers });
}

export async function downloadUrl(ctx: ApiContext, event: ApiEvent): Promise<ApiResult> {
  const { ns, key } = keyParams(event);
  const presigner = requirePresigner(ctx);
  const h = await ctx.coordinator.head(ns, key);
  if (!h) throw new NotFoundError(`key '${key}' not found in namespace '${ns}'`, { ns, key });
  // Presigned URLs read the cold copy: make sure a value that so far lives only in upper tiers is there.
  await ctx.coordinator.ensureIn(presigner.name, ns, key);
  const url = await presigner.presignDownload(ns, key, ctx.urlTtlSeconds);
  return json(200, { url: url.url, method: 'GET', expiresAt: iso(url.expiresAt), version: h.header.version, size: h.header.size });
}

export async function stats(ctx: ApiContext): Promise<ApiResult> {
  return json(200, await ctx.coordinator.stats());
}

export async function health(ctx: ApiContext): Promise<ApiResult> {
  const h = await ctx.coordinator.health();
  return json(h.status === 'down' ? 503 : 200, h);
}

