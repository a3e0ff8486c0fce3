/**
 * The spot-interruption Lambda's composition (core/composition/spot-interruption-lambda.ts): the environment it
 * reads, and the Step Functions calls it makes for AWS's documented warning. Step Functions' StartExecution and
 * DescribeExecution run only in AWS (LocalStack's do not check names the way the service does), so the SFN client
 * is stubbed at the SDK boundary (`send`), answering as the service documents: StartExecution with a name already
 * used fails with `ExecutionAlreadyExists`, DescribeExecution of an unknown execution with `ExecutionDoesNotExist`.
 * The ring store is a real folder store.
 */
import { DescribeExecutionCommand, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { ConfigError } from '../../core/errors.js';
import { initialRing } from '../../core/ring/document.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import {
  runSpotInterruption,
  spotInterruptionEvent,
  spotInterruptionFromEnv,
} from '../../core/composition/spot-interruption-lambda.js';
import { tempDir } from '../integration/warm-fixtures.js';
import { DOCUMENTED_WARNING, SAMPLE_INSTANCE } from '../helpers/spot-events.js';

const SCALE_IN = 'arn:aws:states:us-east-2:123456789012:stateMachine:strata-dev-scale-in';
const SCALE_OUT = 'arn:aws:states:us-east-2:123456789012:stateMachine:strata-dev-scale-out';
const INSTANCE = SAMPLE_INSTANCE;

const WARNING = DOCUMENTED_WARNING;

/** Step Functions as its API documents it, for StartExecution and DescribeExecution; `finish` ends an execution. */
class SfnStub {
  readonly calls: { command: string; input: Record<string, unknown> }[] = [];
  readonly executions = new Map<string, { machine: string; input: string; status: string }>();

  async send(cmd: unknown): Promise<unknown> {
    if (cmd instanceof StartExecutionCommand) {
      const { stateMachineArn, name, input } = cmd.input;
      this.calls.push({ command: 'StartExecution', input: { stateMachineArn, name, input: JSON.parse(input!) } });
      const arn = `${stateMachineArn!.replace(':stateMachine:', ':execution:')}:${name}`;
      if (this.executions.has(arn))
        throw Object.assign(new Error(`Execution Already Exists: '${arn}'`), { name: 'ExecutionAlreadyExists' });
      this.executions.set(arn, { machine: stateMachineArn!, input: input!, status: 'RUNNING' });
      return { executionArn: arn, startDate: new Date() };
    }
    if (cmd instanceof DescribeExecutionCommand) {
      const arn = cmd.input.executionArn!;
      this.calls.push({ command: 'DescribeExecution', input: { executionArn: arn } });
      const e = this.executions.get(arn);
      if (!e) throw Object.assign(new Error(`Execution Does Not Exist: '${arn}'`), { name: 'ExecutionDoesNotExist' });
      return { executionArn: arn, stateMachineArn: e.machine, status: e.status, input: e.input, startDate: new Date() };
    }
    throw new Error(`unexpected command ${(cmd as object).constructor.name}`);
  }

  finish(name: string, status: string): void {
    for (const [arn, e] of this.executions) if (arn.endsWith(`:${name}`)) e.status = status;
  }

  starts() {
    return this.calls.filter((c) => c.command === 'StartExecution').map((c) => c.input);
  }
}

