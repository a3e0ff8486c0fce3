import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { buildStrataApp } from '../../cdk/app.js';
import { ENVIRONMENTS, loadEnvironmentConfig } from '../../cdk/config/load.js';
import type { EnvironmentConfigInput } from '../../cdk/config/schema.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { ColdTierBucket, RING_STORE_DOCUMENTS } from '../../cdk/constructs/cold-tier-bucket.js';
import { EXPRESS_MAX_SECONDS, JOBS_TIMEOUT_SECONDS, TICKER_TIMEOUT_SECONDS } from '../../cdk/constructs/policy-ticker.js';
import { idleCostOf } from '../../cdk/lib/idle-cost.js';
import { stateMachinesOf, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import type { CompiledPolicy } from '../../core/policy/compile.js';
import { HEALTH_CHECKER_KEY } from '../../core/nodes/health-snapshot.js';
import { EVALUATOR_STATE_KEY } from '../../core/policy/evaluator-store.js';
import { RING_KEY } from '../../core/ring/store.js';
import { JOB_RUNNER_BUDGET_MS } from '../../core/policy/job-runner.js';
import { JOBS_KEY } from '../../core/policy/jobs.js';
import { nextTick, TICK_WINDOW_MS, type TickResult } from '../../core/policy/ticker.js';
import { configErrorOf } from './helpers/config-errors.js';
import { cdkJsonContext, PLACEHOLDER_ALARM_EMAIL, PLACEHOLDER_CACHENODE, synthesized } from './helpers/synth.js';

/**
 * The policy ticker (cdk/constructs/policy-ticker.ts): AWS's rules for what it is made of, checked on the synthesized
 * prod templates. Each rule cites the AWS page it comes from.
 */
const prod = synthesized('prod');
const wf = prod.templates.workflows;
const ticker = prod.stacks.workflows.policyTicker!;

type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };
const resources = (t: Template) => t.toJSON().Resources as Record<string, Resource>;
const idOf = (c: { node: { defaultChild?: unknown } }) =>
  prod.stacks.workflows.getLogicalId(c.node.defaultChild as lambda.CfnFunction);
const machineId = idOf(ticker.stateMachine);
const evaluatorId = idOf(ticker.evaluator.function);
const evaluatorRoleId = idOf(ticker.evaluator.role);
const machineRoleId = idOf(ticker.stateMachine.role);
const flushId = idOf(ticker.flusher.function);
const jobsId = idOf(ticker.jobs.function);
const jobsRoleId = idOf(ticker.jobs.role);
const evaluator = resources(wf)[evaluatorId]!;
const flusher = resources(wf)[flushId]!;
const jobs = resources(wf)[jobsId]!;
const envOf = (r: Resource) => (r.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
const env = envOf(evaluator);

/** Every statement of the inline policies attached to a role. */
function statementsOf(t: Template, roleId: string): Json[] {
  return Object.values(resources(t))
    .filter((r) => r.Type === 'AWS::IAM::Policy' && (r.Properties.Roles as { Ref: string }[]).some((x) => x.Ref === roleId))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Json[] }).Statement);
}
const actions = (st: Json) => [st.Action].flat() as string[];

const definition: AslDefinition = stateMachinesOf(wf.toJSON() as Parameters<typeof stateMachinesOf>[0])[
  'strata-prod-policy-ticker'
]!;
const state = (name: string) => definition.States[name] as Json;

