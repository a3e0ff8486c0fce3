import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { JOB_RUNNER_BUDGET_MS } from '../../core/policy/job-runner.js';
import { TICK_WINDOW_MS } from '../../core/policy/ticker.js';
import { REPO_ROOT } from '../lib/packaging.js';
import { StrataFunction } from './strata-function.js';
import { check } from './validation.js';

/** The scheduled evaluator's entry point (`handler(event: TickEvent): Promise<TickResult>`, core/policy/ticker.ts). */
export const POLICY_EVALUATOR_ENTRY = `${REPO_ROOT}/lambdas/policy/evaluator.ts`;
/** The write-back flush beside the tiers (`handler(): Promise<{ flushed }>`). */
export const POLICY_FLUSH_ENTRY = `${REPO_ROOT}/lambdas/policy/flush.ts`;
/** The background jobs' runner beside the tiers (copies, moves, deletes, blob collections: core/policy/job-runner.ts). */
export const POLICY_JOBS_ENTRY = `${REPO_ROOT}/lambdas/policy/jobs.ts`;

/** How often EventBridge starts the ticker: its floor, once a minute; shorter timers tick inside an execution. */
export const TICKER_SCHEDULE_MINUTES = 1;

/**
 * An execution ends at its last tick, at most {@link TICK_WINDOW_MS} (55 s) after it began, plus that tick's own
 * run; 70 s leaves room for one slow tick and stays far below an Express execution's 5 minutes, so a stuck
 * execution is timed out long before the one after the next has started.
 */
export const TICKER_TIMEOUT_SECONDS = 70;

/** An Express execution runs for at most 5 minutes (https://docs.aws.amazon.com/step-functions/latest/dg/express-limits.html). */
export const EXPRESS_MAX_SECONDS = 300;

/** The evaluator function: one tick reads the fleet's reports and CloudWatch, and starts at most a few workflows. */
export const EVALUATOR_MEMORY_MB = 256;
export const EVALUATOR_TIMEOUT_SECONDS = 60;
/** The flush function: writes down the write-back values that are due (passes of 1,000 while a backlog lasts, up to 10 s). */
export const FLUSH_MEMORY_MB = 256;
export const FLUSH_TIMEOUT_SECONDS = 60;
/**
 * The job runner: works JOB_RUNNER_BUDGET_MS (5 min) per invocation and saves its place; its timeout leaves a minute
 * past that, which is also how long past its budget a runner's lease on a job lasts (job-runner.ts), so a runner that
 * died frees its job about when its invocation would have ended. Values of up to a few MiB pass through it one at a
 * time: 512 MB.
 */
export const JOBS_MEMORY_MB = 512;
export const JOBS_TIMEOUT_SECONDS = JOB_RUNNER_BUDGET_MS / 1000 + 60;

/** Lambda service errors worth one quick retry within the same tick (not the evaluator's own failures). */
const TRANSIENT_LAMBDA_ERRORS = [
  'Lambda.ClientExecutionTimeoutException',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
];

export interface PolicyTickerProps {
  /** `strata-<env>`: the state machine is `<prefix>-policy-ticker`. */
  readonly namePrefix: string;
  /** The environment's name, for descriptions. */
  readonly environment: string;
  /**
   * The flush runs in the VPC behind the coordinators' security group, beside the tiers it writes to. The evaluator
   * runs outside it: Step Functions, CloudWatch and ElastiCache's API are public endpoints, which the VPC (no NAT
   * gateway, no interface endpoints for them) cannot reach.
   */
  readonly vpc: ec2.IVpc;
  readonly vpcSubnets: ec2.SubnetSelection;
  readonly securityGroup: ec2.ISecurityGroup;
  /** Execution logs (Express executions have no other history). */
  readonly logGroup: logs.ILogGroup;
  /** X-Ray tracing of the executions. @default true */
  readonly tracing?: boolean;
  /** Of the evaluator's log group. */
  readonly logRetention?: logs.RetentionDays;
  readonly logRemovalPolicy?: RemovalPolicy;
}

/**
 * The policy engine's clock in AWS (paper 003's background rules; the contract is core/policy/ticker.ts).
 * EventBridge starts an Express state machine every minute (its schedules fire at most once a minute); the state
 * machine invokes the evaluator Lambda with its state and, while the evaluator answers `again`, waits its
 * `waitSeconds` and invokes it again, so timers under a minute tick within the minute's execution:
 *
 *   Tick (Parallel: Flush ‖ Evaluate; output = the TickResult) → Again? ─ again → Wait (SecondsPath $.waitSeconds) → Tick
 *                                                                      └ otherwise → MinuteDone (Succeed)
 *
 * A tick that fails is retried at most twice, and only on Lambda service errors (throttling included); anything
 * else ends the execution as failed (TickFailed), and the next minute's execution starts afresh. A policy without
 * sub-minute timers costs one execution and one invocation a minute.
 *
 * The evaluator is a {@link StrataFunction} outside the VPC with `STRATA_POLICY_EVALUATOR=1` and
 * `cloudwatch:GetMetricData`; the stack binds the ring store, the policy store and the workflows it starts. The
 * flush is one in the VPC; the stack binds the tiers, the fleet and the policy store (`bindX()`).
 */
