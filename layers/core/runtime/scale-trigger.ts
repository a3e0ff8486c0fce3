import { RingStore } from '../ring/store.js';
import { NodeClient } from '../warm/node-client.js';
import { ScaleLocks } from '../workflows/progress.js';
import { runScaleTrigger, scaleTriggerSettingsSchema, type TriggerOutcome } from '../workflows/scale-trigger.js';
import { ConfigError, loadRuntimeEnv } from './config.js';
import { casStoreFromEnv, readFleetSecret } from './warm.js';

/**
 * The scheduled trigger as its Lambda runs it: the ring store and fleet secret as the step Lambda has them,
 * STRATA_SCALE_OUT_ARN (the ScaleOut state machine) and STRATA_SCALE_TRIGGER (JSON settings: unit, capacity,
 * lowRate, highRate, mode).
 */
export async function runScaleTriggerFromEnv(env = loadRuntimeEnv(), raw = process.env): Promise<TriggerOutcome> {
  const cas = casStoreFromEnv(env);
  if (!cas) throw new ConfigError('the scale-out trigger needs the ring store: set STRATA_WARM_RING_BUCKET (or STRATA_WARM_RING_DIR)');
  const arn = raw.STRATA_SCALE_OUT_ARN;
  if (!arn) throw new ConfigError('the scale-out trigger needs STRATA_SCALE_OUT_ARN (the ScaleOut state machine)');
  let settings: unknown;
  try {
    settings = raw.STRATA_SCALE_TRIGGER ? JSON.parse(raw.STRATA_SCALE_TRIGGER) : {};
  } catch {
    throw new ConfigError('STRATA_SCALE_TRIGGER must be JSON: { "unit", "capacity", "lowRate", "highRate", "mode" }');
  }
  const parsed = scaleTriggerSettingsSchema.safeParse(settings);
  if (!parsed.success) throw new ConfigError(`STRATA_SCALE_TRIGGER: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const nodes = new NodeClient({ secret: await readFleetSecret(env), timeoutMs: env.STRATA_WARM_TIMEOUT_MS });
  const { SFNClient, StartExecutionCommand } = await import('@aws-sdk/client-sfn');
  const sfn = new SFNClient({ region: env.AWS_REGION });
  try {
    return await runScaleTrigger(
      {
        ring: new RingStore(cas),
        nodes,
        locks: new ScaleLocks(cas),
        cas,
        startScaleOut: async (input) => {
          const name = `trigger-${input.forNode}-${Date.now()}`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 80);
          await sfn.send(new StartExecutionCommand({ stateMachineArn: arn, name, input: JSON.stringify(input) }));
          return name;
        },
      },
      parsed.data,
    );
  } finally {
    await nodes.close();
    sfn.destroy();
  }
}