describe('Policy ticker', () => {
  it('is an Express state machine timed out after 70 s: past the 55 s tick window, well within Express’s 5 minutes', () => {
    // "Express Workflows ... can run for up to five minutes": https://docs.aws.amazon.com/step-functions/latest/dg/choosing-workflow-type.html
    // "Maximum execution time: 5 minutes": https://docs.aws.amazon.com/step-functions/latest/dg/express-limits.html
    const machine = resources(wf)[machineId]!;
    expect(machine.Properties).toMatchObject({ StateMachineName: 'strata-prod-policy-ticker', StateMachineType: 'EXPRESS' });
    expect(definition.TimeoutSeconds).toBe(TICKER_TIMEOUT_SECONDS);
    expect(TICKER_TIMEOUT_SECONDS * 1000).toBeGreaterThan(TICK_WINDOW_MS);
    expect(TICKER_TIMEOUT_SECONDS).toBeLessThan(EXPRESS_MAX_SECONDS);
    expect(EXPRESS_MAX_SECONDS).toBe(5 * 60);
  });

  it('logs every event (without execution data) to the state machines’ log group and is traced, like the workflows', () => {
    // Express executions have no history but these logs ("Execution history is not captured by Step Functions.
    // Logging must be enabled through Amazon CloudWatch Logs"): https://docs.aws.amazon.com/step-functions/latest/dg/express-at-least-once-execution.html
    const logGroupId = idOf(prod.stacks.workflows.stateMachineLogs);
    expect(resources(wf)[machineId]!.Properties).toMatchObject({
      LoggingConfiguration: {
        Level: 'ALL',
        IncludeExecutionData: false,
        Destinations: [{ CloudWatchLogsLogGroup: { LogGroupArn: { 'Fn::GetAtt': [logGroupId, 'Arn'] } } }],
      },
      TracingConfiguration: { Enabled: true },
    });
  });

  it('loops Tick → Again → WaitForTick → Tick while the evaluator answers again, and ends the minute otherwise', () => {
    expect(definition.StartAt).toBe('Tick');
    expect(Object.keys(definition.States).sort()).toEqual([
      'Again',
      'JobsWaiting',
      'MinuteDone',
      'StartJobRunner',
      'Tick',
      'TickFailed',
      'WaitForTick',
    ]);
    // The flush (in the VPC) and the evaluation (outside it) side by side; the evaluation's answer is the next state.
    expect(state('Tick')).toMatchObject({ Type: 'Parallel', OutputPath: '$[1]', Next: 'JobsWaiting' });
    expect(state('Again')).toEqual({
      Type: 'Choice',
      Choices: [{ Variable: '$.again', BooleanEquals: true, Next: 'WaitForTick' }],
      Default: 'MinuteDone',
    });
    expect(state('MinuteDone')).toEqual({ Type: 'Succeed' });
  });

  it('waits SecondsPath $.waitSeconds, which the evaluator answers as a whole number of seconds from 1 to 59', () => {
    // SecondsPath: "A time, in seconds, to wait ... specified using a path from the state's input data. You must
    // specify an integer value for this field"; an Express workflow waits at most five minutes:
    // https://docs.aws.amazon.com/step-functions/latest/dg/amazon-states-language-wait-state.html
    expect(state('WaitForTick')).toEqual({ Type: 'Wait', SecondsPath: '$.waitSeconds', Next: 'Tick' });
    // The contract (core/policy/ticker.ts): whole-second timers (shortestTimerSeconds rounds up) give whole seconds.
    const none = { rules: [] } as unknown as CompiledPolicy;
    for (const every of [undefined, 1, 2, 5, 30, 59, 60, 61, 600]) {
      const { waitSeconds } = nextTick(none, 0, 0, every);
      expect([every, Number.isInteger(waitSeconds) && waitSeconds >= 1 && waitSeconds <= 59]).toEqual([every, true]);
    }
  });

  it('invokes both functions themselves (payloadResponseOnly): the state is their input, the TickResult the next state', () => {
    // Each Task's Resource is the function's ARN, with no Parameters, ResultPath or OutputPath: input and output pass
    // through whole, and the Parallel state's output is the array of its branches' (OutputPath $[1]: the evaluation).
    // Step Functions caps a task's input and output at 262,144 bytes (256 KiB) of UTF-8:
    // https://docs.aws.amazon.com/step-functions/latest/dg/express-limits.html; a TickResult is a few dozen bytes.
    const raw = JSON.stringify(resources(wf)[machineId]!.Properties.DefinitionString);
    for (const id of [evaluatorId, flushId]) expect(raw).toContain(JSON.stringify({ 'Fn::GetAtt': [id, 'Arn'] }));
    expect(JSON.stringify(state('Tick'))).not.toContain('arn:aws:states:::lambda:invoke');
    const [flushBranch, evaluateBranch] = (state('Tick') as { Branches: { StartAt: string; States: Record<string, Json> }[] })
      .Branches;
    expect(flushBranch!.StartAt).toBe('FlushWriteBack');
    expect(evaluateBranch!.StartAt).toBe('Evaluate');
    const evaluate = evaluateBranch!.States.Evaluate!;
    for (const k of ['Parameters', 'ResultPath', 'OutputPath', 'InputPath', 'ResultSelector'])
      expect(evaluate[k]).toBeUndefined();
    // A failed flush is caught in its branch: the rules still tick (the flush is tried again at the next tick).
    expect(flushBranch!.States.FlushWriteBack!.Catch).toEqual([{ ErrorEquals: ['States.ALL'], Next: 'FlushFailed' }]);
    const largest: TickResult = {
      startedAt: new Date(8.64e15).toISOString(),
      ticks: Number.MAX_SAFE_INTEGER,
      again: false,
      waitSeconds: 59,
    };
    expect(Buffer.byteLength(JSON.stringify(largest), 'utf8')).toBeLessThan(262_144 / 1000);
  });

  it('retries a tick at most twice, on Lambda service errors only, and fails the execution on anything else', () => {
    const tick = state('Tick') as { Catch: Json[]; Branches: { States: Record<string, { Retry: Json[] }> }[] };
    const evaluate = tick.Branches[1]!.States.Evaluate!;
    expect(evaluate.Retry).toHaveLength(1);
    expect(tick.Branches[0]!.States.FlushWriteBack!.Retry).toEqual(evaluate.Retry);
    const [retry] = evaluate.Retry as [
      { ErrorEquals: string[]; MaxAttempts: number; IntervalSeconds: number; BackoffRate: number },
    ];
    for (const e of retry.ErrorEquals) expect(e).toMatch(/^Lambda\./);
    expect(retry.MaxAttempts).toBe(2);
    // Both retries wait at most 1 + 2 s: a failed tick never outlives the minute; the next execution tries again.
    expect(retry.IntervalSeconds * (1 + retry.BackoffRate)).toBeLessThanOrEqual(TICKER_TIMEOUT_SECONDS - TICK_WINDOW_MS / 1000);
    expect(tick.Catch).toEqual([{ ErrorEquals: ['States.ALL'], Next: 'TickFailed' }]);
    expect(state('TickFailed')).toEqual({ Type: 'Fail', ErrorPath: '$.Error', CausePath: '$.Cause' });
  });

  it('is started every minute with an empty input: rate(1 minute), singular for a value of 1', () => {
    // "If the value is equal to 1, then the unit must be singular": https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html
    const rules = Object.values(resources(wf)).filter(
      (r) => r.Type === 'AWS::Events::Rule' && JSON.stringify(r.Properties.Targets).includes(`{"Ref":"${machineId}"}`),
    );
    expect(rules).toHaveLength(1);
    expect(rules[0]!.Properties).toMatchObject({
      ScheduleExpression: 'rate(1 minute)',
      State: 'ENABLED',
      Targets: [
        {
          Arn: { Ref: machineId },
          Input: '{}',
          Id: expect.any(String),
          RoleArn: expect.anything(),
          // A start that could not happen within its minute is dropped: the next minute's starts anyway.
          RetryPolicy: { MaximumEventAgeInSeconds: 60, MaximumRetryAttempts: 2 },
        },
      ],
    });
  });

  it("runs the flush in the VPC's private subnets like the step Lambda, and the evaluator outside the VPC", () => {
    // "Connect your function to private subnets to access private resources":
    // https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html. The VPC's private subnets are isolated (no
    // NAT gateway) and it has no interface endpoint for Step Functions or CloudWatch, whose public endpoints the
    // evaluator calls: "Lambda functions connected to a VPC don't have internet access by default" (same page).
    expect(evaluator.Properties.VpcConfig).toBeUndefined();
    const vpc = flusher.Properties.VpcConfig as { SubnetIds: unknown[]; SecurityGroupIds: unknown[] };
    const steps = Object.values(resources(wf)).find(
      (r) => r.Type === 'AWS::Lambda::Function' && /workflow steps/.test(String(r.Properties.Description)),
    )!;
    expect(vpc).toEqual(steps.Properties.VpcConfig);
    expect(JSON.stringify(vpc.SecurityGroupIds)).toContain('CoordinatorSecurityGroup');
    // One subnet per AZ, each of the Network stack's private (isolated) group.
    expect(vpc.SubnetIds).toHaveLength(prod.config.availabilityZones.length);
    const network = resources(prod.templates.network);
    for (const s of vpc.SubnetIds) {
      const id = Object.keys(network).find((k) => network[k]!.Type === 'AWS::EC2::Subnet' && JSON.stringify(s).includes(k))!;
      expect(network[id]!.Properties.Tags).toEqual(
        expect.arrayContaining([
          { Key: 'aws-cdk:subnet-name', Value: 'private' },
          { Key: 'aws-cdk:subnet-type', Value: 'Isolated' },
        ]),
      );
    }
  });

  it('sizes both functions at 256 MB and 60 s, reserves no concurrency (two minutes’ executions may overlap)', () => {
    for (const f of [evaluator, flusher]) {
      expect(f.Properties).toMatchObject({ MemorySize: 256, Timeout: 60, Runtime: 'nodejs24.x', Architectures: ['arm64'] });
      expect(f.Properties.ReservedConcurrentExecutions).toBeUndefined();
      expect(envOf(f)).toMatchObject({ STRATA_ENV: 'prod', STRATA_POLICY_EVALUATOR: '1' });
    }
    // The evaluator reads the ring store's reports and the policy store, and names the hot tier's cache; it builds no tier.
    for (const k of ['STRATA_WARM_RING_BUCKET', 'STRATA_POLICY_STORE', 'STRATA_NODE_STATS_ID_PREFIX', 'STRATA_HOT_CACHE_NAME'])
      expect([k, env[k]]).toEqual([k, expect.anything()]);
    for (const k of ['STRATA_REDIS_URL', 'STRATA_S3_BUCKET', 'STRATA_WARM_SECRET_FROM_RING'])
      expect([k, env[k]]).toEqual([k, undefined]);
    // The flush builds the tiers as the step Lambda does.
    const flushEnv = envOf(flusher);
    for (const k of [
      'STRATA_REDIS_URL',
      'STRATA_S3_BUCKET',
      'STRATA_WARM_RING_BUCKET',
      'STRATA_POLICY_STORE',
      'STRATA_WARM_SECRET_FROM_RING',
    ])
      expect([k, flushEnv[k]]).toEqual([k, expect.anything()]);
  });

  it('lets the evaluator start, list and describe exactly ScaleOut, ScaleIn, EvictToS3, TierMigrate, ReplaceNode and OrderMarkers', () => {
    // StartExecution and ListExecutions act on a stateMachine resource, DescribeExecution on an execution:
    // https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html
    const machines = prod.stacks.workflows.stateMachines;
    // TierMigrate for its listing: a grow or shrink never starts while a migration runs. ReplaceNode: the failure
    // detector starts it for each node it marks DOWN (and the workflow service lists every machine it is given).
    // OrderMarkers: the weekly prune, default-prune-order-markers.
    const workflows = ['scale-out', 'scale-in', 'evict-to-s3', 'tier-migrate', 'replace-node', 'order-markers'] as const;
    const refs = workflows.map((w) => ({ Ref: idOf(machines[w]) }));
    const statements = statementsOf(wf, evaluatorRoleId);
    const states = statements.filter((st) => actions(st).some((a) => a.startsWith('states:')));
    const starts = states.filter((st) => actions(st).includes('states:StartExecution'));
    expect(starts).toHaveLength(1);
    expect(actions(starts[0]!).sort()).toEqual(['states:ListExecutions', 'states:StartExecution']);
    expect([starts[0]!.Resource].flat()).toEqual(expect.arrayContaining(refs));
    expect([starts[0]!.Resource].flat()).toHaveLength(6);
    const describe = states.find((st) => actions(st).includes('states:DescribeExecution'))!;
    const executions = (w: string) => ({
      'Fn::Join': ['', ['arn:aws:states:us-east-1:', { Ref: 'AWS::AccountId' }, `:execution:strata-prod-${w}:*`]],
    });
    const described = ['evict-to-s3', 'order-markers', 'replace-node', 'scale-in', 'scale-out', 'tier-migrate'];
    expect(describe.Resource).toEqual(described.map(executions));
    expect(states).toHaveLength(2);
    // The workflow names it may start, by the ARNs of exactly those (core/composition/workflow-service-env.ts).
    const arns = JSON.stringify(env.STRATA_WORKFLOW_ARNS);
    for (const w of workflows) expect(arns).toContain(`\\"${w}\\":\\"`);
    expect(arns).not.toContain('policy-ticker');
  });

  it('starts the job runner without waiting for it, only when the tick says a queued job has no runner', () => {
    // An optional field: a Choice on a path that is absent fails the state (States.Runtime) unless IsPresent guards it
    // (https://docs.aws.amazon.com/step-functions/latest/dg/state-choice.html, "IsPresent").
    expect(state('JobsWaiting')).toEqual({
      Type: 'Choice',
      Choices: [
        {
          And: [
            { Variable: '$.runJobs', IsPresent: true },
            { Variable: '$.runJobs', BooleanEquals: true },
          ],
          Next: 'StartJobRunner',
        },
      ],
      Default: 'Again',
    });
    // The Lambda service integration with InvocationType Event calls Invoke asynchronously: the task ends as soon as
    // Lambda has queued the event, so a five-minute run never holds the ticker (whose executions end within 70 s)
    // (https://docs.aws.amazon.com/step-functions/latest/dg/connect-lambda.html). Its result is dropped (ResultPath
    // null): the state stays the TickResult the Again choice reads; a failed start is caught and asked again next tick.
    const start = state('StartJobRunner');
    expect(start).toMatchObject({
      Type: 'Task',
      Resource: expect.stringContaining(':states:::lambda:invoke'),
      Parameters: {
        FunctionName: expect.stringMatching(new RegExp(`:function:${jobsId}$`)),
        InvocationType: 'Event',
        Payload: {},
      },
      ResultPath: null,
      Next: 'Again',
      Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: null, Next: 'Again' }],
    });
    expect(start.Retry).toBeUndefined();
  });

  it('runs jobs in the VPC for five minutes an invocation, its timeout a minute past, with no async retry', () => {
    expect(jobs.Properties.VpcConfig).toEqual(flusher.Properties.VpcConfig);
    expect(jobs.Properties).toMatchObject({ MemorySize: 512, Timeout: JOBS_TIMEOUT_SECONDS, Runtime: 'nodejs24.x' });
    // The lease a runner holds on a job lasts a minute past its budget (core/policy/job-runner.ts): about when the
    // invocation would have been timed out, so a runner that died frees its job then.
    expect(JOBS_TIMEOUT_SECONDS).toBe(JOB_RUNNER_BUDGET_MS / 1000 + 60);
    // Lambda's own timeout is at most 900 s (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html).
    expect(JOBS_TIMEOUT_SECONDS).toBeLessThanOrEqual(900);
    expect(envOf(jobs)).toMatchObject({ STRATA_ENV: 'prod', STRATA_POLICY_EVALUATOR: '1' });
    // Asynchronous invocations are retried twice and kept up to 6 hours by default; MaximumRetryAttempts is 0-2 and
    // MaximumEventAgeInSeconds 60-21600 (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html,
    // https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-lambda-eventinvokeconfig.html).
    // The ticker asks again at its next tick, so neither a retry nor an old event is wanted.
    const config = Object.values(resources(wf)).filter(
      (r) => r.Type === 'AWS::Lambda::EventInvokeConfig' && JSON.stringify(r.Properties.FunctionName).includes(jobsId),
    );
    expect(config).toHaveLength(1);
    expect(config[0]!.Properties).toMatchObject({ MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60, Qualifier: '$LATEST' });
  });

  it('lets the job runner reach the three tiers and write the jobs board, and no other policy document', () => {
    const managed = JSON.stringify(resources(wf)[jobsRoleId]!.Properties.ManagedPolicyArns);
    for (const p of [
      'ColdTierAccessPolicy',
      'ColdTierRingReadRing',
      'ColdTierRingReadPolicies',
      'ColdTierRingWriteEvaluatorJobs',
    ])
      expect(managed).toContain(p);
    expect(managed).not.toMatch(/RingWrite(Policies|Ring|Migrations|Executions|ScaleLocks|EvaluatorState)/);
    expect(JSON.stringify(statementsOf(wf, jobsRoleId))).toContain('elasticache:Connect');
    // The evaluator queues on the same board.
    expect(JSON.stringify(resources(wf)[evaluatorRoleId]!.Properties.ManagedPolicyArns)).toContain(
      'ColdTierRingWriteEvaluatorJobs',
    );
    expect(RING_STORE_DOCUMENTS.evaluatorJobs).toBe(JOBS_KEY);
  });

  it('lets the state machine invoke exactly its three functions (their ARNs and versions), and nothing else', () => {
    // A function, version or alias ARN (…:function:name[:qualifier]) names what lambda:InvokeFunction may call:
    // https://docs.aws.amazon.com/lambda/latest/dg/lambda-api-permissions-ref.html
    const statements = statementsOf(wf, machineRoleId);
    const invoke = statements.filter((st) => actions(st).some((a) => a.startsWith('lambda:')));
    const arnsOf = (id: string) => [{ 'Fn::GetAtt': [id, 'Arn'] }, { 'Fn::Join': ['', [{ 'Fn::GetAtt': [id, 'Arn'] }, ':*']] }];
    expect(invoke.flatMap((st) => [st.Resource].flat())).toEqual(
      expect.arrayContaining([...arnsOf(flushId), ...arnsOf(evaluatorId), ...arnsOf(jobsId)]),
    );
    expect(invoke.flatMap((st) => [st.Resource].flat())).toHaveLength(6);
    for (const st of invoke) expect(actions(st)).toEqual(['lambda:InvokeFunction']);
    // The rest is X-Ray and the log delivery: no other service, no states:, s3: or ec2: action.
    for (const st of statements.filter((x) => !invoke.includes(x)))
      for (const a of actions(st)) expect(a).toMatch(/^(xray|logs):/);
  });

  it("changes the hot tier's usage limits on that cache only", () => {
    // DescribeServerlessCaches and ModifyServerlessCache act on the serverlesscache resource type,
    // arn:${Partition}:elasticache:${Region}:${Account}:serverlesscache:${ServerlessCacheName}:
    // https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticache.html
    const hot = statementsOf(wf, evaluatorRoleId).filter((st) => actions(st).some((a) => a.startsWith('elasticache:')));
    expect(hot).toHaveLength(1);
    expect(actions(hot[0]!).sort()).toEqual(['elasticache:DescribeServerlessCaches', 'elasticache:ModifyServerlessCache']);
    expect(JSON.stringify(hot[0]!.Resource)).toContain(':serverlesscache:strata-prod');
    // The flush connects to the cache (elasticache:Connect); the evaluator never does.
    expect(actions(hot[0]!)).not.toContain('elasticache:Connect');
  });

  it('reads CloudWatch metrics with GetMetricData, which takes no resource-level permission, and nothing more', () => {
    // The Service Authorization Reference lists no resource type for cloudwatch:GetMetricData, so Resource is "*":
    // https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html
    // https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/permissions-reference-cw.html
    const statements = statementsOf(wf, evaluatorRoleId).filter((st) => actions(st).some((a) => a.startsWith('cloudwatch:')));
    expect(statements).toEqual([{ Sid: 'ReadMetrics', Action: 'cloudwatch:GetMetricData', Effect: 'Allow', Resource: '*' }]);
  });

  it("reads the policy in force, the ring and the nodes' reports, and writes only its own state in the policy store", () => {
    const managed = JSON.stringify(resources(wf)[evaluatorRoleId]!.Properties.ManagedPolicyArns);
    // No tier access: the values are the flush's business.
    expect(managed).not.toContain('ColdTierAccessPolicy');
    for (const p of [
      'ColdTierRingWriteRing',
      'ColdTierRingReadNodeStats',
      'ColdTierRingReadPolicies',
      'ColdTierRingWriteEvaluatorState',
    ])
      expect(managed).toContain(p);
    // Never the policy documents (the admin function's alone) nor the ring's writers' documents but the ring itself
    // (the failure detector's DOWN marks: below).
    expect(managed).not.toMatch(/RingWrite(Policies|Migrations|Executions|ScaleLocks)/);
    // Its state document exactly (core/policy/evaluator-store.ts), written by compare-and-set: s3:PutObject alone
    // (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html), and listable as s3:prefix so
    // that it reads as absent (404) before the first tick.
    expect(RING_STORE_DOCUMENTS.evaluatorState).toBe(EVALUATOR_STATE_KEY);
    const key = `${ColdTierBucket.RING_PREFIX}/${EVALUATOR_STATE_KEY}`;
    const policy = Object.values(resources(prod.templates.data)).find(
      (r) => r.Type === 'AWS::IAM::ManagedPolicy' && JSON.stringify(r.Properties).includes(`/${key}"`),
    )!;
    const statements = (policy.Properties.PolicyDocument as { Statement: Json[] }).Statement;
    expect(statements.map((st) => [st.Sid, st.Action])).toEqual([
      ['RingDocuments', ['s3:GetObject', 's3:PutObject']],
      ['ListRingDocuments', 's3:ListBucket'],
    ]);
    expect(statements[1]!.Condition).toEqual({ StringLike: { 's3:prefix': [key] } });
  });
});

