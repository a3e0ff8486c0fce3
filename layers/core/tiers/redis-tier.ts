import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Cluster, Redis, type ChainableCommander, type RedisOptions } from 'ioredis';
import { TierUnavailableError } from '../errors.js';
import { decodeHeader, encodeHeader, isExpired, isLive, type Entry, type EntryHeader, type WriteOutcome } from '../model/entry.js';
import { decodeKey, encodeKey, keyShard } from '../model/keys.js';
import type { DirtyTracking, KeyRef, Tier, TierName, TierStats } from './tier.js';

/** Options for {@link RedisTier}. */
export interface RedisTierOptions {
  /** Tier name reported in errors and stats (default 'hot'). */
  name?: TierName;
  /** `redis://[user:pass@]host[:port][/db]` or `rediss://…` (TLS). Default `redis://127.0.0.1:6379`. */
  url?: string;
  /**
   * Cluster mode (ElastiCache Serverless, cluster-mode-enabled replication groups). `true` uses the URL's
   * host as the single seed node; or list the seed nodes explicitly.
   */
  cluster?: boolean | { nodes: { host: string; port: number }[] };
  /** Force TLS on or off (default: on for `rediss://`), or TLS options (e.g. a private `ca`), which imply on. */
  tls?: boolean | TlsOptions;
  username?: string;
  password?: string;
  /** First key segment (default 'strata'); must not contain '{' or '}' (those delimit the hash tag). */
  keyPrefix?: string;
  /** Per-command timeout (default 1000 ms) so a dead or stalled Redis fails fast. */
  commandTimeoutMs?: number;
  /** TCP/TLS connect timeout (default 2000 ms). */
  connectTimeoutMs?: number;
  /**
   * Use an existing client instead of creating one (its own options apply; the tier defines its Lua commands
   * on it). The tier does not close an injected client: its owner does.
   */
  client?: Redis | Cluster;
}

/** Host, port and credentials parsed from a `redis://` or `rediss://` URL. */
export interface RedisEndpoint {
  host: string;
  port: number;
  tls: boolean;
  username?: string;
  password?: string;
  db?: number;
}

export function parseRedisUrl(url: string): RedisEndpoint {
  const u = new URL(url);
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new Error(`unsupported Redis URL scheme '${u.protocol}' (use redis:// or rediss://)`);
  const path = u.pathname.replace(/^\//, '');
  const db = path === '' ? undefined : Number(path);
  if (db !== undefined && !Number.isInteger(db)) throw new Error(`invalid Redis database '${path}' in URL`);
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1', // IPv6 literals come back bracketed
    port: u.port ? Number(u.port) : 6379,
    tls: u.protocol === 'rediss:',
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db,
  };
}

/** The Redis keys of one entry. */
export interface RedisEntryKeys {
  shard: string;
  /** `<prefix>:{<shard>}:<ns>:<encodedKey>`: the entry hash (fields v, h, d). */
  entry: string;
  /** `<prefix>:{<shard>}:dirty`: the shard's dirty sorted set (same hash tag, so same cluster slot). */
  dirty: string;
  /** `<ns>:<encodedKey>`: the entry's member in the dirty set. */
  member: string;
}

export function redisEntryKeys(prefix: string, ns: string, key: string): RedisEntryKeys {
  const shard = keyShard(ns, key);
  const member = `${ns}:${encodeKey(key)}`;
  return { shard, entry: `${prefix}:{${shard}}:${member}`, dirty: dirtySetKey(prefix, shard), member };
}

export function dirtySetKey(prefix: string, shard: string): string {
  return `${prefix}:{${shard}}:dirty`;
}

/** Inverse of the dirty-set member layout (namespaces never contain ':'; encoded keys are base64url). */
export function parseDirtyMember(member: string): KeyRef {
  const i = member.indexOf(':');
  if (i <= 0) throw new Error(`corrupt dirty-set member '${member.slice(0, 80)}'`);
  return { ns: member.slice(0, i), key: decodeKey(member.slice(i + 1)) };
}

/** All 256 shard ids ('00'..'ff'). */
export const ALL_SHARDS: readonly string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * Groups item indexes by shard, groups in order of first appearance. One shard is one hash tag and therefore
 * one cluster slot, so each group can run as one pipeline on one node.
 */
