/**
 * The hot tier under ElastiCache IAM authentication, against real redis-servers (https://docs.aws.amazon.com/
 * AmazonElastiCache/latest/dg/auth-iam.html): a token is a password valid for 15 minutes, so every new connection
 * must present a fresh one, and IAM-authenticated connections are closed after 12 hours unless they authenticate
 * again (AUTH with a new token). redis-server checks no IAM token, so an ACL user stands in for the IAM user: it
 * accepts a list of passwords that a stub signer hands out one by one, and the test revokes those already used, so
 * the server refuses any token presented twice. The re-authentication interval is shortened to milliseconds; the
 * tests assert only that it happened (AUTH calls counted by the server), on the same connection, and that commands
 * running meanwhile all succeeded. The runtime's wiring (STRATA_REDIS_IAM_CACHE) is checked through a recording
 * proxy: the AUTH the tier sends carries a token signed with the process's AWS credentials for that cache and user.
 */
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { contentHash } from '../../core/model/keys.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { buildApiContext } from '../../core/composition/api-context.js';
import { RedisTier, type RedisCredentialSource } from '../../core/tiers/redis/redis-tier.js';
import type { Entry } from '../../core/model/entry.js';
import { uniqueName } from '../helpers/env.js';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { startRedis, type RedisHandle } from '../helpers/services.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let nextVersion = 1;

function entry(text: string): Entry {
  const value = Buffer.from(text);
  return {
    header: { version: nextVersion++, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} },
    value,
  };
}

/** A stub signer: hands out `<prefix>-1`, `<prefix>-2`, ... (each one once), like an IAM token per connection. */
class TokenStub implements RedisCredentialSource {
  readonly issued: string[] = [];
  constructor(
    readonly prefix: string,
    readonly reauthenticateAfterMs?: number,
  ) {}
  password(): string {
    const token = `${this.prefix}-${this.issued.length + 1}`;
    this.issued.push(token);
    return token;
  }
}

/** An ACL user (on every node given) that accepts the stub's first `count` tokens. */
async function createUser(admins: Redis[], user: string, prefix: string, count = 300): Promise<void> {
  const passwords = Array.from({ length: count }, (_, i) => `>${prefix}-${i + 1}`);
  for (const a of admins) await a.call('ACL', 'SETUSER', user, 'on', 'resetpass', ...passwords, '~*', '&*', '+@all');
}

/** Makes the server refuse the tokens handed out so far (a token is valid once here, so reuse is caught). */
async function revokeIssued(admins: Redis[], user: string, stub: TokenStub): Promise<void> {
  for (const a of admins) await a.call('ACL', 'SETUSER', user, ...stub.issued.map((t) => `<${t}`));
}

/** AUTH calls the server ran, and those that failed (INFO commandstats). */
async function authStats(admin: Redis): Promise<{ calls: number; failed: number }> {
  const line = /^cmdstat_auth:(.*)$/m.exec((await admin.info('commandstats')) as string)?.[1] ?? '';
  const field = (k: string) => Number(new RegExp(`${k}=(\\d+)`).exec(line)?.[1] ?? 0);
  return { calls: field('calls'), failed: field('failed_calls') };
}

/** Ids of the connections authenticated as `user` (but a cluster client's short-lived slot-map queries). */
async function connectionIds(admin: Redis, user: string): Promise<string[]> {
  const list = (await admin.call('CLIENT', 'LIST')) as string;
  const lines = list.split('\n').filter((l) => l.includes(` user=${user} `) && !l.includes('(refresher)'));
  return lines.map((l) => /^id=(\d+)/.exec(l)![1]!).sort();
}

/** Authentication failures the server logged for `user` (ACL LOG). */
async function authFailures(admin: Redis, user: string): Promise<number> {
  const log = (await admin.call('ACL', 'LOG')) as unknown[][];
  return log.filter((e) => {
    const fields = Object.fromEntries(Array.from({ length: e.length / 2 }, (_, i) => [String(e[2 * i]), e[2 * i + 1]]));
    return fields.reason === 'auth' && fields.username === user;
  }).length;
}

/** Runs `loops` concurrent write-then-read loops for `ms`; every read must return what its loop just wrote. */
async function workload(tier: RedisTier, ns: string, ms: number, loops = 4): Promise<number> {
  const until = Date.now() + ms;
  let ops = 0;
  await Promise.all(
    Array.from({ length: loops }, async (_, l) => {
      for (let i = 0; Date.now() < until; i++) {
        const text = `loop ${l} value ${i}`;
        await tier.put(ns, `k${l}-${i % 7}`, entry(text));
        expect((await tier.get(ns, `k${l}-${i % 7}`))?.value.toString()).toBe(text);
        ops += 2;
      }
    }),
  );
  return ops;
}

