/**
 * The coordinator of the elasticity benchmark: a steady insert stream (paper 000's experiment) over a cluster
 * that can launch nodes and split one node's fullest range onto another. The cluster is an interface, so the
 * same engine drives real cache-node processes (bench/elasticity/real-cluster.ts) and the in-memory fake of the
 * unit test.
 *
 * The stream is one dispatcher, like the paper's main thread: insert i is due at start + i/R + (time blocked so
 * far). Before each insert the dispatcher applies Algorithm 1 ({@link planInsert}); when the key's node is full
 * it stops and waits for that node's scale-out (this wait is the "scaling overhead"), then routes the key again.
 * Inserts already dispatched keep running (up to `maxInFlightInserts` at a time), so a slow insert does not
 * stall the schedule.
 *
 * A node's fill is the number of dispatched (and not failed) keys its ranges own under the current ring,
 * counted by the coordinator (as the paper's coordinator knows ‖n‖), recounted whenever the ring changes.
 */
import { planInsert, share, unionLength, dueAt, type PolicyConfig, type ScaleStart } from './policy.js';

export interface ElasticCluster {
  /** Ids of the nodes in the ring. */
  nodes(): string[];
  /** The node that owns `key` under the current ring. */
  ownerOf(key: string): string;
  /** Writes `key`; resolves once acknowledged. */
  insert(key: string): Promise<void>;
  /** Provisions a node; resolves once it is available (allocation time, modelled or real). */
  launch(): Promise<{ id: string; allocationMs: number; bootMs: number }>;
  /** Moves the lower half of `source`'s fullest range (cut at its median key) to `target`. */
  split(source: string, target: string): Promise<{ movedKeys: number; migrationMs: number }>;
  /** Called after every ring change (ownership moved, node added). */
  onRingChange(listener: () => void): void;
}

