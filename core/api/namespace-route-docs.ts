import type { Json, RouteDoc } from './route-types.js';
import { AUDIT_LOG_LIMIT, MAX_INVALIDATIONS_PER_SECOND, MAX_RECORDS_PER_NAMESPACE } from '../coordinator/invalidations.js';
import { invalidateSchema } from './namespace-operations.js';
import { fromZod, json, query } from './route-doc-parts.js';
import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../coordinator/key-listing.js';
import { INCLUSIVE_VALUES } from './list-operations.js';
import { KEY_JSON_SCHEMA } from './validation.js';

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
        'The invalidation-sweep workflow removing what the invalidation covers: its execution (follow it with GET ' +
        '/v1/admin/workflows/executions/{execution}), or, where the data API cannot reach Step Functions (deployed), ' +
        'the request whose S3 event starts it (the workflow list shows that execution with the request key as its ' +
        'input `object`); null where the runtime has no workflows, or for tags where tag sweeps are off. The tag ' +
        'invalidations of a namespace within one window share one sweep, which starts at notBefore',
      oneOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['execution'],
          properties: { execution: { type: 'string' }, notBefore: { type: 'string', format: 'date-time' } },
        },
        {
          type: 'object',
          required: ['request'],
          properties: { request: { type: 'string' }, notBefore: { type: 'string', format: 'date-time' } },
        },
      ],
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

const KEY_PARAM = { type: 'string', ...KEY_JSON_SCHEMA };

const LISTED_KEY: Json = {
  type: 'object',
  required: ['key'],
  properties: {
    key: { type: 'string' },
    version: { type: 'integer', description: 'With metadata=true: the live version (the ETag)' },
    size: { type: 'integer', description: 'With metadata=true: bytes, as written' },
    expiresAt: { type: ['string', 'null'], format: 'date-time', description: 'With metadata=true; null = no expiry' },
    tags: { type: 'array', items: { type: 'string' }, description: 'With metadata=true' },
    contentType: { type: 'string', description: 'With metadata=true, when one was given' },
    tiers: {
      type: 'array',
      items: { type: 'string', enum: ['hot', 'warm', 'cold'] },
      description: 'With metadata=true: the tiers holding this version, top-down',
    },
  },
};

export const NAMESPACE_ROUTE_DOCS = {
  listKeys: {
    operationId: 'listKeys',
    summary: 'List keys in key order, within bounds, a page at a time',
    description:
      'Keys in the order of their UTF-8 bytes, across every tier, each once, never a deleted, expired or invalidated ' +
      'one: each key on a page is read as a HEAD would read it. A key that stays written for the whole listing is on ' +
      'exactly one page; a key written or deleted during it may or may not be. Pass `cursor` back, with the same ' +
      'prefix and bounds, for the next page; a page may hold fewer than `limit` keys (keys that were listed by a ' +
      'tier but are no longer live are skipped) and only a null cursor means the end.',
    parameters: [
      query('prefix', 'Only keys starting with this', KEY_PARAM),
      query('start', 'Lower bound (see inclusive)', KEY_PARAM),
      query('end', 'Upper bound (see inclusive)', KEY_PARAM),
      query('inclusive', 'Which bounds are part of the range; default start (start <= key < end)', {
        type: 'string',
        enum: [...INCLUSIVE_VALUES],
      }),
      query('limit', `Most keys on the page; default ${DEFAULT_LIST_LIMIT}`, {
        type: 'integer',
        minimum: 1,
        maximum: MAX_LIST_LIMIT,
      }),
      query('cursor', "The previous page's cursor: bound to the caller, the namespace, the prefix and the bounds", {
        type: 'string',
        maxLength: 4096,
      }),
      query('metadata', 'Each key with its version, size, expiry, tags and the tiers holding it (costs reads)', {
        type: 'string',
        enum: ['true', 'false'],
      }),
    ],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['ns', 'keys', 'cursor'],
          properties: {
            ns: { type: 'string' },
            keys: { type: 'array', items: LISTED_KEY },
            cursor: { type: ['string', 'null'], description: 'The next page; null at the end' },
          },
        },
        'A page of keys',
      ),
    },
    errors: ['VALIDATION_FAILED', 'TIER_UNAVAILABLE'],
  },

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
