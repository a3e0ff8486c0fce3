import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { METRICS, type MetricDef } from '../../core/metrics/metric-catalog.js';
import { policyTickerAlarms, type PolicyTickerAlarms, type WatchedPolicyTicker } from './policy-ticker-alarms.js';
import { check } from './validation.js';

/** Tiers the request recorder reports Hits for (`none` is a miss, counted by Misses). */
const HIT_TIERS = ['l1', 'hot', 'warm', 'cold', 'origin'] as const;

/** Names of watched functions and state machines: they name alarms and construct ids. */
const WATCH_NAME = /^[a-z][a-z0-9-]{0,39}$/;

/** ElastiCache's GB of usage limits, as bytes. Taken as 10^9: were it 2^30, the alarm would fire a little early, never late. */
const BYTES_PER_GB = 1e9;

/** A Lambda function whose Errors and Throttles alarm. */
export interface WatchedFunction {
  /** The function; its name is the FunctionName dimension. */
  readonly function: lambda.IFunction;
  /**
   * It runs on a schedule at least this often, and nothing else would notice that schedule stopping: a period without
   * a single invocation then alarms too (its Errors alarm treats missing data as breaching).
   * @default - invoked on demand: a period without invocations is no alarm
   */
  readonly expectedEvery?: Duration;
}

/** The API Gateway REST API stage whose 5XXError and Latency alarm. */
export interface WatchedRestApi {
  /** `ApiName` dimension: the REST API's name. */
  readonly apiName: string;
  /** `Stage` dimension: the deployed stage's name. */
  readonly stage: string;
}

/** The ElastiCache Serverless cache whose throttling and usage (against its usage limits) alarm. */
export interface WatchedServerlessCache {
  /** `clusterId` dimension: the serverless cache's name. */
  readonly cacheName: string;
  /** Its data-storage usage limit, GB. */
  readonly maxDataStorageGb: number;
  /** Its ECPU usage limit, ECPUs per second. */
  readonly maxEcpuPerSecond: number;
}

/** The alarms of one watched function. */
export interface FunctionAlarms {
  /** Errors (exceptions, timeouts, out of memory) at or above `functionErrorsPerPeriod` in a period. */
  readonly errors: cloudwatch.Alarm;
  /** Any throttled invocation. */
  readonly throttles: cloudwatch.Alarm;
}

/** The alarms of one watched state machine. */
export interface StateMachineAlarms {
  /** Any execution that failed. */
  readonly failed: cloudwatch.Alarm;
  /** Any execution that ran past its timeout. */
  readonly timedOut: cloudwatch.Alarm;
}

export interface StrataAlarmsProps {
  /** `Environment` dimension value. */
  readonly environment: string;
  /** Where every alarm notifies (ALARM and back to OK). */
  readonly topic: sns.ITopic;
  /** Monthly budget, USD: the projected-cost thresholds are shares of it. */
  readonly budgetMonthlyUsd: number;
  /** Shares of the budget: Warning below Critical. */
  readonly warningFraction: number;
  /** Share of the budget above which the projected month is Critical. */
  readonly criticalFraction: number;
  /** Hit ratio below this (% of lookups) alarms. */
  readonly hitRatioFloorPercent: number;
  /** Errors above this (% of requests) alarm. */
  readonly errorRateCeilingPercent: number;
  /** Periods with fewer requests than this neither breach the hit-ratio nor the error-rate alarm. */
  readonly minRequestsPerPeriod: number;
  /** Period of the hit-ratio and error-rate alarms. */
  readonly trafficPeriod: Duration;
  /** The fullest node above this (%) alarms. */
  readonly nodeFillWatermarkPercent: number;
  /** How often the cost publisher runs: the period of the alarms on its metrics. */
  readonly publisherPeriod: Duration;
  /** The REST API stage whose 5XXError and Latency alarm. @default - no API Gateway alarms */
  readonly restApi?: WatchedRestApi;
  /** API Gateway's 5XXError Average above this (% of requests) alarms. @default 5 */
  readonly apiServerErrorRatePercent?: number;
  /** API Gateway's p90 Latency above this (ms) alarms. @default 1000 */
  readonly apiLatencyP90Ms?: number;
  /**
   * Functions by name (1-40 characters of a-z, 0-9 and "-": it names their alarms), each with an Errors and a Throttles
   * alarm; {@link StrataAlarms.watchFunction} adds more. @default {}
   */
  readonly functions?: Readonly<Record<string, WatchedFunction>>;
  /** A function's Errors at or above this count in a traffic period alarm. @default 1 */
  readonly functionErrorsPerPeriod?: number;
  /** State machines by name (as functions' names), each with an ExecutionsFailed and an ExecutionsTimedOut alarm. @default {} */
  readonly stateMachines?: Readonly<Record<string, sfn.IStateMachine>>;
  /** The hot tier's serverless cache. @default - no hot-tier alarms */
  readonly hotTier?: WatchedServerlessCache;
  /** The policy ticker, whose failed and stopped executions alarm (policy-ticker-alarms.ts). @default - none */
  readonly policyTicker?: WatchedPolicyTicker;
  /** Hot-tier usage at or above this share (%) of its data-storage or ECPU limit alarms. @default 75 (AWS's recommendation) */
  readonly hotTierUsagePercent?: number;
}