describe('the spot-interruption Lambda (Step Functions stubbed at the SDK boundary)', () => {
  const dir = tempDir('strata-spot-lambda-');
  const env = {
    STRATA_WARM_RING_DIR: dir.dir,
    STRATA_SCALE_IN_ARN: SCALE_IN,
    STRATA_SCALE_OUT_ARN: SCALE_OUT,
    STRATA_ENV: 'dev',
  };
  const metrics: string[] = [];
  const quiet = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };
  let clock = 0;
  const opts = {
    log: quiet,
    emit: (s: string) => void metrics.push(s),
    now: () => clock,
    sleep: async (ms: number) => void (clock += ms),
  };

  beforeAll(async () => {
    const nodes = [INSTANCE, 'i-0bbb', 'i-0ccc', 'i-0ddd'].map((id, k) => ({
      id,
      url: `http://10.0.0.${k + 1}:7000`,
      instance: id,
    }));
    await new RingStore(new FileCasStore(dir.dir)).create(initialRing(nodes, 2));
  });
  afterAll(() => dir.remove());
  beforeEach(() => {
    clock = Date.parse(WARNING.time) + 1000;
    metrics.length = 0;
  });

  it('starts the drain as a ScaleIn named after the instance, then the refill as a ScaleOut once it succeeded', async () => {
    const sfn = new SfnStub();
    const runtime = await spotInterruptionFromEnv(env, { sfn });
    // The drain ends (SUCCEEDED) while the handler waits for it.
    const sleep = async (ms: number) => {
      clock += ms;
      sfn.finish(`spot-drain-${INSTANCE}`, 'SUCCEEDED');
    };
    const out = await runSpotInterruption(WARNING, runtime, { ...opts, sleep });
    runtime.close();
    expect(out).toMatchObject({ outcome: 'drained', drain: `spot-drain-${INSTANCE}`, refill: `spot-refill-${INSTANCE}` });
    expect(sfn.starts()).toEqual([
      {
        stateMachineArn: SCALE_IN,
        name: `spot-drain-${INSTANCE}`,
        input: { nodeId: INSTANCE, mode: 'incremental', streamMaxMs: 20_000, graceMs: 10_000, rateBytesPerSec: 0 },
      },
      { stateMachineArn: SCALE_OUT, name: `spot-refill-${INSTANCE}`, input: { mode: 'incremental', reason: expect.any(String) } },
    ]);
    // Execution ARNs are the state machine's with :execution: and the name.
    expect(sfn.calls.find((c) => c.command === 'DescribeExecution')!.input.executionArn).toBe(
      `arn:aws:states:us-east-2:123456789012:execution:strata-dev-scale-in:spot-drain-${INSTANCE}`,
    );
    // The metrics are EMF lines with the Environment dimension.
    const emitted = metrics.map((m) => JSON.parse(m) as Record<string, unknown>);
    expect(emitted[0]).toMatchObject({ Environment: 'dev', Outcome: 'draining', SpotInterruptions: 1 });
    expect(emitted[1]).toMatchObject({ Environment: 'dev', SpotDrainTime: expect.any(Number) });
  });

  it('starts nothing again when EventBridge delivers the same warning twice (ExecutionAlreadyExists is done)', async () => {
    const sfn = new SfnStub();
    const runtime = await spotInterruptionFromEnv(env, { sfn });
    const sleep = async (ms: number) => {
      clock += ms;
      sfn.finish(`spot-drain-${INSTANCE}`, 'SUCCEEDED');
    };
    await runSpotInterruption(WARNING, runtime, { ...opts, sleep });
    const again = await runSpotInterruption(WARNING, runtime, { ...opts, sleep });
    // Two deliveries at once: both find no drain yet and both start it; Step Functions keeps one.
    const racing = new SfnStub();
    const r2 = await spotInterruptionFromEnv(env, { sfn: racing });
    const both = await Promise.all([
      runSpotInterruption(WARNING, r2, { ...opts, followMs: 0 }),
      runSpotInterruption(WARNING, r2, { ...opts, followMs: 0 }),
    ]);
    runtime.close();
    r2.close();
    expect(again).toMatchObject({ outcome: 'drained', redelivered: true });
    expect(sfn.starts().map((s) => s.name)).toEqual([
      `spot-drain-${INSTANCE}`,
      `spot-refill-${INSTANCE}`,
      `spot-refill-${INSTANCE}`, // refused by the service: the refill of the first delivery stands
    ]);
    expect(sfn.executions.size).toBe(2);
    expect(both.map((b) => b.outcome)).toEqual(['drain-running', 'drain-running']);
    expect(racing.executions.size).toBe(1);
  });

  it('leaves a drain that failed to the failure path: no ScaleOut', async () => {
    const sfn = new SfnStub();
    const runtime = await spotInterruptionFromEnv(env, { sfn });
    const sleep = async (ms: number) => {
      clock += ms;
      sfn.finish(`spot-drain-${INSTANCE}`, 'FAILED');
    };
    const out = await runSpotInterruption(WARNING, runtime, { ...opts, sleep });
    runtime.close();
    expect(out).toMatchObject({ outcome: 'drain-failed', refill: null });
    expect(sfn.starts().map((s) => s.stateMachineArn)).toEqual([SCALE_IN]);
  });

  it('refuses to start without its state machines or the ring store, naming the setting', async () => {
    await expect(spotInterruptionFromEnv({ ...env, STRATA_SCALE_OUT_ARN: '' }, { sfn: new SfnStub() })).rejects.toThrow(
      /STRATA_SCALE_OUT_ARN/,
    );
    await expect(spotInterruptionFromEnv({ ...env, STRATA_SCALE_IN_ARN: 'scale-in' }, { sfn: new SfnStub() })).rejects.toThrow(
      ConfigError,
    );
    await expect(
      spotInterruptionFromEnv({ STRATA_SCALE_IN_ARN: SCALE_IN, STRATA_SCALE_OUT_ARN: SCALE_OUT }, { sfn: new SfnStub() }),
    ).rejects.toThrow(/ring store/);
  });

  it('simulates the documented warning for a local run', () => {
    const e = spotInterruptionEvent('n2', { at: new Date('2026-11-26T12:00:00.500Z') });
    expect(e).toMatchObject({
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      source: 'aws.ec2',
      time: '2026-11-26T12:00:00Z',
      detail: { 'instance-id': 'n2', 'instance-action': 'terminate' },
    });
    expect(Object.keys(e).sort()).toEqual(Object.keys(WARNING).sort());
  });
});
