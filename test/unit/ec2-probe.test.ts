/**
 * The failure detector in AWS: the EC2 probe (core/nodes/ec2-probe.ts) and the policy evaluator's health tick
 * (core/composition/fleet-health-tick.ts, run by policy-evaluator-lambda.ts).
 *
 * EC2 is stubbed at the SDK boundary: a real EC2Client whose HTTP handler answers DescribeInstanceStatus with XML in
 * the documented wire shape (InstanceStatus: instanceId, instanceState {code, name}, systemStatus / instanceStatus
 * {status, details {name, status}}: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStatus.html;
 * an error as <Response><Errors><Error><Code/><Message/>: "Example error response",
 * https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html), so the SDK's own parsing and error
 * naming are part of what is tested. Not LocalStack: its EC2 instances are mocks whose status checks it does not
 * model (no impaired check, no stopped host; test/workflows/scale-failures.test.ts uses it for RunInstances only), so
 * it could not produce the answers that matter here.
 */
import { Readable } from 'node:stream';
import { EC2Client, type EC2ClientConfig } from '@aws-sdk/client-ec2';
import {
  fleetHealthTick,
  FLEET_HEALTH_CONFIRM_MS,
  HEALTH_CHECKER_KEY,
  REPLACEMENT_START_ATTEMPTS,
  replacementExecutionName,
  type FleetHealthOptions,
  type FleetHealthStateDocument,
} from '../../core/composition/fleet-health-tick.js';
import { policyTick, type PolicyTickRuntime } from '../../core/composition/policy-evaluator-lambda.js';
import { DESCRIBE_INSTANCE_STATUS_MAX_IDS, ec2StatusProbe } from '../../core/nodes/ec2-probe.js';
import { HealthControls } from '../../core/nodes/health-controls.js';
import { withReportHeartbeat } from '../../core/nodes/heartbeat-probe.js';
import { nodeStatsKey, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { initialRing, type RingNode } from '../../core/ring/document.js';
import { InMemoryCasStore, RING_KEY, RingStore, type CasStore } from '../../core/ring/store.js';
import { createLogger } from '../../core/util/logger.js';
import { ExecutionExistsError, WorkflowsUnavailableError, type WorkflowService } from '../../core/workflows/admin-service.js';

const T0 = 1_700_000_000_000;

/** How EC2 describes one instance, in its wire names. */
interface Described {
  state: 'pending' | 'running' | 'shutting-down' | 'terminated' | 'stopping' | 'stopped';
  system?: string;
  instance?: string;
  /** Failed checks' details (the `reachability` check of the impaired summary). */
  failed?: ('system' | 'instance')[];
}

const STATE_CODES: Record<Described['state'], number> = {
  pending: 0,
  running: 16,
  'shutting-down': 32,
  terminated: 48,
  stopping: 64,
  stopped: 80,
};

function statusXml(id: string, d: Described): string {
  const summary = (tag: string, status: string | undefined, failed: boolean) =>
    status === undefined
      ? ''
      : `<${tag}><status>${status}</status><details><item><name>reachability</name><status>${failed ? 'failed' : 'passed'}</status>` +
        `${failed ? '<impairedSince>2026-11-21T12:00:00.000Z</impairedSince>' : ''}</item></details></${tag}>`;
  return (
    `<item><instanceId>${id}</instanceId><availabilityZone>us-east-1a</availabilityZone>` +
    `<instanceState><code>${STATE_CODES[d.state]}</code><name>${d.state}</name></instanceState>` +
    summary('systemStatus', d.system, d.failed?.includes('system') ?? false) +
    summary('instanceStatus', d.instance, d.failed?.includes('instance') ?? false) +
    '</item>'
  );
}

type Answer = { status: number; xml: string };

/**
 * An EC2 endpoint that knows `instances` (what DescribeInstanceStatus answers for each) and records each request's
 * ids. An id it does not know fails the request as EC2 does (InvalidInstanceID.NotFound naming the ids).
 */
class FakeEc2 {
  readonly instances = new Map<string, Described>();
  readonly requests: { ids: string[]; includeAll: boolean }[] = [];
  /** Replaces the next answers (an error) when set. */
  failWith: Answer | undefined;

  readonly client = new EC2Client({
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
    requestHandler: {
      handle: async (req: { body?: unknown }) => {
        const form = new URLSearchParams(String(req.body));
        const ids = [...form.entries()].filter(([k]) => /^InstanceId\.\d+$/.test(k)).map(([, v]) => v);
        expect(form.get('Action')).toBe('DescribeInstanceStatus');
        this.requests.push({ ids, includeAll: form.get('IncludeAllInstances') === 'true' });
        const a = this.failWith ?? this.answer(ids);
        return {
          response: { statusCode: a.status, headers: { 'content-type': 'text/xml' }, body: Readable.from([Buffer.from(a.xml)]) },
        };
      },
    } as unknown as EC2ClientConfig['requestHandler'],
  });

  private answer(ids: string[]): Answer {
    const missing = ids.filter((id) => !this.instances.has(id));
    if (missing.length > 0) {
      const message =
        missing.length === 1
          ? `The instance ID '${missing[0]}' does not exist`
          : `The instance IDs '${missing.join(', ')}' do not exist`;
      return errorAnswer(400, 'InvalidInstanceID.NotFound', message);
    }
    const items = ids.map((id) => statusXml(id, this.instances.get(id)!)).join('');
    return {
      status: 200,
      xml:
        '<?xml version="1.0" encoding="UTF-8"?>\n<DescribeInstanceStatusResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">' +
        `<requestId>req-1</requestId><instanceStatusSet>${items}</instanceStatusSet></DescribeInstanceStatusResponse>`,
    };
  }
}

function errorAnswer(status: number, code: string, message: string): Answer {
  return {
    status,
    xml: `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>${code}</Code><Message>${message}</Message></Error></Errors><RequestID>req-2</RequestID></Response>`,
  };
}

/** `i-` and 17 hex digits, from a number. */
const iid = (n: number) => `i-${n.toString(16).padStart(17, '0')}`;

function node(id: string, instance?: string): RingNode {
  return {
    id,
    url: `http://${id}.test:7070`,
    state: 'NORMAL',
    addedAt: new Date(T0).toISOString(),
    ...(instance ? { instance } : {}),
  };
}

describe('ec2StatusProbe', () => {
  it('asks once, with IncludeAllInstances, and maps state and status checks to down, ok and unknown', async () => {
    const ec2 = new FakeEc2();
    const cases: [string, Described, string | RegExp][] = [
      ['ok', { state: 'running', system: 'ok', instance: 'ok' }, 'ok'],
      // Checks still initializing after a (re)start, or EC2 without enough data: no evidence of a failure.
      ['booting', { state: 'running', system: 'initializing', instance: 'initializing' }, 'ok'],
      ['quiet', { state: 'running', system: 'ok', instance: 'insufficient-data' }, 'ok'],
      ['stopping', { state: 'stopping', system: 'not-applicable', instance: 'not-applicable' }, /is stopping$/],
      ['stopped', { state: 'stopped', system: 'not-applicable', instance: 'not-applicable' }, /is stopped$/],
      ['dying', { state: 'shutting-down' }, /is shutting-down$/],
      ['gone', { state: 'terminated' }, /is terminated$/],
      [
        'host',
        { state: 'running', system: 'impaired', instance: 'ok', failed: ['system'] },
        /system status impaired \(reachability failed\)$/,
      ],
      [
        'os',
        { state: 'running', system: 'ok', instance: 'impaired', failed: ['instance'] },
        /instance status impaired \(reachability failed\)$/,
      ],
      ['pending', { state: 'pending' }, 'unknown'],
      ['odd', { state: 'running', system: 'ok', instance: 'not-applicable' }, 'unknown'],
    ];
    const nodes = cases.map(([id, d], i) => {
      ec2.instances.set(iid(i + 1), d);
      return node(id, iid(i + 1));
    });
    const answers = await ec2StatusProbe({ client: ec2.client }).many(nodes);
    expect(ec2.requests).toEqual([{ ids: nodes.map((n) => n.instance), includeAll: true }]);
    for (const [id, , want] of cases) {
      const got = answers.get(id);
      if (want === 'ok') expect({ id, got }).toEqual({ id, got: 'ok' });
      else if (want === 'unknown') expect({ id, got }).toEqual({ id, got: { result: 'unknown', detail: expect.any(String) } });
      else expect({ id, got }).toEqual({ id, got: { result: 'down', detail: expect.stringMatching(want) } });
    }
  });

  it('asks about at most 100 instances per request (the API’s limit for explicit ids)', async () => {
    const ec2 = new FakeEc2();
    const nodes = Array.from({ length: 250 }, (_, i) => {
      ec2.instances.set(iid(i + 1), { state: 'running', system: 'ok', instance: 'ok' });
      return node(`n${i}`, iid(i + 1));
    });
    const answers = await ec2StatusProbe({ client: ec2.client }).many(nodes);
    expect(DESCRIBE_INSTANCE_STATUS_MAX_IDS).toBe(100);
    expect(ec2.requests.map((r) => r.ids.length)).toEqual([100, 100, 50]);
    expect(new Set(ec2.requests.flatMap((r) => r.ids)).size).toBe(250);
    expect([...answers.values()].every((a) => a === 'ok')).toBe(true);
    expect(() => ec2StatusProbe({ client: ec2.client, batchSize: 101 })).toThrow(/batchSize/);
  });

  it('marks an instance EC2 does not know as down (InvalidInstanceID.NotFound) and asks again about the others', async () => {
    const ec2 = new FakeEc2();
    ec2.instances.set(iid(1), { state: 'running', system: 'ok', instance: 'ok' });
    const nodes = [node('a', iid(1)), node('b', iid(2)), node('c', iid(3))];
    const answers = await ec2StatusProbe({ client: ec2.client }).many(nodes);
    expect(ec2.requests.map((r) => r.ids)).toEqual([[iid(1), iid(2), iid(3)], [iid(1)]]);
    expect(answers.get('a')).toBe('ok');
    for (const id of ['b', 'c'])
      expect(answers.get(id)).toEqual({ result: 'down', detail: expect.stringMatching(/does not know instance .*NotFound/) });
  });

  it('answers unknown for every node when the API fails, or for a NotFound that names none of the ids', async () => {
    const ec2 = new FakeEc2();
    ec2.instances.set(iid(1), { state: 'stopped' });
    const nodes = [node('a', iid(1))];
    const probe = ec2StatusProbe({ client: ec2.client });
    for (const [status, code, message] of [
      [403, 'UnauthorizedOperation', 'You are not authorized to perform this operation.'],
      [503, 'RequestLimitExceeded', 'Request limit exceeded.'],
      [400, 'InvalidInstanceID.NotFound', 'The instance ID does not exist'],
    ] as const) {
      ec2.failWith = errorAnswer(status, code, message);
      const got = (await probe.many(nodes)).get('a');
      expect({ code, got }).toEqual({ code, got: { result: 'unknown', detail: expect.stringContaining(code) } });
    }
  });

  it('asks nothing about a node with no EC2 instance id (unknown)', async () => {
    const ec2 = new FakeEc2();
    const answers = await ec2StatusProbe({ client: ec2.client }).many([node('a'), node('b', 'n2')]);
    expect(ec2.requests).toEqual([]);
    expect(answers.get('a')).toEqual({ result: 'unknown', detail: 'the ring names no EC2 instance for it' });
    expect(answers.get('b')).toEqual({ result: 'unknown', detail: "'n2' is not an EC2 instance id" });
  });
});

/** A ring store that counts reads and writes per key. */
class CountingCas implements CasStore {
  readonly gets: string[] = [];
  readonly puts: string[] = [];
  constructor(readonly inner = new InMemoryCasStore()) {}
  async get(key: string) {
    this.gets.push(key);
    return this.inner.get(key);
  }
  async put(key: string, body: string, ifEtag: string | null) {
    this.puts.push(key);
    return this.inner.put(key, body, ifEtag);
  }
  reset(): void {
    this.gets.length = 0;
    this.puts.length = 0;
  }
}

/** A workflow service that records the replacements it is asked to start (and can fail them). */
class FakeWorkflows implements Pick<WorkflowService, 'start'> {
  readonly started: { workflow: string; input: Record<string, unknown>; name?: string }[] = [];
  fail: Error | undefined;
  async start(workflow: Parameters<WorkflowService['start']>[0], input: Record<string, unknown>, name?: string) {
    if (this.fail) throw this.fail;
    this.started.push({ workflow, input, ...(name ? { name } : {}) });
    return { execution: name ?? 'x', workflow, status: 'RUNNING' as const, startedAt: new Date(T0).toISOString() };
  }
}

describe('the evaluator’s health tick (fleetHealthTick)', () => {
  const FLEET = ['a', 'b', 'c', 'd'];

  async function setup(ids = FLEET) {
    const cas = new CountingCas();
    const ec2 = new FakeEc2();
    ids.forEach((id, i) => ec2.instances.set(iid(i + 1), { state: 'running', system: 'ok', instance: 'ok' }));
    const ring = new RingStore(cas);
    await ring.create(
      initialRing(
        ids.map((id, i) => ({ id, url: `http://${id}.test:7070`, instance: iid(i + 1) })),
        2,
        new Date(T0),
      ),
    );
    const workflows = new FakeWorkflows();
    const emf: Record<string, unknown>[] = [];
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({ write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>), level: 'debug' });
    const clock = { t: T0 };
    const opts: FleetHealthOptions = {
      cas,
      probe: ec2StatusProbe({ client: ec2.client }),
      workflows,
      environment: 'dev',
      log: logger,
      emit: (text) =>
        emf.push(
          ...text
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as Record<string, unknown>),
        ),
      now: () => clock.t,
    };
    cas.reset();
    const tick = (at: number, extra: Partial<FleetHealthOptions> = {}) => {
      clock.t = T0 + at;
      return fleetHealthTick({ ...opts, ...extra });
    };
    return { cas, ec2, ring, workflows, emf, lines, tick };
  }

  const stateOf = async (cas: CasStore) => JSON.parse((await cas.get(HEALTH_CHECKER_KEY))!.body) as FleetHealthStateDocument;

  it('reads only the ring when there is no fleet: no EC2 call, no checker state', async () => {
    const cas = new CountingCas();
    const ec2 = new FakeEc2();
    const r = await fleetHealthTick({ cas, probe: ec2StatusProbe({ client: ec2.client }), environment: 'dev' });
    expect(r).toMatchObject({ skipped: 'no ring document', probed: [] });
    expect(cas.gets).toEqual([RING_KEY]);
    expect(ec2.requests).toEqual([]);
  });

  it('costs a healthy fleet one EC2 call and two GETs (ring, checker state) a tick, and no PUT', async () => {
    const c = await setup();
    for (const at of [0, 60_000, 120_000]) {
      c.cas.reset();
      const r = await c.tick(at);
      expect(r).toEqual({ probed: FLEET, marked: [], started: [], saved: false });
      expect(c.cas.gets).toEqual([RING_KEY, HEALTH_CHECKER_KEY]);
      expect(c.cas.puts).toEqual([]);
    }
    expect(c.ec2.requests).toHaveLength(3);
    expect(c.ec2.requests[0]).toEqual({ ids: [iid(1), iid(2), iid(3), iid(4)], includeAll: true });
    expect(c.emf).toEqual([]);
  });

  it('marks a stopped node DOWN at the second failed tick a minute later and starts replace-node for it', async () => {
    const c = await setup();
    c.ec2.instances.set(iid(2), { state: 'stopped', system: 'not-applicable', instance: 'not-applicable' });
    const first = await c.tick(0);
    expect(first).toMatchObject({ marked: [], saved: true });
    expect((await stateOf(c.cas)).checker.tracks).toEqual([expect.objectContaining({ id: 'b', probeFailures: 1 })]);
    // A minute later (EventBridge's next start, a second early): confirmed (2 probes, at least 50 s apart).
    expect(FLEET_HEALTH_CONFIRM_MS).toBeLessThan(60_000);
    const second = await c.tick(59_000);
    expect(second).toMatchObject({ marked: ['b'], saved: true });
    const doc = (await c.ring.load())!;
    expect(doc.nodes.find((n) => n.id === 'b')).toMatchObject({
      state: 'DOWN',
      down: { at: T0 + 59_000, reason: `0 coordinator failures, 2 failed probes over 59.0 s: EC2 instance ${iid(2)} is stopped` },
    });
    const execution = replacementExecutionName('b', doc.version);
    expect(execution).toBe('replace-node-b-v2');
    expect(second.started).toEqual([execution]);
    expect(c.workflows.started).toEqual([
      { workflow: 'replace-node', input: { nodeId: 'b', reason: 'health check' }, name: execution },
    ]);
    // The catalog metric, by environment only (the node is a property of the line).
    expect(c.emf).toEqual([
      expect.objectContaining({
        Environment: 'dev',
        NodesMarkedDown: 1,
        Node: 'b',
        _aws: expect.objectContaining({
          CloudWatchMetrics: [
            { Namespace: 'Strata/Fleet', Dimensions: [['Environment']], Metrics: [{ Name: 'NodesMarkedDown', Unit: 'Count' }] },
          ],
        }),
      }),
    ]);
    expect(c.lines.filter((l) => l.level === 'warn').map((l) => l.msg ?? l.message)).toEqual([
      expect.stringMatching(/marked cache node b DOWN/),
      expect.stringMatching(/started replace-node-b-v2 to replace cache node b/),
    ]);
    // The DOWN node is no longer asked about; the state holds the marking and nothing else, and stays put.
    c.ec2.requests.length = 0;
    c.cas.reset();
    expect(await c.tick(120_000)).toMatchObject({ probed: ['a', 'c', 'd'], saved: false });
    expect(c.ec2.requests[0]!.ids).toEqual([iid(1), iid(3), iid(4)]);
    expect(c.cas.puts).toEqual([]);
  });

  it('does not confirm on one failed tick, nor on an API error between two (unknown neither counts nor resets)', async () => {
    const c = await setup();
    c.ec2.instances.set(iid(3), { state: 'running', system: 'impaired', instance: 'ok', failed: ['system'] });
    await c.tick(0);
    c.ec2.failWith = errorAnswer(503, 'Unavailable', 'The service is unavailable.');
    expect((await c.tick(60_000)).marked).toEqual([]);
    c.ec2.failWith = undefined;
    expect((await c.tick(120_000)).marked).toEqual(['c']);
  });

  it("holds the marking while the operators' switch is paused (health/controls), and says so once", async () => {
    const c = await setup();
    await new HealthControls(c.cas).set(true, { by: 'ops', reason: 'maintenance' });
    c.ec2.instances.set(iid(2), { state: 'terminated' });
    for (const at of [0, 60_000, 120_000]) expect(await c.tick(at)).toMatchObject({ marked: [] });
    expect((await c.ring.load())!.nodes.every((n) => n.state === 'NORMAL')).toBe(true);
    expect(c.workflows.started).toEqual([]);
    expect((await stateOf(c.cas)).checker).toMatchObject({ held: 'paused', heldSince: T0 + 60_000 });
    expect(c.emf.map((d) => [d.NodeHealthHeld, d.Reason])).toEqual([
      [1, 'paused'],
      [1, 'paused'],
    ]);
    expect(c.lines.filter((l) => l.level === 'warn')).toHaveLength(1);
    await new HealthControls(c.cas).set(false);
    expect((await c.tick(180_000)).marked).toEqual(['b']);
  });

  it('tries a failed replacement start again at the next ticks, and counts an existing execution as started', async () => {
    const c = await setup();
    c.ec2.instances.set(iid(2), { state: 'stopped' });
    c.workflows.fail = new WorkflowsUnavailableError('Step Functions StartExecution failed (ThrottlingException)', {});
    await c.tick(0);
    const marked = await c.tick(60_000);
    expect(marked).toMatchObject({ marked: ['b'], started: [] });
    const pending = (await stateOf(c.cas)).replacements;
    expect(pending).toEqual([
      expect.objectContaining({ node: 'b', downAt: T0 + 60_000, execution: 'replace-node-b-v2', attempts: 1 }),
    ]);
    // The checker logs the failed start; the next tick starts it (here: it had started after all).
    expect(c.lines).toContainEqual(expect.objectContaining({ level: 'error' }));
    c.workflows.fail = new ExecutionExistsError('replace-node-b-v2');
    expect(await c.tick(120_000)).toMatchObject({ started: ['replace-node-b-v2'], saved: true });
    expect((await stateOf(c.cas)).replacements).toEqual([]);
  });

  it(`gives a replacement up after ${REPLACEMENT_START_ATTEMPTS} failed starts, and drops one whose node is no longer DOWN`, async () => {
    const c = await setup();
    c.ec2.instances.set(iid(2), { state: 'stopped' });
    c.workflows.fail = new Error('AccessDeniedException');
    await c.tick(0);
    await c.tick(60_000);
    for (let i = 2; i <= REPLACEMENT_START_ATTEMPTS; i++) await c.tick(60_000 * i);
    expect((await stateOf(c.cas)).replacements).toEqual([]);
    expect(c.lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        msg: expect.stringMatching(/could not be started in 10 attempts; start it by hand/),
      }),
    );

    const d = await setup();
    d.ec2.instances.set(iid(2), { state: 'stopped' });
    d.workflows.fail = new Error('AccessDeniedException');
    await d.tick(0);
    await d.tick(60_000);
    // An operator replaced it meanwhile: b is gone from the ring.
    await d.ring.update((doc) => {
      for (const r of doc.ranges) if (r.owner === 'b') r.owner = 'a';
      doc.nodes = doc.nodes.filter((n) => n.id !== 'b');
    });
    d.workflows.fail = undefined;
    expect(await d.tick(120_000)).toMatchObject({ started: [] });
    expect((await stateOf(d.cas)).replacements).toEqual([]);
  });

  it('never marks the node of a one-node fleet, nor more than one node at once (the checker’s caps)', async () => {
    const one = await setup(['a']);
    one.ec2.instances.set(iid(1), { state: 'stopped' });
    for (const at of [0, 60_000, 120_000]) expect((await one.tick(at)).marked).toEqual([]);
    expect((await stateOf(one.cas)).checker.held).toBe('storm');

    const two = await setup();
    for (const i of [1, 2]) two.ec2.instances.set(iid(i), { state: 'stopped' });
    await two.tick(0);
    expect(await two.tick(60_000)).toMatchObject({ marked: ['a'], held: 'cap' });
  });
});

