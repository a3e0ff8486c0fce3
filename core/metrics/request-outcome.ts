/**
 * What one API request did, for its metrics: the operation, the namespace, which tiers served the keys it read,
 * misses, value bytes in and out, and the error code it was answered with. Derived from the request event and the
 * response the handler built (headers such as `x-strata-tier`, base64 body lengths), never by decoding values.
 */
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { ErrorCode } from '../errors.js';
import { isStrataError } from '../errors.js';
import type { Operation, ServedTier } from './metric-catalog.js';

/** Tiers a key can be served from (`none` is a miss, never a hit). */
export const HIT_TIERS = ['l1', 'hot', 'warm', 'cold', 'origin'] as const satisfies readonly ServedTier[];
export type HitTier = (typeof HIT_TIERS)[number];

const HIT_TIER_SET: ReadonlySet<string> = new Set(HIT_TIERS);

/** The operation of each API route (`<method> <resource>`); a test keeps it complete. */
export const OPERATION_BY_ROUTE: Readonly<Record<string, Operation>> = {
  'GET /v1/ns/{ns}/keys/{key}': 'get',
  'HEAD /v1/ns/{ns}/keys/{key}': 'head',
  'PUT /v1/ns/{ns}/keys/{key}': 'put',
  // A touch is a write (of metadata): counted with the puts, so no dashboard or alarm gains a series for it.
  'PATCH /v1/ns/{ns}/keys/{key}': 'put',
  'DELETE /v1/ns/{ns}/keys/{key}': 'delete',
  // A listing reads a page of keys' headers, as a batch get reads their values: counted with those, so no dashboard
  // or alarm gains a series for it.
  'GET /v1/ns/{ns}/keys': 'batch-get',
  'POST /v1/ns/{ns}/batch/get': 'batch-get',
  'POST /v1/ns/{ns}/batch/put': 'batch-put',
  'POST /v1/ns/{ns}/batch/delete': 'batch-delete',
  'POST /v1/ns/{ns}/uploads/{key}': 'upload-url',
  'POST /v1/ns/{ns}/uploads/{key}/complete': 'upload-complete',
  // Multipart uploads: minting part URLs is handing out upload URLs, an abort ends an upload as a completion does;
  // counted with those, so no dashboard or alarm gains a series for them.
  'POST /v1/ns/{ns}/uploads/{key}/parts': 'upload-url',
  'POST /v1/ns/{ns}/uploads/{key}/abort': 'upload-complete',
  'GET /v1/ns/{ns}/downloads/{key}': 'download-url',
  // Invalidation by tag or prefix and the tenant's namespace flush (the admin flush is counted with the admin routes).
  'POST /v1/ns/{ns}/invalidate': 'invalidate',
  'DELETE /v1/ns/{ns}': 'invalidate',
  'DELETE /v1/admin/namespaces/{namespace}': 'admin',
  'GET /v1/admin/invalidations': 'admin',
  'GET /v1/stats': 'stats',
  'GET /v1/health': 'health',
  // The cost model's reports and the API's OpenAPI document (service function): counted with the other service reports.
  'GET /v1/cost/placements': 'stats',
  'GET /v1/cost/paper-2010': 'stats',
  'GET /v1/cost/catalogs': 'stats',
  'GET /v1/openapi.json': 'stats',
  'POST /v1/admin/workflows/{workflow}/executions': 'admin',
  'GET /v1/admin/workflows/executions': 'admin',
  'GET /v1/admin/workflows/executions/{execution}': 'admin',
  'GET /v1/admin/policy': 'admin',
  'PUT /v1/admin/policy': 'admin',
  'POST /v1/admin/policy/validate': 'admin',
  'GET /v1/admin/policy/versions': 'admin',
  'GET /v1/admin/policy/versions/{version}': 'admin',
  'POST /v1/admin/policy/rollback': 'admin',
  'GET /v1/admin/policy/firings': 'admin',
  'GET /v1/admin/nodes': 'admin',
  'GET /v1/admin/nodes/replacement': 'admin',
  'PUT /v1/admin/nodes/replacement': 'admin',
  'POST /v1/admin/nodes/{node}/replace': 'admin',
  'DELETE /v1/admin/nodes/{node}': 'admin',
  'POST /v1/admin/fleet/upgrade': 'admin',
};

export interface RequestOutcome {
  /** Absent for a request no route serves. */
  operation?: Operation;
  /** The namespace as requested (not yet bounded). */
  namespace?: string;
  statusCode: number;
  /** The typed error the request was answered with; absent on success and on a plain miss. */
  errorCode?: ErrorCode;
  /** Keys served, by tier (reads only). */
  hits: Partial<Record<HitTier, number>>;
  /** Keys found nowhere; `undefined` for operations that look nothing up. */
  misses?: number;
  /** For a single-key read: the tier that served it, `none` for a miss. */
  servedTier?: ServedTier;
  /** Value bytes written (writes) and read (reads). */
  bytesIn?: number;
  bytesOut?: number;
}

/** Size of base64 data from its length, without decoding it. */
export function base64DecodedLength(b64: string): number {
  if (b64.length === 0) return 0;
  const padding = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - padding;
}

function bodyLength(body: string | null | undefined, isBase64: boolean | undefined): number {
  if (!body) return 0;
  return isBase64 ? base64DecodedLength(body) : Buffer.byteLength(body, 'utf8');
}

