import { spawnSync } from 'node:child_process';
import { App, Duration, Stack, type CfnElement } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { IConstruct } from 'constructs';
import { buildStrataApp } from '../../cdk/app.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { ENVIRONMENT_NAMES, type EnvironmentName } from '../../cdk/config/schema.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { StrataAlarms, type StrataAlarmsProps } from '../../cdk/constructs/strata-alarms.js';
import { InvalidPropsError } from '../../cdk/constructs/validation.js';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';
import { UNALARMED_WORKFLOWS } from '../../cdk/stacks/monitoring-stack.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { COST_SETTINGS_ENV } from '../../core/cost/publisher/settings.js';
import { PLACEHOLDER_ALARM_EMAIL, PLACEHOLDER_CACHENODE, cdkJsonContext, synthesized } from './helpers/synth.js';
import { alarmProps } from './helpers/alarm-props.js';
import { configErrorOf } from './helpers/config-errors.js';

// Each assertion on AWS's names and behaviour (nothing local checks them) cites the page it encodes.

interface AlarmProperties {
  AlarmName: string;
  Namespace?: string;
  MetricName?: string;
  Dimensions?: { Name: string; Value: unknown }[];
  Statistic?: string;
  ExtendedStatistic?: string;
  Period?: number;
  Threshold: number;
  ComparisonOperator: string;
  EvaluationPeriods: number;
  DatapointsToAlarm?: number;
  TreatMissingData?: string;
  AlarmActions?: unknown[];
  OKActions?: unknown[];
  Metrics?: { Id: string; Expression?: string; MetricStat?: unknown }[];
}

/** The Properties of every resource of `type` in a template. */
function props<T>(t: Template, type: string): T[] {
  return Object.values(t.findResources(type)).map((r) => (r as { Properties: T }).Properties);
}

function alarmsOf(t: Template): Record<string, AlarmProperties> {
  return Object.fromEntries(props<AlarmProperties>(t, 'AWS::CloudWatch::Alarm').map((a) => [a.AlarmName, a]));
}

/** An alarm's name with where it notifies on ALARM and on OK. */
const actions = (a: AlarmProperties) => [a.AlarmName, a.AlarmActions, a.OKActions];

/** The dimensions of an alarm's metric as a record. */
function dims(a: AlarmProperties): Record<string, unknown> {
  return Object.fromEntries((a.Dimensions ?? []).map((d) => [d.Name, d.Value]));
}

/** Whether a template value references `resource`: a Ref in its own stack, or a (weak) reference from another stack. */
function refersTo(value: unknown, resource: IConstruct, from: Stack): boolean {
  const stack = Stack.of(resource);
  const id = stack.getLogicalId(resource.node.defaultChild as CfnElement);
  if (stack === from) return JSON.stringify(value) === JSON.stringify({ Ref: id });
  const out = (value as { 'Fn::GetStackOutput'?: { StackName: string; OutputName: string } })['Fn::GetStackOutput'];
  return out !== undefined && out.StackName === stack.stackName && out.OutputName.startsWith(`PublishOutputRef${id}`);
}

const errorOf = configErrorOf;

/** Builds an environment (no cdk-nag, no bundling) from explicit config sources, for the destination variants. */
function build(name: EnvironmentName, context: Record<string, unknown>) {
  const config = loadEnvironmentConfig(name, { context, env: {} });
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
  const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
  return { config, app, stacks, monitoring: Template.fromStack(stacks.monitoring) };
}

const TOPIC_ARN = 'arn:aws:sns:us-east-1:123456789012:strata-oncall';