/**
 * Strata's alarms, all notifying {@link StrataAlarmsProps.topic}:
 *
 *   ProjectedCostWarning / ProjectedCostCritical  ProjectedMonthlyCost > budget × warning / critical fraction
 *   HitRatio        100 × (lookups − misses) / lookups < floor (lookups = Hits over every tier + Misses), in
 *                   periods with at least `minRequestsPerPeriod` lookups
 *   ErrorRate       100 × Errors / Requests > ceiling, in periods with at least `minRequestsPerPeriod` requests
 *   NodeFill        MaxNodeFillPercent > watermark
 *   PublisherSilent no TotalCostPerHour in 3 run intervals in a row: the cost publisher stopped, so the cost and
 *                   fill alarms are blind
 *   SilentNodes     a cache node of the ring has no current statistics report (Strata/Fleet SilentNodes > 0)
 *
 * and on what the request metrics cannot see (a function that crashes or is throttled writes no request record):
 *
 *   api-5xx, api-latency            API Gateway 5XXError rate and p90 Latency of the REST API stage
 *   fn-<name>-errors / -throttles   each watched Lambda function's Errors and Throttles
 *   wf-<name>-failed / -timed-out   each state machine's ExecutionsFailed and ExecutionsTimedOut
 *   hot-storage, hot-ecpu           the serverless cache's BytesUsedForCache / ElastiCacheProcessingUnits at
 *                                   `hotTierUsagePercent` of its usage limits; hot-throttled: its ThrottledCmds
 *   policy-ticker-failed / -stopped the policy ticker's executions failing (or timing out), or no longer starting
 *
 * The cost and fill alarms read metrics the publisher writes once per run: their period is the run interval and
 * they alarm on 1 of the last 2 periods, so one late run neither fires nor clears them. Missing data is not
 * breaching (no traffic is not an outage; a publisher that stops is caught by PublisherSilent). Each alarm below
 * says why it treats missing data as it does: breaching only where silence itself is the outage.
 *
 * Responses: {@link responses} holds an EventBridge rule per actionable alarm, matching its transitions to ALARM.
 * They have no target yet; a workflow attaches with `rule.addTarget(new targets.SfnStateMachine(machine))`.
 */
