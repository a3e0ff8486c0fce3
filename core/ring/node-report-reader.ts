import * as z from 'zod';
import { nodeStatsKey, SILENT_AFTER_INTERVALS, type NodeStatsReport } from './node-reports.js';
import type { CasStore } from './store.js';
import { formatIssues } from '../util/zod-issues.js';

/**
 * Reading the cache nodes' statistics reports (node-reports.ts) the way the cost publisher and the scale-out
 * trigger do: from the ring store alone, so neither needs a node's HTTP API, the fleet secret, a place in the VPC
 * or an interface endpoint.
 *
 * A report is fresh while its age, by the reader's clock, is at most {@link staleAfterMs} (SILENT_AFTER_INTERVALS
 * of the node's own interval). Otherwise the node is silent: it stopped, cannot reach S3, or writes something
 * unreadable. Clock skew: `at` is the node's clock. A report dated in the past is simply older (the slack of
 * SILENT_AFTER_INTERVALS - 1 intervals absorbs a node clock that runs behind); one dated in the future counts as
 * age 0 up to the same bound, and beyond it as silent: a clock that far ahead would keep a dead node's last
 * report "fresh" for as long as it is ahead, so such a report proves nothing about the node being alive.
 */

/**
 * The longest interval a report's staleness bound trusts. A node configured (or broken) to claim a day-long
 * interval would otherwise stay "fresh" for three days after it died.
 */
export const MAX_TRUSTED_INTERVAL_MS = 10 * 60_000;

const reportSchema = z.object({
  nodeId: z.string().min(1),
  at: z.number(),
  intervalMs: z.number().positive(),
  stats: z.record(z.string(), z.unknown()),
});

/** How old a report may be (ms) before its node counts as silent. */
export function staleAfterMs(report: Pick<NodeStatsReport, 'intervalMs'>): number {
  return SILENT_AFTER_INTERVALS * Math.min(report.intervalMs, MAX_TRUSTED_INTERVAL_MS);
}

/** What the reader knows of one node from its report. */
export type NodeReportStatus =
  | { readonly node: string; readonly fresh: true; readonly report: NodeStatsReport; readonly ageMs: number }
  | {
      readonly node: string;
      readonly fresh: false;
      readonly reason: string;
      /**
       * Set when the node did write a readable report, but longer ago than its bound: the one case that is evidence
       * of the node having stopped (no report, a malformed one or a clock far ahead are not).
       */
      readonly staleMs?: number;
    };

/**
 * Classifies the stored document `doc` (parsed JSON; undefined when the node has written none) of node `node`
 * at the reader's time `nowMs`.
 */
export function classifyNodeReport(node: string, doc: unknown, nowMs: number): NodeReportStatus {
  if (doc === undefined) return { node, fresh: false, reason: 'no stats report in the ring store' };
  const parsed = reportSchema.safeParse(doc);
  if (!parsed.success) {
    const issues = formatIssues(parsed.error.issues);
    return { node, fresh: false, reason: `malformed stats report: ${issues}` };
  }
  const report = parsed.data as NodeStatsReport;
  if (report.nodeId !== node) return { node, fresh: false, reason: `the stats report names node '${report.nodeId}'` };
  const bound = staleAfterMs(report);
  const age = nowMs - report.at;
  if (age > bound) {
    return { node, fresh: false, reason: `stats report ${seconds(age)} old (silent after ${seconds(bound)})`, staleMs: age };
  }
  if (-age > bound) {
    const ahead = `stats report dated ${seconds(-age)} ahead of this reader's clock (more than ${seconds(bound)})`;
    const reason = `${ahead}: the node's clock is wrong`;
    return { node, fresh: false, reason };
  }
  return { node, fresh: true, report, ageMs: Math.max(0, age) };
}

/**
 * Where node `node` writes its report: `nodeStatsKey(reportIdPrefix + node)`. On EC2 the prefix is the fleet role's
 * id and a colon (a node may write only the key named by its session's aws:userid, `<role id>:<instance id>`:
 * CacheNodeFleet.statsReportIdPrefix, given to readers as STRATA_NODE_STATS_ID_PREFIX); locally it is empty.
 */
export function nodeReportKey(node: string, reportIdPrefix = ''): string {
  return nodeStatsKey(`${reportIdPrefix}${node}`);
}

/**
 * Reads and classifies node `node`'s report from `cas` (the ring store). Never throws: a node id that cannot name
 * a report, a store error and a body that is not JSON all make the node silent, with the reason.
 */
export async function readNodeReport(cas: CasStore, node: string, nowMs: number, reportIdPrefix = ''): Promise<NodeReportStatus> {
  let got: { body: string } | undefined;
  try {
    got = await cas.get(nodeReportKey(node, reportIdPrefix));
  } catch (e) {
    return { node, fresh: false, reason: `stats report unreadable: ${message(e)}` };
  }
  if (!got) return classifyNodeReport(node, undefined, nowMs);
  let doc: unknown;
  try {
    doc = JSON.parse(got.body);
  } catch (e) {
    return { node, fresh: false, reason: `malformed stats report: ${message(e)}` };
  }
  return classifyNodeReport(node, doc, nowMs);
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
