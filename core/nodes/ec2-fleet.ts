import {
  DeleteVolumeCommand,
  DescribeInstancesCommand,
  DescribeVolumesCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
  type EC2Client,
  type Instance,
  type Tag,
} from '@aws-sdk/client-ec2';
import { waitUntil, type FleetProvider, type LaunchedNode } from './fleet.js';
import { CACHE_NODE_V8_FLAGS } from './node-process.js';

export const NODE_ID_TAG = 'strata:node-id';
export const FLEET_TAG = 'strata:fleet';
/** How a spot or mixed fleet's launch bought the instance: 'on-demand' or 'spot' (the cost publisher reads it). */
export const CAPACITY_TAG = 'strata:capacity';

export interface Ec2FleetOptions {
  client: EC2Client;
  /** Name of the fleet (tag `strata:fleet` on instances and volumes; `list()` filters on it). */
  fleet: string;
  /** The launch template (AMI with the daemon, instance profile, security group, metadata options). */
  launchTemplate: { id?: string; name?: string; version?: string };
  /** The daemon's port. @default 7070 */
  port?: number;
  /** The data volume: encrypted gp3, attached at `deviceName`, deleted with the instance. */
  dataVolume: { sizeGiB: number; deviceName?: string; iops?: number; throughputMiBps?: number; kmsKeyId?: string };
  instanceType?: string;
  subnetId?: string;
  securityGroupIds?: string[];
  /** Extra tags on instances and volumes. */
  tags?: Record<string, string>;
  /**
   * SSM SecureString parameter holding the fleet secret; the default user data reads it at boot (the secret
   * itself never appears in the launch request or the user data).
   */
  secretParameter?: string;
  /** User data (plain text; encoded here). @default {@link defaultUserData} */
  userData?: (nodeId: string) => string;
  /** Whether a described instance counts as started. @default state 'running' */
  isRunning?: (instance: Instance) => boolean;
  /** The node's base URL. @default http://<private IP>:<port> */
  urlOf?: (instance: Instance) => string;
  /** Whether the daemon answers (e.g. NodeClient.health). Required: a node is launched when it is healthy. */
  healthCheck: (url: string, nodeId: string) => Promise<boolean>;
  /** @default 2000 */
  pollIntervalMs?: number;
  /** From RunInstances to healthy. @default 600000 */
  launchTimeoutMs?: number;
  /** How long terminate() waits for the instance to be gone before deleting leftover volumes. @default 300000 */
  terminateTimeoutMs?: number;
}

/**
 * Cache nodes on EC2: RunInstances from a launch template with an encrypted gp3 data volume (deleted on
 * termination) and tags naming the fleet and the node, then waits until the instance runs and the daemon
 * answers its health check; the time from the request to healthy is the node's allocation time (paper 000).
 * A launch that does not become healthy in time is terminated, so nothing leaks. Terminate also deletes any of
 * the node's volumes left behind (e.g. detached ones).
 */
export class Ec2Fleet implements FleetProvider {
  readonly kind = 'ec2' as const;
  private readonly launched = new Map<string, LaunchedNode>();

  constructor(private readonly o: Ec2FleetOptions) {
    if (!o.launchTemplate.id && !o.launchTemplate.name) throw new Error('Ec2Fleet: launchTemplate needs an id or a name');
    if (!(o.dataVolume.sizeGiB >= 1)) throw new Error('Ec2Fleet: dataVolume.sizeGiB must be at least 1');
  }

  private tags(nodeId: string): Tag[] {
    return [
      { Key: FLEET_TAG, Value: this.o.fleet },
      { Key: NODE_ID_TAG, Value: nodeId },
      ...Object.entries(this.o.tags ?? {}).map(([Key, Value]) => ({ Key, Value })),
    ];
  }

