/**
 * RollingUpgrade's synthesized definition run under aws-local-stepfunctions with stand-in steps and EC2 calls: the
 * loop (one node per turn, its old instance terminated before the next turn launches), what each state passes on, and
 * where each failure goes. No cache node runs; the real steps run in test/workflows/rolling-upgrade.test.ts.
 */
import { synthesizeWorkflowDefinitions, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import { LocalWorkflowRunner, type LocalExecution } from '../../core/workflows/local/asl-runner.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import { STEP_NAMES, type StepHandlers, type StepName } from '../../core/workflows/steps/registry.js';

type Json = Record<string, unknown>;

let definition: AslDefinition;
beforeAll(() => {
  definition = synthesizeWorkflowDefinitions()['rolling-upgrade'];
});

const failure = (name: string, message = `injected ${name}`) => Object.assign(new Error(message), { name });

interface Run {
  done: LocalExecution;
  calls: { step: StepName; input: Json }[];
  ec2: { action: string; input: Json }[];
}

interface Script {
  /** The nodes to replace: [node id, instance id or null]. */
  nodes?: [string, string | null][];
  /** Throws from the stream step of this turn (1-based). */
  streamFailsInTurn?: number;
  launchFailsInTurn?: number;
  rollback?: Json;
}

async function run(script: Script = {}): Promise<Run> {
  const nodes = script.nodes ?? [
    ['n1', 'i-1'],
    ['n2', 'i-2'],
  ];
  const calls: Run['calls'] = [];
  const ec2: Run['ec2'] = [];
  const unexpected = Object.fromEntries(
    STEP_NAMES.map((s) => [
      s,
      async () => {
        throw failure('UnexpectedStep', `RollingUpgrade called ${s}`);
      },
    ]),
  ) as unknown as StepHandlers;
  let turn = 0;
  let launches = 0;
  const record =
    (step: StepName, f: (i: Json) => unknown) =>
    async (i: Json): Promise<unknown> => {
      calls.push({ step, input: i });
      return f(i);
    };
  const options = {
    mode: 'incremental',
    maxConcurrency: 1,
    publishEach: true,
    streamMaxMs: 100,
    rateBytesPerSec: 0,
    graceMs: 0,
    graceSeconds: 0,
  };
  const steps: StepHandlers = {
    ...unexpected,
    'rolling-upgrade.begin': record('rolling-upgrade.begin', () => ({
      nodes: nodes.map(([id]) => id),
      total: nodes.length,
      launchTimeoutMs: 900_000,
      options,
    })),
    'rolling-upgrade.next': record('rolling-upgrade.next', () => {
      const k = turn++;
      if (k >= nodes.length) return { done: true };
      const [nodeId, instanceId] = nodes[k]!;
      return {
        done: false,
        index: k,
        nodeId,
        instanceId,
        launch: { ordinal: k, subnetId: `subnet-${k}`, availabilityZone: `az-${k}`, clientToken: `token-${k}` },
        launchedAt: 1_000,
        launchTimeoutMs: 900_000,
      };
    }),
    'scale-out.check-node': record('scale-out.check-node', () => ({
      healthy: true,
      url: 'http://10.0.0.9:7070',
      allocationMs: 5,
    })),
    'rolling-upgrade.plan': record('rolling-upgrade.plan', () => ({
      planId: `p-${turn}`,
      sessions: [`p-${turn}-s0`, `p-${turn}-s1`],
    })),
    'migrate.prepare': record('migrate.prepare', (i) => ({ sessionId: i.sessionId, state: 'prepared' })),
    'migrate.stream': record('migrate.stream', () => {
      if (script.streamFailsInTurn === turn) throw failure('InjectedFailure');
      return { done: true };
    }),
    'migrate.publish': record('migrate.publish', (i) => ({ published: i.sessionIds })),
    'rolling-upgrade.finish': record('rolling-upgrade.finish', () => ({ ringVersion: 9 })),
    'rolling-upgrade.done': record('rolling-upgrade.done', () => ({ replaced: {} })),
    'rolling-upgrade.rollback': record(
      'rolling-upgrade.rollback',
      () => script.rollback ?? { terminateNew: true, newInstanceId: `i-new-${turn}`, terminateOld: false, oldInstanceId: null },
    ),
  };
  const runner = new LocalWorkflowRunner({
    definitions: { 'rolling-upgrade': definition } as Record<WorkflowName, AslDefinition>,
    steps,
    sdk: async (service, action, i) => {
      ec2.push({ action: `${service}:${action}`, input: i });
      if (action === 'runInstances') {
        launches++;
        if (script.launchFailsInTurn === launches) throw failure('Ec2.InsufficientInstanceCapacity');
        return { Instances: [{ InstanceId: `i-new-${launches}`, PrivateIpAddress: '10.0.0.9' }] };
      }
      return {};
    },
    waitOverridesMs: { WaitForNode: 1, GracePeriod: 1 },
    retryIntervalMs: 1,
  });
  try {
    const exec = runner.start('rolling-upgrade', {}, 'rolling-upgrade-test');
    return { done: await runner.wait(exec.name), calls, ec2 };
  } finally {
    await runner.close();
  }
}

const inputsOf = (r: Run, step: StepName) => r.calls.filter((c) => c.step === step).map((c) => c.input);

describe('RollingUpgrade under the local runner (stand-in steps)', () => {
  it('replaces the nodes one per turn: launch, hand-off, finish, grace, terminate the old instance, then the next', async () => {
    const r = await run();
    expect(r.done.status).toBe('SUCCEEDED');
    const turnStates = [
      'NextTurn',
      'NextNode',
      'AllReplaced',
      'LaunchNode',
      'CheckNode',
      'NodeHealthy',
      'PlanHandOff',
      'MigrateSessions',
    ];
    const afterMap = ['PublishTogether', 'SessionsMigrated', 'HandOffDone', 'GracePeriod', 'OldHasInstance', 'TerminateOldNode'];
    const top = r.done.states.filter(
      (s) => !['PrepareSession', 'StreamSession', 'SessionStreamed', 'PublishSession'].includes(s),
    );
    expect(top).toEqual([
      'Begin',
      ...turnStates,
      ...afterMap,
      ...turnStates,
      ...afterMap,
      'NextTurn',
      'NextNode',
      'AllReplaced',
      'Done',
      'Upgraded',
    ]);
    // Each launch with its turn's subnet and ClientToken; each old instance terminated before the next launch.
    expect(r.ec2.map((c) => [c.action, c.input.ClientToken ?? c.input.InstanceIds])).toEqual([
      ['ec2:runInstances', 'token-0'],
      ['ec2:terminateInstances', ['i-1']],
      ['ec2:runInstances', 'token-1'],
      ['ec2:terminateInstances', ['i-2']],
    ]);
    const common = { execution: 'rolling-upgrade-test', workflow: 'rolling-upgrade' };
    expect(inputsOf(r, 'rolling-upgrade.plan')[1]).toEqual({
      ...common,
      nodeId: 'n2',
      newNodeId: 'i-new-2',
      instanceId: 'i-new-2',
      url: 'http://10.0.0.9:7070',
      az: 'az-1',
      mode: 'incremental',
    });
    expect(inputsOf(r, 'rolling-upgrade.finish')[1]).toEqual({
      ...common,
      planId: 'p-2',
      nodeId: 'n2',
      newNodeId: 'i-new-2',
      graceSeconds: 0,
    });
    // The shared migration states run each turn's sessions, published one by one.
    expect(inputsOf(r, 'migrate.publish').map((i) => i.sessionIds)).toEqual([['p-1-s0'], ['p-1-s1'], ['p-2-s0'], ['p-2-s1']]);
    expect(inputsOf(r, 'migrate.stream')[0]).toMatchObject({ ...common, maxMs: 100, rateBytesPerSec: 0 });
  });

  it('an old node without an instance is not terminated', async () => {
    const r = await run({ nodes: [['n1', null]] });
    expect(r.done.status).toBe('SUCCEEDED');
    expect(r.done.states).not.toContain('TerminateOldNode');
    expect(r.ec2.map((c) => c.action)).toEqual(['ec2:runInstances']);
  });

  it("a failure mid-hand-off rolls back that turn's node only (the state of the earlier turn is not passed on) and stops", async () => {
    const r = await run({ streamFailsInTurn: 2 });
    expect(r.done.status).toBe('FAILED');
    expect(r.done.error?.Error).toBe('InjectedFailure');
    expect(r.done.states.slice(-5)).toEqual([
      'RollBack',
      'NewNodeOwnsNothing',
      'TerminateNewNode',
      'OldNodeLeftRing',
      'UpgradeFailed',
    ]);
    const state = inputsOf(r, 'rolling-upgrade.rollback')[0]!.state as Json;
    expect(state).toMatchObject({
      next: { nodeId: 'n2', instanceId: 'i-2' },
      instance: { instanceId: 'i-new-2' },
      plan: { planId: 'p-2' },
      error: { Error: 'InjectedFailure' },
    });
    // The first node was replaced and terminated; the second's successor is terminated by the rollback; no third launch.
    expect(r.ec2.map((c) => [c.action, c.input.ClientToken ?? c.input.InstanceIds])).toEqual([
      ['ec2:runInstances', 'token-0'],
      ['ec2:terminateInstances', ['i-1']],
      ['ec2:runInstances', 'token-1'],
      ['ec2:terminateInstances', ['i-new-2']],
    ]);
    expect(r.done.states).not.toContain('Done');
  });

  it('a failed launch rolls back with no plan or instance of an earlier turn in its state', async () => {
    const r = await run({ launchFailsInTurn: 2, rollback: { terminateNew: false, newInstanceId: null, terminateOld: false } });
    expect(r.done.status).toBe('FAILED');
    const state = inputsOf(r, 'rolling-upgrade.rollback')[0]!.state as Json;
    expect(state.next).toMatchObject({ nodeId: 'n2' });
    expect(state.plan).toBeUndefined();
    expect(state.instance).toBeUndefined();
    expect(r.done.states.slice(-3)).toEqual(['NewNodeOwnsNothing', 'OldNodeLeftRing', 'UpgradeFailed']);
  });

  it('a node that handed everything over before the failure has its instance terminated by the rollback too', async () => {
    const r = await run({
      streamFailsInTurn: 1,
      rollback: { terminateNew: false, newInstanceId: 'i-new-1', terminateOld: true, oldInstanceId: 'i-1' },
    });
    expect(r.done.status).toBe('FAILED');
    expect(r.done.states.slice(-3)).toEqual(['OldNodeLeftRing', 'TerminateHandedOffNode', 'UpgradeFailed']);
    expect(r.ec2.at(-1)).toEqual({ action: 'ec2:terminateInstances', input: { InstanceIds: ['i-1'] } });
  });
});
