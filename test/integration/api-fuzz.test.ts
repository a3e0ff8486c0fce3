/**
 * Fuzzes the HTTP API with fast-check: random methods, paths, keys (with '/', '..', '%', unicode, empty,
 * over-long), bodies (empty, binary, oversize), TTLs, conditional headers, malformed JSON and wrong content
 * types. Every response must be 2xx/3xx/4xx — never 5xx — and every 4xx must carry the JSON error shape; the
 * server must still be healthy at the end.
 */
import fc from 'fast-check';
import { Agent, request } from 'undici';
import { startTestApi, type TestApi } from '../helpers/api-server.js';

const INLINE_LIMIT = 64 * 1024;
const RUNS = Number(process.env.STRATA_FUZZ_RUNS ?? 2000);

const keyArb = fc.oneof(
  fc.string({ minLength: 0, maxLength: 20 }),
  fc.constantFrom(
    '',
    '.',
    '..',
    '../../etc/passwd',
    'a/b/c',
    '%',
    '%2F',
    '%zz',
    '{tag}',
    ' ',
    'ñ',
    '日本語',
    '😀/..',
    'a\u0000b',
    '\ud800',
  ),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }),
  fc.integer({ min: 500, max: 700 }).map((n) => 'k'.repeat(n)),
);
const nsArb = fc.oneof(
  { arbitrary: fc.constantFrom('fuzz', 'fuzz-2', 'a'), weight: 4 },
  { arbitrary: fc.string({ minLength: 0, maxLength: 70 }), weight: 1 },
  { arbitrary: fc.constantFrom('UPPER', '-x', 'a b', '..'), weight: 1 },
);
// Lone surrogates cannot be percent-encoded as UTF-8; send them as the raw (invalid) WTF-8 bytes instead.
const pct = (s: string, keep: RegExp) =>
  s.replace(/[\s\S]/gu, (c) =>
    keep.test(c) ? c : c.length === 1 && /[\ud800-\udfff]/.test(c) ? '%ED%A0%80' : encodeURIComponent(c),
  );