export interface EngineOptions extends PolicyConfig {
  /** N: how many inserts the stream makes. */
  inserts: number;
  keyOf(i: number): string;
  /** Inserts in flight at most. @default 32 */
  maxInFlightInserts?: number;
  /**
   * When a pre-launched node is used: `up`, as soon as it has booted (the paper: "eagerly migrates data from the
   * fullest node once the new instance is booted"); `overflow`, only when the node it was launched for fills
   * up (the split then waits for no allocation). @default 'up'
   */
  splitAt?: 'up' | 'overflow';
  /** Progress lines. */
  log?: (line: string) => void;
  /** Clock and timer (a virtual pair in the unit test). @default performance.now, setTimeout */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface ScaleOutRecord {
  source: string;
  target?: string;
  reason: ScaleStart['reason'];
  /** Times relative to the start of the stream, ms. */
  startedAtMs: number;
  fillAtStart: number;
  nodesAtStart: number;
  threshold?: number;
  allocationMs?: number;
  bootMs?: number;
  splitStartedAtMs?: number;
  doneAtMs?: number;
  migrationMs?: number;
  movedKeys?: number;
  /** The stream waited this long for this scale-out. */
  blockedMs: number;
  /** Launched, but the stream ended before it was needed (splitAt: overflow). */
  idle?: boolean;
  error?: string;
}

export interface EngineResult {
  variant: PolicyConfig['variant'];
  inserts: number;
  acked: number;
  failedInserts: number;
  /** From the first insert's due time to the last insert's acknowledgement. */
  totalMs: number;
  /** Time the stream waited on full nodes (the scaling overhead). */
  blockedMs: number;
  /** blockedMs / totalMs. */
  scalingShare: number;
  /** Inserts that had to wait, and the longest wait. */
  blockedInserts: number;
  maxBlockMs: number;
  /** Time at least one scale-out (launch or migration) was running, in the stream's window. */
  scalingBusyMs: number;
  scalingBusyShare: number;
  scaleOuts: ScaleOutRecord[];
  prelaunches: number;
  overflowScaleOuts: number;
  splits: number;
  keysMoved: number;
  allocationMsTotal: number;
  migrationMsTotal: number;
  nodesAtStreamEnd: number;
  /** Nodes in the ring or launched (booting, idle) when the stream ended. */
  nodesProvisionedAtStreamEnd: number;
  /** Nodes running at the end: the ring once the scale-outs running at the end finished, plus idle pre-launched ones. */
  nodesAtEnd: number;
  /** Pre-launched nodes that were never split onto (splitAt: overflow). */
  idleNodes: number;
  /** Scale-outs still running when the stream ended (finished afterwards, outside totalMs). */
  scaleOutsAfterStream: number;
  insertsPerSec: number;
  /** Fill (records) of each node at the end. */
  fills: Record<string, number>;
  errors: string[];
  ackedKeys: string[];
}

interface InFlight {
  rec: ScaleOutRecord;
  done: Promise<void>;
  /** splitAt 'overflow': resolves when the source overflows (true) or the stream ends (false). */
  overflowed?: (go: boolean) => void;
  launched: boolean;
}

const realSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class ElasticityEngine {
  private readonly keys: string[] = [];
  private readonly failed = new Set<string>();
  private fills = new Map<string, number>();
  private readonly inFlight = new Map<string, InFlight>();
  private readonly records: ScaleOutRecord[] = [];
  private readonly errors: string[] = [];
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private t0 = 0;

  constructor(
    private readonly cluster: ElasticCluster,
    private readonly o: EngineOptions,
  ) {
    this.now = o.now ?? (() => performance.now());
    this.sleep = o.sleep ?? realSleep;
    cluster.onRingChange(() => this.recount());
  }

  private log(line: string): void {
    this.o.log?.(`  [${((this.now() - this.t0) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  }

  /** Fill of every ring node from the keys dispatched so far, under the current ring. */
  private recount(): void {
    const fills = new Map<string, number>(this.cluster.nodes().map((id) => [id, 0]));
    for (const k of this.keys) {
      if (this.failed.has(k)) continue;
      const owner = this.cluster.ownerOf(k);
      fills.set(owner, (fills.get(owner) ?? 0) + 1);
    }
    this.fills = fills;
  }

  private state() {
    const nodes = this.cluster.nodes();
    let background = 0;
    for (const f of this.inFlight.values()) if (f.rec.reason === 'prelaunch') background++;
    return {
      loads: nodes.map((id) => ({ id, fill: this.fills.get(id) ?? 0 })),
      inFlight: new Set(this.inFlight.keys()),
      backgroundInFlight: background,
    };
  }

  private startScaleOut(s: ScaleStart, threshold: number | undefined): void {
    const rec: ScaleOutRecord = {
      source: s.node,
      reason: s.reason,
      startedAtMs: this.now() - this.t0,
      fillAtStart: this.fills.get(s.node) ?? 0,
      nodesAtStart: this.cluster.nodes().length,
      blockedMs: 0,
      ...(threshold !== undefined ? { threshold: Math.round(threshold) } : {}),
    };
    this.records.push(rec);
    const entry: InFlight = { rec, done: Promise.resolve(), launched: false };
    const overflowed =
      this.o.splitAt === 'overflow' && s.reason === 'prelaunch' ? new Promise<boolean>((r) => (entry.overflowed = r)) : undefined;
    this.log(
      `${s.reason === 'prelaunch' ? 'pre-launch' : 'overflow: launch'} for ${s.node} (fill ${rec.fillAtStart}${threshold !== undefined ? `, T ${Math.round(threshold)}` : ''}, ${rec.nodesAtStart} nodes)`,
    );
    entry.done = (async () => {
      const launched = await this.cluster.launch();
      entry.launched = true;
      rec.target = launched.id;
      rec.allocationMs = Math.round(launched.allocationMs);
      rec.bootMs = Math.round(launched.bootMs);
      if (overflowed && !(await overflowed)) {
        rec.idle = true;
        this.log(
          `${launched.id} up after ${(launched.allocationMs / 1000).toFixed(1)} s, not needed before the stream ended (idle)`,
        );
        return;
      }
      rec.splitStartedAtMs = this.now() - this.t0;
      const m = await this.cluster.split(s.node, launched.id);
      rec.migrationMs = Math.round(m.migrationMs);
      rec.movedKeys = m.movedKeys;
      rec.doneAtMs = this.now() - this.t0;
      this.recount();
      this.log(
        `split ${s.node} -> ${launched.id}: allocation ${(launched.allocationMs / 1000).toFixed(2)} s (boot ${(launched.bootMs / 1000).toFixed(2)} s), migration ${(m.migrationMs / 1000).toFixed(2)} s, ${m.movedKeys} keys moved; ${s.node} now ${this.fills.get(s.node) ?? 0}`,
      );
    })()
      .catch((e: unknown) => {
        rec.error = e instanceof Error ? e.message : String(e);
        this.errors.push(`scale-out of ${s.node}: ${rec.error}`);
        this.log(`scale-out of ${s.node} failed: ${rec.error}`);
      })
      .finally(() => {
        this.inFlight.delete(s.node);
      });
    this.inFlight.set(s.node, entry);
  }

  private dispatch(key: string, target: string, pending: Set<Promise<void>>): void {
    this.keys.push(key);
    this.fills.set(target, (this.fills.get(target) ?? 0) + 1);
    const p: Promise<void> = this.cluster
      .insert(key)
      .catch((e: unknown) => {
        this.failed.add(key);
        this.recount();
        if (this.errors.length < 50) this.errors.push(`insert ${key}: ${e instanceof Error ? e.message : String(e)}`);
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  }

  async run(): Promise<EngineResult> {
    const { inserts, rate } = this.o;
    const maxInFlight = this.o.maxInFlightInserts ?? 32;
    const pending = new Set<Promise<void>>();
    const blocks: { start: number; end: number }[] = [];
    let blocked = 0;
    this.recount();
    this.t0 = this.now();
    for (let i = 0; i < inserts; i++) {
      const wait = dueAt(this.t0, i, rate, blocked) - this.now();
      if (wait > 0) await this.sleep(wait);
      while (pending.size >= maxInFlight) await Promise.race(pending);
      const key = this.o.keyOf(i);
      for (let attempt = 0; ; attempt++) {
        const target = this.cluster.ownerOf(key);
        const plan = planInsert(this.o, this.state(), target);
        for (const s of plan.start) this.startScaleOut(s, plan.threshold);
        const waitFor = plan.waitFor === undefined ? undefined : this.inFlight.get(plan.waitFor);
        if (!waitFor) {
          this.dispatch(key, target, pending);
          break;
        }
        if (attempt >= 3) {
          // Three scale-outs did not make room (they failed): insert anyway rather than stall the run.
          this.errors.push(`insert ${key}: ${target} still full after ${attempt} scale-outs`);
          this.dispatch(key, target, pending);
          break;
        }
        waitFor.overflowed?.(true);
        const start = this.now();
        if (attempt === 0)
          this.log(
            `${target} full (${this.fills.get(target)}): the stream waits for its ${waitFor.launched ? 'split' : 'launch and split'}`,
          );
        await waitFor.done;
        const end = this.now();
        blocked += end - start;
        waitFor.rec.blockedMs += end - start;
        blocks.push({ start, end });
      }
    }
    await Promise.all(pending);
    const end = this.now();
    const nodesAtStreamEnd = this.cluster.nodes().length;
    const launching = [...this.inFlight.values()].filter(
      (f) => !f.rec.target || !this.cluster.nodes().includes(f.rec.target),
    ).length;
    const afterStream = this.inFlight.size;
    if (afterStream) this.log(`stream done; waiting for ${afterStream} scale-out(s) still running`);
    for (const f of this.inFlight.values()) f.overflowed?.(false);
    await Promise.all([...this.inFlight.values()].map((f) => f.done));
    this.recount();

    const totalMs = end - this.t0;
    const busy = this.records.map((r) => ({
      start: this.t0 + r.startedAtMs,
      end: r.doneAtMs !== undefined ? this.t0 + r.doneAtMs : end,
    }));
    const scalingBusyMs = unionLength(busy, this.t0, end);
    const done = this.records.filter((r) => r.movedKeys !== undefined);
    const acked = this.keys.filter((k) => !this.failed.has(k));
    return {
      variant: this.o.variant,
      inserts,
      acked: acked.length,
      failedInserts: this.failed.size,
      totalMs: Math.round(totalMs),
      blockedMs: Math.round(blocked),
      scalingShare: share(blocked, totalMs),
      blockedInserts: blocks.length,
      maxBlockMs: Math.round(Math.max(0, ...blocks.map((b) => b.end - b.start))),
      scalingBusyMs: Math.round(scalingBusyMs),
      scalingBusyShare: share(scalingBusyMs, totalMs),
      scaleOuts: this.records.map((r) => ({
        ...r,
        blockedMs: Math.round(r.blockedMs),
        startedAtMs: Math.round(r.startedAtMs),
        ...(r.splitStartedAtMs !== undefined ? { splitStartedAtMs: Math.round(r.splitStartedAtMs) } : {}),
        ...(r.doneAtMs !== undefined ? { doneAtMs: Math.round(r.doneAtMs) } : {}),
      })),
      prelaunches: this.records.filter((r) => r.reason === 'prelaunch').length,
      overflowScaleOuts: this.records.filter((r) => r.reason === 'overflow').length,
      splits: done.length,
      keysMoved: done.reduce((a, r) => a + (r.movedKeys ?? 0), 0),
      allocationMsTotal: this.records.reduce((a, r) => a + (r.allocationMs ?? 0), 0),
      migrationMsTotal: done.reduce((a, r) => a + (r.migrationMs ?? 0), 0),
      nodesAtStreamEnd,
      nodesProvisionedAtStreamEnd: nodesAtStreamEnd + launching,
      nodesAtEnd: this.cluster.nodes().length + this.records.filter((r) => r.idle).length,
      idleNodes: this.records.filter((r) => r.idle).length,
      scaleOutsAfterStream: afterStream,
      insertsPerSec: share(acked.length, totalMs / 1000),
      fills: Object.fromEntries(this.fills),
      errors: [...this.errors],
      ackedKeys: acked,
    };
  }
}
