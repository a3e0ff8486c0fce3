import { App, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { WORKFLOW_NAMES, type WorkflowName } from '../../core/workflows/progress.js';
import { fleetIamStatements, type LaunchCapacity } from '../constructs/workflows/fleet-launch.js';
import { StrataWorkflows } from '../constructs/workflows/strata-workflows.js';

/** An Amazon States Language document. */
export type AslDefinition = { StartAt: string; States: Record<string, unknown>; [k: string]: unknown };

/** Pseudo-parameters of the local stand-in account (no real account id or endpoint appears anywhere). */
export const LOCAL_ACCOUNT = '000000000000';
export const LOCAL_REGION = 'us-east-1';

const PSEUDO: Record<string, string> = {
  'AWS::Partition': 'aws',
  'AWS::Region': LOCAL_REGION,
  'AWS::AccountId': LOCAL_ACCOUNT,
  'AWS::URLSuffix': 'amazonaws.com',
};

/**
 * Resolves the CloudFormation intrinsics a synthesized state machine definition uses (Fn::Join, Ref, Fn::GetAtt)
 * to plain strings: pseudo-parameters to the local stand-in account, a resource's `Arn` to a Lambda-style ARN
 * named after its logical id, other references to the logical id itself.
 */
export function resolveIntrinsics(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(resolveIntrinsics);
  if (value === null || typeof value !== 'object') return value;
  const o = value as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1) {
    const [k] = keys as [string];
    const v = o[k];
    if (k === 'Ref') return PSEUDO[v as string] ?? String(v);
    if (k === 'Fn::GetAtt') {
      const [id, attr] = v as [string, string];
      return attr === 'Arn' ? `arn:aws:lambda:${LOCAL_REGION}:${LOCAL_ACCOUNT}:function:${id}` : `${id}.${attr}`;
    }
    if (k === 'Fn::Join') {
      const [sep, parts] = v as [string, unknown[]];
      return parts.map((p) => String(resolveIntrinsics(p))).join(sep);
    }
    // Values from other stacks (launch template, subnets): a stand-in naming where the value comes from.
    if (k === 'Fn::ImportValue' || k === 'Fn::GetStackOutput')
      return `imported:${JSON.stringify(v).replace(/[^A-Za-z0-9:-]+/g, '')}`;
    if (k.startsWith('Fn::')) throw new Error(`unsupported intrinsic ${k} in a state machine definition`);
  }
  return Object.fromEntries(keys.map((k) => [k, resolveIntrinsics(o[k])]));
}

/** The state machines of a synthesized template, by their StateMachineName (or logical id), as plain ASL. */
export function stateMachinesOf(template: {
  Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
}): Record<string, AslDefinition> {
  const out: Record<string, AslDefinition> = {};
  for (const [id, r] of Object.entries(template.Resources ?? {})) {
    if (r.Type !== 'AWS::StepFunctions::StateMachine') continue;
    const raw = resolveIntrinsics(r.Properties?.DefinitionString);
    const name = resolveIntrinsics(r.Properties?.StateMachineName);
    out[typeof name === 'string' ? name : id] = JSON.parse(String(raw)) as AslDefinition;
  }
  return out;
}

/**
 * The workflow definitions, synthesized from the same constructs the Workflows stack deploys (with a
 * stand-in step Lambda ARN and fleet (or the launch template and security group given, e.g. LocalStack's), for
 * running them locally under aws-local-stepfunctions. The subnet of each launch comes from the begin step of
 * ScaleOut or ReplaceNode (its `fleetSubnets`).
 */
export function synthesizeWorkflowDefinitions(
  fleet: { launchTemplateId?: string; securityGroupId?: string; capacity?: LaunchCapacity } = {},
): Record<WorkflowName, AslDefinition> {
  const app = new App();
  const stack = new Stack(app, 'StrataLocalWorkflows', { env: { account: LOCAL_ACCOUNT, region: LOCAL_REGION } });
  const fn = lambda.Function.fromFunctionArn(
    stack,
    'Steps',
    `arn:aws:lambda:${LOCAL_REGION}:${LOCAL_ACCOUNT}:function:strata-local-workflow-steps`,
  );
  const fleetName = 'strata-local';
  const launchTemplateId = fleet.launchTemplateId ?? 'lt-0local';
  const securityGroupId = fleet.securityGroupId ?? 'sg-0local';
  const arn = (type: string, id: string) => `arn:aws:ec2:${LOCAL_REGION}:${type === 'image' ? '' : LOCAL_ACCOUNT}:${type}/${id}`;
  new StrataWorkflows(stack, 'Workflows', {
    namePrefix: 'strata-local',
    stepFunction: fn,
    fleet: {
      fleetName,
      launchTemplateId,
      securityGroupId,
      ...(fleet.capacity ? { capacity: fleet.capacity } : {}),
      ...fleetIamStatements({
        arn,
        fleetName,
        launchTemplateId,
        subnetIds: [],
        securityGroupId,
        ...(fleet.capacity ? { capacity: fleet.capacity } : {}),
      }),
    },
  });
  const template = app.synth().getStackByName(stack.stackName).template as Parameters<typeof stateMachinesOf>[0];
  const machines = stateMachinesOf(template);
  return Object.fromEntries(WORKFLOW_NAMES.map((w) => [w, machines[`strata-local-${w}`]!])) as Record<
    WorkflowName,
    AslDefinition
  >;
}
