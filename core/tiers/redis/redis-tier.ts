// The hot tier on Redis/Valkey (ioredis): the RedisTier class. Its parts live in ./redis/: the key layout (keys.ts),
// the stored entry layout (blob.ts), the Lua scripts (scripts.ts), hand-built RESP frames (resp-frames.ts), the
// client factory and IAM credential hook (client.ts), the stall watchdog (stall-watchdog.ts) and every use of
// ioredis internals (ioredis-internals.ts).
import { randomUUID } from 'node:crypto';
import { Command, type Cluster, type Redis } from 'ioredis';
import { TierUnavailableError, ValidationError } from '../../errors.js';
import { isExpired, isLive, type Entry, type EntryHeader, type WriteOutcome } from '../../model/entry.js';
import { decodeKey, encodeKey, keyShard, validateNamespace } from '../../model/keys.js';
import { pageOfUnordered, type OrderedKeysPage, type OrderedKeysQuery } from '../../model/key-order.js';
import { pageOfKeyListing } from '../ordered-from-listing.js';
import { blobHeader, encodeEntryBlob, HEAD_READ_BYTES, headerEnd, isWrongType, readEntry, versionDigits } from './blob.js';
import { createRedisClient, type RedisCredentialSource, type RedisTierOptions } from './client.js';
import { BUFFER_REPLY, FramedCommand, STRING_REPLY, TickCorker } from './ioredis-internals.js';
import { ALL_SHARDS, dirtySetKey, groupByShard, parseDirtyMember, redisEntryKey, redisEntryKeys } from './key-layout.js';
import { evalFrame, putCommand } from './resp-frames.js';
import {
  CONFIRM,
  defineCommands,
  DELETE,
  expiryArg,
  isNoScript,
  isOne,
  isScriptBug,
  MARK_CLEAN,
  PUT,
  writeOutcome,
  type Client,
  type Lua,
  type Pipeline,
} from './scripts.js';
import { StallWatchdog } from './stall-watchdog.js';
import type {
  Confirming,
  CreatesIfAbsent,
  DirtyTracking,
  Incarnations,
  KeyOrdering,
  KeyRef,
  PutOptions,
  ScanItem,
  ScanOptions,
  ScanPage,
  Scanning,
  Tier,
  TierName,
  TierStats,
} from '../tier.js';

// The tier's public API, as before the split into ./redis/.
export { BLOB_PREFIX_BYTES, decodeEntryBlob, encodeEntryBlob, versionDigits } from './blob.js';
export {
  createRedisClient,
  parseRedisUrl,
  type RedisCredentialSource,
  type RedisEndpoint,
  type RedisTierOptions,
} from './client.js';
export {
  ALL_SHARDS,
  dirtySetKey,
  groupByShard,
  parseDirtyMember,
  redisEntryKey,
  redisEntryKeys,
  type RedisEntryKeys,
} from './key-layout.js';
export { putCommand } from './resp-frames.js';

/**
 * The Redis tier (ElastiCache / Valkey / redis-server >= 6.2), standalone or cluster mode.
 *
 * Each entry is one string `<prefix>:{<shard>}:<ns>:<encodeKey(key)>` holding the version, a dirty byte, the
 * header JSON and the value (see {@link encodeEntryBlob}), written by a Lua script that applies a write only over
 * an older version. Expiry is Redis TTL (SET … PXAT), so an expired entry is simply absent. Dirty (write-back)
 * entries are also indexed in one sorted set per shard, `<prefix>:{<shard>}:dirty`, scored by the (server) time
 * they became dirty; the `{<shard>}` hash tag keeps an entry and its dirty set in the same cluster slot so
 * scripts may touch both.
 *
 * Calls are bounded by a stall watchdog instead of per-command timers: see {@link RedisTierOptions.commandTimeoutMs}.
 */
