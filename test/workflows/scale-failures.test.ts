import {
  CreateLaunchTemplateCommand,
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DeleteLaunchTemplateCommand,
  DescribeInstancesCommand,
  EC2Client,
} from '@aws-sdk/client-ec2';
import * as ec2Commands from '@aws-sdk/client-ec2';
import { ringProblem } from '../../core/ring/document.js';
import { RingStore } from '../../core/ring/store.js';
import { LocalWorkflowRunner } from '../../core/workflows/local/asl-runner.js';
import { awsSdkIntegration } from '../../core/workflows/local/sdk-integrations.js';
import { stepHandlers } from '../../core/workflows/steps/handlers.js';
import { synthesizeWorkflowDefinitions } from '../../cdk/lib/workflow-definitions.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';
import { summary, Workload } from '../integration/warm-workload.js';
import { harness, runUnderLoad } from './harness.js';

const FAST = { streamMaxMs: 100, graceMs: 300 };
/** Throttled so that a session takes several stream steps: the failure lands mid-stream. */
const THROTTLED = { ...FAST, rateBytesPerSec: 200_000 };

/** Fails every `migrate.stream` call of the plan's session `failOn` after `okCalls` successful calls to it. */
function failStreamOf(failOn: (sessionId: string) => boolean, okCalls: number) {
  return (steps: ReturnType<typeof stepHandlers>) => {
    const calls = new Map<string, number>();
    return {
      ...steps,
      'migrate.stream': async (input: Record<string, unknown>) => {
        const id = String(input.sessionId);
        const n = (calls.get(id) ?? 0) + 1;
        calls.set(id, n);
        if (failOn(id) && n > okCalls)
          throw Object.assign(new Error(`injected: source of ${id} unreachable`), { name: 'InjectedFailure' });
        return steps['migrate.stream'](input);
      },
    };
  };
}

async function expectConsistentAndComplete(ringStore: RingStore, w: Workload) {
  const ring = (await ringStore.load())!;
  expect(ringProblem(ring)).toBeUndefined();
  expect(ring.ranges.some((r) => r.pending)).toBe(false);
  expect(ring.nodes.every((n) => n.state === 'NORMAL')).toBe(true);
  expect(w.errors).toEqual([]);
  expect(w.staleReads).toEqual([]);
  const { missing } = await w.verify(ringStore);
  expect(missing).toEqual([]);
  return ring;
}

describe('ScaleOut rollback (injected step failures)', () => {
  it('a failure in the first session: the joining node owns nothing, leaves the ring and is terminated; nothing is lost', async () => {
    const h = await harness({ wrapSteps: failStreamOf((id) => id.endsWith('-s0'), 2) });
    try {
      const { w, done, name } = await runUnderLoad(h, 'scale-out', { mode: 'incremental', ...THROTTLED });
      expect(done.status).toBe('FAILED');
      expect(done.error?.Error).toBe('InjectedFailure');
      expect(done.states).toEqual(expect.arrayContaining(['RollBack', 'TerminateNode', 'ScaleOutFailed']));
      expect(done.states.filter((x) => x === 'StreamSession').length).toBeGreaterThan(2); // it failed mid-stream
      const ring = await expectConsistentAndComplete(new RingStore(h.cas), w);
      expect(ring.nodes.map((n) => n.id).sort()).toEqual(['n1', 'n2', 'n3']);
      expect((await h.fleet.list()).map((n) => n.nodeId).sort()).toEqual(['n1', 'n2', 'n3']); // the instance is gone
      expect((await h.progress.get(name))?.outcome).toBe('rolled-back');
      expect(summary(w)).toMatch(/errors 0 .*stale reads 0/);
    } finally {
      await h.close();
    }
  }, 300_000);

  it('a failure after one session was published (incremental): the node keeps what it owns and stays, the rest is released', async () => {
    const h = await harness({ wrapSteps: failStreamOf((id) => id.endsWith('-s1'), 1) });
    try {
      const { w, done } = await runUnderLoad(h, 'scale-out', { mode: 'incremental', ...THROTTLED });
      expect(done.status).toBe('FAILED');
      expect(done.states).toContain('RollBack');
      expect(done.states).not.toContain('TerminateNode');
      expect(done.states.filter((x) => x === 'PublishSession')).toHaveLength(1);
      const ring = await expectConsistentAndComplete(new RingStore(h.cas), w);
      expect(ring.nodes).toHaveLength(4);
      const joined = ring.nodes.find((n) => !['n1', 'n2', 'n3'].includes(n.id))!;
      expect(ring.ranges.some((r) => r.owner === joined.id)).toBe(true);
    } finally {
      await h.close();
    }
  }, 300_000);
});

