/**
 * `/local-blobs/<token>`: the local server's stand-in for S3 presigned URLs of the local folder tier, streamed both
 * ways and not bound by the API's body limit. Downloads honour one byte range (206, as S3's presigned GET:
 * core/api/ranges.ts), uploads take one PUT of the whole value, or one PUT per part of a multipart upload
 * (core/tiers/multipart.ts). Answers use S3's statuses (403 invalid, 404 gone, 412 precondition failed, 416).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { isStrataError, StrataError, ValidationError } from '../../core/errors.js';
import { errorResult } from '../../core/api/http.js';
import { contentRange, parseRange } from '../../core/api/ranges.js';
import { MAX_PART_BYTES } from '../../core/tiers/multipart.js';
import { LocalFolderTier, StagedUploadExistsError } from '../../core/tiers/local-folder-tier.js';

/** Largest value accepted through a local upload URL (S3's single PUT limit), and largest part of a multipart one. */
export const MAX_UPLOAD_BYTES = 5 * 1024 * 1024 * 1024;

export async function serveBlob(req: IncomingMessage, res: ServerResponse, blobs: LocalFolderTier, token: string): Promise<void> {
  const isHead = req.method === 'HEAD';
  let decoded: string;
  try {
    decoded = decodeURIComponent(token);
  } catch {
    // A malformed escape (`%zz`, a lone `%E2`) is the client's error, not a 500: refuse it as the API does a path parameter.
    req.resume();
    return send(res, errorResult(new ValidationError('token', 'is not valid percent-encoding')), isHead);
  }
  const claims = blobs.verifyBlobToken(decoded);
  const allowed = claims && (claims.op === 'get' ? req.method === 'GET' || isHead : req.method === 'PUT');
  if (!claims || !allowed) {
    req.resume();
    return send(
      res,
      {
        statusCode: 403,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          error: { code: 'FORBIDDEN', message: 'the blob URL is invalid, expired, or used with the wrong method' },
        }),
      },
      isHead,
    );
  }
  if (claims.op === 'part') {
    const part = await blobs.writeUploadPart(claims.uploadId, claims.partNumber, req, { maxBytes: MAX_PART_BYTES });
    if (!part) {
      req.resume();
      return send(res, errorResult(new StrataError('NOT_FOUND', 'the upload is completed, aborted or unknown')), false);
    }
    // The part's ETag in `etag`, where S3's UploadPart answers it; completion names the part by it.
    const body = JSON.stringify({ uploadId: claims.uploadId, partNumber: claims.partNumber, size: part.size });
    return send(res, { statusCode: 200, headers: { 'content-type': 'application/json', etag: part.etag }, body }, false);
  }
  if (claims.op === 'put') {
    let size: number;
    try {
      ({ size } = await blobs.writeStagedUpload(claims.uploadId, req, { maxBytes: MAX_UPLOAD_BYTES }));
    } catch (e) {
      if (!(e instanceof StagedUploadExistsError)) throw e;
      // The URL takes one PUT, as the S3 tier's (If-None-Match: * signed in): bytes are staged, or the upload is completed.
      req.resume();
      return send(
        res,
        preconditionFailed('this upload URL was used already (bytes are staged, or the upload is completed)'),
        false,
      );
    }
    return send(
      res,
      {
        statusCode: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ uploadId: claims.uploadId, size }),
      },
      false,
    );
  }
  const rangeHeader = isHead ? undefined : req.headers.range;
  let blob;
  try {
    blob = await blobs.readBlob(claims.ns, claims.key, (size) => parseRange(rangeHeader, size));
  } catch (e) {
    if (isStrataError(e) && e.code === 'RANGE_NOT_SATISFIABLE') return send(res, errorResult(e), isHead);
    throw e;
  }
  if (!blob) return send(res, errorResult(new StrataError('NOT_FOUND', 'the value is gone (deleted or expired)')), isHead);
  if (blob.header.version !== claims.version) {
    // The URL serves the version it was made for or nothing, as S3 does with the If-Match the S3 tier signs in.
    blob.body.destroy();
    const message = `the key holds version ${blob.header.version} now; this URL was made for version ${claims.version}`;
    return send(res, preconditionFailed(message), isHead);
  }
  const common = {
    'content-type': blob.header.contentType ?? 'application/octet-stream',
    'x-strata-version': String(blob.header.version),
    'accept-ranges': 'bytes',
  };
  const r = blob.range;
  if (r)
    res.writeHead(206, {
      ...common,
      'content-length': r.end - r.start + 1,
      'content-range': contentRange({ ...r, size: blob.size }),
    });
  else res.writeHead(200, { ...common, 'content-length': blob.size });
  if (isHead) {
    blob.body.destroy();
    res.end();
    return;
  }
  await pipeline(blob.body, res);
}

/**
 * 412 of a blob URL. These URLs stand in for S3 presigned URLs and answer with S3's statuses (403 invalid, 404 gone,
 * 412 precondition failed), not with the API's error codes (docs/API.md, Large values).
 */
function preconditionFailed(message: string): APIGatewayProxyResult {
  const body = JSON.stringify({ error: { code: 'PRECONDITION_FAILED', message } });
  return { statusCode: 412, headers: { 'content-type': 'application/json' }, body };
}

/** Writes a handler's answer (the local server's, and the blob routes'). */
export function send(res: ServerResponse, result: APIGatewayProxyResult, isHead: boolean): void {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(result.headers ?? {})) headers[k] = String(v);
  for (const [k, v] of Object.entries(result.multiValueHeaders ?? {})) headers[k] = v.map(String);
  const body = result.body ? Buffer.from(result.body, result.isBase64Encoded ? 'base64' : 'utf8') : Buffer.alloc(0);
  if (!isHead || !('content-length' in headers)) headers['content-length'] = String(body.length);
  res.writeHead(result.statusCode, headers);
  res.end(isHead ? undefined : body);
}
