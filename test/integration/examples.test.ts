/**
 * Every program in examples/ runs, as its header says, against a real `npm start`: what scripts/start.sh runs
 * as a child process, on a free port with embedded tiers, then each example as
 * `bash scripts/run-node.sh examples/<file>` with STRATA_ENDPOINT pointing at it. An example must exit 0 and
 * print what it promises; an example without expectations here fails the test, so new ones get run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** `npm start` after its install step. */
const START = ['scripts/run-node.sh', 'scripts/start-local.ts'];

/** What each example must print (stdout), besides exiting 0. */
const EXPECTED: Record<string, RegExp[]> = {
  '01-basics.ts': [
    /^put user:42 -> version \d+, tiers hot\+cold, expires \d{4}-/m,
    /^get user:42 -> Ada \(pro\) from the (l1|hot) tier, tags users,plan:pro$/m,
    /^get greeting -> "hello, world"$/m,
    /^getOrSet report:q3 -> first from loader, then from (l1|hot); loader ran 1 time\(s\)$/m,
    /^getMany -> 3 of 4 found: item:1, item:2, item:3$/m,
    /^delete user:42 -> tombstone version \d+; get now returns undefined$/m,
    /^basics: ok$/m,
  ],
  '02-optimistic-update.ts': [
    /^counter -> 10 after 10 concurrent increments/m,
    /^lock:nightly-job -> held by worker-1; worker-2 refused/m,
    /^optimistic-update: ok$/m,
  ],
  '03-large-values.ts': [
    /^put dataset:2026-11 \(6291456 bytes\) -> version \d+/m,
    /^ {2}POST \/v1\/ns\/examples\/uploads\/dataset%3A2026-11 -> 200$/m,
    /^ {2}POST \/v1\/ns\/examples\/uploads\/dataset%3A2026-11\/complete -> 200$/m,
    /^get dataset:2026-11 -> 6291456 bytes from the \w+ tier$/m,
    /^ {2}GET \/v1\/ns\/examples\/keys\/dataset%3A2026-11 -> 303$/m,
    /^sha256 [0-9a-f]{16}… matches$/m,
    /^large-values: ok$/m,
  ],
  '04-stats-and-cost.ts': [
    /^health -> ok: hot \(memory\) up, cold \(local-folder\) up$/m,
    /^ {2}hot +memory +\d+ entries +\d+\.\d% hits$/m,
    /^cost -> catalog \S+, us-east-1, ranked by cost-per-speedup:$/m,
    /^ {2}#1 \S+ +\$ *\d+\.\d\d\/month {2}speedup \d/m,
    /^stats-and-cost: ok$/m,
  ],
};

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** The environment of a user's shell: none of the Jest run's Node options or test-service variables. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  const unset = [
    'REDIS_URL',
    'STRATA_REDIS_URL',
    'STRATA_S3_BUCKET',
    'STRATA_S3_ENDPOINT',
    'STRATA_LOCAL_NODES',
    'STRATA_TENANT_ACCESS',
  ];
  for (const k of unset) delete env[k];
  return env;
}

function run(file: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['scripts/run-node.sh', join('examples', file)], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('examples/ against npm start', () => {
  let server: ChildProcess | undefined;
  let endpoint = '';
  let output = '';
  const dataDir = mkdtempSync(join(tmpdir(), 'strata-examples-'));

  beforeAll(async () => {
    const port = await freePort();
    endpoint = `http://localhost:${port}`;
    // What scripts/start.sh runs once setup is done (its install step has a test of its own, and must not run
    // `npm ci` under a running Jest). Its own process group, so that stopping it reaches node behind the wrapper.
    expect(readFileSync(join(ROOT, 'scripts', 'start.sh'), 'utf8')).toContain(`exec bash ${START.join(' ')} "$@"`);
    server = spawn('bash', START, {
      cwd: ROOT,
      env: cleanEnv({ PORT: String(port), STRATA_LOCAL_DIR: dataDir }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    server.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    server.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`npm start was not serving within 30 s:\n${output}`)), 30_000);
      const check = () => {
        if (output.includes('Strata is serving')) {
          clearTimeout(timer);
          resolve();
        } else if (server!.exitCode !== null) {
          clearTimeout(timer);
          reject(new Error(`npm start exited ${server!.exitCode}:\n${output}`));
        } else setTimeout(check, 100);
      };
      check();
    });
  }, 300_000);

  afterAll(async () => {
    if (server?.pid !== undefined && server.exitCode === null) {
      const exited = new Promise((r) => server!.once('exit', r));
      process.kill(-server.pid, 'SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('has expectations for every example, and an examples/README.md entry for each', () => {
    const files = readdirSync(join(ROOT, 'examples'))
      .filter((f) => /\.(ts|mjs)$/.test(f))
      .sort();
    expect(files).toEqual(Object.keys(EXPECTED).sort());
    const readme = readFileSync(join(ROOT, 'examples', 'README.md'), 'utf8');
    for (const f of files) expect(readme).toContain(`bash scripts/run-node.sh examples/${f}`);
  });

  it.each(Object.keys(EXPECTED))(
    '%s exits 0 and prints what it shows',
    async (file) => {
      const { code, stdout, stderr } = await run(file, cleanEnv({ STRATA_ENDPOINT: endpoint }));
      if (code !== 0) throw new Error(`examples/${file} exited ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`);
      for (const pattern of EXPECTED[file]!) expect(stdout).toMatch(pattern);
    },
    40_000,
  );
});
