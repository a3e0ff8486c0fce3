import type { RingDocument, RingNode } from '../../ring/document.js';
import { classifyNodeReport, nodeReportKey } from '../../ring/node-report-reader.js';
import { RingStore, type CasStore } from '../../ring/store.js';

/**
 * The warm tier as Strata/Fleet reports it: the nodes of the ring document, each node's fill from the statistics
 * report it writes to the ring store (ring/node-reports.ts), the nodes whose report is missing or stale, and the
 * migrations in progress. A migration session is in progress between `prepare` (it marks its span pending to the
 * target in the ring) and `publish` (ownership flips and the mark goes), so the distinct `pending.session` ids of
 * the ring's ranges are exactly the sessions prepared but not yet published.
 *
 * Reports rather than each node's HTTP `/stats`: the publisher then needs only S3, so it runs outside the VPC
 * with no interface endpoint, no route to the nodes and no fleet secret.
 */
export interface FleetStateSource {
  /** The current ring document; undefined when the environment has no warm tier (or no ring yet). */
  ring(): Promise<RingDocument | undefined>;
  /** The node's stored report, as parsed JSON (checked by the reader); undefined when it has written none. */
  nodeReport(node: Pick<RingNode, 'id' | 'url'>): Promise<unknown>;
  /** The reader's clock (epoch ms), against which reports age. @default Date.now */
  now?(): number;
}

/**
 * The fleet state source of a ring store: the ring document and the nodes' reports, both from `cas`, each node's
 * report under its id with `reportIdPrefix` in front (ring/node-report-reader.ts nodeReportKey).
 */
export function ringStoreFleetSource(cas: CasStore, o: { reportIdPrefix?: string; now?: () => number } = {}): FleetStateSource {
  const ring = new RingStore(cas);
  return {
    ring: () => ring.load(),
    nodeReport: async (node) => {
      const got = await cas.get(nodeReportKey(node.id, o.reportIdPrefix));
      return got ? (JSON.parse(got.body) as unknown) : undefined;
    },
    now: o.now ?? Date.now,
  };
}

export interface NodeFill {
  readonly node: string;
  /** 0-100. */
  readonly percent: number;
}

export interface FleetState {
  readonly ringVersion: number | null;
  readonly nodes: number;
  /** One entry per node with a fresh report. */
  readonly fills: readonly NodeFill[];
  /** The fullest node's fill; 0 with no nodes; undefined when no node has a fresh report (unknown, not empty). */
  readonly maxFillPercent: number | undefined;
  readonly migrationsInProgress: number;
  /**
   * Nodes of the ring without current statistics, with the reason: no report, a report older than its staleness
   * bound (or dated too far ahead), or one that cannot be read or has no usable fill. Published as SilentNodes;
   * their fill is not published (a stale fill would look current to the node-fill alarm).
   */
  readonly silent: readonly { node: string; reason: string }[];
}

/** Distinct migration sessions holding a pending mark in the ring. */
export function migrationsInProgress(ring: RingDocument): number {
  return new Set(ring.ranges.flatMap((r) => (r.pending ? [r.pending.session] : []))).size;
}

/** Reads the ring, then every node's report (concurrently); a node without a usable report is silent, not fatal. */
export async function readFleetState(source: FleetStateSource): Promise<FleetState> {
  const ring = await source.ring();
  if (!ring) return { ringVersion: null, nodes: 0, fills: [], maxFillPercent: 0, migrationsInProgress: 0, silent: [] };
  const docs = await Promise.allSettled(ring.nodes.map((n) => source.nodeReport(n)));
  // One clock reading for every node, taken after the reads: a report written during them is not "from the future".
  const now = (source.now ?? Date.now)();
  const fills: NodeFill[] = [];
  const silent: { node: string; reason: string }[] = [];
  docs.forEach((d, i) => {
    const node = ring.nodes[i]!.id;
    if (d.status === 'rejected') {
      return silent.push({
        node,
        reason: `stats report unreadable: ${d.reason instanceof Error ? d.reason.message : String(d.reason)}`,
      });
    }
    const status = classifyNodeReport(node, d.value, now);
    if (!status.fresh) return silent.push({ node, reason: status.reason });
    const fill = status.report.stats.fill;
    if (typeof fill !== 'number' || !Number.isFinite(fill) || fill < 0) {
      return silent.push({ node, reason: `stats report has no usable fill (${JSON.stringify(fill)})` });
    }
    return fills.push({ node, percent: fill * 100 });
  });
  return {
    ringVersion: ring.version,
    nodes: ring.nodes.length,
    fills,
    maxFillPercent: fills.length ? Math.max(...fills.map((f) => f.percent)) : undefined,
    migrationsInProgress: migrationsInProgress(ring),
    silent,
  };
}
