// The failure detector's probe in AWS: the EC2 status of the ring's instances, the whole fleet in one call.
import { DescribeInstanceStatusCommand, type EC2Client, type InstanceStatus } from '@aws-sdk/client-ec2';
import type { RingNode } from '../ring/document.js';
import type { BatchNodeProbe, ProbeAnswer } from './health-probe.js';

/**
 * At most this many instance ids in one DescribeInstanceStatus request ("Constraints: Maximum 100 explicitly
 * specified instance IDs"; MaxResults, the paging size, cannot be given with InstanceIds):
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceStatus.html
 */
export const DESCRIBE_INSTANCE_STATUS_MAX_IDS = 100;

/**
 * Instance states (InstanceState.Name: pending | running | shutting-down | terminated | stopping | stopped) in which
 * the node's daemon is not running and will not be without someone starting the instance again:
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceState.html
 */
const DOWN_STATES = new Set(['stopping', 'stopped', 'shutting-down', 'terminated']);

/**
 * Status check summaries (InstanceStatusSummary.Status: ok | impaired | insufficient-data | not-applicable |
 * initializing, https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStatusSummary.html) that are no
 * evidence of a failure on a running instance:
 * - `ok`: the checks pass;
 * - `initializing`: EC2 is still running its first checks after the instance (re)started. A node is in the ring only
 *   after its launch's health check saw the daemon answer (ScaleOut's and ReplaceNode's CheckNode), so a freshly
 *   started node is not suspect on this alone; a failure shows as `impaired` once the checks have run;
 * - `insufficient-data`: EC2 has not gathered enough data to tell either way.
 * `not-applicable` (a status of an instance that is not running) is `unknown`: the state decides then.
 */
const FINE_STATUSES = new Set(['ok', 'initializing', 'insufficient-data']);

/**
 * The error DescribeInstanceStatus answers when an id of the request names no instance EC2 knows (the whole request
 * fails, naming the ids in its message): "The specified instance does not exist", error codes of the EC2 API,
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html. Eventual consistency can also answer
 * it for an instance launched a moment ago
 * (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html); a node joins the ring minutes after
 * its launch, and a marking takes two failed probes a tick apart, so that is not mistaken for a dead node.
 */
const NOT_FOUND = 'InvalidInstanceID.NotFound';

/** What an EC2 instance id looks like (`i-` and 8 or 17 hex digits); anything else is not asked about. */
const INSTANCE_ID = /^i-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;

export interface Ec2StatusProbeOptions {
  /** The EC2 client (its region: the fleet's). Only `send` is used, so tests stub it at the SDK boundary. */
  client: Pick<EC2Client, 'send'>;
  /** Ids per request. @default {@link DESCRIBE_INSTANCE_STATUS_MAX_IDS} (the API's maximum) */
  batchSize?: number;
}

/**
 * The EC2 status of the nodes' instances (`RingNode.instance`), for {@link NodeHealthChecker} in AWS: one
 * DescribeInstanceStatus request per 100 nodes per tick (one for any fleet Strata runs), with IncludeAllInstances
 * so that stopped and terminated instances are described too (by default only running ones are):
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceStatus.html
 *
 * Each node is:
 * - `down` when its instance is stopping, stopped, shutting down or terminated; when its instance status check or
 *   its system status check is `impaired` (the instance's own OS or network, or the host under it:
 *   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-system-instance-status-check.html); or when EC2
 *   does not know its instance id ({@link NOT_FOUND}; the other ids of the request are asked again without it);
 * - `ok` when it runs with checks `ok`, `initializing` or `insufficient-data` (see {@link FINE_STATUSES});
 * - `unknown` otherwise: the API failed (throttled, no permission, no network), the instance is pending, the node has
 *   no EC2 instance id, or EC2 did not describe it.
 *
 * What it cannot see: a daemon that hangs or crashed on a healthy instance (the instance's checks still pass); the
 * evaluator wraps it in core/nodes/heartbeat-probe.ts for that, which reads the age of the daemon's reports. Nor does
 * it read the attached EBS status check (AttachedEbsStatus): a lost data volume is the daemon's to report.
 */