export class RedisTier implements Tier, DirtyTracking, Scanning, Incarnations, Confirming, KeyOrdering, CreatesIfAbsent {
  readonly name: TierName;
  readonly kind = 'redis';
  readonly createsIfAbsent = true;
  private readonly client: Client;
  private readonly prefix: string;
  private readonly ownsClient: boolean;
  private readonly watchdog: StallWatchdog | undefined;
  /**
   * Standalone client without a key prefix: single commands are written straight to its socket (see
   * {@link sendNow}) instead of going through ioredis' auto-pipelining, which costs several promises, closures
   * and a Pipeline per command. Cluster clients keep ioredis' routing.
   */
  private readonly lean: boolean;
  /** Corks the socket for the current tick in {@link sendNow}. */
  private readonly corker = new TickCorker();
  private connecting: Promise<void> | undefined;
  private readonly lostListeners: (() => void)[] = [];
  /** Dirty entries found gone before their flush, not yet taken by {@link takeLostDirty}. */
  private dirtyLost = 0;
  private readonly connectionLost = (): void => {
    this.lostSinceCheck = true;
    for (const l of this.lostListeners) l();
  };
  private readonly incarnationCheck: 'run-id' | 'reconnect';
  private readonly credentials: RedisCredentialSource | undefined;
  /** A connection was lost since the last incarnation check (for `incarnationCheck: 'reconnect'`). */
  private lostSinceCheck = false;
  /** Rejection handler: any connection or server error becomes TierUnavailableError (script bugs stay as they are). */
  private readonly fail = (e: unknown): never => {
    throw this.unavailable(e);
  };
  /** Rejection handler of reads: as {@link fail}, but a key of another type (older layout) reads as absent. */
  private readonly failRead = (e: unknown): undefined => {
    if (isWrongType(e)) return undefined;
    throw this.unavailable(e);
  };
  // Rejection handlers of the scripts (made once: nothing is allocated per call on the success path).
  private readonly putFailed = (e: unknown): Promise<WriteOutcome> => this.rerun(e, PUT).then(writeOutcome, this.fail);
  private readonly deleteFailed = (e: unknown): Promise<boolean> => this.rerun(e, DELETE).then(isOne, this.fail);
  private readonly markCleanFailed = (e: unknown): Promise<boolean> => this.rerun(e, MARK_CLEAN).then(isOne, this.fail);
  private readonly confirmFailed = (e: unknown): Promise<boolean> => this.rerun(e, CONFIRM).then(isOne, this.fail);

  constructor(opts: RedisTierOptions = {}) {
    this.name = opts.name ?? 'hot';
    this.prefix = opts.keyPrefix ?? 'strata';
    if (/[{}]/.test(this.prefix)) throw new Error(`keyPrefix must not contain '{' or '}' (got '${this.prefix}')`);
    this.ownsClient = !opts.client;
    const client = opts.client ?? createRedisClient(opts);
    // Errors surface on each call as TierUnavailableError; without a listener ioredis would log every failed reconnect.
    if (this.ownsClient) client.on('error', () => {});
    this.client = defineCommands(client);
    // A reconnect may reach a restarted or failed-over server (see Incarnations): tell the hot fence.
    if (client.isCluster) (client as Cluster).on('+node', (node: Redis) => node.on('close', this.connectionLost));
    else client.on('close', this.connectionLost);
    this.lean = !client.isCluster && !(client as Redis).options.keyPrefix;
    this.incarnationCheck = opts.incarnationCheck ?? 'run-id';
    this.credentials = this.ownsClient ? opts.credentials : undefined;
    if (this.ownsClient || opts.commandTimeoutMs !== undefined)
      this.watchdog = new StallWatchdog(client, opts.commandTimeoutMs ?? 1000);
  }

  /** A tier for a `redis://` or `rediss://` (TLS) URL. */
  static fromUrl(url: string, opts: Omit<RedisTierOptions, 'url'> = {}): RedisTier {
    return new RedisTier({ ...opts, url });
  }

  get mode(): 'standalone' | 'cluster' {
    return this.client.isCluster ? 'cluster' : 'standalone';
  }

  // The per-operation methods below are deliberately not `async`: when connected they hand ioredis' promise
  // straight on with one `.then`, so a call costs one promise of ours.

  get(ns: string, key: string): Promise<Entry | undefined> {
    const id = redisEntryKey(this.prefix, ns, key);
    if (this.client.status === 'ready') return this.getBuffer(id).then(readEntry, this.failRead);
    return this.ready()
      .then(() => this.getBuffer(id))
      .then(readEntry, this.failRead);
  }

  async head(ns: string, key: string): Promise<EntryHeader | undefined> {
    const id = redisEntryKey(this.prefix, ns, key);
    const prefix = await this.send((c) => c.getrangeBuffer(id, '0', String(HEAD_READ_BYTES - 1))).catch(this.failRead);
    if (!prefix || prefix.length === 0) return undefined;
    let h: EntryHeader;
    const end = headerEnd(prefix);
    if (end <= prefix.length) h = blobHeader(prefix, end);
    else {
      // A long header (many tags): read the whole entry, which is consistent by itself (the entry may have
      // been replaced since the first read).
      const e = await this.send((c) => c.getBuffer(id)).then(readEntry, this.failRead);
      if (!e) return undefined;
      h = e.header;
    }
    return isExpired(h) ? undefined : h;
  }

