import { ValidationError } from '../errors.js';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { isExpired, isLive } from '../model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../model/key-order.js';
import { validateNamespace } from '../model/keys.js';
import { isRingPosition, ringHash, RING_MIN } from '../ring/hash.js';
import type { RingRouter, RingView } from '../ring/view.js';
import { NodeClient, StaleRouteError, type ExportTrailer, type NodeClientOptions } from '../nodes/node-client.js';
import { WarmCoalescer } from './warm-coalescer.js';
import { groupBy, MAX_STALE_RETRIES, WarmRoutes } from './warm-routes.js';
import { DownFence } from './warm-down.js';
import { listOrderedKeys } from './warm-ordered-keys.js';
import type {
  CreatesIfAbsent,
  KeyOrdering,
  Pinning,
  PutOptions,
  ReadOptions,
  ScanOptions,
  ScanPage,
  Scanning,
  Tier,
  TierName,
  TierStats,
} from './tier.js';

export interface WarmTierOptions {
  /** The cached ring (refreshed from its store, and from the ring documents nodes send back with a 409). */
  ring: RingView;
  /** Shared secret of the fleet (ignored when `client` is given). */
  secret?: string;
  /** A client to share (e.g. with the migration steps); not closed by close(). */
  client?: NodeClient;
  /** Per-call bound (connect, headers, each body gap). @default 2000 */
  timeoutMs?: number;
  /** @default 16 */
  connectionsPerNode?: number;
  /** @default 'warm' */
  name?: TierName;
  /** Close `ring` (its refresh timer) with the tier. @default false */
  ownsRing?: boolean;
  /**
   * Coalesce concurrent single-key gets and puts bound for the same node into one batch request per event-loop
   * turn (like a Redis client's auto-pipelining). @default true
   */
  coalesce?: boolean;
  /**
   * Largest coalesced batch, in value bytes: sent for puts, expected back for gets (from the mean size of the
   * values the node returned lately), so a batch of large values is split and several are in flight while the
   * client reads one. @default 1 MiB
   */
  coalesceMaxBytes?: number;
  /**
   * Largest coalesced batch, in operations. Smaller batches keep several requests in flight, so the node works
   * on one while the client handles another. @default 32
   */
  coalesceMaxOps?: number;
  /**
   * Coalesced requests in flight per destination node (and operation); further batches for it wait, growing, until
   * one comes back (sent at once when they fill up). Under load, batches grow to what a node can take, so a
   * node's per-request work is spread over more operations; under light load nothing waits. @default 4
   */
  coalesceMaxInFlight?: number;
}

/**
 * The warm tier: a fleet of cache nodes (cachenode daemons on EC2 with EBS, or local processes), addressed
 * through the ring.
 *
 * - Routing: a key goes to the owner of its range. While the range migrates, writes (puts, tombstones, deletes)
 *   also go to the pending target (shadow writes, paper 004) and are acknowledged only when both took them, so
 *   the target misses no write made after its stream started. Reads stay on the owner until the handoff
 *   phase moves them to the (complete) target.
 * - Stale routes: a node answers 409 when it does not own the range or our ring is older than the range's last
 *   change. The tier adopts the ring document the node sends back (or pushes its own newer one to a node that is
 *   behind, or re-reads the store) and retries once.
 * - Batches are grouped per node, one request per node, in parallel. Concurrent single gets and puts to the same
 *   node are coalesced into batch requests once per event-loop turn (see `coalesce`, warm-coalescer.ts).
 * - Connections are pooled per node (node:http keep-alive agents),
 *   every call is bounded by a timeout, and any failure to reach a node is a TierUnavailableError, so the
 *   coordinator falls through to the next tier.
 * - DOWN nodes (marked by the health check): their ranges read as misses, and writes skip them once fenced with a
 *   TierFencedError, which the coordinator's writer accepts when another durable tier took the value (see
 *   warm-down.ts).
 */
export class WarmTier implements Tier, Scanning, Pinning, KeyOrdering, CreatesIfAbsent {
  readonly name: TierName;
  readonly kind = 'cachenode';
  readonly createsIfAbsent = true;
  readonly client: NodeClient;
  private readonly ring: RingView;
  private readonly ownsClient: boolean;
  private readonly ownsRing: boolean;
  private readonly coalesce: boolean;
  private readonly coalesceMaxBytes: number;
  private readonly coalescer: WarmCoalescer;
  private readonly down = new DownFence();
  /** How each call reaches its nodes (warm-routes.ts). */
  private readonly routes: WarmRoutes;

