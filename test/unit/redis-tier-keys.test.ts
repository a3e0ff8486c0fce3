import { Cluster, Redis } from 'ioredis';
import type { Entry, EntryHeader } from '../../core/model/entry.js';
import { contentHash, decodeKey, encodeKey, keyShard } from '../../core/model/keys.js';
import {
  ALL_SHARDS,
  BLOB_PREFIX_BYTES,
  createRedisClient,
  decodeEntryBlob,
  dirtySetKey,
  encodeEntryBlob,
  groupByShard,
  parseDirtyMember,
  parseRedisUrl,
  putCommand,
  redisEntryKey,
  redisEntryKeys,
  RedisTier,
  versionDigits,
} from '../../core/tiers/redis/redis-tier.js';

/** Redis Cluster's key → slot function (CRC16/XMODEM of the hash tag, mod 16384), written out for the test. */
function clusterSlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key, 'utf8')) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

const AWKWARD_KEYS = [
  'a/b/c',
  '../../etc/passwd',
  '100%',
  '%2F',
  'naïve ☃ 日本語 🎉',
  '{braces}',
  '}{',
  'a:b:c',
  ' ',
  'x'.repeat(512),
];

describe('RedisTier key layout', () => {
  it('checks the CRC16 slot function against known Redis values', () => {
    expect(clusterSlot('123456789')).toBe(0x31c3 % 16384);
    expect(clusterSlot('foo')).toBe(12182);
    expect(clusterSlot('{user1000}.following')).toBe(clusterSlot('{user1000}.followers'));
  });

  it('lays out <prefix>:{<shard>}:<ns>:<encodedKey> with the shard as the only hash tag', () => {
    for (const key of AWKWARD_KEYS) {
      const k = redisEntryKeys('strata', 'orders', key);
      expect(k.shard).toBe(keyShard('orders', key));
      expect(k.entry).toBe(`strata:{${k.shard}}:orders:${encodeKey(key)}`);
      expect(k.entry).toMatch(/^strata:\{[0-9a-f]{2}\}:orders:[A-Za-z0-9_-]+$/);
      expect(k.dirty).toBe(`strata:{${k.shard}}:dirty`);
      expect(k.member).toBe(`orders:${encodeKey(key)}`);
      expect(decodeKey(k.entry.split(':').at(-1)!)).toBe(key);
      expect(redisEntryKey('strata', 'orders', key)).toBe(k.entry);
    }
  });

  it('puts an entry and its shard dirty set in the same cluster slot', () => {
    for (let i = 0; i < 500; i++) {
      const k = redisEntryKeys('strata', 'ns', `key-${i}`);
      expect(clusterSlot(k.entry)).toBe(clusterSlot(k.dirty));
      expect(clusterSlot(k.entry)).toBe(clusterSlot(`{${k.shard}}`));
    }
  });

  it('keeps awkward keys distinct and reversible through the dirty-set member', () => {
    const entries = new Set(AWKWARD_KEYS.map((key) => redisEntryKeys('p', 'ns', key).entry));
    expect(entries.size).toBe(AWKWARD_KEYS.length);
    for (const key of AWKWARD_KEYS)
      expect(parseDirtyMember(redisEntryKeys('p', 'my-ns', key).member)).toEqual({ ns: 'my-ns', key });
    expect(() => parseDirtyMember('no-separator')).toThrow(/corrupt/);
  });

  it('enumerates all 256 shards, covering every keyShard value', () => {
    expect(new Set(ALL_SHARDS).size).toBe(256);
    expect(ALL_SHARDS[0]).toBe('00');
    expect(ALL_SHARDS[255]).toBe('ff');
    for (let i = 0; i < 2000; i++) expect(ALL_SHARDS).toContain(keyShard('ns', String(i)));
    expect(dirtySetKey('x', 'ab')).toBe('x:{ab}:dirty');
  });

  it('groups item indexes by shard (one slot per group), in order of first appearance', () => {
    const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
    const groups = groupByShard(keys, (k) => keyShard('ns', k));
    expect(groups.flat().sort((a, b) => a - b)).toEqual(keys.map((_, i) => i));
    for (const g of groups) {
      expect(new Set(g.map((i) => keyShard('ns', keys[i]!))).size).toBe(1);
      expect(new Set(g.map((i) => clusterSlot(redisEntryKeys('s', 'ns', keys[i]!).entry))).size).toBe(1);
      expect(g).toEqual([...g].sort((a, b) => a - b));
    }
    const firsts = groups.map((g) => g[0]!);
    expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
    expect(groupByShard(['a', 'b', 'a', 'c', 'b'], (x) => x)).toEqual([[0, 2], [1, 4], [3]]);
    expect(groupByShard([], (x: string) => x)).toEqual([]);
  });
});

