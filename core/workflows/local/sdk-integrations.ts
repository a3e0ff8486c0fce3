import { randomBytes } from 'node:crypto';
import type { FleetProvider } from '../../nodes/fleet.js';
import type { SdkIntegration } from './asl-runner.js';

/**
 * Stand-ins for the Step Functions SDK integrations the workflows use, for local runs:
 * - {@link localFleetIntegration}: EC2 RunInstances / CreateFleet (instant, a spot or mixed fleet's launch) /
 *   TerminateInstances become the local fleet provider's launch / terminate (a cachenode process per "instance"),
 *   and DescribeInstances lists its nodes, answering in the EC2 API's shapes. What it does not check: instance types,
 *   subnets, Spot capacity or prices (a local "Spot" node is never interrupted unless a test says so), IAM;
 * - {@link awsSdkIntegration}: the same call through the AWS SDK v3 (e.g. against LocalStack's EC2 API), the way
 *   Step Functions makes it: `aws-sdk:ec2:runInstances` with PascalCase parameters = `RunInstancesCommand`.
 */
export function localFleetIntegration(
  fleet: FleetProvider,
  newNodeId = () => `n-${Date.now().toString(36)}-${randomBytes(2).toString('hex')}`,
): SdkIntegration {
  // How each node launched here was bought: DescribeInstances' InstanceLifecycle ('spot', or absent on demand).
  const spot = new Set<string>();
  const instance = (InstanceId: string) => ({
    InstanceId,
    PrivateIpAddress: '127.0.0.1',
    State: { Name: 'running' },
    ...(spot.has(InstanceId) ? { InstanceLifecycle: 'spot' } : {}),
  });
  return async (service, action, input) => {
    if (service === 'ec2' && action === 'runInstances') {
      const id = newNodeId();
      await fleet.launch(id);
      return { Instances: [{ InstanceId: id, PrivateIpAddress: '127.0.0.1', State: { Name: 'running' } }] };
    }
    if (service === 'ec2' && action === 'createFleet') {
      // An instant fleet of one: launched as DefaultTargetCapacityType says, with the first override's type.
      const target = input.TargetCapacitySpecification as { DefaultTargetCapacityType?: string } | undefined;
      const lifecycle = target?.DefaultTargetCapacityType === 'spot' ? 'spot' : 'on-demand';
      const configs = (input.LaunchTemplateConfigs as { Overrides?: { InstanceType?: string }[] }[] | undefined) ?? [];
      const id = newNodeId();
      await fleet.launch(id);
      if (lifecycle === 'spot') spot.add(id);
      return {
        FleetId: `fleet-${id}`,
        Errors: [],
        Instances: [{ InstanceIds: [id], InstanceType: configs[0]?.Overrides?.[0]?.InstanceType, Lifecycle: lifecycle }],
      };
    }
    if (service === 'ec2' && action === 'describeInstances') {
      // By id, or every node (the filters a spot launch uses: the fleet's tag, running, and instance-lifecycle).
      const ids = input.InstanceIds as string[] | undefined;
      const filters = (input.Filters as { Name: string; Values: string[] }[] | undefined) ?? [];
      const wantsSpot = filters.some((f) => f.Name === 'instance-lifecycle' && f.Values.includes('spot'));
      const nodes = ids ?? (await fleet.list()).map((n) => n.nodeId).filter((n) => !wantsSpot || spot.has(n));
      return { Reservations: nodes.map((n) => ({ Instances: [instance(n)] })) };
    }
    if (service === 'ec2' && action === 'terminateInstances') {
      const ids = (input.InstanceIds as string[] | undefined) ?? [];
      for (const id of ids) {
        await fleet.terminate(id);
        spot.delete(id);
      }
      return { TerminatingInstances: ids.map((InstanceId) => ({ InstanceId, CurrentState: { Name: 'shutting-down' } })) };
    }
    throw new Error(`the local fleet cannot stand in for aws-sdk:${service}:${action}`);
  };
}

type SdkClient = { send(command: unknown): Promise<unknown> };

/**
 * Calls `<service>:<action>` through the AWS SDK v3 client given for the service: the action's command class is
 * looked up in the service's package (`@aws-sdk/client-<service>`), as Step Functions' SDK integrations do.
 */
export function awsSdkIntegration(
  clients: Record<string, { client: SdkClient; commands: Record<string, unknown> }>,
): SdkIntegration {
  return async (service, action, input) => {
    const c = clients[service];
    if (!c) throw new Error(`no SDK client configured for aws-sdk:${service}`);
    const Command = c.commands[`${action.charAt(0).toUpperCase()}${action.slice(1)}Command`] as
      (new (i: unknown) => unknown) | undefined;
    if (!Command) throw new Error(`aws-sdk:${service}:${action} has no command in the service's SDK package`);
    try {
      return await c.client.send(new Command(input));
    } catch (e) {
      // Step Functions names SDK errors <Service>.<Exception>; retriers and catchers match on that.
      const err = e as Error;
      const named = new Error(err.message, { cause: e });
      named.name = `${service.charAt(0).toUpperCase()}${service.slice(1)}.${err.name}`;
      throw named;
    }
  };
}
