import fc from 'fast-check';
import { ValidationError } from '../../core/errors.js';
import { encodeKey, keyShard, MAX_KEY_BYTES } from '../../core/model/keys.js';
import {
  base32Decode,
  base32Encode,
  decodeOrderedKey,
  encodeOrderedKey,
  orderedKeyPrefix,
  parseS3OrderMarkerKey,
  s3OrderMarkerKey,
  LOCAL_SEGMENT_CHARS,
  localEntrySegments,
  normalizePrefix,
  parseLocalEntrySegments,
  parseS3ObjectKey,
  S3_MAX_OBJECT_KEY_BYTES,
  s3ObjectKey,
  s3StagingKey,
  validateUploadId,
} from '../../core/tiers/storage-key.js';
import { mapLimit } from '../../core/util/concurrency.js';

const NASTY_KEYS = [
  'a',
  '/',
  '..',
  '../../etc/passwd',
  'a/b/../c',
  '%2F%2e%2e',
  'ключ',
  '日本語/キー',
  '🙂'.repeat(3),
  ' spaced ',
  '{tag}',
  'x'.repeat(MAX_KEY_BYTES),
];
const LONGEST_NS = 'n'.repeat(63);

describe('S3 object keys', () => {
  it('is <prefix>/<ns>/<shard>/<base64url(key)>', () => {
    expect(s3ObjectKey('v1', 'users', 'a/b')).toBe(`v1/users/${keyShard('users', 'a/b')}/${encodeKey('a/b')}`);
    expect(s3ObjectKey('', 'users', 'k')).toBe(`users/${keyShard('users', 'k')}/${encodeKey('k')}`);
  });

  it('keeps 512-byte keys under the S3 limit of 1024 bytes (base64url at most 683 characters)', () => {
    for (const key of ['x'.repeat(512), 'é'.repeat(256), '🙂'.repeat(128)]) {
      expect(Buffer.byteLength(key)).toBe(MAX_KEY_BYTES);
      const enc = encodeKey(key);
      expect(enc.length).toBeLessThanOrEqual(683);
      const objectKey = s3ObjectKey('v1', LONGEST_NS, key);
      expect(Buffer.byteLength(objectKey)).toBeLessThanOrEqual(S3_MAX_OBJECT_KEY_BYTES);
    }
  });

  it('never puts "/", "..", "%" or non-ASCII from the key into the object key, and round trips', () => {
    for (const key of NASTY_KEYS) {
      const objectKey = s3ObjectKey('v1', 'ns', key);
      const last = objectKey.split('/').pop()!;
      expect(objectKey.split('/')).toHaveLength(4);
      expect(last).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(parseS3ObjectKey('v1', objectKey)).toEqual({ ns: 'ns', key });
    }
    expect(parseS3ObjectKey('v1', 'v1/_uploads/abcdefgh')).toBeUndefined();
    expect(parseS3ObjectKey('v2', s3ObjectKey('v1', 'ns', 'k'))).toBeUndefined();
  });

  it('rejects bad namespaces and keys (they could otherwise escape the prefix)', () => {
    for (const ns of ['..', '.', '_uploads', 'A', '', 'a/b', 'x'.repeat(64)])
      expect(() => s3ObjectKey('v1', ns, 'k')).toThrow(ValidationError);
    expect(() => s3ObjectKey('v1', 'ns', '')).toThrow(ValidationError);
    expect(() => s3ObjectKey('v1', 'ns', 'x'.repeat(513))).toThrow(ValidationError);
    expect(() => s3ObjectKey('v1', 'ns', 'a\u0000b')).toThrow(ValidationError);
    expect(() => s3ObjectKey('v1', 'ns', '\ud800')).toThrow(ValidationError);
  });

  it('normalises and validates prefixes', () => {
    expect(normalizePrefix('/v1/')).toBe('v1');
    expect(normalizePrefix('tenant-a/v1')).toBe('tenant-a/v1');
    expect(normalizePrefix('')).toBe('');
    for (const bad of ['a//b', '../x', 'a/./b', 'sp ace', 'ü']) expect(() => normalizePrefix(bad)).toThrow(ValidationError);
  });

  it('puts staged uploads under <prefix>/_uploads/ and validates upload ids', () => {
    expect(s3StagingKey('v1', 'abcDEF12_-')).toBe('v1/_uploads/abcDEF12_-');
    for (const bad of ['short', 'x'.repeat(65), '../../../x', 'a/bcdefghi', 'abcdefg.h', 'abcdefgh%']) {
      expect(() => validateUploadId(bad)).toThrow(ValidationError);
    }
    expect(validateUploadId('a'.repeat(64))).toBe('a'.repeat(64));
  });
});

