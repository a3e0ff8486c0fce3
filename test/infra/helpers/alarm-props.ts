import { Duration, type Stack } from 'aws-cdk-lib';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { StrataAlarmsProps } from '../../../cdk/constructs/strata-alarms.js';

/** Valid StrataAlarms props in `stack` (a fresh topic each call), with `over` applied. */
export function alarmProps(stack: Stack, over: Partial<StrataAlarmsProps> = {}): StrataAlarmsProps {
  return {
    environment: 'dev',
    topic: new sns.Topic(stack, `Topic${Math.random().toString(36).slice(2)}`),
    budgetMonthlyUsd: 100,
    warningFraction: 0.8,
    criticalFraction: 1,
    hitRatioFloorPercent: 50,
    errorRateCeilingPercent: 5,
    minRequestsPerPeriod: 100,
    trafficPeriod: Duration.minutes(5),
    nodeFillWatermarkPercent: 85,
    publisherPeriod: Duration.minutes(15),
    ...over,
  };
}