  async launch(nodeId: string): Promise<LaunchedNode> {
    const started = performance.now();
    const v = this.o.dataVolume;
    const run = await this.o.client.send(
      new RunInstancesCommand({
        MinCount: 1,
        MaxCount: 1,
        // Idempotent per node id: a retried launch returns the same instance instead of a second one.
        ClientToken: `strata-${this.o.fleet}-${nodeId}`.slice(0, 64),
        LaunchTemplate: {
          ...(this.o.launchTemplate.id
            ? { LaunchTemplateId: this.o.launchTemplate.id }
            : { LaunchTemplateName: this.o.launchTemplate.name }),
          Version: this.o.launchTemplate.version ?? '$Latest',
        },
        ...(this.o.instanceType ? { InstanceType: this.o.instanceType as never } : {}),
        ...(this.o.subnetId ? { SubnetId: this.o.subnetId } : {}),
        ...(this.o.securityGroupIds ? { SecurityGroupIds: this.o.securityGroupIds } : {}),
        BlockDeviceMappings: [
          {
            DeviceName: v.deviceName ?? '/dev/sdf',
            Ebs: {
              VolumeType: 'gp3',
              VolumeSize: v.sizeGiB,
              Encrypted: true,
              ...(v.kmsKeyId ? { KmsKeyId: v.kmsKeyId } : {}),
              ...(v.iops ? { Iops: v.iops } : {}),
              ...(v.throughputMiBps ? { Throughput: v.throughputMiBps } : {}),
              DeleteOnTermination: true,
            },
          },
        ],
        TagSpecifications: [
          { ResourceType: 'instance', Tags: this.tags(nodeId) },
          { ResourceType: 'volume', Tags: this.tags(nodeId) },
        ],
        UserData: Buffer.from(
          (
            this.o.userData ??
            ((id) =>
              defaultUserData({
                nodeId: id,
                port: this.o.port ?? 7070,
                deviceName: v.deviceName ?? '/dev/sdf',
                secretParameter: this.o.secretParameter,
              }))
          )(nodeId),
        ).toString('base64'),
      }),
    );
    const instanceId = run.Instances?.[0]?.InstanceId;
    if (!instanceId) throw new Error('RunInstances returned no instance');
    try {
      const deadline = { timeoutMs: this.o.launchTimeoutMs ?? 600_000, intervalMs: this.o.pollIntervalMs ?? 2000 };
      let instance: Instance | undefined;
      const isRunning = this.o.isRunning ?? ((i: Instance) => i.State?.Name === 'running');
      await waitUntil(
        `instance ${instanceId} running`,
        async () => {
          instance = await this.describe(instanceId);
          const state = instance?.State?.Name;
          if (state === 'terminated' || state === 'shutting-down') throw new Error(`instance ${instanceId} is ${state}`);
          return !!instance && isRunning(instance);
        },
        deadline,
      );
      const url = (this.o.urlOf ?? ((i: Instance) => `http://${i.PrivateIpAddress}:${this.o.port ?? 7070}`))(instance!);
      const left = Math.max(1000, deadline.timeoutMs - (performance.now() - started));
      await waitUntil(`cache node ${nodeId} healthy at ${url}`, () => this.o.healthCheck(url, nodeId), {
        timeoutMs: left,
        intervalMs: deadline.intervalMs,
      });
      const node: LaunchedNode = { nodeId, url, instance: instanceId, allocationMs: Math.round(performance.now() - started) };
      this.launched.set(nodeId, node);
      return node;
    } catch (e) {
      // Never leave a half-launched instance (and its volume) behind.
      await this.o.client.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] })).catch(() => undefined);
      throw e;
    }
  }

  async terminate(nodeId: string): Promise<void> {
    const instances = await this.instancesOf(nodeId);
    const live = instances.filter((i) => i.State?.Name !== 'terminated').map((i) => i.InstanceId!);
    if (live.length) {
      await this.o.client.send(new TerminateInstancesCommand({ InstanceIds: live }));
      await waitUntil(
        `node ${nodeId} terminated`,
        async () => (await this.instancesOf(nodeId)).every((i) => i.State?.Name === 'terminated'),
        {
          timeoutMs: this.o.terminateTimeoutMs ?? 300_000,
          intervalMs: this.o.pollIntervalMs ?? 2000,
        },
      );
    }
    // The data volume goes with the instance (DeleteOnTermination); delete whatever of the node's is left.
    const vols = await this.o.client.send(
      new DescribeVolumesCommand({
        Filters: [
          { Name: `tag:${NODE_ID_TAG}`, Values: [nodeId] },
          { Name: `tag:${FLEET_TAG}`, Values: [this.o.fleet] },
        ],
      }),
    );
    for (const vol of vols.Volumes ?? []) {
      if (vol.State === 'available') await this.o.client.send(new DeleteVolumeCommand({ VolumeId: vol.VolumeId! }));
    }
    this.launched.delete(nodeId);
  }

  async list(): Promise<LaunchedNode[]> {
    const res = await this.o.client.send(
      new DescribeInstancesCommand({
        Filters: [
          { Name: `tag:${FLEET_TAG}`, Values: [this.o.fleet] },
          { Name: 'instance-state-name', Values: ['pending', 'running'] },
        ],
      }),
    );
    const out: LaunchedNode[] = [];
    for (const r of res.Reservations ?? []) {
      for (const i of r.Instances ?? []) {
        const nodeId = i.Tags?.find((t) => t.Key === NODE_ID_TAG)?.Value;
        if (!nodeId) continue;
        out.push(
          this.launched.get(nodeId) ?? {
            nodeId,
            url: (this.o.urlOf ?? ((x: Instance) => `http://${x.PrivateIpAddress}:${this.o.port ?? 7070}`))(i),
            instance: i.InstanceId!,
            allocationMs: 0,
          },
        );
      }
    }
    return out;
  }

  async close(): Promise<void> {
    /* the EC2 client belongs to the caller */
  }

  private async describe(instanceId: string): Promise<Instance | undefined> {
    const res = await this.o.client.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
    return res.Reservations?.[0]?.Instances?.[0];
  }

  private async instancesOf(nodeId: string): Promise<Instance[]> {
    const res = await this.o.client.send(
      new DescribeInstancesCommand({
        Filters: [
          { Name: `tag:${NODE_ID_TAG}`, Values: [nodeId] },
          { Name: `tag:${FLEET_TAG}`, Values: [this.o.fleet] },
        ],
      }),
    );
    return (res.Reservations ?? []).flatMap((r) => r.Instances ?? []);
  }
}

