// The failure detector's probes: what one answers (the contract every probe keeps), and the local one over HTTP.
// In AWS: core/nodes/ec2-probe.ts and core/nodes/heartbeat-probe.ts.
import type { RingNode } from '../ring/document.js';
import { NodeUnavailableError } from './node-client-errors.js';
import type { NodeClient } from './node-client.js';

/** What one probe saw: the node answers (`ok`), it does not (`down`), or the probe cannot tell (`unknown`). */
export type ProbeResult = 'ok' | 'down' | 'unknown';
/** A probe's answer: a bare result, or one with what was seen (an error message: it goes into the DOWN reason). */
export type ProbeAnswer = ProbeResult | { result: ProbeResult; detail?: string };
/** Asks whether a node is up: an HTTP call to its health route locally ({@link httpProbe}), the EC2 status on AWS. */
export type NodeProbe = (node: RingNode) => Promise<ProbeAnswer>;
/** A probe's answer as a result and what was seen (none for a bare result). */
export function probeAnswer(a: ProbeAnswer): { result: ProbeResult; detail?: string | undefined } {
  return typeof a === 'string' ? { result: a } : a;
}
/**
 * Asks about many nodes in one call (core/nodes/ec2-probe.ts: one EC2 DescribeInstanceStatus for the whole fleet):
 * an answer per node id. A node it leaves out counts as `unknown`; a call that throws is `unknown` for all of them.
 */
export interface BatchNodeProbe {
  many(nodes: readonly RingNode[]): Promise<ReadonlyMap<string, ProbeAnswer>>;
}
/** Errors of a node that is not there: nothing listens, the connection broke, or it timed out. */
const DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT']);

/**
 * A probe over the nodes' HTTP API: GET /healthz, bounded by `timeoutMs` (the client's own timeout still
 * applies). A healthy answer is `ok`; a refused or reset connection or no answer in time is `down`; anything
 * else (a 503 while the node drains, a 4xx such as a wrong secret, a bad URL) is `unknown`: the node or the
 * network answered something, so it is no evidence that the node is gone.
 */
export function httpProbe(client: Pick<NodeClient, 'health'>, timeoutMs = 1000): NodeProbe {
  return async (node) => {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const h = await client.health(node.url, signal);
      return h.status === 'ok' ? 'ok' : { result: 'unknown', detail: `health answered status '${h.status}'` };
    } catch (e) {
      if (signal.aborted) return { result: 'down', detail: `no answer within ${timeoutMs} ms` };
      const cause = e instanceof Error && e.cause !== undefined ? e.cause : e;
      const code = (cause as { code?: unknown } | undefined)?.code;
      const detail = (cause instanceof Error && cause.message) || (typeof code === 'string' ? code : messageOf(e));
      if (
        e instanceof NodeUnavailableError &&
        ((typeof code === 'string' && DOWN_CODES.has(code)) || /^timed out after/.test(detail))
      )
        return { result: 'down', detail };
      return { result: 'unknown', detail: messageOf(e) };
    }
  };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
