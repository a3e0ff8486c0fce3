/**
 * Documents the cache nodes and the workflows share through the ring store (an S3 prefix in AWS, a folder
 * locally) besides the ring itself. They travel through the S3 gateway endpoint, so nothing in the VPC needs an
 * interface endpoint to learn a node's statistics or the fleet's shared secret.
 *
 *   nodes/<nodeId>/stats.json   written by that node every STRATA_NODE_STATS_INTERVAL_MS; read by the cost
 *                               publisher and the scale-out trigger (which run outside the VPC)
 *   fleet/secret                the shared secret between coordinators and nodes; created once (conditional
 *                               create) by the workflow steps, read by the coordinators and the nodes
 *
 * Per-prefix IAM grants (cdk/constructs/cold-tier-bucket.ts) follow these key shapes: change them together.
 */

/**
 * Ring-store key of a node's statistics report. ":" is allowed: ring node ids may hold it, and a fleet node's
 * report id is its instance-profile session's aws:userid, `<role id>:<instance id>` (the one key IAM lets that
 * instance write: cdk/constructs/cache-node-fleet.ts).
 */
export function nodeStatsKey(nodeId: string): string {
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(nodeId)) {
    throw new Error(`node id '${nodeId}' cannot name a stats report (A-Z, a-z, 0-9, ".", "_", ":", "-")`);
  }
  return `${NODE_STATS_FOLDER}/${nodeId}/stats.json`;
}

/** Folder of every node's report (IAM grants cover `<ring prefix>/nodes/*`). */
export const NODE_STATS_FOLDER = 'nodes';

/** Ring-store key of the fleet's shared secret. */
export const FLEET_SECRET_KEY = 'fleet/secret';

/** How often a node writes its report, by default. */
export const DEFAULT_NODE_STATS_INTERVAL_MS = 30_000;

/** A report older than this many intervals counts as silent (the node stopped reporting). */
export const SILENT_AFTER_INTERVALS = 3;

/** What a node writes to {@link nodeStatsKey}. */
export interface NodeStatsReport {
  readonly nodeId: string;
  /** When the node wrote it (epoch ms, the node's clock). */
  readonly at: number;
  /** The report interval the node runs with, so readers can tell a silent node from a slow one. */
  readonly intervalMs: number;
  /** The node's `/stats` body as it would answer it. */
  readonly stats: Record<string, unknown>;
}
