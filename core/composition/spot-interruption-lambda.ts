import type { SFNClient } from '@aws-sdk/client-sfn';
import { ConfigError } from '../errors.js';
import { emfDocument, serializeEmf } from '../metrics/emf.js';
import type { MetricKey } from '../metrics/metric-catalog.js';
import {
  handleSpotInterruption,
  SPOT_INTERRUPTION_WARNING,
  type SpotDrainOptions,
  type SpotOutcome,
  type SpotWorkflows,
} from '../nodes/spot-interruption.js';
import { RingStore } from '../ring/store.js';
import { log as defaultLog, type Logger } from '../util/logger.js';
import { ExecutionExistsError, SfnWorkflowService, type WorkflowService } from '../workflows/admin-service.js';
import { ringStoreFromEnv } from './ring-store-env.js';

/**
 * The spot-interruption Lambda (lambdas/fleet/spot-interruption.ts), the target of an EventBridge rule on EC2's
 * "EC2 Spot Instance Interruption Warning" (and "EC2 Instance Rebalance Recommendation") events: drains the node
 * (core/nodes/spot-interruption.ts). Environment: the ring store as the scale-out trigger reads it
 * (STRATA_WARM_RING_BUCKET/PREFIX, or _DIR), STRATA_SCALE_IN_ARN and STRATA_SCALE_OUT_ARN (the state machines it
 * starts and describes: states:StartExecution on both, states:DescribeExecution on their executions), STRATA_ENV (the
 * metrics' Environment). No replace-node: when a drain fails, the failure detector starts the replacement. It never
 * calls a node: it runs outside the VPC.
 *
 * It waits for the drain's outcome (a few seconds to two minutes) to start the refill: its timeout must cover the
 * notice and a minute more (5 minutes is plenty); what it has left bounds the wait.
 */

/** {@link SpotWorkflows} over a workflow service (Step Functions, or the local runner's). */
export function spotWorkflowsOf(service: Pick<WorkflowService, 'start' | 'describe'>): SpotWorkflows {
  return {
    start: async (workflow, input, name) => {
      try {
        await service.start(workflow, input, name);
        return 'started';
      } catch (e) {
        // Started by an earlier delivery of the same warning: that execution is the one.
        if (e instanceof ExecutionExistsError) return 'exists';
        throw e;
      }
    },
    status: async (name) => (await service.describe(name))?.status,
  };
}

/** The metrics as EMF lines (CloudWatch Logs turns them into metrics), with the Environment dimension. */
export function emfMetrics(environment: string, emit: (text: string) => void, now: () => number = Date.now) {
  return (key: MetricKey, value: number, dims: Record<string, string> = {}): void =>
    emit(
      serializeEmf([
        emfDocument({ timestamp: now(), dimensions: { Environment: environment, ...dims }, values: { [key]: value } }),
      ]),
    );
}

export interface SpotInterruptionRuntime {
  ring: RingStore;
  workflows: SpotWorkflows;
  environment: string;
  close(): void;
}

const ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$/;

/** The ring store and the Step Functions client from the environment; `sfn` replaces the client (tests). */
export async function spotInterruptionFromEnv(
  raw: NodeJS.ProcessEnv = process.env,
  o: { sfn?: Pick<SFNClient, 'send'> } = {},
): Promise<SpotInterruptionRuntime> {
  const { cas, region } = ringStoreFromEnv(raw);
  if (!cas)
    throw new ConfigError(
      'the spot-interruption handler needs the ring store: set STRATA_WARM_RING_BUCKET (or STRATA_WARM_RING_DIR)',
    );
  const arns = { 'scale-in': raw.STRATA_SCALE_IN_ARN, 'scale-out': raw.STRATA_SCALE_OUT_ARN };
  for (const [env, arn] of [
    ['STRATA_SCALE_IN_ARN', arns['scale-in']],
    ['STRATA_SCALE_OUT_ARN', arns['scale-out']],
  ] as const) {
    if (!arn) throw new ConfigError(`the spot-interruption handler needs ${env} (the state machine it starts)`);
    if (!ARN.test(arn)) throw new ConfigError(`${env} is not a state machine ARN: '${arn}'`);
  }
  let sfn = o.sfn;
  let destroy = () => {};
  if (!sfn) {
    const { SFNClient } = await import('@aws-sdk/client-sfn');
    const client = new SFNClient({ region });
    sfn = client;
    destroy = () => client.destroy();
  }
  const service = new SfnWorkflowService({ client: sfn, stateMachines: arns });
  return {
    ring: new RingStore(cas),
    workflows: spotWorkflowsOf(service),
    environment: raw.STRATA_ENV ?? 'dev',
    close: () => {
      cas.close?.();
      destroy();
    },
  };
}