describe('the heartbeat beside EC2 (withReportHeartbeat): a hung daemon on a healthy instance', () => {
  /** A fleet of four whose instances all run with both checks ok (by EC2), and a writer of their reports. */
  async function heartbeatFleet() {
    const cas = new InMemoryCasStore();
    const ec2 = new FakeEc2();
    const ids = ['a', 'b', 'c', 'd'];
    ids.forEach((_, i) => ec2.instances.set(iid(i + 1), { state: 'running', system: 'ok', instance: 'ok' }));
    const nodes = ids.map((id, i) => ({ id, url: `http://${id}.test:7070`, instance: iid(i + 1) }));
    await new RingStore(cas).create(initialRing(nodes, 2, new Date(T0)));
    const clock = { t: T0 };
    // As on EC2: the report of node `id` is keyed by its role session's aws:userid, `<role id>:<instance id>`.
    const prefix = 'AROAEXAMPLEROLEID0001:';
    const report = async (id: string, at: number) => {
      const doc: NodeStatsReport = { nodeId: id, at: T0 + at, intervalMs: 30_000, stats: {} };
      await cas.put(
        nodeStatsKey(`${prefix}${id}`),
        JSON.stringify(doc),
        (await cas.get(nodeStatsKey(`${prefix}${id}`)))?.etag ?? null,
      );
    };
    const probe = withReportHeartbeat(ec2StatusProbe({ client: ec2.client }), {
      cas,
      reportIdPrefix: prefix,
      now: () => clock.t,
    });
    const ring = new RingStore(cas);
    const tick = (at: number) => {
      clock.t = T0 + at;
      return fleetHealthTick({ cas, probe, environment: 'dev', now: () => clock.t, log: createLogger({ write: () => {} }) });
    };
    return { ids, report, tick, ring };
  }

  it('marks the node whose report went stale (over three intervals) at the second failed tick, naming the silence', async () => {
    const f = await heartbeatFleet();
    for (const id of f.ids) await f.report(id, 0);
    // 60 s: every report is 60 s old, within 90 s: all pass.
    expect(await f.tick(60_000)).toMatchObject({ marked: [] });
    // b's daemon hangs after its report at 0; the others go on reporting.
    for (const at of [100_000, 159_000]) for (const id of ['a', 'c', 'd']) await f.report(id, at);
    expect(await f.tick(100_000)).toMatchObject({ marked: [] });
    expect(await f.tick(159_000)).toMatchObject({ marked: ['b'] });
    const b = (await f.ring.load())!.nodes.find((n) => n.id === 'b')!;
    expect(b.state).toBe('DOWN');
    expect(b.down!.reason).toMatch(
      /healthy by EC2, but the daemon is silent: stats report 159(\.0)? s old \(silent after 90 s\)/,
    );
  });

  it('marks none when every daemon is silent at once (S3 failing, say): the storm rule holds', async () => {
    const f = await heartbeatFleet();
    for (const id of f.ids) await f.report(id, 0);
    expect(await f.tick(100_000)).toMatchObject({ marked: [] });
    expect(await f.tick(160_000)).toMatchObject({ marked: [], held: 'storm' });
  });

  it('takes neither no report nor one dated far ahead (a wrong node clock) as evidence: EC2’s ok stands', async () => {
    const f = await heartbeatFleet();
    for (const id of ['a', 'b']) await f.report(id, 0);
    await f.report('c', 10 * 60_000);
    for (const at of [60_000, 120_000, 180_000]) {
      await f.report('a', at);
      await f.report('b', at);
      expect(await f.tick(at)).toMatchObject({ marked: [] });
    }
  });
});

describe('policyTick runs the health tick', () => {
  const base = (fleetHealth: PolicyTickRuntime['fleetHealth']): PolicyTickRuntime => ({
    cloudWatch: { send: async () => ({}) } as unknown as PolicyTickRuntime['cloudWatch'],
    environment: 'dev',
    fleet: () => undefined,
    ...(fleetHealth ? { fleetHealth } : {}),
  });

  it("once a minute (the execution's first tick), and a failing one does not fail the tick", async () => {
    let runs = 0;
    const rt = base(async () => {
      runs++;
      return { probed: [], marked: [], started: [], saved: false };
    });
    const first = await policyTick({}, rt);
    expect(runs).toBe(1);
    await policyTick({ startedAt: first.startedAt, ticks: first.ticks }, rt);
    expect(runs).toBe(1);
    const failing = base(async () => {
      throw new Error('S3 unavailable');
    });
    await expect(policyTick({}, failing)).resolves.toMatchObject({ ticks: 1 });
  });
});