function headerValue(result: APIGatewayProxyResult | undefined, name: string): string | undefined {
  const v = result?.headers?.[name];
  return v === undefined ? undefined : String(v);
}

/** Sum of the `size` fields of a small JSON response (`{ size }` or `{ items: [{ size }] }`), 0 if unreadable. */
function writtenSize(body: string | undefined): number {
  if (!body) return 0;
  try {
    const parsed = JSON.parse(body) as { size?: unknown; items?: { size?: unknown }[] };
    const sizes = parsed.items ? parsed.items.map((i) => i.size) : [parsed.size];
    return sizes.reduce<number>((sum, s) => sum + (typeof s === 'number' ? s : 0), 0);
  } catch {
    return 0;
  }
}

export interface BatchGetTally {
  hits: Partial<Record<HitTier, number>>;
  misses: number;
  /** Decoded size of the values carried inline. */
  valueBytes: number;
}

/**
 * Tallies a batch-get response body (`{"items":[{"key":..,"found":..,"value":"<base64>","tier":..}]}`) in one
 * pass over its string tokens, without parsing it: the body can be megabytes of base64, which `JSON.parse` would
 * copy into strings only to count them (~20x slower). Exact for any JSON text: only a string followed by `:` is
 * a property name, and escaped quotes inside strings are skipped.
 */
export function tallyBatchGetBody(body: string): BatchGetTally {
  const tally: BatchGetTally = { hits: {}, misses: 0, valueBytes: 0 };
  let i = 0;
  for (;;) {
    const start = body.indexOf('"', i);
    if (start === -1) break;
    const end = closingQuote(body, start);
    if (end === -1) break;
    i = end + 1;
    if (body.charCodeAt(i) !== 58 /* : */) continue;
    const name = body.slice(start + 1, end);
    if (name === 'value' || name === 'tier') {
      const vStart = i + 1;
      if (body.charCodeAt(vStart) !== 34 /* " */) continue;
      const vEnd = closingQuote(body, vStart);
      if (vEnd === -1) break;
      if (name === 'value') tally.valueBytes += base64DecodedLength(body.slice(vStart + 1, vEnd));
      else {
        const tier = body.slice(vStart + 1, vEnd);
        if (HIT_TIER_SET.has(tier)) tally.hits[tier as HitTier] = (tally.hits[tier as HitTier] ?? 0) + 1;
      }
      i = vEnd + 1;
    } else if (name === 'found' && body.startsWith('false', i + 1)) {
      tally.misses++;
    }
  }
  return tally;
}

/** Index of the quote closing the string that opens at `open`, or -1. */
function closingQuote(s: string, open: number): number {
  let q = s.indexOf('"', open + 1);
  while (q !== -1) {
    let backslashes = 0;
    for (let k = q - 1; k > open && s.charCodeAt(k) === 92 /* \ */; k--) backslashes++;
    if (backslashes % 2 === 0) return q;
    q = s.indexOf('"', q + 1);
  }
  return -1;
}

/**
 * The outcome of one request from its event and what it was answered with: the response (`after`) or the error
 * and the response the error responder built from it (`onError`).
 */
export function requestOutcome(
  event: Pick<APIGatewayProxyEvent, 'httpMethod' | 'resource' | 'pathParameters' | 'body' | 'isBase64Encoded'>,
  result: APIGatewayProxyResult | undefined,
  error?: unknown,
): RequestOutcome {
  const operation = OPERATION_BY_ROUTE[`${event.httpMethod} ${event.resource}`];
  const statusCode = result?.statusCode ?? 500;
  const out: RequestOutcome = { operation, namespace: event.pathParameters?.ns ?? undefined, statusCode, hits: {} };
  const failed = error !== undefined && error !== null;
  const errorCode: ErrorCode | undefined = failed ? (isStrataError(error) ? error.code : 'INTERNAL') : undefined;

  switch (operation) {
    case 'get':
    case 'head': {
      // A key that is not there is a miss, not an error: GET answers it with NOT_FOUND, HEAD with a bare 404.
      const miss = errorCode === 'NOT_FOUND' || (!failed && statusCode === 404);
      const tier = headerValue(result, 'x-strata-tier');
      if (miss) {
        out.misses = 1;
        out.servedTier = 'none';
        return out;
      }
      if (!failed && tier && HIT_TIER_SET.has(tier)) {
        out.hits[tier as HitTier] = 1;
        out.misses = 0;
        out.servedTier = tier as HitTier;
        if (operation === 'get') out.bytesOut = statusCode === 200 ? bodyLength(result?.body, result?.isBase64Encoded) : 0;
      }
      break;
    }
    case 'batch-get':
      if (!failed && statusCode === 200 && result?.body) {
        const t = tallyBatchGetBody(result.body);
        out.hits = t.hits;
        out.misses = t.misses;
        out.bytesOut = t.valueBytes;
      }
      break;
    case 'put':
      if (!failed) out.bytesIn = bodyLength(event.body, event.isBase64Encoded);
      break;
    case 'batch-put':
    case 'upload-complete':
      // Small responses (no values in them): their sizes are the bytes written.
      if (!failed) out.bytesIn = writtenSize(result?.body);
      break;
    default:
      break;
  }
  if (errorCode) out.errorCode = errorCode;
  return out;
}
