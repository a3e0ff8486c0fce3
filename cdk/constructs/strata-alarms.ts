import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { METRICS, type MetricDef } from '../../layers/core/metrics/catalog.js';
import { check } from './validation.js';

/** Tiers the request recorder reports Hits for (`none` is a miss, counted by Misses). */
const HIT_TIERS = ['l1', 'hot', 'warm', 'cold', 'origin'] as const;

export interface StrataAlarmsProps {
  /** `Environment` dimension value. */
  readonly environment: string;
  /** Where every alarm notifies (ALARM and back to OK). */
  readonly topic: sns.ITopic;
  readonly budgetMonthlyUsd: number;
  /** Shares of the budget: Warning below Critical. */
  readonly warningFraction: number;
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
 *
 * The cost and fill alarms read metrics the publisher writes once per run: their period is the run interval and
 * they alarm on 1 of the last 2 periods, so one late run neither fires nor clears them. Missing data is not
 * breaching (no traffic is not an outage; a publisher that stops is caught by PublisherSilent).
 *
 * Responses: {@link responses} holds an EventBridge rule per actionable alarm, matching its transitions to ALARM.
 * They have no target yet; a workflow attaches with `rule.addTarget(new targets.SfnStateMachine(machine))`.
 */
export class StrataAlarms extends Construct {
  readonly projectedCostWarning: cloudwatch.Alarm;
  readonly projectedCostCritical: cloudwatch.Alarm;
  readonly hitRatio: cloudwatch.Alarm;
  readonly errorRate: cloudwatch.Alarm;
  /** The fullest cache node is above the watermark: the trigger for EvictToS3 / ScaleOut. */
  readonly nodeFill: cloudwatch.Alarm;
  readonly publisherSilent: cloudwatch.Alarm;
  /**
   * EventBridge rules on "CloudWatch Alarm State Change" to ALARM: the hook for starting a workflow. Targets
   * added to them live in this construct's stack, which then depends on the target's stack (never the reverse).
   */
  readonly responses: { readonly nodeFill: events.Rule; readonly projectedCostCritical: events.Rule };

  constructor(scope: Construct, id: string, props: StrataAlarmsProps) {
    super(scope, id);
    check(this, props.budgetMonthlyUsd > 0, `budgetMonthlyUsd must be positive (got ${props.budgetMonthlyUsd})`);
    check(this, props.warningFraction > 0 && props.warningFraction < props.criticalFraction, `warningFraction (${props.warningFraction}) must be positive and below criticalFraction (${props.criticalFraction})`);
    check(this, props.hitRatioFloorPercent >= 0 && props.hitRatioFloorPercent <= 100, `hitRatioFloorPercent must be 0-100 (got ${props.hitRatioFloorPercent})`);
    check(this, props.errorRateCeilingPercent >= 0 && props.errorRateCeilingPercent <= 100, `errorRateCeilingPercent must be 0-100 (got ${props.errorRateCeilingPercent})`);
    check(this, props.nodeFillWatermarkPercent > 0 && props.nodeFillWatermarkPercent <= 100, `nodeFillWatermarkPercent must be in (0, 100] (got ${props.nodeFillWatermarkPercent})`);
    check(this, Number.isInteger(props.minRequestsPerPeriod) && props.minRequestsPerPeriod >= 1, `minRequestsPerPeriod must be a whole number >= 1 (got ${props.minRequestsPerPeriod})`);
    const env = props.environment;
    const name = (suffix: string) => `strata-${env}-${suffix}`;
    const metric = (def: MetricDef, statistic: string, period: Duration, dimensions: Record<string, string> = {}) =>
      new cloudwatch.Metric({ namespace: def.namespace, metricName: def.name, dimensionsMap: { Environment: env, ...dimensions }, statistic, period });

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

    const notify = new actions.SnsAction(props.topic);
    for (const a of this.all) {
      a.addAlarmAction(notify);
      a.addOkAction(notify);
    }

    const onAlarm = (id: string, alarm: cloudwatch.Alarm, what: string) =>
      new events.Rule(this, id, {
        description: `Strata ${env}: ${what} went to ALARM (attach a workflow as target)`,
        eventPattern: { source: ['aws.cloudwatch'], detailType: ['CloudWatch Alarm State Change'], resources: [alarm.alarmArn], detail: { state: { value: ['ALARM'] } } },
      });
    this.responses = {
      nodeFill: onAlarm('NodeFillResponse', this.nodeFill, 'node fill'),
      projectedCostCritical: onAlarm('ProjectedCostCriticalResponse', this.projectedCostCritical, 'projected cost (critical)'),
    };
  }

  /** Every alarm. */
  get all(): cloudwatch.Alarm[] {
    return [this.projectedCostWarning, this.projectedCostCritical, this.hitRatio, this.errorRate, this.nodeFill, this.publisherSilent];
  }

  /** Metrics the alarms read (CloudWatch bills alarms per metric). */
  get metricCount(): number {
    return 2 + (HIT_TIERS.length + 1) + 2 + 1 + 1;
  }
}

function round(usd: number): number {
  return Math.round(usd * 100) / 100;
}
