import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { policyPartsFromEnv } from '../../core/composition/policy-env.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { ConfigError } from '../../core/errors.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { defaultRules, isEviction } from '../../core/policy/defaults.js';
import { parsePolicyDocument } from '../../core/policy/document.js';
import { BackgroundEvaluator, type EvaluatorActions } from '../../core/policy/evaluator.js';
import type { PolicyState } from '../../core/policy/preview.js';
import { initialRing } from '../../core/ring/document.js';
import { nodeStatsKey, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { FileCasStore, RingStore } from '../../core/ring/store.js';
import type { WorkflowService } from '../../core/workflows/admin-service.js';
import { ScaleLocks } from '../../core/workflows/progress.js';
import { PrelaunchSource, PRELAUNCH_TTL_MS, withPrelaunch } from '../../core/workflows/trigger/prelaunch.js';

/**
 * The loops Strata used to wire up in AWS (the node-fill alarm's response, the eviction schedule, paper 000's scale
 * trigger) as default rules: what the deployment's settings (STRATA_POLICY_DEFAULTS) make of them, that the scheduled
 * evaluator in AWS gets them, and that paper 000's trigger keeps its threshold, mode and per-node lock as a rule.
 */
const AWS = { STRATA_POLICY_EVALUATOR: '1' };
const ids = (env: NodeJS.ProcessEnv, local = false) =>
  policyPartsFromEnv(loadRuntimeEnv(env), { backgroundEvaluator: local }).deployment.rules.map((r) => r.id);
const emptyDoc = parsePolicyDocument({});

describe('default rules from the deployment (STRATA_POLICY_DEFAULTS)', () => {
  it('are in force under the scheduled evaluator in AWS as well as under npm start, and nowhere else', () => {
    const settings = JSON.stringify({ evictEveryHours: 6, prelaunch: { lowRate: 50, highRate: 250 } });
    expect(ids({ ...AWS, STRATA_POLICY_DEFAULTS: settings })).toEqual([
      'default-evict-on-node-fill',
      'default-evict-schedule',
      'default-prelaunch',
      'default-idle-scale-in',
      'deploy-place',
      'deploy-write-around',
    ]);
    // npm start, the variable unset: no periodic sweep and no pre-launch (policy-env.ts says why).
    expect(ids({}, true).filter((id) => id.startsWith('default-'))).toEqual([
      'default-evict-on-node-fill',
      'default-idle-scale-in',
    ]);
    // Without an evaluator no default rule claims to act.
    expect(ids({ STRATA_POLICY_DEFAULTS: settings }).filter((id) => id.startsWith('default-'))).toEqual([]);
  });

  it('makes the eviction schedule a timer rule the evaluator maps to EvictToS3, and none at 0 hours', () => {
    const [rule] = defaultRules(emptyDoc, { evictEveryHours: 12 }).filter((r) => r.id === 'default-evict-schedule');
    expect(rule).toMatchObject({ on: { timer: { everySeconds: 12 * 3600 } }, scope: { namespace: '*' } });
    expect(isEviction(rule!)).toBe(true);
    expect(defaultRules(emptyDoc, { evictEveryHours: 0 }).map((r) => r.id)).not.toContain('default-evict-schedule');
    // Accepted where the evaluator runs no copy or move (AWS without the job runner): the eviction is a workflow.
    expect(() => compilePolicyInput({}, { background: true, transfers: false, defaults: { evictEveryHours: 12 } })).not.toThrow();
  });

  it('answers a full node as workflows.fillAlarmResponse says: EvictToS3, one ScaleOut, or no rule', () => {
    const fill = (nodeFill: 'evict' | 'grow' | 'off') =>
      defaultRules(emptyDoc, { nodeFill, nodeFillPercent: 80 }).find((r) => r.id === 'default-evict-on-node-fill');
    expect(fill('evict')).toMatchObject({
      on: { threshold: { metric: 'nodeFillPercent', op: '>=', value: 80 } },
      do: [{ move: { from: 'warm', to: ['cold'] } }],
    });
    expect(fill('grow')).toMatchObject({ do: [{ grow: { tier: 'warm', nodes: 1 } }] });
    expect(fill('off')).toBeUndefined();
  });

  it("carries paper 000's settings into default-prelaunch, which a rule with its id switches off", () => {
    const prelaunch = { unit: 'keys' as const, capacity: 2500, lowRate: 10, highRate: 100, mode: 'parallel' as const };
    const rule = defaultRules(emptyDoc, { prelaunch }).find((r) => r.id === 'default-prelaunch')!;
    expect(rule).toMatchObject({
      on: { threshold: { tier: 'warm', metric: 'prelaunchFillPercent', op: '>', value: 100, repeatSeconds: 60 } },
      do: [{ grow: { tier: 'warm', nodes: 1 } }],
    });
    expect(rule.description).toMatch(/c = 2500 records, δ_L = 10, δ_H = 100 req\/s.*parallel ScaleOut, locked to that node/);
    const off = { ...rule, enabled: false };
    const compiled = compilePolicyInput({ rules: [off] }, { background: true, defaults: { prelaunch } });
    expect(compiled.rules.map((r) => r.id)).not.toContain('default-prelaunch');
  });

  it('refuses settings it cannot honour, naming the variable', () => {
    const bad = (v: string) => () => loadRuntimeEnv({ STRATA_POLICY_DEFAULTS: v });
    expect(bad('{nope')).toThrow(ConfigError);
    expect(bad('{nope')).toThrow(/STRATA_POLICY_DEFAULTS.*must be JSON/);
    expect(bad('{"evictEveryHours": 48}')).toThrow(/STRATA_POLICY_DEFAULTS.*at most 24/);
    expect(bad('{"prelaunch": {"unit": "keys"}}')).toThrow(/STRATA_POLICY_DEFAULTS.*capacity/);
    expect(bad('{"nodeFill": "maybe"}')).toThrow(/STRATA_POLICY_DEFAULTS/);
  });
});

describe('the evaluator runs the former loops', () => {
  const T0 = Date.parse('2026-11-10T12:00:00Z');
  function evaluator(state: PolicyState, now: { t: number }) {
    const calls: string[] = [];
    const actions: EvaluatorActions = {
      fleetSize: async () => 3,
      scaling: async () => false,
      scaleOut: async (reason) => (calls.push(`scale-out: ${reason}`), 'so-1'),
      scaleIn: async (reason) => (calls.push(`scale-in: ${reason}`), 'si-1'),
      evict: async (reason) => (calls.push(`evict: ${reason}`), 'ev-1'),
      pruneOrderMarkers: async (reason) => (calls.push(`prune-order-markers: ${reason}`), 'om-1'),
    };
    const ev = new BackgroundEvaluator({ actions, state: async () => state, now: () => now.t });
    return { ev, calls };
  }

  it('starts one ScaleOut when the fullest free node passes T, again a minute later while it holds, never below', async () => {
    const policy = compilePolicyInput({}, { background: true, defaults: { nodeFill: 'off', prelaunch: {} } });
    const now = { t: T0 };
    const past = evaluator({ tiers: { warm: { prelaunchFillPercent: 120, requestsPerSecond: 50 } } }, now);
    await past.ev.tick(policy);
    now.t += 30_000;
    await past.ev.tick(policy);
    now.t += 31_000;
    await past.ev.tick(policy);
    expect(past.calls).toEqual([
      'scale-out: policy rule default-prelaunch (1 of 1)',
      'scale-out: policy rule default-prelaunch (1 of 1)',
    ]);
    const below = evaluator({ tiers: { warm: { prelaunchFillPercent: 99, requestsPerSecond: 50 } } }, { t: T0 });
    await below.ev.tick(policy);
    expect(below.calls).toEqual([]);
  });

  it('evicts every evictEveryHours hours, the first period counted from the first tick', async () => {
    const policy = compilePolicyInput({}, { background: true, defaults: { nodeFill: 'off', evictEveryHours: 1 } });
    const now = { t: T0 };
    const { ev, calls } = evaluator({ tiers: {} }, now);
    await ev.tick(policy);
    now.t += 3_599_000;
    await ev.tick(policy);
    expect(calls).toEqual([]);
    now.t += 1_000;
    await ev.tick(policy);
    expect(calls).toEqual(['evict: policy rule default-evict-schedule']);
  });

  it('prunes the order markers weekly (a week-long timer), the first period counted from the first tick, none at 0', async () => {
    const [rule] = defaultRules(emptyDoc, { pruneOrderMarkersEveryHours: 168 }).filter(
      (r) => r.id === 'default-prune-order-markers',
    );
    expect(rule).toMatchObject({ on: { timer: { everySeconds: 604_800 } }, do: [{ maintain: { task: 'prune-order-markers' } }] });
    expect(defaultRules(emptyDoc, {}).map((r) => r.id)).not.toContain('default-prune-order-markers');
    expect(() => defaultRules(emptyDoc, { pruneOrderMarkersEveryHours: 169 })).toThrow(/at most 168/);
    const policy = compilePolicyInput({}, { background: true, defaults: { nodeFill: 'off', pruneOrderMarkersEveryHours: 168 } });
    const now = { t: T0 };
    const { ev, calls } = evaluator({ tiers: {} }, now);
    await ev.tick(policy);
    now.t += 604_799_000;
    await ev.tick(policy);
    expect(calls).toEqual([]);
    now.t += 1_000;
    const firings = await ev.tick(policy);
    expect(calls).toEqual(['prune-order-markers: policy rule default-prune-order-markers']);
    expect(firings).toEqual([
      expect.objectContaining({ rule: 'default-prune-order-markers', response: 'maintain', outcome: 'done' }),
    ]);
  });

  it('refuses maintain in the foreground: it starts a workflow', () => {
    expect(() =>
      compilePolicyInput(
        { rules: [{ id: 'r', on: { action: 'put' }, mode: 'foreground', do: [{ maintain: { task: 'prune-order-markers' } }] }] },
        { background: true },
      ),
    ).toThrow(/maintain runs in the background/);
  });
});

describe("paper 000's measurement for the evaluator (PrelaunchSource)", () => {
  let dir: string;
  let cas: FileCasStore;
  let now: number;
  const T0 = Date.parse('2026-11-10T12:00:00Z');

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'strata-prelaunch-'));
    cas = new FileCasStore(dir);
    now = T0;
    const nodes = ['n1', 'n2'].map((id) => ({ id, url: `http://${id}:1` }));
    await new RingStore(cas).create(initialRing(nodes, 1));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function report(id: string, bytes: number): Promise<void> {
    const stats = { nodeId: id, keys: 10, bytes, capacityBytes: 100_000, uptimeSeconds: 100, ops: { get: { count: 0 } } };
    const body: NodeStatsReport = { nodeId: id, at: now, intervalMs: 30_000, stats };
    const cur = await cas.get(nodeStatsKey(id));
    await cas.put(nodeStatsKey(id), JSON.stringify(body), cur?.etag ?? null);
  }
  const source = (mode: 'incremental' | 'parallel' = 'parallel') =>
    new PrelaunchSource(
      { ring: new RingStore(cas), locks: new ScaleLocks(cas), cas },
      { unit: 'bytes', lowRate: 1, highRate: 1000, mode },
      () => now,
    );

  it("gives the fullest free node's fill as a share of T, skipping a node whose scale-out holds its lock", async () => {
    // Two nodes at rate 0: T = c/2 + δ_H·‖N‖ = 50,000 + 2,000 = 52,000 bytes.
    await report('n1', 78_000);
    await report('n2', 26_000);
    expect(await source().fill()).toEqual({ percent: 150, node: 'n1' });
    expect(await new ScaleLocks(cas).acquire('n1', 'exec-1')).toBe(true);
    expect(await source().fill()).toEqual({ percent: 50, node: 'n2' });
  });

  it("makes the evaluator's ScaleOut the trigger's: that node (its lock), the trigger's mode, and why", async () => {
    await report('n1', 78_000);
    await report('n2', 26_000);
    const s = source('parallel');
    const started: { workflow: string; input: Record<string, unknown> }[] = [];
    const inner: WorkflowService = {
      start: async (workflow, input) => (started.push({ workflow, input }), { execution: 'x' }) as never,
      describe: async () => undefined,
      list: async () => [],
    };
    const wf = withPrelaunch(inner, s);
    // Nothing measured yet: the ScaleOut goes through unchanged.
    await wf.start('scale-out', { reason: 'policy rule default-prelaunch (1 of 1)' });
    await s.fill();
    await wf.start('scale-out', { reason: 'policy rule default-prelaunch (1 of 1)' });
    await wf.start('evict-to-s3', {});
    now += PRELAUNCH_TTL_MS;
    await wf.start('scale-out', { reason: 'later' });
    expect(started).toEqual([
      { workflow: 'scale-out', input: { reason: 'policy rule default-prelaunch (1 of 1)' } },
      {
        workflow: 'scale-out',
        input: {
          reason: expect.stringMatching(/^policy rule default-prelaunch \(1 of 1\): prelaunch: node n1 passed T = 52000/),
          mode: 'parallel',
          forNode: 'n1',
        },
      },
      { workflow: 'evict-to-s3', input: {} },
      // A measurement older than PRELAUNCH_TTL_MS names no node any more.
      { workflow: 'scale-out', input: { reason: 'later' } },
    ]);
  });

  it('leaves the metric unknown when no node could be measured', async () => {
    expect(await source().fill()).toBeUndefined();
  });
});
