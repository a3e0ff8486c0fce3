import {
  CreateLaunchTemplateCommand,
  DeleteLaunchTemplateCommand,
  DescribeInstanceAttributeCommand,
  DescribeInstancesCommand,
  DescribeVolumesCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { defaultUserData, Ec2Fleet, FLEET_TAG, NODE_ID_TAG } from '../../core/nodes/ec2-fleet.js';
import { CACHE_NODE_V8_FLAGS } from '../../core/nodes/node-process.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';

/**
 * Against LocalStack's EC2 API (mock instances: no daemon ever runs in them, so the health check is injected).
 * Verifies the API calls and their effects: launch template, encrypted gp3 data volume, tags, user data,
 * waiting for running and healthy with the allocation time, terminate and volume cleanup.
 */
describe('Ec2Fleet (LocalStack EC2 API)', () => {
  let ec2: EC2Client;
  let templateId: string;
  const fleetName = uniqueName('fleet');

  beforeAll(async () => {
    ec2 = new EC2Client({
      endpoint: testS3Endpoint(),
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const lt = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: uniqueName('strata-node'),
        LaunchTemplateData: { ImageId: 'ami-12345678', InstanceType: 't3.medium' },
      }),
    );
    templateId = lt.LaunchTemplate!.LaunchTemplateId!;
  });

  afterAll(async () => {
    await ec2.send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: templateId })).catch(() => undefined);
    ec2.destroy();
  });

  function fleet(
    health: (url: string, id: string) => Promise<boolean>,
    extra: Partial<ConstructorParameters<typeof Ec2Fleet>[0]> = {},
  ): Ec2Fleet {
    return new Ec2Fleet({
      client: ec2,
      fleet: fleetName,
      launchTemplate: { id: templateId },
      dataVolume: { sizeGiB: 50, iops: 4000, throughputMiBps: 250 },
      tags: { team: 'cache' },
      secretParameter: '/strata/test/secret',
      healthCheck: health,
      pollIntervalMs: 50,
      ...extra,
    });
  }

  it('launches from the template with an encrypted gp3 volume and tags, waits until healthy, then terminates and deletes the volume', async () => {
    const probes: string[] = [];
    // The daemon "comes up" on the third probe.
    const f = fleet(async (url, id) => {
      probes.push(`${id}@${url}`);
      return probes.length >= 3;
    });
    const node = await f.launch('node-a');
    expect(node.instance).toMatch(/^i-/);
    expect(node.url).toMatch(/^http:\/\/\d+\.\d+\.\d+\.\d+:7070$/);
    expect(probes).toHaveLength(3);
    expect(probes[0]).toBe(`node-a@${node.url}`);
    expect(node.allocationMs).toBeGreaterThanOrEqual(100); // at least the two poll intervals between probes

    const desc = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [node.instance] }));
    const inst = desc.Reservations![0]!.Instances![0]!;
    const tags = Object.fromEntries(inst.Tags!.map((t) => [t.Key, t.Value]));
    expect(tags).toMatchObject({
      [FLEET_TAG]: fleetName,
      [NODE_ID_TAG]: 'node-a',
      team: 'cache',
      'aws:ec2launchtemplate:id': templateId,
    });
    const vols = await ec2.send(
      new DescribeVolumesCommand({ Filters: [{ Name: 'attachment.instance-id', Values: [node.instance] }] }),
    );
    expect(vols.Volumes).toHaveLength(1);
    expect(vols.Volumes![0]).toMatchObject({ VolumeType: 'gp3', Encrypted: true, Size: 50 });
    expect(Object.fromEntries(vols.Volumes![0]!.Tags!.map((t) => [t.Key, t.Value]))).toMatchObject({ [NODE_ID_TAG]: 'node-a' });
    const ud = await ec2.send(new DescribeInstanceAttributeCommand({ InstanceId: node.instance, Attribute: 'userData' }));
    const script = Buffer.from(ud.UserData!.Value!, 'base64').toString('utf8');
    expect(script).toContain("NODE_ID='node-a'");
    expect(script).toContain("--name '/strata/test/secret'");
    expect(script).not.toMatch(/STRATA_NODE_SECRET=/);
    expect(script).toContain(
      `ExecStart=/usr/bin/node ${CACHE_NODE_V8_FLAGS.join(' ')} --import tsx /opt/strata/cachenode/src/main.ts`,
    );

    await expect(f.list()).resolves.toEqual([node]);
    await f.terminate('node-a');
    const after = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [node.instance] }));
    expect(after.Reservations![0]!.Instances![0]!.State!.Name).toBe('terminated');
    const left = await ec2.send(
      new DescribeVolumesCommand({
        Filters: [
          { Name: `tag:${NODE_ID_TAG}`, Values: ['node-a'] },
          { Name: `tag:${FLEET_TAG}`, Values: [fleetName] },
        ],
      }),
    );
    expect(left.Volumes ?? []).toEqual([]);
    await expect(f.list()).resolves.toEqual([]);
  });

  it('accepts an injected readiness rule (instances that stay pending) and terminates a launch that never gets healthy', async () => {
    const states: string[] = [];
    const f = fleet(async () => false, {
      isRunning: (i) => {
        states.push(i.State!.Name!);
        return i.State!.Name === 'pending' || i.State!.Name === 'running';
      },
      launchTimeoutMs: 1500,
    });
    await expect(f.launch('node-b')).rejects.toThrow(/not ready within/);
    expect(states.length).toBeGreaterThanOrEqual(1);
    const desc = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [
          { Name: `tag:${NODE_ID_TAG}`, Values: ['node-b'] },
          { Name: `tag:${FLEET_TAG}`, Values: [fleetName] },
        ],
      }),
    );
    const insts = desc.Reservations!.flatMap((r) => r.Instances!);
    expect(insts.length).toBe(1);
    expect(['shutting-down', 'terminated']).toContain(insts[0]!.State!.Name);
  });

  it('renders a boot script that mounts the data volume and runs the daemon under systemd', () => {
    const s = defaultUserData({ nodeId: 'n1', port: 7070, deviceName: '/dev/sdf' });
    expect(s).toMatch(/^#!\/bin\/bash\nset -euo pipefail/);
    expect(s).toContain('mkfs.xfs');
    expect(s).toContain('STRATA_NODE_DATA_DIR=/data/strata');
    expect(s).toContain('systemctl enable --now strata-cachenode');
  });
});