async function eventually<T>(what: string, probe: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await probe();
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${what}: ${(e as Error).message}`, { cause: e });
      await sleep(100);
    }
  }
}

describe('RedisTier with per-connection tokens (standalone redis-server)', () => {
  let server: RedisHandle;
  let admin: Redis;
  const tiers: RedisTier[] = [];

  beforeAll(async () => {
    server = await startRedis();
    admin = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await Promise.all(tiers.map((t) => t.close()));
    admin?.disconnect();
    await server?.stop();
  });

  function tier(user: string, stub: TokenStub): RedisTier {
    const t = new RedisTier({ url: server.url, username: user, credentials: stub, keyPrefix: uniqueName('iam') });
    tiers.push(t);
    return t;
  }

  it('authenticates as the user with a token, and every reconnect with a new token', async () => {
    const user = uniqueName('app');
    const stub = new TokenStub(uniqueName('tok'));
    await createUser([admin], user, stub.prefix);
    await admin.call('ACL', 'LOG', 'RESET');
    const t = tier(user, stub);
    await t.put('ns', 'k', entry('first'));
    expect(stub.issued).toHaveLength(1);
    expect(await connectionIds(admin, user)).toHaveLength(1);

    // The token already used is refused from now on; the server drops the connection; the tier reconnects.
    await revokeIssued([admin], user, stub);
    await admin.call('CLIENT', 'KILL', 'USER', user);
    expect((await eventually('the tier reconnects', () => t.get('ns', 'k')))?.value.toString()).toBe('first');
    expect(stub.issued.length).toBeGreaterThanOrEqual(2);
    expect(await authFailures(admin, user)).toBe(0);
  });

  it('re-authenticates its live connection on schedule, with a fresh token, while commands keep succeeding', async () => {
    const user = uniqueName('app');
    const stub = new TokenStub(uniqueName('tok'), 100);
    await createUser([admin], user, stub.prefix);
    await admin.call('ACL', 'LOG', 'RESET');
    const t = tier(user, stub);
    let lost = 0;
    t.onConnectionLost(() => lost++);
    await t.ping();
    const [conn] = await connectionIds(admin, user);
    await revokeIssued([admin], user, stub);
    const before = await authStats(admin);

    // At least 1.2 s of commands, and on until the server saw two re-authentications: on a busy machine (CI runs
    // suites side by side) the schedule's timers can run late, and a fixed window then saw none.
    const ns = uniqueName('ns');
    let ops = await workload(t, ns, 1200);
    const deadline = Date.now() + 15_000;
    while ((await authStats(admin)).calls - before.calls < 2 && Date.now() < deadline) ops += await workload(t, ns, 300);

    const after = await authStats(admin);
    expect(ops).toBeGreaterThan(0);
    // AUTH ran again on the server, each time with a token not used before (a reused one is refused and logged).
    expect(after.calls - before.calls).toBeGreaterThanOrEqual(2);
    expect(after.failed).toBe(before.failed);
    expect(await authFailures(admin, user)).toBe(0);
    expect(stub.issued.length).toBeGreaterThanOrEqual(3);
    // On the same connection: nothing was closed, so the hot fence saw no lost connection.
    expect(await connectionIds(admin, user)).toEqual([conn]);
    expect(lost).toBe(0);
  });
});

describe('RedisTier with per-connection tokens (3-node redis cluster, as ElastiCache Serverless)', () => {
  let cluster: RedisClusterHandle;
  let admins: Redis[];

  beforeAll(async () => {
    cluster = await startRedisCluster();
    admins = cluster.nodes.map((n) => new Redis({ ...n, maxRetriesPerRequest: 1 }));
  }, 300_000);
  afterAll(() => {
    for (const a of admins ?? []) a.disconnect();
    cluster?.stop();
  });

  const clusterTier = (user: string, stub: TokenStub) =>
    new RedisTier({
      cluster: { nodes: cluster.nodes.slice(0, 1) },
      username: user,
      credentials: stub,
      keyPrefix: uniqueName('iamc'),
    });

  it('gives every node connection a token and re-authenticates each on schedule while commands keep succeeding', async () => {
    const user = uniqueName('app');
    const stub = new TokenStub(uniqueName('tok'), 100);
    await createUser(admins, user, stub.prefix);
    const t = clusterTier(user, stub);
    try {
      const ns = uniqueName('ns');
      // Entries on every shard, so on every node.
      const keys = Array.from({ length: 64 }, (_, i) => `key-${i}`);
      await t.putMany(
        ns,
        keys.map((key) => ({ key, entry: entry(`value of ${key}`) })),
      );
      const conns = await Promise.all(admins.map((a) => connectionIds(a, user)));
      for (const c of conns) expect(c.length).toBeGreaterThanOrEqual(1);
      await revokeIssued(admins, user, stub);
      const before = await Promise.all(admins.map(authStats));

      await workload(t, ns, 1200, 6);
      expect((await t.getMany(ns, keys)).map((e) => e?.value.toString())).toEqual(keys.map((k) => `value of ${k}`));

      const after = await Promise.all(admins.map(authStats));
      for (let i = 0; i < admins.length; i++) {
        expect(after[i]!.calls - before[i]!.calls).toBeGreaterThanOrEqual(1);
        expect(after[i]!.failed).toBe(before[i]!.failed);
        expect(await authFailures(admins[i]!, user)).toBe(0);
        // The node connections that served the workload are the ones authenticated before it.
        expect(await connectionIds(admins[i]!, user)).toEqual(expect.arrayContaining(conns[i]!));
      }
    } finally {
      await t.close();
    }
  });

  it('gives a node connection opened again a new token', async () => {
    const user = uniqueName('app');
    const stub = new TokenStub(uniqueName('tok'));
    await createUser(admins, user, stub.prefix);
    const t = clusterTier(user, stub);
    try {
      const ns = uniqueName('ns');
      const keys = Array.from({ length: 64 }, (_, i) => `key-${i}`);
      await t.putMany(
        ns,
        keys.map((key) => ({ key, entry: entry(key) })),
      );
      const issued = stub.issued.length;
      await revokeIssued(admins, user, stub);
      for (const a of admins) await a.call('CLIENT', 'KILL', 'USER', user);
      const back = await eventually('the cluster reconnects', async () => {
        const got = await t.getMany(ns, keys);
        if (got.some((e) => !e)) throw new Error('not every node is back');
        return got;
      });
      expect(back.map((e) => e!.value.toString())).toEqual(keys);
      expect(stub.issued.length).toBeGreaterThan(issued);
      for (const a of admins) expect(await authFailures(a, user)).toBe(0);
    } finally {
      await t.close();
    }
  });
});

/** A TCP proxy to `port` that records the first command each client connection sends (RESP array of bulk strings). */
async function recordingProxy(port: number): Promise<{ port: number; firstCommands: string[][]; close(): Promise<void> }> {
  const firstCommands: string[][] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    let head = '';
    let recorded = false;
    client.on('data', (chunk) => {
      if (!recorded) {
        head += chunk.toString('latin1');
        const n = /^\*(\d+)\r\n/.exec(head);
        const parts = head.split('\r\n');
        if (n && parts.length > 2 * Number(n[1]) + 1) {
          firstCommands.push(Array.from({ length: Number(n[1]) }, (_, i) => parts[2 + 2 * i]!));
          recorded = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    firstCommands,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('the runtime with STRATA_REDIS_IAM_CACHE', () => {
  const saved = { ...process.env };
  let server: RedisHandle;
  afterAll(async () => {
    process.env = saved;
    await server?.stop();
  });

  it('signs each connection a token for the cache and user with the process credentials, no password configured', async () => {
    // The IAM user: no password of its own to check here (redis-server cannot verify a token); the default user of
    // this server stays open for the helper's probe, so `user=` below tells which user the tier logged in as.
    server = await startRedis(['--user', 'strata-test-app', 'on', 'nopass', '~*', '&*', '+@all']);
    const proxy = await recordingProxy(server.port);
    // The SDK's default credential chain reads these first (a Lambda's execution role arrives the same way).
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: 'AKIDRUNTIME',
      AWS_SECRET_ACCESS_KEY: 'secret',
      AWS_SESSION_TOKEN: 'session',
    });
    const env = loadRuntimeEnv({
      STRATA_REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
      STRATA_REDIS_USERNAME: 'strata-test-app',
      STRATA_REDIS_IAM_CACHE: 'strata-test',
      AWS_REGION: 'eu-west-1',
    });
    const ctx = buildApiContext(env, { flushTimer: false });
    const admin = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
    try {
      const hot = ctx.tiers[0]!;
      await hot.put('ns', 'k', entry('via iam'));
      expect((await hot.get('ns', 'k'))?.value.toString()).toBe('via iam');
      expect(await connectionIds(admin, 'strata-test-app')).toHaveLength(1);

      const [auth] = proxy.firstCommands;
      expect([auth![0]!.toUpperCase(), auth![1]]).toEqual(['AUTH', 'strata-test-app']);
      const token = new URL(`http://${auth![2]}`);
      expect(token.hostname).toBe('strata-test');
      expect(Object.fromEntries(token.searchParams)).toMatchObject({
        Action: 'connect',
        User: 'strata-test-app',
        ResourceType: 'ServerlessCache',
        'X-Amz-Expires': '900',
        'X-Amz-Security-Token': 'session',
        'X-Amz-Credential': expect.stringMatching(/^AKIDRUNTIME\/\d{8}\/eu-west-1\/elasticache\/aws4_request$/),
      });
    } finally {
      for (const t of ctx.tiers) await t.close?.();
      admin.disconnect();
      await proxy.close();
    }
  });

  it('refuses IAM authentication without its user, or together with a password', () => {
    const base = { STRATA_REDIS_URL: 'rediss://cache.example:6379', STRATA_REDIS_IAM_CACHE: 'strata-test' };
    expect(() => loadRuntimeEnv(base)).toThrow(/STRATA_REDIS_IAM_CACHE \(IAM authentication\) needs STRATA_REDIS_USERNAME/);
    const withUser = { ...base, STRATA_REDIS_USERNAME: 'u' };
    expect(() => loadRuntimeEnv({ ...withUser, STRATA_REDIS_PASSWORD: 'p' })).toThrow(/and no STRATA_REDIS_PASSWORD/);
    expect(() => loadRuntimeEnv({ ...withUser, STRATA_REDIS_IAM_CACHE: 'Not_A_Cache' })).toThrow(
      /STRATA_REDIS_IAM_CACHE must be a serverless cache name/,
    );
  });
});
