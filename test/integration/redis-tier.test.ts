import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { TierUnavailableError } from '../../core/errors.js';
import { makeLocationMarker, makeTombstone, type Entry, type EntryHeader } from '../../core/model/entry.js';
import { contentHash, keyShard } from '../../core/model/keys.js';
import { redisEntryKeys, RedisTier } from '../../core/tiers/redis/redis-tier.js';
import { testRedisUrl, uniqueName } from '../helpers/env.js';
import { freePort, startRedis } from '../helpers/services.js';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { selfSignedLocalhost } from '../helpers/self-signed-cert.js';

let nextVersion = 1_000_000;
const v = () => ++nextVersion;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function entry(value: Buffer | string, version: number, header: Partial<EntryHeader> = {}): Entry {
  const buf = typeof value === 'string' ? Buffer.from(value) : value;
  return {
    header: { version, expiresAt: null, size: buf.length, hash: contentHash(buf), tags: [], flags: {}, ...header },
    value: buf,
  };
}

/** A plain client for inspecting what the tier stored (fail-fast, so a lost server fails the test instead of hanging it). */
const rawClient = () => new Redis(testRedisUrl(), { maxRetriesPerRequest: 1, commandTimeout: 5000 });

const AWKWARD_KEYS = [
  'a/b/c',
  '../../etc/passwd',
  '..',
  '100%',
  '%2F%2e',
  'naïve ☃ 日本語 🎉',
  '{braces}',
  '}{',
  '{}',
  'a:b:c',
  ' ',
  'é'.repeat(256),
  'x'.repeat(512),
];

