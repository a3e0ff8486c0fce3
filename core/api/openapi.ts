import { ERROR_STATUS, type ErrorCode } from '../errors.js';
import { MAX_KEY_BYTES, NAMESPACE_PATTERN } from '../model/keys.js';
import { WORKFLOW_NAMES } from '../workflows/progress.js';
import type { ApiResult } from './http.js';
import { EXECUTION_NAME } from '../workflows/admin-service.js';
import { KEY_JSON_SCHEMA } from './validation.js';
import { COMMON_ERRORS } from './route-docs.js';
import { fromZod, json, ref } from './route-doc-parts.js';
import { policyDocumentSchema } from '../policy/document.js';
import type { ApiRoute, Json } from './route-types.js';
import { CACHE_NODE_STATES, type FiringOutcomeWire } from '../../sdk/src/contract.js';
import { NODE_ID_PATTERN, RESERVED_NODE_ID } from './node-operations.js';

/**
 * The OpenAPI 3.1 document of the HTTP API (DESIGN.md, Interfaces), built from a route table (`API_ROUTES`: every
 * route, its method and parameters, admin or tenant, and the documentation it carries, route-docs.ts). `npm run
 * openapi` writes it to docs/openapi.json; a test fails when that file is stale. This module does not import the
 * table (the table serves the document): callers pass it.
 */

const PATH_PARAMS: Record<string, Json> = {
  ns: { description: 'Namespace', schema: { type: 'string', pattern: NAMESPACE_PATTERN.source } },
  namespace: {
    description: "A tenant's namespace (admin routes: any of them)",
    schema: { type: 'string', pattern: NAMESPACE_PATTERN.source },
  },
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
  version: {
    description: "Policy version (0: the deployment's configuration)",
    schema: { type: 'string', pattern: '^[0-9]{1,16}$' },
  },
  node: {
    description: `Cache node id, as GET /v1/admin/nodes lists it (\`${RESERVED_NODE_ID}\` is the replacement controls, not a node)`,
    schema: { type: 'string', pattern: NODE_ID_PATTERN.source, not: { enum: [RESERVED_NODE_ID] } },
  },
};

function errorResponses(codes: ErrorCode[]): Record<string, Json> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of new Set(codes)) byStatus.set(ERROR_STATUS[c], [...(byStatus.get(ERROR_STATUS[c]) ?? []), c]);
  return Object.fromEntries(
    [...byStatus]
      .sort(([a], [b]) => a - b)
      .map(([status, cs]) => [
        String(status),
        json(
          {
            allOf: [
              ref('Error'),
              { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: cs } } } } },
            ],
          },
          cs.join(', '),
        ),
      ]),
  );
}

/** Each outcome of a firing, in words (a Record, so that an outcome added to the contract must be described here). */
const FIRING_OUTCOMES: Record<FiringOutcomeWire, string> = {
  done: 'carried out',
  suppressed: 'a control stopped it (the kill switch, the rate cap, the cost cap)',
  skipped: 'nothing to do (the fleet at its bound, a scale already running, no warm tier)',
  failed: 'carrying it out failed',
};

let servedBody: string | undefined;

/** `GET /v1/openapi.json`: the document, serialized once per process (it only changes with the code). */
export function openApiResult(routes: readonly ApiRoute[]): Promise<ApiResult> {
  servedBody ??= JSON.stringify(openApiDocument(routes));
  return Promise.resolve({
    statusCode: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'public, max-age=300' },
    body: servedBody,
  });
}

