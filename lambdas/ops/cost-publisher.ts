// Scheduled Lambda (EventBridge): publishes Strata/Cost and Strata/Fleet. The logic lives in core/cost.
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import { costPublisherFromEnv, type CostPublisherRuntime } from '../../core/composition/cost-publisher-lambda.js';
import { runCostPublisher, type CostPublisherReport } from '../../core/cost/publisher/publish-cost.js';
import { log } from '../../core/util/logger.js';

let runtime: CostPublisherRuntime | undefined;

/** The run's time: the schedule's tick (so a retried run reports the same instant), else now. */
function runTime(event: Partial<ScheduledEvent> | undefined): Date {
  const t = event?.time ? new Date(event.time) : undefined;
  return t && !Number.isNaN(t.getTime()) ? t : new Date();
}

async function publish(event: Partial<ScheduledEvent>): Promise<CostPublisherReport> {
  runtime ??= costPublisherFromEnv();
  const report = await runCostPublisher(runtime.deps, runtime.settings, runTime(event), runtime.extraFunctions);
  log.info('cost published', { ...report });
  return report;
}

export const handler = middy<Partial<ScheduledEvent>, CostPublisherReport, Error, Context>(publish);