describe('RedisTier (standalone redis-server)', () => {
  const prefix = uniqueName('strata');
  let tier: RedisTier;
  let raw: Redis;
  const opened: RedisTier[] = [];

  beforeAll(() => {
    tier = RedisTier.fromUrl(testRedisUrl(), { keyPrefix: prefix });
    raw = rawClient();
  });
  afterAll(async () => {
    await Promise.all([tier.close(), ...opened.map((t) => t.close())]);
    await raw.quit();
  });

  /** A tier with its own key prefix, so its dirty sets hold only this test's entries. */
  function isolatedTier(keyPrefix = uniqueName('iso')): RedisTier {
    const t = RedisTier.fromUrl(testRedisUrl(), { keyPrefix });
    opened.push(t);
    return t;
  }

  it('round-trips binary values exactly (all byte values, empty, 1 MB)', async () => {
    const ns = uniqueName('bin');
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const big = randomBytes(1024 * 1024);
    const values = { all, empty: Buffer.alloc(0), big, invalidUtf8: Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0x00, 0x80]) };
    for (const [key, value] of Object.entries(values))
      expect(await tier.put(ns, key, entry(value, v()))).toMatchObject({ applied: true });
    for (const [key, value] of Object.entries(values)) {
      const got = await tier.get(ns, key);
      expect(Buffer.isBuffer(got?.value)).toBe(true);
      expect(got!.value.equals(value)).toBe(true);
      expect(got!.header.hash).toBe(contentHash(value));
    }
    expect(await tier.get(ns, 'missing')).toBeUndefined();
    expect(await tier.head(ns, 'missing')).toBeUndefined();
    expect(await tier.has(ns, 'missing')).toBe(false);
  });

  it('stores each entry as one string <version:16><dirty:1><header length:8><header JSON><value> under <prefix>:{<shard>}:<ns>:<encodedKey>', async () => {
    const ns = uniqueName('layout');
    const e = entry('hello', v());
    await tier.put(ns, 'k', e);
    const k = redisEntryKeys(prefix, ns, 'k');
    expect(k.entry.startsWith(`${prefix}:{${keyShard(ns, 'k')}}:${ns}:`)).toBe(true);
    expect(await raw.type(k.entry)).toBe('string');
    const blob = (await raw.getBuffer(k.entry))!;
    const json = JSON.stringify(e.header);
    expect(blob.toString('latin1', 0, 16)).toBe(String(e.header.version).padStart(16, '0'));
    expect(blob.toString('latin1', 16, 17)).toBe('0');
    expect(blob.toString('latin1', 17, 25)).toBe(String(json.length).padStart(8, '0'));
    expect(JSON.parse(blob.toString('utf8', 25, 25 + json.length))).toEqual(e.header);
    expect(blob.subarray(25 + json.length).toString()).toBe('hello');
    expect(await raw.pttl(k.entry)).toBe(-1);
    // Dirty entries carry '1' in byte 16 (and no dirty flag in the JSON); markClean flips it in place.
    const d = entry('payload', v(), { flags: { dirty: true }, expiresAt: Date.now() + 60_000 });
    await tier.put(ns, 'd', d);
    const kd = redisEntryKeys(prefix, ns, 'd');
    expect(await raw.getrange(kd.entry, 16, 16)).toBe('1');
    expect(await raw.get(kd.entry)).not.toContain('dirty');
    expect(await tier.markClean(ns, 'd', d.header.version)).toBe(true);
    expect(await raw.getrange(kd.entry, 16, 16)).toBe('0');
    expect(await raw.pttl(kd.entry)).toBeGreaterThan(50_000);
    expect((await tier.get(ns, 'd'))!.value.toString()).toBe('payload');
  });

  it('reads a header longer than the head() prefix read', async () => {
    const ns = uniqueName('longhdr');
    const tags = Array.from({ length: 300 }, (_, i) => `tag-${i}-${'x'.repeat(20)}`);
    const e = entry('v', v(), { tags, flags: { dirty: true } });
    expect(JSON.stringify(e.header).length).toBeGreaterThan(4096);
    await tier.put(ns, 'k', e);
    expect(await tier.head(ns, 'k')).toEqual(e.header);
    expect(await tier.has(ns, 'k')).toBe(true);
    expect((await tier.get(ns, 'k'))!.header).toEqual(e.header);
  });

  it('treats a key left in another layout (an older hash entry) as absent and replaces it on write', async () => {
    const ns = uniqueName('legacy');
    const k = redisEntryKeys(prefix, ns, 'k');
    const ver = v();
    await raw.hset(k.entry, { v: String(ver), h: JSON.stringify(entry('old', ver).header), d: 'old' });
    await raw.zadd(k.dirty, Date.now(), k.member);
    expect(await tier.get(ns, 'k')).toBeUndefined();
    expect(await tier.head(ns, 'k')).toBeUndefined();
    expect(await tier.getMany(ns, ['k'])).toEqual([undefined]);
    expect(await tier.markClean(ns, 'k', ver)).toBe(false);
    expect(await tier.delete(ns, 'k', ver)).toBe(false);
    expect(await tier.put(ns, 'k', entry('new', ver - 1))).toEqual({ applied: true, current: ver - 1 });
    expect((await tier.get(ns, 'k'))!.value.toString()).toBe('new');
    expect(await raw.zscore(k.dirty, k.member)).toBeNull();
  });

  it('reloads its scripts when the server has lost them (SCRIPT FLUSH)', async () => {
    const ns = uniqueName('noscript');
    const ver = v();
    await tier.put(ns, 'k', entry('a', ver, { flags: { dirty: true } }));
    await raw.script('FLUSH');
    expect(await tier.put(ns, 'k', entry('b', ver + 1, { flags: { dirty: true } }))).toEqual({ applied: true, current: ver + 1 });
    await raw.script('FLUSH');
    expect(await tier.markClean(ns, 'k', ver + 1)).toBe(true);
    await raw.script('FLUSH');
    expect(await tier.putMany(ns, [{ key: 'm', entry: entry('m', v()) }])).toMatchObject([{ applied: true }]);
    await raw.script('FLUSH');
    expect(await tier.delete(ns, 'k', ver + 1)).toBe(true);
  });

  it('preserves headers (tags, contentType, flags, expiry)', async () => {
    const ns = uniqueName('hdr');
    const expiresAt = Date.now() + 60_000;
    const e = entry('{"a":1}', v(), {
      tags: ['user:1', 'tag with spaces', 'ünïcode'],
      contentType: 'application/json; charset=utf-8',
      expiresAt,
      flags: { dirty: true },
    });
    await tier.put(ns, 'k', e);
    expect(await tier.head(ns, 'k')).toEqual(e.header);
    expect((await tier.get(ns, 'k'))!.header).toEqual(e.header);
    expect(await tier.has(ns, 'k')).toBe(true);
    // Versions are ~16-digit HLC values: they must survive exactly.
    const big = 2 ** 53 - 1;
    await tier.put(ns, 'big', entry('x', big));
    expect((await tier.head(ns, 'big'))!.version).toBe(big);
    expect(await tier.put(ns, 'big', entry('y', big - 1))).toEqual({ applied: false, current: big });
  });

  it('applies only newer versions and reports the current one', async () => {
    const ns = uniqueName('ver');
    const base = v();
    expect(await tier.put(ns, 'k', entry('first', base))).toEqual({ applied: true, current: base });
    expect(await tier.put(ns, 'k', entry('older', base - 1))).toEqual({ applied: false, current: base });
    expect(await tier.put(ns, 'k', entry('equal', base))).toEqual({ applied: false, current: base });
    expect((await tier.get(ns, 'k'))!.value.toString()).toBe('first');
    expect(await tier.put(ns, 'k', entry('newer', base + 5))).toEqual({ applied: true, current: base + 5 });
    expect((await tier.get(ns, 'k'))!.value.toString()).toBe('newer');
  });

  it('keeps the highest of 50 concurrent versions', async () => {
    const ns = uniqueName('race');
    const versions = Array.from({ length: 50 }, () => randomInt(1, 2 ** 47));
    const max = Math.max(...versions);
    const outcomes = await Promise.all(versions.map((ver) => tier.put(ns, 'k', entry(`value-${ver}`, ver))));
    const got = await tier.get(ns, 'k');
    expect(got!.header.version).toBe(max);
    expect(got!.value.toString()).toBe(`value-${max}`);
    outcomes.forEach((o, i) => {
      expect(o.current).toBeGreaterThanOrEqual(versions[i]!);
      if (o.applied) expect(o.current).toBe(versions[i]);
    });
    expect(outcomes[versions.indexOf(max)]).toEqual({ applied: true, current: max });
  });

  it('expires entries with Redis TTL (PEXPIREAT), after which older versions may be written', async () => {
    const ns = uniqueName('ttl');
    const expiresAt = Date.now() + 400;
    const base = v();
    await tier.put(ns, 'k', entry('short-lived', base, { expiresAt }));
    const k = redisEntryKeys(prefix, ns, 'k');
    expect(await raw.pexpiretime(k.entry)).toBe(expiresAt);
    expect(await tier.has(ns, 'k')).toBe(true);
    await sleep(600);
    expect(await tier.get(ns, 'k')).toBeUndefined();
    expect(await tier.head(ns, 'k')).toBeUndefined();
    expect(await tier.has(ns, 'k')).toBe(false);
    expect(await tier.put(ns, 'k', entry('older-but-live', base - 1))).toEqual({ applied: true, current: base - 1 });
    expect(await raw.pttl(k.entry)).toBe(-1); // no expiry: PERSIST
    // A write whose expiry is already past is applied and gone at once.
    expect(await tier.put(ns, 'past', entry('x', v(), { expiresAt: Date.now() - 1000 }))).toMatchObject({ applied: true });
    expect(await tier.get(ns, 'past')).toBeUndefined();
  });

  it('clears a previous expiry when a newer version has none, and sets one when it has', async () => {
    const ns = uniqueName('ttl2');
    const k = redisEntryKeys(prefix, ns, 'k');
    await tier.put(ns, 'k', entry('a', v(), { expiresAt: Date.now() + 60_000 }));
    expect(await raw.pttl(k.entry)).toBeGreaterThan(0);
    await tier.put(ns, 'k', entry('b', v()));
    expect(await raw.pttl(k.entry)).toBe(-1);
    const at = Date.now() + 30_000;
    await tier.put(ns, 'k', entry('c', v(), { expiresAt: at }));
    expect(await raw.pexpiretime(k.entry)).toBe(at);
  });

  it('returns tombstones and location markers as entries, but they are not live', async () => {
    const ns = uniqueName('tomb');
    await tier.put(ns, 'k', entry('alive', v()));
    const tomb = makeTombstone(v(), 60_000);
    expect(await tier.put(ns, 'k', tomb)).toEqual({ applied: true, current: tomb.header.version });
    const got = await tier.get(ns, 'k');
    expect(got!.header.flags.tombstone).toBe(true);
    expect(got!.value.length).toBe(0);
    expect(await tier.has(ns, 'k')).toBe(false);
    // A promotion of the older value is refused by the tombstone.
    expect(await tier.put(ns, 'k', entry('alive', tomb.header.version - 1))).toMatchObject({ applied: false });
    const marker = makeLocationMarker(v(), null);
    await tier.put(ns, 'm', marker);
    expect((await tier.head(ns, 'm'))!.flags.elsewhere).toBe(true);
    expect(await tier.has(ns, 'm')).toBe(false);
  });

  it('deletes conditionally on the version', async () => {
    const ns = uniqueName('del');
    const ver = v();
    await tier.put(ns, 'k', entry('x', ver));
    expect(await tier.delete(ns, 'k', ver - 1)).toBe(false);
    expect(await tier.delete(ns, 'k', ver + 1)).toBe(false);
    expect(await tier.has(ns, 'k')).toBe(true);
    expect(await tier.delete(ns, 'k', ver)).toBe(true);
    expect(await tier.get(ns, 'k')).toBeUndefined();
    expect(await tier.delete(ns, 'k', ver)).toBe(false);
    await tier.put(ns, 'k2', entry('y', v()));
    expect(await tier.delete(ns, 'k2')).toBe(true);
    expect(await tier.delete(ns, 'k2')).toBe(false);
  });

  it('runs batches over many shards and keeps input order', async () => {
    const ns = uniqueName('batch');
    const keys = Array.from({ length: 300 }, (_, i) => `key-${i}`);
    expect(new Set(keys.map((k) => keyShard(ns, k))).size).toBeGreaterThan(150);
    const present = keys.filter((_, i) => i % 3 !== 0);
    const base = v();
    nextVersion += 1000;
    const outcomes = await tier.putMany(
      ns,
      present.map((key, i) => ({ key, entry: entry(`value of ${key}`, base + i) })),
    );
    expect(outcomes).toEqual(present.map((_, i) => ({ applied: true, current: base + i })));
    // Mixed outcomes in one batch: refused and applied, in order.
    const again = await tier.putMany(ns, [
      { key: present[0]!, entry: entry('stale', base - 10) },
      { key: present[1]!, entry: entry('fresh', base + 500) },
    ]);
    expect(again).toEqual([
      { applied: false, current: base },
      { applied: true, current: base + 500 },
    ]);

    const got = await tier.getMany(ns, keys);
    expect(got).toHaveLength(keys.length);
    got.forEach((e, i) => {
      const key = keys[i]!;
      if (i % 3 === 0) expect(e).toBeUndefined();
      else expect(e!.value.toString()).toBe(key === present[1] ? 'fresh' : `value of ${key}`);
    });

    const deleted = await tier.deleteMany(ns, keys);
    expect(deleted).toEqual(keys.map((_, i) => i % 3 !== 0));
    expect((await tier.getMany(ns, keys)).every((e) => e === undefined)).toBe(true);
    expect(await tier.getMany(ns, [])).toEqual([]);
    expect(await tier.putMany(ns, [])).toEqual([]);
    expect(await tier.deleteMany(ns, [])).toEqual([]);
  });

  it('tracks dirty entries oldest first and cleans them by version', async () => {
    const isoPrefix = uniqueName('iso');
    const t = isolatedTier(isoPrefix);
    const ns = uniqueName('dirty');
    const va = v();
    await t.put(ns, 'a', entry('A', va, { flags: { dirty: true }, tags: ['t'], expiresAt: Date.now() + 60_000 }));
    await sleep(3);
    await t.put(ns, 'b/ü', entry('B', v(), { flags: { dirty: true } }));
    await sleep(3);
    await t.put('other-ns', 'c', entry('C', v(), { flags: { dirty: true } }));
    await t.put(ns, 'clean', entry('clean', v()));
    expect(await t.listDirty(10)).toEqual([
      { ns, key: 'a' },
      { ns, key: 'b/ü' },
      { ns: 'other-ns', key: 'c' },
    ]);
    expect(await t.listDirty(2)).toEqual([
      { ns, key: 'a' },
      { ns, key: 'b/ü' },
    ]);
    expect(await t.listDirty(0)).toEqual([]);
    // A newer dirty write keeps its place in the queue (dirty since the first unflushed write).
    await sleep(3);
    const va2 = v();
    await t.put(ns, 'a', entry('A2', va2, { flags: { dirty: true }, tags: ['t'], expiresAt: Date.now() + 60_000 }));
    expect(await t.listDirty(1)).toEqual([{ ns, key: 'a' }]);

    // The flusher wrote version va below, but va2 is stored now: a stale markClean changes nothing.
    expect(await t.markClean(ns, 'a', va)).toBe(false);
    expect((await t.listDirty(10))[0]).toEqual({ ns, key: 'a' });
    expect((await t.head(ns, 'a'))!.flags.dirty).toBe(true);

    expect(await t.markClean(ns, 'a', va2)).toBe(true);
    expect(await t.listDirty(10)).toEqual([
      { ns, key: 'b/ü' },
      { ns: 'other-ns', key: 'c' },
    ]);
    const cleaned = await t.get(ns, 'a');
    expect(cleaned!.header.flags.dirty).toBeUndefined();
    expect(cleaned!.header.tags).toEqual(['t']);
    expect(cleaned!.header.version).toBe(va2);
    expect(cleaned!.value.toString()).toBe('A2');
    expect(await raw.pttl(redisEntryKeys(isoPrefix, ns, 'a').entry)).toBeGreaterThan(50_000); // TTL kept
    expect(await t.head(ns, 'a')).toEqual(cleaned!.header);
    expect(await t.markClean(ns, 'missing', 1)).toBe(false);
  });

  it('drops an entry from the dirty set on a clean newer write, a delete or expiry', async () => {
    const isoPrefix = uniqueName('iso');
    const t = isolatedTier(isoPrefix);
    const ns = uniqueName('dirty2');
    await t.put(ns, 'overwritten', entry('1', v(), { flags: { dirty: true } }));
    await t.put(ns, 'deleted', entry('1', v(), { flags: { dirty: true } }));
    await t.put(ns, 'expiring', entry('1', v(), { flags: { dirty: true }, expiresAt: Date.now() + 150 }));
    await t.put(ns, 'born-expired', entry('1', v(), { flags: { dirty: true }, expiresAt: Date.now() - 1 }));
    expect((await t.listDirty(10)).map((r) => r.key).sort()).toEqual(['deleted', 'expiring', 'overwritten']);

    // An older dirty version does not re-dirty; a newer clean one clears.
    const ver = v();
    await t.put(ns, 'overwritten', entry('2', ver));
    expect(await t.put(ns, 'overwritten', entry('stale', ver - 100, { flags: { dirty: true } }))).toMatchObject({
      applied: false,
    });
    await t.delete(ns, 'deleted');
    await sleep(300);
    expect(await t.listDirty(10)).toEqual([]);
    // listDirty pruned the expired entry's member from the index.
    const k = redisEntryKeys(isoPrefix, ns, 'expiring');
    expect(await raw.zscore(k.dirty, k.member)).toBeNull();
  });

  it('round-trips awkward keys without collisions', async () => {
    const ns = uniqueName('keys');
    const outcomes = await tier.putMany(
      ns,
      AWKWARD_KEYS.map((key, i) => ({ key, entry: entry(`value #${i}`, v()) })),
    );
    expect(outcomes.every((o) => o.applied)).toBe(true);
    for (const [i, key] of AWKWARD_KEYS.entries()) expect((await tier.get(ns, key))!.value.toString()).toBe(`value #${i}`);
    expect((await tier.getMany(ns, AWKWARD_KEYS)).map((e) => e!.value.toString())).toEqual(
      AWKWARD_KEYS.map((_, i) => `value #${i}`),
    );
    const stored = await raw.keys(`${prefix}:*:${ns}:*`);
    expect(stored).toHaveLength(AWKWARD_KEYS.length);
    for (const key of stored) expect(key).toMatch(/^[^{}]*\{[0-9a-f]{2}\}:[a-z0-9-]+:[A-Za-z0-9_-]+$/);
    // Dirty refs decode back to the same awkward keys.
    const t = isolatedTier();
    for (const key of AWKWARD_KEYS) await t.put(ns, key, entry('d', v(), { flags: { dirty: true } }));
    expect((await t.listDirty(100)).map((r) => r.key).sort()).toEqual([...AWKWARD_KEYS].sort());
  });

  it('reports stats and answers ping', async () => {
    await tier.ping();
    const s = await tier.stats();
    expect(s).toMatchObject({ name: 'hot', kind: 'redis', mode: 'standalone' });
    expect(s.entries).toBeGreaterThan(0);
    expect(s.bytes).toBeGreaterThan(0);
  });

  it('works on an injected client and leaves it open on close', async () => {
    const client = rawClient();
    const t = new RedisTier({ client, keyPrefix: prefix, name: 'warm' });
    const ns = uniqueName('inj');
    await t.put(ns, 'k', entry('via injected client', v()));
    expect((await tier.get(ns, 'k'))!.value.toString()).toBe('via injected client');
    await t.close();
    expect(await client.ping()).toBe('PONG');
    await client.quit();
  });

  it('rejects with TierUnavailableError when nothing listens on the port', async () => {
    const t = RedisTier.fromUrl(`redis://127.0.0.1:${await freePort()}`);
    try {
      await expect(t.get('ns', 'k')).rejects.toBeInstanceOf(TierUnavailableError);
      await expect(t.put('ns', 'k', entry('x', v()))).rejects.toBeInstanceOf(TierUnavailableError);
      await expect(t.getMany('ns', ['a', 'b'])).rejects.toBeInstanceOf(TierUnavailableError);
      await expect(t.listDirty(10)).rejects.toBeInstanceOf(TierUnavailableError);
      await expect(t.ping()).rejects.toMatchObject({ code: 'TIER_UNAVAILABLE', tier: 'hot' });
      await expect(t.stats()).rejects.toBeInstanceOf(TierUnavailableError);
    } finally {
      await t.close();
    }
  });

  it('fails fast with TierUnavailableError after its server dies, and recovers when it is back', async () => {
    const server = await startRedis();
    let restarted: ChildProcess | undefined;
    const t = RedisTier.fromUrl(server.url);
    try {
      await t.put('ns', 'k', entry('x', v()));
      await server.stop();
      await expect(t.get('ns', 'k')).rejects.toBeInstanceOf(TierUnavailableError);
      await expect(t.get('ns', 'k')).rejects.toBeInstanceOf(TierUnavailableError);
      // Restart on the same port: the client reconnects in the background and the tier works again.
      restarted = spawn(
        'redis-server',
        ['--port', String(server.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: 'ignore' },
      );
      for (let i = 0; ; i++) {
        try {
          await t.ping();
          break;
        } catch (e) {
          if (i > 60) throw e;
          await sleep(100);
        }
      }
      expect(await t.get('ns', 'k')).toBeUndefined(); // a fresh, empty server
    } finally {
      await t.close();
      await server.stop();
      restarted?.kill('SIGKILL');
    }
  });

  it('rejects calls on a stalled server with TierUnavailableError within about commandTimeoutMs, then recovers', async () => {
    const server = await startRedis();
    const t = RedisTier.fromUrl(server.url, { commandTimeoutMs: 500 });
    const admin = new Redis(server.url, { maxRetriesPerRequest: 0 });
    let pauseOver = false;
    let timer: NodeJS.Timeout | undefined;
    try {
      await t.put('ns', 'k', entry('x', v()));
      // The server stops answering every client (its own connection included) for 3 s.
      await admin.call('CLIENT', 'PAUSE', '3000', 'ALL');
      timer = setTimeout(() => {
        pauseOver = true;
      }, 3000);
      const started = Date.now();
      const results = await Promise.allSettled([
        t.get('ns', 'k'),
        t.put('ns', 'k2', entry('y', v())),
        t.head('ns', 'k'),
        t.getMany('ns', ['a', 'b']),
        t.markClean('ns', 'k', 1),
      ]);
      const elapsed = Date.now() - started;
      for (const r of results) {
        expect(r.status).toBe('rejected');
        expect((r as PromiseRejectedResult).reason).toBeInstanceOf(TierUnavailableError);
      }
      expect(pauseOver).toBe(false); // rejected while the server was still paused
      expect(elapsed).toBeGreaterThanOrEqual(400); // not before commandTimeoutMs (the pause itself bounds it above)
      // Still paused: calls keep failing (the connection is being re-established), before the pause ends.
      await expect(t.get('ns', 'k')).rejects.toBeInstanceOf(TierUnavailableError);
      // A tier whose first connection lands in the pause is bounded too (its handshake stalls).
      const fresh = RedisTier.fromUrl(server.url, { commandTimeoutMs: 500 });
      try {
        await expect(fresh.get('ns', 'k')).rejects.toBeInstanceOf(TierUnavailableError);
      } finally {
        await fresh.close();
      }
      expect(pauseOver).toBe(false);
      // After the pause the tier reconnects by itself.
      for (let i = 0; ; i++) {
        try {
          await t.ping();
          break;
        } catch (e) {
          if (i > 100) throw e;
          await sleep(100);
        }
      }
      expect((await t.get('ns', 'k'))!.value.toString()).toBe('x');
    } finally {
      clearTimeout(timer);
      admin.disconnect();
      await t.close();
      await server.stop();
    }
  });

  it('speaks TLS (rediss://) with a private CA', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'strata-redis-tls-'));
    let server: Awaited<ReturnType<typeof startRedis>> | undefined;
    let t: RedisTier | undefined;
    try {
      await selfSignedLocalhost(dir);
      const tlsPort = await freePort();
      // startRedis probes the plain port; the TLS port is served beside it.
      server = await startRedis([
        '--tls-port',
        String(tlsPort),
        '--tls-cert-file',
        join(dir, 'cert.pem'),
        '--tls-key-file',
        join(dir, 'key.pem'),
        '--tls-ca-cert-file',
        join(dir, 'cert.pem'),
        '--tls-auth-clients',
        'no',
      ]);
      t = RedisTier.fromUrl(`rediss://localhost:${tlsPort}`, { tls: { ca: readFileSync(join(dir, 'cert.pem')) } });
      await t.put('ns', 'k', entry(Buffer.from([0, 1, 2, 255]), v()));
      expect((await t.get('ns', 'k'))!.value).toEqual(Buffer.from([0, 1, 2, 255]));
      // Without the CA the certificate is refused: still a TierUnavailableError.
      const untrusted = RedisTier.fromUrl(`rediss://localhost:${tlsPort}`);
      await expect(untrusted.ping()).rejects.toBeInstanceOf(TierUnavailableError);
      await untrusted.close();
    } finally {
      await t?.close();
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Waits until a fresh cluster tier has loaded its slot map. The tier fails fast by design (its first call rejects
 * if CLUSTER SLOTS does not answer within the slots-refresh timeout, then it retries in the background), and on a
 * loaded CI machine a just-formed cluster can take longer than that to answer: these tests are about routing, not
 * about the first connect.
 */
async function reachable(t: RedisTier): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      return await t.ping();
    } catch (e) {
      if (i > 100) throw e;
      await sleep(200);
    }
  }
}

