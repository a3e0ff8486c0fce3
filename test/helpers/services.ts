/**
 * Starts the real services integration tests run against: a `redis-server` on a free port for this run, and
 * LocalStack (host mode, no Docker) when it is not already listening on 127.0.0.1:4566.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The repository root (works from both the CommonJS global setup and ESM test files). */
export const ROOT = findRoot(process.cwd());

function findRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'jest.config.cjs'))) return dir;
    if (dirname(dir) === dir) return start;
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode} before it was ready`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} was not ready within ${timeoutMs} ms`);
}

export interface RedisHandle {
  url: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

export async function startRedis(extraArgs: string[] = []): Promise<RedisHandle> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extraArgs],
    { stdio: 'ignore', detached: true },
  );
  child.unref();
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve());
    child.once('error', (e) => reject(new Error(`cannot start redis-server (run 'npm run setup'): ${e.message}`)));
  });
  const { default: Redis } = await import('ioredis');
  await waitFor(
    'redis-server',
    async () => {
      const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => {}); // not up yet: the probe retries
      try {
        await r.connect();
        return (await r.ping()) === 'PONG';
      } finally {
        r.disconnect();
      }
    },
    10_000,
    child,
  );
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    stop: async () => {
      try {
        process.kill(child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    },
  };
}

export const LOCALSTACK_ENDPOINT = process.env.LOCALSTACK_ENDPOINT ?? 'http://127.0.0.1:4566';

export async function localStackUp(endpoint = LOCALSTACK_ENDPOINT): Promise<boolean> {
  try {
    const res = await fetch(`${endpoint}/_localstack/health`, { signal: AbortSignal.timeout(1500) });
    if (!res.ok) return false;
    const body = (await res.json()) as { services?: Record<string, string> };
    return ['available', 'running'].includes(body.services?.s3 ?? '');
  } catch {
    return false;
  }
}

/** Starts LocalStack unless one is already up. Returns the pid it started, or null when it reused one. */
export async function ensureLocalStack(): Promise<number | null> {
  if (await localStackUp()) return null;
  const python = join(ROOT, '.localstack', 'venv', 'bin', 'python');
  if (!existsSync(python)) throw new Error('LocalStack is not installed: run `npm run setup` (creates .localstack/venv)');
  const dataDir = join(ROOT, '.localstack', 'data');
  mkdirSync(dataDir, { recursive: true });
  const log = openSync(join(ROOT, '.localstack', 'localstack.log'), 'a');
  const child = spawn(python, ['-m', 'localstack.runtime.main'], {
    env: {
      ...process.env,
      GATEWAY_LISTEN: '127.0.0.1:4566',
      LOCALSTACK_VOLUME_DIR: dataDir,
      DISABLE_EVENTS: '1',
      SKIP_SSL_CERT_DOWNLOAD: '1',
    },
    stdio: ['ignore', log, log],
    detached: true,
  });
  child.unref();
  await waitFor('LocalStack (log: .localstack/localstack.log)', () => localStackUp(), 120_000, child);
  return child.pid!;
}
