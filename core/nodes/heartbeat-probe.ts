// The failure detector's second look in AWS: a node whose instance is fine by EC2 but whose daemon stopped reporting.
import { readNodeReport } from '../ring/node-report-reader.js';
import type { RingNode } from '../ring/document.js';
import type { CasStore } from '../ring/store.js';
import { probeAnswer, type BatchNodeProbe } from './health-probe.js';

export interface ReportHeartbeatOptions {
  /** The ring store, where each node writes its statistics report (core/ring/node-reports.ts). */
  cas: CasStore;
  /** What precedes a node's id in its report's key (STRATA_NODE_STATS_ID_PREFIX). @default '' */
  reportIdPrefix?: string;
  /** @default Date.now */
  now?: () => number;
}

/**
 * Wraps the EC2 status probe so that a daemon that hangs, crash-loops or is otherwise gone on an instance that EC2
 * still calls healthy is found too. EC2's status checks look at the host and the operating system, not at the
 * process: a `kill -STOP`ped daemon, a deadlocked event loop or a daemon systemd gave up on all leave the instance
 * `running` with both checks `ok`. Each node writes its statistics report to the ring store every
 * STRATA_NODE_STATS_INTERVAL_MS (30 s by default), from its event loop, so the report's age is the daemon's
 * heartbeat, and the evaluator (outside the VPC: it cannot call the node) can read it.
 *
 * Only the nodes the inner probe calls `ok` are looked at; each is then:
 * - `down` when its report is stale: readable, its own, and older than its bound (three of its intervals,
 *   core/ring/node-report-reader.ts), the only evidence of a stopped daemon;
 * - `ok` otherwise: a fresh report, or none that can tell (no report, as when reports are turned off; a malformed
 *   one; a clock far ahead; the store failing), where the inner probe's `ok` stands.
 *
 * What keeps it from tearing down a fleet: a marking still needs two failed probes a tick apart (so a report late by
 * one tick is not enough), and when S3 itself fails every node goes silent at once, which the checker's storm rule
 * (`maxFraction`) holds. A network cut between the coordinators and a node that still reaches S3 is not seen here.
 */
export function withReportHeartbeat(inner: BatchNodeProbe, o: ReportHeartbeatOptions): BatchNodeProbe {
  const now = o.now ?? Date.now;
  return {
    many: async (nodes: readonly RingNode[]) => {
      const answers = new Map(await inner.many(nodes));
      const fine = nodes.filter((n) => {
        const a = answers.get(n.id);
        return a !== undefined && probeAnswer(a).result === 'ok';
      });
      const at = now();
      const reports = await Promise.all(fine.map((n) => readNodeReport(o.cas, n.id, at, o.reportIdPrefix)));
      for (const r of reports) {
        if (r.fresh || r.staleMs === undefined) continue;
        const detail = `its instance is healthy by EC2, but the daemon is silent: ${r.reason} (hung, crash-looping or cut off from S3)`;
        answers.set(r.node, { result: 'down', detail });
      }
      return answers;
    },
  };
}
