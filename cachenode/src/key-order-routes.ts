// The cache node's key listing route: a page of the keys it holds in a namespace, in key order.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseOrderedKeysParams } from '../../core/nodes/wire.js';
import { HttpError, validated } from './http-error.js';
import { sendJson } from './http-reply.js';
import { ringVersionOf, type RouteContext } from './route-context.js';

/** `GET /v1/keys-ordered` (core/nodes/wire.ts `ORDERED_KEYS_PATH`). */
export class KeyOrderRoutes {
  constructor(private readonly ctx: RouteContext) {}

  /**
   * Answers `{ keys, more }` (model/key-order.ts OrderedKeysPage) for the query: every key the node holds in the
   * namespace, whatever range it owns, since a copy left after a range moved away is harmless (the caller reads
   * each key through the ring) and a key it serves must not be missed.
   *
   * Refused with 409 STALE_RING (and the node's ring) when the caller's ring is older than the node's. A range
   * moves away from a node, and is then dropped there, only under a newer ring than the one that placed it: a
   * caller whose ring predates that change may have asked the range's new holder before the keys arrived there,
   * so it must take the newer ring and ask every node again. A node behind the caller is answered: it holds every
   * key it held under its older ring.
   */
  async listOrdered(query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { ns, query: q } = validated(() => parseOrderedKeysParams(query));
    const caller = ringVersionOf(req);
    const own = this.ctx.ownership.version;
    if (caller < own) {
      this.ctx.stats.refused++;
      throw new HttpError('STALE_RING', `this node's ring is version ${own}; the listing used version ${caller}`, {
        ringVersion: own,
        ring: this.ctx.ownership.doc ?? null,
      });
    }
    return sendJson(res, 200, this.ctx.store.listOrdered(ns, q));
  }
}
