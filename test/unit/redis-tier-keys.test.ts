import { Cluster, Redis } from 'ioredis';
import { decodeKey, encodeKey, keyShard } from '../../layers/core/model/keys.js';
import {
  ALL_SHARDS,
  createRedisClient,
  dirtySetKey,
  groupByShard,
  parseDirtyMember,
  parseRedisUrl,
  redisEntryKeys,
  RedisTier,
} from '../../layers/core/tiers/redis-tier.js';

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

const AWKWARD_KEYS = ['a/b/c', '../../etc/passwd', '100%', '%2F', 'naïve ☃ 日本語 🎉', '{braces}', '}{', 'a:b:c', ' ', 'x'.repeat(512)];

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
    for (const key of AWKWARD_KEYS) expect(parseDirtyMember(redisEntryKeys('p', 'my-ns', key).member)).toEqual({ ns: 'my-ns', key });
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
    expect(parseRedisUrl('redis://localhost')).toEqual({ host: 'localhost', port: 6379, tls: false, username: undefined, password: undefined, db: undefined });
    expect(parseRedisUrl('rediss://app:p%40ss@cache.example.com:6380/2')).toEqual({ host: 'cache.example.com', port: 6380, tls: true, username: 'app', password: 'p@ss', db: 2 });
    expect(parseRedisUrl('redis://:secret@[::1]:7000')).toMatchObject({ host: '::1', port: 7000, username: undefined, password: 'secret' });
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
    expect(o).toMatchObject({ host: '127.0.0.1', port: 1, db: 3, lazyConnect: true, enableOfflineQueue: false, enableAutoPipelining: true, maxRetriesPerRequest: 1, commandTimeout: 250 });
    expect(o.tls).toBeUndefined();
    expect(c.status).toBe('wait');
    c.disconnect();
  });

  it('builds a TLS cluster client the ElastiCache way', () => {
    const c = createRedisClient({ cluster: { nodes: [{ host: 'a.example', port: 6379 }, { host: 'b.example', port: 6380 }] }, tls: true, username: 'u', password: 'p' });
    expect(c).toBeInstanceOf(Cluster);
    const o = (c as Cluster).options;
    expect(o).toMatchObject({ lazyConnect: true, enableOfflineQueue: false, enableAutoPipelining: true });
    expect(o.redisOptions).toMatchObject({ tls: {}, username: 'u', password: 'p', maxRetriesPerRequest: 1, commandTimeout: 1000 });
    let resolved: string | undefined;
    o.dnsLookup!('a.example', (_err, address) => { resolved = address; });
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
