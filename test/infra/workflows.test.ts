import { Stack, type CfnElement } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { stateMachinesOf, synthesizeWorkflowDefinitions, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import { allStates } from '../../core/workflows/local/asl-runner.js';
import { WORKFLOW_NAMES } from '../../core/workflows/progress.js';
import { synthesized } from './helpers/synth.js';

const prod = synthesized('prod');
const wf = prod.templates.workflows;

type Statement = { Action: string | string[]; Resource?: unknown; Condition?: unknown; Effect: string };

/** The statements of every IAM policy attached to `role`, in the template's order. */
function statementsOf(role: iam.IRole): Statement[] {
  const stack = Stack.of(role);
  const roleId = stack.getLogicalId(role.node.defaultChild as CfnElement);
  const policies = Object.values(wf.findResources('AWS::IAM::Policy')) as {
    Properties: { Roles: { Ref: string }[]; PolicyDocument: { Statement: Statement[] } };
  }[];
  const own = policies.filter((p) => p.Properties.Roles.some((r) => r.Ref === roleId));
  expect(own.length).toBeGreaterThan(0);
  return own.flatMap((p) => p.Properties.PolicyDocument.Statement);
}

/** The shape of a definition: every state's name, type and transitions (resources and fleet ids left out). */
function shape(def: AslDefinition): string[] {
  return allStates(def).map(([name, s]) =>
    JSON.stringify({
      name,
      type: s.Type,
      next: s.Next ?? null,
      end: s.End ?? null,
      catch: s.Catch ?? null,
      choices: s.Choices ?? null,
      default: s.Default ?? null,
      step: (s.Parameters as { step?: string } | undefined)?.step ?? null,
    }),
  );
}

describe('Workflows stack', () => {
  it('deploys the nine state machines, logging every event and traced', () => {
    expect(WORKFLOW_NAMES).toHaveLength(9);
    expect(
      Object.keys(wf.findResources('AWS::StepFunctions::StateMachine', { Properties: { StateMachineType: 'STANDARD' } })),
    ).toHaveLength(9);
    for (const w of WORKFLOW_NAMES) {
      wf.hasResourceProperties('AWS::StepFunctions::StateMachine', {
        StateMachineName: `strata-prod-${w}`,
        StateMachineType: 'STANDARD',
        TracingConfiguration: { Enabled: true },
        LoggingConfiguration: Match.objectLike({ Level: 'ALL', IncludeExecutionData: false }),
      });
    }
  });

  it('deploys exactly the definitions the local runs and tests execute', () => {
    const deployed = stateMachinesOf(wf.toJSON() as Parameters<typeof stateMachinesOf>[0]);
    const local = synthesizeWorkflowDefinitions();
    expect(Object.keys(local).sort()).toEqual([...WORKFLOW_NAMES].sort());
    for (const w of WORKFLOW_NAMES) expect(shape(deployed[`strata-prod-${w}`]!)).toEqual(shape(local[w]));
    // ReplaceNode included: the shape compares its catchers and choices too, so spell out what it is made of.
    expect(shape(local['replace-node']).map((x) => (JSON.parse(x) as { name: string }).name)).toEqual([
      'Begin',
      'LaunchNode',
      'CheckNode',
      'WaitForNode',
      'NodeHealthy',
      'TakeOver',
      'TerminateDead',
      'FillStart',
      'TerminateDeadNode',
      'Fill',
      'FillDone',
      'Finish',
      'Replaced',
      'RollBack',
      'NewNodeOwnsNothing',
      'ReplaceNodeFailed',
      'TerminateNode',
    ]);
  });

  it('gives the step Lambda the ring store, the fleet secret from it (not its value), IAM to the hot tier and 15 minutes per step', () => {
    // The upload-commit step copies a whole upload: Lambda's longest timeout, 900 s
    // (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html).
    wf.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('workflow steps'),
      Timeout: 900,
      Environment: {
        Variables: Match.objectLike({
          STRATA_WARM_RING_BUCKET: Match.anyValue(),
          STRATA_WARM_RING_PREFIX: 'strata-ring',
          STRATA_WARM_SECRET_FROM_RING: '1',
          STRATA_REDIS_IAM_CACHE: 'strata-prod',
          STRATA_NODE_PORT: '7070',
          STRATA_ENV: 'prod',
        }),
      },
    });
    const fns = Object.values(wf.findResources('AWS::Lambda::Function')) as {
      Properties: { Environment?: { Variables?: Record<string, unknown> } };
    }[];
    for (const f of fns) expect(Object.keys(f.Properties.Environment?.Variables ?? {})).not.toContain('STRATA_WARM_SECRET');
    for (const f of fns) expect(Object.keys(f.Properties.Environment?.Variables ?? {})).not.toContain('STRATA_REDIS_PASSWORD');
  });

  it('deploys no scale trigger and no eviction schedule with the policy evaluator: they are default rules', () => {
    // The evaluator is on by default; the loops are the rules default-prelaunch and default-evict-schedule
    // (test/infra/default-rules-wiring.test.ts covers what they get, and an environment without the evaluator).
    expect(prod.config.policies.evaluator).toBe(true);
    expect(
      Object.keys(
        wf.findResources('AWS::Lambda::Function', { Properties: { Description: Match.stringLikeRegexp('scale-out trigger') } }),
      ),
    ).toEqual([]);
    const schedules = Object.values(wf.findResources('AWS::Events::Rule'))
      .map((r) => (r as { Properties: { ScheduleExpression?: string } }).Properties.ScheduleExpression)
      // Event rules (the upload-commit trigger on S3's events) have no schedule.
      .filter((e) => e !== undefined);
    // Only the policy ticker's minute (the order markers' prune is the rule default-prune-order-markers).
    expect(schedules).toEqual(['rate(1 minute)']);
  });

  it('starts no workflow from the node-fill alarm with the policy evaluator: the rule default-evict-on-node-fill does', () => {
    expect(prod.config.workflows.fillAlarmResponse).toBe('evict-to-s3');
    const rules = Object.values(
      prod.templates.monitoring.findResources('AWS::Events::Rule', {
        Properties: { EventPattern: { 'detail-type': ['CloudWatch Alarm State Change'] } },
      }),
    ) as { Properties: { Targets?: unknown[] } }[];
    expect(rules.length).toBeGreaterThan(0);
    expect(rules.filter((r) => (r.Properties.Targets ?? []).length > 0)).toEqual([]);
  });

  it("lets the step Lambda list, HEAD, put and conditionally delete the order markers (<prefix>/_k/), no more than the tier's", () => {
    // The steps reach the markers through the cold tier's own grant (ColdTierBucket.accessPolicy): object actions on
    // <prefix>/* (which holds _k/) and s3:ListBucket on the bucket, unscoped by s3:prefix as the tier lists namespaces
    // too. A conditional delete (If-Match) needs s3:GetObject besides s3:DeleteObject, and HeadObject is authorized by
    // s3:GetObject: https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-delete-enforce.html
    // https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html (Permissions)
    const data = prod.templates.data;
    const policies = Object.values(data.findResources('AWS::IAM::ManagedPolicy')) as {
      Properties: { Description?: string; PolicyDocument: { Statement: (Statement & { Sid?: string })[] } };
    }[];
    const tier = policies.find((p) => /^Strata cold tier: objects under v1\//.test(p.Properties.Description ?? ''));
    expect(tier).toBeDefined();
    const bySid = Object.fromEntries(tier!.Properties.PolicyDocument.Statement.map((s) => [s.Sid, s]));
    expect([bySid.TierObjects!.Action].flat()).toEqual(
      expect.arrayContaining(['s3:GetObject', 's3:PutObject', 's3:DeleteObject']),
    );
    expect(JSON.stringify(bySid.TierObjects!.Resource)).toMatch(/"\/v1\/\*"/);
    expect([bySid.HeadBucket!.Action].flat()).toEqual(['s3:ListBucket']);
    // The step function has that policy and no other S3 grant of its own for the markers.
    const stepRole = prod.stacks.workflows.stepFunction.role;
    const stepRoleId = Stack.of(stepRole).getLogicalId(stepRole.node.defaultChild as CfnElement);
    const role = wf.findResources('AWS::IAM::Role')[stepRoleId] as { Properties: { ManagedPolicyArns: unknown[] } };
    expect(JSON.stringify(role.Properties.ManagedPolicyArns)).toMatch(/ColdTierAccessPolicy/);
  });

  it('gives ReplaceNode exactly the IAM statements of ScaleOut: it launches and terminates nodes the same way', () => {
    const machines = prod.stacks.workflows.stateMachines;
    const scaleOut = statementsOf(machines['scale-out'].role);
    const replaceNode = statementsOf(machines['replace-node'].role);
    expect(replaceNode).toEqual(scaleOut);
    const actions = replaceNode.flatMap((st) => [st.Action].flat());
    for (const a of ['ec2:RunInstances', 'ec2:TerminateInstances', 'iam:PassRole', 'ec2:CreateTags', 'lambda:InvokeFunction'])
      expect([a, actions.includes(a)]).toEqual([a, true]);
    // Its RunInstances and TerminateInstances statements are the fleet's (fleetIamStatements), as ScaleIn's terminate is.
    const terminate = (st: Statement[]) => st.filter((x) => [x.Action].flat().includes('ec2:TerminateInstances'));
    expect(terminate(replaceNode)).toEqual(terminate(statementsOf(machines['scale-in'].role)));
    expect(terminate(replaceNode)).toHaveLength(1);
  });

  it('gives RollingUpgrade exactly the IAM statements of ScaleOut: it launches and terminates nodes the same way', () => {
    const machines = prod.stacks.workflows.stateMachines;
    // The same statements; in another order (its graph reaches a termination before its launch's rollback does).
    const sorted = (st: Statement[]) => st.map((x) => JSON.stringify(x)).sort();
    expect(sorted(statementsOf(machines['rolling-upgrade'].role))).toEqual(sorted(statementsOf(machines['scale-out'].role)));
  });

  it('lets ScaleOut launch only from the fleet launch template, passing only the node role', () => {
    const policies = JSON.stringify(wf.findResources('AWS::IAM::Policy'));
    expect(policies).toContain('ec2:RunInstances');
    expect(policies).toContain('ec2:TerminateInstances');
    wf.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Action: 'iam:PassRole', Resource: Match.anyValue() })]) },
    });
    wf.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Action: 'ec2:CreateTags', Condition: { StringEquals: { 'ec2:CreateAction': 'RunInstances' } } }),
        ]),
      },
    });
  });
});
