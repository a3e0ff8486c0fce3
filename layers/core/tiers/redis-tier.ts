import { createHash, randomUUID } from 'node:crypto';
import type { Socket as NetStream } from 'node:net';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Cluster, Command, Redis, type ChainableCommander, type RedisOptions } from 'ioredis';
import { TierUnavailableError, ValidationError } from '../errors.js';
import { decodeHeader, isExpired, isLive, type Entry, type EntryHeader, type WriteOutcome } from '../model/entry.js';
import { decodeKey, encodeKey, keyShard, validateNamespace } from '../model/keys.js';
import type { Confirming, DirtyTracking, Incarnations, KeyRef, PutOptions, ScanItem, ScanOptions, ScanPage, Scanning, Tier, TierName, TierStats } from './tier.js';

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
  /**
   * Short-lived passwords instead of `password` (ElastiCache IAM tokens: runtime/elasticache-iam.ts): one is made for
   * every connection as it opens, and every live connection authenticates again with a fresh one once it has been
   * authenticated for `reauthenticateAfterMs`.
   */
  credentials?: RedisCredentialSource;
  /** First key segment (default 'strata'); must not contain '{' or '}' (those delimit the hash tag). */
  keyPrefix?: string;
  /**
   * Stall timeout (default 1000 ms) so a dead or stalled Redis fails fast: when commands are in flight on a
   * connection and nothing has come back on it for this long, the connection is reset and every pending call
   * rejects with TierUnavailableError. A call is so bounded by about `commandTimeoutMs` plus one check interval
   * (a quarter of it, 50..250 ms). Checked by one timer per tier, not one per command. For an injected `client`
   * the watchdog only runs when this is given (otherwise the client's own options apply).
   */
  commandTimeoutMs?: number;
  /**
   * How a restarted or failed-over server is told apart (see {@link RedisTier.checkIncarnation}): `run-id` compares
   * every master's INFO run_id with the one recorded in Redis; `reconnect` treats every lost connection as a
   * possibly new server (for endpoints behind a proxy that hides the servers' run_ids: each reconnect then fences
   * the whole hot tier once). @default 'run-id'
   */
  incarnationCheck?: 'run-id' | 'reconnect';
  /** TCP/TLS connect timeout (default 2000 ms). */
  connectTimeoutMs?: number;
  /**
   * Use an existing client instead of creating one (its own options apply; the tier defines its Lua commands
   * on it). The tier does not close an injected client: its owner does. Any Redis >= 6.2 (SET PXAT).
   */
  client?: Redis | Cluster;
}