describe('S3 order markers: an order-preserving encoding of keys', () => {
  const utf8 = (k: string): Buffer => Buffer.from(k, 'utf8');
  const sign = (n: number): number => Math.sign(n);
  // Any code point (U+10000 and up too, where UTF-16 order and UTF-8 order differ), no lone surrogates.
  const codePoint = fc.oneof(
    fc.constantFrom('a', 'b', '\u0000', '\u00ff', '\uffff', '\u{10000}'),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  );
  const key = fc.string({ unit: codePoint, maxLength: 12 });
  // Pairs where one is often a prefix of the other, or both share a long start: where a bit packing could go wrong.
  const pair = fc.oneof(
    fc.tuple(key, key),
    fc.tuple(key, key).map(([a, s]) => [a, a + s] as [string, string]),
    fc.tuple(key, key, key).map(([p, a, b]) => [p + a, p + b] as [string, string]),
  );

  it('orders encodings (as S3 lists names: bytes) as the keys order (UTF-8 bytes)', () => {
    fc.assert(
      fc.property(pair, ([a, b]) => {
        const ea = encodeOrderedKey(a);
        const eb = encodeOrderedKey(b);
        expect(sign(Buffer.compare(Buffer.from(ea, 'latin1'), Buffer.from(eb, 'latin1')))).toBe(
          sign(Buffer.compare(utf8(a), utf8(b))),
        );
      }),
      { numRuns: 2000 },
    );
    // Prefixes of each other, and the last character of the shorter one holding padding.
    const chain = ['a', 'a\u0000', 'a\u0000\u0000', 'a\u0001', 'a\u007f', 'a\u0080', 'b', '\uffff', '\u{10000}', '\u{10ffff}'];
    const encoded = chain.map(encodeOrderedKey);
    expect([...encoded].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)))).toEqual(encoded);
  });

  it('round trips, as long as base64url, in the 64 base64url characters', () => {
    fc.assert(
      fc.property(key, (k) => {
        const enc = encodeOrderedKey(k);
        expect(enc).toMatch(/^[A-Za-z0-9_-]*$/);
        expect(enc.length).toBe(utf8(k).toString('base64url').length);
        expect(decodeOrderedKey(enc)).toBe(k);
      }),
    );
    expect(encodeOrderedKey('\u0000')).toBe('--');
    // c3 bf = 110000 111011 1111|00: 48, 59, 60 in '-0-9A-Z_a-z'. 'abc' is base64 'YWJj': 24, 22, 9, 35.
    expect(encodeOrderedKey('\u00ff')).toBe('kvw');
    expect(encodeOrderedKey('abc')).toBe('NL8Y');
  });

  it('decodes only names it writes: one name per key', () => {
    expect(decodeOrderedKey('-')).toBeUndefined(); // no length encodes a whole number of bytes in one character
    expect(decodeOrderedKey('-0')).toBeUndefined(); // padding bits set
    expect(decodeOrderedKey('a+')).toBeUndefined();
    expect(decodeOrderedKey('a=')).toBeUndefined();
    expect(decodeOrderedKey(encodeOrderedKey('\u{1F600}').slice(0, 3) + '-')).toBeUndefined(); // cut UTF-8: not a key
  });

  it('starts the encoding of every key under a prefix with orderedKeyPrefix(prefix)', () => {
    fc.assert(
      fc.property(key, key, (p, rest) => {
        expect(encodeOrderedKey(p + rest).startsWith(orderedKeyPrefix(p))).toBe(true);
        // Nothing but the last, partial character is cut.
        expect(encodeOrderedKey(p).length - orderedKeyPrefix(p).length).toBeLessThanOrEqual(1);
      }),
    );
  });

  it('names a marker exactly as long as the entry object, so every storable key has one', () => {
    for (const k of ['x'.repeat(MAX_KEY_BYTES), 'é'.repeat(256), '🙂'.repeat(128), 'k', ...NASTY_KEYS]) {
      const marker = s3OrderMarkerKey('v1', LONGEST_NS, k);
      expect(marker.startsWith(`v1/_k/${LONGEST_NS}/`)).toBe(true);
      expect(marker.length).toBe(s3ObjectKey('v1', LONGEST_NS, k).length);
      expect(Buffer.byteLength(marker)).toBeLessThanOrEqual(S3_MAX_OBJECT_KEY_BYTES);
      expect(parseS3OrderMarkerKey('v1', LONGEST_NS, marker)).toBe(k);
      expect(parseS3OrderMarkerKey('v1', 'other', marker)).toBeUndefined();
      expect(parseS3ObjectKey('v1', marker)).toBeUndefined(); // no entry scan takes a marker for an entry
    }
    expect(s3OrderMarkerKey('', 'ns', 'k')).toBe(`_k/ns/${encodeOrderedKey('k')}`);
    expect(parseS3OrderMarkerKey('v1', 'ns', 'v1/_k/ns/')).toBeUndefined();
    expect(parseS3OrderMarkerKey('v1', 'ns', 'v1/_k/ns/a/b')).toBeUndefined();
    expect(() => s3OrderMarkerKey('v1', '_k', 'k')).toThrow(ValidationError);
    expect(() => s3OrderMarkerKey('v1', 'ns', 'x'.repeat(513))).toThrow(ValidationError);
  });
});

