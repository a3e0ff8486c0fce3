/**
 * How the warm tier's calls reach their cache nodes: the key's owner (and, while its range migrates, the pending
 * target), retried after a stale route (adopting the node's newer ring, bringing a node that is behind up to ours,
 * or re-reading the store) or an unreachable node that a newer ring no longer names, and held back by DOWN nodes
 * (warm-down.ts). Apart from warm-tier.ts, which says what each operation sends; the coalescer
 * (warm-coalescer.ts) routes its batches through the same object.
 */
import { TierFencedError, TierUnavailableError } from '../errors.js';
import { NodeUnavailableError, StaleRouteError, type NodeClient } from '../nodes/node-client.js';
import { leaseOf } from '../ring/document.js';
import { ringHash } from '../ring/hash.js';
import { skipFreshMs } from '../ring/takeover.js';
import type { RingRouter, RingView, Route } from '../ring/view.js';
import { DownFence } from './warm-down.js';
import type { TierName } from './tier.js';

/** Stale-route recoveries per call (see read()). */
export const MAX_STALE_RETRIES = 2;

export interface Routed {
  router: RingRouter;
  route: Route;
}

export interface WarmRoutesDeps {
  /** The tier's name, in its errors. */
  name: TierName;
  ring: RingView;
  client: NodeClient;
  down: DownFence;
}

export class WarmRoutes {
  /** Stale routes met and recovered (tests, stats). */
  staleRetries = 0;

  constructor(private readonly d: WarmRoutesDeps) {}

  async routed(position: string): Promise<Routed> {
    let router: RingRouter;
    try {
      router = await this.d.ring.ready();
    } catch (e) {
      throw this.unavailable(e);
    }
    return { router, route: router.route(position) };
  }

  /**
   * A read from the owner, retried after a stale route (once; twice when the second refusal came from a node
   * that was behind and has just been brought up to date).
   */
  async read<T>(position: string, call: (url: string, ringVersion: number) => Promise<T>): Promise<T | undefined> {
    let { router } = await this.routed(position);
    for (let attempt = 0; ; attempt++) {
      const route = router.route(position);
      if (this.d.down.read(route) === 'miss') return undefined;
      try {
        return await call(route.reader.url, router.version);
      } catch (e) {
        if (attempt >= MAX_STALE_RETRIES) throw this.unavailable(e);
        if (e instanceof StaleRouteError) router = await this.recover(e, router);
        else {
          // An unreachable node may have left the ring: retry only if a newer ring routes elsewhere.
          const fresh = await this.rerouted(e, router, (r) => r.route(position).reader.url !== route.reader.url);
          if (!fresh) throw this.unavailable(e);
          router = fresh;
        }
      }
    }
  }

  /**
   * A write to the owner and, while the range migrates, its pending target. The owner's answer is the outcome;
   * a failed shadow write fails the call (the write is then not acknowledged: the target might miss it). `call`'s
   * `owner` is true for the owner's write. `version`: the version a put writes (see {@link DownFence.write}).
   */
  async write<T>(
    position: string,
    call: (url: string, ringVersion: number, owner: boolean) => Promise<T>,
    version?: number,
  ): Promise<T> {
    let { router } = await this.routed(position);
    for (let attempt = 0; ; attempt++) {
      let route = router.route(position);
      if (route.owner.state === 'DOWN') [router, route] = await this.freshFor(router, position);
      this.checkDown(router, route, version);
      const pending = DownFence.shadowTarget(route);
      const [p, s] = await Promise.allSettled([
        call(route.owner.url, router.version, true),
        pending ? call(pending.url, router.version, false) : Promise.resolve(undefined),
      ]);
      if (p.status === 'rejected') {
        if (attempt >= MAX_STALE_RETRIES) throw this.unavailable(p.reason);
        // The owner refused, so nothing landed there: redo the whole write on the refreshed route. (An unreachable
        // owner may have left the ring: redo it if a newer ring names another owner; the versioned write is
        // harmless if the first attempt landed after all.)
        if (p.reason instanceof StaleRouteError) router = await this.recover(p.reason, router);
        else {
          const fresh = await this.rerouted(p.reason, router, (r) => r.route(position).owner.url !== route.owner.url);
          if (!fresh) throw this.unavailable(p.reason);
          router = fresh;
        }
        continue;
      }
      if (s.status === 'rejected') {
        if (attempt >= MAX_STALE_RETRIES) throw this.unavailable(s.reason);
        // The target refused (typically: it had not heard of the ring that made it the target) or could not be
        // reached. The owner has the write; make sure whoever else must hold it under the refreshed ring does.
        if (s.reason instanceof StaleRouteError) router = await this.recover(s.reason, router);
        else {
          const fresh = await this.rerouted(s.reason, router, (r) => r.route(position).pending?.url !== pending?.url);
          if (!fresh) throw this.unavailable(s.reason);
          router = fresh;
        }
        await this.writeOthers(position, route.owner.url, call, router, attempt + 1, version);
      }
      return p.value;
    }
  }

