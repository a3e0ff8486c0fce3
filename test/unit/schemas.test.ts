import { PolicyConfigError, PolicyRegistry } from '../../core/policy/namespace-settings.js';
import { loadRuntimeEnv, namespaceConfigFrom } from '../../core/composition/runtime-env.js';
import { ConfigError } from '../../core/errors.js';
import {
  ifMatchHeader,
  ifNoneMatchHeader,
  ifNoneMatchRead,
  jsonBody,
  notModified,
  tagsHeader,
  ttlHeader,
  valueContentType,
  batchPutSchema,
} from '../../core/api/validation.js';
import { BASE64_PATTERN, batchKeysSchema, isCanonicalBase64 } from '../../core/api/validation.js';
import { validateKey, validateNamespace } from '../../core/model/keys.js';
import { matchRoute } from '../../core/api/routes.js';
import type { ApiEvent } from '../../core/api/http.js';
import { StrataError } from '../../core/errors.js';

const ev = (headers: Record<string, string>, body?: string): ApiEvent =>
  ({ headers, body: body ?? null, isBase64Encoded: false }) as unknown as ApiEvent;

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as StrataError).details?.field as string | undefined;
  }
  throw new Error('expected a validation error');
}

describe('namespace policies', () => {
  it('fills defaults and overlays per-namespace settings, including nested near-cache ones', () => {
    const r = new PolicyRegistry({ namespaces: { s: { writeMode: 'write-back', nearCache: { ttlMs: 50 } } } });
    expect(r.for('other')).toMatchObject({
      writeMode: 'write-through',
      writeAroundBytes: 1024 * 1024,
      nearCache: { enabled: true, ttlMs: 1000 },
    });
    expect(r.for('s')).toMatchObject({ writeMode: 'write-back', nearCache: { enabled: true, ttlMs: 50 } });
    expect(r.minFlushIntervalMs()).toBe(1000);
  });

  it('rejects bad configuration at start-up with the namespace and field named', () => {
    expect(() => new PolicyRegistry({ namespaces: { s: { writeMode: 'write-sideways' } } })).toThrow(/namespace 's'.*writeMode/);
    expect(() => new PolicyRegistry({ namespaces: { 'Bad NS': {} } })).toThrow(PolicyConfigError);
    expect(() => new PolicyRegistry({ defaults: { origin: { url: 'https://x.example/no-placeholder' } } })).toThrow(/\{key\}/);
    expect(() => new PolicyRegistry({ namespaces: { s: { surprise: 1 } } })).toThrow(/surprise|Unrecognized/i);
  });
});