describe('local folder layout', () => {
  it('base32 round trips any bytes, lowercase only', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        const enc = base32Encode(Buffer.from(bytes));
        expect(enc).toMatch(/^[a-z2-7]*$/);
        expect(base32Decode(enc).equals(Buffer.from(bytes))).toBe(true);
      }),
    );
    expect(base32Encode(Buffer.from('foobar'))).toBe('mzxw6ytboi');
  });

  it('maps any valid key to short, safe segments and back', () => {
    fc.assert(
      fc.property(
        fc
          .string({ unit: 'grapheme', minLength: 1, maxLength: 128 })
          .filter((k) => Buffer.byteLength(k) <= MAX_KEY_BYTES && !k.includes('\u0000')),
        (key) => {
          const segs = localEntrySegments('ns', key);
          expect(segs[0]).toBe('ns');
          for (const s of segs.slice(2)) {
            expect(s).toMatch(/^[a-z2-7]+(\.e)?$/);
            expect(s.length).toBeLessThanOrEqual(LOCAL_SEGMENT_CHARS + 2);
          }
          expect(parseLocalEntrySegments(segs)).toEqual({ ns: 'ns', key });
        },
      ),
    );
  });

  it('splits 512-byte keys below NAME_MAX and never lets a file collide with a directory', () => {
    const long = localEntrySegments('ns', '🙂'.repeat(128));
    expect(long.length).toBeGreaterThan(3);
    for (const s of long) expect(Buffer.byteLength(s)).toBeLessThan(255);
    // A key whose encoding is exactly one segment long is a file 'X.e'; a longer key sharing that segment uses the directory 'X'.
    const k200 = Buffer.alloc(125, 1).toString('latin1'); // 125 bytes of UTF-8 → 200 base32 characters
    expect(base32Encode(Buffer.from(k200, 'utf8')).length).toBe(200);
    const a = localEntrySegments('ns', k200);
    const b = localEntrySegments('ns', k200 + '\u0001\u0001\u0001\u0001\u0001');
    expect(a.at(-1)).toMatch(/\.e$/);
    expect(b.at(-2)).toBe(a.at(-1)!.slice(0, -2));
  });

  it('rejects namespaces that could escape the directory', () => {
    for (const ns of ['..', '.', '_uploads', '', '../x']) expect(() => localEntrySegments(ns, 'k')).toThrow(ValidationError);
  });
});

describe('mapLimit', () => {
  it('preserves order and bounds concurrency', async () => {
    let inFlight = 0;
    let peak = 0;
    const out = await mapLimit(
      Array.from({ length: 50 }, (_, i) => i),
      7,
      async (n) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setTimeout(r, Math.random() * 5));
        inFlight--;
        return n * 2;
      },
    );
    expect(out).toEqual(Array.from({ length: 50 }, (_, i) => i * 2));
    expect(peak).toBeLessThanOrEqual(7);
    expect(await mapLimit([], 4, async (x) => x)).toEqual([]);
  });

  it('rejects with the first error', async () => {
    await expect(
      mapLimit([1, 2, 3], 2, async (n) => {
        if (n === 2) throw new Error('boom');
        return n;
      }),
    ).rejects.toThrow('boom');
  });
});