  async has(ns: string, key: string): Promise<boolean> {
    const h = await this.head(ns, key);
    return h !== undefined && isLive(h);
  }

  put(ns: string, key: string, entry: Entry, opts?: PutOptions): Promise<WriteOutcome> {
    const shard = keyShard(ns, key);
    const id = `${this.prefix}:{${shard}}:${ns}:${encodeKey(key)}`;
    const dirty = dirtySetKey(this.prefix, shard);
    let sent: Promise<unknown>;
    try {
      const expiry = expiryArg(entry.header, opts?.residencyMs);
      sent = opts?.ifAbsent
        ? this.evalsha(PUT, id, dirty, encodeEntryBlob(entry), expiry, '1')
        : this.lean && this.client.status === 'ready'
          ? this.sendNow(putCommand(id, dirty, entry, opts?.residencyMs))
          : this.evalsha(PUT, id, dirty, encodeEntryBlob(entry), expiry);
    } catch (e) {
      return Promise.reject(e);
    }
    return sent.then(writeOutcome, this.putFailed);
  }

  delete(ns: string, key: string, version?: number): Promise<boolean> {
    const k = redisEntryKeys(this.prefix, ns, key);
    let expected: string;
    try {
      expected = version === undefined ? '' : versionDigits(version);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.evalsha(DELETE, k.entry, k.dirty, expected).then(isOne, this.deleteFailed);
  }

  async getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
    const ks = keys.map((key) => redisEntryKeys(this.prefix, ns, key));
    // A key of another type (older layout) reads as absent, as in get().
    const replies = await this.pipelined(
      ks,
      (k) => k.shard,
      (p, k) => p.getBuffer(k.entry),
      isWrongType,
    );
    return replies.map((r) => (r instanceof Error ? undefined : readEntry(r as Buffer | null)));
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    const ks = items.map(({ key, entry }) => ({ k: redisEntryKeys(this.prefix, ns, key), entry, blob: encodeEntryBlob(entry) }));
    const replies = await this.pipelined(
      ks,
      ({ k }) => k.shard,
      (p, { k, entry, blob }) => p.strataTierPut(k.entry, k.dirty, blob, expiryArg(entry.header)),
    );
    return replies.map(writeOutcome);
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    const ks = keys.map((key) => redisEntryKeys(this.prefix, ns, key));
    const replies = await this.pipelined(
      ks,
      (k) => k.shard,
      (p, k) => p.strataTierDelete(k.entry, k.dirty, ''),
    );
    return replies.map(isOne);
  }

  /**
   * Reads the oldest `limit` members of each shard's dirty set and merges them by dirty time. Members whose
   * entry has meanwhile expired are dropped from the index (atomically, so a concurrent dirty write is kept),
   * so the result may hold fewer than `limit` refs even when more are dirty.
   */
  async listDirty(limit: number): Promise<KeyRef[]> {
    if (!(limit > 0)) return [];
    const replies = await this.pipelined(
      ALL_SHARDS,
      (s) => s,
      (p, s) => p.zrange(dirtySetKey(this.prefix, s), 0, String(limit - 1), 'WITHSCORES'),
    );
    const candidates: { shard: string; member: string; score: number }[] = [];
    replies.forEach((reply, i) => {
      const flat = (reply as unknown[]).flat() as string[]; // RESP3 clients may answer [member, score] pairs
      for (let j = 0; j + 1 < flat.length; j += 2) {
        candidates.push({ shard: ALL_SHARDS[i]!, member: String(flat[j]), score: Number(flat[j + 1]) });
      }
    });
    candidates.sort((a, b) => a.score - b.score);
    const oldest = candidates.slice(0, limit);
    const dirty = await this.pipelined(
      oldest,
      (c) => c.shard,
      (p, c) => p.strataTierDirtyCheck(`${this.prefix}:{${c.shard}}:${c.member}`, dirtySetKey(this.prefix, c.shard)),
    );
    this.dirtyLost += dirty.filter((d) => d === 2).length;
    return oldest.filter((_, i) => dirty[i] === 1).map((c) => parseDirtyMember(c.member));
  }

  takeLostDirty(): number {
    const n = this.dirtyLost;
    this.dirtyLost = 0;
    return n;
  }

