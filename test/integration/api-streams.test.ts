/**
 * Streams for large values end to end, over the real local server and real tiers (`embedded`: memory + local folder;
 * `redis+s3`: redis-server + LocalStack): byte ranges of a key GET (inline and through the 303's presigned URL),
 * multipart uploads under S3's rules, `getStream` / `putStream` round trips, and uploads bound to their tenant.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { RangeNotSatisfiableError, StrataClient } from '../../sdk/src/index.js';
import { startTestApi, type Backend, type TestApi } from '../helpers/api-server.js';

const MiB = 1024 * 1024;
const INLINE_LIMIT = 64 * 1024;

function sha256(b: Uint8Array): string {
  return createHash('sha256').update(b).digest('hex');
}

async function drain(body: ReadableStream<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A deterministic source of `size` bytes in uneven chunks (parts never line up with them). */
async function* generated(size: number, seed = 7): AsyncGenerator<Uint8Array> {
  let left = size;
  let i = seed;
  while (left > 0) {
    const n = Math.min(left, 300_000 + ((i * 7919) % 200_000));
    const chunk = Buffer.alloc(n);
    for (let j = 0; j < n; j += 4096) chunk[j] = (i + j) & 0xff;
    yield chunk;
    left -= n;
    i++;
  }
}

async function collect(src: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of src) out.push(Buffer.from(c));
  return Buffer.concat(out);
}

