import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { StrataError } from '../errors.js';

/** The API Gateway REST proxy event our handlers take (the local server builds the same shape). */
export type ApiEvent = APIGatewayProxyEvent;
export type ApiResult = APIGatewayProxyResult;

const JSON_TYPE = 'application/json; charset=utf-8';

/** Case-insensitive header lookup (API Gateway keeps the client's casing). */
export function header(event: Pick<ApiEvent, 'headers'>, name: string): string | undefined {
  const h = event.headers ?? {};
  const direct = h[name];
  if (direct !== undefined) return direct;
  const lower = name.toLowerCase();
  for (const [k, v] of Object.entries(h)) if (k.toLowerCase() === lower) return v ?? undefined;
  return undefined;
}

export function bodyBytes(event: Pick<ApiEvent, 'body' | 'isBase64Encoded'>): Buffer {
  if (event.body === null || event.body === undefined) return Buffer.alloc(0);
  return event.isBase64Encoded ? Buffer.from(event.body, 'base64') : Buffer.from(event.body, 'utf8');
}

export function json(statusCode: number, body: unknown, headers: Record<string, string> = {}): ApiResult {
  return { statusCode, headers: { 'content-type': JSON_TYPE, ...headers }, body: JSON.stringify(body) };
}

export function binary(statusCode: number, value: Buffer, contentType: string, headers: Record<string, string> = {}): ApiResult {
  return {
    statusCode,
    headers: { 'content-type': contentType, ...headers },
    body: value.toString('base64'),
    isBase64Encoded: true,
  };
}

export function empty(statusCode: number, headers: Record<string, string> = {}): ApiResult {
  return { statusCode, headers, body: '' };
}

export function errorResult(err: StrataError, requestId?: string): ApiResult {
  const body = err.toJSON();
  if (requestId) body.error.details = { ...body.error.details, requestId };
  const headers: Record<string, string> = {};
  if ((err.code === 'TIER_UNAVAILABLE' || err.code === 'RATE_LIMITED') && !err.permanent) headers['retry-after'] = '1';
  // A 416 names the size of the value (RFC 9110 §15.5.17), so the client can ask again within it.
  if (err.code === 'RANGE_NOT_SATISFIABLE' && typeof err.details?.size === 'number')
    headers['content-range'] = `bytes */${err.details.size}`;
  return json(err.status, body, headers);
}
