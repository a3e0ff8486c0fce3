import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { WorkflowName } from '../../../core/workflows/progress.js';
import { EvictToS3Definition } from './evict-to-s3.js';
import { InvalidationSweepDefinition } from './invalidation-sweep.js';
import { OrderMarkersDefinition } from './order-markers.js';
import type { FleetLaunch } from './fleet-launch.js';
import { ReplaceNodeDefinition } from './replace-node.js';
import { RollingUpgradeDefinition } from './rolling-upgrade.js';
import { ScaleInDefinition } from './scale-in.js';
import { ScaleOutDefinition } from './scale-out.js';
import { TierMigrateDefinition } from './tier-migrate.js';
import { UploadCommitDefinition } from './upload-commit.js';

export interface StrataWorkflowsProps {
  /** Name prefix of the state machines (`<prefix>-scale-out`, ...). */
  readonly namePrefix: string;
  /** The step Lambda every Task state calls. */
  readonly stepFunction: lambda.IFunction;
  readonly fleet: FleetLaunch;
  /** Execution logs; omitted = no logging configuration (local synthesis of the definitions only). */
  readonly logGroup?: logs.ILogGroup;
  /** @default true when a log group is given */
  readonly tracing?: boolean;
}

/** The state machine id of each workflow, which is also its state machine name's suffix. */
export const WORKFLOW_IDS: Readonly<Record<WorkflowName, string>> = {
  'scale-out': 'ScaleOut',
  'scale-in': 'ScaleIn',
  'evict-to-s3': 'EvictToS3',
  'tier-migrate': 'TierMigrate',
  'replace-node': 'ReplaceNode',
  'rolling-upgrade': 'RollingUpgrade',
  'invalidation-sweep': 'InvalidationSweep',
  'order-markers': 'OrderMarkers',
  'upload-commit': 'UploadCommit',
};

/** The workflows as Step Functions state machines (standard type: long, exactly-once steps). */
export class StrataWorkflows extends Construct {
  readonly stateMachines: Readonly<Record<WorkflowName, sfn.StateMachine>>;

  constructor(scope: Construct, id: string, props: StrataWorkflowsProps) {
    super(scope, id);
    const definitions: Record<WorkflowName, sfn.IChainable> = {
      'scale-out': new ScaleOutDefinition(this, 'ScaleOutStates', { fn: props.stepFunction, fleet: props.fleet }).definition,
      'scale-in': new ScaleInDefinition(this, 'ScaleInStates', { fn: props.stepFunction, fleet: props.fleet }).definition,
      'evict-to-s3': new EvictToS3Definition(this, 'EvictToS3States', { fn: props.stepFunction }).definition,
      'tier-migrate': new TierMigrateDefinition(this, 'TierMigrateStates', { fn: props.stepFunction }).definition,
      'replace-node': new ReplaceNodeDefinition(this, 'ReplaceNodeStates', { fn: props.stepFunction, fleet: props.fleet })
        .definition,
      'rolling-upgrade': new RollingUpgradeDefinition(this, 'RollingUpgradeStates', {
        fn: props.stepFunction,
        fleet: props.fleet,
      }).definition,
      'invalidation-sweep': new InvalidationSweepDefinition(this, 'InvalidationSweepStates', { fn: props.stepFunction })
        .definition,
      'order-markers': new OrderMarkersDefinition(this, 'OrderMarkersStates', { fn: props.stepFunction }).definition,
      'upload-commit': new UploadCommitDefinition(this, 'UploadCommitStates', { fn: props.stepFunction }).definition,
    };
    const machines = {} as Record<WorkflowName, sfn.StateMachine>;
    for (const [name, chain] of Object.entries(definitions) as [WorkflowName, sfn.IChainable][]) {
      machines[name] = new sfn.StateMachine(this, WORKFLOW_IDS[name], {
        stateMachineName: `${props.namePrefix}-${name}`,
        definitionBody: sfn.DefinitionBody.fromChainable(chain),
        stateMachineType: sfn.StateMachineType.STANDARD,
        // ReplaceNode's 24 hours are mostly its fill: at the default 8 MiB/s, 675 GiB, more than a node's data volume.
        // RollingUpgrade's are one hand-off after another: a fleet too big for them is upgraded in batches (`nodes`).
        // UploadCommit's one step runs at most the step Lambda's 15 minutes; the hour covers its start and catch.
        timeout: Duration.hours(name === 'evict-to-s3' ? 6 : name === 'upload-commit' ? 1 : 24),
        tracingEnabled: props.tracing ?? !!props.logGroup,
        removalPolicy: RemovalPolicy.DESTROY,
        ...(props.logGroup
          ? { logs: { destination: props.logGroup, level: sfn.LogLevel.ALL, includeExecutionData: false } }
          : {}),
      });
      // sfn.StateMachine declares DependsOn its role although RoleArn: GetAtt already implies it; cfn-lint warns (W3005).
      (machines[name].node.defaultChild as sfn.CfnStateMachine).addMetadata('cfn-lint', {
        config: {
          ignore_checks: ['W3005'],
          ignore_reasons: { W3005: 'redundant DependsOn added by aws-cdk-lib sfn.StateMachine' },
        },
      });
    }
    this.stateMachines = machines;
  }
}
