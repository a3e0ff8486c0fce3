import { ElasticityEngine, type ElasticCluster, type EngineOptions } from '../../bench/elasticity/engine.js';
import { dueAt, planInsert, share, unionLength, type PolicyConfig } from '../../bench/elasticity/policy.js';

/** The bench's defaults: the paper's §4.4 experiment scaled (R = δL, δH = 0.05·c). T = 1250, 1375, 1500, ... */
const PARAMS = { capacity: 2500, lowRate: 100, highRate: 125 };
const base: PolicyConfig = { variant: 'on-overflow', params: PARAMS, rate: 100 };
const spec: PolicyConfig = { variant: 'speculative', params: PARAMS, rate: 100 };

describe('elasticity bench: Algorithm 1 before an insert (planInsert)', () => {
  const state = (fills: Record<string, number>, inFlight: string[] = [], backgroundInFlight = 0) => ({
    loads: Object.entries(fills).map(([id, fill]) => ({ id, fill })),
    inFlight: new Set(inFlight),
    backgroundInFlight,
  });

  it('baseline: nothing until the node is full; then one scale-out for it and the insert waits', () => {
    expect(planInsert(base, state({ n1: 2499 }), 'n1')).toEqual({ start: [] });
    expect(planInsert(base, state({ n1: 2500 }), 'n1')).toEqual({ start: [{ node: 'n1', reason: 'overflow' }], waitFor: 'n1' });
    // A scale-out for it is already running: wait for that one, start none.
    expect(planInsert(base, state({ n1: 2500 }, ['n1']), 'n1')).toEqual({ start: [], waitFor: 'n1' });
    // Another node being full does not concern an insert that goes elsewhere.
    expect(planInsert(base, state({ n1: 2500, n2: 10 }), 'n2')).toEqual({ start: [] });
  });

  it('speculative: a node past T gets a background pre-launch; below T nothing', () => {
    expect(planInsert(spec, state({ n1: 1250 }), 'n1')).toEqual({ start: [], threshold: 1250 });
    expect(planInsert(spec, state({ n1: 1251 }), 'n1')).toEqual({
      start: [{ node: 'n1', reason: 'prelaunch' }],
      threshold: 1250,
    });
    // T rises with the fleet: 1375 for two nodes.
    expect(planInsert(spec, state({ n1: 1300, n2: 1300 }), 'n1').start).toEqual([]);
  });

  it('speculative: at most one scale-out per node, and at most maxBackground pre-launches at a time', () => {
    // n1 is in flight: the next fullest node past T gets the launch.
    expect(planInsert(spec, state({ n1: 1600, n2: 1550, n3: 100 }, ['n1'], 1), 'n3').start).toEqual([
      { node: 'n2', reason: 'prelaunch' },
    ]);
    // Two background launches running: no third, even though n3 is past T.
    expect(planInsert(spec, state({ n1: 1600, n2: 1550, n3: 1520 }, ['n1', 'n2'], 2), 'n3').start).toEqual([]);
    expect(
      planInsert({ ...spec, maxBackground: 3 }, state({ n1: 1600, n2: 1550, n3: 1520 }, ['n1', 'n2'], 2), 'n3').start,
    ).toEqual([{ node: 'n3', reason: 'prelaunch' }]);
  });

  it('speculative: an overflow with nothing in flight starts a scale-out at once (thread t3), past the background budget', () => {
    const p = planInsert(spec, state({ n1: 2500, n2: 1600, n3: 1600 }, ['n2', 'n3'], 2), 'n1');
    expect(p.start).toEqual([{ node: 'n1', reason: 'overflow' }]);
    expect(p.waitFor).toBe('n1');
    // The overflowing node is not pre-launched for a second time by the same decision.
    const q = planInsert(spec, state({ n1: 2500, n2: 1600 }), 'n1');
    expect(q.start).toEqual([
      { node: 'n1', reason: 'overflow' },
      { node: 'n2', reason: 'prelaunch' },
    ]);
  });
});

describe('elasticity bench: time accounting', () => {
  it('unionLength counts overlaps once and clips to the window', () => {
    expect(unionLength([])).toBe(0);
    expect(unionLength([{ start: 0, end: 10 }])).toBe(10);
    expect(
      unionLength([
        { start: 0, end: 10 },
        { start: 5, end: 15 },
        { start: 20, end: 25 },
      ]),
    ).toBe(20);
    expect(
      unionLength([
        { start: 20, end: 25 },
        { start: 0, end: 10 },
        { start: 2, end: 3 },
      ]),
    ).toBe(15);
    expect(
      unionLength([
        { start: 0, end: 10 },
        { start: 10, end: 12 },
      ]),
    ).toBe(12);
    expect(
      unionLength(
        [
          { start: -5, end: 5 },
          { start: 8, end: 30 },
        ],
        0,
        20,
      ),
    ).toBe(17);
    expect(unionLength([{ start: 5, end: 3 }])).toBe(0);
  });

  it('the stream resumes at rate R after a block (no catch-up burst)', () => {
    expect(dueAt(1000, 0, 100, 0)).toBe(1000);
    expect(dueAt(1000, 250, 100, 0)).toBe(3500);
    expect(dueAt(1000, 250, 100, 5200)).toBe(8700);
    expect(share(5, 20)).toBe(0.25);
    expect(share(5, 0)).toBe(0);
  });
});