/** What the handler core runs with, for one event. */
export function runSpotInterruption(
  event: unknown,
  r: Pick<SpotInterruptionRuntime, 'ring' | 'workflows' | 'environment'>,
  o: SpotDrainOptions & {
    log?: Logger;
    emit?: (text: string) => void;
    now?: () => number;
    sleep?: (ms: number) => Promise<void>;
  } = {},
): Promise<SpotOutcome> {
  const log = o.log ?? defaultLog;
  return handleSpotInterruption(
    event,
    {
      ring: r.ring,
      workflows: r.workflows,
      log: (level, message, fields) => log[level](message, fields),
      metric: emfMetrics(r.environment, o.emit ?? ((s) => void process.stdout.write(s)), o.now),
      ...(o.now ? { now: o.now } : {}),
      ...(o.sleep ? { sleep: o.sleep } : {}),
    },
    o,
  );
}

/** The Lambda's handler: one EventBridge event. Leaves 15 s of its time for the refill's start and the log. */
export async function handler(event: unknown, context?: { getRemainingTimeInMillis?: () => number }): Promise<SpotOutcome> {
  const runtime = await spotInterruptionFromEnv();
  try {
    const left = context?.getRemainingTimeInMillis?.();
    const out = await runSpotInterruption(event, runtime, left !== undefined ? { followMs: Math.max(0, left - 15_000) } : {});
    // Still draining when this invocation had to stop: fail it, so that Lambda's retry of the event (a redelivery)
    // follows the drain on and starts the refill once it finished.
    if (out.outcome === 'drain-running') throw new Error(`the drain ${out.drain} was still running when the handler had to stop`);
    return out;
  } finally {
    runtime.close();
  }
}

/**
 * The documented shape of EC2's interruption warning (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html)
 * for `instanceId`, as EventBridge would deliver it: what a local run feeds the handler to simulate an interruption.
 */
export function spotInterruptionEvent(instanceId: string, o: { at?: Date; region?: string; action?: string } = {}) {
  const region = o.region ?? 'us-east-1';
  return {
    version: '0',
    id: `local-${instanceId}-${(o.at ?? new Date()).getTime()}`,
    'detail-type': SPOT_INTERRUPTION_WARNING,
    source: 'aws.ec2',
    account: '000000000000',
    time: (o.at ?? new Date()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region,
    resources: [`arn:aws:ec2:${region}:000000000000:instance/${instanceId}`],
    detail: { 'instance-id': instanceId, 'instance-action': o.action ?? 'terminate' },
  };
}

/**
 * Simulates a spot interruption of `instanceId` in a local run (`npm start` with a local fleet, or a test): the
 * documented event through the same handler core, with the local workflow service. Resolves when the handler is
 * done (the drain ended and the refill started, or the failure path took over).
 */
export function simulateSpotInterruption(o: {
  ring: RingStore;
  workflows: Pick<WorkflowService, 'start' | 'describe'>;
  instanceId: string;
  at?: Date;
  options?: SpotDrainOptions;
  log?: Logger;
  emit?: (text: string) => void;
}): Promise<SpotOutcome> {
  return runSpotInterruption(
    spotInterruptionEvent(o.instanceId, o.at ? { at: o.at } : {}),
    { ring: o.ring, workflows: spotWorkflowsOf(o.workflows), environment: 'local' },
    { pollMs: 250, ...o.options, ...(o.log ? { log: o.log } : {}), ...(o.emit ? { emit: o.emit } : {}) },
  );
}
