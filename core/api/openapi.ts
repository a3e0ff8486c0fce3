import * as z from 'zod';
import { ERROR_STATUS, type ErrorCode } from '../errors.js';
import { MAX_KEY_BYTES, NAMESPACE_PATTERN } from '../model/keys.js';
import { WORKFLOW_NAMES } from '../workflows/progress.js';
import type { ApiResult } from './http.js';
import { API_ROUTES, type ApiRoute } from './routes.js';
import { EXECUTION_NAME } from '../workflows/service.js';
import { batchKeysSchema, batchPutSchema, completeUploadSchema, MAX_TTL_SECONDS, TAG_PATTERN, uploadRequestSchema } from './validation.js';
import { IF_MATCH_PATTERN, KEY_JSON_SCHEMA, MAX_TAGS } from './validation.js';

/**
 * The OpenAPI 3.1 document of the HTTP API (DESIGN.md, Interfaces), generated from the route table (`API_ROUTES`:
 * every route, its method and parameters, admin or tenant) and the zod schemas the handlers validate JSON bodies
 * with. What zod does not describe (raw value bodies, headers, response shapes) is stated here, per route, next to
 * docs/API.md. `npm run openapi` writes it to docs/openapi.json; a test fails when that file is stale, or when a
 * route has no entry here.
 */
type Json = Record<string, unknown>;

interface RouteDoc {
  /** Stable name of the operation (client generators name methods after it). */
  operationId: string;
  summary: string;
  description?: string;
  /** Query and header parameters (path parameters come from the route). */
  parameters?: Json[];
  requestBody?: Json;
  /** Success responses by status. */
  responses: Record<string, Json>;
  /** Error codes this route answers with besides those every route can (see {@link COMMON_ERRORS}). */
  errors?: ErrorCode[];
}

/** What any route can answer: a throttled key, an internal error. Namespaced and admin routes add NAMESPACE_FORBIDDEN. */
const COMMON_ERRORS: ErrorCode[] = ['RATE_LIMITED', 'INTERNAL'];
const KEY_ERRORS: ErrorCode[] = ['VALIDATION_FAILED', 'TIER_UNAVAILABLE'];

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description: string): Json => ({ description, content: { 'application/json': { schema } } });
const header = (name: string, description: string, schema: Json = { type: 'string' }): Json => ({ name, in: 'header', required: false, description, schema });
const query = (name: string, description: string, schema: Json = { type: 'string' }, required = false): Json => ({ name, in: 'query', required, description, schema });
/** A zod schema as JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), without its `$schema` line. */
function fromZod(schema: z.ZodType): Json {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Json;
  return rest;
}

const ENTRY_HEADERS: Json = {
  'x-strata-tier': { description: 'The tier that served the read (`l1`, `hot`, `warm`, `cold`, `origin`), or the tiers written, comma-separated', schema: { type: 'string' } },
  'x-strata-version': { description: 'The entry version (a decimal integer; also as `etag: "<version>"`)', schema: { type: 'string', pattern: '^[0-9]+$' } },
  'x-strata-expires-at': { description: 'Expiry (ISO-8601); absent when the entry does not expire', schema: { type: 'string', format: 'date-time' } },
  'x-strata-tags': { description: 'The entry tags, comma-separated, when set', schema: { type: 'string' } },
};

