/**
 * The spot-interruption handler's core (core/nodes/spot-interruption.ts) over AWS's documented EventBridge events:
 * which node an event is for, what it starts (the drain at once, the refill only after a drain that finished),
 * what it ignores, and that a redelivered event starts nothing twice. The workflows are a recording stand-in here;
 * test/workflows/spot-interruption.test.ts runs the real state machines against real cache-node processes.
 */
import { initialRing, markDown, type RingDocument } from '../../core/ring/document.js';
import {
  handleSpotInterruption,
  nodeOfInstance,
  parseSpotEvent,
  spotExecutionName,
  type SpotDeps,
  type SpotWorkflows,
} from '../../core/nodes/spot-interruption.js';
import { DOCUMENTED_REBALANCE, DOCUMENTED_WARNING, SAMPLE_INSTANCE } from '../helpers/spot-events.js';

const T0 = Date.parse('2026-11-26T12:00:00Z');
const INSTANCE = SAMPLE_INSTANCE;

/** Four nodes; on EC2 a node's id is its instance id. */
function ring(): RingDocument {
  return initialRing(
    [INSTANCE, 'i-0bbb', 'i-0ccc', 'i-0ddd'].map((id, k) => ({ id, url: `http://10.0.0.${k + 1}:7000`, instance: id })),
    2,
  );
}

/** Workflows that record their starts; each execution's status follows `script` (by name), else RUNNING forever. */
class FakeWorkflows implements SpotWorkflows {
  readonly starts: { workflow: string; input: Record<string, unknown>; name: string }[] = [];
  readonly existing = new Map<string, string>();
  constructor(private readonly outcome: Record<string, string> = {}) {}

  async start(workflow: 'scale-in' | 'scale-out', input: Record<string, unknown>, name: string) {
    if (this.existing.has(name)) return 'exists' as const;
    this.starts.push({ workflow, input, name });
    this.existing.set(name, this.outcome[workflow] ?? 'RUNNING');
    return 'started' as const;
  }

  async status(name: string) {
    return this.existing.get(name);
  }
}

function deps(doc: RingDocument | undefined, workflows: SpotWorkflows) {
  let clock = T0 + 2000;
  const logs: { level: string; message: string }[] = [];
  const metrics: { key: string; value: number; dims?: Record<string, string> }[] = [];
  const d: SpotDeps = {
    ring: { load: async () => doc },
    workflows,
    log: (level, message) => logs.push({ level, message }),
    metric: (key, value, dims) => metrics.push({ key, value, ...(dims ? { dims } : {}) }),
    now: () => clock,
    sleep: async (ms) => void (clock += ms),
  };
  return { d, logs, metrics };
}

describe('parsing EC2 spot events (the documented shapes)', () => {
  it('reads the documented interruption warning: instance, action, and the time the two minutes count from', () => {
    expect(parseSpotEvent(DOCUMENTED_WARNING)).toEqual({
      kind: 'interruption',
      instanceId: INSTANCE,
      action: 'terminate',
      at: T0,
      eventId: DOCUMENTED_WARNING.id,
    });
  });

  it('reads the documented rebalance recommendation, which carries no action', () => {
    expect(parseSpotEvent(DOCUMENTED_REBALANCE)).toMatchObject({ kind: 'rebalance', instanceId: INSTANCE, action: null });
  });

  it('ignores other events, other sources and events without an instance id, with the reason', () => {
    const other = { ...DOCUMENTED_WARNING, 'detail-type': 'EC2 Instance State-change Notification' };
    expect(parseSpotEvent(other)).toEqual({ ignored: expect.stringMatching(/State-change/) });
    expect(parseSpotEvent({ ...DOCUMENTED_WARNING, source: 'custom.app' })).toEqual({
      ignored: expect.stringMatching(/aws\.ec2/),
    });
    expect(parseSpotEvent({ ...DOCUMENTED_WARNING, detail: {} })).toEqual({ ignored: expect.stringMatching(/instance-id/) });
    expect(parseSpotEvent(null)).toEqual({ ignored: expect.any(String) });
  });

  it('counts the notice from its arrival when the event has no usable time', () => {
    expect(parseSpotEvent({ ...DOCUMENTED_WARNING, time: 'soon' }, 42)).toMatchObject({ at: 42 });
  });
});

describe('the node of an instance', () => {
  it('is the ring node recording that instance, or on a node without one the node of that id', () => {
    const doc = ring();
    doc.nodes[1]!.instance = 'i-other';
    expect(nodeOfInstance(doc, INSTANCE)?.id).toBe(INSTANCE);
    expect(nodeOfInstance(doc, 'i-other')?.id).toBe('i-0bbb');
    expect(nodeOfInstance(doc, 'i-0bbb')).toBeUndefined(); // its node runs on another instance now
    delete doc.nodes[2]!.instance;
    expect(nodeOfInstance(doc, 'i-0ccc')?.id).toBe('i-0ccc');
  });

  it('names the executions after the instance, within Step Functions name rules', () => {
    expect(spotExecutionName('spot-drain', INSTANCE)).toBe(`spot-drain-${INSTANCE}`);
    expect(spotExecutionName('spot-refill', 'node:1.x')).toBe('spot-refill-node-1-x');
    expect(spotExecutionName('spot-drain', 'n'.repeat(64))).toHaveLength(75);
  });
});

