import { createHash } from 'node:crypto';
import * as z from 'zod';
import { nodeIdSchema, type RingNode } from '../../ring/document.js';

/**
 * Where the warm tier's nodes go: which subnet (and so which Availability Zone) a scale-out launches into, which
 * node a scale-in drains, and the idempotency token of each launch. Pure functions over the ring's nodes, so the
 * step Lambda and a local run choose alike.
 */

export const fleetSubnetSchema = z.strictObject({
  subnetId: z.string().min(1),
  availabilityZone: z.string().min(1),
});
export type FleetSubnet = z.infer<typeof fleetSubnetSchema>;

/** The fleet's subnets in configuration order (STRATA_FLEET_SUBNETS), each listed once. */
export const fleetSubnetsSchema = z
  .array(fleetSubnetSchema)
  .min(1)
  .refine((s) => new Set(s.map((x) => x.subnetId)).size === s.length, 'each subnet may be listed once');

/** Stand-ins for a local run (one "subnet" per fake AZ): the AZ choice behaves as it does on EC2. */
export const LOCAL_FLEET_SUBNETS: readonly FleetSubnet[] = ['a', 'b', 'c'].map((x) => ({
  subnetId: `subnet-local-${x}`,
  availabilityZone: `local-${x}`,
}));

/** Nodes whose AZ is not recorded (they joined before the ring knew AZs) count as one AZ of their own. */
const UNKNOWN_AZ = '';

function countBy<T>(items: readonly T[], key: (t: T) => string): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of items) out.set(key(t), (out.get(key(t)) ?? 0) + 1);
  return out;
}

/**
 * The subnet for the next node: the one in the AZ with the fewest NORMAL nodes, so the warm tier spreads over
 * the AZs and losing one AZ loses the smallest share of the ring. Ties go to the AZ with fewer nodes on their way
 * in (JOINING or PARTIAL: another scale-out is already filling it), then to the configuration order.
 */
export function chooseLaunchSubnet(
  subnets: readonly FleetSubnet[],
  nodes: readonly Pick<RingNode, 'state' | 'az'>[],
): FleetSubnet {
  if (subnets.length === 0) throw new Error('the fleet has no subnets to launch into');
  const normal = countBy(
    nodes.filter((n) => n.state === 'NORMAL'),
    (n) => n.az ?? UNKNOWN_AZ,
  );
  const joining = countBy(
    nodes.filter((n) => n.state === 'JOINING' || n.state === 'PARTIAL'),
    (n) => n.az ?? UNKNOWN_AZ,
  );
  let best = subnets[0]!;
  for (const s of subnets.slice(1)) {
    const dNormal = (normal.get(s.availabilityZone) ?? 0) - (normal.get(best.availabilityZone) ?? 0);
    const dJoining = (joining.get(s.availabilityZone) ?? 0) - (joining.get(best.availabilityZone) ?? 0);
    if (dNormal < 0 || (dNormal === 0 && dJoining < 0)) best = s;
  }
  return best;
}

/**
 * The NORMAL nodes a scale-in may drain without unbalancing the AZs: those in the AZ (or AZs, on a tie) holding
 * the most NORMAL nodes. The caller then takes the least loaded of them.
 */
export function scaleInCandidates<N extends Pick<RingNode, 'id' | 'state' | 'az'>>(nodes: readonly N[]): N[] {
  const normal = nodes.filter((n) => n.state === 'NORMAL');
  const perAz = countBy(normal, (n) => n.az ?? UNKNOWN_AZ);
  const most = Math.max(0, ...perAz.values());
  return normal.filter((n) => perAz.get(n.az ?? UNKNOWN_AZ) === most);
}

/** Of `loads`, the node to drain: the fewest bytes, then the lowest id (the same answer on every retry). */
export function leastLoaded(loads: readonly { id: string; bytes: number }[]): string | undefined {
  return [...loads].sort((a, b) => a.bytes - b.bytes || a.id.localeCompare(b.id))[0]?.id;
}

/**
 * RunInstances' ClientToken for launch number `ordinal` of an execution: the same on every retry of that launch
 * (EC2 then answers with the instance it already started), different for each launch of one execution. A SHA-256
 * in hex: 64 characters of [0-9a-f], within EC2's "maximum 64 ASCII characters" whatever the execution's name
 * (Step Functions allows 80).
 */
export function launchClientToken(execution: string, ordinal: number): string {
  if (!Number.isInteger(ordinal) || ordinal < 0) throw new Error(`launch ordinal must be a whole number >= 0 (got ${ordinal})`);
  return createHash('sha256')
    .update(JSON.stringify([execution, ordinal]))
    .digest('hex');
}

/**
 * The node a launch made, as a step that puts it in the ring receives it (ReplaceNode's take-over, a rolling
 * upgrade's hand-off): its id (on EC2 its instance id), instance, address and AZ.
 */
export const launchedNodeFields = {
  newNodeId: nodeIdSchema,
  instanceId: z.string().min(1),
  url: z.string().url(),
  az: z.string().min(1).max(64).nullish(),
};

/** The ring node of {@link launchedNodeFields}. */
export function launchedNode(i: { newNodeId: string; instanceId: string; url: string; az?: string | null | undefined }) {
  return { id: i.newNodeId, url: i.url, instance: i.instanceId, ...(i.az ? { az: i.az } : {}) };
}
