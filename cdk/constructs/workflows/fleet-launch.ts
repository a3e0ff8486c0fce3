import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { CAPACITY_TAG, FLEET_TAG } from '../../../core/nodes/ec2-fleet.js';

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
  /**
   * How the nodes are bought. Absent or 'on-demand': RunInstances, one state (today's launch). 'spot' / 'mixed': an
   * instant EC2 Fleet over `instanceTypes` ({@link launchNodeTask}); the launch statements must then be
   * {@link fleetIamStatements}' with the same capacity. @default - on-demand
   */
  readonly capacity?: LaunchCapacity;
}

/** A spot or mixed fleet's launch settings (CacheNodeFleet.capacity). */
export interface LaunchCapacity {
  readonly type: 'on-demand' | 'spot' | 'mixed';
  /** The types a launch may choose among; on-demand launches take them in this order (OnDemandOptions prioritized). */
  readonly instanceTypes: readonly string[];
  /** Mixed: a launch is on demand while fewer of the fleet's running instances than this are. */
  readonly onDemandBase: number;
}

/** The tag each spot or mixed launch puts on its instance: how it was bought ('on-demand' or 'spot'). */
export { CAPACITY_TAG };

/** Whether launches go through an instant EC2 Fleet (spot or mixed) rather than RunInstances. */
export function launchesWithFleet(capacity: LaunchCapacity | undefined): capacity is LaunchCapacity {
  return capacity !== undefined && capacity.type !== 'on-demand';
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
  /** Spot or mixed: the statements of an instant EC2 Fleet launch instead (see below). @default - on-demand */
  capacity?: LaunchCapacity;
}): Pick<FleetLaunch, 'launchStatements' | 'terminateStatements'> {
  const fleet = launchesWithFleet(o.capacity);
  // An instant EC2 Fleet launches with the caller's permissions: CreateFleet and RunInstances on each resource the
  // launch touches, the same as RunInstances alone ("An instant EC2 Fleet does not require" the EC2 Fleet
  // service-linked role: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-fleet-prerequisites.html), plus the
  // fleet itself (fleet/*, tagged in the request) and the Spot requests behind Spot Instances (spot-instances-request/*:
  // its tags cannot be set by an instant fleet, so no tag condition; a request only comes with an instance, which
  // must carry the fleet's tag). DescribeInstances (the node's private IP, and the mixed fleet's on-demand count)
  // supports no resource-level permission.
  const run = fleet ? ['ec2:RunInstances', 'ec2:CreateFleet'] : ['ec2:RunInstances'];
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
        resources: [o.arn('instance', '*'), o.arn('volume', '*'), ...(fleet ? [o.arn('fleet', '*')] : [])],
        conditions: fleetTagged('aws:RequestTag'),
      }),
      ...(fleet
        ? [
            new iam.PolicyStatement({ actions: run, resources: [o.arn('spot-instances-request', '*')] }),
            new iam.PolicyStatement({ actions: ['ec2:DescribeInstances'], resources: ['*'] }),
          ]
        : []),
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
 * Launches one cache node into the subnet and with the ClientToken the begin step chose (`<launch>`:
 * `{ subnetId, clientToken }`), and writes `{ instanceId, privateIp, lifecycle }` at `resultPath` (`lifecycle`:
 * 'on-demand' or 'spot'). A local run overrides the SDK states with the local fleet provider, which answers in the
 * same shapes (core/workflows/local/sdk-integrations.ts).
 *
 * On demand (the default) it is one RunInstances state: one instance from the launch template (which carries the
 * encrypted gp3 data volume, deleted on termination), tagged with the fleet's name. The network settings are all
 * here, in one network interface, and none in the launch template: EC2 refuses a request with a network interface
 * (the template's or its own) next to a top-level SubnetId or SecurityGroupIds (InvalidParameterCombination), and the
 * subnet is only known per launch. `AssociatePublicIpAddress: false` holds for every launch whatever the subnet's own
 * setting, so no node ever gets a public IP.
 *
 * Spot or mixed ({@link FleetLaunch.capacity}), it is a Parallel state with one branch (so callers `next` and
 * `addCatch` it like the task): [mixed: count the fleet's running instances and its Spot ones, and choose on-demand
 * while fewer than `onDemandBase` are on demand] → CreateFleet of type `instant` for one instance over every
 * instance type in the launch's subnet (Spot: price-capacity-optimized; on-demand: the types in the configured
 * order) → fail unless it launched one (an instant fleet answers a launch it could not make with `Errors`, not an
 * error) → DescribeInstances for its private IP (CreateFleet answers with instance ids only).
 */