const WRITE_HEADERS = [
  header('x-strata-ttl', `Time to live in whole seconds (1..${MAX_TTL_SECONDS}); absent: the namespace default`, { type: 'integer', minimum: 1, maximum: MAX_TTL_SECONDS }),
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

/** If-Match as the server parses it (validation.ts): `*` or one version, bare or as an ETag; a list is a 400. */
function ifMatchParam(verb: string): Json {
  const version = '(`123`, `"123"` or `W/"123"`, as in `etag`)';
  const what = `${verb} only if the key exists (\`*\`), or only if the stored version is this one ${version}`;
  const description = `${what}; 409 VERSION_CONFLICT otherwise. One version only: a list of ETags is 400 VALIDATION_FAILED`;
  return header('if-match', description, { type: 'string', pattern: IF_MATCH_PATTERN.source });
}

const ROUTE_DOCS: Record<string, RouteDoc> = {
  'GET /v1/ns/{ns}/keys/{key}': {
    operationId: 'getKey',
    summary: 'Read a value',
    description: 'Walks the tiers (near cache, hot, warm, cold); a hit below the top is promoted. A namespace with an origin reads through on a miss.',
    responses: {
      '200': { description: 'The value bytes, with the content type they were stored with', headers: ENTRY_HEADERS, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
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
    },
    errors: ['NOT_FOUND', 'ORIGIN_FAILED', ...KEY_ERRORS],
  },
  'HEAD /v1/ns/{ns}/keys/{key}': {
    operationId: 'headKey',
    summary: 'Read the headers of a value',
    responses: {
      // The headers GET would send, content type included; a HEAD response never has a body (nor its 404).
      '200': {
        description: "The entry headers and the value's content type, no body",
        headers: { ...ENTRY_HEADERS, 'x-strata-size': { description: 'Value size in bytes', schema: { type: 'string' } } },
        content: { '*/*': {} },
      },
    },
    errors: ['NOT_FOUND', ...KEY_ERRORS],
  },
  'PUT /v1/ns/{ns}/keys/{key}': {
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
  'DELETE /v1/ns/{ns}/keys/{key}': {
    operationId: 'deleteKey',
    summary: 'Delete a value (writes a tombstone)',
    parameters: [ifMatchParam('Delete')],
    responses: { '204': { description: 'Deleted', headers: { 'x-strata-version': ENTRY_HEADERS['x-strata-version'] } } },
    errors: ['VERSION_CONFLICT', ...KEY_ERRORS],
  },
  'POST /v1/ns/{ns}/batch/get': {
    operationId: 'batchGet',
    summary: 'Read up to 100 values',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(batchKeysSchema) } } },
    responses: { '200': json(ref('BatchGetResult'), 'One item per key, in order') },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  'POST /v1/ns/{ns}/batch/put': {
    operationId: 'batchPut',
    summary: 'Write up to 100 values (validated whole before anything is written)',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(batchPutSchema) } } },
    responses: { '200': json({ type: 'object', required: ['items'], properties: { items: { type: 'array', items: ref('WriteResult') } } }, 'One item per input item, in order') },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', ...KEY_ERRORS],
  },
  'POST /v1/ns/{ns}/batch/delete': {
    operationId: 'batchDelete',
    summary: 'Delete up to 100 values',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(batchKeysSchema) } } },
    responses: { '200': json({ type: 'object', required: ['items'], properties: { items: { type: 'array', items: { type: 'object', required: ['key', 'version'], properties: { key: { type: 'string' }, version: { type: 'integer' } } } } } }, 'The tombstone version per key') },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  'POST /v1/ns/{ns}/uploads/{key}': {
    operationId: 'createUpload',
    summary: 'Get a presigned URL to upload a large value',
    description:
      'The upload belongs to the caller (its tenant), this namespace and key; `ttl`, `tags` and `contentType` are applied at ' +
      'completion. The URL takes one PUT, with `headers`.',
    requestBody: { required: false, content: { 'application/json': { schema: fromZod(uploadRequestSchema) } } },
    responses: { '200': json({ type: 'object', required: ['uploadId', 'url', 'method', 'headers', 'expiresAt'], properties: { uploadId: { type: 'string' }, url: { type: 'string', format: 'uri' }, method: { const: 'PUT' }, headers: { type: 'object', additionalProperties: { type: 'string' } }, expiresAt: { type: 'string', format: 'date-time' } } }, 'PUT the bytes to `url` with `headers`, then complete the upload') },
    errors: ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  'POST /v1/ns/{ns}/uploads/{key}/complete': {
    operationId: 'completeUpload',
    summary: 'Complete an upload: the uploaded bytes become the value',
    description:
      'Once, by the tenant that created the upload, for its namespace and key (otherwise 404 NOT_FOUND, as for an unknown id); ' +
      '409 VERSION_CONFLICT while another completion of it runs. `ttl`, `tags` and `contentType` given here replace those given ' +
      'at creation.',
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(completeUploadSchema) } } },
    responses: { '200': json(ref('WriteResult'), 'Written') },
    errors: ['NOT_FOUND', 'VERSION_CONFLICT', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', ...KEY_ERRORS],
  },
  'GET /v1/ns/{ns}/downloads/{key}': {
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
  'GET /v1/stats': {
    operationId: 'stats',
    summary: 'Counters and sizes per tier',
    responses: { '200': json({ type: 'object', required: ['uptimeSeconds', 'tiers'], properties: { uptimeSeconds: { type: 'integer' }, tiers: { type: 'array', items: { type: 'object', required: ['name', 'kind', 'hits', 'misses', 'errors'], properties: { name: { type: 'string' }, kind: { type: 'string' }, entries: { type: 'integer' }, bytes: { type: 'integer' }, hits: { type: 'integer' }, misses: { type: 'integer' }, errors: { type: 'integer' }, ok: { type: 'boolean' } } } } } }, 'Service statistics') },
  },
  'GET /v1/health': {
    operationId: 'health',
    summary: 'Health of every tier',
    responses: { '200': json(ref('Health'), 'At least one tier is up (`ok` or `degraded`)'), '503': json(ref('Health'), 'No tier is up (`down`)') },
  },
  'GET /v1/openapi.json': {
    operationId: 'openApi',
    summary: 'This document: the OpenAPI 3.1 description of the API, generated from its route table and request schemas',
    responses: { '200': json({ type: 'object', required: ['openapi', 'info', 'paths'] }, 'The OpenAPI document') },
  },
  'GET /v1/cost/placements': {
    operationId: 'costPlacements',
    summary: 'Rank placements (tiers and instance types) for a workload by cost per unit of speedup or by cost',
    description: 'See docs/API.md and docs/COST.md for every field; `text` is what `npm run cost` prints for the same question.',
    parameters: [
      query('valueSize', 'Value size: `1KB`, `1MB`, `1MiB` or bytes', { type: 'string' }, true),
      query('keys', 'Distinct keys held: `500`, `200k`, `1.5M`', { type: 'string' }, true),
      query('requestsPerMonth', 'Reads a month', { type: 'string' }, true),
      query('writesPerMonth', 'Writes a month (default: the expected misses of a cold cache)'),
      query('persistent', 'Only placements whose data survives a node loss', { type: 'string', enum: ['true', 'false', '1', '0'] }),
      query('latencyTarget', 'Hit latency target (`5ms`, `0.2s`)'),
      query('serviceTime', "The origin's time per miss (default `1s`)"),
      query('inRegion', 'Results stay in the region (no transfer-out charge)', { type: 'string', enum: ['true', 'false', '1', '0'] }),
      query('region', 'Price region (default `us-east-1`)'),
      query('catalog', 'Price catalog id (default: the newest)'),
      query('rankBy', 'Ranking', { type: 'string', enum: ['cs', 'cost'] }),
      query('top', 'Return the best n only', { type: 'integer', minimum: 1 }),
    ],
    responses: { '200': json({ type: 'object', required: ['workload', 'recommendations', 'text'], properties: { workload: { type: 'object' }, recommendations: { type: 'array', items: { type: 'object' } }, excluded: { type: 'array', items: { type: 'object' } }, ranked: { type: 'integer' }, text: { type: 'string' } } }, 'Ranked placements') },
    errors: ['VALIDATION_FAILED'],
  },
  'GET /v1/cost/paper-2010': {
    operationId: 'costPaper2010',
    summary: "Paper 001's cost tables recomputed, with the cells its own formulas do not give",
    responses: { '200': json({ type: 'object', required: ['tables', 'cells', 'discrepancies'], properties: { tables: { type: 'string' }, cells: { type: 'array', items: { type: 'object' } }, discrepancies: { type: 'array', items: { type: 'object' } }, discrepanciesText: { type: 'string' } } }, 'Tables III and IV') },
  },
  'GET /v1/cost/catalogs': {
    operationId: 'costCatalogs',
    summary: 'The price catalogs and their regions',
    responses: { '200': json({ type: 'object', required: ['catalogs', 'defaultCatalog', 'defaultRegion'], properties: { catalogs: { type: 'array', items: { type: 'object' } }, defaultCatalog: { type: 'string' }, defaultRegion: { type: 'string' }, text: { type: 'string' } } }, 'Catalogs') },
  },
  'POST /v1/admin/workflows/{workflow}/executions': {
    operationId: 'startExecution',
    summary: 'Start a workflow execution',
    parameters: [query('name', 'Execution name (1-80 of A-Z a-z 0-9 _ -); default generated', { type: 'string', pattern: '^[A-Za-z0-9_-]{1,80}$' })],
    requestBody: { required: false, description: "The workflow's input", content: { 'application/json': { schema: { type: 'object' } } } },
    responses: { '202': { ...json(ref('ExecutionSummary'), 'Started'), headers: { location: { description: 'The execution URL', schema: { type: 'string' } } } } },
    errors: ['VALIDATION_FAILED', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'EXECUTION_EXISTS', 'WORKFLOWS_UNAVAILABLE'],
  },
  'GET /v1/admin/workflows/executions': {
    operationId: 'listExecutions',
    summary: 'List workflow executions, newest first',
    parameters: [query('workflow', 'Only this workflow', { type: 'string', enum: [...WORKFLOW_NAMES] }), query('limit', 'At most this many (default 20)', { type: 'integer', minimum: 1, maximum: 100 })],
    responses: { '200': json({ type: 'object', required: ['executions'], properties: { executions: { type: 'array', items: ref('ExecutionSummary') } } }, 'Executions') },
    errors: ['VALIDATION_FAILED', 'WORKFLOWS_UNAVAILABLE'],
  },
  'GET /v1/admin/workflows/executions/{execution}': {
    operationId: 'getExecution',
    summary: 'An execution with its input, progress, output or error',
    responses: { '200': json({ allOf: [ref('ExecutionSummary'), { type: 'object', properties: { input: {}, progress: { type: 'object' }, output: {}, error: { type: 'object' } } }] }, 'The execution') },
    errors: ['NOT_FOUND', 'VALIDATION_FAILED', 'WORKFLOWS_UNAVAILABLE'],
  },
};

