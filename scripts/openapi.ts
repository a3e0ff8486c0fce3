// `npm run openapi`: writes docs/openapi.json, the OpenAPI 3.1 document generated from the route table and the
// request schemas (core/api/openapi.ts). A test fails while the committed file differs from what this writes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_ROUTES } from '../core/api/routes.js';
import { openApiDocument } from '../core/api/openapi.js';

export const OPENAPI_FILE = join(import.meta.dirname, '..', 'docs', 'openapi.json');

/** The file's exact text. */
export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(API_ROUTES), null, 2)}\n`;
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  writeFileSync(OPENAPI_FILE, openApiText());
  console.log(`written ${OPENAPI_FILE}`);
}
