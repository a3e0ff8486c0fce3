/**
 * The warm tier's ordered key listing (WarmTier.listOrdered, the KeyOrdering capability): cache nodes store keys by
 * ring position, and each keeps a key-order index of its own (cachenode/src/key-order-index.ts), so a page of a
 * namespace in key order is the merge of one page from every node that may hold keys. Apart from warm-tier.ts,
 * which routes keys to one node each; this fans one query out to all of them.
 */
import type { TierUnavailableError } from '../errors.js';
import { after, mergeOrderedPages, type KeyRange, type OrderedKeysPage, type OrderedKeysQuery } from '../model/key-order.js';
import { validateNamespace } from '../model/keys.js';
import type { RingRouter } from '../ring/view.js';
import { StaleRouteError, type NodeClient } from '../nodes/node-client.js';

/** What the listing needs of the tier: its client, its ring, and its rules for stale rings and lost nodes. */
export interface OrderedListingDeps {
  client: NodeClient;
  ready(): Promise<RingRouter>;
  /** After a 409: the newer ring to list with (WarmTier.recover). */
  recover(e: StaleRouteError, router: RingRouter): Promise<RingRouter>;
  /** After a node could not be reached: a newer ring under which `changed` holds, if any (WarmTier.rerouted). */
  rerouted(e: unknown, router: RingRouter, changed: (r: RingRouter) => boolean): Promise<RingRouter | undefined>;
  unavailable(e: unknown): TierUnavailableError;
}

/**
 * Rounds of one page that may be redone under a newer ring. Each redo follows a ring change met during the round
 * (a migration step: pending, handoff, new owner); a listing that keeps meeting them fails rather than run on.
 */
const MAX_RING_CHANGES = 6;

/**
 * One page of `q` over every node of the ring. Each round asks every node that may hold keys for a page of the
 * same range and merges them (`mergeOrderedPages`: complete up to the smallest last key among the nodes that have
 * more); a round short of the limit while there is more goes on after its last key, so the page fills up (each
 * node answers at most `ORDERED_KEYS_MAX_LIMIT` keys a request).
 *
 * Which nodes: every node the ring lists (joining, leaving, draining, or in a state this build does not know: a
 * node being drained still holds the ranges it has not handed over), except DOWN ones. A DOWN node's ranges serve
 * no reads (warm-down.ts): none of its keys is live in this tier, and the next tier holds them. A node that cannot
 * be reached fails the listing with TierUnavailableError, since leaving it out would miss keys, unless a newer
 * ring no longer lists it (it left) or marks it DOWN.
 *
 * Rings: a node whose ring is newer than ours refuses (STALE_RING): a range may have moved between nodes, and been
 * dropped where it was, after we asked the node it moved to. The round is then redone on every node of the newer
 * ring. Keys already answered by earlier rounds stay: each round is complete for its own part of the range.
 */
export async function listOrderedKeys(deps: OrderedListingDeps, ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
  validateNamespace(ns);
  const limit = Math.max(1, Math.floor(q.limit));
  let router: RingRouter;
  try {
    router = await deps.ready();
  } catch (e) {
    throw deps.unavailable(e);
  }
  let range: KeyRange = {
    ...(q.prefix !== undefined ? { prefix: q.prefix } : {}),
    ...(q.from ? { from: q.from } : {}),
    ...(q.to ? { to: q.to } : {}),
  };
  const keys: string[] = [];
  let changes = 0;
  for (;;) {
    const round = await listRound(deps, router, ns, { ...range, limit: limit - keys.length });
    if ('retry' in round) {
      if (changes++ >= MAX_RING_CHANGES) throw deps.unavailable(round.cause);
      router = round.retry;
      continue;
    }
    keys.push(...round.keys);
    if (!round.more || keys.length >= limit) return { keys, more: round.more };
    range = after(range, round.keys[round.keys.length - 1]!);
  }
}

/** One round: every node's page, merged; or the newer ring to redo it with. */
async function listRound(
  deps: OrderedListingDeps,
  router: RingRouter,
  ns: string,
  q: OrderedKeysQuery,
): Promise<OrderedKeysPage | { retry: RingRouter; cause: unknown }> {
  const nodes = router.doc.nodes.filter((n) => n.state !== 'DOWN');
  const answers = await Promise.allSettled(nodes.map((n) => deps.client.listOrdered(n.url, ns, q, router.version)));
  const pages: OrderedKeysPage[] = [];
  let stale: StaleRouteError | undefined;
  let lost: { url: string; cause: unknown } | undefined;
  answers.forEach((a, i) => {
    if (a.status === 'fulfilled') pages.push(a.value);
    else if (a.reason instanceof StaleRouteError) stale ??= a.reason;
    else lost ??= { url: nodes[i]!.url, cause: a.reason };
  });
  if (stale) {
    const fresh = await deps.recover(stale, router);
    if (fresh.version > router.version) return { retry: fresh, cause: stale };
    throw deps.unavailable(stale);
  }
  if (lost) {
    const url = lost.url;
    // Only a ring under which the node no longer holds anything to list makes it safe to go on without it.
    const gone = (r: RingRouter) => !r.doc.nodes.some((n) => n.url === url && n.state !== 'DOWN');
    const fresh = await deps.rerouted(lost.cause, router, gone);
    if (!fresh) throw deps.unavailable(lost.cause);
    return { retry: fresh, cause: lost.cause };
  }
  return mergeOrderedPages(pages, q.limit);
}
