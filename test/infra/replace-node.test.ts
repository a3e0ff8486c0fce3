/**
 * The ReplaceNode state machine (cdk/constructs/workflows/replace-node.ts) as the Workflows stack deploys it: its
 * states and transitions, the fields and result paths each step is called with (the step handlers of
 * core/workflows/steps/replace-steps.ts are written against them), its catchers and its EC2 SDK tasks.
 * test/infra/workflows.test.ts checks that the local runs execute the same definition, and its IAM.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { PERMANENT_ERRORS } from '../../cdk/constructs/workflows/step-task.js';
import { stateMachinesOf, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import { allStates } from '../../core/workflows/local/asl-runner.js';
import { synthesized } from './helpers/synth.js';

type State = Record<string, unknown>;

const prod = synthesized('prod');
const wf = prod.templates.workflows;
const machines = stateMachinesOf(wf.toJSON() as Parameters<typeof stateMachinesOf>[0]);
const def: AslDefinition = machines['strata-prod-replace-node']!;
const state = (name: string): State => {
  const s = def.States[name] as State | undefined;
  if (!s) throw new Error(`ReplaceNode has no state '${name}'`);
  return s;
};

/** The step Lambda's ARN as the definitions name it (references resolved by stateMachinesOf). */
function stepLambdaArn(): string {
  const fns = wf.findResources('AWS::Lambda::Function', {
    Properties: { Description: Match.stringLikeRegexp('workflow steps') },
  });
  const ids = Object.keys(fns);
  expect(ids).toHaveLength(1);
  return `arn:aws:lambda:us-east-1:000000000000:function:${ids[0]}`;
}

/** The states reachable from `from` along Next, Choices, Default and Catch. */
function reachable(from: string[], skipCatchOf: string[] = []): Set<string> {
  const seen = new Set<string>();
  const todo = [...from];
  while (todo.length) {
    const name = todo.pop()!;
    if (seen.has(name)) continue;
    seen.add(name);
    const s = state(name);
    const next = [
      s.Next,
      s.Default,
      ...((s.Choices as { Next: string }[] | undefined) ?? []).map((c) => c.Next),
      ...(skipCatchOf.includes(name) ? [] : ((s.Catch as { Next: string }[] | undefined) ?? []).map((c) => c.Next)),
    ].filter((x): x is string => typeof x === 'string');
    todo.push(...next);
  }
  return seen;
}

