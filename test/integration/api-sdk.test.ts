/**
 * The HTTP API end to end: the real local server (same Lambda handlers) over real tiers, driven through the SDK.
 * Runs against the embedded defaults (memory + local folder) and against redis-server + LocalStack S3.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StrataClient, VersionConflictError, ValidationError, NotFoundError } from '../../sdk/src/index.js';
import { startTestApi, type Backend, type TestApi } from '../helpers/api-server.js';

const INLINE_LIMIT = 256 * 1024;

describe.each<Backend>(['embedded', 'redis+s3'])('API through the SDK (%s)', (backend) => {
  let api: TestApi;
  let client: StrataClient;
  let origin: Server;
  let originUrl: string;
  let originCalls = 0;

  beforeAll(async () => {
    origin = createServer((req, res) => {
      originCalls++;
      const key = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
      setTimeout(() => {
        if (key.startsWith('missing')) res.writeHead(404).end();
        else if (key.startsWith('broken')) res.writeHead(500).end('boom');
        else res.writeHead(200, { 'content-type': 'text/plain' }).end(`origin:${key}`);
      }, 50);
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    api = await startTestApi(backend, {
      STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT),
      STRATA_NAMESPACES: JSON.stringify({
        defaults: { writeAroundBytes: 128 * 1024 },
        namespaces: {
          nol1: { nearCache: { enabled: false } },
          wb: { writeMode: 'write-back', flushIntervalMs: 100 },
          rt: { origin: { url: `${originUrl}/items/{key}`, ttlSeconds: 60 } },
        },
      }),
    });
    client = new StrataClient({ endpoint: api.url, namespace: 'app', retries: 1, inlineLimitBytes: INLINE_LIMIT });
  });

  afterAll(async () => {
    await api?.close();
    await new Promise((r) => origin?.close(r));
  });

  it('round-trips binary, text and JSON values with their metadata', async () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const w = await client.put('bin', bytes, { ttl: 120, tags: ['a', 'b:c'] });
    expect(w.tiers).toEqual(['hot', 'cold']);
    const got = (await client.get('bin'))!;
    expect(Buffer.from(got.value).equals(Buffer.from(bytes))).toBe(true);
    expect(got.version).toBe(w.version);
    expect(got.tags).toEqual(['a', 'b:c']);
    expect(got.expiresAt!.getTime()).toBeGreaterThan(Date.now() + 100_000);
    await client.put('json', { hello: 'wörld', n: [1, 2] });
    expect((await client.get('json'))!.json()).toEqual({ hello: 'wörld', n: [1, 2] });
    await client.put('empty', new Uint8Array(0));
    expect((await client.get('empty'))!.value.length).toBe(0);
  });

  it('keeps awkward keys apart and intact', async () => {
    const keys = ['a/b', 'a%2Fb', '../etc/passwd', '..', '.', 'ñ日本😀', 'with space', '{tag}', 'x'.repeat(500)];
    for (const [i, k] of keys.entries()) await client.put(k, `value-${i}`);
    for (const [i, k] of keys.entries()) expect((await client.get(k))!.text()).toBe(`value-${i}`);
  });

  it('answers misses with undefined, has() with HEAD, and deletes with tombstones', async () => {
    expect(await client.get('never-written')).toBeUndefined();
    expect(await client.has('never-written')).toBe(false);
    await client.put('gone', 'x');
    expect(await client.has('gone')).toBe(true);
    const d = await client.delete('gone');
    expect(d.version).toBeGreaterThan(0);
    expect(await client.get('gone')).toBeUndefined();
  });

  // sdk/README.md and docs/API.md say so: deleting is idempotent, a key never written gets a tombstone version too;
  // only a conditional delete of a missing key fails.
  it('deletes a key that does not exist without an error, unless the delete is conditional', async () => {
    const d = await client.delete('never-written-delete');
    expect(d.version).toBeGreaterThan(0);
    await expect(client.delete('never-written-delete', { ifMatch: '*' })).rejects.toBeInstanceOf(VersionConflictError);
  });

  it('reads with the metadata `strata get -v` prints: version, tier, expiry', async () => {
    const w = await client.put('meta', 'v', { ttl: 120, tags: ['t1'] });
    const item = (await client.get('meta'))!;
    expect(item).toMatchObject({ version: w.version, tags: ['t1'] });
    expect(['l1', 'hot', 'warm', 'cold']).toContain(item.tier);
    expect(item.expiresAt!.getTime()).toBe(w.expiresAt!.getTime());
  });

  it('answers /v1/stats with the fields docs/API.md lists', async () => {
    const stats = await client.stats();
    expect(stats).toMatchObject({
      uptimeSeconds: expect.any(Number),
      promotions: expect.any(Number),
      flushed: expect.any(Number),
    });
    expect(stats).not.toHaveProperty('requests');
    for (const t of stats.tiers) {
      expect(t).toMatchObject({
        name: expect.any(String),
        kind: expect.any(String),
        hits: expect.any(Number),
        misses: expect.any(Number),
      });
      expect(t).toMatchObject({ errors: expect.any(Number), ok: true });
    }
    expect(stats.tiers.map((t) => t.name)).toEqual(expect.arrayContaining(['hot', 'cold']));
  });

  it('enforces conditional writes with typed 409s', async () => {
    const w1 = await client.put('cond', 'v1', { ifNoneMatch: '*' });
    await expect(client.put('cond', 'v2', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(VersionConflictError);
    await expect(client.put('cond', 'v2', { ifMatch: w1.version + 1 })).rejects.toMatchObject({
      code: 'VERSION_CONFLICT',
      status: 409,
    });
    const w2 = await client.put('cond', 'v2', { ifMatch: w1.version });
    expect((await client.get('cond'))!.version).toBe(w2.version);
  });

  it('revalidates with if-none-match: 304 without the value while the version holds, the new value once it changed', async () => {
    const w1 = await client.put('etagged', 'first', { tags: ['t'] });
    expect(await client.get('etagged', { ifNoneMatch: w1.version })).toEqual({
      key: 'etagged',
      notModified: true,
      version: w1.version,
      expiresAt: null,
      tier: expect.any(String),
      tags: ['t'],
    });
    const url = `${api.url}/v1/ns/app/keys/etagged`;
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(url, { method, headers: { 'if-none-match': `W/"1", "${w1.version}"` } });
      expect([method, res.status, res.headers.get('etag'), await res.text()]).toEqual([method, 304, `"${w1.version}"`, '']);
    }
    expect((await fetch(url, { headers: { 'if-none-match': '*' } })).status).toBe(304);
    expect((await fetch(url, { headers: { 'if-none-match': '"abc"' } })).status).toBe(200);
    const bad = await fetch(url, { headers: { 'if-none-match': 'not an etag' } });
    expect([bad.status, await bad.json()]).toEqual([
      400,
      {
        error: expect.objectContaining({
          code: 'VALIDATION_FAILED',
          details: expect.objectContaining({ field: 'if-none-match' }),
        }),
      },
    ]);
    // Changed: the newer value in full, never a 304 for the version the caller held.
    const w2 = await client.put('etagged', 'second');
    const fresh = await client.get('etagged', { ifNoneMatch: w1.version });
    expect(fresh && !('notModified' in fresh) && [fresh.version, Buffer.from(fresh.value).toString()]).toEqual([
      w2.version,
      'second',
    ]);
    await expect(client.get('etagged-missing', { ifNoneMatch: 1 })).resolves.toBeUndefined();
    expect((await fetch(`${url}-missing`, { headers: { 'if-none-match': '*' } })).status).toBe(404);
    // A value above the inline limit: 304 before any redirect, nothing downloaded.
    const large = await client.put('etagged-large', Buffer.alloc(INLINE_LIMIT * 2, 3));
    const held = await fetch(`${url}-large`, { headers: { 'if-none-match': `"${large.version}"` }, redirect: 'manual' });
    expect([held.status, held.headers.get('location')]).toEqual([304, null]);
  });

  it('touches a key: a new TTL and version, the value, tags and content type kept; 404, 409 and 413 typed', async () => {
    const w = await client.put('touched', { n: 1 }, { ttl: 60, tags: ['t'] });
    const before = Date.now();
    const t = await client.touch('touched', { ttl: 7200 });
    expect(t.version).toBeGreaterThan(w.version);
    expect(t.expiresAt!.getTime()).toBeGreaterThanOrEqual(before + 7_100_000);
    const got = (await client.get('touched'))!;
    expect([got.version, got.json(), got.tags, got.contentType]).toEqual([t.version, { n: 1 }, ['t'], 'application/json']);
    expect((await client.touch('touched', { ttl: null })).expiresAt).toBeNull();
    expect((await client.get('touched'))!.expiresAt).toBeNull();
    await expect(client.touch('touched-missing', { ttl: 5 })).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.touch('touched', { ttl: 5, ifMatch: w.version })).rejects.toBeInstanceOf(VersionConflictError);
    const raw = await fetch(`${api.url}/v1/ns/app/keys/touched`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttl: 0 }),
    });
    expect([raw.status, ((await raw.json()) as { error: { code: string } }).error.code]).toEqual([400, 'VALIDATION_FAILED']);
    await client.put('touched-large', Buffer.alloc(INLINE_LIMIT + 1, 1));
    await expect(client.touch('touched-large', { ttl: 5 })).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE', status: 413 });
  });

  it('rejects bad input with typed errors naming the field', async () => {
    await expect(client.put('k', 'v', { ns: 'Bad NS' } as never)).rejects.toBeInstanceOf(ValidationError);
    const res = await fetch(`${api.url}/v1/ns/app/keys/k`, { method: 'PUT', body: 'x', headers: { 'x-strata-ttl': '-5' } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'ttl' } } });
    const big = await fetch(`${api.url}/v1/ns/app/keys/k`, { method: 'PUT', body: Buffer.alloc(INLINE_LIMIT + 1) });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({
      error: { code: 'PAYLOAD_TOO_LARGE', details: { uploadUrl: '/v1/ns/app/uploads/k', limit: INLINE_LIMIT } },
    });
  });

  it('batch-gets, -puts and -deletes across 250 keys', async () => {
    const items = Array.from({ length: 250 }, (_, i) => ({ key: `batch-${i}`, value: `v${i}` }));
    const put = await client.putMany(items);
    expect(put).toHaveLength(250);
    const got = await client.getMany([...items.map((i) => i.key), 'batch-missing']);
    expect(got.size).toBe(250);
    expect(got.get('batch-199')!.text()).toBe('v199');
    await client.deleteMany(items.slice(0, 100).map((i) => i.key));
    expect((await client.getMany(items.slice(0, 110).map((i) => i.key))).size).toBe(10);
  });

  it('moves values above the inline limit through upload and download URLs', async () => {
    const large = Buffer.alloc(INLINE_LIMIT * 3, 7);
    large.write('head', 0);
    const w = await client.put('large', large, { contentType: 'application/x-test' });
    expect(w.tiers).toEqual(['cold']);
    expect(w.size).toBe(large.length);
    const got = (await client.get('large'))!;
    expect(got.version).toBe(w.version);
    expect(Buffer.from(got.value).equals(large)).toBe(true);
  });

  it('keeps the TTL, tags and content type of a large put through the upload, and lets it expire', async () => {
    const large = Buffer.alloc(INLINE_LIMIT + 4096, 5);
    const before = Date.now();
    const w = await client.put('large-ttl', large, { ttl: 1, tags: ['big', 'x:y'], contentType: 'application/x-big' });
    expect(w.expiresAt!.getTime()).toBeGreaterThanOrEqual(before + 1000);
    expect(w.expiresAt!.getTime()).toBeLessThan(Date.now() + 1000 + 1000);
    const got = (await client.get('large-ttl'))!;
    expect(got).toMatchObject({ version: w.version, tags: ['big', 'x:y'], contentType: 'application/x-big' });
    expect(got.expiresAt!.getTime()).toBe(w.expiresAt!.getTime());
    await new Promise((r) => setTimeout(r, w.expiresAt!.getTime() - Date.now() + 300));
    expect(await client.get('large-ttl')).toBeUndefined();
  });

  it('completes an upload with the metadata given at its creation; fields given at completion win', async () => {
    const post = (path: string, body: unknown) => {
      const headers = { 'content-type': 'application/json' };
      return fetch(`${api.url}/v1/ns/app/uploads/${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    };
    const upload = async (key: string, created: Record<string, unknown>, completion: Record<string, unknown>) => {
      const t = (await (await post(key, created)).json()) as { uploadId: string; url: string; headers: Record<string, string> };
      const put = await fetch(new URL(t.url, api.url), {
        method: 'PUT',
        headers: t.headers,
        body: Buffer.alloc(INLINE_LIMIT + 1, 1),
      });
      expect(put.status).toBe(200);
      const res = await post(`${key}/complete`, { uploadId: t.uploadId, ...completion });
      expect(res.status).toBe(200);
      return (await fetch(`${api.url}/v1/ns/app/keys/${key}`, { method: 'HEAD' })).headers;
    };
    const kept = await upload('meta-kept', { ttl: 600, tags: ['a', 'b'], contentType: 'text/csv' }, {});
    expect(kept.get('x-strata-tags')).toBe('a,b');
    expect(kept.get('content-type')).toBe('text/csv');
    expect(Date.parse(kept.get('x-strata-expires-at')!)).toBeGreaterThan(Date.now() + 590_000);
    const overridden = await upload('meta-over', { ttl: 600, tags: ['a'], contentType: 'text/csv' }, { ttl: null, tags: ['c'] });
    expect(overridden.get('x-strata-tags')).toBe('c');
    expect(overridden.get('content-type')).toBe('text/csv');
    expect(overridden.get('x-strata-expires-at')).toBeNull();
  });

  it('serves a download URL made before an overwrite with 412, never the newer bytes', async () => {
    const oldBytes = Buffer.alloc(INLINE_LIMIT + 10, 0x61);
    const newBytes = Buffer.alloc(INLINE_LIMIT + 20, 0x62);
    const w1 = await client.put('dl-race', oldBytes);
    const res = await fetch(`${api.url}/v1/ns/app/downloads/dl-race`);
    const dl = (await res.json()) as { url: string; headers: Record<string, string>; version: number; size: number };
    expect(dl).toMatchObject({ version: w1.version, size: oldBytes.length });
    const first = await fetch(dl.url, { headers: dl.headers });
    expect(Buffer.from(await first.arrayBuffer()).equals(oldBytes)).toBe(true);
    // The 303 of a GET: its location needs the headers named x-strata-location-* (S3: the signed If-Match).
    const redirect = await fetch(`${api.url}/v1/ns/app/keys/dl-race`, { redirect: 'manual' });
    expect(redirect.status).toBe(303);
    expect(redirect.headers.get('x-strata-version')).toBe(String(w1.version));
    const locationHeaders: Record<string, string> = {};
    redirect.headers.forEach((v, k) => {
      if (k.startsWith('x-strata-location-')) locationHeaders[k.slice('x-strata-location-'.length)] = v;
    });
    expect(Object.keys(locationHeaders)).toEqual(backend === 'embedded' ? [] : ['if-match']);

    const w2 = await client.put('dl-race', newBytes);
    for (const [url, headers] of [
      [dl.url, dl.headers],
      [redirect.headers.get('location')!, locationHeaders],
    ] as const) {
      const stale = await fetch(new URL(url, api.url), { headers });
      expect(stale.status).toBe(412);
      expect(Buffer.from(await stale.arrayBuffer()).includes(newBytes.subarray(0, 64))).toBe(false);
    }
    // Asked again, the API hands out URLs for the new version.
    const again = (await (await fetch(`${api.url}/v1/ns/app/downloads/dl-race`)).json()) as typeof dl;
    expect(again.version).toBe(w2.version);
    expect(Buffer.from(await (await fetch(again.url, { headers: again.headers })).arrayBuffer()).equals(newBytes)).toBe(true);
    const got = (await client.get('dl-race'))!;
    expect(got.version).toBe(w2.version);
    expect(Buffer.from(got.value).equals(newBytes)).toBe(true);
  });

  it('keeps large writes out of the hot tier (write-around) and serves them from cold', async () => {
    await client.put('medium', Buffer.alloc(200 * 1024, 1), { ns: 'nol1' });
    const hot = api.ctx.coordinator.tierList()[0]!;
    expect((await hot.get('nol1', 'medium'))!.header.flags.elsewhere).toBe(true);
    const got = (await client.get('medium', { ns: 'nol1' }))!;
    expect(got.tier).toBe('cold');
    expect(got.value.length).toBe(200 * 1024);
  });

  it('promotes cold hits into the hot tier', async () => {
    await client.put('promote-me', 'p', { ns: 'nol1' });
    const hot = api.ctx.coordinator.tierList()[0]!;
    await hot.delete('nol1', 'promote-me'); // as if evicted from hot
    expect((await client.get('promote-me', { ns: 'nol1' }))!.tier).toBe('cold');
    await api.ctx.coordinator.drain();
    expect((await hot.get('nol1', 'promote-me'))!.value.toString()).toBe('p');
    expect((await client.get('promote-me', { ns: 'nol1' }))!.tier).toBe('hot');
  });

  it('acknowledges write-back writes from hot and flushes them to cold', async () => {
    const w = await client.put('wb-key', 'later', { ns: 'wb' });
    expect(w.tiers).toEqual(['hot']);
    await api.ctx.coordinator.flushDirty();
    const cold = api.ctx.coordinator.tierList().find((t) => t.name === 'cold')!;
    expect((await cold.get('wb', 'wb-key'))!.header.version).toBe(w.version);
  });

  it('reads through the origin on a miss, coalescing concurrent misses into one fetch', async () => {
    originCalls = 0;
    const results = await Promise.all(Array.from({ length: 10 }, () => client.get('item-1', { ns: 'rt' })));
    expect(results.every((r) => r?.text() === 'origin:item-1')).toBe(true);
    expect(originCalls).toBe(1);
    expect((await client.get('item-1', { ns: 'rt' }))!.tier).not.toBe('origin');
    expect(await client.get('missing-1', { ns: 'rt' })).toBeUndefined();
    await expect(client.get('broken-1', { ns: 'rt' })).rejects.toMatchObject({ code: 'ORIGIN_FAILED', status: 502 });
  });

  it('getOrSet loads once and then serves from the cache', async () => {
    let loads = 0;
    const loader = async () => {
      loads++;
      return { computed: true };
    };
    const a = await client.getOrSet('gos', loader, { ttl: 60 });
    const b = await client.getOrSet('gos', loader, { ttl: 60 });
    expect(a.json()).toEqual({ computed: true });
    expect(b.json()).toEqual({ computed: true });
    expect(loads).toBe(1);
  });

  it('reports stats and health', async () => {
    const stats = await client.stats();
    expect(stats.tiers.map((t) => t.name)).toEqual(backend === 'embedded' ? ['hot', 'cold'] : ['l1', 'hot', 'cold']);
    const health = await client.health();
    expect(health.status).toBe('ok');
    await expect(new StrataClient({ endpoint: api.url, retries: 0 }).get('x', { ns: 'app' })).resolves.toBeUndefined();
    expect(NotFoundError).toBeDefined();
  });
});
