// The cache node's route table: which handler answers a request (method and path), and the op it is counted as.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EntryRoutes } from './entry-routes.js';
import { HttpError } from './http-error.js';
import type { KeyOrderRoutes } from './key-order-routes.js';
import type { NodeStateRoutes } from './node-state-routes.js';
import type { RangeRoutes } from './range-routes.js';
import type { Op } from './stats.js';

/** A request on its way: the op its latency is recorded under (none for uncounted routes), and its handler's run. */
export interface Routed {
  op: Op | undefined;
  done: Promise<void>;
}

export class RouteTable {
  constructor(
    private readonly entries: EntryRoutes,
    private readonly ranges: RangeRoutes,
    private readonly state: NodeStateRoutes,
    private readonly keyOrder: KeyOrderRoutes,
  ) {}

  /** Starts the handler of `method path`; throws the 404 or 405 HttpError when there is none. */
  dispatch(method: string, path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Routed {
    if (path.startsWith('/v1/kv/')) {
      const op: Op | undefined =
        method === 'GET'
          ? 'get'
          : method === 'HEAD'
            ? 'head'
            : method === 'PUT'
              ? 'put'
              : method === 'DELETE'
                ? 'delete'
                : undefined;
      if (!op) throw new HttpError('METHOD_NOT_ALLOWED', `${method} is not allowed here`);
      return { op, done: this.entries.keyRequest(op, path, query, req, res) };
    }
    const route = `${method} ${path}`;
    switch (route) {
      case 'POST /v1/batch/get':
        return { op: 'batchGet', done: this.entries.batchGet(req, res) };
      case 'POST /v1/batch/put':
        return { op: 'batchPut', done: this.entries.batchPut(req, res) };
      case 'POST /v1/batch/delete':
        return { op: 'batchDelete', done: this.entries.batchDelete(req, res) };
      case 'POST /v1/batch/pin':
        return { op: undefined, done: this.entries.batchPin(req, res) };
      case 'GET /v1/range/export':
        return { op: 'export', done: this.ranges.exportRange(query, req, res) };
      case 'POST /v1/range/import':
        return { op: 'import', done: this.ranges.importRange(req, res) };
      case 'POST /v1/range/delete':
        return { op: 'rangeDelete', done: this.ranges.deleteRange(req, res) };
      case 'GET /v1/range/stats':
        return { op: undefined, done: this.ranges.rangeStats(query, res) };
      case 'GET /v1/keys-ordered':
        return { op: undefined, done: this.keyOrder.listOrdered(query, req, res) };
      case 'GET /v1/ownership':
        return { op: undefined, done: this.state.ownershipView(res) };
      case 'GET /v1/ring':
        return { op: undefined, done: this.state.ring(res) };
      case 'PUT /v1/ring':
        return { op: undefined, done: this.state.installRing(req, res) };
      case 'GET /v1/victims':
        return { op: undefined, done: this.state.victims(query, res) };
      case 'GET /healthz':
        return { op: undefined, done: this.state.health(res) };
      case 'GET /stats':
        return { op: undefined, done: this.state.stats(res) };
      default:
        throw new HttpError('ROUTE_NOT_FOUND', `no route ${route}`);
    }
  }
}
