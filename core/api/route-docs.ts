import { type ErrorCode } from '../errors.js';
import { WORKFLOW_NAMES } from '../workflows/progress.js';
import {
  batchKeysSchema,
  batchPutSchema,
  completeUploadSchema,
  createUploadSchema,
  IF_NONE_MATCH_READ_PATTERN,
  touchSchema,
} from './validation.js';
import { MULTIPART_CREATED, RANGE_PARAM, RANGE_RESPONSES, TRANSFER_ROUTE_DOCS } from './transfer-route-docs.js';
import { MAX_TTL_SECONDS, TAG_PATTERN } from '../model/schemas.js';
import { MAX_TAGS } from '../model/schemas.js';
import type { Json, RouteDoc } from './route-types.js';
import { POLICY_ROUTE_DOCS } from './policy-route-docs.js';
import { NODE_ROUTE_DOCS } from './node-route-docs.js';
import { NAMESPACE_ROUTE_DOCS } from './namespace-route-docs.js';
import {
  EXECUTION_START_ERRORS,
  executionNameParam,
  executionStarted,
  fromZod,
  header,
  ifMatchParam,
  json,
  query,
  ref,
} from './route-doc-parts.js';

/**
 * What the OpenAPI document says about each route beyond the route table: summaries, headers, bodies,
 * responses and the error codes it answers with. Each route in routes.ts carries its entry (`doc`); the JSON
 * bodies come from the zod schemas the handlers validate with. What zod does not describe (raw value bodies,
 * headers, response shapes) is stated here, next to docs/API.md.
 */

/** What any route can answer: a throttled key, an internal error. Namespaced and admin routes add NAMESPACE_FORBIDDEN. */
export const COMMON_ERRORS: ErrorCode[] = ['RATE_LIMITED', 'INTERNAL'];
const KEY_ERRORS: ErrorCode[] = ['VALIDATION_FAILED', 'TIER_UNAVAILABLE'];