export class PolicyTicker extends Construct {
  /** The tick: the policy's background rules (outside the VPC). */
  readonly evaluator: StrataFunction;
  /** The write-back flush (in the VPC). */
  readonly flusher: StrataFunction;
  /** The background jobs' runner (in the VPC), started without waiting when the evaluator queued a job. */
  readonly jobs: StrataFunction;
  readonly stateMachine: sfn.StateMachine;
  readonly schedule: events.Rule;

  constructor(scope: Construct, id: string, props: PolicyTickerProps) {
    super(scope, id);
    check(
      this,
      TICKER_TIMEOUT_SECONDS * 1000 > TICK_WINDOW_MS && TICKER_TIMEOUT_SECONDS < EXPRESS_MAX_SECONDS,
      `the ticker's timeout (${TICKER_TIMEOUT_SECONDS} s) must exceed the tick window (${TICK_WINDOW_MS / 1000} s) and stay below an Express execution's ${EXPRESS_MAX_SECONDS} s`,
    );

    this.evaluator = new StrataFunction(this, 'Evaluator', {
      entry: POLICY_EVALUATOR_ENTRY,
      description: `Strata ${props.environment} policy evaluator (background rules, one tick per invocation)`,
      memoryMb: EVALUATOR_MEMORY_MB,
      timeoutSeconds: EVALUATOR_TIMEOUT_SECONDS,
      // No reserved concurrency: two minutes' executions may overlap for a few seconds, and a reservation of 1
      // would throttle the second one's tick.
      ...(props.logRetention !== undefined ? { logRetention: props.logRetention } : {}),
      ...(props.logRemovalPolicy !== undefined ? { logRemovalPolicy: props.logRemovalPolicy } : {}),
      environment: { STRATA_ENV: props.environment, STRATA_POLICY_EVALUATOR: '1' },
    });

    this.flusher = new StrataFunction(this, 'Flush', {
      entry: POLICY_FLUSH_ENTRY,
      description: `Strata ${props.environment} write-back flush (each policy tick, with no traffic too)`,
      vpc: props.vpc,
      vpcSubnets: props.vpcSubnets,
      securityGroup: props.securityGroup,
      memoryMb: FLUSH_MEMORY_MB,
      timeoutSeconds: FLUSH_TIMEOUT_SECONDS,
      ...(props.logRetention !== undefined ? { logRetention: props.logRetention } : {}),
      ...(props.logRemovalPolicy !== undefined ? { logRemovalPolicy: props.logRemovalPolicy } : {}),
      environment: { STRATA_ENV: props.environment, STRATA_POLICY_EVALUATOR: '1' },
    });

    this.jobs = new StrataFunction(this, 'Jobs', {
      entry: POLICY_JOBS_ENTRY,
      description: `Strata ${props.environment} policy job runner (background copies, moves, deletes, blob collections)`,
      vpc: props.vpc,
      vpcSubnets: props.vpcSubnets,
      securityGroup: props.securityGroup,
      memoryMb: JOBS_MEMORY_MB,
      timeoutSeconds: JOBS_TIMEOUT_SECONDS,
      ...(props.logRetention !== undefined ? { logRetention: props.logRetention } : {}),
      ...(props.logRemovalPolicy !== undefined ? { logRemovalPolicy: props.logRemovalPolicy } : {}),
      environment: { STRATA_ENV: props.environment, STRATA_POLICY_EVALUATOR: '1' },
    });
    // Started asynchronously: Lambda would retry a failed event twice and keep an event queued up to 6 hours
    // (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html); the ticker asks again at
    // its next tick while a job waits, so neither is wanted: no retry, and an event older than a minute is dropped.
    this.jobs.function.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });

    // The cost publisher's projected cost and the request metrics; GetMetricData takes no resource-level permission
    // (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
    const readMetrics = new iam.Policy(this, 'ReadMetrics', {
      statements: [new iam.PolicyStatement({ sid: 'ReadMetrics', actions: ['cloudwatch:GetMetricData'], resources: ['*'] })],
      roles: [this.evaluator.role],
    });
    Validations.of(readMetrics).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'cloudwatch:GetMetricData supports no resource-level permission (the Service Authorization Reference lists no resource ' +
        'type for it), so its Resource must be "*"; the statement grants that read-only action and nothing else.',
    });

    const invoke = (id: string, fn: StrataFunction) => {
      const t = new tasks.LambdaInvoke(this, id, {
        lambdaFunction: fn.function,
        // The Resource is the function itself: its input is the state (a TickEvent), its output what it answers.
        payloadResponseOnly: true,
        // The default retrier (6 attempts from 2 s, doubling) outlasts the execution's timeout: the one below instead.
        retryOnServiceExceptions: false,
      });
      t.addRetry({
        errors: TRANSIENT_LAMBDA_ERRORS,
        interval: Duration.seconds(1),
        backoffRate: 2,
        maxAttempts: 2,
        jitterStrategy: sfn.JitterType.FULL,
      });
      return t;
    };
    // The flush and the tick side by side; the tick's answer (index 1) drives the loop. A failed flush does not stop
    // the rules (it is logged by the function, and retried at the next tick).
    const flush = invoke('FlushWriteBack', this.flusher).addCatch(new sfn.Pass(this, 'FlushFailed'), { errors: ['States.ALL'] });
    const tick = new sfn.Parallel(this, 'Tick', { outputPath: '$[1]' }).branch(flush).branch(invoke('Evaluate', this.evaluator));
    const failed = new sfn.Fail(this, 'TickFailed', { errorPath: '$.Error', causePath: '$.Cause' });
    tick.addCatch(failed, { errors: ['States.ALL'] });
    const wait = new sfn.Wait(this, 'WaitForTick', { time: sfn.WaitTime.secondsPath('$.waitSeconds') });
    const again = new sfn.Choice(this, 'Again')
      .when(sfn.Condition.booleanEquals('$.again', true), wait.next(tick))
      .otherwise(new sfn.Succeed(this, 'MinuteDone'));
    // A queued job with no runner: start one (an Event invocation: the ticker does not wait for it, and its result
    // is not the tick's). A failed start is logged and asked again at the next tick.
    const startJobs = new tasks.LambdaInvoke(this, 'StartJobRunner', {
      lambdaFunction: this.jobs.function,
      invocationType: tasks.LambdaInvocationType.EVENT,
      payload: sfn.TaskInput.fromObject({}),
      resultPath: sfn.JsonPath.DISCARD,
      retryOnServiceExceptions: false,
    });
    startJobs.addCatch(again, { errors: ['States.ALL'], resultPath: sfn.JsonPath.DISCARD });
    const jobsWaiting = new sfn.Choice(this, 'JobsWaiting')
      .when(
        sfn.Condition.and(sfn.Condition.isPresent('$.runJobs'), sfn.Condition.booleanEquals('$.runJobs', true)),
        startJobs.next(again),
      )
      .otherwise(again);

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineName: `${props.namePrefix}-policy-ticker`,
      definitionBody: sfn.DefinitionBody.fromChainable(tick.next(jobsWaiting)),
      stateMachineType: sfn.StateMachineType.EXPRESS,
      timeout: Duration.seconds(TICKER_TIMEOUT_SECONDS),
      tracingEnabled: props.tracing ?? true,
      removalPolicy: RemovalPolicy.DESTROY,
      logs: { destination: props.logGroup, level: sfn.LogLevel.ALL, includeExecutionData: false },
    });
    // sfn.StateMachine declares DependsOn its role although RoleArn: GetAtt already implies it; cfn-lint warns (W3005).
    (this.stateMachine.node.defaultChild as sfn.CfnStateMachine).addMetadata('cfn-lint', {
      config: {
        ignore_checks: ['W3005'],
        ignore_reasons: { W3005: 'redundant DependsOn added by aws-cdk-lib sfn.StateMachine' },
      },
    });
    const stack = Stack.of(this);
    for (const f of [this.evaluator, this.flusher, this.jobs]) {
      const fnId = stack.getLogicalId(f.function.node.defaultChild as lambda.CfnFunction);
      Validations.of(this.stateMachine.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${fnId}.Arn>:*]`,
        reason: "policy-ticker: invokes any version of its three Lambdas, as Step Functions' lambda:InvokeFunction grant does",
      });
    }
    Validations.of(this.stateMachine.role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'policy-ticker: X-Ray (PutTraceSegments, GetSampling*) and CloudWatch Logs delivery (CreateLogDelivery, ...) actions take no resource',
    });

    this.schedule = new events.Rule(this, 'Schedule', {
      description: `Strata ${props.environment}: tick the policy's background rules (one ticker execution a minute)`,
      schedule: events.Schedule.rate(Duration.minutes(TICKER_SCHEDULE_MINUTES)),
      targets: [
        new targets.SfnStateMachine(this.stateMachine, {
          input: events.RuleTargetInput.fromObject({}),
          // A start that failed for a minute is pointless: the next minute's starts anyway.
          maxEventAge: Duration.minutes(1),
          retryAttempts: 2,
        }),
      ],
    });
  }
}
