import type { RingDocument } from '../ring/document.js';

/**
 * The warm tier as Strata/Fleet reports it: the nodes of the ring document, each node's fill from its `/stats`,
 * and the migrations in progress. A migration session is in progress between `prepare` (it marks its span
 * pending to the target in the ring) and `publish` (ownership flips and the mark goes), so the distinct
 * `pending.session` ids of the ring's ranges are exactly the sessions prepared but not yet published.
 */
export interface FleetStateSource {
  /** The current ring document; undefined when the environment has no warm tier (or no ring yet). */
  ring(): Promise<RingDocument | undefined>;
  /** A node's `/stats` (the fill is bytes used / capacity, 0-1). */
  nodeStats(url: string): Promise<{ fill: number }>;
}

export interface NodeFill {
  readonly node: string;
  /** 0-100. */
  readonly percent: number;
}

export interface FleetState {
  readonly ringVersion: number | null;
  readonly nodes: number;
  /** One entry per node that answered. */
  readonly fills: readonly NodeFill[];
  /** The fullest node's fill; 0 with no nodes; undefined when no node answered (unknown, not empty). */
  readonly maxFillPercent: number | undefined;
  readonly migrationsInProgress: number;
  /** Nodes whose stats could not be read, with the reason. */
  readonly unreachable: readonly { node: string; error: string }[];
}

/** Distinct migration sessions holding a pending mark in the ring. */
export function migrationsInProgress(ring: RingDocument): number {
  return new Set(ring.ranges.flatMap((r) => (r.pending ? [r.pending.session] : []))).size;
}

/** Reads the ring, then every node's stats (concurrently); a node that fails is reported, not fatal. */
export async function readFleetState(source: FleetStateSource): Promise<FleetState> {
  const ring = await source.ring();
  if (!ring) return { ringVersion: null, nodes: 0, fills: [], maxFillPercent: 0, migrationsInProgress: 0, unreachable: [] };
  const results = await Promise.allSettled(ring.nodes.map(async (n) => ({ node: n.id, percent: toPercent((await source.nodeStats(n.url)).fill) })));
  const fills: NodeFill[] = [];
  const unreachable: { node: string; error: string }[] = [];
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') fills.push(r.value);
    else unreachable.push({ node: ring.nodes[i]!.id, error: r.reason instanceof Error ? r.reason.message : String(r.reason) });
  });
  return {
    ringVersion: ring.version,
    nodes: ring.nodes.length,
    fills,
    maxFillPercent: fills.length ? Math.max(...fills.map((f) => f.percent)) : undefined,
    migrationsInProgress: migrationsInProgress(ring),
    unreachable,
  };
}

function toPercent(fill: number): number {
  if (!Number.isFinite(fill) || fill < 0) throw new RangeError(`node reported fill ${fill}`);
  return fill * 100;
}
