/**
 * `npm start` with STRATA_LOCAL_NODES: the real start-up script as a child process, with its own cache-node
 * processes and ring, serving the API and the admin workflows. Through HTTP only (the SDK): a value written
 * before a scale-out reads back after it, and the scale-out adds a node.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StrataClient } from '../../sdk/src/index.js';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

describe('npm start with STRATA_LOCAL_NODES (child process)', () => {
  let child: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'strata-start-'));
  let output = '';

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the API over a local warm tier and scales it out through the admin API', async () => {
    const port = await freePort();
    child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start-local.ts'], {
      env: {
        ...process.env,
        PORT: String(port),
        STRATA_LOCAL_DIR: dir,
        STRATA_LOCAL_NODES: '2',
        REDIS_URL: '',
        STRATA_REDIS_URL: '',
        STRATA_S3_BUCKET: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not serving within 60 s:\n${output}`)), 60_000);
      const check = () => {
        if (output.includes('Strata is serving')) {
          clearTimeout(timer);
          resolve();
        } else if (child!.exitCode !== null) {
          clearTimeout(timer);
          reject(new Error(`exited ${child!.exitCode}:\n${output}`));
        } else setTimeout(check, 100);
      };
      check();
    });
    expect(output).toMatch(/started 2 cache node\(s\)/);
    expect(output).toMatch(/warm\s+cache nodes/);

    const strata = new StrataClient({ endpoint: `http://127.0.0.1:${port}`, namespace: 'demo' });
    for (let i = 0; i < 200; i++) await strata.put(`k${i}`, `value ${i}`);
    const run = await strata.workflows.start('scale-out', { mode: 'incremental', streamMaxMs: 500, graceMs: 500 });
    const done = await strata.workflows.wait(run.execution, { intervalMs: 200, timeoutMs: 90_000 });
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('SUCCEEDED');
    expect(done.progress).toMatchObject({ total: 2, done: 2, outcome: 'succeeded' });
    expect(done.workflow).toBe('scale-out');
    for (let i = 0; i < 200; i++)
      expect([i, Buffer.from((await strata.get(`k${i}`))!.value).toString()]).toEqual([i, `value ${i}`]);
    const listed = await strata.workflows.list({ workflow: 'scale-out' });
    expect(listed.map((e) => e.execution)).toContain(run.execution);
  }, 150_000);
});
