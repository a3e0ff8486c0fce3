/**
 * The elasticity benchmark's cluster of real cache nodes: local `cachenode` processes (LocalFleet), the ring in
 * an in-memory CAS store, inserts through the real WarmTier (routing, shadow writes during migrations, stale-route
 * recovery), splits through the real Migrator (planScaleOut from one source: its fullest range cut at the median
 * key, run in incremental mode; the source drops the moved span after a grace period).
 *
 * Allocation time: a local process answers in ~0.3-1 s where an EC2 instance takes tens of seconds to minutes
 * (paper 000). A launch therefore counts as done only after `launchDelayMs` (modelled allocation time) or the
 * real boot, whichever is later; the real boot time is reported beside it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HybridLogicalClock } from '../../core/model/hlc.js';
import type { Entry } from '../../core/model/entry.js';
import { initialRing } from '../../core/ring/document.js';
import { ringHash } from '../../core/ring/hash.js';
import { InMemoryCasStore, RingStore } from '../../core/ring/store.js';
import { RingRouter, RingView } from '../../core/ring/view.js';
import { WarmTier } from '../../core/tiers/warm-tier.js';
import { LocalFleet } from '../../core/nodes/local-fleet.js';
import { Migrator } from '../../core/nodes/migration.js';
import { NodeClient } from '../../core/nodes/node-client.js';
import type { ElasticCluster } from './engine.js';

export interface RealClusterOptions {
  secret: string;
  /** Modelled allocation time of a node (EC2 instance start), ms. */
  launchDelayMs: number;
  valueBytes: number;
  /** How long a source keeps a moved span before dropping it, ms. @default 1000 */
  graceMs?: number;
  /** Namespace of the inserted keys. @default 'elastic' */
  ns?: string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class RealCluster implements ElasticCluster {
  private readonly dir: string;
  private readonly fleet: LocalFleet;
  private readonly client: NodeClient;
  private readonly cas = new InMemoryCasStore();
  private readonly store = new RingStore(this.cas);
  private readonly view: RingView;
  private readonly warm: WarmTier;
  private readonly migrator: Migrator;
  private readonly clock = new HybridLogicalClock();
  private readonly ns: string;
  private router: RingRouter | undefined;
  private readonly listeners: (() => void)[] = [];
  private readonly cleanups: Promise<void>[] = [];
  private readonly warnings: string[] = [];
  private readonly urls = new Map<string, string>();
  private seq = 1;
  /** Real boot time of every node launched (ms), n1 included. */
  readonly bootMs: number[] = [];

  private constructor(private readonly o: RealClusterOptions) {
    this.ns = o.ns ?? 'elastic';
    this.dir = mkdtempSync(join(tmpdir(), 'strata-bench-elastic-'));
    // Capacity is counted in records by the coordinator (as in the paper); the node's byte budget only has to be
    // out of the way.
    this.fleet = new LocalFleet({ rootDir: join(this.dir, 'nodes'), secret: o.secret, capacityBytes: 256 * 1024 ** 2 });
    this.client = new NodeClient({ secret: o.secret, timeoutMs: 5000 });
    this.view = new RingView({ store: this.store, refreshIntervalMs: 1000 });
    this.warm = new WarmTier({ ring: this.view, client: this.client });
    this.migrator = new Migrator({
      ring: this.store,
      docs: this.cas,
      client: this.client,
      onEvent: (e) => {
        if (e.type === 'published' || e.type === 'finished') void this.refresh();
      },
      onWarning: (m) => this.warnings.push(m),
    });
  }

  /** One node (n1) owning the whole ring. */
  static async start(o: RealClusterOptions): Promise<RealCluster> {
    const c = new RealCluster(o);
    try {
      const n1 = await c.fleet.launch('n1');
      c.bootMs.push(n1.allocationMs);
      const ring = await c.store.create(initialRing([{ id: n1.nodeId, url: n1.url, instance: n1.instance }], 1));
      await c.client.pushRing(n1.url, ring);
      await c.refresh();
      return c;
    } catch (e) {
      await c.close();
      throw e;
    }
  }

  private async refresh(): Promise<void> {
    const doc = await this.store.load();
    if (!doc || (this.router && doc.version <= this.router.version)) return;
    this.router = new RingRouter(doc);
    this.view.adopt(doc);
    for (const l of this.listeners) l();
  }

  private route(key: string) {
    return this.router!.route(ringHash(this.ns, key));
  }

  nodes(): string[] {
    return this.router!.doc.nodes.map((n) => n.id);
  }

  ownerOf(key: string): string {
    return this.route(key).owner.id;
  }

  /** The value of `key`: its name repeated, so a read-back can be checked. */
  valueOf(key: string): Buffer {
    return Buffer.alloc(this.o.valueBytes, `${key};`);
  }

  private entry(key: string): Entry {
    const value = this.valueOf(key);
    return { header: { version: this.clock.next(), expiresAt: null, size: value.length, hash: '', tags: [], flags: {} }, value };
  }

  async insert(key: string): Promise<void> {
    const out = await this.warm.put(this.ns, key, this.entry(key));
    if (!out.applied) throw new Error(`put of ${key} not applied (${out.full ? 'node full' : `holds version ${out.current}`})`);
  }

  async launch(): Promise<{ id: string; allocationMs: number; bootMs: number }> {
    const id = `n${++this.seq}`;
    const t0 = performance.now();
    const [node] = await Promise.all([this.fleet.launch(id), sleep(this.o.launchDelayMs)]);
    this.bootMs.push(node.allocationMs);
    this.urls.set(id, node.url);
    return { id, allocationMs: performance.now() - t0, bootMs: node.allocationMs };
  }

  async split(source: string, target: string): Promise<{ movedKeys: number; migrationMs: number }> {
    const url = this.urls.get(target);
    if (!url) throw new Error(`node '${target}' was not launched here`);
    const t0 = performance.now();
    const plan = await this.migrator.planScaleOut({ target: { id: target, url }, mode: 'incremental', sources: [source] });
    await this.refresh();
    const done = await this.migrator.run(plan.id, { graceMs: this.o.graceMs ?? 1000 });
    if (done.state !== 'done') throw new Error(`scale-out plan ${plan.id} ended ${done.state}`);
    await this.refresh();
    const migrationMs = performance.now() - t0;
    let movedKeys = 0;
    for (const id of done.sessions) {
      const s = await this.migrator.session(id);
      movedKeys += s.copied.keys;
      if (s.state === 'published')
        this.cleanups.push(
          sleep(this.o.graceMs ?? 1000)
            .then(() => this.migrator.cleanup(id, { force: true }))
            .then(() => undefined),
        );
    }
    return { movedKeys, migrationMs };
  }

  onRingChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /**
   * After the run: every acknowledged key must read back with its value, and (once the sources dropped the
   * spans they handed over) the nodes must hold exactly the acknowledged keys.
   */
  async verify(
    acked: string[],
  ): Promise<{ missing: number; wrongValue: number; keysOnNodes: number; perNode: Record<string, number>; examples: string[] }> {
    await Promise.all(this.cleanups);
    let missing = 0;
    let wrongValue = 0;
    const examples: string[] = [];
    for (let i = 0; i < acked.length; i += 500) {
      const keys = acked.slice(i, i + 500);
      const got = await this.warm.getMany(this.ns, keys);
      got.forEach((e, j) => {
        const key = keys[j]!;
        if (!e) {
          missing++;
          if (examples.length < 5) examples.push(`missing ${key}`);
        } else if (!e.value.equals(this.valueOf(key))) {
          wrongValue++;
          if (examples.length < 5) examples.push(`wrong value for ${key}`);
        }
      });
    }
    const perNode: Record<string, number> = {};
    for (const n of this.router!.doc.nodes) perNode[n.id] = (await this.client.stats(n.url)).keys;
    const keysOnNodes = Object.values(perNode).reduce((a, b) => a + b, 0);
    return { missing, wrongValue, keysOnNodes, perNode, examples };
  }

  /** Ring pushes that failed (best effort ones), for the report. */
  warningsSeen(): string[] {
    return [...this.warnings];
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.cleanups);
    await this.warm.close().catch(() => undefined);
    this.view.close();
    await this.client.close().catch(() => undefined);
    await this.fleet.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