export function groupByShard<T>(items: readonly T[], shardOf: (item: T) => string): number[][] {
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const s = shardOf(item);
    const g = groups.get(s);
    if (g) g.push(i);
    else groups.set(s, [i]);
  });
  return [...groups.values()];
}

// Lua runs atomically on the node owning the slot; every script touches only an entry and its shard's dirty
// set, which share a hash tag. Versions are compared with tonumber(): they are safe integers (< 2^53), exact
// as Lua doubles. Headers are never decoded in Lua (cjson would round 16-digit versions and turn [] into {}).

/** KEYS: entry, dirty set. ARGV: version, header JSON, value, expiresAt ms or '', dirty '1'|'0', member, now ms. */
const PUT_LUA = `
local cur = redis.call('HGET', KEYS[1], 'v')
if cur and tonumber(cur) >= tonumber(ARGV[1]) then return {0, cur} end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'h', ARGV[2], 'd', ARGV[3])
if ARGV[4] == '' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIREAT', KEYS[1], ARGV[4]) end
-- NX keeps the time the entry first became dirty, so a hot key rewritten over and over still gets flushed.
-- An expiry already in the past deletes the key at once: keep it out of the dirty set then.
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('ZADD', KEYS[2], 'NX', ARGV[7], ARGV[6])
else
  redis.call('ZREM', KEYS[2], ARGV[6])
end
return {1, ARGV[1]}
`;

/** KEYS: entry, dirty set. ARGV: expected version ('' = any), member. */
const DELETE_LUA = `
if ARGV[1] ~= '' then
  local cur = redis.call('HGET', KEYS[1], 'v')
  if not cur or tonumber(cur) ~= tonumber(ARGV[1]) then return 0 end
end
redis.call('ZREM', KEYS[2], ARGV[2])
return redis.call('DEL', KEYS[1])
`;

/** KEYS: entry, dirty set. ARGV: version, header without the dirty flag ('' when the caller saw no entry), member. */
const MARK_CLEAN_LUA = `
local cur = redis.call('HGET', KEYS[1], 'v')
if not cur then
  redis.call('ZREM', KEYS[2], ARGV[3])
  return 0
end
if ARGV[2] == '' or tonumber(cur) ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'h', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1
`;

