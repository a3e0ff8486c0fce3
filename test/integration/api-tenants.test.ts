/**
 * Tenant API keys mapped to namespaces, end to end: the real local server (same Lambda handlers, x-api-key as the
 * key id, as STRATA_TENANT_ACCESS documents for local runs) driven through the SDK over real HTTP. In AWS the key
 * id comes from API Gateway, which cannot run here; the stack test checks the map it writes.
 */
import type { ExecutionSummary, WorkflowService } from '../../core/workflows/admin-service.js';
import { AuthenticationError, NamespaceForbiddenError, StrataClient } from '../../sdk/src/index.js';
import { startTestApi, type Backend, type TestApi } from '../helpers/api-server.js';

describe('API keys limited to their namespaces (local server, SDK)', () => {
  let api: TestApi;
  const client = (apiKey: string | undefined, namespace: string) =>
    new StrataClient({ endpoint: api.url, apiKey, namespace, retries: 0 });

  beforeAll(async () => {
    api = await startTestApi('embedded', {
      STRATA_TENANT_ACCESS: JSON.stringify([
        { keyId: 'web-key', tenant: 'web', namespaces: ['web-*'] },
        { keyId: 'reports-key', tenant: 'analytics', namespaces: ['reports'] },
      ]),
    });
  });

  afterAll(async () => {
    await api?.close();
  });

  it("lets each key use its own namespaces and refuses the others' with NamespaceForbiddenError", async () => {
    const web = client('web-key', 'web-sessions');
    await web.put('s1', 'hello');
    expect(await (await web.get('s1'))!.text()).toBe('hello');

    const intruder = client('web-key', 'reports');
    const err = await intruder.get('s1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NamespaceForbiddenError);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({
      code: 'NAMESPACE_FORBIDDEN',
      status: 403,
      namespace: 'reports',
      allowed: ['web-*'],
      retryable: false,
    });
    await expect(intruder.putMany([{ key: 'x', value: 'y' }])).rejects.toBeInstanceOf(NamespaceForbiddenError);
    // A touch is a write: refused in another tenant's namespace, and the key's TTL there is unchanged.
    await client('reports-key', 'reports').put('kept', 'v', { ttl: 60 });
    await expect(client('web-key', 'reports').touch('kept', { ttl: null })).rejects.toBeInstanceOf(NamespaceForbiddenError);
    expect((await client('reports-key', 'reports').get('kept'))!.expiresAt).not.toBeNull();

    const reports = client('reports-key', 'reports');
    expect(await reports.get('x')).toBeUndefined(); // the refused batch wrote nothing
    await expect(client('reports-key', 'web-sessions').get('s1')).rejects.toMatchObject({
      code: 'NAMESPACE_FORBIDDEN',
      allowed: ['reports'],
    });
  });

  it('refuses namespaced requests without a key or with an unknown one, and keeps stats and health open', async () => {
    await expect(client(undefined, 'web-sessions').get('s1')).rejects.toMatchObject({
      code: 'NAMESPACE_FORBIDDEN',
      message: expect.stringContaining('no API key'),
    });
    await expect(client('stolen', 'web-sessions').get('s1')).rejects.toMatchObject({
      code: 'NAMESPACE_FORBIDDEN',
      message: expect.stringContaining('not mapped to any tenant'),
    });
    expect((await client(undefined, 'web-sessions').health()).status).toBeDefined();
    expect((await client(undefined, 'web-sessions').stats()).tiers.length).toBeGreaterThan(0);
  });
});