export function ec2StatusProbe(o: Ec2StatusProbeOptions): BatchNodeProbe {
  const size = o.batchSize ?? DESCRIBE_INSTANCE_STATUS_MAX_IDS;
  if (!Number.isInteger(size) || size < 1 || size > DESCRIBE_INSTANCE_STATUS_MAX_IDS)
    throw new RangeError(`batchSize must be a whole number from 1 to ${DESCRIBE_INSTANCE_STATUS_MAX_IDS} (got ${size})`);
  return {
    many: async (nodes: readonly RingNode[]) => {
      const out = new Map<string, ProbeAnswer>();
      const byInstance = new Map<string, RingNode[]>();
      for (const n of nodes) {
        if (!n.instance || !INSTANCE_ID.test(n.instance)) {
          const what = n.instance ? `'${n.instance}' is not an EC2 instance id` : 'the ring names no EC2 instance for it';
          out.set(n.id, { result: 'unknown', detail: what });
        } else byInstance.set(n.instance, [...(byInstance.get(n.instance) ?? []), n]);
      }
      const ids = [...byInstance.keys()];
      const batches: string[][] = [];
      for (let i = 0; i < ids.length; i += size) batches.push(ids.slice(i, i + size));
      const answers = await Promise.all(batches.map((b) => describe(o.client, b)));
      for (const byId of answers)
        for (const [id, answer] of byId) for (const n of byInstance.get(id) ?? []) out.set(n.id, answer);
      return out;
    },
  };
}

/** One batch: DescribeInstanceStatus of `ids`, again without the ids EC2 says it does not know. */
async function describe(client: Ec2StatusProbeOptions['client'], ids: string[]): Promise<Map<string, ProbeAnswer>> {
  const out = new Map<string, ProbeAnswer>();
  let remaining = ids;
  // Each failed round removes at least one id, so this ends after at most ids.length + 1 requests.
  while (remaining.length > 0) {
    let statuses: InstanceStatus[];
    try {
      const r = await client.send(new DescribeInstanceStatusCommand({ InstanceIds: remaining, IncludeAllInstances: true }));
      statuses = r.InstanceStatuses ?? [];
    } catch (e) {
      const code = errorCode(e);
      const unknownIds = code === NOT_FOUND ? idsIn(messageOf(e)).filter((id) => remaining.includes(id)) : [];
      if (unknownIds.length === 0) {
        const detail = `EC2 DescribeInstanceStatus failed: ${code ?? 'error'}: ${messageOf(e)}`.slice(0, 200);
        for (const id of remaining) out.set(id, { result: 'unknown', detail });
        return out;
      }
      for (const id of unknownIds) out.set(id, { result: 'down', detail: `EC2 does not know instance ${id} (${NOT_FOUND})` });
      remaining = remaining.filter((id) => !unknownIds.includes(id));
      continue;
    }
    for (const s of statuses) if (s.InstanceId && remaining.includes(s.InstanceId)) out.set(s.InstanceId, classify(s));
    for (const id of remaining)
      if (!out.has(id)) out.set(id, { result: 'unknown', detail: `EC2 did not describe instance ${id}` });
    return out;
  }
  return out;
}

/** One instance's answer from its state and its two status checks. */
export function classify(s: InstanceStatus): ProbeAnswer {
  const id = s.InstanceId ?? 'instance';
  const state = s.InstanceState?.Name;
  if (state && DOWN_STATES.has(state)) return { result: 'down', detail: `EC2 instance ${id} is ${state}` };
  if (state !== 'running') return { result: 'unknown', detail: `EC2 instance ${id} is ${state ?? 'in no known state'}` };
  const instance = s.InstanceStatus?.Status;
  const system = s.SystemStatus?.Status;
  const impaired = [
    ...(system === 'impaired' ? [`system status impaired${failedChecks(s.SystemStatus)}`] : []),
    ...(instance === 'impaired' ? [`instance status impaired${failedChecks(s.InstanceStatus)}`] : []),
  ];
  if (impaired.length > 0) return { result: 'down', detail: `EC2 instance ${id}: ${impaired.join(', ')}` };
  if (FINE_STATUSES.has(instance ?? '') && FINE_STATUSES.has(system ?? '')) return 'ok';
  return { result: 'unknown', detail: `EC2 instance ${id} runs with status ${instance ?? '-'} / system ${system ?? '-'}` };
}

/** ` (reachability failed)`: the failed checks of a summary (InstanceStatusDetails: name, status), if any. */
function failedChecks(summary: InstanceStatus['InstanceStatus']): string {
  const failed = (summary?.Details ?? []).filter((d) => d.Status === 'failed').map((d) => `${d.Name ?? 'check'} failed`);
  return failed.length > 0 ? ` (${failed.join(', ')})` : '';
}

/** The instance ids a message names (EC2's NotFound names them: "The instance IDs 'i-1, i-2' do not exist"). */
function idsIn(message: string): string[] {
  return message.match(/\bi-[0-9a-f]{8}(?:[0-9a-f]{9})?\b/g) ?? [];
}

/**
 * The EC2 error code (`Code` of the XML error response): the SDK's exception name (EC2 models no error shapes, so the
 * SDK names its EC2ServiceException after the code), or a `Code` field where a client puts it there.
 */
function errorCode(e: unknown): string | undefined {
  const x = e as { name?: unknown; Code?: unknown } | undefined;
  if (typeof x?.name === 'string' && x.name !== 'Error') return x.name;
  return typeof x?.Code === 'string' ? x.Code : undefined;
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
