import { Duration } from 'aws-cdk-lib';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { FLEET_TAG } from '../../../layers/core/warm/ec2-fleet.js';

/** What the workflows launch cache nodes from (the Fleet stack's launch template, in the fleet's subnets). */
export interface FleetLaunch {
  readonly fleetName: string;
  readonly launchTemplateId: string;
  readonly subnetIds: string[];
  /** ARNs RunInstances may touch (instance, volume, network interface, subnet, security group, launch template, image). */
  readonly iamResources: string[];
  /** ARNs TerminateInstances may touch (the account's instances in the region). */
  readonly terminateResources: string[];
}

/**
 * RunInstances through the Step Functions SDK integration: one instance from the launch template (which
 * carries the encrypted gp3 data volume, deleted on termination), tagged with the fleet's name. The result is
 * trimmed to `{ instanceId, privateIp }`. A local run overrides this state with the local fleet provider,
 * which answers in the same shape.
 */
export function launchNodeTask(scope: Construct, id: string, fleet: FleetLaunch, resultPath: string): tasks.CallAwsService {
  const tags = [{ Key: FLEET_TAG, Value: fleet.fleetName }, { Key: 'strata:role', Value: 'cachenode' }];
  const t = new tasks.CallAwsService(scope, id, {
    service: 'ec2',
    action: 'runInstances',
    parameters: {
      MinCount: 1,
      MaxCount: 1,
      // Idempotent per execution: a retried state gets the same instance instead of a second one.
      'ClientToken.$': '$$.Execution.Name',
      LaunchTemplate: { LaunchTemplateId: fleet.launchTemplateId, Version: '$Latest' },
      SubnetId: fleet.subnetIds[0],
      TagSpecifications: [
        { ResourceType: 'instance', Tags: tags },
        { ResourceType: 'volume', Tags: tags },
      ],
    },
    iamResources: fleet.iamResources,
    iamAction: 'ec2:RunInstances',
    resultSelector: { 'instanceId.$': '$.Instances[0].InstanceId', 'privateIp.$': '$.Instances[0].PrivateIpAddress' },
    resultPath,
  });
  t.addRetry({ errors: ['Ec2.Ec2Exception'], maxAttempts: 3, interval: Duration.seconds(5), backoffRate: 2 });
  return t;
}

/** TerminateInstances through the SDK integration (the data volume is deleted with the instance). */
export function terminateNodeTask(scope: Construct, id: string, fleet: FleetLaunch, instanceIdPath: string): tasks.CallAwsService {
  return new tasks.CallAwsService(scope, id, {
    service: 'ec2',
    action: 'terminateInstances',
    parameters: { 'InstanceIds.$': `States.Array(${instanceIdPath})` },
    iamResources: fleet.terminateResources,
    iamAction: 'ec2:TerminateInstances',
    resultPath: sfn.JsonPath.DISCARD,
  });
}
