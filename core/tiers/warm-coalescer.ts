import type { Entry, WriteOutcome } from '../model/entry.js';
import type { RingRouter, Route } from '../ring/view.js';
import { StaleRouteError, type NodeClient } from '../nodes/node-client.js';
import type { TierUnavailableError } from '../errors.js';
import type { DownFence } from './warm-down.js';

/**
 * The warm tier's coalescing of concurrent single-key gets and puts (like a Redis client's auto-pipelining): those
 * bound for the same node in one event-loop turn go as one batch request, with a bounded number of requests in
 * flight per node, so that under load a node's per-request work is spread over more operations. A batch a node
 * refuses (stale route) or cannot take (unreachable, and a newer ring routes elsewhere) is regrouped on the
 * refreshed ring rather than split into single requests. Routing, fencing and recovery stay the tier's
 * ({@link CoalescerHost}); this file only groups, sends and regroups.
 */

/** What the coalescer uses of the warm tier: its node client and its routed, fenced single-key paths. */
export interface CoalescerHost {
  readonly client: NodeClient;
  readonly down: DownFence;
  read<T>(position: string, call: (url: string, ringVersion: number) => Promise<T>): Promise<T | undefined>;
  /** `version`: the version the put writes (warm-down.ts, DownFence.write). */
  write<T>(position: string, call: (url: string, ringVersion: number) => Promise<T>, version?: number): Promise<T>;
  writeOthers<T>(
    position: string,
    done: string,
    call: (url: string, ringVersion: number) => Promise<T>,
    router: RingRouter,
    attempt: number,
    version?: number,
  ): Promise<void>;
  recover(e: StaleRouteError, router: RingRouter): Promise<RingRouter>;
  rerouted(e: unknown, router: RingRouter, changed: (r: RingRouter) => boolean): Promise<RingRouter | undefined>;
  unavailable(e: unknown): TierUnavailableError;
}

export interface CoalescerLimits {
  /** Largest batch in value bytes (sent for puts, expected back for gets). */
  maxBytes: number;
  /** Largest batch in operations. */
  maxOps: number;
  /** Requests in flight per destination node and operation. */
  maxInFlight: number;
  /** Stale-route recoveries an operation may go through. */
  maxStaleRetries: number;
}

interface Waiting<T> {
  position: string;
  key: string;
  entry?: Entry;
  /** Stale-route recoveries this operation went through. */
  attempt: number;
  resolve(v: T): void;
  reject(e: unknown): void;
}

interface Batch<T> {
  op: 'get' | 'put';
  /** Where it goes (reader, or owner and pending target): requests in flight are counted per destination. */
  dest: string;
  router: RingRouter;
  route: Route;
  ns: string;
  items: Waiting<T>[];
  bytes: number;
}

export class WarmCoalescer {
  /** Coalesced requests sent and the single operations they carried (stats). */
  readonly counts = { requests: 0, operations: 0 };
  private readonly batches = new Map<string, Batch<unknown>>();
  /** Coalesced requests in flight per batch destination. */
  private readonly inFlight = new Map<string, number>();
  private flushScheduled = false;
  /** Per node (reader URL): moving mean of the value size of recent gets, to size get batches. */
  private readonly getBytes = new Map<string, number>();

  constructor(
    private readonly host: CoalescerHost,
    private readonly limits: CoalescerLimits,
  ) {}