describe("Policy ticker: the cache nodes' failure detector", () => {
  const managed = JSON.stringify(resources(wf)[evaluatorRoleId]!.Properties.ManagedPolicyArns);
  /** The ring store's managed policy granting `access` to `key` (ColdTierBucket.grantRingRead / grantRingWrite). */
  const ringPolicy = (key: string, write: boolean) =>
    Object.values(resources(prod.templates.data)).find(
      (r) =>
        r.Type === 'AWS::IAM::ManagedPolicy' &&
        r.Properties.Description ===
          `Strata ring store: ${write ? 'read and conditional write' : 'read'} of ${ColdTierBucket.RING_PREFIX}/${key} in the cold tier's bucket`,
    )!;
  const statementsOfPolicy = (r: Resource) => (r.Properties.PolicyDocument as { Statement: Json[] }).Statement;

  it('reads the nodes’ EC2 status with DescribeInstanceStatus, which takes no resource-level permission, and nothing more of EC2', () => {
    // The Service Authorization Reference lists no resource type for ec2:DescribeInstanceStatus, and "Amazon EC2
    // ec2:Describe* API actions do not support resource-level permissions", so Resource is "*":
    // https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html
    // https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-policies-for-amazon-ec2.html
    const ec2 = statementsOf(wf, evaluatorRoleId).filter((st) => actions(st).some((a) => a.startsWith('ec2:')));
    expect(ec2).toEqual([
      { Sid: 'DescribeInstanceStatus', Action: 'ec2:DescribeInstanceStatus', Effect: 'Allow', Resource: '*' },
    ]);
  });

  it('may start ReplaceNode (StartExecution on that state machine), as it starts the other workflows', () => {
    // StartExecution acts on the stateMachine resource type:
    // https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html
    const replace = { Ref: idOf(prod.stacks.workflows.stateMachines['replace-node']) };
    const starts = statementsOf(wf, evaluatorRoleId).filter((st) => actions(st).includes('states:StartExecution'));
    expect(starts.flatMap((st) => [st.Resource].flat())).toContainEqual(replace);
    expect(JSON.stringify(env.STRATA_WORKFLOW_ARNS)).toContain('\\"replace-node\\":\\"');
  });

  it('marks DOWN by a conditional write of the ring document, keeps its own state, and reads the operators’ switch', () => {
    // S3 conditional writes (If-Match / If-None-Match) need s3:PutObject alone; a GET of a document not written yet is
    // a 404 only with s3:ListBucket on its key as s3:prefix:
    // https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
    // https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html ("Permissions")
    expect(RING_STORE_DOCUMENTS.healthChecker).toBe(HEALTH_CHECKER_KEY);
    expect(RING_STORE_DOCUMENTS.healthControls).toBe('health/controls');
    for (const [p, key, access] of [
      ['ColdTierRingWriteRing', RING_KEY, ['s3:GetObject', 's3:PutObject']],
      ['ColdTierRingWriteHealthChecker', HEALTH_CHECKER_KEY, ['s3:GetObject', 's3:PutObject']],
      ['ColdTierRingReadHealthControls', 'health/controls', 's3:GetObject'],
    ] as const) {
      expect(managed).toContain(p);
      const statements = statementsOfPolicy(ringPolicy(key, Array.isArray(access)));
      expect(statements.map((st) => [st.Sid, st.Action])).toEqual([
        ['RingDocuments', access],
        ['ListRingDocuments', 's3:ListBucket'],
      ]);
      expect(statements[1]!.Condition).toEqual({ StringLike: { 's3:prefix': [`${ColdTierBucket.RING_PREFIX}/${key}`] } });
    }
    // The switch is the operators': read, never written, by the detector.
    expect(managed).not.toContain('RingWriteHealthControls');
  });

  it('stays within the default quota of 10 managed policies per role', () => {
    // "Managed policies attached to an IAM role: 10" (adjustable):
    // https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html
    const arns = resources(wf)[evaluatorRoleId]!.Properties.ManagedPolicyArns as unknown[];
    expect(arns.length).toBeLessThanOrEqual(10);
  });
});