describe('runtime environment', () => {
  it('has embedded defaults and reads REDIS_URL and AWS_ENDPOINT_URL_S3 aliases', () => {
    const env = loadRuntimeEnv({ REDIS_URL: 'redis://127.0.0.1:6379', AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:4566' });
    expect(env).toMatchObject({
      STRATA_REDIS_URL: 'redis://127.0.0.1:6379',
      STRATA_S3_ENDPOINT: 'http://127.0.0.1:4566',
      STRATA_HOT_MEMORY_MB: 256,
      STRATA_INLINE_LIMIT_BYTES: 4 * 1024 * 1024,
    });
  });

  it('names the variable that is wrong', () => {
    expect(() => loadRuntimeEnv({ STRATA_HOT_MEMORY_MB: 'lots' })).toThrow(ConfigError);
    expect(() => loadRuntimeEnv({ STRATA_HOT_MEMORY_MB: 'lots' })).toThrow(/STRATA_HOT_MEMORY_MB/);
    expect(() => namespaceConfigFrom(loadRuntimeEnv({ STRATA_NAMESPACES: '{nope' }))).toThrow(
      /STRATA_NAMESPACES is not valid JSON/,
    );
  });
});

describe('request validation', () => {
  it('accepts valid keys and namespaces and names the field of invalid ones', () => {
    expect(validateKey('a/b/../ñ')).toBe('a/b/../ñ');
    expect(fieldOf(() => validateKey(''))).toBe('key');
    expect(fieldOf(() => validateKey('x'.repeat(513)))).toBe('key');
    expect(fieldOf(() => validateKey('\ud800'))).toBe('key');
    expect(fieldOf(() => validateNamespace('UPPER'))).toBe('ns');
  });

  it('parses TTL, tags and conditional headers strictly', () => {
    expect(ttlHeader(ev({ 'X-Strata-TTL': '60' }))).toBe(60);
    expect(ttlHeader(ev({}))).toBeUndefined();
    for (const bad of ['0', '-1', '1.5', 'abc', '31536001'])
      expect(fieldOf(() => ttlHeader(ev({ 'x-strata-ttl': bad })))).toBe('ttl');
    expect(tagsHeader(ev({ 'x-strata-tags': 'a, b:c' }))).toEqual(['a', 'b:c']);
    expect(fieldOf(() => tagsHeader(ev({ 'x-strata-tags': 'bad tag' })))).toBe('tags[0]');
    expect(ifMatchHeader(ev({ 'if-match': 'W/"42"' }))).toBe(42);
    expect(fieldOf(() => ifMatchHeader(ev({ 'if-match': 'abc' })))).toBe('if-match');
    expect(ifNoneMatchHeader(ev({ 'if-none-match': '*' }))).toBe(true);
    expect(fieldOf(() => ifNoneMatchHeader(ev({ 'if-none-match': '"1"' })))).toBe('if-none-match');
  });

  it("parses a read's If-None-Match as RFC 9110 lists entity tags: versions, * or 400", () => {
    const read = (v: string) => ifNoneMatchRead(ev({ 'if-none-match': v }));
    expect(read('"12"')).toEqual([12]);
    expect(read(' W/"12" , 13,"abc", "4" ')).toEqual([12, 13, 4]);
    // A quoted tag may hold a comma: "1,2" is one opaque tag, not versions 1 and 2.
    expect(read('"1,2", "3"')).toEqual([3]);
    expect(read('*')).toBe('any');
    expect(ifNoneMatchRead(ev({}))).toBeUndefined();
    for (const bad of ['abc', '"1', '*, "1"', '"a"b"', '1.5', '', ','])
      expect({ bad, field: fieldOf(() => read(bad)) }).toEqual({ bad, field: 'if-none-match' });
    expect([notModified([3, 4], 4), notModified([3], 4), notModified('any', 9), notModified(undefined, 1)]).toEqual([
      true,
      false,
      true,
      false,
    ]);
  });

  it('answers 415 for non-JSON bodies on JSON endpoints, 400 for malformed JSON, and names batch item fields', () => {
    expect(() => jsonBody(ev({ 'content-type': 'text/plain' }, '{}'), batchPutSchema)).toThrow(
      expect.objectContaining({ status: 415 }),
    );
    expect(() => jsonBody(ev({ 'content-type': 'application/json' }, '{'), batchPutSchema)).toThrow(
      expect.objectContaining({ code: 'MALFORMED_JSON' }),
    );
    const bad = JSON.stringify({
      items: [
        { key: 'a', value: 'aGk=' },
        { key: 'b', value: 'aGk=', ttl: -1 },
      ],
    });
    expect(fieldOf(() => jsonBody(ev({ 'content-type': 'application/json; charset=utf-8' }, bad), batchPutSchema))).toBe(
      'body.items[1].ttl',
    );
    expect(valueContentType(ev({}))).toBe('application/octet-stream');
    expect(() => valueContentType(ev({ 'content-type': 'multipart/form-data; boundary=x' }))).toThrow(
      expect.objectContaining({ status: 415 }),
    );
  });

  it('refuses a content type in a JSON body that a response header could not carry back (the read would fail)', () => {
    // A read sends it as `content-type`, and Node refuses control characters, line breaks and characters above
    // U+00FF in a header: found by api-contract's random requests (a batch put's type, then a GET answering 500).
    const put = (contentType: string) => JSON.stringify({ items: [{ key: 'a', value: 'aGk=', contentType }] });
    const body = (contentType: string) => jsonBody(ev({ 'content-type': 'application/json' }, put(contentType)), batchPutSchema);
    for (const bad of [
      'text/plain; a=\u0001',
      'text/plain;\nx: y',
      'text/plain; n=\u20ac',
      'text/plain\u00a0; a=b',
      'text/plain; a=\u007f',
    ])
      expect([bad, fieldOf(() => body(bad))]).toEqual([bad, 'body.items[0].contentType']);
    for (const good of ['text/plain', 'text/plain; charset=utf-8', 'application/json;\tq="a b"'])
      expect(body(good).items[0]!.contentType).toBe(good);
  });
});

describe('inputs that must be refused', () => {
  it('If-Match: * (the key must exist) or one version, bare or as an ETag; a list of ETags is a 400 that says so', () => {
    expect(ifMatchHeader(ev({ 'if-match': '*' }))).toBe('*');
    expect(ifMatchHeader(ev({ 'If-Match': ' * ' }))).toBe('*');
    expect(ifMatchHeader(ev({ 'if-match': '"42"' }))).toBe(42);
    expect(ifMatchHeader(ev({ 'if-match': '42' }))).toBe(42);
    // Above 2^53-1 no version can be stored: it is a precondition that fails (409), not a malformed header.
    expect(ifMatchHeader(ev({ 'if-match': '9999999999999999' }))).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    for (const bad of ['"1", "2"', '*, "1"', '"42', '**', '', '"abc"', '12345678901234567']) {
      expect(fieldOf(() => ifMatchHeader(ev({ 'if-match': bad })))).toBe('if-match');
    }
    expect(() => ifMatchHeader(ev({ 'if-match': '"1", "2"' }))).toThrow(/not a list/);
  });

  it('batch values are canonical base64: what the pattern in the document says, also for values of megabytes', () => {
    const exact = new RegExp(BASE64_PATTERN);
    for (const n of [0, 1, 2, 3, 4, 5, 100]) {
      const b64 = Buffer.alloc(n, 0xa7).toString('base64');
      expect(isCanonicalBase64(b64)).toBe(true);
      expect(exact.test(b64)).toBe(true);
    }
    for (const bad of ['a', 'aGk', 'aGk=a', 'aR==', 'aGl=', 'aGk-', 'a_8=', '====', 'aGk==', ' aGk=', 'aGk=\n']) {
      expect({ bad, ok: isCanonicalBase64(bad) }).toEqual({ bad, ok: false });
      expect(exact.test(bad)).toBe(false);
    }
    // The document's pattern with its repeated group overflows V8's backtracking stack on large values; the check does not.
    expect(isCanonicalBase64(Buffer.alloc(8 * 1024 * 1024, 1).toString('base64'))).toBe(true);
    const unpadded = JSON.stringify({ items: [{ key: 'a', value: 'aGk' }] });
    expect(fieldOf(() => jsonBody(ev({ 'content-type': 'application/json' }, unpadded), batchPutSchema))).toBe(
      'body.items[0].value',
    );
  });

  it('a JSON body that is not UTF-8 is MALFORMED_JSON, never decoded with replacement characters', () => {
    const body = (bytes: number[]) => {
      const raw = Buffer.concat([Buffer.from('{"keys":["a'), Buffer.from(bytes), Buffer.from('"]}')]);
      const event = { headers: { 'content-type': 'application/json' }, body: raw.toString('base64'), isBase64Encoded: true };
      return event as unknown as ApiEvent;
    };
    for (const bytes of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
      expect(() => jsonBody(body(bytes), batchKeysSchema)).toThrow(
        expect.objectContaining({ code: 'MALFORMED_JSON', status: 400 }),
      );
    }
    expect(jsonBody(body([0xc3, 0xbf]), batchKeysSchema)).toEqual({ keys: ['aÿ'] });
  });
});

describe('route table', () => {
  it('matches encoded keys as one segment and reports allowed methods for 405', () => {
    const m = matchRoute('GET', '/v1/ns/app/keys/a%2Fb%2E%2E');
    expect(m.route?.resource).toBe('/v1/ns/{ns}/keys/{key}');
    expect(m.pathParameters).toEqual({ ns: 'app', key: 'a/b..' });
    const post = matchRoute('POST', '/v1/ns/app/keys/k');
    expect(post.route).toBeUndefined();
    expect(post.allowed).toEqual(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']);
    expect(matchRoute('GET', '/v1/ns/app/keys/%zz').badParam).toBe('key');
    expect(matchRoute('GET', '/v2/nothing').resource).toBeUndefined();
  });
});