  constructor(opts: WarmTierOptions) {
    this.name = opts.name ?? 'warm';
    this.ownsRing = opts.ownsRing ?? false;
    this.ring = opts.ring;
    this.ownsClient = !opts.client;
    if (!opts.client && !opts.secret) throw new Error('WarmTier needs the fleet secret (or a NodeClient)');
    const clientOpts: NodeClientOptions = {
      secret: opts.secret ?? '',
      timeoutMs: opts.timeoutMs ?? 2000,
      connectionsPerNode: opts.connectionsPerNode ?? 16,
    };
    this.client = opts.client ?? new NodeClient(clientOpts);
    this.coalesce = opts.coalesce ?? true;
    this.coalesceMaxBytes = opts.coalesceMaxBytes ?? 1024 * 1024;
    this.routes = new WarmRoutes({ name: this.name, ring: this.ring, client: this.client, down: this.down });
    // The coalescer routes its batches through the same WarmRoutes as the tier's own calls (same retries, counters).
    this.coalescer = new WarmCoalescer(
      {
        client: this.client,
        down: this.down,
        read: (position, call) => this.routes.read(position, call),
        write: (position, call, version) => this.routes.write(position, call, version),
        writeOthers: (position, done, call, router, attempt, version) =>
          this.routes.writeOthers(position, done, call, router, attempt, version),
        recover: (e, router) => this.routes.recover(e, router),
        rerouted: (e, router, changed) => this.routes.rerouted(e, router, changed),
        unavailable: (e) => this.routes.unavailable(e),
      },
      {
        maxBytes: this.coalesceMaxBytes,
        maxOps: opts.coalesceMaxOps ?? 32,
        maxInFlight: Math.max(1, opts.coalesceMaxInFlight ?? 4),
        maxStaleRetries: MAX_STALE_RETRIES,
      },
    );
  }

  /** Stale routes met and recovered (tests, stats). */
  get staleRetries(): number {
    return this.routes.staleRetries;
  }

  /** Coalesced requests sent and the single operations they carried (stats). */
  get coalesced(): { requests: number; operations: number } {
    return this.coalescer.counts;
  }

  // ------------------------------------------------------------------ single keys

  async get(ns: string, key: string, opts?: ReadOptions): Promise<Entry | undefined> {
    const position = ringHash(ns, key);
    if (opts?.peek) return this.routes.read(position, (url, v) => this.client.get(url, ns, key, v, true));
    if (this.coalesce) {
      const router = this.ring.current();
      if (router) return this.coalescer.enqueue<Entry | undefined>('get', router, position, ns, key, undefined);
    }
    return this.routes.read(position, (url, v) => this.client.get(url, ns, key, v));
  }

  async head(ns: string, key: string): Promise<EntryHeader | undefined> {
    return this.routes.read(ringHash(ns, key), (url, v) => this.client.head(url, ns, key, v));
  }

  async has(ns: string, key: string): Promise<boolean> {
    const h = await this.head(ns, key);
    return h !== undefined && isLive(h);
  }

  async put(ns: string, key: string, entry: Entry, opts?: PutOptions): Promise<WriteOutcome> {
    const position = ringHash(ns, key);
    if (opts?.ifAbsent) return this.create(position, ns, key, entry);
    if (this.coalesce && entry.value.length < this.coalesceMaxBytes) {
      const router = this.ring.current();
      if (router) return this.coalescer.enqueue<WriteOutcome>('put', router, position, ns, key, entry);
    }
    return this.routes.write(position, (url, v) => this.client.put(url, ns, key, entry, v), entry.header.version);
  }

