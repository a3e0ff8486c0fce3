import { CfnOutput, Duration, Token, Validations } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { FLEET_TAG } from '../../core/nodes/ec2-fleet.js';
import { COMMIT_REQUEST_SUFFIX, SWEEP_REQUEST_SUFFIX, SWEEPS_FOLDER, UPLOADS_FOLDER } from '../../core/tiers/storage-key.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { policyEncryptionKeys } from '../constructs/policy-encryption-keys.js';
import { PolicyTicker } from '../constructs/policy-ticker.js';
import { StrataFunction } from '../constructs/strata-function.js';
import { fleetIamStatements, launchesWithFleet } from '../constructs/workflows/fleet-launch.js';
import { StrataWorkflows, WORKFLOW_IDS } from '../constructs/workflows/strata-workflows.js';
import { REPO_ROOT } from '../lib/packaging.js';
import { policyDefaultsEnvironment } from '../lib/policy-defaults.js';
import { stackUuid } from '../lib/unique-names.js';
import type { DataStack } from './data-stack.js';
import type { FleetStack } from './fleet-stack.js';
import type { StrataNetwork } from './network-stack.js';
import { logRetention, removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

/** EventBridge's detail-type of EC2's two-minute Spot interruption notice. */
export const SPOT_INTERRUPTION_DETAIL_TYPE = 'EC2 Spot Instance Interruption Warning';
/** EventBridge's detail-type of EC2's rebalance recommendation (a Spot Instance at elevated risk of interruption). */
export const REBALANCE_DETAIL_TYPE = 'EC2 Instance Rebalance Recommendation';

export interface WorkflowsStackProps extends StrataStackProps {
  /** Step Lambdas run in the VPC as coordinators. */
  readonly network: StrataNetwork;
  readonly data: Pick<DataStack, 'hotTier' | 'coldTier'>;
  /** ScaleOut/ScaleIn/ReplaceNode launch and terminate nodes from this launch template. */
  readonly fleet: Pick<FleetStack, 'fleet'>;
  /**
   * The KMS keys policies may encrypt with (ApiStackProps.policyEncryptionKeys): the policy evaluator checks the
   * policies it loads against their names (STRATA_KEYRING_KEYS), and uses none of them (it moves stored bytes).
   * @default - none
   */
  readonly policyEncryptionKeys?: readonly kms.IKey[];
}

/**
 * Workflows (Step Functions): ScaleOut, ScaleIn, EvictToS3, TierMigrate and ReplaceNode (cdk/constructs/workflows), one step
 * Lambda in the VPC that runs every Task state's step (lambdas/workflows/steps.ts: the ring store, the fleet
 * secret, the hot and cold tiers), EC2 launch/terminate as SDK integrations, and the policy ticker
 * (cdk/constructs/policy-ticker.ts: the policy's background rules, the default ones included, every minute). Without
 * the policy evaluator (`policies.evaluator: false`) it runs paper 000's scale trigger and EvictToS3 on schedules
 * instead, and the Monitoring stack's node-fill alarm starts EvictToS3 (or ScaleOut) through
 * {@link WorkflowsStack.respondTo}.
 */
export class WorkflowsStack extends StrataStack {
  /** Execution logs of every state machine (`/aws/vendedlogs/states/...` avoids the resource-policy size limit). */
  readonly stateMachineLogs: logs.LogGroup;
  readonly stepFunction: StrataFunction;
  /**
   * Paper 000's scale-out trigger on its own schedule: only with `policies.evaluator: false` (with the evaluator, the
   * trigger is the policy rule default-prelaunch, core/policy/defaults.ts).
   */
  readonly scaleTriggerFunction?: StrataFunction;
  readonly stateMachines: Readonly<Record<WorkflowName, sfn.StateMachine>>;
  /** The scheduled policy evaluator (`policies.evaluator`, on by default); undefined when switched off. */
  readonly policyTicker?: PolicyTicker;
  /**
   * Drains a Spot node on EC2's interruption warning (or rebalance recommendation): only for a spot or mixed fleet
   * (`fleet.capacity`), since EC2 sends those events for Spot Instances only.
   */
  readonly spotInterruptionFunction?: StrataFunction;
  /**
   * The EventBridge rule that starts the upload-commit workflow on an upload's commit request (its S3 event); none
   * with `workflows.asyncUploadCompletion` false.
   */
  readonly uploadCommitRule?: events.Rule;
  /**
   * The EventBridge rule that starts the invalidation-sweep workflow on a sweep request (its S3 event), written by a
   * data function's flush or invalidation; none with `workflows.invalidationSweeps` false.
   */
  readonly sweepRequestRule?: events.Rule;
  /** The EventBridge rule that sends EC2's Spot events to {@link spotInterruptionFunction}. */
  spotInterruptionRule?: events.Rule;

  constructor(scope: Construct, id: string, props: WorkflowsStackProps) {
    super(scope, id, {
      description: `Strata ${props.config.name}: workflows (Step Functions: scale-out, scale-in, evict to S3, tier migration, node replacement)`,
      ...props,
    });
    const { config, network, data, fleet } = props;
    this.stateMachineLogs = new logs.LogGroup(this, 'StateMachineLogs', {
      // Retained in staging/prod: a fixed name would still be taken after the stack is deleted and stop it from being
      // created again (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html),
      // so the name ends with the stack's UUID (a new one per created stack).
      logGroupName: `/aws/vendedlogs/states/strata-${config.name}-${stackUuid(this)}`,
      retention: logRetention(config),
      removalPolicy: removalPolicy(config),
    });

    this.stepFunction = new StrataFunction(this, 'StepFunction', {
      entry: `${REPO_ROOT}/lambdas/workflows/steps.ts`,
      description: `Strata ${config.name} workflow steps (scale-out, scale-in, evict to S3, tier migration, node replacement)`,
      vpc: network.vpc,
      vpcSubnets: network.privateSubnets,
      securityGroup: network.coordinatorSecurityGroup,
      memoryMb: 1024,
      // A stream or eviction step returns after its maxMs (60 s by default). The upload-commit step copies a whole
      // staged upload in one go (S3 copies server-side, the function only waits), so the step Lambda gets Lambda's
      // longest timeout, 15 minutes (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html).
      timeoutSeconds: 900,
      ...(config.workflows.stepReservedConcurrency !== undefined
        ? { reservedConcurrency: config.workflows.stepReservedConcurrency }
        : {}),
      logRetention: logRetention(config),
      logRemovalPolicy: removalPolicy(config),
      environment: { STRATA_ENV: config.name },
    });
    // The ring's writers: the ring, migrations, executions' progress and scale-out locks (ColdTierBucket.grantRingWriters).
    this.stepFunction
      .bindHotTier(data.hotTier)
      .bindColdTier(data.coldTier)
      .bindRingStore(data.coldTier, { writers: true })
      .bindFleet(fleet.fleet);
    // The upload-commit step commits exactly as the API's synchronous completion does, so it compiles the same policy
    // (its namespace's default TTL, its refusal of uploads under transforms): the policy in force, the configured
    // namespace policies, the keyring's names (no KMS use), the declared Lambda origins and the default rules' settings.
    this.stepFunction.bindPolicyStore(data.coldTier, { write: false });
    // With the scheduled evaluator, policies may hold background rules: a function that compiles them must know.
    if (config.policies.evaluator) this.stepFunction.addEnvironment('STRATA_POLICY_EVALUATOR', '1');
    if (config.api.namespaces) this.stepFunction.addEnvironment('STRATA_NAMESPACES', JSON.stringify(config.api.namespaces));
    const stepKeys = policyEncryptionKeys(this, props.policyEncryptionKeys);
    if (stepKeys) this.stepFunction.bindKeyring(stepKeys, { use: false });
    this.stepFunction.bindLambdaOrigins(config.api.lambdaOrigins, { invoke: false });
    for (const [k, v] of Object.entries(policyDefaultsEnvironment(config))) this.stepFunction.addEnvironment(k, v);

    const region = this.region;
    const account = this.account;
    // ScaleOut's begin step spreads the nodes over these subnets, one per AZ (core/workflows/steps/fleet-placement.ts).
    const subnets = network.vpc.selectSubnets(network.privateSubnets).subnets;
    const fleetSubnets = subnets.map((s) => ({ subnetId: s.subnetId, availabilityZone: s.availabilityZone }));
    this.stepFunction.function.addEnvironment('STRATA_FLEET_SUBNETS', this.toJsonString(fleetSubnets));
    const fleetName = `strata-${config.name}`;
    const launchTemplateId = fleet.fleet.launchTemplate.launchTemplateId!;
    const securityGroupId = fleet.fleet.securityGroup.securityGroupId;
    const arn = (type: string, id: string) =>
      `arn:${this.partition}:ec2:${region}:${type === 'image' ? '' : account}:${type}/${id}`;
    const capacity = fleet.fleet.capacity;
    const spotCapable = launchesWithFleet(capacity);
    const workflows = new StrataWorkflows(this, 'Workflows', {
      namePrefix: `strata-${config.name}`,
      stepFunction: this.stepFunction.function,
      logGroup: this.stateMachineLogs,
      fleet: {
        fleetName,
        launchTemplateId,
        securityGroupId,
        capacity,
        ...fleetIamStatements({
          arn,
          fleetName,
          launchTemplateId,
          subnetIds: subnets.map((s) => s.subnetId),
          securityGroupId,
          capacity,
        }),
      },
    });
    this.stateMachines = workflows.stateMachines;

    // The workflows that launch nodes (LaunchNode, launchNodeTask), both the same way.
    const launching = ['scale-out', 'replace-node', 'rolling-upgrade'] as const satisfies readonly WorkflowName[];
    for (const name of launching) {
      const role = workflows.stateMachines[name].role;
      // RunInstances passes the launch template's instance profile role to the instance.
      role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['iam:PassRole'], resources: [fleet.fleet.role.roleArn] }));
      role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          actions: ['ec2:CreateTags'],
          resources: [
            `arn:${this.partition}:ec2:${region}:${account}:instance/*`,
            `arn:${this.partition}:ec2:${region}:${account}:volume/*`,
            ...(spotCapable ? [`arn:${this.partition}:ec2:${region}:${account}:fleet/*`] : []),
          ],
          // Tags only at creation: ec2:CreateAction names the creating call (the instant fleet's is CreateFleet).
          conditions: { StringEquals: { 'ec2:CreateAction': spotCapable ? ['RunInstances', 'CreateFleet'] : 'RunInstances' } },
        }),
      );
      // The first Spot request of an account creates EC2's Spot service-linked role, with the caller's permission
      // ("The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances"
      // otherwise): that one role, for that one service.
      // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/service-linked-roles-spot-instance-requests.html
      if (spotCapable) {
        role.addToPrincipalPolicy(
          new iam.PolicyStatement({
            actions: ['iam:CreateServiceLinkedRole'],
            resources: [
              `arn:${this.partition}:iam::${account}:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot`,
            ],
            conditions: { StringEquals: { 'iam:AWSServiceName': 'spot.amazonaws.com' } },
          }),
        );
      }
    }
    // cdk-nag IAM5 findings, each justified (the finding strings render tokens as <...>).
    const stepArn = `<${this.getLogicalId(this.stepFunction.function.node.defaultChild as lambda.CfnFunction)}.Arn>:*`;
    const shown = (v: string, pseudo: string) => (Token.isUnresolved(v) ? `<AWS::${pseudo}>` : v);
    const ec2Arn = (type: string) =>
      `arn:${shown(this.partition, 'Partition')}:ec2:${shown(region, 'Region')}:${shown(account, 'AccountId')}:${type}/*`;
    const tagged = `tagged ${FLEET_TAG}=${fleetName}`;
    const common: Record<string, string> = {
      [`Resource::${stepArn}`]: "invokes any version of the step Lambda, as Step Functions' lambda:InvokeFunction grant does",
      'Resource::*':
        'X-Ray (PutTraceSegments, GetSampling*) and CloudWatch Logs delivery (CreateLogDelivery, ...) actions take no resource',
    };
    const spotLaunch: Record<string, string> = spotCapable
      ? {
          'Resource::*':
            `${common['Resource::*']}; ec2:DescribeInstances (the launched node's private IP, and the mixed fleet's on-demand ` +
            'count) supports no resource-level permission',
          [`Resource::${ec2Arn('fleet')}`]: `CreateFleet creates the instant EC2 Fleet of each launch only ${tagged} (condition aws:RequestTag); its id is only known at run time`,
          [`Resource::${ec2Arn('spot-instances-request')}`]:
            'an instant EC2 Fleet launching a Spot Instance creates its Spot request, which it cannot tag (so no tag condition); ' +
            `a request comes only with an instance, which must be ${tagged}`,
        }
      : {};
    const terminate = `TerminateInstances ends only instances ${tagged} (condition ec2:ResourceTag), whose ids are only known at run time`;
    const launches = (terminates: string): Record<string, string> => ({
      ...common,
      [`Resource::${ec2Arn('instance')}`]: `RunInstances creates instances only ${tagged} (condition aws:RequestTag), and ${terminates}`,
      [`Resource::${ec2Arn('volume')}`]:
        `RunInstances creates the launch template's volumes only ${tagged} (condition aws:RequestTag); ` +
        'their ids are only known at run time',
      [`Resource::${ec2Arn('network-interface')}`]:
        "RunInstances creates each node's network interface (in the fleet's subnets, with its security group); " +
        'its id is only known at run time',
      [`Resource::arn:${shown(this.partition, 'Partition')}:ec2:${shown(region, 'Region')}::image/*`]:
        "RunInstances may use Amazon's images only (condition ec2:Owner = amazon): the launch template's AMI is the latest " +
        'Amazon Linux 2023 arm64, which the Fleet stack reads from its public SSM parameter at each deployment',
      ...spotLaunch,
    });
    const findings: Record<WorkflowName, Record<string, string>> = {
      'scale-out': launches(`the rollback's ${terminate}`),
      'scale-in': { ...common, [`Resource::${ec2Arn('instance')}`]: terminate },
      'evict-to-s3': common,
      'tier-migrate': common,
      'replace-node': launches(`the dead node's and the rollback's ${terminate}`),
      'rolling-upgrade': launches(`the replaced nodes' and the rollback's ${terminate}`),
      'invalidation-sweep': common,
      'order-markers': common,
      'upload-commit': common,
    };
    for (const [name, machine] of Object.entries(workflows.stateMachines) as [WorkflowName, sfn.StateMachine][]) {
      for (const [f, reason] of Object.entries(findings[name])) {
        Validations.of(machine.role).acknowledge({ id: `AwsSolutions-IAM5[${f}]`, reason: `${name}: ${reason}` });
      }
      new CfnOutput(this, `${WORKFLOW_IDS[name]}StateMachineArn`, {
        value: machine.stateMachineArn,
        description: `State machine of the ${name} workflow`,
      });
    }

    if (spotCapable) this.spotInterruptionFunction = this.spotInterruption(config, data, workflows.stateMachines);

    // A large upload's completion writes its commit request `<prefix>/_uploads/<id>.commit` (core/api/async-complete.ts);
    // S3's Object Created event for it (the bucket sends its events to EventBridge: ColdTierBucket) starts the
    // upload-commit workflow with the object's key, from which the step reads the upload's record. The transfer
    // function runs in a VPC without a route to Step Functions, and an interface endpoint would bill by the hour idle.
    if (config.workflows.asyncUploadCompletion)
      this.uploadCommitRule = this.requestRule(
        'UploadCommitTrigger',
        `Strata ${config.name}: start upload-commit when a large upload's completion requests it`,
        data,
        `${UPLOADS_FOLDER}/*${COMMIT_REQUEST_SUFFIX}`,
        workflows.stateMachines['upload-commit'],
      );

    // A flush or an invalidation through the data API writes its sweep request `<prefix>/_sweeps/<name>.sweep`
    // (core/api/namespace-operations.ts; the data functions cannot reach Step Functions either): the same way, the
    // invalidation-sweep workflow, whose first step reads the request. Requests are created with If-None-Match, so
    // the invalidations that share a sweep start one execution.
    if (config.workflows.invalidationSweeps)
      this.sweepRequestRule = this.requestRule(
        'SweepRequestTrigger',
        `Strata ${config.name}: start invalidation-sweep when a flush or an invalidation requests it`,
        data,
        `${SWEEPS_FOLDER}/*${SWEEP_REQUEST_SUFFIX}`,
        workflows.stateMachines['invalidation-sweep'],
      );

    // With the policy evaluator on, the scale trigger, the eviction schedule and the node-fill alarm's response are the
    // policy's default rules (default-prelaunch, default-evict-schedule, default-evict-on-node-fill: cdk/lib/policy-defaults.ts),
    // which an operator sees and may change; without it, the stacks run them as before.
    const hardWired = !config.policies.evaluator;
    if (hardWired) this.scaleTriggerFunction = this.scaleTrigger(config, data, fleet, workflows.stateMachines['scale-out']);

    if (hardWired && config.workflows.evictionEveryHours > 0) {
      new events.Rule(this, 'EvictionSchedule', {
        description: `Strata ${config.name}: evict warm-tier victims above the watermark to S3`,
        schedule: events.Schedule.rate(Duration.hours(config.workflows.evictionEveryHours)),
        targets: [
          new targets.SfnStateMachine(workflows.stateMachines['evict-to-s3'], { input: events.RuleTargetInput.fromObject({}) }),
        ],
      });
    }

    // The order markers' prune (the order-markers workflow, mode prune): with the evaluator, the policy rule
    // default-prune-order-markers; without, an EventBridge schedule. A rate expression is `rate(value unit)` with a
    // positive whole value and a unit of minutes, hours or days (singular for 1); CDK writes the largest whole unit:
    // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-scheduled-rule-pattern.html#eb-rate-expressions
    if (hardWired && config.workflows.orderMarkerPruneEveryHours > 0) {
      new events.Rule(this, 'OrderMarkerPruneSchedule', {
        description: `Strata ${config.name}: prune the S3 tier's order markers of objects gone for good`,
        schedule: events.Schedule.rate(Duration.hours(config.workflows.orderMarkerPruneEveryHours)),
        targets: [
          new targets.SfnStateMachine(workflows.stateMachines['order-markers'], {
            input: events.RuleTargetInput.fromObject({ mode: 'prune' }),
          }),
        ],
      });
    }

    if (config.policies.evaluator) {
      const ticker = new PolicyTicker(this, 'PolicyTicker', {
        namePrefix: `strata-${config.name}`,
        environment: config.name,
        vpc: network.vpc,
        vpcSubnets: network.privateSubnets,
        securityGroup: network.coordinatorSecurityGroup,
        logGroup: this.stateMachineLogs,
        logRetention: logRetention(config),
        logRemovalPolicy: removalPolicy(config),
      });
      // The evaluator reads the ring, the nodes' reports and the policy in force, writes only its own state and firing
      // history (policies/evaluator/state.json: never the policy documents, which the admin function alone writes),
      // starts the workflows its rules respond with (and lists TierMigrate's, so as not to resize during one), and
      // changes the hot tier's usage limits. For default-prelaunch (paper 000's trigger) it also reads the scale-out
      // locks and keeps the trigger's request-counter sample, as the trigger's own function did. It is also the cache
      // nodes' failure detector (core/composition/fleet-health-tick.ts): it reads the nodes' EC2 status and their stats
      // reports (the daemons' heartbeat, core/nodes/heartbeat-probe.ts: `nodeStats` below), marks a node
      // DOWN in the ring (a compare-and-set of the ring document: its only write there; no migration, lock or progress
      // document), keeps its own state (health/checker), reads the operators' switch (health/controls), and starts
      // ReplaceNode for each node it marks. It starts OrderMarkers' prune for default-prune-order-markers.
      const listed = [
        'scale-out',
        'scale-in',
        'evict-to-s3',
        'tier-migrate',
        'replace-node',
        'order-markers',
      ] as const satisfies readonly WorkflowName[];
      ticker.evaluator
        .bindRingStore(data.coldTier, {
          read: ['nodeStats', 'scaleLocks', 'healthControls'],
          write: ['scaleTriggerSample', 'ring', 'healthChecker'],
        })
        .bindPolicyStore(data.coldTier, { write: false, evaluatorState: true, jobs: true })
        .bindWorkflows(
          Object.fromEntries(listed.map((w) => [w, { machine: workflows.stateMachines[w], name: `strata-${config.name}-${w}` }])),
        )
        .addEnvironment('STRATA_NODE_STATS_ID_PREFIX', fleet.fleet.statsReportIdPrefix)
        .addEnvironment('STRATA_HOT_CACHE_NAME', data.hotTier.connection.cacheName);
      // The failure detector's probe (core/nodes/ec2-probe.ts). DescribeInstanceStatus supports no resource-level
      // permission (the Service Authorization Reference lists no resource type for it, and "Amazon EC2 ec2:Describe* API
      // actions do not support resource-level permissions"), so its Resource is "*":
      // https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html
      // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-policies-for-amazon-ec2.html
      const describeStatus = new iam.Policy(this, 'FleetHealthProbe', {
        statements: [
          new iam.PolicyStatement({ sid: 'DescribeInstanceStatus', actions: ['ec2:DescribeInstanceStatus'], resources: ['*'] }),
        ],
        roles: [ticker.evaluator.role],
      });
      Validations.of(describeStatus).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'ec2:DescribeInstanceStatus supports no resource-level permission (the Service Authorization Reference lists no ' +
          'resource type for it), so its Resource must be "*"; the statement grants that read-only action and nothing else ' +
          "(the failure detector reads the fleet's instance status; it starts, stops or changes no instance).",
      });
      ticker.evaluator.role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          sid: 'HotTierLimits',
          // grow / shrink of the hot tier (core/composition/hot-tier-limits.ts): its usage limits, this cache only.
          actions: ['elasticache:DescribeServerlessCaches', 'elasticache:ModifyServerlessCache'],
          resources: [data.hotTier.connectArns(this)[0]],
        }),
      );
      // The flush writes dirty hot entries down to warm and cold, like the step Lambda reaches them; the job runner
      // copies, moves and deletes between all three and advances the jobs' board.
      ticker.flusher
        .bindHotTier(data.hotTier)
        .bindColdTier(data.coldTier)
        .bindRingStore(data.coldTier, { read: ['ring'] })
        .bindPolicyStore(data.coldTier, { write: false })
        .bindFleet(fleet.fleet);
      ticker.jobs
        .bindHotTier(data.hotTier)
        .bindColdTier(data.coldTier)
        .bindRingStore(data.coldTier, { read: ['ring'] })
        .bindPolicyStore(data.coldTier, { write: false, jobs: true })
        .bindFleet(fleet.fleet);
      const tickerFunctions = [ticker.evaluator, ticker.flusher, ticker.jobs];
      // The policy in force falls back to the configured namespace policies, as in the API functions.
      for (const f of tickerFunctions)
        if (config.api.namespaces) f.addEnvironment('STRATA_NAMESPACES', JSON.stringify(config.api.namespaces));
      // A policy with encrypt rules compiles only with the keyring's names (the flush and the job runner move stored
      // bytes: no KMS use).
      const keys = policyEncryptionKeys(this, props.policyEncryptionKeys);
      if (keys) for (const f of tickerFunctions) f.bindKeyring(keys, { use: false });
      // ...and naming only the declared Lambda origins (none of these reads through one).
      for (const f of tickerFunctions) f.bindLambdaOrigins(config.api.lambdaOrigins, { invoke: false });
      // The default rules' deployment settings, the same in every function that compiles policies (the API's too).
      for (const [k, v] of Object.entries(policyDefaultsEnvironment(config)))
        for (const f of tickerFunctions) f.addEnvironment(k, v);
      new CfnOutput(this, 'PolicyTickerStateMachineArn', {
        value: ticker.stateMachine.stateMachineArn,
        description: "State machine of the policy ticker (the policy's background rules, started every minute)",
      });
      this.policyTicker = ticker;
    }
  }

  /**
   * Makes `rule` (an alarm-state rule of the Monitoring stack, e.g. `monitoring.alarms.responses.nodeFill`) start
   * `workflow` with `input`. The Monitoring stack then depends on this one, never the other way round.
   */
  respondTo(rule: events.Rule, workflow: WorkflowName, input: Record<string, unknown>): void {
    rule.addTarget(
      new targets.SfnStateMachine(this.stateMachines[workflow], { input: events.RuleTargetInput.fromObject(input) }),
    );
  }

  /**
   * The spot-interruption handler (lambdas/fleet/spot-interruption.ts, core/nodes/spot-interruption.ts) and its rule.
   * Only a spot or mixed fleet gets them: EC2 emits these events for Spot Instances alone, so for an on-demand fleet
   * the rule would never match (an idle rule and function cost nothing, but they would be one more IAM role and
   * resource to review for no behaviour).
   */
  private spotInterruption(
    config: WorkflowsStackProps['config'],
    data: WorkflowsStackProps['data'],
    machines: Readonly<Record<WorkflowName, sfn.StateMachine>>,
  ): StrataFunction {
    // The drain (ScaleIn) and the refill once it succeeded (ScaleOut). A drain that fails goes down the failure path,
    // whose ReplaceNode the failure detector starts: the handler never starts one.
    const used = ['scale-in', 'scale-out'] as const satisfies readonly WorkflowName[];
    const fn = new StrataFunction(this, 'SpotInterruptionFunction', {
      entry: `${REPO_ROOT}/lambdas/fleet/spot-interruption.ts`,
      description: `Strata ${config.name} spot interruption: drain a Spot cache node within its two-minute warning`,
      // Outside the VPC: it reads the ring from S3 and starts and follows workflows through Step Functions; it never
      // calls a node. It waits for the drain (up to the two minutes of the notice) before the refill: 5 minutes
      // covers the notice and a minute more (core/composition/spot-interruption-lambda.ts).
      memoryMb: 256,
      timeoutSeconds: 300,
      logRetention: logRetention(config),
      logRemovalPolicy: removalPolicy(config),
      environment: {
        STRATA_ENV: config.name,
        STRATA_SCALE_IN_ARN: machines['scale-in'].stateMachineArn,
        STRATA_SCALE_OUT_ARN: machines['scale-out'].stateMachineArn,
      },
    });
    // It reads the ring (which node the instance is, what it owns) and writes nothing there: the workflows it starts
    // change the ring.
    fn.bindRingStore(data.coldTier, { read: ['ring'] });
    const shown = (v: string, pseudo: string) => (Token.isUnresolved(v) ? `<AWS::${pseudo}>` : v);
    for (const w of used) {
      machines[w].grantStartExecution(fn.role);
      // It follows the drain it started (and recognises an earlier delivery's) by the execution's name.
      const name = `strata-${config.name}-${w}`;
      fn.role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          actions: ['states:DescribeExecution'],
          resources: [`arn:${this.partition}:states:${this.region}:${this.account}:execution:${name}:*`],
        }),
      );
      Validations.of(fn.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::arn:${shown(this.partition, 'Partition')}:states:${shown(this.region, 'Region')}:${shown(this.account, 'AccountId')}:execution:${name}:*]`,
        reason: `Executions of ${name} are named when they start; DescribeExecution takes an execution ARN, so the grant covers that state machine's executions (and no other's).`,
      });
    }
    // A failed delivery is kept 14 days for an operator to see (the drain itself is long over by then: the failure
    // detector has replaced the node). Encrypted with SQS-managed keys; TLS only.
    const dlq = new sqs.Queue(this, 'SpotInterruptionDeadLetters', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy: removalPolicy(config),
    });
    Validations.of(dlq).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'this queue is the dead-letter queue of the spot-interruption rule target; a dead-letter queue has none of its own',
    });
    // "EC2 Spot Instance Interruption Warning" (two minutes before EC2 reclaims the instance) and "EC2 Instance
    // Rebalance Recommendation" (earlier, when the instance is at elevated risk), both from source aws.ec2:
    // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
    // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html
    // The events name the instance but carry no tags, so the rule cannot narrow them to the fleet: the handler
    // ignores an instance that is not a node of the ring.
    const rule = new events.Rule(this, 'SpotInterruptionRule', {
      description: `Strata ${config.name}: drain a Spot cache node on its interruption warning or rebalance recommendation`,
      eventPattern: { source: ['aws.ec2'], detailType: [SPOT_INTERRUPTION_DETAIL_TYPE, REBALANCE_DETAIL_TYPE] },
    });
    // EventBridge retries a failed delivery (MaximumRetryAttempts 0-185) until the event is MaximumEventAgeInSeconds
    // (60-86,400) old, then sends it to the dead-letter queue: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html
    // A warning older than the shortest age (60 s) leaves too little of its two minutes to drain; the failure path
    // (the failure detector and ReplaceNode) takes over.
    rule.addTarget(
      new targets.LambdaFunction(fn.function, { retryAttempts: 2, maxEventAge: Duration.seconds(60), deadLetterQueue: dlq }),
    );
    // Once handed over, an event whose handler fails is retried by Lambda's asynchronous invocation: twice, by
    // default within six hours (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html). The handler
    // fails on purpose when its time runs out while the drain is still running, so that the retry follows it; a
    // retry hours later would act on an instance long gone. Bounded to 15 minutes (the range is 60 s to 6 h).
    fn.function.configureAsyncInvoke({ retryAttempts: 2, maxEventAge: Duration.minutes(15) });
    this.spotInterruptionRule = rule;
    return fn;
  }

  /**
   * A rule that starts `machine` with `{ object: <key> }` when an object matching `<prefix>/<pattern>` is created in
   * the cold-tier bucket: how the API functions, whose VPC has no route to Step Functions, start a workflow. S3's
   * event: detail.bucket.name, detail.object.key (https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html);
   * `wildcard` matching (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html).
   */
  private requestRule(
    id: string,
    description: string,
    data: Pick<DataStack, 'coldTier'>,
    pattern: string,
    machine: sfn.IStateMachine,
  ): events.Rule {
    return new events.Rule(this, id, {
      description,
      eventPattern: {
        source: ['aws.s3'],
        detailType: ['Object Created'],
        detail: {
          bucket: { name: [data.coldTier.bucket.bucketName] },
          object: { key: [{ wildcard: `${data.coldTier.prefix}/${pattern}` }] },
        },
      },
      targets: [
        new targets.SfnStateMachine(machine, {
          input: events.RuleTargetInput.fromObject({ object: events.EventField.fromPath('$.detail.object.key') }),
        }),
      ],
    });
  }

  /**
   * Paper 000's scale-out trigger as its own function on a schedule (core/workflows/trigger/scale-trigger.ts), for
   * environments without the policy evaluator.
   */
  private scaleTrigger(
    config: WorkflowsStackProps['config'],
    data: WorkflowsStackProps['data'],
    fleet: WorkflowsStackProps['fleet'],
    scaleOut: sfn.StateMachine,
  ): StrataFunction {
    const trigger = config.workflows.scaleTrigger;
    const fn = new StrataFunction(this, 'ScaleTriggerFunction', {
      entry: `${REPO_ROOT}/lambdas/workflows/scale-trigger.ts`,
      description: `Strata ${config.name} scale-out trigger (paper 000 speculative threshold)`,
      // Outside the VPC: it reads the nodes' reports from S3 and starts ScaleOut through Step Functions, and calls
      // no node, so it needs neither the fleet secret nor an interface endpoint.
      memoryMb: 256,
      timeoutSeconds: 60,
      logRetention: logRetention(config),
      logRemovalPolicy: removalPolicy(config),
      environment: {
        STRATA_ENV: config.name,
        STRATA_SCALE_OUT_ARN: scaleOut.stateMachineArn,
        STRATA_SCALE_TRIGGER: JSON.stringify({
          unit: trigger.unit,
          ...(trigger.capacity ? { capacity: trigger.capacity } : {}),
          lowRate: trigger.lowRate,
          highRate: trigger.highRate,
          mode: trigger.mode,
        }),
      },
    });
    // It reads the ring, the nodes' reports and the scale-out locks; it writes only its own counter sample.
    fn.bindRingStore(data.coldTier, {
      read: ['ring', 'nodeStats', 'scaleLocks'],
      write: ['scaleTriggerSample'],
    });
    fn.addEnvironment('STRATA_NODE_STATS_ID_PREFIX', fleet.fleet.statsReportIdPrefix);
    scaleOut.grantStartExecution(fn.role);
    new events.Rule(this, 'ScaleTriggerSchedule', {
      description: `Strata ${config.name}: evaluate the speculative scale-out threshold`,
      schedule: events.Schedule.rate(Duration.minutes(trigger.scheduleMinutes)),
      targets: [new targets.LambdaFunction(fn.function)],
    });
    return fn;
  }
}