describe('ScaleIn state machine', () => {
  it('4 -> 3 under load: the least-loaded node drains to its successors and is terminated; nothing is lost', async () => {
    const h = await harness({ nodes: ['n1', 'n2', 'n3', 'n4'] });
    try {
      const { w, done, name } = await runUnderLoad(h, 'scale-in', { ...FAST });
      expect(done.error).toBeUndefined();
      expect(done.status).toBe('SUCCEEDED');
      const ring = await expectConsistentAndComplete(new RingStore(h.cas), w);
      expect(ring.nodes).toHaveLength(3);
      const removed = ['n1', 'n2', 'n3', 'n4'].find((id) => !ring.nodes.some((n) => n.id === id))!;
      expect((await h.fleet.list()).map((n) => n.nodeId)).not.toContain(removed);
      expect(done.states).toContain('TerminateNode');
      expect((await h.progress.get(name))?.facts.nodeId).toBe(removed);
    } finally {
      await h.close();
    }
  }, 300_000);

  it('refuses to drain the last node with a typed error, before touching the ring', async () => {
    const h = await harness({ nodes: ['n1'] });
    try {
      const before = (await h.ring.load())!.version;
      const done = await h.runner.wait(h.runner.start('scale-in', {}).name);
      expect(done.status).toBe('FAILED');
      expect(done.error?.Error).toBe('NoNodeToRemoveError');
      expect((await h.ring.load())!.version).toBe(before);
    } finally {
      await h.close();
    }
  }, 300_000);
});

/**
 * The EC2 SDK integrations against LocalStack's EC2 API (its instances are mocks: no daemon ever answers, so
 * the launch times out). Verifies RunInstances from the launch template with tags, into the subnet the begin step
 * chose, then the rollback's TerminateInstances. (LocalStack checks none of EC2's parameter rules:
 * test/infra/ec2-launch-rules.test.ts does.)
 */
describe('ScaleOut with the EC2 SDK integrations (LocalStack)', () => {
  it('a node that never becomes healthy is rolled back: the instance is terminated and the ring is unchanged', async () => {
    const ec2 = new EC2Client({
      endpoint: testS3Endpoint(),
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: '10.77.0.0/16' }));
    const subnet = await ec2.send(new CreateSubnetCommand({ VpcId: vpc.Vpc!.VpcId!, CidrBlock: '10.77.1.0/24' }));
    const group = { VpcId: vpc.Vpc!.VpcId, GroupName: uniqueName('strata-wf'), Description: 'Strata cache nodes' };
    const sg = await ec2.send(new CreateSecurityGroupCommand(group));
    const lt = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: uniqueName('strata-wf'),
        LaunchTemplateData: { ImageId: 'ami-12345678', InstanceType: 't4g.small' },
      }),
    );
    const h = await harness();
    try {
      const fleetSubnets = [{ subnetId: subnet.Subnet!.SubnetId!, availabilityZone: subnet.Subnet!.AvailabilityZone! }];
      const runner = new LocalWorkflowRunner({
        definitions: synthesizeWorkflowDefinitions({
          launchTemplateId: lt.LaunchTemplate!.LaunchTemplateId!,
          securityGroupId: sg.GroupId,
        }),
        steps: stepHandlers({ ...h.deps, fleetSubnets, nodeUrl: async (n) => `http://${n.privateIp}:1` }),
        sdk: awsSdkIntegration({ ec2: { client: ec2, commands: ec2Commands } }),
        waitOverridesMs: { WaitForNode: 100 },
        retryIntervalMs: 20,
      });
      const before = (await h.ring.load())!;
      const done = await runner.wait(runner.start('scale-out', { launchTimeoutMs: 1000 }).name);
      expect(done.status).toBe('FAILED');
      expect(done.error?.Error).toBe('NodeLaunchTimeoutError');
      expect(done.states).toEqual(
        expect.arrayContaining(['LaunchNode', 'CheckNode', 'WaitForNode', 'RollBack', 'TerminateNode']),
      );
      const all = await ec2.send(
        new DescribeInstancesCommand({
          Filters: [
            { Name: 'tag:strata:fleet', Values: ['strata-local'] },
            { Name: 'subnet-id', Values: [subnet.Subnet!.SubnetId!] },
          ],
        }),
      );
      const instances = all.Reservations!.flatMap((r) => r.Instances!);
      expect(instances).toHaveLength(1);
      expect(['shutting-down', 'terminated']).toContain(instances[0]!.State!.Name);
      const after = (await h.ring.load())!;
      expect(after.nodes.map((n) => n.id)).toEqual(before.nodes.map((n) => n.id));
      await runner.close();
    } finally {
      await h.close();
      await ec2
        .send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: lt.LaunchTemplate!.LaunchTemplateId! }))
        .catch(() => undefined);
      ec2.destroy();
    }
  }, 300_000); // a hang bound: a loaded 2-core machine has taken over 120 s here
});
