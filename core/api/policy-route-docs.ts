import type { Json, RouteDoc } from './route-types.js';
import { IF_MATCH_PATTERN } from './validation.js';
import {
  DEFAULT_FIRINGS_LIMIT,
  MAX_FIRINGS_LIMIT,
  MAX_REASON_LENGTH,
  MAX_VERSIONS_LIMIT,
  POLICY_IF_MATCH_PATTERN,
  rollbackBodySchema,
} from './policy-operations.js';
import { fromZod, header, json, query, ref } from './route-doc-parts.js';

/**
 * The OpenAPI entries of the policy admin routes (`/v1/admin/policy...`), as route-docs.ts has them for the others;
 * ROUTE_DOCS includes these.
 */

/** The policy's version, as GET /v1/admin/policy, PUT and rollback answer it. */
const POLICY_VERSION_HEADERS: Json = {
  etag: {
    description: 'The policy version as an entity tag (`"3"`): send it as `if-match` to change the policy',
    schema: { type: 'string', pattern: '^"[0-9]+"$' },
  },
  'x-strata-version': { description: 'The policy version (a decimal integer)', schema: { type: 'string', pattern: '^[0-9]+$' } },
};

const REASON_HEADER = header('x-strata-reason', `Why, for the audit trail (at most ${MAX_REASON_LENGTH} characters)`, {
  type: 'string',
  maxLength: MAX_REASON_LENGTH,
});

export const POLICY_ROUTE_DOCS = {
  getPolicy: {
    operationId: 'getPolicy',
    summary: 'The policy in force (Tiera policy document), with its version',
    description:
      "Version 0 is the deployment's configuration; each change adds one. Send `etag` back as `if-match` to change the policy.",
    responses: { '200': { ...json(ref('PolicyView'), 'The policy in force'), headers: POLICY_VERSION_HEADERS } },
    errors: ['POLICIES_UNAVAILABLE'],
  },
  putPolicy: {
    operationId: 'putPolicy',
    summary: 'Replace the policy document (compare-and-set on its version)',
    description:
      'The document is checked whole before anything changes: by its schema, then across fields and rules (modes, ' +
      'duplicate ids, budget references, what this version runs), so a document valid by the schema may still be refused: ' +
      '400 VALIDATION_FAILED with every problem in `details.problems` (`path`, `rule`, `message`). A stale `if-match` is ' +
      '409 VERSION_CONFLICT: read the policy again.',
    parameters: [
      {
        ...header(
          'if-match',
          'The version read by GET /v1/admin/policy (`3`, `"3"` or `W/"3"`, as in `etag`); required, and not `*`: ' +
            'missing is 400 VALIDATION_FAILED, a version that is no longer current 409 VERSION_CONFLICT',
          { type: 'string', pattern: POLICY_IF_MATCH_PATTERN.source },
        ),
        required: true,
      },
      REASON_HEADER,
    ],
    requestBody: { required: true, content: { 'application/json': { schema: ref('PolicyDocument') } } },
    responses: { '200': { ...json(ref('PolicyView'), 'The new policy in force'), headers: POLICY_VERSION_HEADERS } },
    errors: ['VALIDATION_FAILED', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'VERSION_CONFLICT', 'POLICIES_UNAVAILABLE'],
  },
  validatePolicy: {
    operationId: 'validatePolicy',
    summary: 'Check a policy document without applying it: what it compiles to and which rules would fire now',
    description:
      'Checked as PUT checks it (a document valid by the schema may still be refused, with every problem in ' +
      '`details.problems`); nothing is stored.',
    requestBody: { required: true, content: { 'application/json': { schema: ref('PolicyDocument') } } },
    responses: { '200': json(ref('PolicyValidation'), 'The document is valid') },
    errors: ['VALIDATION_FAILED', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'POLICIES_UNAVAILABLE'],
  },
  listPolicyVersions: {
    operationId: 'listPolicyVersions',
    summary: 'The audit trail of the policy: who changed it, when, why and what, newest first',
    parameters: [
      query('limit', `At most this many (default 20)`, { type: 'integer', minimum: 1, maximum: MAX_VERSIONS_LIMIT }),
      query('before', 'Only versions below this one (the next page: the last version of this one)', {
        type: 'integer',
        minimum: 0,
        maximum: Number.MAX_SAFE_INTEGER,
      }),
    ],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['versions'],
          properties: { versions: { type: 'array', items: ref('PolicyVersionSummary') } },
        },
        'Versions',
      ),
    },
    errors: ['VALIDATION_FAILED', 'POLICIES_UNAVAILABLE'],
  },
  getPolicyVersion: {
    operationId: 'getPolicyVersion',
    summary: 'One version of the policy: its document and who wrote it',
    responses: { '200': json(ref('PolicyView'), 'The version') },
    errors: ['NOT_FOUND', 'VALIDATION_FAILED', 'POLICIES_UNAVAILABLE'],
  },
  rollbackPolicy: {
    operationId: 'rollbackPolicy',
    summary: "Make an earlier version's document current again, as a new version",
    description:
      "Version 0 goes back to following the deployment's configuration. With `if-match`, only if the policy is still at that " +
      'version (409 VERSION_CONFLICT otherwise); `*` or none: whatever the current version is.',
    parameters: [
      header(
        'if-match',
        'Roll back only if this is the current version (`3`, `"3"` or `W/"3"`, as in `etag`; `*`: any). ' +
          'One version only: a list is 400 VALIDATION_FAILED',
        { type: 'string', pattern: IF_MATCH_PATTERN.source },
      ),
    ],
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(rollbackBodySchema) } } },
    responses: {
      '200': { ...json(ref('PolicyView'), 'The policy in force after the rollback'), headers: POLICY_VERSION_HEADERS },
    },
    errors: [
      'NOT_FOUND',
      'VALIDATION_FAILED',
      'MALFORMED_JSON',
      'UNSUPPORTED_MEDIA_TYPE',
      'VERSION_CONFLICT',
      'POLICIES_UNAVAILABLE',
    ],
  },
  listPolicyFirings: {
    operationId: 'listPolicyFirings',
    summary: 'What the background rules did: their firings, newest first',
    description:
      "Read from this runtime's background evaluator, which keeps its most recent firings in memory: each with when, " +
      'the rule, the response and what became of it (`outcome`, `detail`). 503 POLICIES_UNAVAILABLE (permanent) where ' +
      'no evaluator runs.',
    parameters: [
      query('limit', `At most this many (default ${DEFAULT_FIRINGS_LIMIT})`, {
        type: 'integer',
        minimum: 1,
        maximum: MAX_FIRINGS_LIMIT,
      }),
    ],
    responses: {
      '200': json(
        {
          type: 'object',
          required: ['firings'],
          properties: { firings: { type: 'array', items: ref('PolicyFiring') } },
        },
        'Firings',
      ),
    },
    errors: ['VALIDATION_FAILED', 'POLICIES_UNAVAILABLE'],
  },
} satisfies Record<string, RouteDoc>;
