import * as z from 'zod';
import type { Json } from './route-types.js';
import { IF_MATCH_PATTERN } from './validation.js';

// The building blocks of the route documentation (route-docs.ts, policy-route-docs.ts) and of the OpenAPI
// builder: references, JSON bodies, header and query parameters, zod schemas as JSON Schema.

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
export const json = (schema: Json, description: string): Json => ({ description, content: { 'application/json': { schema } } });
export const header = (name: string, description: string, schema: Json = { type: 'string' }): Json => ({
  name,
  in: 'header',
  required: false,
  description,
  schema,
});
export const query = (name: string, description: string, schema: Json = { type: 'string' }, required = false): Json => ({
  name,
  in: 'query',
  required,
  description,
  schema,
});
/** A zod schema as JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), without its `$schema` line. */
export function fromZod(schema: z.ZodType): Json {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Json;
  return rest;
}

/** If-Match as the server parses it (validation.ts): `*` or one version, bare or as an ETag; a list is a 400. */
export function ifMatchParam(verb: string): Json {
  const version = '(`123`, `"123"` or `W/"123"`, as in `etag`)';
  const what = `${verb} only if the key exists (\`*\`), or only if the stored version is this one ${version}`;
  const description = `${what}; 409 VERSION_CONFLICT otherwise. One version only: a list of ETags is 400 VALIDATION_FAILED`;
  return header('if-match', description, { type: 'string', pattern: IF_MATCH_PATTERN.source });
}

/** `?name=`: the name of a workflow execution a route starts (the three routes that start one share it). */
export const executionNameParam: Json = query('name', 'Execution name (1-80 of A-Z a-z 0-9 _ -); default generated', {
  type: 'string',
  pattern: '^[A-Za-z0-9_-]{1,80}$',
});

/** `202` with the started execution's summary and its URL in `location` (described relative to the request's). */
export function executionStarted(location: string): Json {
  return {
    ...json(ref('ExecutionSummary'), 'Started'),
    headers: { location: { description: location, schema: { type: 'string' } } },
  };
}

/** What a route that starts a workflow execution may refuse with. */
export const EXECUTION_START_ERRORS = [
  'VALIDATION_FAILED',
  'MALFORMED_JSON',
  'UNSUPPORTED_MEDIA_TYPE',
  'EXECUTION_EXISTS',
  'WORKFLOWS_UNAVAILABLE',
] as const;
