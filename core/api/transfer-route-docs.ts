import type { Json, RouteDoc } from './route-types.js';
import { abortUploadSchema, partUrlsSchema } from './validation.js';
import { fromZod, header, json } from './route-doc-parts.js';

/**
 * The OpenAPI entries of the streaming additions (docs/API.md, "Large values"): byte ranges of a read and the
 * multipart upload routes, as route-docs.ts has them for the others; ROUTE_DOCS includes the routes.
 */

const UPLOAD_ERRORS = ['NOT_FOUND', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'VALIDATION_FAILED', 'TIER_UNAVAILABLE'] as const;

/** `Range` of a key GET (api/ranges.ts). */
export const RANGE_PARAM: Json = header(
  'range',
  'One byte range (`bytes=0-1023`, `bytes=1024-`, `bytes=-512`): 206 with those bytes. Several ranges, or anything that ' +
    'is not a byte range, is ignored (200, the whole value), as S3 does. A range starting at or past the end is 416. A ' +
    '303 is answered before the range applies: send the header on to `location`, which honours it the same way',
  { type: 'string' },
);

/** The 206 and 416 of a key GET. */
export const RANGE_RESPONSES: Record<string, Json> = {
  '206': {
    description: 'The bytes `content-range` names (`bytes <first>-<last>/<size>`), with the headers a 200 would send',
    headers: { 'content-range': { schema: { type: 'string', pattern: '^bytes \\d+-\\d+/\\d+$' } } },
    content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
  },
};

/** What `POST .../uploads/{key}` answers for `multipart: true`. */
export const MULTIPART_CREATED: Json = {
  type: 'object',
  required: ['uploadId', 'multipart', 'expiresAt', 'partsUrl', 'completeUrl', 'abortUrl', 'minPartBytes', 'maxParts'],
  properties: {
    uploadId: { type: 'string' },
    multipart: { const: true },
    expiresAt: { type: 'string', format: 'date-time' },
    partsUrl: { type: 'string', description: 'POST here for part URLs' },
    completeUrl: { type: 'string' },
    abortUrl: { type: 'string' },
    minPartBytes: { type: 'integer', description: 'Smallest part but the last (5 MiB)' },
    maxPartBytes: { type: 'integer', description: 'Largest part (5 GiB)' },
    maxParts: { type: 'integer', description: 'Most parts, and the highest part number (10000)' },
  },
};

export const TRANSFER_ROUTE_DOCS = {
  partUrls: {
    operationId: 'partUrls',
    summary: 'Get presigned URLs for parts of a multipart upload',
    description:
      "For the caller's open multipart upload of this key (else 404 NOT_FOUND, as for an unknown id): one URL per part " +
      "number (1..10000, up to 100 per request). PUT the part's bytes there with `headers`; the answer's `etag` header is " +
      'the ETag to complete with. Parts are 5 MiB to 5 GiB except the last; a part PUT again replaces the earlier one.',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(partUrlsSchema) } } },
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['uploadId', 'parts'],
          properties: {
            uploadId: { type: 'string' },
            parts: {
              type: 'array',
              items: {
                type: 'object',
                required: ['partNumber', 'url', 'method', 'headers', 'expiresAt'],
                properties: {
                  partNumber: { type: 'integer' },
                  url: { type: 'string', format: 'uri' },
                  method: { const: 'PUT' },
                  headers: { type: 'object', additionalProperties: { type: 'string' } },
                  expiresAt: { type: 'string', format: 'date-time' },
                },
              },
            },
          },
        },
        'One URL per part number asked for',
      ),
    },
    errors: [...UPLOAD_ERRORS],
  },
  abortUpload: {
    operationId: 'abortUpload',
    summary: 'Abort an upload: its parts and staged bytes are dropped',
    description:
      'By the tenant that created the upload, for its namespace and key (otherwise 404 NOT_FOUND); it cannot be completed ' +
      'afterwards. Clients abort a multipart upload that failed, so its parts do not wait for the cleanup.',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(abortUploadSchema) } } },
    responses: { '204': { description: 'Aborted' } },
    errors: [...UPLOAD_ERRORS, 'VERSION_CONFLICT'],
  },
} satisfies Record<string, RouteDoc>;
