/**
 * The hot tier fails slowly, fills up or comes back older, and no read through any coordinator returns a version
 * older than an acknowledged one. Real redis-server processes of this test's own (paused with SIGSTOP, capped
 * with maxmemory + volatile-lru as ElastiCache Serverless evicts, restarted from an older RDB snapshot); the
 * durable tier is a real local folder shared by two coordinators (two containers). Timers are shortened: the
 * stall watchdog fires after 300 ms and the fence lease is 200 ms (production: 1000 and 2000).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { type CoordinatorEvent } from '../../core/coordinator/types.js';
import { PolicyRegistry, type NamespacePolicyInput } from '../../core/policy/namespace-settings.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { RedisTier } from '../../core/tiers/redis/redis-tier.js';
import { mapLimit } from '../../core/util/concurrency.js';
import { freePort } from '../helpers/services.js';

const STALL_MS = 300;
const LEASE_MS = 200;

/** A redis-server of this test's own, restartable on the same port and data directory. */
class OwnRedis {
  readonly dir = mkdtempSync(join(tmpdir(), 'strata-hot-faults-'));
  port = 0;
  private child?: ChildProcess;
  constructor(private readonly extra: string[] = []) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.port ||= await freePort();
    this.child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no', ...this.extra],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 100; i++) {
      const r = new Redis({ port: this.port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => {});
      try {
        await r.connect();
        if ((await r.ping()) === 'PONG') return;
      } catch {
        /* not up yet */
      } finally {
        r.disconnect();
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    throw new Error('redis-server did not start');
  }

  signal(sig: NodeJS.Signals): void {
    this.child!.kill(sig);
  }

  async kill(): Promise<void> {
    const c = this.child!;
    if (c.exitCode !== null) return;
    const exited = new Promise((res) => c.once('exit', res));
    c.kill('SIGKILL');
    await exited;
  }

  async admin<T>(fn: (r: Redis) => Promise<T>): Promise<T> {
    const r = new Redis({ port: this.port, maxRetriesPerRequest: 0 });
    try {
      return await fn(r);
    } finally {
      r.disconnect();
    }
  }

  async stop(): Promise<void> {
    await this.kill().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A TCP endpoint standing in for the one a managed failover repoints (ElastiCache's primary endpoint): `switchTo`
 * sends new connections to another server and drops the open ones, as a failover does.
 */
class Endpoint {
  port = 0;
  private target = 0;
  private readonly open = new Set<Socket>();
  private server?: Server;

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(targetPort: number): Promise<void> {
    this.target = targetPort;
    this.server = createServer((client) => {
      const upstream = connect(this.target, '127.0.0.1');
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        this.open.add(a);
        a.pipe(b);
        a.on('error', () => b.destroy());
        a.on('close', () => (this.open.delete(a), b.destroy()));
      }
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as { port: number }).port;
  }

  switchTo(targetPort: number): void {
    this.target = targetPort;
    for (const s of this.open) s.destroy();
  }

  async stop(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise((r) => this.server?.close(r));
  }
}

describe('hot-tier faults never undo an acknowledged write', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()!().catch(() => {});
  });

  /** Two coordinators (two containers) over one Redis and one durable folder. */
  async function deployment(
    redis: { url: string },
    o: {
      defaults?: NamespacePolicyInput;
      incarnationCheck?: 'run-id' | 'reconnect';
      onEvent?: (e: CoordinatorEvent) => void;
    } = {},
  ) {
    const dir = mkdtempSync(join(tmpdir(), 'strata-hot-faults-cold-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const make = async () => {
      const c = new Coordinator({
        tiers: [
          RedisTier.fromUrl(redis.url, { commandTimeoutMs: STALL_MS, incarnationCheck: o.incarnationCheck }),
          new LocalFolderTier({ dir, fsync: false }),
        ],
        policies: new PolicyRegistry({ defaults: { nearCache: { enabled: false }, ...o.defaults } }),
        flushTimer: false,
        onBackgroundError: () => {},
        ...(o.onEvent ? { onEvent: o.onEvent } : {}),
        hotFence: { leaseMs: LEASE_MS },
      });
      cleanups.push(() => c.close());
      await c.ready();
      return c;
    };
    return { a: await make(), b: await make(), make };
  }

  /** Newest acknowledged state per key: version, and whether that write was a delete. */
  type Acked = Map<string, { version: number; deleted: boolean }>;

  async function checkAll(c: Coordinator, keys: string[], acked: Acked): Promise<string[]> {
    const bad: string[] = [];
    await mapLimit(keys, 32, async (k) => {
      const want = acked.get(k)!;
      const got = await c.get('ns', k);
      const head = await c.head('ns', k);
      if (want.deleted) {
        if (got && got.entry.header.version < want.version)
          bad.push(`${k}: deleted @${want.version}, read @${got.entry.header.version}`);
        if (head && head.header.version < want.version) bad.push(`${k}: deleted @${want.version}, head @${head.header.version}`);
      } else {
        if (!got || got.entry.header.version < want.version)
          bad.push(`${k}: acked @${want.version}, read @${got?.entry.header.version}`);
        if (!head || head.header.version < want.version) bad.push(`${k}: acked @${want.version}, head @${head?.header.version}`);
      }
    });
    return bad;
  }

  it('a Redis paused (SIGSTOP) under load: writes keep being acknowledged, and no coordinator reads an older version after it resumes', async () => {
    const redis = new OwnRedis();
    cleanups.push(() => redis.stop());
    await redis.start();
    const { a, b } = await deployment(redis);
    const keys = Array.from({ length: 600 }, (_, i) => `key-${i}`);
    const acked: Acked = new Map();
    await mapLimit(keys, 32, async (k) =>
      acked.set(k, { version: (await a.put('ns', k, Buffer.from(`v1 ${k}`))).version, deleted: false }),
    );
    // Every key is in hot, and readers use it.
    expect((await b.get('ns', keys[0]!))!.tier).toBe('hot');

    const violations: string[] = [];
    let writing = true;
    const readers = (async () => {
      // Reads during the pause: each must be at least the version acknowledged before the read started.
      while (writing) {
        const k = keys[Math.floor(Math.random() * keys.length)]!;
        const before = acked.get(k)!;
        const got = await b.get('ns', k).catch(() => 'error' as const);
        if (got === 'error') continue;
        // Keys deleted in this round may read as absent once their delete has begun.
        const deletedNow = keys.indexOf(k) % 10 === 0;
        if (!before.deleted && ((!got && !deletedNow) || (got && got.entry.header.version < before.version)))
          violations.push(`during: ${k} acked @${before.version}, read @${got?.entry.header.version}`);
      }
    })();
    let resumed = false;
    const pause = (async () => {
      await new Promise((r) => setTimeout(r, 150));
      redis.signal('SIGSTOP');
      await new Promise((r) => setTimeout(r, 2500));
      redis.signal('SIGCONT');
      resumed = true;
    })();
    let failedWrites = 0;
    // Rounds of the same writes until Redis has resumed: on a fast machine one round can end before the pause begins,
    // and then no write meets the stalled Redis (the scenario this test is about would not have happened).
    do {
      await mapLimit(keys, 16, async (k, i) => {
        try {
          if (i % 10 === 0) acked.set(k, { version: (await a.delete('ns', k)).version, deleted: true });
          else acked.set(k, { version: (await a.put('ns', k, Buffer.from(`v2 ${k}`))).version, deleted: false });
        } catch {
          failedWrites++;
        }
      });
    } while (!resumed);
    await pause;
    writing = false;
    await readers;
    // Writes were served through the pause (each waited for the stall watchdog and the fence, none refused).
    expect(failedWrites).toBe(0);
    expect((await a.stats()).hotFence!.unknownHotCopies).toBeGreaterThan(0);
    violations.push(...(await checkAll(b, keys, acked)), ...(await checkAll(a, keys, acked)));
    // A container started after the pause agrees.
    expect(violations).toEqual([]);
  });

  it('a full Redis (maxmemory, volatile-lru as ElastiCache Serverless) evicts hot copies instead of refusing them, and never serves an older one', async () => {
    const redis = new OwnRedis(['--maxmemory', '3mb', '--maxmemory-policy', 'volatile-lru']);
    cleanups.push(() => redis.stop());
    await redis.start();
    const { a, b } = await deployment(redis);
    const keys = Array.from({ length: 1200 }, (_, i) => `key-${i}`);
    const value = (v: string) => Buffer.concat([Buffer.from(v), Buffer.alloc(4000, 1)]);
    const acked: Acked = new Map();
    for (const round of ['v1', 'v2']) {
      await mapLimit(keys, 16, async (k) =>
        acked.set(k, { version: (await a.put('ns', k, value(round))).version, deleted: false }),
      );
    }
    expect(await checkAll(b, keys, acked)).toEqual([]);
    const info = await redis.admin((r) => r.info('stats'));
    expect(Number(/evicted_keys:(\d+)/.exec(info)![1])).toBeGreaterThan(0); // it evicted rather than refused
    // Every hot copy carries a TTL within the residency (default a day).
    const ttl = await redis.admin(async (r) => {
      const [, found] = await r.scan('0', 'MATCH', 'strata:{*}:ns:*', 'COUNT', '1000');
      return Promise.all(found.slice(0, 20).map((k) => r.pttl(k)));
    });
    const live = ttl.filter((t) => t !== -2); // -2: evicted since the SCAN listed it
    expect(live.length).toBeGreaterThan(0);
    for (const t of live) expect(t).toBeGreaterThan(0); // -1 would be a copy without a TTL
    for (const t of live) expect(t).toBeLessThanOrEqual(86_400_000);
  });

  it('write-back says what it risks: durable false until flushed, and dirty entries gone before their flush are counted', async () => {
    const redis = new OwnRedis();
    cleanups.push(() => redis.stop());
    await redis.start();
    const events: CoordinatorEvent[] = [];
    const { a: c } = await deployment(redis, { defaults: { writeMode: 'write-back' }, onEvent: (e) => events.push(e) });
    const writes = await Promise.all(Array.from({ length: 20 }, (_, i) => c.put('ns', `k${i}`, Buffer.from(`v${i}`))));
    expect(writes.every((w) => w.durable === false && w.tiers.join() === 'hot')).toBe(true);
    // Five dirty entries vanish before the flush (as an allkeys-* eviction or a lost replica would do).
    await redis.admin(async (r) => {
      for (let i = 0; i < 5; i++) {
        const [, found] = await r.scan(
          '0',
          'MATCH',
          `strata:{*}:ns:${Buffer.from(`k${i}`).toString('base64url')}`,
          'COUNT',
          '10000',
        );
        await r.del(...found);
      }
    });
    expect(await c.flushDirty()).toBe(15);
    expect(events).toContainEqual({ type: 'write-back-lost', count: 5 });
    // A flushed entry's hot copy got its residency TTL, so a full Redis can evict it now.
    const ttl = await redis.admin(async (r) => {
      const [, found] = await r.scan('0', 'MATCH', `strata:{*}:ns:${Buffer.from('k9').toString('base64url')}`, 'COUNT', '10000');
      return r.pttl(found[0]!);
    });
    expect(ttl).toBeGreaterThan(0);
  });

  it('a failover to a replica that lags does not surface older versions', async () => {
    // No diskless-sync delay: by default a primary waits 5 s for more replicas before the first full sync.
    const primary = new OwnRedis(['--repl-diskless-sync-delay', '0']);
    cleanups.push(() => primary.stop());
    await primary.start();
    const replica = new OwnRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
    cleanups.push(() => replica.stop());
    await replica.start();
    const endpoint = new Endpoint();
    cleanups.push(() => endpoint.stop());
    await endpoint.start(primary.port);
    const { a, make } = await deployment(endpoint);
    const keys = Array.from({ length: 200 }, (_, i) => `key-${i}`);
    await mapLimit(keys, 16, (k) => a.put('ns', k, Buffer.from(`v1 ${k}`)));
    // The replica has caught up (v1 and the recorded incarnation), then falls behind: it stops replicating.
    const target = await primary.admin((r) => r.dbsize());
    for (let i = 0; i < 400 && (await replica.admin((r) => r.dbsize())) < target; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(await replica.admin((r) => r.dbsize())).toBe(target);
    await replica.admin((r) => r.replicaof('NO', 'ONE'));
    const acked: Acked = new Map();
    await mapLimit(keys, 16, async (k) =>
      acked.set(k, { version: (await a.put('ns', k, Buffer.from(`v2 ${k}`))).version, deleted: false }),
    );
    expect((await a.get('ns', keys[0]!))!.tier).toBe('hot');
    endpoint.switchTo(replica.port); // the failover: the endpoint now leads to the replica, which holds v1
    await new Promise((r) => setTimeout(r, STALL_MS));
    expect(await checkAll(a, keys, acked)).toEqual([]);
    expect(await checkAll(await make(), keys, acked)).toEqual([]);
  });

  it("with incarnationCheck 'reconnect', a lost connection fences the hot tier whole even when run_id stays the same", async () => {
    const redis = new OwnRedis();
    cleanups.push(() => redis.stop());
    await redis.start();
    const events: CoordinatorEvent[] = [];
    const { a: c } = await deployment(redis, { incarnationCheck: 'reconnect', onEvent: (e) => events.push(e) });
    await c.put('ns', 'k', Buffer.from('v1'));
    expect((await c.get('ns', 'k'))!.tier).toBe('hot');
    const raisesBefore = events.filter((e) => e.type === 'bump').length;
    // A proxy in front of a failed-over server would look like this: the connection drops, the run_id does not change.
    await redis.admin((r) => r.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'));
    await new Promise((r) => setTimeout(r, 300)); // the client reconnects
    expect((await c.get('ns', 'k'))!.tier).toBe('cold'); // the old hot copy is not trusted any more
    expect(events.filter((e) => e.type === 'bump' && e.incarnation).length).toBeGreaterThan(0);
    expect(events.filter((e) => e.type === 'bump').length).toBeGreaterThan(raisesBefore);
  });

  it('a Redis restarted from an older snapshot does not bring older versions back, for running or new coordinators', async () => {
    const redis = new OwnRedis();
    cleanups.push(() => redis.stop());
    await redis.start();
    const { a, make } = await deployment(redis);
    const keys = Array.from({ length: 200 }, (_, i) => `key-${i}`);
    await mapLimit(keys, 16, (k) => a.put('ns', k, Buffer.from(`v1 ${k}`)));
    await redis.admin((r) => r.save()); // the snapshot holds v1
    const acked: Acked = new Map();
    await mapLimit(keys, 16, async (k) =>
      acked.set(k, { version: (await a.put('ns', k, Buffer.from(`v2 ${k}`))).version, deleted: false }),
    );
    expect((await a.get('ns', keys[0]!))!.tier).toBe('hot');
    await redis.kill();
    await redis.start(); // loads the snapshot: every key is back at v1 in hot
    expect(await redis.admin((r) => r.exists(`strata:incarnation`))).toBe(1);
    const fresh = await make(); // a container started after the restart
    await new Promise((r) => setTimeout(r, STALL_MS)); // the running one notices the reconnect
    expect(await checkAll(a, keys, acked)).toEqual([]);
    expect(await checkAll(fresh, keys, acked)).toEqual([]);
    // Once the new incarnation is fenced and confirmed, hot serves again.
    await a.drain();
    await fresh.ready();
    await new Promise((r) => setTimeout(r, LEASE_MS * 2));
    await fresh.get('ns', keys[1]!);
    await fresh.drain();
    expect((await fresh.get('ns', keys[1]!))!.tier).toBe('hot');
  });
});