describe('handling a warning', () => {
  it('drains the node at once with options that fit the notice, then refills the fleet once the drain succeeded', async () => {
    const wf = new FakeWorkflows({ 'scale-in': 'SUCCEEDED' });
    const { d, metrics } = deps(ring(), wf);
    const out = await handleSpotInterruption(DOCUMENTED_WARNING, d);
    expect(out).toMatchObject({
      outcome: 'drained',
      node: INSTANCE,
      drain: `spot-drain-${INSTANCE}`,
      refill: `spot-refill-${INSTANCE}`,
    });
    expect(wf.starts).toEqual([
      {
        workflow: 'scale-in',
        name: `spot-drain-${INSTANCE}`,
        input: { nodeId: INSTANCE, mode: 'incremental', streamMaxMs: 20_000, graceMs: 10_000, rateBytesPerSec: 0 },
      },
      {
        workflow: 'scale-out',
        name: `spot-refill-${INSTANCE}`,
        input: { mode: 'incremental', reason: expect.stringMatching(/spot/) },
      },
    ]);
    // The refill takes no node lock (no forNode) and no source list: it starts after the node left the ring.
    expect(wf.starts[1]!.input).not.toHaveProperty('forNode');
    expect(metrics).toEqual([
      { key: 'spotInterruptions', value: 1, dims: { Outcome: 'draining' } },
      { key: 'spotDrainMs', value: 2000 },
    ]);
  });

  it('leaves a drain that failed to the failure path: no refill, a SpotDrainsFailed metric', async () => {
    const wf = new FakeWorkflows({ 'scale-in': 'FAILED' });
    const { d, metrics, logs } = deps(ring(), wf);
    const out = await handleSpotInterruption(DOCUMENTED_WARNING, d);
    expect(out).toMatchObject({ outcome: 'drain-failed', refill: null, drainStatus: 'FAILED' });
    expect(wf.starts.map((s) => s.workflow)).toEqual(['scale-in']);
    expect(metrics.map((m) => m.key)).toEqual(['spotInterruptions', 'spotDrainsFailed']);
    expect(logs.at(-1)).toMatchObject({ level: 'warn', message: expect.stringMatching(/failure path/) });
  });

  it('stops following a drain that outlives the notice, without a refill', async () => {
    const wf = new FakeWorkflows(); // the drain never ends
    const { d } = deps(ring(), wf);
    const out = await handleSpotInterruption(DOCUMENTED_WARNING, d, { followMs: 30_000, pollMs: 1000 });
    expect(out).toMatchObject({ outcome: 'drain-running', refill: null, drainStatus: 'RUNNING' });
    expect(wf.starts).toHaveLength(1);
  });

  it('starts nothing twice when the warning is delivered again, and refills once the drain it follows succeeded', async () => {
    const wf = new FakeWorkflows({ 'scale-in': 'SUCCEEDED' });
    const first = deps(ring(), wf);
    await handleSpotInterruption(DOCUMENTED_WARNING, first.d);
    // The ring no longer holds the node (it was drained): the redelivery follows the drain by its name.
    const again = deps(initialRing([{ id: 'i-0bbb', url: 'http://10.0.0.2:7000', instance: 'i-0bbb' }], 2), wf);
    const out = await handleSpotInterruption(DOCUMENTED_WARNING, again.d);
    expect(out).toMatchObject({ outcome: 'drained', redelivered: true });
    expect(wf.starts.map((s) => s.name)).toEqual([`spot-drain-${INSTANCE}`, `spot-refill-${INSTANCE}`]);
    expect(again.metrics[0]).toEqual({ key: 'spotInterruptions', value: 1, dims: { Outcome: 'redelivered' } });
  });

  it('treats a rebalance recommendation and the warning that follows it as one drain', async () => {
    const wf = new FakeWorkflows({ 'scale-in': 'SUCCEEDED' });
    await handleSpotInterruption(DOCUMENTED_REBALANCE, deps(ring(), wf).d);
    await handleSpotInterruption(DOCUMENTED_WARNING, deps(ring(), wf).d);
    expect(wf.starts.map((s) => s.workflow)).toEqual(['scale-in', 'scale-out']);
  });

  it('ignores (and logs) an instance the ring does not run, a node already LEAVING or DOWN, a node not serving yet', async () => {
    const cases: [string, (doc: RingDocument) => void, RegExp][] = [
      ['not in the ring', (doc) => (doc.nodes = doc.nodes.filter((n) => n.id !== INSTANCE)), /runs no node/],
      ['LEAVING', (doc) => (doc.nodes[0]!.state = 'LEAVING'), /already LEAVING/],
      ['DOWN', (doc) => markDown(doc, INSTANCE, doc.version + 1, 'test'), /already DOWN/],
      ['JOINING', (doc) => (doc.nodes[0]!.state = 'JOINING'), /JOINING/],
    ];
    for (const [, edit, why] of cases) {
      const doc = ring();
      edit(doc);
      const wf = new FakeWorkflows();
      const { d, logs, metrics } = deps(doc, wf);
      const out = await handleSpotInterruption(DOCUMENTED_WARNING, d);
      expect(out).toMatchObject({ outcome: 'ignored', reason: expect.stringMatching(why) });
      expect(wf.starts).toEqual([]);
      expect(logs).toEqual([expect.objectContaining({ message: expect.stringMatching(why) })]);
      expect(metrics).toEqual([{ key: 'spotInterruptions', value: 1, dims: { Outcome: 'ignored' } }]);
    }
  });

  it('ignores an event of another kind without reading the ring', async () => {
    const wf = new FakeWorkflows();
    const { d } = deps(undefined, { ...wf, status: () => Promise.reject(new Error('not called')), start: wf.start.bind(wf) });
    const out = await handleSpotInterruption({ ...DOCUMENTED_WARNING, 'detail-type': 'Scheduled Event' }, d);
    expect(out).toMatchObject({ outcome: 'ignored', instanceId: null });
  });
});
