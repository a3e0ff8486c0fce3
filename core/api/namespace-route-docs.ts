import type { Json, RouteDoc } from './route-types.js';
import { AUDIT_LOG_LIMIT, MAX_INVALIDATIONS_PER_SECOND, MAX_RECORDS_PER_NAMESPACE } from '../coordinator/invalidations.js';
import { invalidateSchema } from './namespace-operations.js';
import { fromZod, json, query } from './route-doc-parts.js';

/**
 * The OpenAPI entries of the whole-namespace routes (invalidation, flush, the invalidation log), as route-docs.ts has
 * them for the others; ROUTE_DOCS includes these.
 */

const INVALIDATION: Json = {
  type: 'object',
  required: ['ns', 'id', 'generation', 'kind'],
  properties: {
    ns: { type: 'string' },
    id: { type: 'integer', description: 'The audit log entry of this invalidation' },
    generation: {
      type: 'integer',
      description: 'Entries of the scope at or below this version are covered; every write after the call is above it',
    },
    kind: { type: 'string', enum: ['tags', 'prefix', 'flush'] },
    sweep: {
      description:
        'The invalidation-sweep workflow removing what a flush or a prefix invalidation covers (follow it with GET ' +
        '/v1/admin/workflows/executions/{execution}); null for tags, or where the runtime has no workflows',
      oneOf: [{ type: 'null' }, { type: 'object', required: ['execution'], properties: { execution: { type: 'string' } } }],
    },
  },
};

const IN_FORCE =
  'Answers once the invalidation is in force for every coordinator (about one second: one write of the invalidations ' +
  'document, then one lease), whatever the number of entries it covers: nothing is deleted on the request path, reads ' +
  'check what they find against it, and physical removal happens later. A write after the call is visible as usual. ' +
  `More than ${MAX_INVALIDATIONS_PER_SECOND} calls per second per namespace, or a namespace already holding ` +
  `${MAX_RECORDS_PER_NAMESPACE} tag and prefix invalidations, is 429 RATE_LIMITED.`;

const CONFIRM = query(
  'confirm',
  'The namespace again, to confirm (anything else is 400 VALIDATION_FAILED)',
  { type: 'string' },
  true,
);

export const NAMESPACE_ROUTE_DOCS = {
  invalidate: {
    operationId: 'invalidate',
    summary: 'Invalidate every entry carrying any of some tags, or every key under a prefix',
    description: IN_FORCE,
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(invalidateSchema) } } },
    responses: { '200': json(INVALIDATION, 'In force everywhere') },
    errors: ['VALIDATION_FAILED', 'RATE_LIMITED', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'TIER_UNAVAILABLE'],
  },
  flushNamespace: {
    operationId: 'flushNamespace',
    summary: 'Flush a namespace: every key written before the call is gone',
    description: `${IN_FORCE} The admin equivalent is DELETE /v1/admin/namespaces/{namespace}.`,
    parameters: [CONFIRM],
    responses: { '200': json(INVALIDATION, 'In force everywhere') },
    errors: ['VALIDATION_FAILED', 'RATE_LIMITED', 'TIER_UNAVAILABLE'],
  },
  adminFlushNamespace: {
    operationId: 'adminFlushNamespace',
    summary: "Flush any tenant's namespace (admin)",
    description: `As DELETE /v1/ns/{ns}, for the operator. ${IN_FORCE}`,
    parameters: [CONFIRM],
    responses: { '200': json(INVALIDATION, 'In force everywhere') },
    errors: ['VALIDATION_FAILED', 'RATE_LIMITED', 'TIER_UNAVAILABLE'],
  },
  invalidationLog: {
    operationId: 'invalidationLog',
    summary: `The last ${AUDIT_LOG_LIMIT} invalidations and flushes, newest first (admin)`,
    parameters: [query('ns', 'Only those of this namespace')],
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
                required: ['id', 'ns', 'kind', 'generation', 'at', 'by'],
                properties: {
                  id: { type: 'integer' },
                  ns: { type: 'string' },
                  kind: { type: 'string', enum: ['tags', 'prefix', 'flush'] },
                  tags: { type: 'array', items: { type: 'string' } },
                  prefix: { type: 'string' },
                  generation: { type: 'integer' },
                  at: { type: 'string', format: 'date-time' },
                  by: { type: 'string', description: '`tenant:<name>`, `key:<hash>`, `admin` or `anonymous`' },
                },
              },
            },
          },
        },
        'The audit log',
      ),
    },
    errors: ['VALIDATION_FAILED', 'TIER_UNAVAILABLE'],
  },
} satisfies Record<string, RouteDoc>;
