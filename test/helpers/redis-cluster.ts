import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from './services.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface RedisClusterHandle {
  nodes: { host: string; port: number }[];
  stop(): void;
}

/** A throwaway 3-master redis cluster on free ports of 127.0.0.1 (about 2-3 s to form); `stop` kills it. */
export async function startRedisCluster(): Promise<RedisClusterHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'strata-redis-cluster-'));
  const ports = [await freePort(), await freePort(), await freePort()];
  const children: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--cluster-node-timeout',
        '2000',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    ),
  );
  const stop = () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const clients = ports.map(
      (port) => new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null }),
    );
    try {
      for (const c of clients) {
        for (let i = 0; ; i++) {
          try {
            await c.connect();
            break;
          } catch (e) {
            if (i > 50) throw e;
            await sleep(50);
          }
        }
      }
      const create = ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'];
      await promisify(execFile)('redis-cli', create, { timeout: 10_000 });
      for (let i = 0; ; i++) {
        const infos = await Promise.all(clients.map((c) => c.cluster('INFO') as Promise<string>));
        if (infos.every((s) => s.includes('cluster_state:ok'))) break;
        if (i > 100) throw new Error('cluster did not converge');
        await sleep(50);
      }
    } finally {
      for (const c of clients) c.disconnect();
    }
    return { nodes: ports.map((port) => ({ host: '127.0.0.1', port })), stop };
  } catch (e) {
    stop();
    throw e;
  }
}