const PATH_PARAMS: Record<string, Json> = {
  ns: { description: 'Namespace', schema: { type: 'string', pattern: NAMESPACE_PATTERN.source } },
  key: {
    description:
      `Key: 1-${MAX_KEY_BYTES} bytes of UTF-8 (no NUL), percent-encoded as one segment ` +
      '(`.` and `..` only through the batch routes)',
    // The rule of keys in JSON bodies; URL parsers remove `.` and `..` segments, so a path cannot carry those two.
    schema: {
      type: 'string',
      minLength: KEY_JSON_SCHEMA.minLength,
      maxLength: KEY_JSON_SCHEMA.maxLength,
      pattern: KEY_JSON_SCHEMA.pattern,
      'x-strata-max-utf8-bytes': MAX_KEY_BYTES,
      not: { enum: ['.', '..'] },
    },
  },
  workflow: { description: 'Workflow', schema: { type: 'string', enum: [...WORKFLOW_NAMES] } },
  execution: { description: 'Execution name', schema: { type: 'string', pattern: EXECUTION_NAME.source } },
};

/** The route's doc, or an error naming the route (a route added to API_ROUTES needs an entry here). */
function docOf(r: ApiRoute): RouteDoc {
  const d = ROUTE_DOCS[`${r.method} ${r.resource}`];
  if (!d) throw new Error(`openapi: no documentation for ${r.method} ${r.resource}; add it to ROUTE_DOCS in core/api/openapi.ts`);
  return d;
}