const encodeArb = fc.constantFrom<(s: string) => string>(
  (s) => pct(s, /[A-Za-z0-9_~-]/),
  (s) => pct(s, /[A-Za-z0-9_.~!*'()-]/),
  (s) => pct(s, /[A-Za-z0-9_.~!*'();/?:@&=+$,#-]/),
  (s) => pct(s, /[\x21-\x7e]/),
);
const bodyArb = fc.oneof(
  fc.constant(Buffer.alloc(0)),
  fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a)),
  fc.string().map((s) => Buffer.from(s)),
  fc.integer({ min: INLINE_LIMIT - 10, max: INLINE_LIMIT + 5000 }).map((n) => Buffer.alloc(n, 0x61)),
  fc.json().map((j) => Buffer.from(j)),
  fc
    .constantFrom(
      '{',
      '{"keys":',
      '{"keys":[1,2]}',
      '{"keys":["a"]}',
      '{"items":[{"key":"a","value":"aGk="}]}',
      '{"items":[{"key":"a","value":"!!"}]}',
      '{"keys":[]}',
      'null',
      '[]',
      '{"uploadId":"short"}',
    )
    .map((s) => Buffer.from(s)),
);
const headerArb = fc.record(
  {
    'content-type': fc.constantFrom(
      'application/json',
      'application/octet-stream',
      'text/plain',
      'multipart/form-data; boundary=x',
      'application/json; charset=utf-8',
      'nonsense',
      '',
    ),
    'x-strata-ttl': fc.oneof(
      fc.constantFrom('0', '-1', '1', '60', '31536001', 'abc', '1.5', '99999999999', ' 5 '),
      fc.string({ maxLength: 12 }),
    ),
    'x-strata-tags': fc.oneof(fc.constantFrom('a,b', 'bad tag', ',,', 'x'.repeat(70)), fc.string({ maxLength: 20 })),
    'if-match': fc.oneof(fc.constantFrom('"1"', '*', 'W/"5"', 'abc', '99999999999999999999'), fc.nat().map(String)),
    'if-none-match': fc.constantFrom('*', 'x', '"1"'),
  },
  { requiredKeys: [] },
);
const routeArb = fc.constantFrom(
  ['GET', 'keys'],
  ['PUT', 'keys'],
  ['DELETE', 'keys'],
  ['HEAD', 'keys'],
  ['POST', 'keys'],
  ['PATCH', 'keys'],
  ['POST', 'batch/get'],
  ['POST', 'batch/put'],
  ['POST', 'batch/delete'],
  ['GET', 'batch/get'],
  ['POST', 'uploads'],
  ['POST', 'uploads-complete'],
  ['GET', 'downloads'],
  ['GET', 'stats'],
  ['GET', 'health'],
  ['GET', 'nowhere'],
);

describe('HTTP API fuzz', () => {
  let api: TestApi;
  const dispatcher = new Agent({ connections: 8, keepAliveTimeout: 10_000 });
  const seen = new Map<number, number>();

  beforeAll(async () => {
    api = await startTestApi('embedded', { STRATA_INLINE_LIMIT_BYTES: String(INLINE_LIMIT) });
  });
  afterAll(async () => {
    await dispatcher.close();
    await api?.close();
  });

  it(`answers ${RUNS} random requests with 2xx/3xx/4xx and the JSON error shape, never 5xx`, async () => {
    await fc.assert(
      fc.asyncProperty(
        routeArb,
        nsArb,
        keyArb,
        encodeArb,
        bodyArb,
        fc.oneof({ arbitrary: fc.constant({}), weight: 2 }, { arbitrary: headerArb, weight: 3 }),
        async ([method, kind], ns, key, enc, body, headers: Record<string, string>) => {
          const nsPath = enc(ns);
          const k = enc(key);
          const path =
            kind === 'keys'
              ? `/v1/ns/${nsPath}/keys/${k}`
              : kind === 'uploads'
                ? `/v1/ns/${nsPath}/uploads/${k}`
                : kind === 'uploads-complete'
                  ? `/v1/ns/${nsPath}/uploads/${k}/complete`
                  : kind === 'downloads'
                    ? `/v1/ns/${nsPath}/downloads/${k}`
                    : kind === 'stats'
                      ? '/v1/stats'
                      : kind === 'health'
                        ? '/v1/health'
                        : kind === 'nowhere'
                          ? `/v2/${k}`
                          : `/v1/ns/${nsPath}/${kind}`;
          const hdrs: Record<string, string> = {};
          for (const [h, v] of Object.entries(headers)) if (v !== '' && /^[\t\x20-\x7e]*$/.test(v)) hdrs[h] = v;
          const res = await request(api.url + path, {
            method: method as 'GET',
            headers: hdrs,
            body: ['GET', 'HEAD'].includes(method!) ? undefined : body,
            dispatcher,
          });
          const text = await res.body.text();
          seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1);
          if (res.statusCode >= 500) throw new Error(`${method} ${path} -> ${res.statusCode}: ${text}`);
          if (res.statusCode >= 400 && method !== 'HEAD') {
            const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
            expect(typeof parsed.error?.code).toBe('string');
            expect(typeof parsed.error?.message).toBe('string');
            expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
          }
        },
      ),
      {
        numRuns: RUNS,
        verbose: 1,
        // Besides the random runs: one request known to reach each answer the coverage check below expects.
        examples: [
          [['PUT', 'keys'], 'fuzz', 'big', encodeURIComponent, Buffer.alloc(INLINE_LIMIT + 1, 1), {}],
          [
            ['POST', 'batch/get'],
            'fuzz',
            'k',
            encodeURIComponent,
            Buffer.from('{"keys":["a"]}'),
            { 'content-type': 'text/plain' },
          ],
          [['PATCH', 'keys'], 'fuzz', 'k', encodeURIComponent, Buffer.alloc(0), {}],
        ],
      },
    );
    // The fuzz reached the interesting answers, not just one kind of rejection.
    process.stderr.write(`fuzz statuses: ${JSON.stringify(Object.fromEntries([...seen].sort((a, b) => a[0] - b[0])))}\n`);
    for (const status of [200, 400, 404, 405, 413, 415]) expect(seen.get(status) ?? 0).toBeGreaterThan(0);
    const health = await request(`${api.url}/v1/health`, { dispatcher });
    expect(health.statusCode).toBe(200);
    await health.body.dump();
  }, 600_000);
});