const ENTRY_HEADERS: Json = {
  'x-strata-tier': {
    description: 'The tier that served the read (`l1`, `hot`, `warm`, `cold`, `origin`), or the tiers written, comma-separated',
    schema: { type: 'string' },
  },
  'x-strata-version': {
    description: 'The entry version (a decimal integer; also as `etag: "<version>"`)',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  'x-strata-expires-at': {
    description: 'Expiry (ISO-8601); absent when the entry does not expire',
    schema: { type: 'string', format: 'date-time' },
  },
  'x-strata-tags': { description: 'The entry tags, comma-separated, when set', schema: { type: 'string' } },
  'x-strata-stale': {
    description:
      "`true` on a read-through origin's value served past its TTL, within the namespace's `staleWhileRevalidateSeconds` " +
      'while one refresh runs (docs/POLICIES.md, "Read-through origins"); absent otherwise',
    schema: { type: 'string', enum: ['true'] },
  },
};

const WRITE_HEADERS = [
  header('x-strata-ttl', `Time to live in whole seconds (1..${MAX_TTL_SECONDS}); absent: the namespace default`, {
    type: 'integer',
    minimum: 1,
    maximum: MAX_TTL_SECONDS,
  }),
  // A list in a header: comma-separated (style simple), as the server splits it (spaces around commas are trimmed).
  {
    ...header('x-strata-tags', `Comma-separated tags (at most ${MAX_TAGS}; spaces around the commas are ignored)`, {
      type: 'array',
      maxItems: MAX_TAGS,
      items: { type: 'string', pattern: TAG_PATTERN.source },
    }),
    style: 'simple',
    explode: false,
  },
  ifMatchParam('Write'),
  header('if-none-match', 'With `*`: create only (409 VERSION_CONFLICT when the key exists)', { type: 'string', enum: ['*'] }),
];

/** If-None-Match of a read: a revalidation of the version the client holds (validation.ts ifNoneMatchRead). */
const READ_IF_NONE_MATCH = header(
  'if-none-match',
  'The version(s) the client holds, as entity tags (`"12"`, `W/"12"` or `12`, comma-separated), or `*`: 304 Not Modified, ' +
    'with no body, when the stored version is one of them (`*`: when the key exists); anything else as without it',
  { type: 'string', pattern: IF_NONE_MATCH_READ_PATTERN.source },
);

/** The 304 of a read whose If-None-Match names the stored version. */
const NOT_MODIFIED: Json = {
  description: 'If-None-Match names the stored version: no body, the headers a 200 would send (`etag` included)',
  headers: ENTRY_HEADERS,
};

/** `GET /v1/stats`: what Coordinator.stats() returns (test/unit/openapi.test.ts compares a live answer). */
const STATS_SCHEMA: Json = {
  type: 'object',
  required: ['uptimeSeconds', 'tiers', 'promotions', 'flushed'],
  properties: {
    uptimeSeconds: { type: 'integer' },
    tiers: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'kind', 'hits', 'misses', 'errors', 'ok'],
        // Each kind of tier adds counters of its own (the memory tier's segments, the warm tier's nodes, ...).
        additionalProperties: true,
        properties: {
          name: { type: 'string' },
          kind: { type: 'string' },
          entries: { type: 'integer' },
          bytes: { type: 'integer' },
          capacityBytes: { type: 'integer', description: 'What the tier may hold, when it has a bound' },
          evictions: { type: 'integer' },
          hits: { type: 'integer' },
          misses: { type: 'integer' },
          errors: { type: 'integer' },
          ok: { type: 'boolean', description: 'false when the tier could not report its own statistics' },
        },
      },
    },
    promotions: { type: 'integer', description: 'Read hits copied up into a higher tier since start' },
    flushed: { type: 'integer', description: 'Write-back entries flushed below the hot tier since start' },
    hotFence: {
      type: 'object',
      description: 'The hot fence (a hot tier that may stall or lose writes), when one guards the hot tier',
      required: ['active', 'leaseMs', 'bumps', 'unknownHotCopies'],
      properties: {
        active: { type: 'boolean' },
        leaseMs: { type: 'integer' },
        bumps: { type: 'integer' },
        unknownHotCopies: { type: 'integer' },
      },
    },
  },
};