/**
 * Virtual time: sleep() registers a timer; the clock jumps to the earliest timer once every promise chain has
 * settled (a setImmediate turn drains the microtask queue). Runs minutes of the bench in milliseconds,
 * deterministically.
 */
class VirtualClock {
  t = 0;
  private seq = 0;
  private timers: { at: number; seq: number; resolve: () => void }[] = [];
  readonly now = () => this.t;
  readonly sleep = (ms: number) =>
    new Promise<void>((resolve) => this.timers.push({ at: this.t + Math.max(0, ms), seq: this.seq++, resolve }));

  async run<T>(p: Promise<T>): Promise<T> {
    let settled = false;
    p.then(
      () => (settled = true),
      () => (settled = true),
    );
    while (!settled) {
      await new Promise((r) => setImmediate(r));
      if (settled) break;
      if (this.timers.length === 0) throw new Error('deadlock: nothing scheduled and the run has not finished');
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers.shift()!;
      this.t = next.at;
      next.resolve();
    }
    return p;
  }
}

function position(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** An in-memory ring of nodes over [0, 2^32) with the bench's split: the fullest range cut at its median key. */
class FakeCluster implements ElasticCluster {
  ranges: { start: number; owner: string }[] = [{ start: 0, owner: 'n1' }];
  private ring = ['n1'];
  readonly stored = new Map<string, string>();
  maxFill = 0;
  private seq = 1;
  private readonly splitting = new Set<string>();
  private listener: () => void = () => {};

  constructor(
    private readonly clock: VirtualClock,
    private readonly o: { launchMs: number; migrationMs: number; insertMs: number; capacity: number },
  ) {}

  nodes(): string[] {
    return [...this.ring];
  }

  private indexOf(pos: number): number {
    let i = 0;
    while (i + 1 < this.ranges.length && this.ranges[i + 1]!.start <= pos) i++;
    return i;
  }

  ownerOf(key: string): string {
    return this.ranges[this.indexOf(position(key))]!.owner;
  }

  private countOn(node: string): number {
    let n = 0;
    for (const owner of this.stored.values()) if (owner === node) n++;
    return n;
  }

  async insert(key: string): Promise<void> {
    await this.clock.sleep(this.o.insertMs);
    const owner = this.ownerOf(key);
    this.stored.set(key, owner);
    this.maxFill = Math.max(this.maxFill, this.countOn(owner));
  }

  async launch(): Promise<{ id: string; allocationMs: number; bootMs: number }> {
    await this.clock.sleep(this.o.launchMs);
    return { id: `n${++this.seq}`, allocationMs: this.o.launchMs, bootMs: 1 };
  }

  async split(source: string, target: string): Promise<{ movedKeys: number; migrationMs: number }> {
    if (this.splitting.has(source)) throw new Error(`two splits of ${source} at once`);
    this.splitting.add(source);
    try {
      await this.clock.sleep(this.o.migrationMs);
      const byRange = new Map<number, number[]>();
      for (const [key, owner] of this.stored) {
        if (owner !== source) continue;
        const i = this.indexOf(position(key));
        byRange.set(i, [...(byRange.get(i) ?? []), position(key)]);
      }
      const [index, positions] = [...byRange].sort((a, b) => b[1].length - a[1].length)[0]!;
      positions.sort((a, b) => a - b);
      const cut = positions[Math.floor(positions.length / 2)]!;
      const range = this.ranges[index]!;
      this.ranges.splice(index, 1, { start: range.start, owner: target }, { start: cut, owner: source });
      this.ring.push(target);
      let moved = 0;
      for (const [key, owner] of this.stored) {
        if (owner === source && this.ownerOf(key) === target) {
          this.stored.set(key, target);
          moved++;
        }
      }
      this.listener();
      return { movedKeys: moved, migrationMs: this.o.migrationMs };
    } finally {
      this.splitting.delete(source);
    }
  }

  onRingChange(listener: () => void): void {
    this.listener = listener;
  }
}

async function simulate(
  cfg: PolicyConfig,
  extra: Partial<EngineOptions> = {},
  timing = { launchMs: 5000, migrationMs: 200, insertMs: 2 },
) {
  const clock = new VirtualClock();
  const cluster = new FakeCluster(clock, { ...timing, capacity: cfg.params.capacity });
  const engine = new ElasticityEngine(cluster, {
    ...cfg,
    inserts: 9000,
    keyOf: (i) => `key:${i}`,
    now: clock.now,
    sleep: clock.sleep,
    ...extra,
  });
  const result = await clock.run(engine.run());
  return { result, cluster };
}

describe('elasticity bench: the engine on a simulated cluster (virtual time)', () => {
  it('baseline: every split is an overflow and blocks the stream for its launch plus migration', async () => {
    const { result: r, cluster } = await simulate(base);
    expect(r.errors).toEqual([]);
    expect(r.acked).toBe(9000);
    expect(cluster.stored.size).toBe(9000);
    expect(cluster.maxFill).toBeLessThanOrEqual(2500);
    expect(r.prelaunches).toBe(0);
    expect(r.splits).toBe(r.overflowScaleOuts);
    expect(r.splits).toBeGreaterThanOrEqual(3);
    // Head-of-line blocking: the stream waits out each scale-out entirely, one at a time.
    expect(r.blockedMs).toBe(r.splits * 5200);
    expect(r.blockedInserts).toBe(r.splits);
    expect(r.totalMs).toBeGreaterThanOrEqual(90_000 + r.blockedMs - 10);
    expect(r.totalMs).toBeLessThan(90_000 + r.blockedMs + 100);
    expect(r.scalingShare).toBeCloseTo(r.blockedMs / r.totalMs, 10);
    expect(r.nodesAtEnd).toBe(1 + r.splits);
    expect(r.keysMoved).toBeGreaterThan(r.splits * 1000);
    expect(Object.values(r.fills).reduce((a, b) => a + b, 0)).toBe(9000);
  });

  it('speculative pre-launch: the same stream waits less (here: not at all) at the cost of more nodes', async () => {
    const b = (await simulate(base)).result;
    const { result: s, cluster } = await simulate(spec);
    expect(s.errors).toEqual([]);
    expect(cluster.stored.size).toBe(9000);
    expect(cluster.maxFill).toBeLessThanOrEqual(2500);
    expect(s.prelaunches).toBeGreaterThan(0);
    expect(s.overflowScaleOuts).toBe(0);
    expect(s.blockedMs).toBe(0);
    expect(b.blockedMs).toBeGreaterThan(0);
    expect(s.scalingShare).toBeLessThan(b.scalingShare);
    expect(s.insertsPerSec).toBeGreaterThan(b.insertsPerSec);
    expect(s.nodesAtStreamEnd).toBeGreaterThan(b.nodesAtStreamEnd);
    // Pre-launches overlap the stream: scaling was busy for a good part of the run without blocking it.
    expect(s.scalingBusyMs).toBeGreaterThan(s.blockedMs);
    // Never more than two background launches at once.
    const events = s.scaleOuts
      .filter((x) => x.reason === 'prelaunch')
      .flatMap((x) => [
        { t: x.startedAtMs, d: 1 },
        { t: x.doneAtMs ?? Number.POSITIVE_INFINITY, d: -1 },
      ]);
    events.sort((a, b) => a.t - b.t || a.d - b.d);
    let running = 0;
    let most = 0;
    for (const e of events) most = Math.max(most, (running += e.d));
    expect(most).toBeLessThanOrEqual(2);
  });

  it('a launch slower than the fill time makes speculation block too, but never longer than the baseline', async () => {
    const slow = { launchMs: 30_000, migrationMs: 200, insertMs: 2 };
    const b = (await simulate(base, {}, slow)).result;
    const s = (await simulate(spec, {}, slow)).result;
    expect(s.errors).toEqual([]);
    expect(s.blockedMs).toBeGreaterThan(0);
    expect(s.blockedMs).toBeLessThan(b.blockedMs);
  });

  it("splitAt 'overflow': a pre-launched node waits idle until its source fills, then only the migration blocks", async () => {
    const { result: r, cluster } = await simulate(spec, { splitAt: 'overflow' });
    expect(r.errors).toEqual([]);
    expect(cluster.maxFill).toBeLessThanOrEqual(2500);
    const used = r.scaleOuts.filter((x) => x.reason === 'prelaunch' && !x.idle);
    expect(used.length).toBeGreaterThan(0);
    // Every pre-launched split started when its source was full, so it blocked for the migration alone.
    for (const x of used) expect(x.blockedMs).toBeLessThanOrEqual(200);
    expect(r.nodesAtEnd).toBe(1 + r.splits + r.idleNodes);
    expect(r.nodesAtStreamEnd).toBeLessThanOrEqual((await simulate(spec)).result.nodesAtStreamEnd);
  });
});