  /** The write on every node of the key's route except `done` (which already has it), with the remaining retries. */
  async writeOthers<T>(
    position: string,
    done: string,
    call: (url: string, ringVersion: number, owner: boolean) => Promise<T>,
    router: RingRouter,
    attempt: number,
    version?: number,
  ): Promise<void> {
    for (; ; attempt++) {
      let r = router.route(position);
      if (r.owner.state === 'DOWN') [router, r] = await this.freshFor(router, position);
      this.checkDown(router, r, version);
      const others = [r.owner.url, DownFence.shadowTarget(r)?.url].filter((u): u is string => u !== undefined && u !== done);
      const results = await Promise.allSettled(others.map((u) => call(u, router.version, false)));
      const failed = results.find((x): x is PromiseRejectedResult => x.status === 'rejected');
      if (!failed) return;
      if (attempt >= MAX_STALE_RETRIES) throw this.unavailable(failed.reason);
      if (failed.reason instanceof StaleRouteError) router = await this.recover(failed.reason, router);
      else {
        const before = others.join(' ');
        const fresh = await this.rerouted(failed.reason, router, (r) => {
          const x = r.route(position);
          return [x.owner.url, x.pending?.url].filter((u) => u !== undefined && u !== done).join(' ') !== before;
        });
        if (!fresh) throw this.unavailable(failed.reason);
        router = fresh;
      }
    }
  }

  /** Batch writes grouped per node (owners, and pending targets for shadow copies); stale groups fall back to single writes. */
  async writeMany<T>(
    ns: string,
    keys: string[],
    callGroup: (url: string, idx: number[], ringVersion: number) => Promise<T[]>,
    single: (i: number) => Promise<T>,
  ): Promise<T[]> {
    if (keys.length === 0) return [];
    const positions = keys.map((k) => ringHash(ns, k));
    const { router } = await this.routed(positions[0]!);
    const routes = positions.map((p) => router.route(p));
    const out = new Array<T>(keys.length);
    const retry = new Set<number>();
    // A key whose route has a DOWN node, or a node that took it over from one, goes on its own, through write()'s rules.
    const downed = (i: number) => this.d.down.special(router, routes[i]!);
    keys.forEach((_, i) => downed(i) && retry.add(i));
    const primaries = groupBy(
      keys.map((_, i) => i).filter((i) => !downed(i)),
      (i) => routes[i]!.owner.url,
    );
    const shadows = groupBy(
      keys.map((_, i) => i).filter((i) => routes[i]!.pending && !downed(i)),
      (i) => routes[i]!.pending!.url,
    );
    let stale: StaleRouteError | undefined;
    const run = async (url: string, idx: number[], primary: boolean) => {
      try {
        const res = await callGroup(url, idx, router.version);
        if (primary) idx.forEach((i, j) => (out[i] = res[j]!));
      } catch (e) {
        if (!(e instanceof StaleRouteError)) throw this.unavailable(e);
        stale = e;
        idx.forEach((i) => retry.add(i));
      }
    };
    await Promise.all([
      ...[...primaries].map(([u, idx]) => run(u, idx, true)),
      ...[...shadows].map(([u, idx]) => run(u, idx, false)),
    ]);
    if (stale) await this.recover(stale, router);
    if (retry.size > 0) await Promise.all([...retry].map(async (i) => (out[i] = await single(i))));
    return out;
  }

