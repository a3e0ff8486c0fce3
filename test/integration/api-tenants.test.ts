/**
 * Tenant API keys mapped to namespaces, end to end: the real local server (same Lambda handlers, x-api-key as the
 * key id, as STRATA_TENANT_ACCESS documents for local runs) driven through the SDK over real HTTP. In AWS the key
 * id comes from API Gateway, which cannot run here; the stack test checks the map it writes.
 */
import { AuthenticationError, NamespaceForbiddenError, StrataClient } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';

describe('API keys limited to their namespaces (local server, SDK)', () => {
  let api: TestApi;
  const client = (apiKey: string | undefined, namespace: string) => new StrataClient({ endpoint: api.url, apiKey, namespace, retries: 0 });

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
    expect(err).toMatchObject({ code: 'NAMESPACE_FORBIDDEN', status: 403, namespace: 'reports', allowed: ['web-*'], retryable: false });
    await expect(intruder.putMany([{ key: 'x', value: 'y' }])).rejects.toBeInstanceOf(NamespaceForbiddenError);

    const reports = client('reports-key', 'reports');
    expect(await reports.get('x')).toBeUndefined(); // the refused batch wrote nothing
    await expect(client('reports-key', 'web-sessions').get('s1')).rejects.toMatchObject({ code: 'NAMESPACE_FORBIDDEN', allowed: ['reports'] });
  });

  it('refuses namespaced requests without a key or with an unknown one, and keeps stats and health open', async () => {
    await expect(client(undefined, 'web-sessions').get('s1')).rejects.toMatchObject({ code: 'NAMESPACE_FORBIDDEN', message: expect.stringContaining('no API key') });
    await expect(client('stolen', 'web-sessions').get('s1')).rejects.toMatchObject({ code: 'NAMESPACE_FORBIDDEN', message: expect.stringContaining('not mapped to any tenant') });
    expect((await client(undefined, 'web-sessions').health()).status).toBeDefined();
    expect((await client(undefined, 'web-sessions').stats()).tiers.length).toBeGreaterThan(0);
  });
});