describe('Policy ticker configuration', () => {
  it('is on by default in every environment', () => {
    for (const name of ['dev', 'staging', 'prod'] as const)
      expect(loadEnvironmentConfig(name, { context: { alarmEmails: PLACEHOLDER_ALARM_EMAIL } }).policies.evaluator).toBe(true);
    for (const r of Object.values(resources(prod.templates.api)).filter((x) => x.Type === 'AWS::Lambda::Function'))
      expect((r.Properties.Environment as { Variables: Json }).Variables.STRATA_POLICY_EVALUATOR).toBe('1');
  });

  it('refuses a value that is not true or false', () => {
    const files = { dev: { ...structuredClone(ENVIRONMENTS.dev), policies: { evaluator: 'yes' } } };
    const bad = files as unknown as Record<string, EnvironmentConfigInput>;
    expect(configErrorOf(() => loadEnvironmentConfig('dev', {}, bad))).toMatch(/policies\.evaluator/);
  });

  it('deploys nothing of it with policies.evaluator: false, and tells no API function an evaluator runs', () => {
    const files = { dev: { ...structuredClone(ENVIRONMENTS.dev), policies: { evaluator: false } } };
    const config = loadEnvironmentConfig('dev', { context: { alarmEmails: PLACEHOLDER_ALARM_EMAIL } }, files);
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
    const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
    expect(stacks.workflows.policyTicker).toBeUndefined();
    const workflows = Template.fromStack(stacks.workflows);
    workflows.resourcePropertiesCountIs('AWS::StepFunctions::StateMachine', { StateMachineType: 'EXPRESS' }, 0);
    expect(JSON.stringify(workflows.toJSON())).not.toContain('STRATA_POLICY_EVALUATOR');
    expect(JSON.stringify(Template.fromStack(stacks.api).toJSON())).not.toContain('STRATA_POLICY_EVALUATOR');
    const templates = { workflows, api: Template.fromStack(stacks.api) };
    expect(idleCostOf({ templates, config }).find((l) => l.id === 'ticker')!.usdPerMonth).toBe(0);
  });
});

describe('Policy ticker idle cost', () => {
  it('counts one Express execution of ~1 s a minute, each invoking the flush and the evaluator (256 MB each) for ~200 ms', () => {
    // Express: $1.00 per million requests, $0.06 per GB-hour billed in 64 MB chunks (https://aws.amazon.com/step-functions/pricing/);
    // Lambda arm64: $0.20 per million requests, $0.0000133334 per GB-second (core/cost/model/catalogs/aws-2026-11.ts).
    const line = idleCostOf(prod).find((l) => l.id === 'ticker')!;
    expect(line.detail).toMatch(/^43,800 Express executions a month/);
    expect(line.detail).toContain('512 MB in all');
    const expected =
      (43_800 * 1) / 1e6 +
      (43_800 * 1 * (64 / 1024) * 0.06) / 3600 +
      (2 * 43_800 * 0.2) / 1e6 +
      43_800 * 0.2 * 0.5 * 0.0000133334;
    expect(line.usdPerMonth).toBe(Math.round(expected * 100) / 100);
    expect(line.usdPerMonth).toBe(0.17);
  });
});
