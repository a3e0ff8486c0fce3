// What the cache node's route handlers share: its identity, store, ring ownership, counters, and the ownership rule.
import type { IncomingMessage } from 'node:http';
import { RING_HEADER } from '../../core/nodes/wire.js';
import type { NodeConfig } from './config.js';
import { HttpError } from './http-error.js';
import type { Ownership, Refusal, Role } from './ownership.js';
import type { NodeStats } from './stats.js';
import type { NodeStore } from './store.js';

export class RouteContext {
  constructor(
    readonly nodeId: string,
    readonly config: NodeConfig,
    readonly store: NodeStore,
    readonly ownership: Ownership,
    readonly stats: NodeStats,
  ) {}

  /** Applies the ownership rule; throws the refusal (409, or 503 while the node is fenced). */
  authorize(position: string, clientVersion: number, write: boolean): Role {
    const r = this.ownership.check(position, clientVersion, write);
    if (typeof r === 'string') return r;
    this.stats.refused++;
    throw this.refusal(r);
  }

  /** Writes: as the owner they count as served, as the pending target as shadow writes. */
  countRole(role: Role): void {
    if (role === 'owner') this.stats.served();
    else this.stats.shadowWrites++;
  }

  refusal(r: Refusal): HttpError {
    // Fenced: not a routing question the caller can fix by refreshing its ring; it reads the next tier instead.
    if (r.reason === 'fenced') return new HttpError('FENCED', r.message, { ringVersion: this.ownership.version });
    const code = r.reason === 'stale-ring' ? 'STALE_RING' : 'WRONG_NODE';
    return new HttpError(code, r.message, { ringVersion: this.ownership.version, ring: this.ownership.doc ?? null });
  }
}

/** The caller's ring version (`x-strata-ring`), 0 when absent or invalid. */
export function ringVersionOf(req: IncomingMessage): number {
  const v = req.headers[RING_HEADER];
  const n = typeof v === 'string' ? Number(v) : 0;
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}