/** KEYS: entry, dirty set. ARGV: member. Drops a member whose entry expired by TTL; 1 if the entry exists. */
const DIRTY_CHECK_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 0
`;

/** The Lua commands defined on the client (prefixed so they cannot clash with an injected client's own). */
interface StrataCommands<R> {
  strataTierPut(entry: string, dirty: string, version: string, header: string, value: Buffer, expiresAt: string, isDirty: '1' | '0', member: string, now: string): R;
  strataTierDelete(entry: string, dirty: string, version: string, member: string): R;
  strataTierMarkClean(entry: string, dirty: string, version: string, header: string, member: string): R;
  strataTierDirtyCheck(entry: string, dirty: string, member: string): R;
}
type Client = (Redis | Cluster) & StrataCommands<Promise<unknown>>;
type Pipeline = ChainableCommander & StrataCommands<ChainableCommander>;

function defineCommands(client: Redis | Cluster): Client {
  client.defineCommand('strataTierPut', { numberOfKeys: 2, lua: PUT_LUA });
  client.defineCommand('strataTierDelete', { numberOfKeys: 2, lua: DELETE_LUA });
  client.defineCommand('strataTierMarkClean', { numberOfKeys: 2, lua: MARK_CLEAN_LUA });
  client.defineCommand('strataTierDirtyCheck', { numberOfKeys: 2, lua: DIRTY_CHECK_LUA });
  return client as Client;
}

/** A Lua runtime/compile error is a bug in this module, not an outage: let it surface as is. */
function isScriptBug(e: unknown): boolean {
  return e instanceof Error && /user_script|Error (running|compiling) script/.test(e.message);
}

/**
 * Builds the ioredis client. Fail-fast settings: no offline queue (a call while disconnected rejects at once
 * instead of waiting for a reconnect), one retry per request, a command timeout, lazy connect (the tier
 * connects explicitly on first use, since the offline queue would otherwise be needed for that).
 */
export function createRedisClient(opts: RedisTierOptions): Redis | Cluster {
  const endpoint = parseRedisUrl(opts.url ?? 'redis://127.0.0.1:6379');
  const tlsOption = opts.tls ?? endpoint.tls;
  const tls = tlsOption === true ? {} : tlsOption === false ? undefined : tlsOption;
  const common = {
    username: opts.username ?? endpoint.username,
    password: opts.password ?? endpoint.password,
    tls,
    commandTimeout: opts.commandTimeoutMs ?? 1000,
    connectTimeout: opts.connectTimeoutMs ?? 2000,
    maxRetriesPerRequest: 1,
    // RESP2: supported everywhere (older servers, proxies) and gives the same reply shapes as ioredis' default.
    protocol: 2,
  } satisfies Partial<RedisOptions>;
  if (opts.cluster) {
    const nodes = opts.cluster === true ? [{ host: endpoint.host, port: endpoint.port }] : opts.cluster.nodes;
    return new Cluster(nodes, {
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      // ElastiCache: keep the hostnames so TLS certificates validate against them.
      dnsLookup: (address, callback) => callback(null, address),
      clusterRetryStrategy: (times) => Math.min(times * 200, 2000),
      slotsRefreshTimeout: Math.max(common.commandTimeout, 1000),
      redisOptions: common,
    });
  }
  return new Redis({
    host: endpoint.host,
    port: endpoint.port,
    db: endpoint.db,
    ...common,
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    // Keep reconnecting in the background; calls fail fast meanwhile.
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
}

/**
 * The Redis tier (ElastiCache / Valkey / redis-server), standalone or cluster mode.
 *
 * Each entry is one hash `<prefix>:{<shard>}:<ns>:<encodeKey(key)>` with fields `v` (version), `h` (header
 * JSON) and `d` (value bytes), written by a Lua script that applies a write only over an older version.
 * Expiry is Redis TTL (PEXPIREAT), so an expired entry is simply absent. Dirty (write-back) entries are also
 * indexed in one sorted set per shard, `<prefix>:{<shard>}:dirty`, scored by the time they became dirty; the
 * `{<shard>}` hash tag keeps an entry and its dirty set in the same cluster slot so scripts may touch both.
 */
export class RedisTier implements Tier, DirtyTracking {
  readonly name: TierName;
  readonly kind = 'redis';
  private readonly client: Client;
  private readonly prefix: string;
  private readonly ownsClient: boolean;
  private connecting: Promise<void> | undefined;

  constructor(opts: RedisTierOptions = {}) {
    this.name = opts.name ?? 'hot';
    this.prefix = opts.keyPrefix ?? 'strata';
    if (/[{}]/.test(this.prefix)) throw new Error(`keyPrefix must not contain '{' or '}' (got '${this.prefix}')`);
    this.ownsClient = !opts.client;
    const client = opts.client ?? createRedisClient(opts);
    // Errors surface on each call as TierUnavailableError; without a listener ioredis would log every failed reconnect.
    if (this.ownsClient) client.on('error', () => {});
    this.client = defineCommands(client);
  }

  /** A tier for a `redis://` or `rediss://` (TLS) URL. */
  static fromUrl(url: string, opts: Omit<RedisTierOptions, 'url'> = {}): RedisTier {
    return new RedisTier({ ...opts, url });
  }

  get mode(): 'standalone' | 'cluster' {
    return this.client.isCluster ? 'cluster' : 'standalone';
  }

  async get(ns: string, key: string): Promise<Entry | undefined> {
    const k = redisEntryKeys(this.prefix, ns, key);
    return decodeEntry(await this.call(() => this.client.hmgetBuffer(k.entry, 'v', 'h', 'd')));
  }

  async head(ns: string, key: string): Promise<EntryHeader | undefined> {
    const k = redisEntryKeys(this.prefix, ns, key);
    const raw = await this.call(() => this.client.hget(k.entry, 'h'));
    if (raw === null) return undefined;
    const h = decodeHeader(raw);
    return isExpired(h) ? undefined : h;
  }

  async has(ns: string, key: string): Promise<boolean> {
    const h = await this.head(ns, key);
    return h !== undefined && isLive(h);
  }

  async put(ns: string, key: string, entry: Entry): Promise<WriteOutcome> {
    const k = redisEntryKeys(this.prefix, ns, key);
    return decodeOutcome(await this.call(() => this.client.strataTierPut(k.entry, k.dirty, ...putArgs(k, entry))));
  }

  async delete(ns: string, key: string, version?: number): Promise<boolean> {
    const k = redisEntryKeys(this.prefix, ns, key);
    return (await this.call(() => this.client.strataTierDelete(k.entry, k.dirty, version === undefined ? '' : String(version), k.member))) === 1;
  }

  async getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
    const ks = keys.map((key) => redisEntryKeys(this.prefix, ns, key));
    const replies = await this.pipelined(ks, (k) => k.shard, (p, k) => p.hmgetBuffer(k.entry, 'v', 'h', 'd'));
    return replies.map((r) => decodeEntry(r as (Buffer | null)[]));
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    const ks = items.map(({ key, entry }) => ({ k: redisEntryKeys(this.prefix, ns, key), entry }));
    const replies = await this.pipelined(ks, ({ k }) => k.shard, (p, { k, entry }) => p.strataTierPut(k.entry, k.dirty, ...putArgs(k, entry)));
    return replies.map(decodeOutcome);
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    const ks = keys.map((key) => redisEntryKeys(this.prefix, ns, key));
    const replies = await this.pipelined(ks, (k) => k.shard, (p, k) => p.strataTierDelete(k.entry, k.dirty, '', k.member));
    return replies.map((r) => r === 1);
  }

  /**
   * Reads the oldest `limit` members of each shard's dirty set and merges them by dirty time. Members whose
   * entry has meanwhile expired are dropped from the index (atomically, so a concurrent dirty write is kept),
   * so the result may hold fewer than `limit` refs even when more are dirty.
   */
  async listDirty(limit: number): Promise<KeyRef[]> {
    if (!(limit > 0)) return [];
    const replies = await this.pipelined(ALL_SHARDS, (s) => s, (p, s) => p.zrange(dirtySetKey(this.prefix, s), 0, String(limit - 1), 'WITHSCORES'));
    const candidates: { shard: string; member: string; score: number }[] = [];
    replies.forEach((reply, i) => {
      const flat = (reply as unknown[]).flat() as string[]; // RESP3 clients may answer [member, score] pairs
      for (let j = 0; j + 1 < flat.length; j += 2) candidates.push({ shard: ALL_SHARDS[i]!, member: String(flat[j]), score: Number(flat[j + 1]) });
    });
    candidates.sort((a, b) => a.score - b.score);
    const oldest = candidates.slice(0, limit);
    const exists = await this.pipelined(oldest, (c) => c.shard, (p, c) =>
      p.strataTierDirtyCheck(`${this.prefix}:{${c.shard}}:${c.member}`, dirtySetKey(this.prefix, c.shard), c.member));
    return oldest.filter((_, i) => exists[i] === 1).map((c) => parseDirtyMember(c.member));
  }

  async markClean(ns: string, key: string, version: number): Promise<boolean> {
    const k = redisEntryKeys(this.prefix, ns, key);
    const raw = await this.call(() => this.client.hget(k.entry, 'h'));
    // The header is rewritten here rather than in Lua (see the note above the scripts); the script only
    // installs it if the entry still has `version`.
    let cleaned = '';
    if (raw !== null) {
      const h = decodeHeader(raw);
      if (h.version !== version) return false;
      const { dirty: _dirty, ...flags } = h.flags;
      cleaned = encodeHeader({ ...h, flags });
    }
    return (await this.call(() => this.client.strataTierMarkClean(k.entry, k.dirty, String(version), cleaned, k.member))) === 1;
  }

  async stats(): Promise<TierStats> {
    const base: TierStats = { name: this.name, kind: this.kind, mode: this.mode };
    if (!this.client.isCluster) {
      const [entries, info] = await this.call(() => Promise.all([this.client.dbsize(), this.client.info('memory')]));
      return { ...base, entries, bytes: usedMemory(info) };
    }
    // Cluster: sum over the masters, best effort (ElastiCache Serverless may refuse some of these commands).
    try {
      await this.ready();
      const masters = (this.client as Cluster).nodes('master');
      const per = await Promise.all(masters.map((n) => Promise.all([n.dbsize(), n.info('memory')])));
      return { ...base, entries: per.reduce((s, [n]) => s + n, 0), bytes: per.reduce((s, [, info]) => s + (usedMemory(info) ?? 0), 0) };
    } catch {
      return base;
    }
  }

  async ping(): Promise<void> {
    await this.call(() => this.client.ping());
  }

  /** Quits (or, failing that, drops) the connection the tier created; an injected client is left to its owner. */
  async close(): Promise<void> {
    if (!this.ownsClient) return;
    const c = this.client;
    if (c.status === 'wait' || c.status === 'end') {
      c.disconnect();
      return;
    }
    try {
      await c.quit();
    } catch {
      c.disconnect();
    }
  }

  /**
   * The offline queue is off, so the first connect of a lazy client is made here (shared by concurrent calls).
   * Later, while our own client is down, calls fail at once: a cluster client would otherwise hold
   * auto-pipelined commands until its next reconnect attempt.
   */
  private async ready(): Promise<void> {
    if (this.client.status === 'wait') {
      this.connecting ??= this.client.connect().finally(() => {
        this.connecting = undefined;
      });
    }
    if (this.connecting) await this.connecting;
    else if (this.ownsClient && this.client.status !== 'ready') throw new TierUnavailableError(this.name, new Error(`connection is ${this.client.status}`));
  }

  /** Runs a Redis call, turning any connection or server error into TierUnavailableError. */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      await this.ready();
      return await fn();
    } catch (e) {
      if (e instanceof TierUnavailableError || isScriptBug(e)) throw e;
      throw new TierUnavailableError(this.name, e);
    }
  }

  /**
   * Runs one command per item in pipelines and returns the replies in input order: a single pipeline in
   * standalone mode, one pipeline per shard (= one slot, so one node) in cluster mode, run concurrently.
   */
  private async pipelined<T>(items: readonly T[], shardOf: (item: T) => string, add: (p: Pipeline, item: T) => void): Promise<unknown[]> {
    if (items.length === 0) return [];
    const groups = this.client.isCluster ? groupByShard(items, shardOf) : [items.map((_, i) => i)];
    const out = new Array<unknown>(items.length);
    await this.call(() =>
      Promise.all(
        groups.map(async (group) => {
          const p = this.client.pipeline() as Pipeline;
          for (const i of group) add(p, items[i]!);
          const replies = await p.exec();
          if (!replies) throw new Error('pipeline was discarded');
          replies.forEach(([err, reply], j) => {
            if (err) throw err;
            out[group[j]!] = reply;
          });
        }),
      ),
    );
    return out;
  }
}

function putArgs(k: RedisEntryKeys, entry: Entry): [string, string, Buffer, string, '1' | '0', string, string] {
  const h = entry.header;
  // PEXPIREAT takes whole milliseconds; round up so Redis never expires an entry before isExpired() would.
  const expiresAt = h.expiresAt === null ? '' : String(Math.ceil(h.expiresAt));
  return [String(h.version), encodeHeader(h), entry.value, expiresAt, h.flags.dirty ? '1' : '0', k.member, String(Date.now())];
}

function decodeOutcome(reply: unknown): WriteOutcome {
  const [applied, current] = reply as [number, string | number];
  return { applied: applied === 1, current: Number(current) };
}

function decodeEntry(reply: (Buffer | null)[]): Entry | undefined {
  const [, h, d] = reply;
  if (!h || !d) return undefined;
  const header = decodeHeader(h.toString('utf8'));
  // Redis expires keys itself; this guards against clock skew between us and the server.
  return isExpired(header) ? undefined : { header, value: d };
}

function usedMemory(info: string): number | undefined {
  const m = /^used_memory:(\d+)/m.exec(info);
  return m ? Number(m[1]) : undefined;
}