export class StrataAlarms extends Construct {
  readonly projectedCostWarning: cloudwatch.Alarm;
  readonly projectedCostCritical: cloudwatch.Alarm;
  readonly hitRatio: cloudwatch.Alarm;
  readonly errorRate: cloudwatch.Alarm;
  /**
   * The fullest cache node is above the watermark. With the policy evaluator, a notification (the rule
   * default-evict-on-node-fill acts); without it, the trigger for EvictToS3 / ScaleOut.
   */
  readonly nodeFill: cloudwatch.Alarm;
  readonly publisherSilent: cloudwatch.Alarm;
  readonly silentNodes: cloudwatch.Alarm;
  readonly apiServerErrors?: cloudwatch.Alarm;
  readonly apiLatency?: cloudwatch.Alarm;
  readonly hotTierStorage?: cloudwatch.Alarm;
  readonly hotTierEcpu?: cloudwatch.Alarm;
  readonly hotTierThrottled?: cloudwatch.Alarm;
  /** The policy ticker failing, or no longer started ({@link StrataAlarmsProps.policyTicker}). */
  readonly policyTicker?: PolicyTickerAlarms;
  /** Per watched function name. */
  readonly functionAlarms: Readonly<Record<string, FunctionAlarms>> = {};
  /** Per watched state machine name. */
  readonly stateMachineAlarms: Readonly<Record<string, StateMachineAlarms>> = {};
  /**
   * EventBridge rules on "CloudWatch Alarm State Change" to ALARM: the hook for starting a workflow. Targets
   * added to them live in this construct's stack, which then depends on the target's stack (never the reverse).
   */
  readonly responses: { readonly nodeFill: events.Rule; readonly projectedCostCritical: events.Rule };

  private readonly alarms: cloudwatch.Alarm[] = [];
  private readonly notify: actions.SnsAction;
  private readonly environment: string;
  private readonly functionPeriod: Duration;
  private readonly functionErrorsPerPeriod: number;

