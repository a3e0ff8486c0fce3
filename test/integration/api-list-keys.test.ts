/**
 * Listing keys through the API (issue 24, items 2 and 7): the real local server over real HTTP, driven by the SDK's
 * async iterator, raw requests and the CLI, with tenant keys mapped to namespaces (x-api-key as the key id, as
 * STRATA_TENANT_ACCESS documents for local runs).
 */
import { NamespaceForbiddenError, StrataClient, ValidationError } from '../../sdk/src/index.js';
import { compareKeys } from '../../core/model/key-order.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { runStrataCli } from '../helpers/strata-cli.js';

describe('listing keys (local server, SDK, CLI)', () => {
  let api: TestApi;
  const client = (apiKey: string | undefined, namespace: string) =>
    new StrataClient({ endpoint: api.url, apiKey, namespace, retries: 0 });
  const collect = async <T>(it: AsyncIterable<T>): Promise<T[]> => {
    const out: T[] = [];
    for await (const x of it) out.push(x);
    return out;
  };
  const raw = (ns: string, query: string, apiKey = 'web-key') =>
    fetch(`${api.url}/v1/ns/${ns}/keys?${query}`, { headers: { 'x-api-key': apiKey } });

  beforeAll(async () => {
    api = await startTestApi('embedded', {
      STRATA_TENANT_ACCESS: JSON.stringify([
        { keyId: 'web-key', tenant: 'web', namespaces: ['web-*'] },
        { keyId: 'reports-key', tenant: 'analytics', namespaces: ['reports'] },
      ]),
    });
  }, 300_000);

  afterAll(async () => {
    await api?.close();
  });

  it('iterates every key in UTF-8 order, a page at a time, without deleted or expired keys', async () => {
    const web = client('web-key', 'web-list');
    const keys = ['b', 'a', 'a/b', 'a/c', 'é', '\u{1F600}', '\uFFFD', 'sp ace', 'pct%2F'];
    for (const k of keys) await web.put(k, k);
    await web.put('deleted', 'x');
    await web.delete('deleted');
    await web.put('short-lived', 'x', { ttl: 1 });
    await new Promise((r) => setTimeout(r, 1100));
    expect(await collect(web.keys({ limit: 2 }))).toEqual([...keys].sort(compareKeys));
    expect(await collect(web.keys({ prefix: 'a/' }))).toEqual(['a/b', 'a/c']);
    expect(await collect(web.keys({ start: 'a', end: 'b', inclusive: 'both' }))).toEqual(['a', 'a/b', 'a/c', 'b']);
    expect(await collect(web.keys({ start: 'a', end: 'b', inclusive: 'none' }))).toEqual(['a/b', 'a/c']);
  });

  it('gives metadata on request: version, size, expiry, tags and the tiers holding the key', async () => {
    const web = client('web-key', 'web-meta');
    const w = await web.put('k', 'hello', { ttl: 600, tags: ['t1'] });
    const [item] = await collect(web.keys({ metadata: true }));
    expect(item).toMatchObject({ key: 'k', version: w.version, size: 5, tags: ['t1'] });
    expect(item!.expiresAt).toBeInstanceOf(Date);
    expect(item!.tiers!.length).toBeGreaterThan(0);
  });

  it('pages by a signed cursor bound to the caller, the namespace and the range', async () => {
    const web = client('web-key', 'web-cursor');
    for (const k of ['a', 'b', 'c']) await web.put(k, k);
    const first = await web.listKeys({ limit: 1 });
    expect(first.keys.map((k) => k.key)).toEqual(['a']);
    const second = await web.listKeys({ limit: 1, cursor: first.cursor });
    expect(second.keys.map((k) => k.key)).toEqual(['b']);
    const cursor = encodeURIComponent(first.cursor!);
    const refusals = [
      raw('web-cursor', `cursor=${cursor}&prefix=a`), // another range
      raw('web-other', `cursor=${cursor}`), // another namespace
      raw('web-cursor', `cursor=${cursor.slice(0, -2)}xx`), // edited
    ];
    for (const res of await Promise.all(refusals)) {
      const body = (await res.json()) as { error: { code: string; details: { field: string } } };
      expect([res.status, body.error.code, body.error.details.field]).toEqual([400, 'VALIDATION_FAILED', 'cursor']);
    }
  });

  it('refuses bad queries with typed 400s naming the parameter', async () => {
    const web = client('web-key', 'web-list');
    for (const [query, field] of [
      ['limit=0', 'query.limit'],
      ['limit=1001', 'query.limit'],
      ['inclusive=left', 'query.inclusive'],
      ['metadata=yes', 'query.metadata'],
      ['start=b&end=a', 'start'],
      ['bogus=1', 'query'],
    ] as const) {
      const res = await raw('web-list', query);
      const body = (await res.json()) as { error: { code: string; details: { field: string } } };
      expect([query, res.status, body.error.code, body.error.details.field]).toEqual([query, 400, 'VALIDATION_FAILED', field]);
    }
    // The SDK checks its options when the iterator is made, before anything is sent.
    expect(() => web.keys({ limit: 0 })).toThrow(ValidationError);
  });

  it("never lets a tenant list another tenant's namespace, nor reuse its cursor", async () => {
    const reports = client('reports-key', 'reports');
    for (const k of ['r1', 'r2']) await reports.put(k, 'v');
    const intruder = client('web-key', 'reports');
    await expect(collect(intruder.keys())).rejects.toBeInstanceOf(NamespaceForbiddenError);
    const page = await reports.listKeys({ limit: 1 });
    // The owner's cursor, replayed by another tenant on a namespace of its own, is refused (bound to the caller).
    const replay = await raw('web-list', `cursor=${encodeURIComponent(page.cursor!)}`);
    expect(replay.status).toBe(400);
  });

  it('the CLI prints keys one per line, with --long facts, --json lines and --limit', async () => {
    const web = client('web-key', 'web-cli-keys');
    for (const k of ['x/1', 'x/2', 'y']) await web.put(k, 'v');
    const as = ['--api-key', 'web-key', '--ns', 'web-cli-keys'];
    const plain = await runStrataCli(api.url, ['keys', ...as]);
    expect([plain.code, plain.stdout]).toEqual([0, 'x/1\nx/2\ny\n']);
    const prefixed = await runStrataCli(api.url, ['keys', '--prefix', 'x/', '--limit', '1', ...as]);
    expect(prefixed.stdout).toBe('x/1\n');
    const long = await runStrataCli(api.url, ['keys', '-l', '--prefix', 'y', ...as]);
    expect(long.stdout.split('\t').slice(0, 2)).toEqual(['y', '1']);
    const json = await runStrataCli(api.url, ['keys', '--json', '--start', 'y', ...as]);
    expect(JSON.parse(json.stdout)).toMatchObject({ key: 'y', size: 1 });
    const bad = await runStrataCli(api.url, ['keys', '--inclusive', 'left', ...as]);
    expect(bad.code).toBe(2);
  });
});
