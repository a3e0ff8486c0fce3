import { RingStore } from '../ring/store.js';
import { ScaleLocks } from '../workflows/progress.js';
import { runScaleTrigger, scaleTriggerSettingsSchema, type TriggerOutcome } from '../workflows/trigger/scale-trigger.js';
import { ConfigError } from '../errors.js';
import { ringStoreFromEnv } from './ring-store-env.js';
import { formatIssues } from '../util/zod-issues.js';

/**
 * The scheduled trigger as its Lambda runs it: the ring store (STRATA_WARM_RING_BUCKET/PREFIX, or _DIR), where it
 * reads the ring, the nodes' statistics reports (keyed STRATA_NODE_STATS_ID_PREFIX + node id) and the scale-out
 * locks; STRATA_SCALE_OUT_ARN (the ScaleOut state machine) and STRATA_SCALE_TRIGGER (JSON settings: unit,
 * capacity, lowRate, highRate, mode). No fleet secret and no node client: it never calls a node, so it runs
 * outside the VPC and reaches S3 and Step Functions directly.
 */
export async function runScaleTriggerFromEnv(raw: NodeJS.ProcessEnv = process.env): Promise<TriggerOutcome> {
  const { cas, region, reportIdPrefix } = ringStoreFromEnv(raw);
  if (!cas)
    throw new ConfigError('the scale-out trigger needs the ring store: set STRATA_WARM_RING_BUCKET (or STRATA_WARM_RING_DIR)');
  const arn = raw.STRATA_SCALE_OUT_ARN;
  if (!arn) throw new ConfigError('the scale-out trigger needs STRATA_SCALE_OUT_ARN (the ScaleOut state machine)');
  let settings: unknown;
  try {
    settings = raw.STRATA_SCALE_TRIGGER ? JSON.parse(raw.STRATA_SCALE_TRIGGER) : {};
  } catch {
    throw new ConfigError('STRATA_SCALE_TRIGGER must be JSON: { "unit", "capacity", "lowRate", "highRate", "mode" }');
  }
  const parsed = scaleTriggerSettingsSchema.safeParse(settings);
  if (!parsed.success) throw new ConfigError(`STRATA_SCALE_TRIGGER: ${formatIssues(parsed.error.issues, { root: '' })}`);
  const { SFNClient, StartExecutionCommand } = await import('@aws-sdk/client-sfn');
  const sfn = new SFNClient({ region });
  try {
    return await runScaleTrigger(
      {
        ring: new RingStore(cas),
        locks: new ScaleLocks(cas),
        cas,
        reportIdPrefix,
        startScaleOut: async (input) => {
          const name = `trigger-${input.forNode}-${Date.now()}`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 80);
          await sfn.send(new StartExecutionCommand({ stateMachineArn: arn, name, input: JSON.stringify(input) }));
          return name;
        },
      },
      parsed.data,
    );
  } finally {
    cas.close?.();
    sfn.destroy();
  }
}