describe.each<Backend>(['embedded', 'redis+s3'])('streams (%s)', (backend) => {
  let api: TestApi;
  let strata: StrataClient;
  const raw = (path: string, init: RequestInit = {}) => fetch(`${api.url}${path}`, init);

  beforeAll(async () => {
    api = await startTestApi(backend, { STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT) });
    strata = new StrataClient({ endpoint: api.url, namespace: 'streams', retries: 1, inlineLimitBytes: INLINE_LIMIT });
  });

  afterAll(async () => {
    await api?.close();
  });

  it('GET with Range answers 206 / 416 for an inline value (RFC 9110 §14; multi-range ignored as S3 does)', async () => {
    const value = Buffer.from('0123456789abcdef');
    await strata.put('small', value);
    const get = (range?: string) => raw('/v1/ns/streams/keys/small', { headers: range ? { range } : {} });
    const whole = await get();
    expect([whole.status, whole.headers.get('accept-ranges')]).toEqual([200, 'bytes']);
    const cases: [string, string, string][] = [
      ['bytes=2-5', '2345', 'bytes 2-5/16'],
      ['bytes=10-', 'abcdef', 'bytes 10-15/16'],
      ['bytes=-3', 'def', 'bytes 13-15/16'],
      ['bytes=14-99', 'ef', 'bytes 14-15/16'],
    ];
    for (const [range, body, contentRange] of cases) {
      const res = await get(range);
      expect([res.status, await res.text(), res.headers.get('content-range')]).toEqual([206, body, contentRange]);
    }
    const multi = await get('bytes=0-1,4-5');
    expect([multi.status, await multi.text()]).toEqual([200, value.toString()]);
    const beyond = await get('bytes=16-');
    expect(beyond.status).toBe(416);
    expect(beyond.headers.get('content-range')).toBe('bytes */16');
    expect(((await beyond.json()) as { error: { code: string } }).error.code).toBe('RANGE_NOT_SATISFIABLE');

    const part = await strata.getStream('small', { range: { start: 4, end: 7 } });
    expect(part!.range).toEqual({ start: 4, end: 7 });
    expect(part!.size).toBe(16);
    expect((await drain(part!.body)).toString()).toBe('4567');
    const err = await strata.getStream('small', { range: { start: 99 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RangeNotSatisfiableError);
    expect((err as RangeNotSatisfiableError).size).toBe(16);
    expect(await strata.getStream('nothing-here')).toBeUndefined();
  });

  it('a value behind the 303: the presigned download honours Range (206) and 416 too', async () => {
    const value = randomBytes(200_000);
    await strata.put('big', value);
    const redirect = await raw('/v1/ns/streams/keys/big', { redirect: 'manual' });
    expect(redirect.status).toBe(303);
    const location = redirect.headers.get('location')!;
    const ifMatch = redirect.headers.get('x-strata-location-if-match');
    const headers = (range: string) => ({ range, ...(ifMatch ? { 'if-match': ifMatch } : {}) });
    const res = await fetch(location, { headers: headers('bytes=1000-1999') });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes 1000-1999/${value.length}`);
    expect(Buffer.from(await res.arrayBuffer()).equals(value.subarray(1000, 2000))).toBe(true);
    expect((await fetch(location, { headers: headers(`bytes=${value.length}-`) })).status).toBe(416);

    const tail = await strata.getStream('big', { range: { start: value.length - 10 } });
    expect((await drain(tail!.body)).equals(value.subarray(value.length - 10))).toBe(true);
    const all = await strata.getStream('big');
    expect(all!.size).toBe(value.length);
    expect((await drain(all!.body)).equals(value)).toBe(true);
  });

  it('getStream behind the 303 reads the same bytes through a BYOB reader (one reused buffer) and a default one', async () => {
    const value = randomBytes(3 * MiB + 17);
    await strata.put('byob', value);
    // The presigned download goes over the SDK's socket client, not fetch: fetch sees the API's routes only.
    const seen: string[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = ((input: string | URL, init?: RequestInit) => {
      seen.push(new URL(String(input)).pathname);
      return realFetch(input, init);
    }) as typeof fetch;
    let client: StrataClient;
    try {
      client = new StrataClient({ endpoint: api.url, namespace: 'streams', retries: 1, inlineLimitBytes: INLINE_LIMIT });
    } finally {
      globalThis.fetch = realFetch;
    }
    const byob = async (body: ReadableStream<Uint8Array>, size: number): Promise<Buffer> => {
      const out: Buffer[] = [];
      const reader = body.getReader({ mode: 'byob' });
      let buf = new Uint8Array(size);
      for (;;) {
        const { done, value: got } = await reader.read(buf);
        if (done) return Buffer.concat(out);
        out.push(Buffer.from(got));
        buf = new Uint8Array(got.buffer);
      }
    };
    const a = await client.getStream('byob');
    const viaByob = await byob(a!.body, 10_000);
    const viaDefault = await drain((await client.getStream('byob'))!.body);
    expect(viaByob.equals(value)).toBe(true);
    expect(viaDefault.equals(viaByob)).toBe(true);
    const part = await client.getStream('byob', { range: { start: MiB + 5, end: 2 * MiB } });
    expect([part!.range, part!.size]).toEqual([{ start: MiB + 5, end: 2 * MiB }, value.length]);
    expect((await byob(part!.body, 4096)).equals(value.subarray(MiB + 5, 2 * MiB + 1))).toBe(true);
    // Cancelled halfway: the connection is let go, and the key reads again whole.
    const half = (await client.getStream('byob'))!.body.getReader({ mode: 'byob' });
    expect((await half.read(new Uint8Array(1000))).value!.byteLength).toBeGreaterThan(0);
    await half.cancel();
    expect((await drain((await client.getStream('byob'))!.body)).equals(value)).toBe(true);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((p) => !p.startsWith('/v1/ns/streams/keys/'))).toEqual([]);
  });

  it('putStream of 40 MB in 5 MiB parts round-trips byte-exact through getStream', async () => {
    const size = 40 * 1000 * 1000 + 123;
    const expected = sha256(await collect(generated(size)));
    const put = await strata.putStream('forty', Readable.from(generated(size)), {
      partSize: 5 * MiB,
      contentType: 'application/x-test',
      ttl: 600,
    });
    expect(put.size).toBe(size);
    const got = await strata.getStream('forty');
    expect([got!.version, got!.size, got!.contentType]).toEqual([put.version, size, 'application/x-test']);
    const hash = createHash('sha256');
    for await (const c of Readable.fromWeb(got!.body as import('node:stream/web').ReadableStream<Uint8Array>))
      hash.update(c as Buffer);
    expect(hash.digest('hex')).toBe(expected);
    // A small stream goes inline, one PUT; an empty one too.
    await strata.putStream('tiny', Readable.from([Buffer.from('hi')]));
    expect((await strata.get('tiny'))!.text()).toBe('hi');
    await strata.putStream('empty', Readable.from([]));
    expect((await strata.get('empty'))!.value.byteLength).toBe(0);
  });

  it("multipart completion follows S3's rules: ascending parts, 5 MiB but the last, ETags that match", async () => {
    // https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html: parts 5 MiB to 5 GiB, no minimum for the last,
    // 1..10,000; CompleteMultipartUpload names parts by number and ETag, ascending
    // (https://docs.aws.amazon.com/goto/SdkForKotlin/s3-2006-03-01/CompleteMultipartUpload).
    const post = async (path: string, body: unknown) =>
      raw(`/v1/ns/streams/uploads/rules${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = (await (await post('', { multipart: true })).json()) as Record<string, unknown>;
    expect(created).toMatchObject({ multipart: true, minPartBytes: 5 * MiB, maxPartBytes: 5 * 1024 * MiB, maxParts: 10_000 });
    const uploadId = created.uploadId as string;
    const minted = (await (await post('/parts', { uploadId, partNumbers: [1, 2, 3] })).json()) as {
      parts: { partNumber: number; url: string; headers: Record<string, string> }[];
    };
    const sizes = [5 * MiB, 1000, 10];
    const etags: string[] = [];
    for (const [i, p] of minted.parts.entries()) {
      const res = await fetch(p.url, { method: 'PUT', headers: p.headers, body: Buffer.alloc(sizes[i]!, i + 1) });
      expect(res.status).toBe(200);
      etags.push(res.headers.get('etag')!);
    }
    const complete = (parts: { partNumber: number; etag: string }[]) => post('/complete', { uploadId, parts });
    const refused = async (parts: { partNumber: number; etag: string }[]) => {
      const res = await complete(parts);
      return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
    };
    expect(
      await refused([
        { partNumber: 2, etag: etags[1]! },
        { partNumber: 1, etag: etags[0]! },
      ]),
    ).toEqual([400, 'VALIDATION_FAILED']);
    expect(
      await refused([
        { partNumber: 1, etag: etags[0]! },
        { partNumber: 2, etag: '"0123456789abcdef0123456789abcdef"' },
      ]),
    ).toEqual([400, 'VALIDATION_FAILED']);
    // Part 2 is 1000 bytes and not the last: too small.
    expect(
      await refused([
        { partNumber: 1, etag: etags[0]! },
        { partNumber: 2, etag: etags[1]! },
        { partNumber: 3, etag: etags[2]! },
      ]),
    ).toEqual([400, 'VALIDATION_FAILED']);
    expect((await post('/parts', { uploadId, partNumbers: [10_001] })).status).toBe(400);
    // Parts 1 and 2 (the last may be small): the value is their bytes, in order.
    const ok = await complete([
      { partNumber: 1, etag: etags[0]! },
      { partNumber: 2, etag: etags[1]! },
    ]);
    expect(ok.status).toBe(200);
    const item = await strata.get('rules');
    expect(item!.value.byteLength).toBe(5 * MiB + 1000);
    expect([item!.value[0], item!.value[5 * MiB]]).toEqual([1, 2]);
    // Completed: no more part URLs, no second completion.
    expect((await post('/parts', { uploadId, partNumbers: [1] })).status).toBe(404);
    expect((await complete([{ partNumber: 1, etag: etags[0]! }])).status).toBe(404);
  });

  it('an aborted multipart upload cannot be completed, and a single-PUT upload refuses parts', async () => {
    const post = async (key: string, path: string, body: unknown) =>
      raw(`/v1/ns/streams/uploads/${key}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const { uploadId } = (await (await post('aborted', '', { multipart: true })).json()) as { uploadId: string };
    expect((await post('aborted', '/abort', { uploadId })).status).toBe(204);
    expect((await post('aborted', '/parts', { uploadId, partNumbers: [1] })).status).toBe(404);
    expect((await post('aborted', '/complete', { uploadId, parts: [{ partNumber: 1, etag: '"x"' }] })).status).toBe(404);
    const single = (await (await post('single', '', {})).json()) as { uploadId: string };
    expect((await post('single', '/parts', { uploadId: single.uploadId, partNumbers: [1] })).status).toBe(404);
    await expect(strata.get('aborted')).resolves.toBeUndefined();
  });
});

describe('multipart uploads belong to their tenant (local server, STRATA_TENANT_ACCESS)', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi('embedded', {
      STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT),
      STRATA_TENANT_ACCESS: JSON.stringify([
        { keyId: 'a-key', tenant: 'a', namespaces: ['shared'] },
        { keyId: 'b-key', tenant: 'b', namespaces: ['shared'] },
      ]),
    });
  });
  afterAll(async () => {
    await api?.close();
  });

  it("tenant B cannot mint parts for, complete or abort tenant A's upload; A cannot reuse it for another key", async () => {
    const post = (apiKey: string, key: string, path: string, body: unknown) =>
      fetch(`${api.url}/v1/ns/shared/uploads/${key}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: JSON.stringify(body),
      });
    const { uploadId } = (await (await post('a-key', 'doc', '', { multipart: true })).json()) as { uploadId: string };
    const minted = (await (await post('a-key', 'doc', '/parts', { uploadId, partNumbers: [1] })).json()) as {
      parts: { url: string }[];
    };
    const put = await fetch(minted.parts[0]!.url, { method: 'PUT', body: Buffer.from('from a') });
    const parts = [{ partNumber: 1, etag: put.headers.get('etag')! }];
    for (const [path, body] of [
      ['/parts', { uploadId, partNumbers: [2] }],
      ['/complete', { uploadId, parts }],
      ['/abort', { uploadId }],
    ] as const) {
      const res = await post('b-key', 'doc', path, body);
      expect([path, res.status]).toEqual([path, 404]);
    }
    expect((await post('a-key', 'other', '/complete', { uploadId, parts })).status).toBe(404);
    expect((await post('a-key', 'doc', '/complete', { uploadId, parts })).status).toBe(200);
    const a = new StrataClient({ endpoint: api.url, apiKey: 'a-key', namespace: 'shared', retries: 0 });
    expect((await a.get('doc'))!.text()).toBe('from a');
    // The SDK's stream upload, as tenant B, in the same namespace: its own upload, its own value.
    const b = new StrataClient({ endpoint: api.url, apiKey: 'b-key', namespace: 'shared', retries: 0, inlineLimitBytes: 10 });
    await expect(b.putStream('doc2', Readable.from([Buffer.alloc(6 * MiB, 9)]), { partSize: 5 * MiB })).resolves.toMatchObject({
      size: 6 * MiB,
    });
    await expect(b.getStream('doc2', { range: { start: 6 * MiB - 1 } }).then((s) => drain(s!.body))).resolves.toEqual(
      Buffer.from([9]),
    );
  });
});

describe('putStream aborts a failed upload (local server)', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi('embedded', { STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT) });
  });
  afterAll(async () => {
    await api?.close();
  });

  it('a part that cannot be sent fails the call, and the upload is aborted: no value, no parts left', async () => {
    let partPuts = 0;
    // The network fails under the second part's PUT (the server is real; only that request never reaches it).
    const flaky: typeof fetch = async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (init?.method === 'PUT' && url.includes('/local-blobs/') && ++partPuts === 2) throw new TypeError('fetch failed');
      return fetch(input, init);
    };
    const strata = new StrataClient({ endpoint: api.url, namespace: 'streams', retries: 0, fetch: flaky });
    const source = Readable.from(generated(12 * MiB));
    await expect(strata.putStream('failed', source, { partSize: 5 * MiB, concurrency: 1 })).rejects.toMatchObject({
      code: 'NETWORK_ERROR',
    });
    expect(await strata.get('failed')).toBeUndefined();
    const folder = join((api.ctx.presigner as unknown as { dir: string }).dir, '_uploads');
    const files = readdirSync(folder);
    expect(files.filter((f) => f.includes('.part-'))).toEqual([]);
    // An aborted upload's record is closed as a completed one is: never claimable again.
    const records = files.filter((f) => f.endsWith('.json')).map((f) => JSON.parse(readFileSync(join(folder, f), 'utf8')));
    expect(records.map((r: { key: string; state: string }) => [r.key, r.state])).toEqual([['failed', 'completed']]);
  });
});