/** Passwords made when they are used (see {@link RedisTierOptions.credentials}). */
export interface RedisCredentialSource {
  /** Resolves what {@link password} needs (e.g. AWS credentials); awaited before the tier's first connection. */
  prepare?(): Promise<void>;
  /** The password of a connection opening, or re-authenticating, now. Synchronous: ioredis reads it as it connects. */
  password(): string;
  /** Re-authenticate (AUTH with a fresh password) each connection authenticated this long ago. @default never */
  reauthenticateAfterMs?: number;
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
  /** `<prefix>:{<shard>}:<ns>:<encodedKey>`: the entry, one string (see {@link encodeEntryBlob}). */
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

/** Just the entry key of {@link redisEntryKeys} (the read path needs nothing else). */
export function redisEntryKey(prefix: string, ns: string, key: string): string {
  return `${prefix}:{${keyShard(ns, key)}}:${ns}:${encodeKey(key)}`;
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

// ------------------------------------------------------------------ stored layout

/**
 * Layout of the one Redis string that holds an entry:
 *
 * - bytes 0..15: the version, 16 ASCII decimal digits, zero-padded (versions are safe integers, < 2^53);
 * - byte 16: `1` while the entry is dirty (write-back, not yet flushed below), `0` otherwise;
 * - bytes 17..24: the byte length of the header JSON, 8 ASCII decimal digits, zero-padded;
 * - the header JSON (UTF-8). Its flags never hold `dirty`: byte 16 does, so marking clean is one SETRANGE;
 * - the value bytes, to the end.
 *
 * A read is one GET and one JSON.parse of the header; the value is a view of the reply (no copy). Scripts read
 * only bytes 0..16 (GETRANGE) and never load the value.
 */
export const BLOB_PREFIX_BYTES = 25;
const VERSION_DIGITS = 16;
const DIRTY_AT = 16;
const HEADER_LENGTH_AT = 17;
const HEADER_LENGTH_DIGITS = 8;
const MAX_HEADER_BYTES = 99_999_999;
/** head() first reads this much of the entry; a longer header costs a second, full read. */
const HEAD_READ_BYTES = 4096;
const ZEROS = '0'.repeat(VERSION_DIGITS);
const CHAR_0 = 0x30;
const CHAR_1 = 0x31;
const CHAR_2 = 0x32;

function checkVersion(version: number): void {
  if (!Number.isSafeInteger(version) || version < 0) throw new Error(`RedisTier: a version must be a non-negative safe integer (got ${version})`);
}

/** A version as stored: 16 zero-padded decimal digits. */
export function versionDigits(version: number): string {
  checkVersion(version);
  const s = String(version);
  return ZEROS.slice(s.length) + s;
}

/** Writes `n` (a non-negative safe integer of at most `width` digits) as zero-padded ASCII digits. */
function writeDigits(buf: Buffer, n: number, at: number, width: number): void {
  for (let i = at + width - 1; i >= at; i--) {
    const q = Math.floor(n / 10);
    buf[i] = CHAR_0 + n - q * 10;
    n = q;
  }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * The header JSON as stored: without the dirty and pending flags (byte 16 holds them). The usual header (numbers, a
 * base64url hash, no tags, no other flag) is written by hand, at half the cost of JSON.stringify; anything else goes
 * through JSON.stringify. Either way it is plain JSON that decodeHeader() reads back to an equal header.
 */
function storedHeaderJson(h: EntryHeader): string {
  const { version, expiresAt, size, hash, tags, contentType, flags } = h;
  let plainFlags = true;
  for (const flag in flags) {
    if (flag !== 'dirty' && flag !== 'pending') {
      plainFlags = false;
      break;
    }
  }
  if (
    plainFlags &&
    (tags === undefined || tags.length === 0) &&
    contentType === undefined &&
    Number.isSafeInteger(version) &&
    Number.isFinite(size) &&
    (expiresAt === null || Number.isFinite(expiresAt)) &&
    BASE64URL.test(hash) &&
    (h.hotEpoch === undefined || Number.isSafeInteger(h.hotEpoch))
  ) {
    const epoch = h.hotEpoch === undefined ? '' : `,"hotEpoch":${h.hotEpoch}`;
    return `{"version":${version},"expiresAt":${expiresAt},"size":${size},"hash":"${hash}","tags":[],"flags":{}${epoch}}`;
  }
  if (flags.dirty === undefined && flags.pending === undefined) return JSON.stringify(h);
  const { dirty: _dirty, pending: _pending, ...rest } = flags;
  return JSON.stringify({ ...h, flags: rest });
}

/** Checks what the layout cannot hold; returns the byte length of the header JSON. */
function checkedJsonBytes(h: EntryHeader, json: string): number {
  checkVersion(h.version);
  const jsonBytes = Buffer.byteLength(json);
  if (jsonBytes > MAX_HEADER_BYTES) throw new Error(`RedisTier: entry header is ${jsonBytes} bytes (limit ${MAX_HEADER_BYTES})`);
  return jsonBytes;
}

/** Writes the stored form of an entry at `at` (BLOB_PREFIX_BYTES + jsonBytes + value length bytes). */
function writeBlob(buf: Buffer, at: number, h: EntryHeader, json: string, jsonBytes: number, value: Buffer): void {
  writeDigits(buf, h.version, at, VERSION_DIGITS);
  buf[at + DIRTY_AT] = h.flags.dirty ? CHAR_1 : h.flags.pending ? CHAR_2 : CHAR_0;
  writeDigits(buf, jsonBytes, at + HEADER_LENGTH_AT, HEADER_LENGTH_DIGITS);
  buf.write(json, at + BLOB_PREFIX_BYTES, 'utf8');
  buf.set(value, at + BLOB_PREFIX_BYTES + jsonBytes);
}

/** The stored form of an entry (see the layout above). */
export function encodeEntryBlob(entry: Entry): Buffer {
  const h = entry.header;
  const json = storedHeaderJson(h);
  const jsonBytes = checkedJsonBytes(h, json);
  const blob = Buffer.allocUnsafe(BLOB_PREFIX_BYTES + jsonBytes + entry.value.length);
  writeBlob(blob, 0, h, json, jsonBytes, entry.value);
  return blob;
}

/** Decodes a stored entry; the value is a view of `blob`. */
export function decodeEntryBlob(blob: Buffer): Entry {
  const end = headerEnd(blob);
  if (end > blob.length) throw corrupt();
  return { header: blobHeader(blob, end), value: blob.subarray(end) };
}

function corrupt(): Error {
  return new Error('corrupt entry in Redis');
}

/** Where the header JSON of a stored entry (or of a prefix of one) ends. */
function headerEnd(blob: Buffer): number {
  if (blob.length < BLOB_PREFIX_BYTES) throw corrupt();
  let n = 0;
  for (let i = HEADER_LENGTH_AT; i < BLOB_PREFIX_BYTES; i++) {
    const d = blob[i]! - CHAR_0;
    if (d < 0 || d > 9) throw corrupt();
    n = n * 10 + d;
  }
  return BLOB_PREFIX_BYTES + n;
}

function blobHeader(blob: Buffer, end: number): EntryHeader {
  const h = decodeHeader(blob.toString('utf8', BLOB_PREFIX_BYTES, end));
  if (blob[DIRTY_AT] === CHAR_1) h.flags.dirty = true;
  else if (blob[DIRTY_AT] === CHAR_2) h.flags.pending = true;
  return h;
}

/** GET reply → entry; Redis expires keys itself, the isExpired check guards against clock skew. */
function readEntry(blob: Buffer | null): Entry | undefined {
  if (blob === null) return undefined;
  const e = decodeEntryBlob(blob);
  return isExpired(e.header) ? undefined : e;
}

// ------------------------------------------------------------------ scripts

// Lua runs atomically on the node owning the slot; every script touches only an entry and its shard's dirty
// set, which share a hash tag. The dirty-set member is derived from the entry key (`<prefix>:{<shard>}:` +
// member; the prefix has no '}'), so it is not passed. Versions are compared with tonumber(): they are safe
// integers (< 2^53), exact as Lua doubles. A key of another type (an entry in an older layout) reads as absent
// and is replaced by a write.

const MEMBER_FN = `local function member(k) return string.sub(k, string.find(k, '}:', 1, true) + 2) end\n`;

/**
 * KEYS: entry, dirty set. ARGV: blob, expiresAt ms ('' = none). Returns the new version when applied, else
 * -1 - the stored version (integers: exact, versions are < 2^53). SET replaces the previous TTL; PXAT in the past
 * deletes the key at once.
 */
const PUT_LUA = `${MEMBER_FN}
local blob = ARGV[1]
local cur = redis.pcall('GETRANGE', KEYS[1], 0, 16)
if type(cur) ~= 'string' then
  redis.call('DEL', KEYS[1])
  cur = ''
end
local ver = tonumber(string.sub(blob, 1, 16))
if cur ~= '' and tonumber(string.sub(cur, 1, 16)) >= ver then return -1 - tonumber(string.sub(cur, 1, 16)) end
if ARGV[2] == '' then redis.call('SET', KEYS[1], blob) else redis.call('SET', KEYS[1], blob, 'PXAT', ARGV[2]) end
if string.byte(blob, 17) == 49 and redis.call('EXISTS', KEYS[1]) == 1 then
  -- NX keeps the time the entry first became dirty, so a hot key rewritten over and over still gets flushed.
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[2], 'NX', t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)), member(KEYS[1]))
elseif cur == '' or string.byte(cur, 17) == 49 or string.byte(blob, 17) == 49 then
  -- Clean now (or dirty but already expired): out of the dirty set. A clean entry over a clean one has no member.
  redis.call('ZREM', KEYS[2], member(KEYS[1]))
end
return ver
`;

/** KEYS: entry, dirty set. ARGV: expected version (16 digits; '' = any). */
const DELETE_LUA = `${MEMBER_FN}
if ARGV[1] ~= '' and redis.pcall('GETRANGE', KEYS[1], 0, 15) ~= ARGV[1] then return 0 end
redis.call('ZREM', KEYS[2], member(KEYS[1]))
return redis.call('DEL', KEYS[1])
`;

/**
 * KEYS: entry, dirty set. ARGV: version (16 digits), residency deadline ms ('' = none). Clears the dirty byte in
 * place; the deadline then caps the TTL (PEXPIREAT … LT: a key without a TTL counts as infinite), so a flushed
 * copy becomes evictable under volatile-lru.
 */
const MARK_CLEAN_LUA = `${MEMBER_FN}
local cur = redis.pcall('GETRANGE', KEYS[1], 0, 16)
if cur == '' then
  redis.call('ZREM', KEYS[2], member(KEYS[1]))
  return 0
end
if type(cur) ~= 'string' or string.sub(cur, 1, 16) ~= ARGV[1] then return 0 end
if string.byte(cur, 17) == 49 then redis.call('SETRANGE', KEYS[1], 16, '0') end
if ARGV[2] ~= nil and ARGV[2] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[2], 'LT') end
redis.call('ZREM', KEYS[2], member(KEYS[1]))
return 1
`;

/** KEYS: entry, dirty set. ARGV: version (16 digits). A pending copy of exactly that version becomes servable. */
const CONFIRM_LUA = `
if redis.pcall('GETRANGE', KEYS[1], 0, 16) ~= ARGV[1] .. '2' then return 0 end
redis.call('SETRANGE', KEYS[1], 16, '0')
return 1
`;

/**
 * KEYS: entry, dirty set. Drops a member whose entry is clean (0) or gone (2: expired or evicted before it was
 * flushed, a write-back loss); 1 if the entry is dirty.
 */
const DIRTY_CHECK_LUA = `${MEMBER_FN}
local b = redis.pcall('GETRANGE', KEYS[1], 16, 16)
if b == '1' then return 1 end
redis.call('ZREM', KEYS[2], member(KEYS[1]))
if b == '' then return 2 end
return 0
`;

interface Lua {
  readonly lua: string;
  readonly sha: string;
}

function lua(source: string): Lua {
  return { lua: source, sha: createHash('sha1').update(source).digest('hex') };
}

const PUT = lua(PUT_LUA);
const DELETE = lua(DELETE_LUA);
const MARK_CLEAN = lua(MARK_CLEAN_LUA);
const CONFIRM = lua(CONFIRM_LUA);

/** The Lua commands defined on the client for pipelines (prefixed so they cannot clash with an injected client's own). */
interface StrataCommands<R> {
  strataTierPut(entry: string, dirty: string, blob: Buffer, expiresAt: string): R;
  strataTierDelete(entry: string, dirty: string, version: string): R;
  strataTierDirtyCheck(entry: string, dirty: string): R;
}
type Client = (Redis | Cluster) & StrataCommands<Promise<unknown>>;
type Pipeline = ChainableCommander & StrataCommands<ChainableCommander>;

function defineCommands(client: Redis | Cluster): Client {
  client.defineCommand('strataTierPut', { numberOfKeys: 2, lua: PUT.lua });
  client.defineCommand('strataTierDelete', { numberOfKeys: 2, lua: DELETE.lua });
  client.defineCommand('strataTierDirtyCheck', { numberOfKeys: 2, lua: DIRTY_CHECK_LUA });
  return client as Client;
}

/** A Lua runtime/compile error is a bug in this module, not an outage: let it surface as is. */
function isScriptBug(e: unknown): boolean {
  return e instanceof Error && /user_script|Error (running|compiling) script/.test(e.message);
}

function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('NOSCRIPT');
}

function isWrongType(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('WRONGTYPE');
}

/**
 * PXAT takes whole milliseconds (> 0); round up so Redis never expires an entry before isExpired() would. A
 * residency bound caps it (never for a dirty entry: its only copy is here until it is flushed).
 */
function expiryArg(h: EntryHeader, residencyMs?: number): string {
  let at = h.expiresAt;
  if (residencyMs !== undefined && !h.flags.dirty) at = Math.min(at ?? Infinity, Date.now() + residencyMs);
  return at === null ? '' : String(Math.max(1, Math.ceil(at)));
}

/** The PUT script's reply: the new version when applied, else -1 - the stored one. */
function writeOutcome(reply: unknown): WriteOutcome {
  const n = reply as number;
  return n >= 0 ? { applied: true, current: n } : { applied: false, current: -1 - n };
}

const BUFFER_REPLY = { replyEncoding: null };
const STRING_REPLY = { replyEncoding: 'utf8' as const };

/**
 * A script call whose whole RESP frame is built by the caller in one buffer. ioredis would otherwise measure and
 * copy every argument into a new buffer (the value included) on each write. The frame is also the command's only
 * argument, which is what an error reply carries back (see {@link RedisTier.rerun}). ioredis' own scripts
 * subclass Command the same way.
 */
class FramedCommand extends Command {
  constructor(
    name: 'evalsha' | 'eval',
    private readonly frame: Buffer,
  ) {
    super(name, [frame], STRING_REPLY);
  }

  override toWritable(): Buffer {
    return this.frame;
  }
}

/** The start of an EVALSHA frame of `s` with 2 keys and 2 arguments, up to and including the sha. */
function evalshaFrameHead(s: Lua): string {
  return `*7\r\n$7\r\nevalsha\r\n$40\r\n${s.sha}\r\n`;
}

/** The same call as an EVALSHA frame, as EVAL (the script's text instead of its sha). */
function evalFrame(s: Lua, evalshaFrame: Buffer): Buffer {
  const head = evalshaFrameHead(s);
  if (evalshaFrame.toString('latin1', 0, head.length) !== head) throw new Error('RedisTier: not an EVALSHA frame of this script');
  return Buffer.concat([Buffer.from(`*7\r\n$4\r\neval\r\n$${Buffer.byteLength(s.lua)}\r\n${s.lua}\r\n`), evalshaFrame.subarray(head.length)]);
}

const PUT_FRAME_START = `${evalshaFrameHead(PUT)}$1\r\n2\r\n`;

/**
 * EVALSHA of the put script as one RESP frame: the entry is laid out in place, so the value is copied once (into
 * the frame) and nothing is converted per argument. Exported for tests.
 */
export function putCommand(id: string, dirty: string, entry: Entry, residencyMs?: number): Command {
  const h = entry.header;
  const json = storedHeaderJson(h);
  const jsonBytes = checkedJsonBytes(h, json);
  const blobBytes = BLOB_PREFIX_BYTES + jsonBytes + entry.value.length;
  const expiresAt = expiryArg(h, residencyMs);
  const idBytes = Buffer.byteLength(id);
  const dirtyBytes = Buffer.byteLength(dirty);
  const head = `${PUT_FRAME_START}$${idBytes}\r\n${id}\r\n$${dirtyBytes}\r\n${dirty}\r\n$${blobBytes}\r\n`;
  const ascii = idBytes === id.length && dirtyBytes === dirty.length;
  const headBytes = ascii ? head.length : Buffer.byteLength(head);
  const tail = `\r\n$${expiresAt.length}\r\n${expiresAt}\r\n`;
  const frame = Buffer.allocUnsafe(headBytes + blobBytes + tail.length);
  frame.write(head, 0, ascii ? 'latin1' : 'utf8');
  writeBlob(frame, headBytes, h, json, jsonBytes, entry.value);
  frame.write(tail, headBytes + blobBytes, 'latin1');
  return new FramedCommand('evalsha', frame);
}

// ------------------------------------------------------------------ client

/**
 * Builds the ioredis client. Fail-fast settings: no offline queue (a call while disconnected rejects at once
 * instead of waiting for a reconnect), no retry of commands caught by a dropped connection (they reject, so no
 * call waits for a reconnect), lazy connect (the tier connects explicitly on first use, since the offline queue
 * would otherwise be needed for that). No per-command timer: the tier's stall watchdog bounds calls.
 */
export function createRedisClient(opts: RedisTierOptions): Redis | Cluster {
  const endpoint = parseRedisUrl(opts.url ?? 'redis://127.0.0.1:6379');
  const tlsOption = opts.tls ?? endpoint.tls;
  const tls = tlsOption === true ? {} : tlsOption === false ? undefined : tlsOption;
  const common = {
    username: opts.username ?? endpoint.username,
    password: opts.password ?? endpoint.password,
    tls,
    connectTimeout: opts.connectTimeoutMs ?? 2000,
    maxRetriesPerRequest: 0,
    // RESP2: supported everywhere (older servers, proxies) and gives the same reply shapes as ioredis' default.
    protocol: 2,
  } satisfies Partial<RedisOptions>;
  let client: Redis | Cluster;
  if (opts.cluster) {
    const nodes = opts.cluster === true ? [{ host: endpoint.host, port: endpoint.port }] : opts.cluster.nodes;
    client = new Cluster(nodes, {
      lazyConnect: true,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      // ElastiCache: keep the hostnames so TLS certificates validate against them.
      dnsLookup: (address, callback) => callback(null, address),
      clusterRetryStrategy: (times) => Math.min(times * 200, 2000),
      slotsRefreshTimeout: Math.max(opts.commandTimeoutMs ?? 1000, 1000),
      redisOptions: common,
    });
  } else {
    client = new Redis({
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
  if (opts.credentials) authenticateWith(client, opts.credentials, common.username);
  return client;
}

/** Re-authentication checks run this often at most, so a connection re-authenticates at most this late. */
const REAUTH_CHECK_MAX_MS = 10 * 60_000;

/**
 * Makes every connection of `client` authenticate with a password from `source`: a fresh one each time a
 * connection opens (a getter on its options, which ioredis reads as each connect or reconnect starts: Redis#connect
 * copies `options.password` into the AUTH of its handshake), and again, with AUTH on the live connection, once it
 * has been authenticated for `source.reauthenticateAfterMs`. AUTH is an ordinary command on the connection, queued
 * behind the commands already sent, so commands in flight are not disturbed, and the connection is not closed (a
 * planned reconnect would fence the hot tier, see RedisTier.checkIncarnation). A failed AUTH leaves the connection
 * authenticated as before and is retried at the next check.
 */
function authenticateWith(client: Redis | Cluster, source: RedisCredentialSource, username: string | undefined): void {
  const authenticatedAt = new WeakMap<Redis, number>();
  const track = (conn: Redis) => {
    Object.defineProperty(conn.options, 'password', { get: () => source.password(), enumerable: true, configurable: true });
    conn.on('ready', () => authenticatedAt.set(conn, Date.now()));
  };
  // A cluster makes a connection per node as it learns of nodes (lazily connected, so before they connect); its
  // slot-map queries use copies of a node's options (`duplicate`), which read the getter when they are made.
  if (client.isCluster) client.on('+node', track);
  else track(client as Redis);
  const after = source.reauthenticateAfterMs;
  if (after === undefined) return;
  const check = setInterval(() => {
    const now = Date.now();
    for (const conn of client.isCluster ? (client as Cluster).nodes('all') : [client as Redis]) {
      const at = authenticatedAt.get(conn);
      if (conn.status !== 'ready' || at === undefined || now - at < after) continue;
      authenticatedAt.set(conn, now); // not sent again while this one is on its way
      const password = source.password();
      (username ? conn.call('AUTH', username, password) : conn.call('AUTH', password)).catch(() => {
        if (authenticatedAt.get(conn) === now) authenticatedAt.set(conn, at);
      });
    }
  }, Math.max(10, Math.min(Math.floor(after / 4), REAUTH_CHECK_MAX_MS)));
  check.unref();
  client.once('end', () => clearInterval(check));
}

/** What the watchdog last saw on a connection with commands in flight. */
interface Progress {
  stream: unknown;
  bytesRead: number;
  unsent: number;
  head: unknown;
  since: number;
}

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
export class RedisTier implements Tier, DirtyTracking, Scanning, Incarnations, Confirming {
  readonly name: TierName;
  readonly kind = 'redis';
  private readonly client: Client;
  private readonly prefix: string;
  private readonly ownsClient: boolean;
  private readonly stallMs: number;
  private readonly watchdog: NodeJS.Timeout | undefined;
  private readonly progress = new Map<Redis, Progress>();
  /**
   * Standalone client without a key prefix: single commands are written straight to its socket (see
   * {@link sendNow}) instead of going through ioredis' auto-pipelining, which costs several promises, closures
   * and a Pipeline per command. Cluster clients keep ioredis' routing.
   */
  private readonly lean: boolean;
  /** The socket corked for the current tick by {@link sendNow}. */
  private corked: NetStream | undefined;
  private readonly uncork = (): void => {
    const s = this.corked;
    this.corked = undefined;
    s?.uncork();
  };
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
    this.stallMs = opts.commandTimeoutMs ?? 1000;
    this.incarnationCheck = opts.incarnationCheck ?? 'run-id';
    this.credentials = this.ownsClient ? opts.credentials : undefined;
    if (this.ownsClient || opts.commandTimeoutMs !== undefined) {
      this.watchdog = setInterval(() => this.checkStalls(), Math.min(250, Math.max(50, Math.floor(this.stallMs / 4))));
      this.watchdog.unref();
    }
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
    return this.ready().then(() => this.getBuffer(id)).then(readEntry, this.failRead);
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
      sent = this.lean && this.client.status === 'ready'
        ? this.sendNow(putCommand(id, dirty, entry, opts?.residencyMs))
        : this.evalsha(PUT, id, dirty, encodeEntryBlob(entry), expiryArg(entry.header, opts?.residencyMs));
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
    const replies = await this.pipelined(ks, (k) => k.shard, (p, k) => p.getBuffer(k.entry), isWrongType);
    return replies.map((r) => (r instanceof Error ? undefined : readEntry(r as Buffer | null)));
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    const ks = items.map(({ key, entry }) => ({ k: redisEntryKeys(this.prefix, ns, key), entry, blob: encodeEntryBlob(entry) }));
    const replies = await this.pipelined(ks, ({ k }) => k.shard, (p, { k, entry, blob }) => p.strataTierPut(k.entry, k.dirty, blob, expiryArg(entry.header)));
    return replies.map(writeOutcome);
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    const ks = keys.map((key) => redisEntryKeys(this.prefix, ns, key));
    const replies = await this.pipelined(ks, (k) => k.shard, (p, k) => p.strataTierDelete(k.entry, k.dirty, ''));
    return replies.map(isOne);
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
    const dirty = await this.pipelined(oldest, (c) => c.shard, (p, c) =>
      p.strataTierDirtyCheck(`${this.prefix}:{${c.shard}}:${c.member}`, dirtySetKey(this.prefix, c.shard)));
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
  private atVersion(s: Lua, failed: (e: unknown) => Promise<boolean>, ns: string, key: string, version: number, arg2?: string): Promise<boolean> {
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
        ? (this.client as Cluster).nodes('master').sort((a, b) => `${a.options.host}:${a.options.port}`.localeCompare(`${b.options.host}:${b.options.port}`))
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

  /** The headers of entries found by a scan (one pipelined GETRANGE; a long header costs a second, full read). */
  private async headers(ns: string, refs: { key: string; entry: string; shard: string }[]): Promise<ScanItem[]> {
    const prefixes = await this.pipelined(refs, (r) => r.shard, (p, r) => p.getrangeBuffer(r.entry, '0', String(HEAD_READ_BYTES - 1)), isWrongType);
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
      return { ...base, entries: per.reduce((s, [n]) => s + n, 0), bytes: per.reduce((s, [, info]) => s + (usedMemory(info) ?? 0), 0) };
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
    if (this.watchdog) clearInterval(this.watchdog);
    this.progress.clear();
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
        c.status === 'wait' ? c.connect() : Promise.reject(new TierUnavailableError(this.name, new Error(`connection is ${c.status}`)));
      this.connecting ??= (prepare ? prepare.call(this.credentials).then(connect) : c.connect()).finally(() => {
        this.connecting = undefined;
      });
    }
    if (this.connecting) return this.connecting;
    if (this.ownsClient && c.status !== 'ready') return Promise.reject(new TierUnavailableError(this.name, new Error(`connection is ${c.status}`)));
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
    const c = this.client as Redis;
    if (this.corked === undefined && c.stream) {
      this.corked = c.stream;
      this.corked.cork();
      process.nextTick(this.uncork);
    }
    c.sendCommand(cmd);
    return cmd.promise;
  }

  private getBuffer(id: string): Promise<Buffer | null> {
    if (this.lean && this.client.status === 'ready') return this.sendNow(new Command('get', [id], BUFFER_REPLY)) as Promise<Buffer | null>;
    return this.client.getBuffer(id);
  }

  /** Runs a script (two keys) with EVALSHA; errors, including NOSCRIPT, are the caller's (see {@link rerun}). */
  private evalsha(s: Lua, key1: string, key2: string, arg1: string | Buffer, arg2?: string): Promise<unknown> {
    const c = this.client;
    if (c.status === 'ready') {
      if (!this.lean) return arg2 === undefined ? c.evalsha(s.sha, '2', key1, key2, arg1) : c.evalsha(s.sha, '2', key1, key2, arg1, arg2);
      return this.sendNow(new Command('evalsha', arg2 === undefined ? [s.sha, '2', key1, key2, arg1] : [s.sha, '2', key1, key2, arg1, arg2], STRING_REPLY));
    }
    return this.ready().then(() => (arg2 === undefined ? c.evalsha(s.sha, '2', key1, key2, arg1) : c.evalsha(s.sha, '2', key1, key2, arg1, arg2)));
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
  private async pipelined<T>(items: readonly T[], shardOf: (item: T) => string, add: (p: Pipeline, item: T) => void, keep?: (e: Error) => boolean): Promise<unknown[]> {
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

  /**
   * The stall watchdog (one interval per tier, nothing per command): a connection with commands in flight that
   * has received nothing, sent nothing more and completed nothing for `stallMs` is reset. Its pending commands
   * reject (→ TierUnavailableError) and it reconnects in the background, failing fast meanwhile.
   */
  private checkStalls(): void {
    const now = Date.now();
    const conns = this.client.isCluster ? (this.client as Cluster).nodes('all') : [this.client as Redis];
    for (const c of conns) {
      // The offline queue only holds commands on a cluster node that is (re)connecting.
      const pending = c.commandQueue.length + ((c as unknown as { offlineQueue?: { length: number } }).offlineQueue?.length ?? 0);
      if (pending === 0) {
        this.progress.delete(c);
        continue;
      }
      const stream = c.stream as NetStream | undefined;
      const seen: Progress = { stream, bytesRead: stream?.bytesRead ?? -1, unsent: stream?.writableLength ?? -1, head: c.commandQueue.peekFront(), since: now };
      const last = this.progress.get(c);
      if (!last || last.stream !== seen.stream || last.bytesRead !== seen.bytesRead || last.unsent !== seen.unsent || last.head !== seen.head) {
        this.progress.set(c, seen);
      } else if (now - last.since >= this.stallMs) {
        this.progress.delete(c);
        const err = new Error(`Redis sent nothing for ${now - last.since} ms with ${pending} command(s) in flight: connection reset`);
        if (this.client.isCluster) {
          // A cluster drops a node whose connection ends (it does not reconnect nodes) and, with auto-pipelining,
          // may not notice it is missing: ask for the slot map again, which reconnects the nodes it lists.
          const cluster = this.client as Cluster;
          c.once('end', () => {
            if (cluster.status === 'ready') cluster.refreshSlotsCache();
          });
        }
        c.recoverFromFatalError(err, err, {}); // rejects the pending commands and reconnects (standalone)
        stream?.destroy(); // without waiting for a stalled peer to acknowledge the close
      }
    }
    if (this.progress.size > conns.length) {
      for (const c of this.progress.keys()) if (!conns.includes(c)) this.progress.delete(c);
    }
  }
}

/** A string matched literally by a Redis glob pattern (MATCH). */
function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}

function isOne(reply: unknown): boolean {
  return reply === 1;
}

function runId(info: string): string {
  const m = /^run_id:([0-9a-f]+)/m.exec(info);
  if (!m) throw new Error('INFO server has no run_id: a restarted Redis cannot be told apart, so hot copies are not served alone');
  return m[1]!;
}

function usedMemory(info: string): number | undefined {
  const m = /^used_memory:(\d+)/m.exec(info);
  return m ? Number(m[1]) : undefined;
}
