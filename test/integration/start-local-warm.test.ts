/**
 * `npm start` with STRATA_LOCAL_NODES: the real start-up script as a child process, with its own cache-node
 * processes and ring, serving the API and the admin workflows. Through HTTP only (the SDK): a value written
 * before a scale-out reads back after it, and the scale-out adds a node.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
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
  let endpoint = '';

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
        // The tier lines follow the serving line; a pipe may deliver them in a later chunk.
        if (output.includes('Strata is serving') && /warm\s+cache nodes/.test(output)) {
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

    endpoint = `http://127.0.0.1:${port}`;
    const strata = new StrataClient({ endpoint, namespace: 'demo' });
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
  }, 300_000);

  it("runs the policy's background rules: a grow rule adds a node, within the fleet bound, and the kill switch stops it", async () => {
    expect(endpoint).not.toBe(''); // the server of the test above
    const strata = new StrataClient({ endpoint });
    const nodes = async () =>
      ((await strata.stats()).tiers.find((t) => t.name === 'warm')?.nodes as unknown[] | undefined)?.length;
    const before = (await strata.workflows.list({ workflow: 'scale-out' })).length;
    const fleet = 3; // after the scale-out above
    const grow = {
      id: 'grow-on-timer',
      on: { timer: { everySeconds: 1 } },
      do: [{ grow: { tier: 'warm', nodes: 1 } }],
    };
    let cur = await strata.policies.get();
    cur = await strata.policies.put({ rules: [grow], controls: { maxFleetSize: fleet + 1 } }, { ifVersion: cur.version });
    // One node more, then the bound: the rule keeps firing, and is skipped at maxFleetSize.
    const deadline = Date.now() + 120_000;
    let firings = await strata.policies.firings();
    const atBound = `the fleet is at controls.maxFleetSize (${fleet + 1})`;
    while (!firings.some((f) => f.detail === atBound) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      firings = await strata.policies.firings();
    }
    expect(firings.find((f) => f.outcome === 'done')).toMatchObject({ rule: 'grow-on-timer', response: 'grow' });
    expect(firings[0]).toMatchObject({ outcome: 'skipped', detail: atBound });
    const runs = await strata.workflows.list({ workflow: 'scale-out' });
    expect(runs.length).toBe(before + 1);
    for (let t = Date.now(); (await nodes()) !== fleet + 1 && Date.now() - t < 60_000;)
      await new Promise((r) => setTimeout(r, 500));
    expect(await nodes()).toBe(fleet + 1);

    // The kill switch: the rule still fires, and nothing starts.
    await strata.policies.put(
      { rules: [grow], controls: { maxFleetSize: fleet + 5, backgroundEnabled: false } },
      { ifVersion: cur.version },
    );
    for (let t = Date.now(); (await strata.policies.firings())[0]?.outcome !== 'suppressed' && Date.now() - t < 30_000;)
      await new Promise((r) => setTimeout(r, 300));
    expect((await strata.policies.firings())[0]).toMatchObject({ outcome: 'suppressed' });
    expect((await strata.workflows.list({ workflow: 'scale-out' })).length).toBe(before + 1);
  }, 300_000);

  it('finds a killed node, marks it DOWN, replaces it, and keeps taking writes and serving every value', async () => {
    expect(endpoint).not.toBe(''); // the server of the tests above
    const strata = new StrataClient({ endpoint, namespace: 'demo' });
    const before = (await strata.nodes.list()).nodes.length;
    const pid = Number(
      execFileSync('pgrep', ['-f', join(dir, '_warm', 'nodes', 'n1') + ' '])
        .toString()
        .trim()
        .split('\n')[0],
    );
    process.kill(pid, 'SIGKILL');
    // Writes to its ranges fail until it is marked DOWN and its lease (5 s locally) has run out; then all succeed.
    const deadline = Date.now() + 90_000;
    let round = 0;
    for (; Date.now() < deadline; round++) {
      const results = await Promise.allSettled(
        Array.from({ length: 50 }, (_, i) => strata.put(`after-${round}-${i}`, `v${round}`)),
      );
      if (results.every((r) => r.status === 'fulfilled')) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(Date.now()).toBeLessThan(deadline);
    expect(output).toMatch(/health check: marked cache node n1 DOWN/);
    // Detection starts ReplaceNode: the fleet is back to its size, n1 gone, every node NORMAL, without a human.
    let runs = await strata.workflows.list({ workflow: 'replace-node' });
    for (let t = Date.now(); runs[0]?.status !== 'SUCCEEDED' && Date.now() - t < 90_000;) {
      await new Promise((r) => setTimeout(r, 500));
      runs = await strata.workflows.list({ workflow: 'replace-node' });
    }
    expect(runs[0]).toMatchObject({ workflow: 'replace-node', status: 'SUCCEEDED' });
    const nodes = (await strata.nodes.list()).nodes;
    expect(nodes.length).toBe(before);
    expect(nodes.some((n) => n.id === 'n1')).toBe(false);
    expect(nodes.every((n) => n.state === 'NORMAL')).toBe(true);
    // Every value written before the kill still reads back, and those written after it.
    for (let i = 0; i < 200; i++)
      expect([i, Buffer.from((await strata.get(`k${i}`))!.value).toString()]).toEqual([i, `value ${i}`]);
    for (let i = 0; i < 50; i++)
      expect(Buffer.from((await strata.get(`after-${round}-${i}`))!.value).toString()).toBe(`v${round}`);
  }, 300_000);
});