describe('parseRedisUrl', () => {
  it('parses redis:// and rediss:// URLs', () => {
    expect(parseRedisUrl('redis://localhost')).toEqual({
      host: 'localhost',
      port: 6379,
      tls: false,
      username: undefined,
      password: undefined,
      db: undefined,
    });
    expect(parseRedisUrl('rediss://app:p%40ss@cache.example.com:6380/2')).toEqual({
      host: 'cache.example.com',
      port: 6380,
      tls: true,
      username: 'app',
      password: 'p@ss',
      db: 2,
    });
    expect(parseRedisUrl('redis://:secret@[::1]:7000')).toMatchObject({
      host: '::1',
      port: 7000,
      username: undefined,
      password: 'secret',
    });
  });

  it('rejects other schemes and bad databases', () => {
    expect(() => parseRedisUrl('http://localhost:6379')).toThrow(/redis:\/\/ or rediss:\/\//);
    expect(() => parseRedisUrl('redis://localhost/abc')).toThrow(/database/);
  });
});

describe('RedisTier construction (no network)', () => {
  it('builds a lazy, fail-fast standalone client', async () => {
    const c = createRedisClient({ url: 'redis://127.0.0.1:1/3', commandTimeoutMs: 250 });
    expect(c).toBeInstanceOf(Redis);
    const o = (c as Redis).options;
    expect(o).toMatchObject({
      host: '127.0.0.1',
      port: 1,
      db: 3,
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      maxRetriesPerRequest: 0,
    });
    // No per-command timer: the tier's stall watchdog bounds calls.
    expect(o.commandTimeout).toBeUndefined();
    expect(o.tls).toBeUndefined();
    expect(c.status).toBe('wait');
    c.disconnect();
  });

  it('builds a TLS cluster client the ElastiCache way', () => {
    const c = createRedisClient({
      cluster: {
        nodes: [
          { host: 'a.example', port: 6379 },
          { host: 'b.example', port: 6380 },
        ],
      },
      tls: true,
      username: 'u',
      password: 'p',
    });
    expect(c).toBeInstanceOf(Cluster);
    const o = (c as Cluster).options;
    expect(o).toMatchObject({ lazyConnect: true, enableOfflineQueue: false, enableAutoPipelining: true });
    expect(o.redisOptions).toMatchObject({ tls: {}, username: 'u', password: 'p', maxRetriesPerRequest: 0 });
    expect(o.redisOptions?.commandTimeout).toBeUndefined();
    let resolved: string | undefined;
    o.dnsLookup!('a.example', (_err, address) => {
      resolved = address;
    });
    expect(resolved).toBe('a.example');
    expect(c.status).toBe('wait');
    c.disconnect();
  });

  it('builds a cluster tier from a rediss:// URL without connecting', async () => {
    const tier = RedisTier.fromUrl('rediss://my-cache.serverless.use1.cache.amazonaws.com:6379', { cluster: true, name: 'warm' });
    expect(tier.mode).toBe('cluster');
    expect(tier.name).toBe('warm');
    expect(tier.kind).toBe('redis');
    await tier.close();
  });

  it('defaults to a standalone tier named hot', async () => {
    const tier = RedisTier.fromUrl('redis://127.0.0.1:1');
    expect(tier.mode).toBe('standalone');
    expect(tier.name).toBe('hot');
    await tier.close();
    await tier.close(); // idempotent
  });

  it('refuses a key prefix that would break the hash tag', () => {
    expect(() => new RedisTier({ url: 'redis://127.0.0.1:1', keyPrefix: 'a{b}' })).toThrow(/keyPrefix/);
  });
});

describe('RedisTier stored layout (one string per entry)', () => {
  function entry(value: Buffer | string, header: Partial<EntryHeader> = {}): Entry {
    const buf = typeof value === 'string' ? Buffer.from(value) : value;
    return {
      header: {
        version: 1_712_345_678_901_234,
        expiresAt: null,
        size: buf.length,
        hash: contentHash(buf),
        tags: [],
        flags: {},
        ...header,
      },
      value: buf,
    };
  }

  it('writes 16 version digits, the dirty byte, 8 header-length digits, the header JSON, then the value', () => {
    const e = entry('hello', { tags: ['ünï'], contentType: 'text/plain' });
    const blob = encodeEntryBlob(e);
    const json = JSON.stringify(e.header);
    expect(blob.toString('latin1', 0, BLOB_PREFIX_BYTES)).toBe(
      `1712345678901234` + '0' + String(Buffer.byteLength(json)).padStart(8, '0'),
    );
    expect(blob.toString('utf8', BLOB_PREFIX_BYTES, BLOB_PREFIX_BYTES + Buffer.byteLength(json))).toBe(json);
    expect(blob.subarray(BLOB_PREFIX_BYTES + Buffer.byteLength(json)).toString()).toBe('hello');
    expect(blob.length).toBe(BLOB_PREFIX_BYTES + Buffer.byteLength(json) + 5);
    expect(decodeEntryBlob(blob)).toEqual(e);
  });

  it('keeps the dirty flag in byte 16, not in the header JSON', () => {
    const e = entry('x', { flags: { dirty: true, elsewhere: true } });
    const blob = encodeEntryBlob(e);
    expect(blob[16]).toBe('1'.charCodeAt(0));
    expect(blob.toString('utf8')).not.toContain('dirty');
    expect(decodeEntryBlob(blob).header).toEqual(e.header);
    blob[16] = '0'.charCodeAt(0); // what markClean does in Redis (SETRANGE)
    expect(decodeEntryBlob(blob).header.flags).toEqual({ elsewhere: true });
    // An explicit `dirty: false` is not stored either.
    expect(decodeEntryBlob(encodeEntryBlob(entry('y', { flags: { dirty: false } }))).header.flags).toEqual({});
  });

  it('round-trips binary and empty values, zero-copy on decode', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    for (const value of [all, Buffer.alloc(0), Buffer.from([0xff, 0xfe, 0x00])]) {
      const blob = encodeEntryBlob(entry(value));
      const got = decodeEntryBlob(blob);
      expect(got.value.equals(value)).toBe(true);
      expect(got.value.buffer).toBe(blob.buffer); // a view of the reply, not a copy
    }
  });

  it('pads versions to 16 digits and refuses what would not fit', () => {
    expect(versionDigits(0)).toBe('0000000000000000');
    expect(versionDigits(42)).toBe('0000000000000042');
    expect(versionDigits(2 ** 53 - 1)).toBe('9007199254740991');
    for (const bad of [-1, 1.5, 2 ** 53, Number.NaN]) expect(() => versionDigits(bad)).toThrow(/safe integer/);
    expect(() => encodeEntryBlob(entry('x', { version: 2 ** 53 }))).toThrow(/safe integer/);
    // Zero-padded digits order like the numbers (the Lua scripts compare them with tonumber()).
    expect(versionDigits(999) < versionDigits(1000)).toBe(true);
  });

  it('rejects corrupt or truncated blobs', () => {
    const blob = encodeEntryBlob(entry('hello'));
    expect(() => decodeEntryBlob(blob.subarray(0, 10))).toThrow(/corrupt/);
    expect(() => decodeEntryBlob(blob.subarray(0, BLOB_PREFIX_BYTES + 3))).toThrow(/corrupt/);
    const bad = Buffer.from(blob);
    bad[20] = 'x'.charCodeAt(0);
    expect(() => decodeEntryBlob(bad)).toThrow(/corrupt/);
  });
});