describe('Alarm destination', () => {
  it.each(['staging', 'prod'] as const)('%s refuses to synthesize without one, and says exactly how to pass it', (env) => {
    const message = errorOf(() => loadEnvironmentConfig(env, { env: {} }));
    expect(message).toMatch(new RegExp(`no alarm destination for environment '${env}'`));
    expect(message).toContain(`npm run synth -- --env ${env} -c alarmEmails=`);
    expect(message).toContain(`npm run synth -- --env ${env} -c alarmTopicArn=arn:aws:sns:`);
    expect(message).toContain('STRATA_ALARM_EMAILS=');
    expect(message).toContain('STRATA_ALARM_TOPIC_ARN=');
  });

  it('npm run synth -- --env staging stops before the CDK CLI starts and prints how to pass one', () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STRATA_ALARM_')));
    const run = spawnSync('npm', ['run', '--silent', 'synth', '--', '--env', 'staging'], {
      cwd: REPO_ROOT,
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("no alarm destination for environment 'staging'");
    expect(run.stderr).toContain('-c alarmEmails=');
    expect(run.stderr).toContain('-c alarmTopicArn=');
  }, 150_000);

  it('dev synthesizes without one, with a CDK warning that says how to add it', () => {
    const { app, stacks, monitoring } = build('dev', {});
    expect(stacks.monitoring.alarmTopic).toBeInstanceOf(sns.Topic);
    monitoring.resourceCountIs('AWS::SNS::Topic', 1);
    monitoring.resourceCountIs('AWS::SNS::Subscription', 0);
    const warning = Match.stringLikeRegexp('no alarm destination[\\s\\S]*-c alarmEmails=[\\s\\S]*-c alarmTopicArn=');
    Annotations.fromStack(stacks.monitoring).hasWarning('/Strata-dev-Monitoring', warning);
    expect(() => app.synth()).not.toThrow();
  });

  it('with e-mails: one topic, one e-mail subscription per address, and every alarm notifies it on ALARM and OK', () => {
    const { monitoring } = build('staging', { alarmEmails: 'oncall@example.org, ops@example.org' });
    monitoring.resourceCountIs('AWS::SNS::Topic', 1);
    const subs = props<{ Protocol: string; Endpoint: string }>(monitoring, 'AWS::SNS::Subscription').map((x) => [
      x.Protocol,
      x.Endpoint,
    ]);
    expect(subs.sort()).toEqual([
      ['email', 'oncall@example.org'],
      ['email', 'ops@example.org'],
    ]);
    const topic = { Ref: Object.keys(monitoring.findResources('AWS::SNS::Topic'))[0]! };
    for (const a of Object.values(alarmsOf(monitoring))) expect(actions(a)).toEqual([a.AlarmName, [topic], [topic]]);
  });

  it('with a topic ARN: every alarm notifies that topic, and no topic or subscription is created', () => {
    const { stacks, monitoring } = build('prod', { alarmTopicArn: TOPIC_ARN });
    expect(stacks.monitoring.alarmTopic.topicArn).toBe(TOPIC_ARN);
    monitoring.resourceCountIs('AWS::SNS::Topic', 0);
    monitoring.resourceCountIs('AWS::SNS::Subscription', 0);
    const alarms = Object.values(alarmsOf(monitoring));
    expect(alarms.length).toBe(stacks.monitoring.alarms.all.length);
    for (const a of alarms) expect(actions(a)).toEqual([a.AlarmName, [TOPIC_ARN], [TOPIC_ARN]]);
  });
});

describe.each(ENVIRONMENT_NAMES)('%s: alarms on what the request metrics cannot see', (env) => {
  const s = synthesized(env, { nag: false });
  const c = s.config;
  const alarms = alarmsOf(s.templates.monitoring);
  const limits = c.monitoring.alarms;
  const name = (suffix: string) => `strata-${env}-${suffix}`;
  const monitoringStack = s.stacks.monitoring;

  it('alarms on API Gateway 5XXError and p90 Latency of the REST API stage (ApiName, Stage)', () => {
    const [restApi] = props<{ Name: string }>(s.templates.api, 'AWS::ApiGateway::RestApi');
    const [stage] = props<{ StageName: string }>(s.templates.api, 'AWS::ApiGateway::Stage');
    const apiDims = { ApiName: restApi!.Name, Stage: stage!.StageName };
    const errors = alarms[name('api-5xx')]!;
    // https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-metrics-and-dimensions.html
    // AWS/ApiGateway 5XXError by ApiName + Stage; its Average is the share of requests answered 5xx (0-1).
    expect(errors).toMatchObject({ Namespace: 'AWS/ApiGateway', MetricName: '5XXError', Statistic: 'Average', Period: 60 });
    expect(dims(errors)).toEqual(apiDims);
    expect(errors).toMatchObject({
      Threshold: limits.apiServerErrorRatePercent / 100,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    expect(errors).toMatchObject({ EvaluationPeriods: 3, DatapointsToAlarm: 3 });
    const latency = alarms[name('api-latency')]!;
    // https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-metrics-and-dimensions.html
    // Latency (milliseconds, request to response), by ApiName + Stage.
    expect(latency).toMatchObject({ Namespace: 'AWS/ApiGateway', MetricName: 'Latency', ExtendedStatistic: 'p90', Period: 60 });
    expect(dims(latency)).toEqual(apiDims);
    expect(latency).toMatchObject({ Threshold: limits.apiLatencyP90Ms, ComparisonOperator: 'GreaterThanThreshold' });
    expect(latency).toMatchObject({ EvaluationPeriods: 5, DatapointsToAlarm: 5 });
    // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.TreatMissingData.html
    // API Gateway publishes for requests only; an idle API is no outage.
    for (const a of [errors, latency]) expect(a.TreatMissingData).toBe('notBreaching');
  });

  it('alarms on Errors and Throttles of every function: the five API ones, the step one, the cost publisher', () => {
    // With the policy evaluator (on here) paper 000's trigger is the rule default-prelaunch: no scale-trigger function
    // (test/infra/default-rules-wiring.test.ts covers an environment without the evaluator, and its alarms).
    expect(s.config.policies.evaluator).toBe(true);
    expect(s.stacks.workflows.scaleTriggerFunction).toBeUndefined();
    expect(alarms[name('fn-scale-trigger-errors')]).toBeUndefined();
    const functions: [string, IConstruct, boolean][] = [
      ...Object.entries(s.stacks.api.functions).map(
        ([fn, f]) => [`api-${fn}`, f.function, false] as [string, IConstruct, boolean],
      ),
      ['workflow-steps', s.stacks.workflows.stepFunction.function, false],
      ['cost-publisher', monitoringStack.costPublisher.function.function, false],
    ];
    expect(functions).toHaveLength(7);
    const period = limits.trafficPeriodMinutes * 60;
    const every = c.workflows.scaleTrigger.scheduleMinutes * 60;
    for (const [fn, construct, scheduled] of functions) {
      const errors = alarms[name(`fn-${fn}-errors`)];
      const throttles = alarms[name(`fn-${fn}-throttles`)];
      expect({ fn, errors: errors !== undefined, throttles: throttles !== undefined }).toEqual({
        fn,
        errors: true,
        throttles: true,
      });
      for (const [a, metricName] of [
        [errors!, 'Errors'],
        [throttles!, 'Throttles'],
      ] as const) {
        // https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html
        // AWS/Lambda, Errors / Throttles by FunctionName, counted with Sum.
        expect(a).toMatchObject({ Namespace: 'AWS/Lambda', MetricName: metricName, Statistic: 'Sum', EvaluationPeriods: 1 });
        expect(a.ComparisonOperator).toBe('GreaterThanOrEqualToThreshold');
        expect(Object.keys(dims(a))).toEqual(['FunctionName']);
        const refersToIt = refersTo(dims(a).FunctionName, construct, monitoringStack);
        expect({ fn, metricName, refersToIt }).toEqual({ fn, metricName, refersToIt: true });
      }
      expect(errors!.Threshold).toBe(limits.functionErrorsPerPeriod);
      expect(throttles!.Threshold).toBe(1);
      // https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html
      // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.TreatMissingData.html
      // Errors is reported (0 or 1) for every invocation, so no data = not invoked: breaching for the scale trigger
      // (its schedule stopped, so scale-outs never start), whose period spans two runs; idle elsewhere.
      const expected = scheduled
        ? { missing: 'breaching', period: Math.max(period, 2 * every) }
        : { missing: 'notBreaching', period };
      expect({ fn, missing: errors!.TreatMissingData, period: errors!.Period }).toEqual({ fn, ...expected });
      expect(throttles!.TreatMissingData).toBe('notBreaching');
    }
  });

  it('alarms on ExecutionsFailed and ExecutionsTimedOut of every state machine but ReplaceNode, RollingUpgrade, InvalidationSweep, OrderMarkers and UploadCommit (StateMachineArn)', () => {
    const all = Object.entries(s.stacks.workflows.stateMachines);
    expect(all).toHaveLength(9);
    // Their two alarm metrics each would take an idle dev over its budget (test/infra/idle-cost.test.ts): none.
    // UploadCommit's failures reach its upload's owner (the poll) and the status-change rule.
    expect(UNALARMED_WORKFLOWS).toEqual([
      'replace-node',
      'rolling-upgrade',
      'invalidation-sweep',
      'order-markers',
      'upload-commit',
    ]);
    for (const wf of UNALARMED_WORKFLOWS)
      for (const suffix of ['failed', 'timed-out']) expect(alarms[name(`wf-${wf}-${suffix}`)]).toBeUndefined();
    const machines = all.filter(([wf]) => !UNALARMED_WORKFLOWS.includes(wf as WorkflowName));
    expect(machines.map(([wf]) => wf)).toEqual(['scale-out', 'scale-in', 'evict-to-s3', 'tier-migrate']);
    for (const [wf, machine] of machines) {
      for (const [suffix, metricName] of [
        ['failed', 'ExecutionsFailed'],
        ['timed-out', 'ExecutionsTimedOut'],
      ] as const) {
        const a = alarms[name(`wf-${wf}-${suffix}`)];
        expect({ wf, suffix, exists: a !== undefined }).toEqual({ wf, suffix, exists: true });
        // https://app.unpkg.com/aws-cdk-lib@2.211.0/files/aws-stepfunctions/lib/stepfunctions-canned-metrics.generated.js
        // (CDK's metrics generated from AWS's specification): AWS/States, Sum by StateMachineArn. Any such execution alarms.
        expect(a).toMatchObject({ Namespace: 'AWS/States', MetricName: metricName, Statistic: 'Sum', Period: 60 });
        expect(a).toMatchObject({ Threshold: 0, ComparisonOperator: 'GreaterThanThreshold', EvaluationPeriods: 1 });
        expect(Object.keys(dims(a!))).toEqual(['StateMachineArn']);
        expect(refersTo(dims(a!).StateMachineArn, machine, monitoringStack)).toBe(true);
        // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.TreatMissingData.html
        // Executions run on demand; no execution is not an outage.
        expect(a!.TreatMissingData).toBe('notBreaching');
      }
    }
  });

  it('sends failed, timed-out and aborted executions of the unalarmed workflows to the alarm topic (EventBridge)', () => {
    const rules = s.templates.monitoring.findResources('AWS::Events::Rule') as Record<
      string,
      { Properties: Record<string, unknown> }
    >;
    const [rule, ...others] = Object.values(rules).filter((r) => JSON.stringify(r.Properties).includes('aws.states'));
    expect(others).toHaveLength(0);
    // https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html: Step Functions sends "Step Functions
    // Execution Status Change" (source aws.states) to the default bus by itself; detail carries executionArn,
    // stateMachineArn, name and status (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED).
    const pattern = rule!.Properties.EventPattern as { detail: { status: string[]; stateMachineArn: unknown[] } } & Record<
      string,
      unknown
    >;
    expect(pattern).toMatchObject({ source: ['aws.states'], 'detail-type': ['Step Functions Execution Status Change'] });
    expect(pattern.detail.status).toEqual(['FAILED', 'TIMED_OUT', 'ABORTED']);
    const machines = UNALARMED_WORKFLOWS.map((w) => s.stacks.workflows.stateMachines[w]);
    expect(pattern.detail.stateMachineArn).toHaveLength(machines.length);
    machines.forEach((m, i) => expect(refersTo(pattern.detail.stateMachineArn[i], m, monitoringStack)).toBe(true));
    // The one target is the alarm topic, with a message naming the execution (input transformer over the event).
    const [target, ...more] = rule!.Properties.Targets as {
      Arn: unknown;
      InputTransformer?: { InputPathsMap: Record<string, unknown> };
    }[];
    expect(more).toHaveLength(0);
    expect(JSON.stringify(target!.Arn)).toContain('AlarmTopic');
    expect(target!.InputTransformer?.InputPathsMap).toMatchObject({
      'detail-name': '$.detail.name',
      'detail-status': '$.detail.status',
    });
    // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sns-permissions: the
    // topic's policy lets events.amazonaws.com publish (the SNS target adds it to a topic created in the stack).
    const policies = s.templates.monitoring.findResources('AWS::SNS::TopicPolicy') as Record<
      string,
      { Properties: Record<string, unknown> }
    >;
    expect(JSON.stringify(Object.values(policies))).toMatch(
      /"Service":"events\.amazonaws\.com".*"sns:Publish"|"sns:Publish".*"Service":"events\.amazonaws\.com"/,
    );
  });

  it('alarms when the policy ticker fails in 2 of 3 minutes, and when it starts nothing for 5 minutes', () => {
    const ticker = s.stacks.workflows.policyTicker!.stateMachine;
    const failed = alarms[name('policy-ticker-failed')]!;
    const stopped = alarms[name('policy-ticker-stopped')]!;
    // https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html ("Execution metrics": ExecutionsFailed
    // and ExecutionsStarted, counts, under the dimension StateMachineArn; Express state machines publish them too).
    // https://app.unpkg.com/aws-cdk-lib@2.211.0/files/aws-stepfunctions/lib/stepfunctions-canned-metrics.generated.js
    // (CDK's metrics from AWS's specification): AWS/States, Sum.
    expect(failed).toMatchObject({ Namespace: 'AWS/States', MetricName: 'ExecutionsFailed', Statistic: 'Sum', Period: 60 });
    expect(stopped).toMatchObject({ Namespace: 'AWS/States', MetricName: 'ExecutionsStarted', Statistic: 'Sum', Period: 300 });
    for (const a of [failed, stopped]) {
      expect(Object.keys(dims(a))).toEqual(['StateMachineArn']);
      expect(refersTo(dims(a).StateMachineArn, ticker, monitoringStack)).toBe(true);
    }
    expect(failed).toMatchObject({ Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold' });
    expect(failed).toMatchObject({ EvaluationPeriods: 3, DatapointsToAlarm: 2, TreatMissingData: 'notBreaching' });
    // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.TreatMissingData.html
    // ExecutionsStarted has data only when an execution starts: a schedule that stopped leaves none, which must alarm.
    expect(stopped).toMatchObject({ Threshold: 1, ComparisonOperator: 'LessThanThreshold', EvaluationPeriods: 1 });
    expect(stopped.TreatMissingData).toBe('breaching');
  });

  it('alarms on the serverless hot tier at 75% of its storage and ECPU limits, and on throttled commands (clusterId)', () => {
    const [cache] = props<{ ServerlessCacheName: string }>(s.templates.data, 'AWS::ElastiCache::ServerlessCache');
    // https://github.com/cdklabs/cdk-monitoring-constructs/pull/766
    // A serverless cache's metrics carry clusterId = the cache's name.
    const cacheDims = { clusterId: cache!.ServerlessCacheName };
    const share = limits.hotTierUsagePercent / 100;
    const atLeast = 'GreaterThanOrEqualToThreshold';
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/red-ug/Scaling.html
    // AWS recommends alarming at 75% of each usage limit (the default share).
    expect(limits.hotTierUsagePercent).toBe(75);
    const storage = alarms[name('hot-storage')]!;
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/serverless-metrics-events-redis.html
    // BytesUsedForCache, bytes (the limit's GB taken as 10^9 bytes).
    expect(storage).toMatchObject({
      Namespace: 'AWS/ElastiCache',
      MetricName: 'BytesUsedForCache',
      Statistic: 'Maximum',
      Period: 60,
    });
    expect(storage).toMatchObject({ ComparisonOperator: atLeast, EvaluationPeriods: 3, DatapointsToAlarm: 3 });
    expect(storage.Threshold).toBe(Math.round(share * c.hotTier.maxDataStorageGb * 1e9));
    const ecpu = alarms[name('hot-ecpu')]!;
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/serverless-metrics-events-redis.html
    // ElastiCacheProcessingUnits counts ECPUs consumed, so its one-minute Sum is 60 x ECPU/s.
    expect(ecpu).toMatchObject({
      Namespace: 'AWS/ElastiCache',
      MetricName: 'ElastiCacheProcessingUnits',
      Statistic: 'Sum',
      Period: 60,
    });
    expect(ecpu).toMatchObject({ ComparisonOperator: atLeast, EvaluationPeriods: 3, DatapointsToAlarm: 3 });
    expect(ecpu.Threshold).toBe(Math.round(share * c.hotTier.maxEcpuPerSecond * 60));
    const throttled = alarms[name('hot-throttled')]!;
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/serverless-metrics-events-redis.html
    // ThrottledCmds, a count.
    expect(throttled).toMatchObject({ Namespace: 'AWS/ElastiCache', MetricName: 'ThrottledCmds', Statistic: 'Sum', Period: 60 });
    expect(throttled).toMatchObject({ Threshold: 1, ComparisonOperator: atLeast, EvaluationPeriods: 3, DatapointsToAlarm: 2 });
    for (const a of [storage, ecpu, throttled]) {
      expect(dims(a)).toEqual(cacheDims);
      // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.TreatMissingData.html
      // An idle cache may publish nothing, and its limits are not at risk then.
      expect(a.TreatMissingData).toBe('notBreaching');
    }
  });

  it('alarms when a cache node stops reporting (Strata/Fleet SilentNodes > 0), neither raised nor cleared by a silent publisher', () => {
    const a = alarms[name('silent-nodes')]!;
    const period = c.monitoring.costPublisher.scheduleMinutes * 60;
    expect(a).toMatchObject({ Namespace: 'Strata/Fleet', MetricName: 'SilentNodes', Statistic: 'Maximum', Period: period });
    expect(a).toMatchObject({ Threshold: 0, ComparisonOperator: 'GreaterThanThreshold', EvaluationPeriods: 1 });
    expect(a.Dimensions).toEqual([{ Name: 'Environment', Value: env }]);
    // https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.TreatMissingData.html
    // Ignore keeps the state; the publisher's own silence is the cost-publisher-silent alarm (breaching).
    expect(a.TreatMissingData).toBe('ignore');
    expect(alarms[name('cost-publisher-silent')]!.TreatMissingData).toBe('breaching');
  });

  it('sends every alarm, and its recovery, to the destination', () => {
    const topic = { Ref: Object.keys(s.templates.monitoring.findResources('AWS::SNS::Topic'))[0]! };
    const endpoints = props<{ Endpoint: string }>(s.templates.monitoring, 'AWS::SNS::Subscription').map((x) => x.Endpoint);
    expect(endpoints).toEqual([PLACEHOLDER_ALARM_EMAIL]);
    expect(Object.keys(alarms)).toHaveLength(monitoringStack.alarms.all.length);
    for (const a of Object.values(alarms)) expect(actions(a)).toEqual([a.AlarmName, [topic], [topic]]);
  });

  it("bills exactly the metrics its alarms read: metricCount and the cost publisher's alarmMetrics match the template", () => {
    // A plain alarm reads one metric; a metric-math alarm each MetricStat of its expression (CloudWatch bills both per metric).
    const read = Object.values(alarms).reduce(
      (n, a) => n + (a.MetricName ? 1 : (a.Metrics ?? []).filter((m) => m.MetricStat).length),
      0,
    );
    expect(monitoringStack.alarms.metricCount).toBe(read);
    const fn = props<unknown>(s.templates.monitoring, 'AWS::Lambda::Function').find((r) =>
      JSON.stringify(r).includes(COST_SETTINGS_ENV),
    );
    const billed = /\\?"alarmMetrics\\?":(\d+)/.exec(JSON.stringify(fn))?.[1];
    expect(Number(billed)).toBe(read);
  });
});

describe('StrataAlarms construct: inputs', () => {
  const props = alarmProps;
  const fn = (stack: Stack, id = 'Fn') => lambda.Function.fromFunctionName(stack, id, `probe-${id}`);

  it.each<[string, (stack: Stack) => Partial<StrataAlarmsProps>, RegExp]>([
    [
      'a usage share at the limit',
      () => ({ hotTierUsagePercent: 100 }),
      /hotTierUsagePercent must be in \(0, 100\): at the limit the cache/,
    ],
    ['a fractional error count', () => ({ functionErrorsPerPeriod: 0.5 }), /functionErrorsPerPeriod must be a whole number >= 1/],
    ['a 5xx share of 0', () => ({ apiServerErrorRatePercent: 0 }), /apiServerErrorRatePercent must be in \(0, 100\]/],
    [
      'a name that cannot name an alarm',
      (st) => ({ functions: { 'Api Keys': { function: fn(st) } } }),
      /function name 'Api Keys' must be 1-40/,
    ],
    [
      'a schedule in seconds',
      (st) => ({ functions: { t: { function: fn(st), expectedEvery: Duration.seconds(90) } } }),
      /'t': expectedEvery must be whole/,
    ],
    [
      'hot-tier limits of 0',
      () => ({ hotTier: { cacheName: 'c', maxDataStorageGb: 0, maxEcpuPerSecond: 1 } }),
      /hotTier limits must be positive/,
    ],
    ['a REST API without a stage', () => ({ restApi: { apiName: 'a', stage: '' } }), /restApi needs both apiName and stage/],
  ])('fails on %s, naming the construct and what to change', (_what, over, message) => {
    const stack = new Stack(new App(), 'Probe');
    let error: unknown;
    try {
      new StrataAlarms(stack, 'Alarms', props(stack, over(stack)));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidPropsError);
    expect((error as Error).message).toMatch(/^Probe\/Alarms: /);
    expect((error as Error).message).toMatch(message);
  });

  it('refuses to watch a function twice', () => {
    const stack = new Stack(new App(), 'Probe');
    const alarms = new StrataAlarms(stack, 'Alarms', props(stack, { functions: { steps: { function: fn(stack) } } }));
    expect(() => alarms.watchFunction('steps', { function: fn(stack, 'Other') })).toThrow(/function 'steps' is watched twice/);
  });

  it('counts a function watched after construction in metricCount (read lazily by the cost publisher)', () => {
    const stack = new Stack(new App(), 'Probe');
    const alarms = new StrataAlarms(stack, 'Alarms', props(stack));
    const before = alarms.metricCount;
    alarms.watchFunction('late', { function: fn(stack) });
    expect(alarms.metricCount).toBe(before + 2);
    expect(alarms.all).toContain(alarms.functionAlarms.late!.errors);
  });
});
