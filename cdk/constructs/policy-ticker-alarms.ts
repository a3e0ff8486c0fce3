import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';

/** The policy ticker (cdk/constructs/policy-ticker.ts) as the alarms watch it. */
export interface WatchedPolicyTicker {
  /** Its Express state machine; its ARN is the StateMachineArn dimension of its execution metrics. */
  readonly stateMachine: sfn.IStateMachine;
  /** How often EventBridge starts an execution. */
  readonly every: Duration;
}

/** The ticker's alarms. */
export interface PolicyTickerAlarms {
  /** Executions failed in 2 of the last 3 minutes: the background rules are not being run. */
  readonly failed: cloudwatch.Alarm;
  /** No execution started for 5 schedule periods: the schedule (or Step Functions) stopped. */
  readonly stopped: cloudwatch.Alarm;
}

/** Schedule periods without a started execution before the ticker counts as stopped. */
export const TICKER_SILENT_PERIODS = 5;

/**
 * The alarms of the policy ticker. With the policy evaluator on, the ticker is what runs the default rules (the node-fill
 * eviction, the eviction schedule, paper 000's pre-launch, the idle scale-in) and every policy's background rules, so a
 * ticker that fails or stops leaves the fleet unmanaged with no other sign: nothing else alarms on it.
 *
 * Both read Step Functions' execution metrics (AWS/States, dimension StateMachineArn), which Express state machines
 * publish too. `name` builds an alarm's name; the caller adds the actions.
 */
export function policyTickerAlarms(
  scope: Construct,
  environment: string,
  ticker: WatchedPolicyTicker,
  name: (suffix: string) => string,
): PolicyTickerAlarms {
  const minute = Duration.minutes(1);
  const states = (metricName: string, period: Duration) =>
    new cloudwatch.Metric({
      namespace: 'AWS/States',
      metricName,
      dimensionsMap: { StateMachineArn: ticker.stateMachine.stateMachineArn },
      statistic: 'Sum',
      period,
    });
  // Each minute's execution is a fresh start, so one failed minute may be a passing hiccup (a throttled S3 read) that the
  // next one gets past: 2 of 3 minutes. A tick that hangs fails too: its Lambda times out (60 s), which the ticker
  // catches as TickFailed; the execution's own 70 s timeout only ends a minute whose last tick ran late, which the next
  // minute repeats, so ExecutionsTimedOut is not read (one metric less: idle dev stays within its $15 budget). No
  // execution is no data, not breaching: the stopped alarm covers silence.
  const failed = new cloudwatch.Alarm(scope, 'PolicyTickerFailed', {
    alarmName: name('policy-ticker-failed'),
    alarmDescription:
      `${environment}'s policy ticker failed in 2 of the last 3 minutes: background rules (default rules included) are ` +
      "not running; see the state machine's log group and the evaluator function's logs",
    metric: states('ExecutionsFailed', minute),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    evaluationPeriods: 3,
    datapointsToAlarm: 2,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  // EventBridge starts one execution every `every`; none over several periods means the schedule, or the starts, stopped.
  // ExecutionsStarted is published only when an execution starts, so here silence is the outage: breaching.
  const silent = Duration.seconds(ticker.every.toSeconds() * TICKER_SILENT_PERIODS);
  const stopped = new cloudwatch.Alarm(scope, 'PolicyTickerStopped', {
    alarmName: name('policy-ticker-stopped'),
    alarmDescription:
      `${environment}'s policy ticker started no execution in ${silent.toHumanString()} (it should start one every ` +
      `${ticker.every.toHumanString()}): background rules are not running; check its EventBridge schedule`,
    metric: states('ExecutionsStarted', silent),
    threshold: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.BREACHING,
  });
  return { failed, stopped };
}