  /**
   * Queues a single get or put for the next flush (end of this event-loop turn). Operations with the same
   * route (ring version, reader or owner and pending target, namespace) share a batch request. A batch whose
   * destination has `maxInFlight` requests out keeps collecting until one of them returns.
   */
  enqueue<T>(
    op: 'get' | 'put',
    router: RingRouter,
    position: string,
    ns: string,
    key: string,
    entry: Entry | undefined,
    attempt = 0,
  ): Promise<T> {
    const route = router.route(position);
    if (op === 'get' && this.host.down.read(route) === 'miss') return Promise.resolve(undefined as T);
    if (op === 'put' && this.host.down.special(router, route)) {
      const put = (url: string, v: number) => this.host.client.put(url, ns, key, entry!, v);
      return this.host.write(position, put, entry!.header.version) as Promise<T>;
    }
    const dest = op === 'get' ? route.reader.url : `${route.owner.url} ${route.pending?.url ?? ''}`;
    const flightKey = `${op} ${dest}`;
    const id = `${router.version} ${flightKey} ${ns}`;
    return new Promise<T>((resolve, reject) => {
      let b = this.batches.get(id) as Batch<T> | undefined;
      const size = entry ? entry.value.length : (this.getBytes.get(route.reader.url) ?? 0);
      if (b && (b.bytes + size > this.limits.maxBytes || b.items.length >= this.limits.maxOps)) {
        this.batches.delete(id);
        this.sendBatch(b);
        b = undefined;
      }
      if (!b) {
        b = { op, dest: flightKey, router, route, ns, items: [], bytes: 0 };
        this.batches.set(id, b as Batch<unknown>);
      }
      b.items.push({ position, key, ...(entry ? { entry } : {}), attempt, resolve, reject });
      b.bytes += size;
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  /** Sends every queued batch whose destination has room for another request in flight. */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    for (const [id, b] of this.batches) {
      if ((this.inFlight.get(b.dest) ?? 0) >= this.limits.maxInFlight) continue;
      this.batches.delete(id);
      this.sendBatch(b);
    }
  };

  private sendBatch(b: Batch<unknown>): void {
    this.inFlight.set(b.dest, (this.inFlight.get(b.dest) ?? 0) + 1);
    const p = b.op === 'get' ? this.sendGets(b as Batch<Entry | undefined>) : this.sendPuts(b as Batch<WriteOutcome>);
    p.catch((e: unknown) => {
      for (const it of b.items) it.reject(this.host.unavailable(e));
    }).finally(() => {
      const n = (this.inFlight.get(b.dest) ?? 1) - 1;
      if (n > 0) this.inFlight.set(b.dest, n);
      else this.inFlight.delete(b.dest);
      // Batches held back for this destination go now (at the end of this turn, with what else joins them).
      if (this.batches.size > 0 && !this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private async sendGets(b: Batch<Entry | undefined>): Promise<void> {
    const { ns, items } = b;
    if (items.length === 1) {
      const it = items[0]!;
      await this.host
        .read(it.position, (url, v) => this.host.client.get(url, ns, it.key, v))
        .then((e) => {
          this.learnGetBytes(b.route.reader.url, [e]);
          it.resolve(e);
        }, it.reject);
      return;
    }
    this.counts.requests++;
    this.counts.operations += items.length;
    let got: (Entry | undefined)[];
    try {
      got = await this.host.client.getMany(
        b.route.reader.url,
        ns,
        items.map((it) => it.key),
        b.router.version,
      );
    } catch (e) {
      // Regroup on the refreshed ring: after a ring change whole batches bounce, and they should not come back
      // as a burst of single requests.
      let router: RingRouter | undefined;
      if (e instanceof StaleRouteError) router = await this.host.recover(e, b.router);
      else
        router = await this.host.rerouted(e, b.router, (r) =>
          items.some((it) => r.route(it.position).reader.url !== b.route.reader.url),
        );
      if (!router) throw e;
      for (const it of items) {
        if (it.attempt >= this.limits.maxStaleRetries) it.reject(this.host.unavailable(e));
        else
          this.enqueue<Entry | undefined>('get', router, it.position, ns, it.key, undefined, it.attempt + 1).then(
            it.resolve,
            it.reject,
          );
      }
      return;
    }
    this.learnGetBytes(b.route.reader.url, got);
    items.forEach((it, i) => it.resolve(got[i]));
  }

  /** Updates the node's moving mean value size with a batch's answers (misses count as empty). */
  private learnGetBytes(url: string, got: (Entry | undefined)[]): void {
    let sum = 0;
    for (const e of got) sum += e?.value.length ?? 0;
    const mean = sum / got.length;
    const prev = this.getBytes.get(url);
    this.getBytes.set(url, prev === undefined ? mean : prev + (mean - prev) * Math.min(1, got.length / 64));
  }

  private async sendPuts(b: Batch<WriteOutcome>): Promise<void> {
    const { ns, items, route } = b;
    const single = (it: Waiting<WriteOutcome>) => (url: string, v: number) => this.host.client.put(url, ns, it.key, it.entry!, v);
    if (items.length === 1) {
      const it = items[0]!;
      await this.host.write(it.position, single(it), it.entry!.header.version).then(it.resolve, it.reject);
      return;
    }
    this.counts.requests++;
    this.counts.operations += items.length;
    const list = items.map((it) => ({ key: it.key, entry: it.entry! }));
    const [p, s] = await Promise.allSettled([
      this.host.client.putMany(route.owner.url, ns, list, b.router.version),
      route.pending ? this.host.client.putMany(route.pending.url, ns, list, b.router.version) : Promise.resolve(undefined),
    ]);
    if (p.status === 'rejected') {
      // The owner refused the batch (or could not be reached, and a newer ring names other owners): regroup.
      let router: RingRouter | undefined;
      if (p.reason instanceof StaleRouteError) router = await this.host.recover(p.reason, b.router);
      else
        router = await this.host.rerouted(p.reason, b.router, (r) =>
          items.some((it) => r.route(it.position).owner.url !== route.owner.url),
        );
      if (!router) throw p.reason;
      for (const it of items) {
        if (it.attempt >= this.limits.maxStaleRetries) it.reject(this.host.unavailable(p.reason));
        else
          this.enqueue<WriteOutcome>('put', router, it.position, ns, it.key, it.entry, it.attempt + 1).then(
            it.resolve,
            it.reject,
          );
      }
      return;
    }
    if (s.status === 'rejected') {
      if (!(s.reason instanceof StaleRouteError)) throw s.reason;
      const router = await this.host.recover(s.reason, b.router);
      await Promise.all(
        items.map((it, i) =>
          this.host
            .writeOthers(it.position, route.owner.url, single(it), router, 1, it.entry!.header.version)
            .then(() => it.resolve(p.value[i]!), it.reject),
        ),
      );
      return;
    }
    items.forEach((it, i) => it.resolve(p.value[i]!));
  }
}
