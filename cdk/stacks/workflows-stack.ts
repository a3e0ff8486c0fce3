import * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import type { DataStack } from './data-stack.js';
import type { FleetStack } from './fleet-stack.js';
import type { StrataNetwork } from './network-stack.js';
import { logRetention, removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface WorkflowsStackProps extends StrataStackProps {
  /** Step Lambdas run in the VPC as coordinators. */
  readonly network: StrataNetwork;
  readonly data: Pick<DataStack, 'hotTier' | 'coldTier'>;
  /** ScaleOut/ScaleIn launch and terminate nodes from this launch template and pass its role. */
  readonly fleet: Pick<FleetStack, 'fleet'>;
}

/**
 * Workflows (Step Functions): ScaleOut, ScaleIn, evict to S3, tier migration. This issue provides the wiring
 * (network, tiers, fleet) and the state machines' log group; the state machines come with the workflows issue.
 */
export class WorkflowsStack extends StrataStack {
  /** Execution logs of every state machine (`/aws/vendedlogs/states/...` avoids the resource-policy size limit). */
  readonly stateMachineLogs: logs.LogGroup;
  readonly wiring: Omit<WorkflowsStackProps, keyof StrataStackProps>;

  constructor(scope: Construct, id: string, props: WorkflowsStackProps) {
    super(scope, id, { description: `Strata ${props.config.name}: workflows (Step Functions; state machines to come)`, ...props });
    this.wiring = { network: props.network, data: props.data, fleet: props.fleet };
    this.stateMachineLogs = new logs.LogGroup(this, 'StateMachineLogs', {
      logGroupName: `/aws/vendedlogs/states/strata-${props.config.name}`,
      retention: logRetention(props.config),
      removalPolicy: removalPolicy(props.config),
    });
  }
}
