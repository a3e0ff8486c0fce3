/**
 * Compressed and encrypted scopes through the real HTTP API and the SDK (embedded backend: memory hot, the local
 * folder as cold with presigned URLs): values round-trip, sizes are the sizes written, and a transformed value's
 * bytes never travel through a presigned URL: an upload into such a scope and a download URL of such a value are
 * refused with 409 TRANSFORMED_SCOPE (typed in the SDK), while the same requests work in a plain namespace.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StrataClient, TransformedScopeError } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';

const TEXT = 'the same words again and again; '.repeat(200);

describe('compressed and encrypted scopes over HTTP', () => {
  let api: TestApi;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'strata-api-tx-'));
    // Outside npm start a key file is not created on first use: the operator provides it.
    mkdirSync(join(dir, 'keys'));
    writeFileSync(join(dir, 'keys', 'vault.key'), randomBytes(32).toString('base64'));
    api = await startTestApi(
      'embedded',
      {
        STRATA_POLICY_STORE: `file:${join(dir, 'policies')}`,
        STRATA_POLICY_REFRESH_MS: '100',
        STRATA_KEYRING: `file:${join(dir, 'keys')}`,
      },
      { build: { policyTimer: true } },
    );
    const admin = new StrataClient({ endpoint: api.url, retries: 0 });
    const current = await admin.policies.get();
    await admin.policies.put(
      {
        rules: [
          { id: 'squash', scope: { namespace: 'logs' }, on: { action: 'put' }, do: [{ compress: { minBytes: 256 } }] },
          {
            id: 'seal',
            scope: { namespace: 'vault', prefix: 'pii/' },
            on: { action: 'put' },
            do: [{ encrypt: { key: 'vault' } }],
          },
        ],
      },
      { ifVersion: current.version, reason: 'transforms' },
    );
    // In force once this server's live copy has picked it up (it refreshes every 100 ms).
    while (api.ctx.livePolicy!.current.view.version < 1) await new Promise((r) => setTimeout(r, 20));
  });
  afterAll(async () => {
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('round-trips compressed and encrypted values, reporting the sizes written', async () => {
    const logs = new StrataClient({ endpoint: api.url, namespace: 'logs', retries: 0 });
    const put = await logs.put('today', TEXT);
    expect(put.size).toBe(TEXT.length);
    const got = await logs.get('today');
    expect(got?.text()).toBe(TEXT);
    const stored = await api.ctx.coordinator.tierList().at(-1)!.get('logs', 'today');
    expect(stored?.header.encoding).toMatchObject({ zstd: true, size: TEXT.length });
    const head = await fetch(`${api.url}/v1/ns/logs/keys/today`, { method: 'HEAD' });
    expect(head.headers.get('x-strata-size')).toBe(String(TEXT.length));

    const vault = new StrataClient({ endpoint: api.url, namespace: 'vault', retries: 0 });
    await vault.put('pii/ada', 'Ada Lovelace, 10 Dec 1815');
    expect((await vault.get('pii/ada'))?.text()).toBe('Ada Lovelace, 10 Dec 1815');
    const sealed = await api.ctx.coordinator.tierList().at(-1)!.get('vault', 'pii/ada');
    expect(sealed!.value.toString('latin1')).not.toContain('Lovelace');
    // Outside the prefix: stored as written.
    await vault.put('public/motto', 'hello');
    expect((await api.ctx.coordinator.tierList().at(-1)!.get('vault', 'public/motto'))!.header.encoding).toBeUndefined();
  });

  it('refuses upload URLs into a transformed scope and download URLs of transformed values, typed in the SDK', async () => {
    // A small client-side inline limit sends this value through the upload flow.
    const logs = new StrataClient({ endpoint: api.url, namespace: 'logs', retries: 0, inlineLimitBytes: 1024 });
    const err = await logs.put('big', TEXT).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransformedScopeError);
    expect(err).toMatchObject({ status: 409, code: 'TRANSFORMED_SCOPE', details: { rule: 'squash' } });
    expect((err as Error).message).toMatch(/PUT it through the API instead/);

    await new StrataClient({ endpoint: api.url, namespace: 'logs', retries: 0 }).put('inline', TEXT);
    const res = await fetch(`${api.url}/v1/ns/logs/downloads/inline`);
    expect(res.status).toBe(409);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('TRANSFORMED_SCOPE');

    // The control: the same requests in a namespace without transforms work.
    const plain = new StrataClient({ endpoint: api.url, namespace: 'plain', retries: 0, inlineLimitBytes: 1024 });
    expect((await plain.put('big', TEXT)).size).toBe(TEXT.length);
    expect((await fetch(`${api.url}/v1/ns/plain/downloads/big`)).status).toBe(200);
  });
});
