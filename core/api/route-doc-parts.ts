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