  constructor(scope: Construct, id: string, props: StrataAlarmsProps) {
    super(scope, id);
    check(this, props.budgetMonthlyUsd > 0, `budgetMonthlyUsd must be positive (got ${props.budgetMonthlyUsd})`);
    check(
      this,
      props.warningFraction > 0 && props.warningFraction < props.criticalFraction,
      `warningFraction (${props.warningFraction}) must be positive and below criticalFraction (${props.criticalFraction})`,
    );
    check(
      this,
      props.hitRatioFloorPercent >= 0 && props.hitRatioFloorPercent <= 100,
      `hitRatioFloorPercent must be 0-100 (got ${props.hitRatioFloorPercent})`,
    );
    check(
      this,
      props.errorRateCeilingPercent >= 0 && props.errorRateCeilingPercent <= 100,
      `errorRateCeilingPercent must be 0-100 (got ${props.errorRateCeilingPercent})`,
    );
    check(
      this,
      props.nodeFillWatermarkPercent > 0 && props.nodeFillWatermarkPercent <= 100,
      `nodeFillWatermarkPercent must be in (0, 100] (got ${props.nodeFillWatermarkPercent})`,
    );
    check(
      this,
      Number.isInteger(props.minRequestsPerPeriod) && props.minRequestsPerPeriod >= 1,
      `minRequestsPerPeriod must be a whole number >= 1 (got ${props.minRequestsPerPeriod})`,
    );
    const serverErrorPercent = props.apiServerErrorRatePercent ?? 5;
    const latencyMs = props.apiLatencyP90Ms ?? 1000;
    const errorsPerPeriod = props.functionErrorsPerPeriod ?? 1;
    const usagePercent = props.hotTierUsagePercent ?? 75;
    check(
      this,
      serverErrorPercent > 0 && serverErrorPercent <= 100,
      `apiServerErrorRatePercent must be in (0, 100] (got ${serverErrorPercent})`,
    );
    check(this, latencyMs > 0, `apiLatencyP90Ms must be a positive number of milliseconds (got ${latencyMs})`);
    check(
      this,
      Number.isInteger(errorsPerPeriod) && errorsPerPeriod >= 1,
      `functionErrorsPerPeriod must be a whole number >= 1 (got ${errorsPerPeriod})`,
    );
    check(
      this,
      usagePercent > 0 && usagePercent < 100,
      `hotTierUsagePercent must be in (0, 100): at the limit the cache already evicts or throttles (got ${usagePercent})`,
    );
    if (props.restApi) {
      check(
        this,
        props.restApi.apiName !== '' && props.restApi.stage !== '',
        'restApi needs both apiName and stage (the ApiName and Stage dimensions of its metrics)',
      );
    }
    if (props.hotTier) {
      const { cacheName, maxDataStorageGb, maxEcpuPerSecond } = props.hotTier;
      check(this, cacheName !== '', "hotTier.cacheName is empty: it is the clusterId dimension of the cache's metrics");
      check(
        this,
        maxDataStorageGb > 0 && maxEcpuPerSecond > 0,
        `hotTier limits must be positive (got ${maxDataStorageGb} GB, ${maxEcpuPerSecond} ECPU/s): the usage alarms are shares of them`,
      );
    }
    for (const name of Object.keys(props.stateMachines ?? {})) {
      check(
        this,
        WATCH_NAME.test(name),
        `state machine name '${name}' must be 1-40 characters of a-z, 0-9 and "-", starting with a letter (it names its alarms)`,
      );
    }
    const env = props.environment;
    this.environment = env;
    this.functionPeriod = props.trafficPeriod;
    this.functionErrorsPerPeriod = errorsPerPeriod;
    const name = (suffix: string) => `strata-${env}-${suffix}`;
    const metric = (def: MetricDef, statistic: string, period: Duration, dimensions: Record<string, string> = {}) =>
      new cloudwatch.Metric({
        namespace: def.namespace,
        metricName: def.name,
        dimensionsMap: { Environment: env, ...dimensions },
        statistic,
        period,
      });

    const costMetric = metric(METRICS.projectedMonthlyCost, 'Maximum', props.publisherPeriod);
    const costAlarm = (level: 'Warning' | 'Critical', fraction: number) =>
      new cloudwatch.Alarm(this, `ProjectedCost${level}`, {
        alarmName: name(`projected-cost-${level.toLowerCase()}`),
        alarmDescription: `${level}: the projected month (${env}) exceeds ${Math.round(fraction * 100)}% of the $${props.budgetMonthlyUsd} budget`,
        metric: costMetric,
        threshold: round(props.budgetMonthlyUsd * fraction),
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 2,
        datapointsToAlarm: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    this.projectedCostWarning = costAlarm('Warning', props.warningFraction);
    this.projectedCostCritical = costAlarm('Critical', props.criticalFraction);

    const p = props.trafficPeriod;
    const hits = Object.fromEntries(HIT_TIERS.map((t) => [`hits_${t}`, metric(METRICS.hits, 'Sum', p, { Tier: t })]));
    const lookups = [...Object.keys(hits), 'misses'].map((id) => `FILL(${id},0)`).join('+');
    this.hitRatio = new cloudwatch.Alarm(this, 'HitRatio', {
      alarmName: name('hit-ratio'),
      alarmDescription: `Fewer than ${props.hitRatioFloorPercent}% of lookups (${env}) were answered, in a period with at least ${props.minRequestsPerPeriod} lookups`,
      metric: new cloudwatch.MathExpression({
        // Periods with too few lookups report 100 (not breaching) rather than a noisy ratio.
        expression: `IF((${lookups}) >= ${props.minRequestsPerPeriod}, 100*((${lookups})-FILL(misses,0))/(${lookups}), 100)`,
        usingMetrics: { ...hits, misses: metric(METRICS.misses, 'Sum', p) },
        label: 'hit ratio %',
        period: p,
      }),
      threshold: props.hitRatioFloorPercent,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });

    this.errorRate = new cloudwatch.Alarm(this, 'ErrorRate', {
      alarmName: name('error-rate'),
      alarmDescription: `More than ${props.errorRateCeilingPercent}% of requests (${env}) were answered with an error, in a period with at least ${props.minRequestsPerPeriod} requests`,
      metric: new cloudwatch.MathExpression({
        expression: `IF(FILL(requests,0) >= ${props.minRequestsPerPeriod}, 100*FILL(errors,0)/requests, 0)`,
        usingMetrics: { requests: metric(METRICS.requests, 'Sum', p), errors: metric(METRICS.errors, 'Sum', p) },
        label: 'error rate %',
        period: p,
      }),
      threshold: props.errorRateCeilingPercent,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 2,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });

    this.nodeFill = new cloudwatch.Alarm(this, 'NodeFill', {
      alarmName: name('node-fill'),
      alarmDescription: `The fullest cache node (${env}) is above ${props.nodeFillWatermarkPercent}% full: evict to S3 or scale out`,
      metric: metric(METRICS.maxNodeFill, 'Maximum', props.publisherPeriod),
      threshold: props.nodeFillWatermarkPercent,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 2,
      datapointsToAlarm: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });

    this.publisherSilent = new cloudwatch.Alarm(this, 'PublisherSilent', {
      alarmName: name('cost-publisher-silent'),
      alarmDescription: `The cost publisher (${env}) has published nothing for 3 runs: cost and fill alarms are blind`,
      metric: metric(METRICS.totalCostPerHour, 'SampleCount', props.publisherPeriod),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });

    // Cache nodes that stopped reporting: the publisher counts them every run. Missing data is ignored (the state
    // stays): a publisher that stops is PublisherSilent's alarm, and silence must neither raise nor clear this one.
    this.silentNodes = new cloudwatch.Alarm(this, 'SilentNodes', {
      alarmName: name('silent-nodes'),
      alarmDescription: `A cache node of ${env} has sent no current statistics report: it is down, partitioned or stuck`,
      metric: metric(METRICS.silentNodes, 'Maximum', props.publisherPeriod),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.IGNORE,
    });

    this.notify = new actions.SnsAction(props.topic);
    const own = [
      this.projectedCostWarning,
      this.projectedCostCritical,
      this.hitRatio,
      this.errorRate,
      this.nodeFill,
      this.publisherSilent,
    ];
    for (const a of [...own, this.silentNodes]) this.track(a);

    // AWS's own metrics below. Their services publish only while there is work (requests, invocations, executions,
    // commands), so missing data is quiet, not an outage, unless said otherwise.
    const aws = (
      namespace: string,
      metricName: string,
      dimensionsMap: Record<string, string>,
      statistic: string,
      period: Duration,
    ) => new cloudwatch.Metric({ namespace, metricName, dimensionsMap, statistic, period });
    const minute = Duration.minutes(1);
    if (props.restApi) {
      const dims = { ApiName: props.restApi.apiName, Stage: props.restApi.stage };
      // 5XXError's Average is the share of requests answered 5xx; 3 one-minute periods in a row, so a single bad
      // minute does not page.
      this.apiServerErrors = this.track(
        new cloudwatch.Alarm(this, 'ApiServerErrors', {
          alarmName: name('api-5xx'),
          alarmDescription:
            `More than ${serverErrorPercent}% of ${env}'s API requests ended in a 5xx for 3 minutes ` +
            '(crashed, timed-out or throttled functions included)',
          metric: aws('AWS/ApiGateway', '5XXError', dims, 'Average', minute),
          threshold: serverErrorPercent / 100,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 3,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      // p90 over 5 one-minute periods in a row: a slow tail that lasts, which cold starts alone do not make.
      this.apiLatency = this.track(
        new cloudwatch.Alarm(this, 'ApiLatency', {
          alarmName: name('api-latency'),
          alarmDescription: `${env}'s API took more than ${latencyMs} ms for 10% of requests (p90), 5 minutes in a row`,
          metric: aws('AWS/ApiGateway', 'Latency', dims, 'p90', minute),
          threshold: latencyMs,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 5,
          datapointsToAlarm: 5,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }

    for (const [machineName, machine] of Object.entries(props.stateMachines ?? {})) {
      const dims = { StateMachineArn: machine.stateMachineArn };
      // Any failed or timed-out execution (> 0 in a minute): a scale-out or eviction that stopped half-way needs a
      // look. Executions run on demand, so no data is no execution, not an outage.
      const execution = (id: string, metricName: string, suffix: string, what: string) =>
        this.track(
          new cloudwatch.Alarm(this, `${pascal(machineName)}${id}`, {
            alarmName: name(`wf-${machineName}-${suffix}`),
            alarmDescription: `An execution of ${env}'s ${machineName} workflow ${what}`,
            metric: aws('AWS/States', metricName, dims, 'Sum', minute),
            threshold: 0,
            comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluationPeriods: 1,
            treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
          }),
        );
      (this.stateMachineAlarms as Record<string, StateMachineAlarms>)[machineName] = {
        failed: execution('Failed', 'ExecutionsFailed', 'failed', 'failed'),
        timedOut: execution('TimedOut', 'ExecutionsTimedOut', 'timed-out', 'timed out'),
      };
    }

    if (props.hotTier) {
      const { cacheName, maxDataStorageGb, maxEcpuPerSecond } = props.hotTier;
      // Serverless caches publish under `clusterId` (the cache's name), not the node-based CacheClusterId.
      const dims = { clusterId: cacheName };
      const share = usagePercent / 100;
      // AWS recommends an alarm at 75% of each usage limit: at the storage limit the cache evicts (or refuses
      // writes), at the ECPU limit it throttles. Three minutes in a row, so a burst alone does not page. An idle
      // cache may publish nothing, and the limits are not at risk then: missing data is not breaching.
      this.hotTierStorage = this.track(
        new cloudwatch.Alarm(this, 'HotTierStorage', {
          alarmName: name('hot-storage'),
          alarmDescription:
            `${env}'s hot tier holds ${usagePercent}% or more of its ${maxDataStorageGb} GB limit: ` +
            'raise hotTier.maxDataStorageGb or expect evictions',
          metric: aws('AWS/ElastiCache', 'BytesUsedForCache', dims, 'Maximum', minute),
          threshold: Math.round(share * maxDataStorageGb * BYTES_PER_GB),
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 3,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      // ElastiCacheProcessingUnits counts ECPUs consumed: its Sum over a minute is 60 × the average ECPU/s.
      this.hotTierEcpu = this.track(
        new cloudwatch.Alarm(this, 'HotTierEcpu', {
          alarmName: name('hot-ecpu'),
          alarmDescription:
            `${env}'s hot tier uses ${usagePercent}% or more of its ${maxEcpuPerSecond} ECPU/s limit: ` +
            'raise hotTier.maxEcpuPerSecond or expect throttling',
          metric: aws('AWS/ElastiCache', 'ElastiCacheProcessingUnits', dims, 'Sum', minute),
          threshold: Math.round(share * maxEcpuPerSecond * 60),
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 3,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
      // Throttled commands fail in the hot tier (Strata falls back to slower tiers): 2 of 3 minutes, as one burst
      // while the cache scales out is expected. No commands, no data: not breaching.
      this.hotTierThrottled = this.track(
        new cloudwatch.Alarm(this, 'HotTierThrottled', {
          alarmName: name('hot-throttled'),
          alarmDescription: `${env}'s hot tier throttled commands in 2 of the last 3 minutes (ECPU limit, or growing faster than it scales)`,
          metric: aws('AWS/ElastiCache', 'ThrottledCmds', dims, 'Sum', minute),
          threshold: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 2,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }

    for (const [fnName, watched] of Object.entries(props.functions ?? {})) this.watchFunction(fnName, watched);

    if (props.policyTicker) {
      const ticker = policyTickerAlarms(this, env, props.policyTicker, name);
      this.track(ticker.failed);
      this.track(ticker.stopped);
      this.policyTicker = ticker;
    }

    const onAlarm = (id: string, alarm: cloudwatch.Alarm, what: string) =>
      new events.Rule(this, id, {
        description: `Strata ${env}: ${what} went to ALARM (attach a workflow as target)`,
        eventPattern: {
          source: ['aws.cloudwatch'],
          detailType: ['CloudWatch Alarm State Change'],
          resources: [alarm.alarmArn],
          detail: { state: { value: ['ALARM'] } },
        },
      });
    this.responses = {
      nodeFill: onAlarm('NodeFillResponse', this.nodeFill, 'node fill'),
      projectedCostCritical: onAlarm('ProjectedCostCriticalResponse', this.projectedCostCritical, 'projected cost (critical)'),
    };
  }

  /**
   * Adds an Errors and a Throttles alarm on `watched.function`, named `fn-<name>-errors` / `-throttles`: for
   * functions built after this construct (e.g. the cost publisher, which bills {@link metricCount}).
   */
  watchFunction(name: string, watched: WatchedFunction): FunctionAlarms {
    check(
      this,
      WATCH_NAME.test(name),
      `function name '${name}' must be 1-40 characters of a-z, 0-9 and "-", starting with a letter (it names its alarms)`,
    );
    check(this, !(name in this.functionAlarms), `function '${name}' is watched twice`);
    const every = watched.expectedEvery;
    if (every) {
      check(
        this,
        every.toSeconds() >= 60 && every.toSeconds() % 60 === 0,
        `function '${name}': expectedEvery must be whole minutes (got ${every.toHumanString()})`,
      );
    }
    // A scheduled function's period spans two runs, so one late run leaves no period empty.
    const twoRuns = every ? every.toSeconds() * 2 : 0;
    const period = twoRuns > this.functionPeriod.toSeconds() ? Duration.seconds(twoRuns) : this.functionPeriod;
    const dimensionsMap = { FunctionName: watched.function.functionName };
    const fnMetric = (metricName: string) =>
      new cloudwatch.Metric({ namespace: 'AWS/Lambda', metricName, dimensionsMap, statistic: 'Sum', period });
    const id = pascal(name);
    const env = this.environment;
    const errors = this.track(
      new cloudwatch.Alarm(this, `${id}Errors`, {
        alarmName: `strata-${env}-fn-${name}-errors`,
        alarmDescription: every
          ? `${env}'s ${name} function failed ${this.functionErrorsPerPeriod}+ times, or did not run at all, in ${period.toHumanString()} ` +
            `(it should run every ${every.toHumanString()})`
          : `${env}'s ${name} function failed (exception, timeout, out of memory) ${this.functionErrorsPerPeriod}+ times ` +
            `in ${period.toHumanString()}`,
        metric: fnMetric('Errors'),
        threshold: this.functionErrorsPerPeriod,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        // Lambda reports Errors (0 or 1) for every invocation: a period without any means it was not invoked. That is
        // an outage only for a function that must run on schedule; on-demand ones are merely idle.
        treatMissingData: every ? cloudwatch.TreatMissingData.BREACHING : cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    const throttles = this.track(
      new cloudwatch.Alarm(this, `${id}Throttles`, {
        alarmName: `strata-${env}-fn-${name}-throttles`,
        alarmDescription: `${env}'s ${name} function was throttled (no concurrency left) in the last ${period.toHumanString()}`,
        metric: fnMetric('Throttles'),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        // Throttles are reported only when an invocation is refused: no data, no throttling.
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    const alarms = { errors, throttles };
    (this.functionAlarms as Record<string, FunctionAlarms>)[name] = alarms;
    return alarms;
  }

  /** Every alarm. */
  get all(): cloudwatch.Alarm[] {
    return [...this.alarms];
  }

  /** Metrics the alarms read, each metric of a math expression counted (CloudWatch bills alarms per metric). */
  get metricCount(): number {
    const count = (m: cloudwatch.IMetric): number =>
      m instanceof cloudwatch.MathExpression ? Object.values(m.usingMetrics).reduce((n, x) => n + count(x), 0) : 1;
    return this.alarms.reduce((n, a) => n + count(a.metric), 0);
  }

  /** Sends `alarm`'s transitions to ALARM and back to OK to the topic, and lists it in {@link all}. */
  private track(alarm: cloudwatch.Alarm): cloudwatch.Alarm {
    alarm.addAlarmAction(this.notify);
    alarm.addOkAction(this.notify);
    this.alarms.push(alarm);
    return alarm;
  }
}

/** `scale-out` -> `ScaleOut`. */
function pascal(name: string): string {
  return name.replace(/(^|-)([a-z0-9])/g, (_m, _d, c: string) => c.toUpperCase());
}

function round(usd: number): number {
  return Math.round(usd * 100) / 100;
}