describe('ReplaceNode state machine', () => {
  it('is deployed as a standard state machine, logged and traced, and times out after 24 hours', () => {
    wf.hasResourceProperties('AWS::StepFunctions::StateMachine', {
      StateMachineName: 'strata-prod-replace-node',
      StateMachineType: 'STANDARD',
      TracingConfiguration: { Enabled: true },
      LoggingConfiguration: Match.objectLike({ Level: 'ALL', IncludeExecutionData: false }),
    });
    // TimeoutSeconds: "The maximum number of seconds an execution of the state machine can run. If it runs longer than
    // the specified time, the execution fails with a States.Timeout Error Name"
    // (https://docs.aws.amazon.com/step-functions/latest/dg/statemachine-structure.html), which no catcher sees:
    // "catchers are available for Task, Parallel, and Map states, but not for top-level state machine execution
    // failures" (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html). 24 hours fill
    // 675 GiB at the default 8 MiB/s, more than prod's 500 GiB data volume.
    expect(def.TimeoutSeconds).toBe(24 * 3600);
    expect(prod.config.fleet.dataVolume.sizeGiB).toBeLessThan((8 * 24 * 3600) / 1024);
  });

  it('runs Begin → LaunchNode → CheckNode (⇄ WaitForNode) → TakeOver → TerminateDead → FillStart → Fill (loop) → Finish → Replaced', () => {
    expect(def.StartAt).toBe('Begin');
    const transitions = Object.fromEntries(
      allStates(def).map(([name, s]) => [name, { type: s.Type, next: s.Next ?? null, default: s.Default ?? null }]),
    );
    expect(transitions).toEqual({
      Begin: { type: 'Task', next: 'LaunchNode', default: null },
      LaunchNode: { type: 'Task', next: 'CheckNode', default: null },
      CheckNode: { type: 'Task', next: 'NodeHealthy', default: null },
      NodeHealthy: { type: 'Choice', next: null, default: 'WaitForNode' },
      WaitForNode: { type: 'Wait', next: 'CheckNode', default: null },
      TakeOver: { type: 'Task', next: 'TerminateDead', default: null },
      TerminateDead: { type: 'Choice', next: null, default: 'FillStart' },
      TerminateDeadNode: { type: 'Task', next: 'FillStart', default: null },
      FillStart: { type: 'Pass', next: 'Fill', default: null },
      Fill: { type: 'Task', next: 'FillDone', default: null },
      FillDone: { type: 'Choice', next: null, default: 'Fill' },
      Finish: { type: 'Task', next: 'Replaced', default: null },
      Replaced: { type: 'Succeed', next: null, default: null },
      RollBack: { type: 'Task', next: 'NewNodeOwnsNothing', default: null },
      NewNodeOwnsNothing: { type: 'Choice', next: null, default: 'ReplaceNodeFailed' },
      TerminateNode: { type: 'Task', next: 'ReplaceNodeFailed', default: null },
      ReplaceNodeFailed: { type: 'Fail', next: null, default: null },
    });
    // A Choice rule "Variable": <path>, "BooleanEquals": true, "Next": <state>; Default when no rule matches
    // (https://docs.aws.amazon.com/step-functions/latest/dg/state-choice.html, "Choice Rules (JSONPath)").
    expect(state('NodeHealthy').Choices).toEqual([{ Variable: '$.health.healthy', BooleanEquals: true, Next: 'TakeOver' }]);
    expect(state('FillDone').Choices).toEqual([{ Variable: '$.fill.done', BooleanEquals: true, Next: 'Finish' }]);
    expect(state('NewNodeOwnsNothing').Choices).toEqual([
      { Variable: '$.rollback.terminate', BooleanEquals: true, Next: 'TerminateNode' },
    ]);
    // The local runner shortens this Wait by its name (core/workflows/local/local-workflows.ts: WaitForNode).
    expect(state('WaitForNode')).toMatchObject({ Seconds: 5 });
  });

  it('calls each step of the step Lambda with the fields and result path its handler expects', () => {
    const lambda = stepLambdaArn();
    const common = { workflow: 'replace-node', 'execution.$': '$$.Execution.Name' };
    const expected: Record<string, { step: string; fields: Record<string, string>; resultPath: string }> = {
      Begin: { step: 'replace-node.begin', fields: { 'request.$': '$' }, resultPath: '$.begin' },
      // ScaleOut's health check, told which workflow's progress to record.
      CheckNode: {
        step: 'scale-out.check-node',
        fields: {
          'nodeId.$': '$.instance.instanceId',
          'instanceId.$': '$.instance.instanceId',
          'privateIp.$': '$.instance.privateIp',
          'launchedAt.$': '$.begin.launchedAt',
          'launchTimeoutMs.$': '$.begin.launchTimeoutMs',
        },
        resultPath: '$.health',
      },
      TakeOver: {
        step: 'replace-node.take-over',
        fields: {
          'nodeId.$': '$.begin.nodeId',
          'newNodeId.$': '$.instance.instanceId',
          'instanceId.$': '$.instance.instanceId',
          'url.$': '$.health.url',
          'az.$': '$.begin.launch.availabilityZone',
        },
        resultPath: '$.takeOver',
      },
      Fill: {
        step: 'replace-node.fill',
        fields: { 'nodeId.$': '$.instance.instanceId', 'cursor.$': '$.fill.cursor', 'options.$': '$.begin.options' },
        resultPath: '$.fill',
      },
      Finish: { step: 'replace-node.finish', fields: { 'state.$': '$' }, resultPath: '$.finish' },
      RollBack: { step: 'replace-node.rollback', fields: { 'state.$': '$' }, resultPath: '$.rollback' },
    };
    const lambdaTasks = allStates(def)
      .filter(([, s]) => s.Type === 'Task' && String(s.Resource).includes(':lambda:'))
      .map(([name]) => name);
    expect(lambdaTasks.sort()).toEqual(Object.keys(expected).sort());
    for (const [name, e] of Object.entries(expected)) {
      const s = state(name);
      expect([name, s.Resource]).toEqual([name, lambda]);
      expect([name, s.Parameters]).toEqual([name, { step: e.step, ...common, ...e.fields }]);
      expect([name, s.ResultPath]).toEqual([name, e.resultPath]);
      // Permanent errors are not retried (step-task.ts); everything else is, with back-off.
      expect([name, (s.Retry as { ErrorEquals: string[]; MaxAttempts: number }[]).find((r) => r.MaxAttempts === 0)]).toEqual([
        name,
        { ErrorEquals: PERMANENT_ERRORS, MaxAttempts: 0 },
      ]);
    }
  });

  it('launches the new node exactly as ScaleOut does, and terminates instances only through the EC2 SDK integration', () => {
    // The same RunInstances Parameters (read from the same begin-step fields), result selector, result path and
    // retrier: test/infra/ec2-launch-rules.test.ts checks ScaleOut's request against EC2's documented rules.
    const scaleOut = machines['strata-prod-scale-out']!;
    expect(state('LaunchNode')).toEqual({ ...(scaleOut.States.LaunchNode as State), Next: 'CheckNode' });
    expect(state('LaunchNode')).toMatchObject({
      Resource: 'arn:aws:states:::aws-sdk:ec2:runInstances',
      ResultPath: '$.instance',
      Parameters: expect.objectContaining({ 'ClientToken.$': '$.begin.launch.clientToken' }),
    });
    // A Task's "ResultPath": null discards its result and passes its input on
    // (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultpath.html).
    const terminate = 'arn:aws:states:::aws-sdk:ec2:terminateInstances';
    expect(state('TerminateDeadNode')).toMatchObject({
      Resource: terminate,
      Parameters: { 'InstanceIds.$': 'States.Array($.begin.deadInstanceId)' },
      ResultPath: null,
    });
    expect(state('TerminateNode')).toMatchObject({
      Resource: terminate,
      Parameters: { 'InstanceIds.$': 'States.Array($.rollback.instanceId)' },
      ResultPath: null,
    });
    const sdkTasks = allStates(def)
      .filter(([, s]) => String(s.Resource).startsWith('arn:aws:states:::aws-sdk:'))
      .map(([name]) => name);
    expect(sdkTasks.sort()).toEqual(['LaunchNode', 'TerminateDeadNode', 'TerminateNode']);
  });

  it('terminates the dead instance only when the begin step found one and the request allows it', () => {
    // A JSONPath Choice rule may combine rules with "And" (a non-empty array of Choice rules, all of which must
    // match); "IsString": true matches a string and not null, so a dead node with no instance (deadInstanceId null)
    // goes to the Default (https://docs.aws.amazon.com/step-functions/latest/dg/state-choice.html, "Choice Rules
    // (JSONPath)": Boolean operators and type tests).
    expect(state('TerminateDead')).toEqual({
      Type: 'Choice',
      Choices: [
        {
          And: [
            { Variable: '$.begin.deadInstanceId', IsString: true },
            { Variable: '$.begin.options.terminate', BooleanEquals: true },
          ],
          Next: 'TerminateDeadNode',
        },
      ],
      Default: 'FillStart',
    });
  });

  it('starts the fill with $.fill = { done: false, cursor: null }', () => {
    // A Pass state's "Result" is the output of a virtual task, placed at its "ResultPath" in the input
    // (https://docs.aws.amazon.com/step-functions/latest/dg/state-pass.html): the rest of the state is kept.
    expect(state('FillStart')).toEqual({
      Type: 'Pass',
      Result: { done: false, cursor: null },
      ResultPath: '$.fill',
      Next: 'Fill',
    });
  });

  it('rolls back a failed launch, health check or take-over, and terminates a new instance that owns nothing', () => {
    // A catcher's "ResultPath" is where the error output ({ Error, Cause }) is put in the state's input, which goes
    // on to the catcher's "Next"; "States.ALL" matches any error name
    // (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html, "Fallback states";
    // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_stepfunctions.CatchProps.html).
    for (const name of ['LaunchNode', 'CheckNode', 'TakeOver'])
      expect([name, state(name).Catch]).toEqual([
        name,
        [{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'RollBack' }],
      ]);
    // Nothing to undo before the launch: a refused request fails the execution at once.
    expect(state('Begin').Catch).toBeUndefined();
    // A rollback that cannot terminate still fails the execution with the original error.
    expect(state('TerminateNode').Catch).toEqual([
      { ErrorEquals: ['States.ALL'], ResultPath: '$.terminateError', Next: 'ReplaceNodeFailed' },
    ]);
    // A Fail state's ErrorPath and CausePath are reference paths into its input
    // (https://docs.aws.amazon.com/step-functions/latest/dg/state-fail.html): the caught error of $.error.
    expect(state('ReplaceNodeFailed')).toEqual({ Type: 'Fail', ErrorPath: '$.error.Error', CausePath: '$.error.Cause' });
    expect(state('RollBack').Catch).toBeUndefined();
  });

  it('rolls nothing back after the take-over: a dead instance that cannot be terminated and a failed fill go on to Finish', () => {
    // Catchers as above: the error is kept at the catcher's ResultPath, the rest of the state (the new node, the
    // fill's last cursor) is passed on.
    expect(state('TerminateDeadNode').Catch).toEqual([
      { ErrorEquals: ['States.ALL'], ResultPath: '$.terminateError', Next: 'FillStart' },
    ]);
    expect(state('Fill').Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.fillError', Next: 'Finish' }]);
    // From what follows a successful take-over, along every transition and catcher, no state rolls back or fails (a
    // Finish that fails even after its retries fails the execution, with no rollback).
    const after = reachable(['TerminateDead']);
    expect([...after].sort()).toEqual([
      'Fill',
      'FillDone',
      'FillStart',
      'Finish',
      'Replaced',
      'TerminateDead',
      'TerminateDeadNode',
    ]);
    // And before it, every path either reaches the take-over or rolls back (the begin step aside).
    const before = reachable(['LaunchNode'], ['TakeOver']);
    expect(before).toEqual(
      new Set([
        ...after,
        'LaunchNode',
        'CheckNode',
        'NodeHealthy',
        'WaitForNode',
        'TakeOver',
        'RollBack',
        'NewNodeOwnsNothing',
        'TerminateNode',
        'ReplaceNodeFailed',
      ]),
    );
  });
});
