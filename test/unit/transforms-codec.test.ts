/**
 * The value codec (core/transforms/codec.ts) and the local keyring (core/transforms/keyring.ts): compression with
 * its floor, envelope encryption bound to the key it was written under, data keys that rotate, and what losing a
 * key file means.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StrataError } from '../../core/errors.js';
import { ValueCodec, ZSTD_AVAILABLE } from '../../core/transforms/codec.js';
import { keyFileName, KeyUnavailableError, LocalKeyring, type Keyring } from '../../core/transforms/keyring.js';

const TEXT = Buffer.from('{"user":"ada","note":"the same words again and again"}\n'.repeat(200));

describe('value codec', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'strata-keys-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const keyring = (create = true) => new LocalKeyring({ dir, create });

  it('runs on a Node with zstd in node:zlib', () => {
    expect(ZSTD_AVAILABLE).toBe(true);
  });

  it('compresses values at or above the floor, and restores them byte for byte', async () => {
    const codec = new ValueCodec();
    const packed = await codec.encode('ns', 'k', TEXT, { compress: { minBytes: 1024, level: 3 } });
    expect(packed.encoding).toEqual({ size: TEXT.length, zstd: true });
    expect(packed.value.length).toBeLessThan(TEXT.length / 10);
    expect(await codec.decode('ns', 'k', packed.value, packed.encoding!)).toEqual(TEXT);
    const small = Buffer.from('x'.repeat(1023));
    expect(await codec.encode('ns', 'k', small, { compress: { minBytes: 1024, level: 3 } })).toEqual({ value: small });
  });

  it('refuses a stored frame that expands past the size written, without expanding it (no decompression bomb)', async () => {
    const codec = new ValueCodec();
    const zeros = Buffer.alloc(8 * 1024 * 1024);
    const packed = await codec.encode('ns', 'k', zeros, { compress: { minBytes: 0, level: 3 } });
    expect(packed.value.length).toBeLessThan(4096);
    // A header that says 1 KiB over a frame of 8 MiB: damaged, or forged by someone who can write the tier.
    for (const size of [1024, 256 * 1024])
      await expect(codec.decode('ns', 'k', packed.value, { size, zstd: true })).rejects.toMatchObject({
        code: 'INTERNAL',
        message: expect.stringMatching(/does not decode to \d+ bytes/),
      });
  });

  it('keeps a value as it is when zstd would not make it smaller (random bytes)', async () => {
    const random = randomBytes(64 * 1024);
    const out = await new ValueCodec().encode('ns', 'k', random, { compress: { minBytes: 0, level: 3 } });
    expect(out).toEqual({ value: random });
  });

  it('compresses values above the async threshold off the event loop, with the same result', async () => {
    const big = Buffer.concat(Array.from({ length: 8 }, () => TEXT));
    const codec = new ValueCodec();
    const packed = await codec.encode('ns', 'k', Buffer.concat([big, big, big, big, big]), {
      compress: { minBytes: 0, level: 1 },
    });
    expect(packed.encoding?.zstd).toBe(true);
    expect(await codec.decode('ns', 'k', packed.value, packed.encoding!)).toEqual(Buffer.concat([big, big, big, big, big]));
  });

  it('encrypts with AES-256-GCM: the stored bytes hold neither the value nor the data key, and decrypt back', async () => {
    const codec = new ValueCodec({ keyring: keyring() });
    const out = await codec.encode('ns', 'k', TEXT, { encrypt: { key: 'app' } });
    expect(out.value.includes(Buffer.from('the same words'))).toBe(false);
    expect(out.value.length).toBe(TEXT.length + 12 + 16);
    expect(out.encoding).toEqual({ size: TEXT.length, aes: { key: 'app', dataKey: expect.any(String) } });
    expect(await codec.decode('ns', 'k', out.value, out.encoding!)).toEqual(TEXT);
    // Compress, then encrypt (encrypted bytes do not compress).
    const both = await codec.encode('ns', 'k', TEXT, { compress: { minBytes: 0, level: 3 }, encrypt: { key: 'app' } });
    expect(both.encoding).toMatchObject({ zstd: true, aes: { key: 'app' } });
    expect(both.value.length).toBeLessThan(TEXT.length / 10);
    expect(await codec.decode('ns', 'k', both.value, both.encoding!)).toEqual(TEXT);
  });

  it('binds a value to its namespace and key: the same bytes under another key do not decrypt', async () => {
    const codec = new ValueCodec({ keyring: keyring() });
    const out = await codec.encode('ns', 'k', TEXT, { encrypt: { key: 'app' } });
    await expect(codec.decode('ns', 'other', out.value, out.encoding!)).rejects.toMatchObject({ code: 'INTERNAL' });
    await expect(codec.decode('ns2', 'k', out.value, out.encoding!)).rejects.toMatchObject({ code: 'INTERNAL' });
    const tampered = Buffer.from(out.value);
    tampered[20] = tampered[20]! ^ 1;
    await expect(codec.decode('ns', 'k', tampered, out.encoding!)).rejects.toThrow(/failed authentication/);
  });

  it('rotates data keys by use count and age; values under an old data key still decrypt, in a fresh process too', async () => {
    let now = 1_000_000;
    const codec = new ValueCodec({ keyring: keyring(), dataKeyMaxUses: 3, dataKeyMaxAgeMs: 60_000, now: () => now });
    const written = [];
    for (let i = 0; i < 7; i++) written.push(await codec.encode('ns', `k${i}`, TEXT, { encrypt: { key: 'app' } }));
    now += 60_000; // the current data key is now too old
    written.push(await codec.encode('ns', 'k7', TEXT, { encrypt: { key: 'app' } }));
    const dataKeys = written.map((w) => w.encoding!.aes!.dataKey);
    // 3 + 3 + 1 by use count, then a new one by age.
    expect(new Set(dataKeys).size).toBe(4);
    expect(codec.stats.dataKeysGenerated).toBe(4);
    const fresh = new ValueCodec({ keyring: keyring(false) });
    for (const [i, w] of written.entries()) expect(await fresh.decode('ns', `k${i}`, w.value, w.encoding!)).toEqual(TEXT);
    // One unwrap per data key, not per value.
    expect(fresh.stats.dataKeysUnwrapped).toBe(4);
  });

  it('asks the keyring for one data key however many writes start at once', async () => {
    const calls: string[] = [];
    const inner = keyring();
    const counting: Keyring = {
      kind: 'counting',
      generateDataKey: (k) => (calls.push(k), inner.generateDataKey(k)),
      unwrapDataKey: (k, w) => inner.unwrapDataKey(k, w),
    };
    const codec = new ValueCodec({ keyring: counting });
    await Promise.all(Array.from({ length: 50 }, (_, i) => codec.encode('ns', `k${i}`, TEXT, { encrypt: { key: 'app' } })));
    expect(calls).toEqual(['app']);
  });

  it('a lost key file makes values under it unreadable: KEY_UNAVAILABLE, permanent, naming the key and never its bytes', async () => {
    const codec = new ValueCodec({ keyring: keyring() });
    const out = await codec.encode('ns', 'k', TEXT, { encrypt: { key: 'alias/app' } });
    const files = readdirSync(dir);
    expect(files).toEqual([keyFileName('alias/app')]);
    const master = (await import('node:fs')).readFileSync(join(dir, files[0]!), 'utf8').trim();
    rmSync(join(dir, files[0]!));
    const restarted = new ValueCodec({ keyring: keyring(false) });
    const err = (await restarted.decode('ns', 'k', out.value, out.encoding!).catch((e: unknown) => e)) as StrataError;
    expect(err).toBeInstanceOf(KeyUnavailableError);
    expect(err).toMatchObject({ code: 'KEY_UNAVAILABLE', status: 503, details: { key: 'alias/app', permanent: true } });
    expect(JSON.stringify(err.toJSON())).not.toContain(master);
    // A key file replaced by another key does not open the data keys of the old one.
    writeFileSync(join(dir, files[0]!), randomBytes(32).toString('base64'));
    await expect(new ValueCodec({ keyring: keyring(false) }).decode('ns', 'k', out.value, out.encoding!)).rejects.toMatchObject({
      code: 'KEY_UNAVAILABLE',
      details: { permanent: true },
    });
  });

  it('refuses to encrypt without a keyring rather than storing the value in the clear', async () => {
    await expect(new ValueCodec().encode('ns', 'k', TEXT, { encrypt: { key: 'app' } })).rejects.toMatchObject({
      code: 'KEY_UNAVAILABLE',
      message: expect.stringMatching(/no keyring/),
    });
  });

  it('two processes creating the same new key end up with one key file, and both read each other', async () => {
    const a = new ValueCodec({ keyring: keyring() });
    const b = new ValueCodec({ keyring: keyring() });
    const [x, y] = await Promise.all([
      a.encode('ns', 'x', TEXT, { encrypt: { key: 'shared' } }),
      b.encode('ns', 'y', TEXT, { encrypt: { key: 'shared' } }),
    ]);
    expect(readdirSync(dir)).toHaveLength(1);
    expect(await b.decode('ns', 'x', x.value, x.encoding!)).toEqual(TEXT);
    expect(await a.decode('ns', 'y', y.value, y.encoding!)).toEqual(TEXT);
  });
});