describe('RedisTier (3-node redis cluster)', () => {
  let cluster: RedisClusterHandle;
  let tier: RedisTier;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    tier = new RedisTier({ cluster: { nodes: cluster.nodes.slice(0, 1) }, keyPrefix: uniqueName('cl') });
    await reachable(tier);
  }, 300_000);
  afterAll(async () => {
    await tier?.close();
    cluster?.stop();
  });

  it('reads, writes and deletes across slots', async () => {
    expect(tier.mode).toBe('cluster');
    const ns = uniqueName('cl');
    const ver = v();
    expect(await tier.put(ns, 'k', entry(Buffer.from([0, 255, 1]), ver, { flags: { dirty: true } }))).toEqual({
      applied: true,
      current: ver,
    });
    expect(await tier.put(ns, 'k', entry('old', ver - 1))).toEqual({ applied: false, current: ver });
    expect((await tier.get(ns, 'k'))!.value).toEqual(Buffer.from([0, 255, 1]));
    expect(await tier.has(ns, 'k')).toBe(true);
    expect(await tier.delete(ns, 'k', ver)).toBe(true);
    expect(await tier.get(ns, 'k')).toBeUndefined();
  });

  it('runs batches over many shards (so over all nodes) in order', async () => {
    const ns = uniqueName('clb');
    const keys = Array.from({ length: 200 }, (_, i) => `key-${i}`);
    const base = v();
    nextVersion += 1000;
    const outcomes = await tier.putMany(
      ns,
      keys.map((key, i) => ({ key, entry: entry(`value of ${key}`, base + i, { flags: { dirty: i < 5 } }) })),
    );
    expect(outcomes).toEqual(keys.map((_, i) => ({ applied: true, current: base + i })));
    expect((await tier.getMany(ns, [...keys, 'missing'])).map((e) => e?.value.toString())).toEqual([
      ...keys.map((k) => `value of ${k}`),
      undefined,
    ]);
    const dirty = await tier.listDirty(100);
    expect(dirty.map((r) => r.key).sort()).toEqual(keys.slice(0, 5).sort());
    expect(await tier.markClean(ns, 'key-0', base)).toBe(true);
    expect(await tier.listDirty(100)).toHaveLength(4);
    expect(await tier.deleteMany(ns, [...keys, 'missing'])).toEqual([...keys.map(() => true), false]);
    expect(await tier.listDirty(100)).toEqual([]);
  });

  it('resets only the stalled node, then gets it back', async () => {
    const t = new RedisTier({
      cluster: { nodes: cluster.nodes.slice(0, 1) },
      keyPrefix: uniqueName('cls'),
      commandTimeoutMs: 500,
    });
    const ns = uniqueName('cls');
    const keys = Array.from({ length: 60 }, (_, i) => `key-${i}`);
    const admin = new Redis({ ...cluster.nodes[2]!, maxRetriesPerRequest: 0 });
    let pauseOver = false;
    let timer: NodeJS.Timeout | undefined;
    try {
      await reachable(t);
      await t.putMany(
        ns,
        keys.map((key) => ({ key, entry: entry(`value of ${key}`, v()) })),
      );
      await admin.call('CLIENT', 'PAUSE', '3000', 'ALL');
      timer = setTimeout(() => {
        pauseOver = true;
      }, 3000);
      const results = await Promise.allSettled(keys.map((key) => t.get(ns, key)));
      expect(pauseOver).toBe(false); // answered while the node was still paused
      const rejected = results.filter((r) => r.status === 'rejected');
      expect(rejected.length).toBeGreaterThan(0); // the keys on the paused node
      expect(rejected.length).toBeLessThan(keys.length);
      for (const r of rejected) expect(r.reason).toBeInstanceOf(TierUnavailableError);
      results.forEach((r, i) => {
        if (r.status === 'fulfilled') expect(r.value!.value.toString()).toBe(`value of ${keys[i]}`);
      });
      for (let i = 0; ; i++) {
        const again = await Promise.allSettled(keys.map((key) => t.get(ns, key)));
        if (again.every((r) => r.status === 'fulfilled' && r.value?.value.toString() === `value of ${keys[again.indexOf(r)]}`))
          break;
        if (i > 100) throw new Error('the cluster tier did not recover after the pause');
        await sleep(100);
      }
    } finally {
      clearTimeout(timer);
      admin.disconnect();
      await t.close();
    }
  }, 300_000);

  it('reports cluster stats without throwing', async () => {
    await tier.ping();
    const s = await tier.stats();
    expect(s).toMatchObject({ kind: 'redis', mode: 'cluster' });
    expect(typeof s.entries).toBe('number');
  });
});