  markClean(ns: string, key: string, version: number, residencyMs?: number): Promise<boolean> {
    const deadline = residencyMs === undefined ? '' : String(Math.ceil(Date.now() + residencyMs));
    return this.atVersion(MARK_CLEAN, this.markCleanFailed, ns, key, version, deadline);
  }

  confirm(ns: string, key: string, version: number): Promise<boolean> {
    return this.atVersion(CONFIRM, this.confirmFailed, ns, key, version);
  }

  /** Runs a script over an entry and its dirty set whose first argument is an exact version (reply 1 = done). */
  private atVersion(
    s: Lua,
    failed: (e: unknown) => Promise<boolean>,
    ns: string,
    key: string,
    version: number,
    arg2?: string,
  ): Promise<boolean> {
    const k = redisEntryKeys(this.prefix, ns, key);
    let expected: string;
    try {
      expected = versionDigits(version);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.evalsha(s, k.entry, k.dirty, expected, arg2).then(isOne, failed);
  }

  /**
   * SCAN with `MATCH <prefix>:{*}:<ns>:*` (COUNT = `limit`), then the headers of the matching keys (one pipelined
   * GETRANGE of each). Keys are stored base64url-encoded, so a prefix of the user key is not a prefix of the
   * Redis key: the namespace is matched by Redis and the key prefix filtered here. The cursor is SCAN's (in
   * cluster mode `<master index>:<cursor>`, masters in address order). A page holds what the SCAN calls returned,
   * so it may exceed `limit` somewhat (SCAN's COUNT is a hint); like SCAN, a key may be listed twice. At most 16
   * SCAN calls per page: a sparse namespace yields empty pages with a cursor rather than one long call.
   */
  async scan(ns: string, opts: ScanOptions): Promise<ScanPage> {
    validateNamespace(ns);
    const clientPrefix = (this.client as { options?: { keyPrefix?: string } }).options?.keyPrefix ?? '';
    const pattern = `${globEscape(clientPrefix + this.prefix)}:{*}:${ns}:*`;
    const limit = Math.max(1, Math.floor(opts.limit));
    const want = opts.prefix ?? '';
    let node = 0;
    let cursor = '0';
    if (opts.cursor) {
      const m = /^(?:(\d+):)?(\d+)$/.exec(opts.cursor);
      if (!m) throw new ValidationError('cursor', `not a cursor of the Redis tier: '${opts.cursor.slice(0, 40)}'`);
      node = Number(m[1] ?? 0);
      cursor = m[2]!;
    }
    const refs: { key: string; entry: string; shard: string }[] = [];
    const head = `${this.prefix}:{`;
    const tail = `}:${ns}:`;
    let done = false;
    await this.call(async () => {
      const masters: (Redis | Cluster)[] = this.client.isCluster
        ? (this.client as Cluster)
            .nodes('master')
            .sort((a, b) => `${a.options.host}:${a.options.port}`.localeCompare(`${b.options.host}:${b.options.port}`))
        : [this.client];
      for (let calls = 0; calls < 16 && refs.length < limit; calls++) {
        if (node >= masters.length) {
          done = true;
          break;
        }
        const [next, keys] = await masters[node]!.scan(cursor, 'MATCH', pattern, 'COUNT', String(limit));
        for (const raw of keys) {
          const k = raw.startsWith(clientPrefix) ? raw.slice(clientPrefix.length) : raw;
          const close = k.indexOf(tail, head.length);
          if (!k.startsWith(head) || close !== head.length + 2) continue;
          const key = decodeKey(k.slice(close + tail.length));
          if (encodeKey(key) !== k.slice(close + tail.length) || !key.startsWith(want)) continue;
          refs.push({ key, entry: k, shard: k.slice(head.length, close) });
        }
        if (next === '0') {
          node++;
          cursor = '0';
          if (node >= masters.length) done = true;
        } else cursor = next;
        if (done) break;
      }
    });
    const items = await this.headers(ns, refs);
    return { items, cursor: done ? null : this.client.isCluster ? `${node}:${cursor}` : cursor };
  }

  /**
   * Keys in key order (KeyOrdering). With `aheadOnly` (a write-back namespace that has durable tiers: see
   * coordinator/key-listing.ts), the namespace's dirty entries, the only ones this tier may hold ahead of the tiers
   * below: read from the 256 shards' dirty sets and sorted here, so a page costs one pass over the write-back
   * backlog, which the policy's flush interval and dirty limit keep small. Redis keeps no key order, and an index
   * of every key (a sorted set beside each shard) would outlive the entries Redis expires or evicts on its own,
   * growing without bound in a tier that must stay within its memory. Without `aheadOnly` (a namespace whose only
   * tier is this one) every key of the namespace, by {@link scan}: a page costs a SCAN of the namespace.
   */
  async listOrdered(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
    validateNamespace(ns);
    if (!q.aheadOnly) {
      const list = (opts: ScanOptions) =>
        this.scan(ns, opts).then((p) => ({ keys: p.items.map((i) => i.key), cursor: p.cursor }));
      return pageOfKeyListing(list, q);
    }
    const head = `${ns}:`;
    const zrange = (p: Pipeline, shard: string) => p.zrange(dirtySetKey(this.prefix, shard), '0', '-1');
    const sets = await this.pipelined(ALL_SHARDS, (shard) => shard, zrange);
    const keys: string[] = [];
    for (const members of sets as string[][])
      for (const m of members) if (m.startsWith(head)) keys.push(decodeKey(m.slice(head.length)));
    return pageOfUnordered(keys, q);
  }

  /** The headers of entries found by a scan (one pipelined GETRANGE; a long header costs a second, full read). */
  private async headers(ns: string, refs: { key: string; entry: string; shard: string }[]): Promise<ScanItem[]> {
    const read = (p: Pipeline, r: { entry: string }) => p.getrangeBuffer(r.entry, '0', String(HEAD_READ_BYTES - 1));
    const prefixes = await this.pipelined(refs, (r) => r.shard, read, isWrongType);
    const out: ScanItem[] = [];
    for (let i = 0; i < refs.length; i++) {
      const b = prefixes[i];
      if (!Buffer.isBuffer(b) || b.length === 0) continue; // gone meanwhile, or of another type
      const end = headerEnd(b);
      const header = end <= b.length ? blobHeader(b, end) : await this.head(ns, refs[i]!.key);
      if (header && !isExpired(header)) out.push({ key: refs[i]!.key, header });
    }
    return out;
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
      return {
        ...base,
        entries: per.reduce((s, [n]) => s + n, 0),
        bytes: per.reduce((s, [, info]) => s + (usedMemory(info) ?? 0), 0),
      };
    } catch {
      return base;
    }
  }

