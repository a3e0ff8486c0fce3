// The ioredis client of the hot tier: options, URL parsing, the fail-fast client factory and the IAM credential hook.
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { TierName } from '../tier.js';
import { passwordReadOnEachConnect } from './ioredis-internals.js';

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
   * Short-lived passwords instead of `password` (ElastiCache IAM tokens: composition/elasticache-iam.ts): one is made for
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
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new Error(`unsupported Redis URL scheme '${u.protocol}' (use redis:// or rediss://)`);
  }
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
 * connection opens (a getter on its options, which ioredis reads as each connect or reconnect starts: see
 * {@link passwordReadOnEachConnect}), and again, with AUTH on the live connection, once it has been authenticated
 * for `source.reauthenticateAfterMs`. AUTH is an ordinary command on the connection, queued behind the commands
 * already sent, so commands in flight are not disturbed, and the connection is not closed (a planned reconnect
 * would fence the hot tier, see RedisTier.checkIncarnation). A failed AUTH leaves the connection authenticated as
 * before and is retried at the next check.
 */
function authenticateWith(client: Redis | Cluster, source: RedisCredentialSource, username: string | undefined): void {
  const authenticatedAt = new WeakMap<Redis, number>();
  const track = (conn: Redis) => {
    passwordReadOnEachConnect(conn, () => source.password());
    conn.on('ready', () => authenticatedAt.set(conn, Date.now()));
  };
  // A cluster makes a connection per node as it learns of nodes (lazily connected, so before they connect); its
  // slot-map queries use copies of a node's options (`duplicate`), which read the getter when they are made.
  if (client.isCluster) client.on('+node', track);
  else track(client as Redis);
  const after = source.reauthenticateAfterMs;
  if (after === undefined) return;
  const check = setInterval(
    () => {
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
    },
    Math.max(10, Math.min(Math.floor(after / 4), REAUTH_CHECK_MAX_MS)),
  );
  check.unref();
  client.once('end', () => clearInterval(check));
}
