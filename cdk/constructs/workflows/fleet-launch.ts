import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { FLEET_TAG } from '../../../core/nodes/ec2-fleet.js';

/** What the workflows launch cache nodes from (the Fleet stack's launch template, in the fleet's subnets). */
export interface FleetLaunch {
  /** Value of the {@link FLEET_TAG} tag on the fleet's instances and volumes. */
  readonly fleetName: string;
  /** Holds no network settings: each launch names its subnet (see {@link launchNodeTask}). */
  readonly launchTemplateId: string;
  /** The fleet's security group, given to each node's network interface. */
  readonly securityGroupId: string;
  /** RunInstances' IAM statements: every resource type it touches, with the conditions that keep it to the fleet. */
  readonly launchStatements: iam.PolicyStatement[];
  /** TerminateInstances' IAM statements: the fleet's own instances only. */
  readonly terminateStatements: iam.PolicyStatement[];
}

/** ARNs in the fleet's account and region: `arn(type, id)`, e.g. `arn('instance', '*')`; images have no account. */
export type Ec2Arn = (type: string, id: string) => string;

/**
 * The least-privilege IAM statements of {@link launchNodeTask} and {@link terminateNodeTask} (documented keys, see
 * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html):
 * - RunInstances on the launch template, the fleet's subnets and security group, and new network interfaces;
 *   on images only Amazon's (`ec2:Owner` = `amazon`: the AMI is the latest AL2023 from its public SSM parameter);
 *   on new instances and volumes only when the request tags them with the fleet's {@link FLEET_TAG}
 *   (`aws:RequestTag/...`, which RunInstances' TagSpecifications always carry);
 * - TerminateInstances only on instances carrying that tag (`ec2:ResourceTag/...`, as in the documented example
 *   that narrows TerminateInstances to tagged instances).
 */
export function fleetIamStatements(o: {
  arn: Ec2Arn;
  fleetName: string;
  launchTemplateId: string;
  subnetIds: readonly string[];
  securityGroupId: string;
}): Pick<FleetLaunch, 'launchStatements' | 'terminateStatements'> {
  const run = ['ec2:RunInstances'];
  const named = [
    o.arn('launch-template', o.launchTemplateId),
    ...o.subnetIds.map((s) => o.arn('subnet', s)),
    o.arn('security-group', o.securityGroupId),
    o.arn('network-interface', '*'),
  ];
  const fleetTagged = (key: string) => ({ StringEquals: { [`${key}/${FLEET_TAG}`]: o.fleetName } });
  return {
    launchStatements: [
      new iam.PolicyStatement({ actions: run, resources: named }),
      new iam.PolicyStatement({
        actions: run,
        resources: [o.arn('image', '*')],
        conditions: { StringEquals: { 'ec2:Owner': 'amazon' } },
      }),
      new iam.PolicyStatement({
        actions: run,
        resources: [o.arn('instance', '*'), o.arn('volume', '*')],
        conditions: fleetTagged('aws:RequestTag'),
      }),
    ],
    terminateStatements: [
      new iam.PolicyStatement({
        actions: ['ec2:TerminateInstances'],
        resources: [o.arn('instance', '*')],
        conditions: fleetTagged('ec2:ResourceTag'),
      }),
    ],
  };
}

/**
 * An SDK-integration Task whose IAM statements are given whole. CallAwsService derives a single statement from
 * `iamResources`, with no conditions; EC2's launch and terminate need one per resource type, with its own.
 */
class Ec2Call extends tasks.CallAwsService {
  constructor(
    scope: Construct,
    id: string,
    props: Omit<tasks.CallAwsServiceProps, 'iamResources' | 'iamAction' | 'additionalIamStatements'> & {
      readonly statements: iam.PolicyStatement[];
    },
  ) {
    const { statements, ...rest } = props;
    super(scope, id, { ...rest, iamResources: [] });
    this.taskPolicies!.splice(0, this.taskPolicies!.length, ...statements);
  }
}

/**
 * RunInstances through the Step Functions SDK integration: one instance from the launch template (which
 * carries the encrypted gp3 data volume, deleted on termination), tagged with the fleet's name, in the subnet and
 * with the ClientToken the begin step chose (`<launch>`: `{ subnetId, clientToken }`). The result is trimmed to
 * `{ instanceId, privateIp }`. A local run overrides this state with the local fleet provider, which answers in
 * the same shape.
 *
 * The network settings are all here, in one network interface, and none in the launch template: EC2 refuses a
 * request with a network interface (the template's or its own) next to a top-level SubnetId or SecurityGroupIds
 * (InvalidParameterCombination), and the subnet is only known per launch. Here `AssociatePublicIpAddress: false`
 * holds for every launch whatever the subnet's own setting, so no node ever gets a public IP.
 */
export function launchNodeTask(
  scope: Construct,
  id: string,
  fleet: FleetLaunch,
  launch: string,
  resultPath: string,
): tasks.CallAwsService {
  const tags = [
    { Key: FLEET_TAG, Value: fleet.fleetName },
    { Key: 'strata:role', Value: 'cachenode' },
  ];
  const t = new Ec2Call(scope, id, {
    service: 'ec2',
    action: 'runInstances',
    parameters: {
      MinCount: 1,
      MaxCount: 1,
      // Idempotent per launch: a retried state gets the same instance instead of a second one.
      'ClientToken.$': `${launch}.clientToken`,
      LaunchTemplate: { LaunchTemplateId: fleet.launchTemplateId, Version: '$Latest' },
      NetworkInterfaces: [
        {
          DeviceIndex: 0,
          'SubnetId.$': `${launch}.subnetId`,
          Groups: [fleet.securityGroupId],
          AssociatePublicIpAddress: false,
          DeleteOnTermination: true,
        },
      ],
      TagSpecifications: [
        { ResourceType: 'instance', Tags: tags },
        { ResourceType: 'volume', Tags: tags },
      ],
    },
    statements: fleet.launchStatements,
    resultSelector: { 'instanceId.$': '$.Instances[0].InstanceId', 'privateIp.$': '$.Instances[0].PrivateIpAddress' },
    resultPath,
  });
  t.addRetry({ errors: ['Ec2.Ec2Exception'], maxAttempts: 3, interval: Duration.seconds(5), backoffRate: 2 });
  return t;
}

/** TerminateInstances through the SDK integration (the data volume is deleted with the instance). */
export function terminateNodeTask(
  scope: Construct,
  id: string,
  fleet: FleetLaunch,
  instanceIdPath: string,
): tasks.CallAwsService {
  return new Ec2Call(scope, id, {
    service: 'ec2',
    action: 'terminateInstances',
    parameters: { 'InstanceIds.$': `States.Array(${instanceIdPath})` },
    statements: fleet.terminateStatements,
    resultPath: sfn.JsonPath.DISCARD,
  });
}