  /**
   * An exclusive create (PutOptions.ifAbsent), decided by the key's owner alone. A migration's pending target gets
   * the plain versioned copy: it must follow the owner's decision, and a record it imported could otherwise refuse
   * the value the owner took, leaving it behind the owner once it takes over. Never coalesced (a batch put carries no
   * condition).
   */
  private create(position: string, ns: string, key: string, entry: Entry): Promise<WriteOutcome> {
    const version = entry.header.version;
    let tries = 0;
    return this.routes.write(
      position,
      async (url, ringVersion, owner) => {
        const o = await this.client.put(url, ns, key, entry, ringVersion, owner);
        // A retry of a create whose first try landed (its answer lost on the way) finds its own version there.
        if (owner && tries++ > 0 && !o.applied && o.current === version) return { applied: true, current: version };
        return o;
      },
      version,
    );
  }

  async delete(ns: string, key: string, version?: number): Promise<boolean> {
    return this.routes.write(ringHash(ns, key), (url, v) => this.client.delete(url, ns, key, version, v));
  }

  // ------------------------------------------------------------------ batches

  async getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
    if (keys.length === 0) return [];
    const positions = keys.map((k) => ringHash(ns, k));
    const out = new Array<Entry | undefined>(keys.length);
    const { router } = await this.routes.routed(positions[0]!);
    const groups = groupBy(
      positions.map((_, i) => i).filter((i) => this.down.read(router.route(positions[i]!)) === 'serve'),
      (i) => router.route(positions[i]!).reader.url,
    );
    await Promise.all(
      [...groups].map(async ([url, idx]) => {
        try {
          const got = await this.client.getMany(
            url,
            ns,
            idx.map((i) => keys[i]!),
            router.version,
          );
          idx.forEach((i, j) => (out[i] = got[j]));
        } catch (e) {
          if (!(e instanceof StaleRouteError)) throw this.routes.unavailable(e);
          // Re-route this group's keys one by one with the refreshed ring (each retried once more on its own).
          await this.routes.recover(e, router);
          await Promise.all(idx.map(async (i) => (out[i] = await this.get(ns, keys[i]!))));
        }
      }),
    );
    return out;
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    return this.routes.writeMany(
      ns,
      items.map((it) => it.key),
      (url, idx, v) =>
        this.client.putMany(
          url,
          ns,
          idx.map((i) => items[i]!),
          v,
        ),
      (i) => this.put(ns, items[i]!.key, items[i]!.entry),
    );
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    return this.routes.writeMany(
      ns,
      keys,
      (url, idx, v) =>
        this.client.deleteMany(
          url,
          ns,
          idx.map((i) => keys[i]!),
          v,
        ),
      (i) => this.delete(ns, keys[i]!),
    );
  }

  // ------------------------------------------------------------------ enumeration and pinning

  /**
   * Enumerates `ns` through the nodes' range exports, headers only, range by range in ring order, each range from
   * the node that serves its reads. Nodes store keys in ring-hash order, so neither the namespace nor a key prefix
   * narrows an export: a page examines up to `limit` entries of any namespace and keeps the matching ones (a page
   * may well be empty before the end). The cursor is a place in the hash space, `p:<position>` (from there on) or
   * `k:<storage key, hex>` (after that key), so it stays valid across ring changes. Each item carries the access
   * facts of the node that served it (its reads there: reads served by hot or a near cache never reach it); a node
   * that predates them sends none, and its items have no `access` (unknown).
   */
  async scan(ns: string, opts: ScanOptions): Promise<ScanPage> {
    validateNamespace(ns);
    const prefix = opts.prefix ?? '';
    let cur = parseWarmCursor(opts.cursor);
    let router: RingRouter;
    try {
      router = await this.ring.ready();
    } catch (e) {
      throw this.routes.unavailable(e);
    }
    const items: ScanPage['items'] = [];
    let budget = Math.max(1, Math.floor(opts.limit));
    while (budget > 0) {
      const route = router.route(cur.position);
      if (this.down.read(route) === 'miss') {
        // A DOWN node's range holds nothing it may serve (the next tier holds every acknowledged write).
        if (route.span.end === null) return { items, cursor: null };
        cur = { position: route.span.end };
        continue;
      }
      const after = cur.after ?? (cur.position > route.span.start ? cur.position : null);
      let trailer: ExportTrailer;
      try {
        const records = this.client.exportRange(route.reader.url, {
          start: route.span.start,
          end: route.span.end,
          after,
          limit: budget,
          headersOnly: true,
          access: true,
        });
        for (let r = await records.next(); ; r = await records.next()) {
          if (r.done) {
            trailer = r.value;
            break;
          }
          budget--;
          const { header } = r.value.entry;
          if (r.value.ns !== ns || !r.value.key.startsWith(prefix) || isExpired(header)) continue;
          const { access } = r.value;
          items.push({ key: r.value.key, header, ...(access ? { access } : {}) });
        }
      } catch (e) {
        throw this.routes.unavailable(e);
      }
      if (!trailer.done && trailer.next) cur = { position: trailer.next.slice(0, 16), after: trailer.next };
      else if (route.span.end === null) return { items, cursor: null };
      else cur = { position: route.span.end };
    }
    return { items, cursor: cur.after ? `k:${cur.after}` : `p:${cur.position}` };
  }

  /** A page of `ns` in key order, merged from every node of the ring (see warm-ordered-keys.ts). */
  listOrdered(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
    const deps = {
      client: this.client,
      ready: () => this.ring.ready(),
      recover: (e: StaleRouteError, r: RingRouter) => this.routes.recover(e, r),
      rerouted: (e: unknown, r: RingRouter, changed: (x: RingRouter) => boolean) => this.routes.rerouted(e, r, changed),
      unavailable: (e: unknown) => this.routes.unavailable(e),
    };
    return listOrderedKeys(deps, ns, q);
  }

  /** Pins or unpins the entry at exactly `version` on its owner (and, while the range migrates, its target). */
  async setPinned(ns: string, key: string, version: number, pinned: boolean): Promise<boolean> {
    return this.routes.write(ringHash(ns, key), (url, v) =>
      this.client.setPinned(url, ns, [key], [version], pinned, v).then((r) => r[0] === true),
    );
  }

  // ------------------------------------------------------------------ stats and lifecycle

  async stats(): Promise<TierStats> {
    const router = await this.ring.ready().catch((e: unknown) => {
      throw this.routes.unavailable(e);
    });
    const nodes = await Promise.all(
      router.doc.nodes.map(async (n) => {
        try {
          const s = await this.client.stats(n.url);
          return {
            id: n.id,
            state: n.state,
            ok: true,
            keys: s.keys,
            bytes: s.bytes,
            capacityBytes: s.capacityBytes,
            fill: s.fill,
          };
        } catch {
          return { id: n.id, state: n.state, ok: false };
        }
      }),
    );
    const sum = (k: 'keys' | 'bytes' | 'capacityBytes') =>
      nodes.reduce((a, n) => a + (((n as Record<string, unknown>)[k] as number | undefined) ?? 0), 0);
    return {
      name: this.name,
      kind: this.kind,
      entries: sum('keys'),
      bytes: sum('bytes'),
      capacityBytes: sum('capacityBytes'),
      ringVersion: router.version,
      ranges: router.doc.ranges.length,
      nodes,
      staleRetries: this.staleRetries,
      coalesced: { ...this.coalesced },
    };
  }

  /** Healthy when the ring is known and every node that owns a range answers. */
  async ping(): Promise<void> {
    let router: RingRouter;
    try {
      router = await this.ring.ready();
    } catch (e) {
      throw this.routes.unavailable(e);
    }
    const owners = new Set(router.doc.ranges.map((r) => r.owner));
    await Promise.all(
      router.doc.nodes
        .filter((n) => owners.has(n.id) && n.state !== 'DOWN')
        .map((n) =>
          this.client.health(n.url).catch((e: unknown) => {
            throw this.routes.unavailable(e);
          }),
        ),
    );
  }

  async close(): Promise<void> {
    if (this.ownsRing) this.ring.close();
    if (this.ownsClient) await this.client.close();
  }
}

/** A warm scan cursor: `p:<position>` or `k:<storage key hex>` (see {@link WarmTier.scan}); none = the start. */
function parseWarmCursor(cursor: string | null | undefined): { position: string; after?: string } {
  if (!cursor) return { position: RING_MIN };
  const m = /^(p|k):([0-9a-f]+)$/.exec(cursor);
  const position = m?.[2]?.slice(0, 16);
  if (!m || !isRingPosition(position) || (m[1] === 'p' && m[2]!.length !== 16) || m[2]!.length % 2 !== 0) {
    throw new ValidationError('cursor', `not a cursor of the warm tier: '${cursor.slice(0, 40)}'`);
  }
  return m[1] === 'p' ? { position } : { position, after: m[2]! };
}
