import type { RouteDoc } from './route-types.js';
import { replaceNodeBodySchema, replacementControlsBodySchema, upgradeFleetBodySchema } from './node-operations.js';
import { EXECUTION_START_ERRORS, executionNameParam, executionStarted, fromZod, json, ref } from './route-doc-parts.js';

/**
 * The OpenAPI entries of the node admin routes (`/v1/admin/nodes...`), as route-docs.ts has them for the others;
 * ROUTE_DOCS includes these. The response schemas (`CacheNode`, `NodeList`, `ReplacementControls`, `NodeRemoval`)
 * are components of the document (openapi.ts).
 */

const NO_WARM_TIER =
  '503 TIER_UNAVAILABLE with `details.permanent: true` where the runtime has no warm tier (no ring store and fleet ' +
  'secret configured)';

export const NODE_ROUTE_DOCS = {
  listNodes: {
    operationId: 'listNodes',
    summary: "The warm tier's cache nodes as the ring has them, and the replacement controls",
    description:
      'Each node with its state (`DOWN` ones with when and why they were marked), where it runs and how many ranges of ' +
      `the ring it owns; the ring's version (\`null\` before there is a ring); whether automatic replacement is paused. ${NO_WARM_TIER}.`,
    responses: { '200': json(ref('NodeList'), 'The nodes') },
    errors: ['TIER_UNAVAILABLE'],
  },
  replaceNode: {
    operationId: 'replaceNode',
    summary: 'Replace a DOWN cache node: start the replace-node workflow for it',
    description:
      'The same as `POST /v1/admin/workflows/replace-node/executions` with `{ "nodeId": <node>, ...body }`: the body ' +
      "(optional) holds the other fields of the workflow's input, checked before the execution starts; `?name=` names " +
      "the execution. Whether the node is DOWN is checked by the workflow's first step (a node that is not fails the " +
      'execution).',
    parameters: [executionNameParam],
    requestBody: {
      required: false,
      description: "The replacement's options (the node is the path's)",
      content: { 'application/json': { schema: fromZod(replaceNodeBodySchema) } },
    },
    responses: {
      '202': executionStarted("The execution's URL (`../../workflows/executions/<name>`, relative to the request's)"),
    },
    errors: [...EXECUTION_START_ERRORS],
  },
  upgradeFleet: {
    operationId: 'upgradeFleet',
    summary: 'Roll a new cache-node version out: start the rolling-upgrade workflow',
    description:
      "Replaces running cache nodes one at a time with nodes launched now (on AWS from the launch template's `$Latest` " +
      'version, so create the new version first): each hands all its ranges over to its successor under load (the ' +
      'migration sessions of a scale-out), leaves the ring and is terminated after the grace period; then the next. ' +
      'The same as `POST /v1/admin/workflows/rolling-upgrade/executions` with the body: every field is optional ' +
      '(`nodes` default: every NORMAL node, or the ones a stopped upgrade had not replaced yet), checked before the ' +
      'execution starts; `?name=` names the execution. A failure rolls back the current node and stops the execution; ' +
      "one upgrade runs at a time (the workflow's first step fails a second one).",
    parameters: [executionNameParam],
    requestBody: {
      required: false,
      description: "The upgrade's options",
      content: { 'application/json': { schema: fromZod(upgradeFleetBodySchema) } },
    },
    responses: { '202': executionStarted("The execution's URL (`../workflows/executions/<name>`, relative to the request's)") },
    errors: [...EXECUTION_START_ERRORS],
  },
  removeNode: {
    operationId: 'removeNode',
    summary: 'Remove a DOWN cache node without a replacement: its ranges go to the next NORMAL node clockwise',
    description:
      'Each receiver first drops what it still holds in the spans it takes, then the ring is changed; the ranges start ' +
      'empty and fill by read-through. 404 NOT_FOUND when the node is not in the ring; 409 VERSION_CONFLICT when it ' +
      'is not DOWN, a migration involves it, or no NORMAL node is left to take its ranges (`details.state`); 503 ' +
      `TIER_UNAVAILABLE when a receiver could not be reached (the ring is unchanged). ${NO_WARM_TIER}.`,
    responses: { '200': json(ref('NodeRemoval'), 'Removed') },
    errors: ['NOT_FOUND', 'VALIDATION_FAILED', 'VERSION_CONFLICT', 'TIER_UNAVAILABLE'],
  },
  getReplacementControls: {
    operationId: 'getReplacementControls',
    summary: 'Whether automatic node replacement is paused, by whom, when and why',
    responses: { '200': json(ref('ReplacementControls'), 'The replacement controls') },
    errors: ['TIER_UNAVAILABLE'],
  },
  putReplacementControls: {
    operationId: 'putReplacementControls',
    summary: 'Pause or resume automatic node replacement, for every health checker at once',
    description:
      'While paused, the health check probes and reports but marks no node DOWN, so nothing is replaced (a long ' +
      "network incident, planned maintenance). The caller's name (the admin key's tenant, or the IAM principal) is " +
      `recorded as \`by\`. ${NO_WARM_TIER}.`,
    requestBody: { required: true, content: { 'application/json': { schema: fromZod(replacementControlsBodySchema) } } },
    responses: { '200': json(ref('ReplacementControls'), 'The replacement controls now') },
    errors: ['VALIDATION_FAILED', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'VERSION_CONFLICT', 'TIER_UNAVAILABLE'],
  },
} satisfies Record<string, RouteDoc>;
