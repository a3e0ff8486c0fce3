/**
 * ReplaceNode's synthesized definition run under aws-local-stepfunctions (the local runner of `npm start` and the
 * tests) with stand-in steps and EC2 calls: what each state passes on, which branch each begin result takes, and
 * where each failure goes. Nothing else runs (no cache node, no ring), so it needs no test service; the real
 * steps' behaviour is for core/workflows/steps/replace-steps.ts's own tests.
 */
import { synthesizeWorkflowDefinitions, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import { LocalWorkflowRunner, type LocalExecution } from '../../core/workflows/local/asl-runner.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { STEP_NAMES, type StepHandlers, type StepName } from '../../core/workflows/steps/registry.js';

type Json = Record<string, unknown>;

let replaceNode: AslDefinition;
beforeAll(() => {
  replaceNode = synthesizeWorkflowDefinitions()['replace-node'];
});

/** An error as a step throws it: Step Functions matches retriers and catchers on its name. */
const failure = (name: string, message = `injected ${name}`) => Object.assign(new Error(message), { name });

interface Run {
  done: LocalExecution;
  /** Each step call's input (the state's Parameters, request fields spread in), in order. */
  calls: { step: StepName; input: Json }[];
  /** Each EC2 call: action and input. */
  ec2: { action: string; input: Json }[];
}

interface Script {
  begin?: Partial<{ deadInstanceId: string | null; terminate: boolean }>;
  launch?: () => Json;
  takeOver?: () => Json;
  fill?: (call: number) => Json;
  terminateDead?: () => Json;
  rollback?: (state: Json) => Json;
}

async function run(script: Script = {}, input: Json = { nodeId: 'n2' }): Promise<Run> {
  const calls: Run['calls'] = [];
  const ec2: Run['ec2'] = [];
  const unexpected = Object.fromEntries(
    STEP_NAMES.map((s) => [
      s,
      async () => {
        throw failure('UnexpectedStep', `ReplaceNode called ${s}`);
      },
    ]),
  ) as unknown as StepHandlers;
  let checks = 0;
  let fills = 0;
  const record =
    (step: StepName, f: (i: Json) => Json) =>
    async (i: Json): Promise<unknown> => {
      calls.push({ step, input: i });
      return f(i);
    };
  const steps: StepHandlers = {
    ...unexpected,
    'replace-node.begin': record('replace-node.begin', (i) => ({
      nodeId: i.nodeId,
      deadInstanceId: script.begin && 'deadInstanceId' in script.begin ? script.begin.deadInstanceId : 'i-dead',
      downAt: 1_000,
      launch: { ordinal: 1, subnetId: 'subnet-b', availabilityZone: 'az-b', clientToken: 'token-1' },
      launchedAt: 2_000,
      launchTimeoutMs: 900_000,
      options: {
        fillNamespaces: ['ns'],
        rateBytesPerSec: 8 << 20,
        fillMaxMs: 60_000,
        terminate: script.begin?.terminate ?? true,
      },
    })),
    // Unhealthy once: the WaitForNode loop.
    'scale-out.check-node': record('scale-out.check-node', () =>
      ++checks === 1
        ? { healthy: false, url: 'http://10.0.0.5:7070', allocationMs: null }
        : { healthy: true, url: 'http://10.0.0.5:7070', allocationMs: 5 },
    ),
    'replace-node.take-over': record('replace-node.take-over', () => (script.takeOver ?? (() => ({ ranges: 2 })))()),
    'replace-node.fill': record('replace-node.fill', () => {
      const n = ++fills;
      return script.fill
        ? script.fill(n)
        : n === 1
          ? { done: false, cursor: 'c1', keys: 1, bytes: 10 }
          : { done: true, cursor: null, keys: 2, bytes: 20 };
    }),
    'replace-node.finish': record('replace-node.finish', () => ({ outcome: 'succeeded' })),
    'replace-node.rollback': record('replace-node.rollback', (i) =>
      (script.rollback ?? (() => ({ terminate: true, instanceId: 'i-new' })))(i.state as Json),
    ),
  };
  const runner = new LocalWorkflowRunner({
    definitions: { 'replace-node': replaceNode } as Record<WorkflowName, AslDefinition>,
    steps,
    sdk: async (service, action, i) => {
      ec2.push({ action: `${service}:${action}`, input: i });
      if (action === 'runInstances')
        return script.launch ? script.launch() : { Instances: [{ InstanceId: 'i-new', PrivateIpAddress: '10.0.0.5' }] };
      if (action === 'terminateInstances' && (i.InstanceIds as string[])[0] === 'i-dead' && script.terminateDead)
        return script.terminateDead();
      return {};
    },
    waitOverridesMs: { WaitForNode: 1 },
    retryIntervalMs: 1,
  });
  try {
    const exec = runner.start('replace-node', input, 'replace-node-test');
    return { done: await runner.wait(exec.name), calls, ec2 };
  } finally {
    await runner.close();
  }
}

const inputOf = (r: Run, step: StepName, n = 0) => r.calls.filter((c) => c.step === step)[n]?.input;

describe('ReplaceNode under the local runner (stand-in steps)', () => {
  it('launches, waits for the node, takes over, terminates the dead instance, fills until done and finishes', async () => {
    const r = await run();
    expect(r.done.status).toBe('SUCCEEDED');
    expect(r.done.states).toEqual([
      'Begin',
      'LaunchNode',
      'CheckNode',
      'NodeHealthy',
      'WaitForNode',
      'CheckNode',
      'NodeHealthy',
      'TakeOver',
      'TerminateDead',
      'TerminateDeadNode',
      'FillStart',
      'Fill',
      'FillDone',
      'Fill',
      'FillDone',
      'Finish',
      'Replaced',
    ]);
    const common = { execution: 'replace-node-test', workflow: 'replace-node' };
    // The begin step gets the execution's input (runStep spreads `request` in).
    expect(inputOf(r, 'replace-node.begin')).toEqual({ ...common, nodeId: 'n2' });
    // The launch uses the begin step's subnet and ClientToken.
    expect(r.ec2[0]).toMatchObject({
      action: 'ec2:runInstances',
      input: { ClientToken: 'token-1', NetworkInterfaces: [expect.objectContaining({ SubnetId: 'subnet-b' })] },
    });
    expect(inputOf(r, 'scale-out.check-node')).toEqual({
      ...common,
      nodeId: 'i-new',
      instanceId: 'i-new',
      privateIp: '10.0.0.5',
      launchedAt: 2_000,
      launchTimeoutMs: 900_000,
    });
    expect(inputOf(r, 'replace-node.take-over')).toEqual({
      ...common,
      nodeId: 'n2',
      newNodeId: 'i-new',
      instanceId: 'i-new',
      url: 'http://10.0.0.5:7070',
      az: 'az-b',
    });
    expect(r.ec2[1]).toEqual({ action: 'ec2:terminateInstances', input: { InstanceIds: ['i-dead'] } });
    expect(r.ec2).toHaveLength(2);
    // The first fill starts from FillStart's cursor, the next from the previous fill's.
    const options = { fillNamespaces: ['ns'], rateBytesPerSec: 8 << 20, fillMaxMs: 60_000, terminate: true };
    expect(inputOf(r, 'replace-node.fill', 0)).toEqual({ ...common, nodeId: 'i-new', cursor: null, options });
    expect(inputOf(r, 'replace-node.fill', 1)).toEqual({ ...common, nodeId: 'i-new', cursor: 'c1', options });
    // Finish sees the whole state, each result at its path.
    const state = inputOf(r, 'replace-node.finish')!.state as Json;
    expect(Object.keys(state).sort()).toEqual(['begin', 'fill', 'health', 'instance', 'nodeId', 'takeOver']);
    expect(state).toMatchObject({
      instance: { instanceId: 'i-new', privateIp: '10.0.0.5' },
      takeOver: { ranges: 2 },
      fill: { done: true, cursor: null, keys: 2, bytes: 20 },
    });
    expect(r.done.output).toMatchObject({ finish: { outcome: 'succeeded' } });
  });

  it.each([
    ['the dead node has no instance', { deadInstanceId: null }],
    ['the request says not to terminate it', { terminate: false }],
  ])('leaves the dead instance alone when %s', async (_, begin) => {
    const r = await run({ begin });
    expect(r.done.status).toBe('SUCCEEDED');
    expect(r.done.states).not.toContain('TerminateDeadNode');
    expect(r.done.states).toEqual(expect.arrayContaining(['TerminateDead', 'FillStart', 'Finish', 'Replaced']));
    expect(r.ec2.map((c) => c.action)).toEqual(['ec2:runInstances']);
  });

  it('goes on to the fill when the dead instance cannot be terminated', async () => {
    const r = await run({
      terminateDead: () => {
        throw failure('Ec2.UnauthorizedOperation');
      },
    });
    expect(r.done.status).toBe('SUCCEEDED');
    const state = inputOf(r, 'replace-node.finish')!.state as Json;
    expect(state.terminateError).toMatchObject({ Error: 'Ec2.UnauthorizedOperation' });
    expect(r.done.states).toEqual(expect.arrayContaining(['TerminateDeadNode', 'FillStart', 'Fill', 'Finish', 'Replaced']));
  });

  it('finishes when the fill fails: the node already serves by read-through', async () => {
    const r = await run({
      fill: (n) => {
        if (n === 1) return { done: false, cursor: 'c1', keys: 1, bytes: 10 };
        throw failure('ValidationError', 'cold tier refused');
      },
    });
    expect(r.done.status).toBe('SUCCEEDED');
    const state = inputOf(r, 'replace-node.finish')!.state as Json;
    expect(state.fillError).toMatchObject({ Error: 'ValidationError' });
    // The last good batch is kept where it was.
    expect(state.fill).toMatchObject({ done: false, cursor: 'c1' });
    expect(r.done.states.slice(-3)).toEqual(['Fill', 'Finish', 'Replaced']);
  });

  it('rolls back a failed take-over and terminates the new instance when the rollback says it owns nothing', async () => {
    const r = await run({
      takeOver: () => {
        throw failure('RingPreconditionError', 'the node is not DOWN');
      },
    });
    expect(r.done.status).toBe('FAILED');
    expect(r.done.error?.Error).toBe('RingPreconditionError');
    expect(r.done.states.slice(-4)).toEqual(['RollBack', 'NewNodeOwnsNothing', 'TerminateNode', 'ReplaceNodeFailed']);
    const state = inputOf(r, 'replace-node.rollback')!.state as Json;
    expect(state.error).toMatchObject({ Error: 'RingPreconditionError' });
    expect(state.instance).toEqual({ instanceId: 'i-new', privateIp: '10.0.0.5', lifecycle: 'on-demand' });
    expect(r.ec2.map((c) => [c.action, c.input.InstanceIds ?? null])).toEqual([
      ['ec2:runInstances', null],
      ['ec2:terminateInstances', ['i-new']],
    ]);
    // Nothing after the take-over ran.
    expect(r.calls.map((c) => c.step)).not.toContain('replace-node.fill');
    expect(r.calls.map((c) => c.step)).not.toContain('replace-node.finish');
  });

  it('fails without terminating when the rollback keeps the new instance', async () => {
    const r = await run({
      takeOver: () => {
        throw failure('RingPreconditionError');
      },
      rollback: () => ({ terminate: false, instanceId: null }),
    });
    expect(r.done.status).toBe('FAILED');
    expect(r.done.states.slice(-3)).toEqual(['RollBack', 'NewNodeOwnsNothing', 'ReplaceNodeFailed']);
    expect(r.ec2.map((c) => c.action)).toEqual(['ec2:runInstances']);
  });

  it('rolls back a failed launch, with no instance in the state', async () => {
    const r = await run({
      launch: () => {
        throw failure('Ec2.InsufficientInstanceCapacity');
      },
      rollback: (state) => ({ terminate: false, instanceId: (state.instance as Json | undefined)?.instanceId ?? null }),
    });
    expect(r.done.status).toBe('FAILED');
    expect(r.done.error?.Error).toBe('Ec2.InsufficientInstanceCapacity');
    expect(r.done.states).toEqual(['Begin', 'LaunchNode', 'RollBack', 'NewNodeOwnsNothing', 'ReplaceNodeFailed']);
    const state = inputOf(r, 'replace-node.rollback')!.state as Json;
    expect(state.instance).toBeUndefined();
    expect(state.begin).toMatchObject({ nodeId: 'n2' });
  });
});
