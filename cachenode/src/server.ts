// The cache node daemon's HTTP server: composes the route handlers, body reading and ring sync over a NodeStore.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorLogLimiter, formatErrorLogEntry } from '../../core/util/error-log-limiter.js';
import { RING_HEADER, SECRET_HEADER } from '../../core/nodes/wire.js';
import { MIN_PEER_PROTOCOL, PROTOCOL_HEADER, PROTOCOL_VERSION, protocolOf, protocolRefusal } from '../../core/nodes/protocol.js';
import type { NodeConfig } from './config.js';
import { EntryRoutes } from './entry-routes.js';
import { HttpError } from './http-error.js';
import { KeyOrderRoutes } from './key-order-routes.js';
import { sendJson } from './http-reply.js';
import { NodeStateRoutes } from './node-state-routes.js';
import { Ownership } from './ownership.js';
import { RangeRoutes } from './range-routes.js';
import { RingSync } from './ring-sync.js';
import { RouteContext } from './route-context.js';
import { RouteTable } from './route-table.js';
import { NodeStats, type Op } from './stats.js';
import { reportSinkFromUri, StatsReporter } from './stats-reporter.js';
import { NodeStore } from './store.js';
import { nodeLog } from './node-log.js';
import { nodeBuild } from './build.js';
import { VolumeWatch } from './volume-watch.js';

/** How long a starting node waits for its first read of the ring store before it listens anyway. */
const FIRST_RING_READ_WAIT_MS = 3000;
/** The answer header's value: the same on every response. */
const PROTOCOL_ANSWER = String(PROTOCOL_VERSION);

/**
 * The cache node daemon: an HTTP/1.1 keep-alive server over a {@link NodeStore}.
 *
 * Every request must carry the shared secret (`x-strata-secret`, compared in constant time). Key requests carry
 * the caller's ring version (`x-strata-ring`) and are checked against the node's ring ({@link Ownership}):
 * refused with 409, the node's ring version and its ring document, when the node does not own the key's range
 * or the caller's ring is older than the range's last change; refused with 503 FENCED while the node is marked DOWN
 * or, polling a ring store, has not read it within the ring's lease. The check and the store's write decision happen
 * in the same synchronous step, so a ring install (which waits for queued writes to settle before answering)
 * cleanly separates writes accepted under the old ring from those under the new one.
 */
export class CacheNode {
  readonly nodeId: string;
  readonly store: NodeStore;
  readonly stats = new NodeStats();
  readonly ownership: Ownership;
  private readonly server: Server;
  /** The shared secret's bytes (compared in constant time; its length is no secret). */
  private readonly secretBytes: Buffer;
  private readonly entries: EntryRoutes;
  private readonly routes: RouteTable;
  private inFlight = 0;
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private sweeper?: NodeJS.Timeout;
  /** Polls the ring store for newer rings (when the node has one: STRATA_NODE_RING_STORE). */
  private ringSync?: RingSync;
  /** Writes this node's statistics report to the ring store (STRATA_NODE_STATS_INTERVAL_MS). */
  private statsReporter?: StatsReporter;
  private stopped?: Promise<void>;
  /** Watches that the data directory is still the one opened (STRATA_NODE_VOLUME_CHECK_MS). */
  private volumeWatch?: VolumeWatch;
  /** Why the data volume is lost, once it is: the node then serves nothing but /healthz and /stats (503). */
  private volumeLost: string | undefined;
  /** Called once when the volume is lost (the daemon exits; see main.ts). */
  onVolumeLost?: (reason: string) => void;
  /** The oldest protocol version accepted from callers. */
  private readonly minPeerProtocol: number;
  readonly build: string;
  /**
   * Unexpected request failures (a failing disk fails every write): the first of each kind with its stack, then
   * one line per kind per 10 s with the count, not a stack per request.
   */
  private readonly failureLog = new ErrorLogLimiter({
    write: (e) => nodeLog.error(formatErrorLogEntry(e, 'request')),
  });