  // ------------------------------------------------------------------ incarnations

  onConnectionLost(listener: () => void): void {
    this.lostListeners.push(listener);
  }

  /**
   * The incarnation is the `run_id` of every master (INFO server): a new one on every restart, whatever the server
   * restored from disk, and another on a replica promoted by a failover. The last confirmed one is kept in Redis
   * itself (`<prefix>:incarnation`): a restored snapshot or a promoted replica brings back an old value, which no
   * longer matches.
   */
  async checkIncarnation(): Promise<{ same: true } | { same: false; token: string; previous: string | null }> {
    if (this.incarnationCheck === 'reconnect') {
      const lost = this.lostSinceCheck;
      this.lostSinceCheck = false;
      const stored = await this.call(() => this.client.get(this.incarnationKey()));
      return stored !== null && !lost ? { same: true } : { same: false, token: randomUUID(), previous: stored };
    }
    const token = await this.call(async () => {
      const nodes = this.client.isCluster ? (this.client as Cluster).nodes('master') : [this.client as Redis];
      const ids = await Promise.all(nodes.map(async (n) => runId(await n.info('server'))));
      return ids.sort().join(',');
    });
    const stored = await this.call(() => this.client.get(this.incarnationKey()));
    return stored === token ? { same: true } : { same: false, token, previous: stored };
  }

  async confirmIncarnation(token: string): Promise<void> {
    await this.call(() => this.client.set(this.incarnationKey(), token));
  }

  private incarnationKey(): string {
    return `${this.prefix}:incarnation`;
  }

  async ping(): Promise<void> {
    await this.call(() => this.client.ping());
  }

  /** Quits (or, failing that, drops) the connection the tier created; an injected client is left to its owner. */
  async close(): Promise<void> {
    this.watchdog?.stop();
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
  private ready(): Promise<void> {
    const c = this.client;
    if (c.status === 'wait') {
      // Credentials that need resolving (AWS credentials for IAM tokens) are resolved before the first connect (unless
      // the tier was closed meanwhile).
      const prepare = this.credentials?.prepare;
      const connect = () =>
        c.status === 'wait'
          ? c.connect()
          : Promise.reject(new TierUnavailableError(this.name, new Error(`connection is ${c.status}`)));
      this.connecting ??= (prepare ? prepare.call(this.credentials).then(connect) : c.connect()).finally(() => {
        this.connecting = undefined;
      });
    }
    if (this.connecting) return this.connecting;
    if (this.ownsClient && c.status !== 'ready') {
      return Promise.reject(new TierUnavailableError(this.name, new Error(`connection is ${c.status}`)));
    }
    return Promise.resolve();
  }

  /** Sends at once when connected, else after {@link ready}. Errors are left to the caller. */
  private send<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    const c = this.client;
    return c.status === 'ready' ? fn(c) : this.ready().then(() => fn(c));
  }