describe('putStream frees its part buffers (local server)', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi('embedded', { STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT) });
  });
  afterAll(async () => {
    await api?.close();
  });

  it('putStream frees its part buffers once every part is sent, not at a later collection; the value stays intact', async () => {
    // Each part's body reaches fetch as views over the part buffer: the views seen are kept here. Left to the
    // collector, the buffers (3 of 8 MiB by default) stayed resident through a following download.
    const views: Uint8Array[] = [];
    const watching: typeof fetch = async (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      const body = init?.body;
      if (init?.method !== 'PUT' || !url.includes('/local-blobs/') || !(body instanceof ReadableStream))
        return fetch(input, init);
      const reader = (body as ReadableStream<Uint8Array>).getReader();
      const seen = new ReadableStream<Uint8Array>({
        async pull(c) {
          const r = await reader.read();
          if (r.done) return c.close();
          views.push(r.value);
          c.enqueue(r.value);
        },
      });
      return fetch(input, { ...init, body: seen, duplex: 'half' } as RequestInit);
    };
    const strata = new StrataClient({ endpoint: api.url, namespace: 'streams', fetch: watching });
    const size = 12 * MiB + 5;
    const expected = sha256(await collect(generated(size)));
    await strata.putStream('freed', Readable.from(generated(size)), { partSize: 5 * MiB, concurrency: 2 });
    expect(views.length).toBeGreaterThan(0);
    const buffers = new Set(views.map((v) => v.buffer));
    // Three parts, two in flight: three buffers at most, every one of them detached (its memory freed).
    expect(buffers.size).toBeLessThanOrEqual(3);
    for (const b of buffers) expect((b as ArrayBuffer & { detached: boolean }).detached).toBe(true);
    expect(sha256(await drain((await strata.getStream('freed'))!.body))).toBe(expected);
  });
});