export const ROUTE_DOCS = {
  getKey: {
    operationId: 'getKey',
    summary: 'Read a value',
    description:
      'Walks the tiers (near cache, hot, warm, cold); a hit below the top is promoted. A namespace with an origin reads through on a miss.',
    parameters: [READ_IF_NONE_MATCH, RANGE_PARAM],
    responses: {
      '200': {
        description: 'The value bytes, with the content type they were stored with',
        headers: ENTRY_HEADERS,
        content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
      },
      ...RANGE_RESPONSES,
      '303': {
        description:
          'The value is above the inline limit: `location` is a presigned download URL for the version the headers describe (412 once ' +
          'that version is replaced)',
        headers: {
          location: { schema: { type: 'string', format: 'uri' } },
          'x-strata-location-if-match': {
            description: 'Send as `if-match` with the request to `location` (S3 deployments: a signed header)',
            schema: { type: 'string' },
          },
        },
      },
      '304': NOT_MODIFIED,
    },
    errors: ['NOT_FOUND', 'ORIGIN_FAILED', 'RANGE_NOT_SATISFIABLE', ...KEY_ERRORS],
  },
  headKey: {
    operationId: 'headKey',
    summary: 'Read the headers of a value',
    parameters: [READ_IF_NONE_MATCH],
    responses: {
      // The headers GET would send, content type included; a HEAD response never has a body (nor its 404).
      '200': {
        description: "The entry headers and the value's content type, no body",
        headers: { ...ENTRY_HEADERS, 'x-strata-size': { description: 'Value size in bytes', schema: { type: 'string' } } },
        content: { '*/*': {} },
      },
      '304': NOT_MODIFIED,
    },
    errors: ['NOT_FOUND', ...KEY_ERRORS],
  },
  putKey: {
    operationId: 'putKey',
    summary: 'Write a value',
    parameters: WRITE_HEADERS,
    requestBody: {
      required: true,
      description:
        'The raw value bytes, up to the inline limit, with their media type (`type/subtype[; parameters]`, at most 200 characters; ' +
        'none: application/octet-stream). multipart/form-data is 415, a content type that is not a media type 400',
      content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
    },
    responses: { '200': json(ref('WriteResult'), 'Written') },
    errors: ['VERSION_CONFLICT', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  touchKey: {
    operationId: 'touchKey',
    summary: "Change a key's time to live (a touch)",
    description:
      'A write of metadata: the value, tags and content type stay, the expiry is set from `ttl` (`null`: none) and the entry gets a ' +
      'new version. Applied on the version read, so a write landing meanwhile is never undone (the touch then applies to it). ' +
      'Values above the inline limit are 413: write them again through an upload.',
    parameters: [ifMatchParam('Touch')],
    requestBody: {
      required: true,
      content: { 'application/json': { schema: fromZod(touchSchema) } },
    },
    responses: { '200': json(ref('WriteResult'), 'Touched: the new version and expiry') },
    errors: ['NOT_FOUND', 'VERSION_CONFLICT', 'PAYLOAD_TOO_LARGE', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  deleteKey: {
    operationId: 'deleteKey',
    summary: 'Delete a value (writes a tombstone)',
    parameters: [ifMatchParam('Delete')],
    responses: { '204': { description: 'Deleted', headers: { 'x-strata-version': ENTRY_HEADERS['x-strata-version'] } } },
    errors: ['VERSION_CONFLICT', ...KEY_ERRORS],
  },
  batchGet: {
    operationId: 'batchGet',
    summary: 'Read up to 100 values',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(batchKeysSchema) } } },
    responses: { '200': json(ref('BatchGetResult'), 'One item per key, in order') },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  batchPut: {
    operationId: 'batchPut',
    summary: 'Write up to 100 values (validated whole before anything is written)',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(batchPutSchema) } } },
    responses: {
      '200': json(
        { type: 'object', required: ['items'], properties: { items: { type: 'array', items: ref('WriteResult') } } },
        'One item per input item, in order',
      ),
    },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ...KEY_ERRORS],
  },
  batchDelete: {
    operationId: 'batchDelete',
    summary: 'Delete up to 100 values',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(batchKeysSchema) } } },
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['items'],
          properties: {
            items: {
              type: 'array',
              items: {
                type: 'object',
                required: ['key', 'version'],
                properties: { key: { type: 'string' }, version: { type: 'integer' } },
              },
            },
          },
        },
        'The tombstone version per key',
      ),
    },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  createUpload: {
    operationId: 'createUpload',
    summary: 'Get a presigned URL to upload a large value',
    description:
      'The upload belongs to the caller (its tenant), this namespace and key; `ttl`, `tags` and `contentType` are applied at ' +
      'completion. The URL takes one PUT, with `headers`. With `multipart: true`: no URL, but a multipart upload whose part ' +
      'URLs come from `partsUrl` (values too big for one PUT, or of unknown length).',
    requestBody: { required: false, content: { 'application/json': { schema: fromZod(createUploadSchema) } } },
    responses: {
      '200': json(
        {
          oneOf: [
            {
              type: 'object',
              required: ['uploadId', 'url', 'method', 'headers', 'expiresAt'],
              properties: {
                uploadId: { type: 'string' },
                url: { type: 'string', format: 'uri' },
                method: { const: 'PUT' },
                headers: { type: 'object', additionalProperties: { type: 'string' } },
                expiresAt: { type: 'string', format: 'date-time' },
              },
            },
            MULTIPART_CREATED,
          ],
        },
        'PUT the bytes to `url` with `headers` (multipart: each part to its URL), then complete the upload',
      ),
    },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  completeUpload: {
    operationId: 'completeUpload',
    summary: 'Complete an upload: the uploaded bytes become the value',
    description:
      'Once, by the tenant that created the upload, for its namespace and key (otherwise 404 NOT_FOUND, as for an unknown id); ' +
      '409 VERSION_CONFLICT while another completion of it runs. `ttl`, `tags` and `contentType` given here replace those given ' +
      'at creation. A multipart upload names its `parts` (ascending, each with the ETag its PUT answered); a part missing, ' +
      'with another ETag, or below 5 MiB while not the last is 400 VALIDATION_FAILED naming it. A staged object of at least ' +
      'STRATA_ASYNC_COMPLETE_BYTES (1 GiB by default), where the runtime runs the upload-commit workflow, is committed ' +
      'asynchronously: 202, and the owner polls by completing again with the same uploadId (202 while it runs, then the 200 ' +
      'the synchronous completion answers; a failed commit answers its error once and gives the upload back).',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(completeUploadSchema) } } },
    responses: {
      '200': json(ref('WriteResult'), 'Written'),
      '202': {
        ...json(
          {
            type: 'object',
            required: ['uploadId', 'status', 'retryAfterSeconds'],
            additionalProperties: false,
            properties: {
              uploadId: { type: 'string' },
              status: { const: 'completing' },
              retryAfterSeconds: { type: 'integer', minimum: 1, maximum: 30 },
            },
          },
          'Being committed by the upload-commit workflow: complete again (same uploadId) after `retryAfterSeconds`',
        ),
        headers: { 'retry-after': { description: 'Seconds before polling again', schema: { type: 'string' } } },
      },
    },
    errors: ['NOT_FOUND', 'VERSION_CONFLICT', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'WORKFLOWS_UNAVAILABLE', ...KEY_ERRORS],
  },
  downloadUrl: {
    operationId: 'downloadUrl',
    summary: 'Get a presigned URL to download a value',
    description:
      'The URL serves the version it was made for (`version`, `size`), given `headers`; once the key holds another version it ' +
      'answers 412.',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['url', 'method', 'headers', 'expiresAt', 'version', 'size'],
          properties: {
            url: { type: 'string', format: 'uri' },
            method: { const: 'GET' },
            headers: { type: 'object', additionalProperties: { type: 'string' } },
            expiresAt: { type: 'string', format: 'date-time' },
            version: { type: 'integer' },
            size: { type: 'integer' },
          },
        },
        'A URL to GET the bytes from, with `headers`',
      ),
    },
    errors: ['NOT_FOUND', ...KEY_ERRORS],
  },
  stats: {
    operationId: 'stats',
    summary: 'Counters and sizes per tier',
    responses: { '200': json(STATS_SCHEMA, 'Service statistics') },
  },
  health: {
    operationId: 'health',
    summary: 'Health of every tier',
    responses: {
      '200': json(ref('Health'), 'At least one tier is up (`ok` or `degraded`)'),
      '503': json(ref('Health'), 'No tier is up (`down`)'),
    },
  },
  openApi: {
    operationId: 'openApi',
    summary: 'This document: the OpenAPI 3.1 description of the API, generated from its route table and request schemas',
    responses: { '200': json({ type: 'object', required: ['openapi', 'info', 'paths'] }, 'The OpenAPI document') },
  },
  costPlacements: {
    operationId: 'costPlacements',
    summary: 'Rank placements (tiers and instance types) for a workload by cost per unit of speedup or by cost',
    description: 'See docs/API.md and docs/COST.md for every field; `text` is what `npm run cost` prints for the same question.',
    parameters: [
      query('valueSize', 'Value size: `1KB`, `1MB`, `1MiB` or bytes', { type: 'string' }, true),
      query('keys', 'Distinct keys held: `500`, `200k`, `1.5M`', { type: 'string' }, true),
      query('requestsPerMonth', 'Reads a month', { type: 'string' }, true),
      query('writesPerMonth', 'Writes a month (default: the expected misses of a cold cache)'),
      query('persistent', 'Only placements whose data survives a node loss', {
        type: 'string',
        enum: ['true', 'false', '1', '0'],
      }),
      query('latencyTarget', 'Hit latency target (`5ms`, `0.2s`)'),
      query('serviceTime', "The origin's time per miss (default `1s`)"),
      query('inRegion', 'Results stay in the region (no transfer-out charge)', {
        type: 'string',
        enum: ['true', 'false', '1', '0'],
      }),
      query('region', 'Price region (default `us-east-1`)'),
      query('catalog', 'Price catalog id (default: the newest)'),
      query('rankBy', 'Ranking', { type: 'string', enum: ['cs', 'cost'] }),
      query('top', 'Return the best n only', { type: 'integer', minimum: 1 }),
    ],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['workload', 'recommendations', 'text'],
          properties: {
            workload: { type: 'object' },
            recommendations: { type: 'array', items: { type: 'object' } },
            excluded: { type: 'array', items: { type: 'object' } },
            ranked: { type: 'integer' },
            text: { type: 'string' },
          },
        },
        'Ranked placements',
      ),
    },
    errors: ['VALIDATION_FAILED'],
  },
  costPaper2010: {
    operationId: 'costPaper2010',
    summary: "Paper 001's cost tables recomputed, with the cells its own formulas do not give",
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['tables', 'cells', 'discrepancies'],
          properties: {
            tables: { type: 'string' },
            cells: { type: 'array', items: { type: 'object' } },
            discrepancies: { type: 'array', items: { type: 'object' } },
            discrepanciesText: { type: 'string' },
          },
        },
        'Tables III and IV',
      ),
    },
  },
  costCatalogs: {
    operationId: 'costCatalogs',
    summary: 'The price catalogs and their regions',
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['catalogs', 'defaultCatalog', 'defaultRegion'],
          properties: {
            catalogs: { type: 'array', items: { type: 'object' } },
            defaultCatalog: { type: 'string' },
            defaultRegion: { type: 'string' },
            text: { type: 'string' },
          },
        },
        'Catalogs',
      ),
    },
  },
  startExecution: {
    operationId: 'startExecution',
    summary: 'Start a workflow execution',
    parameters: [executionNameParam],
    requestBody: {
      required: false,
      description: "The workflow's input",
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    responses: {
      '202': executionStarted('The execution URL'),
    },
    errors: [...EXECUTION_START_ERRORS],
  },
  listExecutions: {
    operationId: 'listExecutions',
    summary: 'List workflow executions, newest first',
    parameters: [
      query('workflow', 'Only this workflow', { type: 'string', enum: [...WORKFLOW_NAMES] }),
      query('limit', 'At most this many (default 20)', { type: 'integer', minimum: 1, maximum: 100 }),
    ],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['executions'],
          properties: { executions: { type: 'array', items: ref('ExecutionSummary') } },
        },
        'Executions',
      ),
    },
    errors: ['VALIDATION_FAILED', 'WORKFLOWS_UNAVAILABLE'],
  },
  getExecution: {
    operationId: 'getExecution',
    summary: 'An execution with its input, progress, output or error',
    responses: {
      '200': json(
        {
          allOf: [
            ref('ExecutionSummary'),
            { type: 'object', properties: { input: {}, progress: { type: 'object' }, output: {}, error: { type: 'object' } } },
          ],
        },
        'The execution',
      ),
    },
    errors: ['NOT_FOUND', 'VALIDATION_FAILED', 'WORKFLOWS_UNAVAILABLE'],
  },
  ...POLICY_ROUTE_DOCS,
  ...NODE_ROUTE_DOCS,
  ...NAMESPACE_ROUTE_DOCS,
  ...TRANSFER_ROUTE_DOCS,
} satisfies Record<string, RouteDoc>;
