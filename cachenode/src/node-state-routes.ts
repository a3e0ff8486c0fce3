// The cache node's state routes: its ring (read and install), ownership view, eviction victims, health and stats.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from './http-error.js';
import { sendJson } from './http-reply.js';
import { JSON_LIMIT, readBody } from './request-body.js';
import type { RouteContext } from './route-context.js';

/** Requests about the node itself rather than its keys: ring, ownership, victims, health and statistics. */
export class NodeStateRoutes {
  constructor(
    private readonly ctx: RouteContext,
    /** The node's health: anything but `ok` (shutting down, volume lost) answers 503. */
    private readonly status: () => 'ok' | 'draining' | 'volume-lost',
    /** What GET /stats answers. */
    private readonly statsBody: () => Record<string, unknown>,
    /** The node's protocol version, the oldest it accepts, and its build (core/nodes/protocol.ts). */
    private readonly identity: { protocol: number; minProtocol: number; build: string },
  ) {}

  /** GET /v1/ownership: the ranges the node owns and receives. */
  ownershipView(res: ServerResponse): Promise<void> {
    return sendJson(res, 200, { nodeId: this.ctx.nodeId, ringVersion: this.ctx.ownership.version, ...this.ctx.ownership.view() });
  }

  /** GET /v1/ring: the node's ring document (404 when it has none). */
  ring(res: ServerResponse): Promise<void> {
    const doc = this.ctx.ownership.doc;
    return sendJson(res, doc ? 200 : 404, doc ?? { error: { code: 'NO_RING', message: 'this node has no ring yet' } });
  }

  async installRing(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse((await readBody(req, JSON_LIMIT)).toString('utf8'));
    } catch {
      throw new HttpError('MALFORMED_JSON', 'body is not JSON');
    }
    let installed: boolean;
    try {
      installed = await this.ctx.ownership.install(body);
    } catch (e) {
      throw new HttpError('VALIDATION_FAILED', e instanceof Error ? e.message : 'invalid ring document');
    }
    // Writes accepted under the previous ring are durable before anyone acts on the new one.
    await this.ctx.store.settle();
    return sendJson(res, 200, { installed, version: this.ctx.ownership.version });
  }

  async victims(query: URLSearchParams, res: ServerResponse): Promise<void> {
    const limit = Math.min(10_000, Math.max(1, Number(query.get('limit') ?? 100) || 100));
    // Expired entries are found by a scan of LMDB: journaled writes waiting to be applied are applied first.
    await this.ctx.store.settle();
    const s = this.ctx.store.stats();
    return sendJson(res, 200, { ...s, victims: this.ctx.store.victims(limit) });
  }

  /** GET /healthz: ok, or 503 while draining or once the volume is lost; with the node's protocol and build. */
  health(res: ServerResponse): Promise<void> {
    const status = this.status();
    const body = { status, nodeId: this.ctx.nodeId, ringVersion: this.ctx.ownership.version, ...this.identity };
    return sendJson(res, status === 'ok' ? 200 : 503, body);
  }

  /** GET /stats. */
  stats(res: ServerResponse): Promise<void> {
    return sendJson(res, 200, this.statsBody());
  }
}