/** The document of a route table (normally API_ROUTES: `openApiDocument(API_ROUTES)`). */
export function openApiDocument(routes: readonly ApiRoute[]): Json {
  const paths: Record<string, Record<string, Json>> = {};
  for (const r of routes) {
    const d = r.doc;
    const params = [...r.resource.matchAll(/\{([A-Za-z0-9]+)\}/g)].map((m) => ({
      name: m[1]!,
      in: 'path',
      required: true,
      ...PATH_PARAMS[m[1]!],
    }));
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
      description:
        'The HTTP API of a Strata deployment (docs/API.md). Generated from the route table and request schemas by `npm run openapi`.',
    },
    servers: [
      { url: 'http://localhost:8080', description: '`npm start`' },
      {
        url: 'https://{api}.execute-api.{region}.amazonaws.com/{stage}',
        description: 'A deployed stage (the stack output ApiUrl)',
        variables: { api: { default: 'abc123' }, region: { default: 'us-east-1' }, stage: { default: 'dev' } },
      },
    ],
    tags: [
      { name: 'keys', description: 'Values in a namespace' },
      { name: 'service', description: 'Health and statistics' },
      { name: 'cost', description: 'The cost model' },
      { name: 'admin', description: "Workflows, the policy and the warm tier's cache nodes (operators only)" },
    ],
    paths,
    components: {
      securitySchemes: {
        apiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'x-api-key',
          description: "A tenant's API key; it reaches only the tenant's namespaces",
        },
        sigv4: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: 'AWS SigV4 signature of an IAM principal allowed execute-api:Invoke (admin routes)',
        },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: {
                code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
                message: { type: 'string' },
                details: { type: 'object' },
              },
            },
          },
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
            durable: {
              type: 'boolean',
              description:
                'false while the write lives in the hot tier alone (write-back, not yet flushed): lost if the hot tier loses it first',
            },
            superseded: { type: 'boolean' },
          },
        },
        BatchGetResult: {
          type: 'object',
          required: ['items'],
          properties: {
            items: {
              type: 'array',
              items: {
                type: 'object',
                required: ['key', 'found'],
                properties: {
                  key: { type: 'string' },
                  found: { type: 'boolean' },
                  value: { type: 'string', contentEncoding: 'base64' },
                  version: { type: 'integer' },
                  expiresAt: { type: ['string', 'null'], format: 'date-time' },
                  tier: { type: 'string' },
                  contentType: { type: 'string' },
                  tags: { type: 'array', items: { type: 'string' } },
                },
              },
            },
          },
        },
        Health: {
          type: 'object',
          required: ['status', 'tiers'],
          properties: {
            status: { enum: ['ok', 'degraded', 'down'] },
            tiers: {
              type: 'object',
              additionalProperties: { type: 'object', properties: { kind: { type: 'string' }, ok: { type: 'boolean' } } },
            },
          },
        },
        ExecutionSummary: {
          type: 'object',
          required: ['execution', 'workflow', 'status', 'startedAt'],
          properties: {
            execution: { type: 'string' },
            workflow: { enum: [...WORKFLOW_NAMES] },
            status: { enum: ['RUNNING', 'SUCCEEDED', 'FAILED', 'ABORTED', 'TIMED_OUT'] },
            startedAt: { type: 'string', format: 'date-time' },
            stoppedAt: { type: 'string', format: 'date-time' },
          },
        },
        // The document as a client writes it (defaults optional); what the server answers, defaults applied, fits it too.
        PolicyDocument: {
          ...fromZod(policyDocumentSchema),
          description: 'A Tiera policy document (docs/POLICIES.md): per-namespace presets and settings, rules, budgets, controls',
        },
        PolicyView: {
          type: 'object',
          required: ['version', 'source', 'document', 'hash'],
          properties: {
            version: { type: 'integer', minimum: 0, description: "0: the deployment's configuration; then +1 per change" },
            source: { enum: ['deployment', 'runtime'] },
            document: { ...ref('PolicyDocument'), description: 'The document with its defaults applied' },
            updatedAt: { type: 'string', format: 'date-time' },
            updatedBy: { type: 'string', description: "Who wrote it (the caller's identity); absent for version 0" },
            reason: { type: 'string' },
            hash: { type: 'string', description: 'SHA-256 of the canonical document, hex, 16 characters' },
          },
        },
        PolicyVersionSummary: {
          type: 'object',
          required: ['version', 'source', 'updatedAt', 'updatedBy', 'hash', 'previous', 'diff'],
          properties: {
            version: { type: 'integer', minimum: 0 },
            source: { enum: ['deployment', 'runtime'] },
            updatedAt: { type: 'string', format: 'date-time' },
            updatedBy: { type: 'string' },
            reason: { type: 'string' },
            hash: { type: 'string' },
            previous: { type: 'integer', minimum: 0, description: 'The version this one replaced' },
            restoredFrom: { type: 'integer', minimum: 0, description: 'For a rollback: the version it restored' },
            diff: {
              type: 'array',
              items: { type: 'string' },
              description:
                'What changed from `previous`, one line per path (`+ rules[flush]`, `~ controls.maxFleetSize: 16 -> 8`)',
            },
          },
        },
        PolicyValidation: {
          type: 'object',
          required: ['valid', 'document', 'hash', 'namespaces', 'wouldFire', 'warnings'],
          properties: {
            valid: { const: true },
            document: { ...ref('PolicyDocument'), description: 'The document with its defaults applied' },
            hash: { type: 'string' },
            namespaces: {
              type: 'object',
              description: 'Per namespace (and `*`), the placement its foreground rules compile to',
            },
            wouldFire: {
              type: 'array',
              items: {
                type: 'object',
                required: ['rule', 'mode', 'fires', 'reason'],
                properties: {
                  rule: { type: 'string' },
                  mode: { enum: ['foreground', 'background'] },
                  fires: { type: 'boolean' },
                  reason: { type: 'string' },
                },
              },
            },
            warnings: { type: 'array', items: { type: 'string' } },
          },
        },
        CacheNode: {
          type: 'object',
          required: ['id', 'url', 'state', 'addedAt', 'ranges'],
          properties: {
            id: { type: 'string', pattern: NODE_ID_PATTERN.source },
            url: { type: 'string', description: "Base URL of the node's HTTP API (inside the fleet's network)" },
            state: { enum: [...CACHE_NODE_STATES], description: 'DOWN: marked dead by the health check (or by hand)' },
            az: { type: 'string', description: 'Availability Zone, when recorded' },
            instance: { type: 'string', description: 'Provider reference (EC2 instance id, local process tag)' },
            addedAt: { type: 'string', description: 'When it joined the ring (ISO-8601)' },
            down: {
              type: 'object',
              description: 'With state DOWN: when it was marked and why',
              required: ['at', 'reason'],
              properties: { at: { type: 'string', format: 'date-time' }, reason: { type: 'string' } },
            },
            ranges: { type: 'integer', minimum: 0, description: 'Ranges of the ring it owns' },
          },
        },
        ReplacementControls: {
          type: 'object',
          required: ['paused'],
          properties: {
            paused: {
              type: 'boolean',
              description: 'While true the health check marks no node DOWN, so nothing is replaced automatically',
            },
            by: { type: 'string', description: "Who set it: the admin key's tenant, or the IAM principal" },
            reason: { type: 'string' },
            at: { type: 'string', format: 'date-time', description: 'When it was set; absent when it never was' },
          },
        },
        NodeList: {
          type: 'object',
          required: ['ringVersion', 'nodes', 'replacement'],
          properties: {
            ringVersion: { type: ['integer', 'null'], description: "The ring's version; null before there is a ring" },
            nodes: { type: 'array', items: ref('CacheNode') },
            replacement: ref('ReplacementControls'),
          },
        },
        NodeRemoval: {
          type: 'object',
          required: ['ringVersion', 'moved'],
          properties: {
            ringVersion: { type: 'integer', description: 'The first ring version without the node' },
            moved: {
              type: 'array',
              description: 'Each range the node owned, and the node that took it',
              items: {
                type: 'object',
                required: ['start', 'end', 'to'],
                properties: {
                  start: { type: 'string', pattern: '^[0-9a-f]{16}$' },
                  end: { type: ['string', 'null'], description: 'null: the top of the hash space' },
                  to: { type: 'string' },
                },
              },
            },
          },
        },
        PolicyFiring: {
          type: 'object',
          required: ['at', 'rule', 'response', 'outcome', 'detail'],
          properties: {
            at: { type: 'string', format: 'date-time', description: 'When the rule fired' },
            rule: { type: 'string', description: "The rule's id" },
            response: { type: 'string', description: "The response's kind: `alert`, `grow`, `shrink`, ..." },
            outcome: {
              enum: Object.keys(FIRING_OUTCOMES),
              description: Object.entries(FIRING_OUTCOMES)
                .map(([k, v]) => `${k}: ${v}`)
                .join('; '),
            },
            detail: { type: 'string', description: 'What happened, in words (the execution started, or why nothing did)' },
          },
        },
      },
    },
  };
}
