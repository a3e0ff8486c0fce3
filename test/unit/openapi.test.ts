import { readFileSync } from 'node:fs';
import { openApiDocument } from '../../core/api/openapi.js';
import { API_ROUTES } from '../../core/api/routes.js';
import { batchPutSchema } from '../../core/api/validation.js';
import { OPENAPI_FILE, openApiText } from '../../scripts/openapi.js';
import { startTestApi } from '../helpers/api-server.js';
import * as z from 'zod';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('OpenAPI document (docs/openapi.json)', () => {
  const doc = openApiDocument(API_ROUTES) as Json;

  it('documents every route of the route table, and nothing else', () => {
    for (const r of API_ROUTES) {
      const op = doc.paths[r.resource]?.[r.method.toLowerCase()];
      expect(op).toBeDefined();
      // Every path parameter, with a schema; admin routes also need the SigV4 identity.
      for (const [, name] of r.resource.matchAll(/\{([A-Za-z0-9]+)\}/g))
        expect(op.parameters).toContainEqual(
          expect.objectContaining({ name, in: 'path', required: true, schema: expect.any(Object) }),
        );
      expect(op.security).toEqual(r.auth === 'admin' ? [{ apiKey: [], sigv4: [] }] : [{ apiKey: [] }]);
      if (r.resource.includes('{ns}'))
        expect(op.responses['403'].content['application/json'].schema.allOf[1].properties.error.properties.code.enum).toContain(
          'NAMESPACE_FORBIDDEN',
        );
    }
    const ids = API_ROUTES.map((r) => doc.paths[r.resource][r.method.toLowerCase()].operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('takes JSON request bodies from the zod schemas the handlers validate with, and every $ref resolves', () => {
    const body = doc.paths['/v1/ns/{ns}/batch/put'].post.requestBody.content['application/json'].schema;
    const { $schema: _d, ...fromZod } = z.toJSONSchema(batchPutSchema, { io: 'input' }) as Json;
    expect(body).toEqual(fromZod);
    expect(body.properties.items.maxItems).toBe(100);
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([A-Za-z]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    for (const name of refs) expect(doc.components.schemas[name]).toBeDefined();
  });

  it('is committed as generated: run `npm run openapi` after changing routes or schemas', () => {
    expect(readFileSync(OPENAPI_FILE, 'utf8') === openApiText()).toBe(true);
  });

  it('is served by the API at /v1/openapi.json (as deployed), and by the local server at /openapi.json too', async () => {
    const api = await startTestApi('embedded');
    try {
      const res = await fetch(`${api.url}/openapi.json`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(doc);
      const routed = await fetch(`${api.url}/v1/openapi.json`);
      expect(routed.status).toBe(200);
      expect(routed.headers.get('cache-control')).toBe('public, max-age=300');
      expect(await routed.json()).toEqual(doc);
      // Served twice from one serialization, with headers of its own each time.
      expect((await fetch(`${api.url}/v1/openapi.json`)).headers.get('x-request-id')).not.toBe(
        routed.headers.get('x-request-id'),
      );
      // A live /v1/stats answer has the fields the document lists: every required one, no undocumented top-level one.
      const stats = (await (await fetch(`${api.url}/v1/stats`)).json()) as Json;
      const schema = doc.paths['/v1/stats'].get.responses['200'].content['application/json'].schema;
      for (const k of schema.required) expect(stats).toHaveProperty(k);
      for (const k of Object.keys(stats)) expect(Object.keys(schema.properties)).toContain(k);
      const tierSchema = schema.properties.tiers.items;
      for (const t of stats.tiers as Json[]) {
        for (const k of tierSchema.required) expect(t).toHaveProperty(k);
        for (const k of ['entries', 'bytes', 'capacityBytes', 'evictions'])
          if (k in t) expect(Object.keys(tierSchema.properties)).toContain(k);
      }
    } finally {
      await api.close();
    }
  });
});