/** Routes documented here that API_ROUTES no longer has (a test keeps this empty). */
export function staleRouteDocs(): string[] {
  const live = new Set(API_ROUTES.map((r) => `${r.method} ${r.resource}`));
  return Object.keys(ROUTE_DOCS).filter((k) => !live.has(k));
}

function errorResponses(codes: ErrorCode[]): Record<string, Json> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of new Set(codes)) byStatus.set(ERROR_STATUS[c], [...(byStatus.get(ERROR_STATUS[c]) ?? []), c]);
  return Object.fromEntries(
    [...byStatus].sort(([a], [b]) => a - b).map(([status, cs]) => [String(status), json({ allOf: [ref('Error'), { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: cs } } } } }] }, cs.join(', '))]),
  );
}

let servedBody: string | undefined;

/** `GET /v1/openapi.json`: the document, serialized once per process (it only changes with the code). */
export function openApiResult(): Promise<ApiResult> {
  servedBody ??= JSON.stringify(openApiDocument());
  return Promise.resolve({ statusCode: 200, headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'public, max-age=300' }, body: servedBody });
}

export function openApiDocument(): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const r of API_ROUTES) {
    const d = docOf(r);
    const params = [...r.resource.matchAll(/\{([A-Za-z0-9]+)\}/g)].map((m) => ({ name: m[1]!, in: 'path', required: true, ...PATH_PARAMS[m[1]!] }));
    const namespaced = r.resource.includes('{ns}');
    // Admin routes too: with a tenant map and no IAM in front (`npm start`), a key that is not an admin key is refused.
    const forbidden = namespaced || r.auth === 'admin' ? (['NAMESPACE_FORBIDDEN'] as ErrorCode[]) : [];
    const errors = [...(d.errors ?? []), ...forbidden, ...COMMON_ERRORS];
    (paths[r.resource] ??= {})[r.method.toLowerCase()] = {
      operationId: d.operationId,
      summary: d.summary,
      ...(d.description ? { description: d.description } : {}),
      tags: [r.auth === 'admin' ? 'admin' : r.resource.startsWith('/v1/cost') ? 'cost' : namespaced ? 'keys' : 'service'],
      security: r.auth === 'admin' ? [{ apiKey: [], sigv4: [] }] : [{ apiKey: [] }],
      parameters: [...params, ...(d.parameters ?? [])],
      ...(d.requestBody ? { requestBody: d.requestBody } : {}),
      responses: { ...d.responses, ...errorResponses(errors) },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Strata key-value API',
      version: '1',
      description: 'The HTTP API of a Strata deployment (docs/API.md). Generated from the route table and request schemas by `npm run openapi`.',
    },
    servers: [{ url: 'http://localhost:8080', description: '`npm start`' }, { url: 'https://{api}.execute-api.{region}.amazonaws.com/{stage}', description: 'A deployed stage (the stack output ApiUrl)', variables: { api: { default: 'abc123' }, region: { default: 'us-east-1' }, stage: { default: 'dev' } } }],
    tags: [
      { name: 'keys', description: 'Values in a namespace' },
      { name: 'service', description: 'Health and statistics' },
      { name: 'cost', description: 'The cost model' },
      { name: 'admin', description: 'Workflows (operators only)' },
    ],
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: "A tenant's API key; it reaches only the tenant's namespaces" },
        sigv4: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'AWS SigV4 signature of an IAM principal allowed execute-api:Invoke (admin routes)' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: { error: { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string', enum: Object.keys(ERROR_STATUS) }, message: { type: 'string' }, details: { type: 'object' } } } },
        },
        WriteResult: {
          type: 'object',
          required: ['key', 'version', 'expiresAt', 'size', 'tiers', 'durable'],
          properties: {
            ns: { type: 'string' },
            key: { type: 'string' },
            version: { type: 'integer' },
            expiresAt: { type: ['string', 'null'], format: 'date-time' },
            size: { type: 'integer' },
            tiers: { type: 'array', items: { type: 'string' } },
            durable: { type: 'boolean', description: 'false while the write lives in the hot tier alone (write-back, not yet flushed): lost if the hot tier loses it first' },
            superseded: { type: 'boolean' },
          },
        },
        BatchGetResult: {
          type: 'object',
          required: ['items'],
          properties: {
            items: {
              type: 'array',
              items: { type: 'object', required: ['key', 'found'], properties: { key: { type: 'string' }, found: { type: 'boolean' }, value: { type: 'string', contentEncoding: 'base64' }, version: { type: 'integer' }, expiresAt: { type: ['string', 'null'], format: 'date-time' }, tier: { type: 'string' }, contentType: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } } },
            },
          },
        },
        Health: { type: 'object', required: ['status', 'tiers'], properties: { status: { enum: ['ok', 'degraded', 'down'] }, tiers: { type: 'object', additionalProperties: { type: 'object', properties: { kind: { type: 'string' }, ok: { type: 'boolean' } } } } } },
        ExecutionSummary: { type: 'object', required: ['execution', 'workflow', 'status', 'startedAt'], properties: { execution: { type: 'string' }, workflow: { enum: [...WORKFLOW_NAMES] }, status: { enum: ['RUNNING', 'SUCCEEDED', 'FAILED', 'ABORTED', 'TIMED_OUT'] }, startedAt: { type: 'string', format: 'date-time' }, stoppedAt: { type: 'string', format: 'date-time' } } },
      },
    },
  };
}
