// Scheduled Lambda: paper 000's speculative scale-out trigger (core/workflows/trigger/scale-trigger.ts). Starts the
// ScaleOut state machine for a node past the threshold T, or one that overflowed; logs the decision.
import { runScaleTriggerFromEnv } from '../../core/composition/scale-trigger-lambda.js';
import { log } from '../../core/util/logger.js';

export const handler = async (): Promise<unknown> => {
  const out = await runScaleTriggerFromEnv();
  const { decision, rate, capacity, silent } = out;
  log.info('scale-out trigger', { decision, rate, capacity, silent, started: out.started ?? null });
  return { decision: out.decision, started: out.started ?? null };
};