  /**
   * After a node could not be reached: if the ring store (read at most every 250 ms) has a newer ring under which
   * `changed` holds (the node left, or a range moved away from it), that ring; otherwise undefined.
   */
  async rerouted(e: unknown, router: RingRouter, changed: (r: RingRouter) => boolean): Promise<RingRouter | undefined> {
    if (!(e instanceof NodeUnavailableError)) return undefined;
    const fresh = await this.d.ring.refreshThrottled().catch(() => undefined);
    const cur = this.d.ring.current() ?? fresh;
    if (!cur || cur.version <= router.version || !changed(cur)) return undefined;
    this.staleRetries++;
    return cur;
  }

  /**
   * After a 409: adopt the node's newer ring, or bring a node that is behind up to ours, or re-read the store.
   * Returns the router to retry with.
   */
  async recover(e: StaleRouteError, router: RingRouter): Promise<RingRouter> {
    this.staleRetries++;
    if (e.ringVersion > router.version) {
      const doc = e.ring ?? (await this.d.client.getRing(e.url).catch(() => null));
      try {
        if (doc) this.d.ring.adopt(doc);
      } catch {
        /* an invalid document: fall through to the store */
      }
      const cur = this.d.ring.current();
      if (cur && cur.version > router.version) return cur;
    } else if (e.ringVersion < router.version) {
      await this.d.client.pushRing(e.url, router.doc).catch(() => undefined);
      return this.d.ring.current() ?? router;
    }
    try {
      return await this.d.ring.refresh();
    } catch {
      return this.d.ring.current() ?? router;
    }
  }

  /**
   * The router and route to write `position` by when its owner is DOWN. A write skips a DOWN owner only on a ring
   * read from the store within skipFreshMs (ring/takeover.ts), so that it cannot write around a node that has
   * meanwhile been replaced: an older read is refreshed first, and a store that cannot be read fails the write.
   */
  private async freshFor(router: RingRouter, position: string): Promise<[RingRouter, Route]> {
    if (this.d.ring.age() > skipFreshMs(leaseOf(router.doc))) {
      try {
        const fresh = await this.d.ring.refresh();
        if (fresh.version >= router.version) router = fresh;
      } catch (e) {
        throw this.unavailable(e);
      }
    }
    return [router, router.route(position)];
  }

  /** Throws when a write must not go ahead on `route` because of a DOWN node (see {@link DownFence.write}). */
  checkDown(router: RingRouter, route: Route, version?: number): void {
    const verdict = this.d.down.write(router, route, version);
    if (verdict === 'skip') {
      if (route.owner.state === 'DOWN') {
        // Ended within a lease of the ring read it was decided on (ring/takeover.ts), or not acknowledged.
        const until = performance.now() - this.d.ring.age() + leaseOf(router.doc);
        throw new TierFencedError(this.d.name, route.owner.id, until);
      }
      const until = this.d.down.takenOverUntil(router, route, version)!;
      throw new TierFencedError(this.d.name, route.owner.id, until, true);
    }
    if (verdict === 'wait') {
      const node = route.owner.state === 'DOWN' ? route.owner : route.pending!;
      throw new TierUnavailableError(
        this.d.name,
        new Error(`cache node '${node.id}' is DOWN; writes skip it once its lease has run out`),
      );
    }
  }

  unavailable(e: unknown): TierUnavailableError {
    return e instanceof TierUnavailableError ? e : new TierUnavailableError(this.d.name, e);
  }
}

export function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const it of items) {
    const k = keyOf(it);
    const g = m.get(k);
    if (g) g.push(it);
    else m.set(k, [it]);
  }
  return m;
}