/** Parses one RESP array of bulk strings (what a client sends), checking every length and terminator. */
function parseRespCommand(frame: Buffer): Buffer[] {
  let at = 0;
  const line = (): string => {
    const end = frame.indexOf('\r\n', at, 'latin1');
    if (end < 0) throw new Error('unterminated line');
    const s = frame.toString('latin1', at, end);
    at = end + 2;
    return s;
  };
  const head = line();
  if (!head.startsWith('*')) throw new Error(`not an array: ${head}`);
  const out: Buffer[] = [];
  for (let n = Number(head.slice(1)); n > 0; n--) {
    const len = line();
    if (!len.startsWith('$')) throw new Error(`not a bulk string: ${len}`);
    const size = Number(len.slice(1));
    out.push(frame.subarray(at, at + size));
    at += size;
    if (frame.toString('latin1', at, at + 2) !== '\r\n') throw new Error('bulk string not terminated');
    at += 2;
  }
  if (at !== frame.length) throw new Error(`${frame.length - at} trailing bytes`);
  return out;
}

describe('RedisTier put command frame', () => {
  const V = Buffer.from([0, 1, 2, 0x0d, 0x0a, 255]);
  const base: EntryHeader = {
    version: 1_712_345_678_901_234,
    expiresAt: null,
    size: V.length,
    hash: contentHash(V),
    tags: [],
    flags: {},
  };
  const headers: EntryHeader[] = [
    base,
    { ...base, expiresAt: 1_800_000_000_000.5, flags: { dirty: true } },
    {
      ...base,
      tags: ['a', 'ü "quoted" \\ tag'],
      contentType: 'text/plain; charset=utf-8',
      flags: { dirty: true, elsewhere: true },
    },
    { ...base, hash: 'not/base64+url=', flags: { tombstone: true } },
    { ...base, expiresAt: 1_800_000_000_000, flags: { dirty: false } },
  ];

  it('is one valid RESP command: EVALSHA sha 2 entry dirty blob expiresAt, the blob laid out as encodeEntryBlob', () => {
    for (const header of headers) {
      for (const [id, dirty] of [
        ['strata:{ab}:ns:a2V5', 'strata:{ab}:dirty'],
        ['strätä:{ab}:ns:a2V5', 'strätä:{ab}:dirty'],
      ]) {
        const e: Entry = { header, value: V };
        const cmd = putCommand(id!, dirty!, e);
        const parts = parseRespCommand(cmd.toWritable({}) as Buffer).map((b) => Buffer.from(b));
        expect(parts).toHaveLength(7);
        expect(parts[0]!.toString()).toBe('evalsha');
        expect(parts[1]!.toString()).toMatch(/^[0-9a-f]{40}$/);
        expect(parts.slice(2, 5).map((b) => b.toString())).toEqual(['2', id, dirty]);
        expect(parts[5]!.equals(encodeEntryBlob(e))).toBe(true);
        expect(parts[6]!.toString()).toBe(header.expiresAt === null ? '' : String(Math.ceil(header.expiresAt))); // whole ms for PXAT
      }
    }
  });

  it('stores headers that decode back to equal ones (hand-written JSON or JSON.stringify)', () => {
    for (const header of headers) {
      const got = decodeEntryBlob(encodeEntryBlob({ header, value: V }));
      const { dirty, ...flags } = header.flags;
      expect(got.header).toEqual({ ...header, flags: dirty ? { ...flags, dirty } : flags });
      expect(got.value.equals(V)).toBe(true);
    }
    const usual = encodeEntryBlob({ header: base, value: V });
    expect(JSON.parse(usual.toString('utf8', BLOB_PREFIX_BYTES, usual.length - V.length))).toEqual(base);
  });
});