/**
 * Boot script of a cache node instance (the AMI carries Node.js and the daemon under /opt/strata): formats the
 * data volume on first boot (XFS), mounts it, fetches the fleet secret from SSM into a root-only file, and
 * starts the daemon as a systemd service that restarts on failure.
 */
export function defaultUserData(o: { nodeId: string; port: number; deviceName: string; secretParameter?: string }): string {
  const secret = o.secretParameter
    ? `aws ssm get-parameter --with-decryption --name '${o.secretParameter}' --query Parameter.Value --output text > /etc/strata/secret`
    : `test -s /etc/strata/secret # provided by the AMI or an earlier boot`;
  return `#!/bin/bash
set -euo pipefail
NODE_ID='${o.nodeId}'
# On Nitro instances EBS volumes appear as NVMe devices; find the one that is not the root disk.
DEV='${o.deviceName}'
if [ ! -e "$DEV" ]; then
  ROOT=$(lsblk -no PKNAME "$(findmnt -no SOURCE /)")
  DEV=$(lsblk -dpno NAME,TYPE | awk '$2=="disk"{print $1}' | grep -v "$ROOT" | head -n1)
fi
blkid "$DEV" >/dev/null 2>&1 || mkfs.xfs -q "$DEV"
mkdir -p /data/strata
grep -q " /data/strata " /proc/mounts || mount -o noatime "$DEV" /data/strata
grep -q "/data/strata" /etc/fstab || echo "UUID=$(blkid -s UUID -o value "$DEV") /data/strata xfs noatime,nofail 0 2" >> /etc/fstab
install -d -m 0700 /etc/strata
umask 077
${secret}
cat > /etc/strata/node.env <<EOF
STRATA_NODE_ID=$NODE_ID
STRATA_NODE_PORT=${o.port}
STRATA_NODE_HOST=0.0.0.0
STRATA_NODE_DATA_DIR=/data/strata
STRATA_NODE_SECRET_FILE=/etc/strata/secret
EOF
cat > /etc/systemd/system/strata-cachenode.service <<'EOF'
[Unit]
Description=Strata cache node
After=network-online.target data-strata.mount
[Service]
EnvironmentFile=/etc/strata/node.env
ExecStart=/usr/bin/node ${CACHE_NODE_V8_FLAGS.join(' ')} --import tsx /opt/strata/cachenode/src/main.ts
WorkingDirectory=/opt/strata
Restart=always
RestartPreventExitStatus=2 3
KillSignal=SIGTERM
TimeoutStopSec=30
LimitNOFILE=65536
[Install]
WantedBy=multi-user.target
EOF
systemctl daemon-reload
systemctl enable --now strata-cachenode
`;
}