describe('admin routes with STRATA_TENANT_ACCESS set (local server, SDK)', () => {
  let api: TestApi;
  const started: string[] = [];
  // A stand-in for the local workflows: what matters here is whether a request reaches them.
  const workflows: WorkflowService = {
    start: async (workflow, _input, name) => {
      const summary: ExecutionSummary = {
        execution: name ?? `${workflow}-1`,
        workflow,
        status: 'RUNNING',
        startedAt: '2026-01-01T00:00Z',
      };
      started.push(summary.execution);
      return summary;
    },
    describe: async () => undefined,
    list: async () => [],
  };
  const forbidden = (message: string) => ({
    ...{ code: 'NAMESPACE_FORBIDDEN', status: 403, details: { scope: 'admin' } },
    message: expect.stringContaining(message),
  });
  const admin = (apiKey: string | undefined) => new StrataClient({ endpoint: api.url, apiKey, retries: 0 }).workflows;

  beforeAll(async () => {
    api = await startTestApi(
      'embedded',
      {
        STRATA_TENANT_ACCESS: JSON.stringify([
          { keyId: 'web-key', tenant: 'web', namespaces: ['*'] },
          { keyId: 'ops-key', tenant: 'ops', admin: true },
        ]),
      },
      { workflows },
    );
  });

  afterAll(async () => {
    await api?.close();
  });

  it('refuses a tenant key, an unknown key and no key with 403 NAMESPACE_FORBIDDEN, and starts nothing', async () => {
    for (const [key, message] of [
      ['web-key', "tenant 'web' may not use the admin routes"],
      ['stolen', 'not mapped to any tenant'],
      [undefined, 'has none'],
    ] as const) {
      const err = await admin(key)
        .start('scale-out', {}, { name: 'intruder' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NamespaceForbiddenError);
      expect(err).toMatchObject(forbidden(message));
      await expect(admin(key).list()).rejects.toMatchObject({ code: 'NAMESPACE_FORBIDDEN' });
    }
    expect(started).toEqual([]);
  });

  it('serves the admin key, which reaches no namespace', async () => {
    expect(await admin('ops-key').list()).toEqual([]);
    expect((await admin('ops-key').start('scale-out', {}, { name: 'by-ops' })).execution).toBe('by-ops');
    expect(started).toEqual(['by-ops']);
    const ops = new StrataClient({ endpoint: api.url, apiKey: 'ops-key', namespace: 'web-sessions', retries: 0 });
    await expect(ops.get('s1')).rejects.toMatchObject({ code: 'NAMESPACE_FORBIDDEN', allowed: [] });
  });

  it('refuses the node routes to a tenant key, an unknown key and no key; the admin key gets past the check', async () => {
    const before = [...started];
    for (const [key, message] of [
      ['web-key', "tenant 'web' may not use the admin routes"],
      ['stolen', 'not mapped to any tenant'],
      [undefined, 'has none'],
    ] as const) {
      const nodes = new StrataClient({ endpoint: api.url, apiKey: key, retries: 0 }).nodes;
      for (const call of [
        () => nodes.list(),
        () => nodes.replace('n3', {}, { name: 'intruder-replace' }),
        () => nodes.remove('n3'),
        () => nodes.replacement.get(),
        () => nodes.replacement.pause('intruder'),
        () => nodes.replacement.resume(),
      ]) {
        const err = await call().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(NamespaceForbiddenError);
        expect(err).toMatchObject(forbidden(message));
      }
    }
    expect(started).toEqual(before);
    // The admin key reaches the routes: a replacement starts; this server has no warm tier for the others (503).
    const nodes = new StrataClient({ endpoint: api.url, apiKey: 'ops-key', retries: 0 }).nodes;
    expect((await nodes.replace('n3', {}, { name: 'ops-replace' })).execution).toBe('ops-replace');
    await expect(nodes.list()).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE', status: 503, permanent: true });
  });
});

describe.each<Backend>(['embedded', 'redis+s3'])(
  'uploads belong to the tenant, namespace and key that created them (%s)',
  (backend) => {
    let api: TestApi;
    interface Ticket {
      uploadId: string;
      url: string;
      method: string;
      headers: Record<string, string>;
    }
    const call = (apiKey: string, method: string, path: string, body?: unknown) => {
      const headers = { 'x-api-key': apiKey, 'content-type': 'application/json' };
      return fetch(`${api.url}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    };
    const create = async (apiKey: string, ns: string, key: string, opts: Record<string, unknown> = {}): Promise<Ticket> => {
      const res = await call(apiKey, 'POST', `/v1/ns/${ns}/uploads/${encodeURIComponent(key)}`, opts);
      expect(res.status).toBe(200);
      return (await res.json()) as Ticket;
    };
    // The upload URL needs no API key: whoever holds it can PUT (once), which is why completion checks the caller.
    const putBytes = (t: Ticket, bytes: Buffer) =>
      fetch(new URL(t.url, api.url), { method: t.method, headers: t.headers, body: bytes });
    const complete = (apiKey: string, ns: string, key: string, uploadId: string) => {
      return call(apiKey, 'POST', `/v1/ns/${ns}/uploads/${encodeURIComponent(key)}/complete`, { uploadId });
    };
    const errorOf = async (res: Response) => ({
      status: res.status,
      ...((await res.json()) as { error: { code: string } }).error,
    });
    const bytes = (tag: string) => Buffer.concat([Buffer.from(tag), Buffer.alloc(4096, 1)]);

    beforeAll(async () => {
      api = await startTestApi(backend, {
        STRATA_INLINE_LIMIT_BYTES: '1024',
        STRATA_TENANT_ACCESS: JSON.stringify([
          { keyId: 'web-key', tenant: 'web', namespaces: ['web-*', 'shared'] },
          { keyId: 'web-key-2', tenant: 'web', namespaces: ['web-*'] },
          { keyId: 'reports-key', tenant: 'analytics', namespaces: ['reports', 'shared'] },
        ]),
      });
    });

    afterAll(async () => {
      await api?.close();
    });

    it("refuses another tenant's completion (into its own namespace or a shared one) with 404, and the owner's then works", async () => {
      const t = await create('web-key', 'web-files', 'report.bin');
      expect((await putBytes(t, bytes('owner'))).status).toBe(200);
      // Another tenant that saw the URL (the id is in it): into its own namespace, into one both tenants may use,
      // under the same key name. 404, as for an id that never existed: the upload's existence is not revealed.
      const unknown = await errorOf(await complete('reports-key', 'reports', 'report.bin', 'A'.repeat(24)));
      expect(unknown).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      for (const ns of ['reports', 'shared']) {
        expect(await errorOf(await complete('reports-key', ns, 'report.bin', t.uploadId))).toMatchObject({
          status: 404,
          code: 'NOT_FOUND',
        });
      }
      // The owner, but for another namespace or key than the upload was made for.
      expect((await complete('web-key', 'shared', 'report.bin', t.uploadId)).status).toBe(404);
      expect((await complete('web-key', 'web-files', 'other.bin', t.uploadId)).status).toBe(404);
      // Nothing was written anywhere, and the owner's completion still works.
      for (const [key, ns] of [
        ['reports-key', 'reports'],
        ['reports-key', 'shared'],
        ['web-key', 'web-files'],
      ] as const) {
        expect((await call(key, 'GET', `/v1/ns/${ns}/keys/${key === 'web-key' ? 'other.bin' : 'report.bin'}`)).status).toBe(404);
      }
      const done = await complete('web-key', 'web-files', 'report.bin', t.uploadId);
      expect(done.status).toBe(200);
      const got = await new StrataClient({ endpoint: api.url, apiKey: 'web-key', namespace: 'web-files', retries: 0 }).get(
        'report.bin',
      );
      expect(Buffer.from(got!.value).equals(bytes('owner'))).toBe(true);
    });

    it('binds an upload to the tenant, not to one of its keys', async () => {
      const t = await create('web-key', 'web-files', 'by-tenant');
      await putBytes(t, bytes('tenant'));
      expect((await complete('web-key-2', 'web-files', 'by-tenant', t.uploadId)).status).toBe(200);
    });

    it('completes an upload once: concurrent and later completions are refused, and its URL takes no second PUT', async () => {
      const t = await create('web-key', 'web-files', 'once.bin');
      expect((await putBytes(t, bytes('first'))).status).toBe(200);
      // Replacing the bytes before the completion is refused as well (S3: If-None-Match: * signed into the URL).
      expect((await putBytes(t, bytes('replaced'))).status).toBe(412);
      const results = await Promise.all(
        Array.from({ length: 4 }, () => complete('web-key', 'web-files', 'once.bin', t.uploadId)),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      expect(statuses.every((s) => s === 200 || s === 404 || s === 409)).toBe(true);
      expect((await complete('web-key', 'web-files', 'once.bin', t.uploadId)).status).toBe(404);
      expect((await putBytes(t, bytes('after'))).status).toBe(412);
      expect((await complete('web-key', 'web-files', 'once.bin', t.uploadId)).status).toBe(404);
      const got = await new StrataClient({ endpoint: api.url, apiKey: 'web-key', namespace: 'web-files', retries: 0 }).get(
        'once.bin',
      );
      expect(Buffer.from(got!.value).equals(bytes('first'))).toBe(true);
    });
  },
);