  private constructor(
    readonly config: NodeConfig,
    store: NodeStore,
  ) {
    this.store = store;
    const saved = store.getSys<string>('nodeId');
    this.nodeId = config.nodeId ?? saved ?? `node-${randomBytes(6).toString('hex')}`;
    this.ownership = new Ownership(this.nodeId, store);
    this.secretBytes = Buffer.from(config.secret, 'utf8');
    this.minPeerProtocol = config.minPeerProtocol ?? MIN_PEER_PROTOCOL;
    this.build = config.build ?? nodeBuild();
    const ctx = new RouteContext(this.nodeId, config, store, this.ownership, this.stats);
    this.entries = new EntryRoutes(ctx);
    const ranges = new RangeRoutes(ctx);
    const state = new NodeStateRoutes(
      ctx,
      () => (this.volumeLost ? 'volume-lost' : this.draining ? 'draining' : 'ok'),
      () => this.statsBody(),
      { protocol: PROTOCOL_VERSION, minProtocol: this.minPeerProtocol, build: this.build },
    );
    this.routes = new RouteTable(this.entries, ranges, state, new KeyOrderRoutes(ctx));
    this.server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, headersTimeout: 30_000 }, (req, res) =>
      this.onRequest(req, res),
    );
  }

  static async start(config: NodeConfig): Promise<CacheNode> {
    // A secret read from the ring store arrives after the configuration: a node must not start before it has it.
    if (config.secret.length < 16) {
      throw new Error(
        'the cache node has no shared secret of 16+ characters (one from the ring store must be loaded before start)',
      );
    }
    const store = new NodeStore({
      dir: config.dataDir,
      capacityBytes: config.capacityBytes,
      watermark: config.watermark,
      sync: config.sync,
      applyIntervalMs: config.applyIntervalMs,
    });
    const node = new CacheNode(config, store);
    if (store.getSys<string>('nodeId') !== node.nodeId) await store.putSys('nodeId', node.nodeId);
    if ((config.volumeCheckMs ?? 0) > 0) {
      node.volumeWatch = VolumeWatch.open(config.dataDir);
      node.volumeWatch.start(config.volumeCheckMs!, (reason) => node.loseVolume(reason));
    }
    node.server.listen(config.port, config.host);
    await once(node.server, 'listening');
    if (config.sweepMs > 0) {
      node.sweeper = setInterval(() => void store.sweepExpired().catch(() => undefined), config.sweepMs);
      node.sweeper.unref();
    }
    if (config.ringStore) {
      node.ringSync = new RingSync(config.ringStore, node.ownership, store, () => node.draining);
      // The node serves only once a read of the store gave it its lease: wait a little for the first one, so a fresh
      // node is ready when it says so, but not for long (an unreachable store must not hold up the start).
      const first = node.ringSync.start();
      await Promise.race([first, new Promise((r) => setTimeout(r, FIRST_RING_READ_WAIT_MS).unref())]);
      if (config.statsReports) {
        const { intervalMs, id } = config.statsReports;
        const sink = reportSinkFromUri(config.ringStore.uri, config.ringStore.s3Endpoint);
        const reportId = id ? { reportId: id } : {};
        const stats = () => node.statsBody();
        node.statsReporter = new StatsReporter({ sink, nodeId: node.nodeId, ...reportId, intervalMs, stats });
        node.statsReporter.start();
      }
    }
    return node;
  }

  /**
   * The data volume is gone: from now on the node refuses every request but /healthz and /stats with 503
   * VOLUME_LOST (reads go to the next tier; writes are not acknowledged into files that no longer exist), and its
   * health answers 503. The daemon then exits with a status its service manager does not restart (main.ts), so the
   * failure detector marks it DOWN and the node is replaced with a fresh volume.
   */
  loseVolume(reason: string): void {
    if (this.volumeLost) return;
    this.volumeLost = reason;
    nodeLog.error(`data volume lost: ${reason}; refusing every request (VOLUME_LOST)`);
    this.onVolumeLost?.(reason);
  }

  /** What GET /stats answers, and what the node's statistics reports carry. */
  statsBody(): Record<string, unknown> {
    return {
      nodeId: this.nodeId,
      ringVersion: this.ownership.version,
      ...this.store.stats(),
      ...this.stats.snapshot(),
      responseSlabs: this.entries.slabs.stats,
      requestSlabs: this.entries.bodySlabs.stats,
      ...(this.statsReporter ? { statsReports: { ...this.statsReporter.counters } } : {}),
    };
  }

  /**
   * Reads the ring store and installs a newer version than the node holds (as a push would). A node that missed
   * pushes (it was down, or a push failed) catches up by itself instead of waiting for a refused caller to bring
   * the ring. Never throws: a store outage is logged and the next poll tries again.
   */
  async pollRing(): Promise<boolean> {
    if (!this.ringSync) return false;
    return this.ringSync.poll();
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /**
   * Graceful shutdown: stop accepting connections, let in-flight requests finish (up to `drainMs`), close idle
   * keep-alive connections, then flush and close the store.
   */
  shutdown(): Promise<void> {
    this.stopped ??= (async () => {
      this.draining = true;
      if (this.sweeper) clearInterval(this.sweeper);
      this.volumeWatch?.stop();
      this.ringSync?.stop();
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      this.server.closeIdleConnections();
      if (this.inFlight > 0) {
        await Promise.race([
          new Promise<void>((r) => this.idleWaiters.push(r)),
          new Promise((r) => setTimeout(r, this.config.drainMs).unref()),
        ]);
      }
      this.server.closeAllConnections();
      await closed;
      // After the drain (its counters are final), before the store closes (the report reads it).
      await this.statsReporter?.stop(true);
      this.ringSync?.close();
      await this.store.close();
    })();
    return this.stopped;
  }

  // ------------------------------------------------------------------ dispatch

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    this.inFlight++;
    res.once('close', () => {
      if (--this.inFlight === 0 && this.draining) for (const w of this.idleWaiters.splice(0)) w();
    });
    if (this.draining) res.setHeader('connection', 'close');
    if (!this.authorized(req)) {
      this.stats.unauthorized++;
      res.setHeader('connection', 'close');
      this.sendError(res, new HttpError('UNAUTHORIZED', 'missing or wrong shared secret'));
      return;
    }
    res.setHeader(PROTOCOL_HEADER, PROTOCOL_ANSWER);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    // Health answers every caller, whatever its version: it is how a caller learns the node's.
    if (path !== '/healthz') {
      const refused = this.refusal(req, path);
      if (refused) {
        this.sendError(res, refused);
        return;
      }
    }
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    const method = req.method ?? 'GET';
    let op: Op | undefined;
    let p: Promise<void>;
    const t0 = performance.now();
    try {
      ({ op, done: p } = this.routes.dispatch(method, path, query, req, res));
    } catch (e) {
      p = Promise.reject(e);
    }
    p.then(
      () => op && this.stats.record(op, t0, true),
      (e: unknown) => {
        if (op) this.stats.record(op, t0, false);
        this.sendError(res, e);
      },
    );
  }

  /** A refusal before any route: a caller older than the node accepts, or a lost volume. */
  private refusal(req: IncomingMessage, path: string): HttpError | undefined {
    const peer = protocolOf(req.headers[PROTOCOL_HEADER]);
    const why = protocolRefusal(peer, this.minPeerProtocol, 'node');
    if (why) return new HttpError('PROTOCOL_UNSUPPORTED', why, { protocol: PROTOCOL_VERSION, minProtocol: this.minPeerProtocol });
    if (this.volumeLost && path !== '/stats') return new HttpError('VOLUME_LOST', this.volumeLost);
    return undefined;
  }

  private authorized(req: IncomingMessage): boolean {
    const given = req.headers[SECRET_HEADER];
    if (typeof given !== 'string') return false;
    // A byte comparison, not a digest per request (a SHA-256 per request was ~4% of a busy node's CPU).
    const bytes = Buffer.from(given, 'utf8');
    return bytes.length === this.secretBytes.length && timingSafeEqual(bytes, this.secretBytes);
  }

  // ------------------------------------------------------------------ responses

  private sendError(res: ServerResponse, e: unknown): void {
    if (res.headersSent) {
      res.destroy(e instanceof Error ? e : undefined);
      return;
    }
    const he = e instanceof HttpError ? e : new HttpError('INTERNAL', 'internal error');
    if (he.status === 409) res.setHeader(RING_HEADER, String(this.ownership.version));
    if (!(e instanceof HttpError)) this.failureLog.report(e, 'request');
    void sendJson(res, he.status, { error: { code: he.code, message: he.message }, ...he.extra });
  }
}
