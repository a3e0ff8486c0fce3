// `npm run openapi`: writes docs/openapi.json, the OpenAPI 3.1 document generated from the route table and the
// request schemas (core/api/openapi.ts), and docs/policy-schema.json, the policy document's JSON Schema
// (core/policy/document.ts, described in docs/POLICIES.md). Tests fail while the committed files differ from what
// this writes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { API_ROUTES } from '../core/api/routes.js';
import { openApiDocument } from '../core/api/openapi.js';
import { policyDocumentSchema } from '../core/policy/document.js';

export const OPENAPI_FILE = join(import.meta.dirname, '..', 'docs', 'openapi.json');

/** The file's exact text. */
export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(API_ROUTES), null, 2)}\n`;
}

export const POLICY_SCHEMA_FILE = join(import.meta.dirname, '..', 'docs', 'policy-schema.json');

/** The policy document's JSON Schema (draft 2020-12), as editors and `strata policy validate` users read it. */
export function policySchemaText(): string {
  const schema = {
    ...(z.toJSONSchema(policyDocumentSchema, { io: 'input' }) as Record<string, unknown>),
    title: 'Strata policy document',
    description: 'Tiers, event -> response rules, budgets and controls (docs/POLICIES.md).',
  };
  return `${JSON.stringify(schema, null, 2)}\n`;
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  writeFileSync(OPENAPI_FILE, openApiText());
  writeFileSync(POLICY_SCHEMA_FILE, policySchemaText());
  console.log(`written ${OPENAPI_FILE} and ${POLICY_SCHEMA_FILE}`);
}