export function launchNodeTask(
  scope: Construct,
  id: string,
  fleet: FleetLaunch,
  launch: string,
  resultPath: string,
): sfn.TaskStateBase | sfn.Parallel {
  const tags = [
    { Key: FLEET_TAG, Value: fleet.fleetName },
    { Key: 'strata:role', Value: 'cachenode' },
  ];
  if (launchesWithFleet(fleet.capacity)) return fleetLaunch(scope, id, fleet, fleet.capacity, launch, resultPath, tags);
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
    resultSelector: {
      'instanceId.$': '$.Instances[0].InstanceId',
      'privateIp.$': '$.Instances[0].PrivateIpAddress',
      lifecycle: 'on-demand',
    },
    resultPath,
  });
  t.addRetry({ errors: ['Ec2.Ec2Exception'], maxAttempts: 3, interval: Duration.seconds(5), backoffRate: 2 });
  return t;
}

/** Where the spot launch keeps its intermediate results inside its branch (never seen outside the Parallel). */
const SPOT = '$.spotLaunch';

function fleetLaunch(
  scope: Construct,
  id: string,
  fleet: FleetLaunch,
  capacity: LaunchCapacity,
  launch: string,
  resultPath: string,
  tags: { Key: string; Value: string }[],
): sfn.Parallel {
  const c = new Construct(scope, `${id}Steps`);
  const withCapacity = [
    ...tags.map((t) => ({ Key: t.Key, Value: t.Value })),
    { Key: CAPACITY_TAG, 'Value.$': `${SPOT}.capacity` },
  ];
  const create = new Ec2Call(c, 'CreateFleet', {
    service: 'ec2',
    action: 'createFleet',
    parameters: {
      Type: 'instant',
      // Idempotent per launch, as RunInstances' token: a retried state gets the same fleet and instance.
      'ClientToken.$': `${launch}.clientToken`,
      LaunchTemplateConfigs: [
        {
          LaunchTemplateSpecification: { LaunchTemplateId: fleet.launchTemplateId, Version: '$Latest' },
          // One override per type, all in the subnet the begin step chose (its AZ is the one the ring records).
          Overrides: capacity.instanceTypes.map((t, i) => ({
            InstanceType: t,
            'SubnetId.$': `${launch}.subnetId`,
            Priority: i,
          })),
        },
      ],
      TargetCapacitySpecification: { TotalTargetCapacity: 1, 'DefaultTargetCapacityType.$': `${SPOT}.capacity` },
      SpotOptions: { AllocationStrategy: 'price-capacity-optimized' },
      OnDemandOptions: { AllocationStrategy: 'prioritized' },
      TagSpecifications: [
        { ResourceType: 'fleet', Tags: tags },
        { ResourceType: 'instance', Tags: withCapacity },
      ],
    },
    statements: fleet.launchStatements,
    resultSelector: { 'instances.$': '$.Instances', 'errors.$': 'States.JsonToString($.Errors)' },
    resultPath: `${SPOT}.fleet`,
  });
  create.addRetry({ errors: ['Ec2.Ec2Exception'], maxAttempts: 3, interval: Duration.seconds(5), backoffRate: 2 });

  const describe = new Ec2Call(c, 'DescribeNode', {
    service: 'ec2',
    action: 'describeInstances',
    parameters: { 'InstanceIds.$': `States.Array(${SPOT}.fleet.instances[0].InstanceIds[0])` },
    statements: fleet.launchStatements.filter((st) => st.toStatementJson().Action === 'ec2:DescribeInstances'),
    resultSelector: {
      'instanceId.$': '$.Reservations[0].Instances[0].InstanceId',
      'privateIp.$': '$.Reservations[0].Instances[0].PrivateIpAddress',
    },
    resultPath: `${SPOT}.node`,
  });
  // A just-launched instance may not be visible to DescribeInstances yet (InvalidInstanceID.NotFound): EC2's API is
  // eventually consistent (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
  describe.addRetry({ errors: ['Ec2.Ec2Exception'], maxAttempts: 6, interval: Duration.seconds(2), backoffRate: 2 });
  const result = new sfn.Pass(c, 'Launched', {
    parameters: {
      'instanceId.$': `${SPOT}.node.instanceId`,
      'privateIp.$': `${SPOT}.node.privateIp`,
      'lifecycle.$': `${SPOT}.capacity`,
    },
  });
  const noCapacity = new sfn.Fail(c, 'NoCapacity', {
    error: 'Strata.NoCapacity',
    causePath: `${SPOT}.fleet.errors`,
  });
  const launched = new sfn.Choice(c, 'FleetLaunchedOne')
    .when(sfn.Condition.isPresent(`${SPOT}.fleet.instances[0].InstanceIds[0]`), describe.next(result))
    .otherwise(noCapacity);
  const createAndCheck = create.next(launched);

  let start: sfn.IChainable;
  if (capacity.type === 'spot') {
    start = new sfn.Pass(c, 'Spot', { result: sfn.Result.fromString('spot'), resultPath: `${SPOT}.capacity` }).next(
      createAndCheck,
    );
  } else {
    // Each Strata launch is one instance in its own reservation, so reservations count instances.
    const running = [
      { Name: `tag:${FLEET_TAG}`, Values: [fleet.fleetName] },
      { Name: 'instance-state-name', Values: ['pending', 'running'] },
    ];
    const all = new Ec2Call(c, 'CountNodes', {
      service: 'ec2',
      action: 'describeInstances',
      parameters: { Filters: running },
      statements: fleet.launchStatements.filter((st) => st.toStatementJson().Action === 'ec2:DescribeInstances'),
      resultSelector: { 'count.$': 'States.ArrayLength($.Reservations)' },
      resultPath: `${SPOT}.all`,
    });
    // instance-lifecycle "Indicates whether this is a Spot Instance ... (spot | scheduled | capacity-block)"; an
    // on-demand instance has none (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html).
    // The threshold is spot + onDemandBase: the launch is on demand while all < spot + base, i.e. on-demand < base.
    const spot = new Ec2Call(c, 'CountSpotNodes', {
      service: 'ec2',
      action: 'describeInstances',
      parameters: { Filters: [...running, { Name: 'instance-lifecycle', Values: ['spot'] }] },
      statements: fleet.launchStatements.filter((st) => st.toStatementJson().Action === 'ec2:DescribeInstances'),
      resultSelector: { 'threshold.$': `States.MathAdd(States.ArrayLength($.Reservations), ${capacity.onDemandBase})` },
      resultPath: `${SPOT}.spot`,
    });
    for (const t of [all, spot])
      t.addRetry({ errors: ['Ec2.Ec2Exception'], maxAttempts: 3, interval: Duration.seconds(2), backoffRate: 2 });
    const onDemand = new sfn.Pass(c, 'OnDemand', { result: sfn.Result.fromString('on-demand'), resultPath: `${SPOT}.capacity` });
    const spotPick = new sfn.Pass(c, 'SpotAboveBase', { result: sfn.Result.fromString('spot'), resultPath: `${SPOT}.capacity` });
    onDemand.next(createAndCheck);
    spotPick.next(createAndCheck);
    start = all
      .next(spot)
      .next(
        new sfn.Choice(c, 'BelowOnDemandBase')
          .when(sfn.Condition.numberLessThanJsonPath(`${SPOT}.all.count`, `${SPOT}.spot.threshold`), onDemand)
          .otherwise(spotPick),
      );
  }
  const parallel = new sfn.Parallel(scope, id, {
    comment: `Launch a cache node (${capacity.type}: instant EC2 Fleet over ${capacity.instanceTypes.join(', ')})`,
    resultSelector: { 'instanceId.$': '$[0].instanceId', 'privateIp.$': '$[0].privateIp', 'lifecycle.$': '$[0].lifecycle' },
    resultPath,
  });
  parallel.branch(start);
  return parallel;
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
