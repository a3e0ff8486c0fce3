/**
 * docs/POLICIES.md and docs/policy-schema.json stay true to the code: the schema file is what `npm run openapi`
 * generates, every example marked `json policy` is accepted, and every preset, event and response is described.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { ACTIONS, PRESET_NAMES, responseSchema } from '../../core/policy/document.js';
import { POLICY_SCHEMA_FILE, policySchemaText } from '../../scripts/openapi.js';

const DOC = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'POLICIES.md'), 'utf8');

describe('docs/POLICIES.md and docs/policy-schema.json', () => {
  it('commits the JSON Schema the code generates (run `npm run openapi` after changing core/policy/document.ts)', () => {
    expect(readFileSync(POLICY_SCHEMA_FILE, 'utf8')).toBe(policySchemaText());
  });

  it('shows only examples the server accepts', () => {
    const examples = [...DOC.matchAll(/```json policy\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(examples.length).toBeGreaterThanOrEqual(3);
    for (const text of examples) expect(() => compilePolicyInput(JSON.parse(text))).not.toThrow();
  });

  it('describes every preset, event and response', () => {
    for (const name of PRESET_NAMES) expect(DOC).toContain(`| \`${name}\` |`);
    for (const action of ACTIONS) expect(DOC).toContain(`"${action}"`);
    for (const event of ['timer', 'threshold']) expect(DOC).toContain(`{ "${event}": `);
    const kinds = responseSchema.options.map((o) => Object.keys(o.shape)[0]!);
    for (const kind of kinds) expect(DOC).toContain(`{ "${kind}": `);
  });
});