  private unavailable(e: unknown): unknown {
    return e instanceof TierUnavailableError || isScriptBug(e) ? e : new TierUnavailableError(this.name, e);
  }

  /** Runs a Redis call, turning any connection or server error into TierUnavailableError. */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      if (this.client.status !== 'ready') await this.ready();
      return await fn();
    } catch (e) {
      throw this.unavailable(e);
    }
  }

  /**
   * Writes a command to the standalone client's socket at once, with no auto-pipelining machinery: the socket is
   * corked until the end of the tick, so the commands of one tick still leave in one write (what auto-pipelining
   * achieves, for far less per command). The caller has checked that the client is ready.
   */
  private sendNow(cmd: Command): Promise<unknown> {
    return this.corker.send(this.client as Redis, cmd);
  }

  private getBuffer(id: string): Promise<Buffer | null> {
    if (this.lean && this.client.status === 'ready')
      return this.sendNow(new Command('get', [id], BUFFER_REPLY)) as Promise<Buffer | null>;
    return this.client.getBuffer(id);
  }

  /** Runs a script (two keys) with EVALSHA; errors, including NOSCRIPT, are the caller's (see {@link rerun}). */
  private evalsha(s: Lua, key1: string, key2: string, arg1: string | Buffer, arg2?: string, arg3?: string): Promise<unknown> {
    const c = this.client;
    const argv = arg2 === undefined ? [arg1] : arg3 === undefined ? [arg1, arg2] : [arg1, arg2, arg3];
    if (c.status === 'ready') {
      if (!this.lean) return c.evalsha(s.sha, '2', key1, key2, ...argv);
      return this.sendNow(new Command('evalsha', [s.sha, '2', key1, key2, ...argv], STRING_REPLY));
    }
    return this.ready().then(() => c.evalsha(s.sha, '2', key1, key2, ...argv));
  }

  /**
   * After a failed {@link evalsha}: when the server lacked the script (script cache flushed, failover, a new
   * cluster node), runs the same call once with EVAL, which caches the script again; any other error becomes
   * TierUnavailableError (script bugs excepted).
   */
  private rerun(e: unknown, s: Lua): Promise<unknown> {
    const args = (e as { command?: { args?: unknown[] } }).command?.args;
    if (!isNoScript(e) || !args) return Promise.reject(this.unavailable(e));
    let cmd: Command;
    if (args.length === 1 && Buffer.isBuffer(args[0])) cmd = new FramedCommand('eval', evalFrame(s, args[0]));
    else if (args[0] === s.sha) cmd = new Command('eval', [s.lua, ...(args.slice(1) as (string | Buffer)[])], STRING_REPLY);
    else return Promise.reject(this.unavailable(e));
    // Sent as is: the keys already carry an injected client's keyPrefix, if any.
    this.client.sendCommand(cmd);
    return cmd.promise;
  }

  /**
   * Runs one command per item in pipelines and returns the replies in input order: a single pipeline in
   * standalone mode, one pipeline per shard (= one slot, so one node) in cluster mode, run concurrently. An
   * error reply fails the call, unless `keep` accepts it as that item's reply.
   */
  private async pipelined<T>(
    items: readonly T[],
    shardOf: (item: T) => string,
    add: (p: Pipeline, item: T) => void,
    keep?: (e: Error) => boolean,
  ): Promise<unknown[]> {
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
            if (err && !keep?.(err)) throw err;
            out[group[j]!] = err ?? reply;
          });
        }),
      ),
    );
    return out;
  }
}

/** A string matched literally by a Redis glob pattern (MATCH). */
function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

function runId(info: string): string {
  const m = /^run_id:([0-9a-f]+)/m.exec(info);
  if (!m)
    throw new Error('INFO server has no run_id: a restarted Redis cannot be told apart, so hot copies are not served alone');
  return m[1]!;
}

function usedMemory(info: string): number | undefined {
  const m = /^used_memory:(\d+)/m.exec(info);
  return m ? Number(m[1]) : undefined;
}
