/**
 * The admin API end to end on a local run: real cache-node processes, the synthesized state machines under
 * aws-local-stepfunctions with the real steps, as `localWorkflows()` builds them for a local run (the cache nodes,
 * ring store and fleet from test/workflows/harness.ts), behind a LocalWorkflowService in the API context of the
 * real local server (scripts/local/server.ts, which calls the admin Lambda handler), and on the client side the
 * SDK and the `strata` CLI as a separate process.
 */
import { localWorkflows, type LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { StrataClient, type WorkflowExecutionDetail } from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { runStrataCli, type CliRun } from '../helpers/strata-cli.js';
import { Workload } from './warm-workload.js';
import { definitions, harness, type Harness } from '../workflows/harness.js';
import { SECRET } from './warm-fixtures.js';

/** Options that keep a local run quick: short stream steps and grace. */
const FAST = { streamMaxMs: 150, graceMs: 500 };

let h: Harness;
let workflows: LocalWorkflows;
let api: TestApi;
let url: string;

/** `strata <args>` in its own process (not a terminal: progress comes as plain lines). */
const cli = (...args: string[]): Promise<CliRun> => runStrataCli(url, args);

beforeAll(async () => {
  h = await harness();
  // Data on the nodes, so that the workflows have sessions to stream.
  const w = new Workload(h.ring);
  try {
    await w.load();
  } finally {
    await w.close();
  }
  // What start-local builds for `npm start` with a warm tier: the harness provides the ring store and the fleet.
  workflows = localWorkflows({
    definitions: definitions(),
    cas: h.cas,
    fleet: h.fleet,
    secret: SECRET,
    waitOverridesMs: { WaitForNode: 100 },
  });
  api = await startTestApi('embedded', {}, { workflows: workflows.service });
  url = api.url;
}, 300_000); // three node processes, a data load and the synthesized state machines: slow on a loaded machine

afterAll(async () => {
  await api?.close();
  await workflows?.close();
  await h?.close();
});

describe('admin API on a local run: SDK and CLI against a LocalWorkflowService', () => {
  it('SDK: starts a scale-out, follows its progress to SUCCEEDED and finds it in the list', async () => {
    const strata = new StrataClient({ endpoint: url });
    const started = await strata.workflows.start('scale-out', { mode: 'incremental', ...FAST });
    expect(started.status).toBe('RUNNING');
    const seen: WorkflowExecutionDetail[] = [];
    const done = await strata.workflows.wait(started.execution, {
      intervalMs: 50,
      timeoutMs: 150_000,
      onProgress: (d) => seen.push(d),
    });
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('SUCCEEDED');
    expect(done.progress).toMatchObject({ total: 3, done: 3, fraction: 1, unit: 'sessions', outcome: 'succeeded' });
    expect(done.progress!.keys).toBeGreaterThan(0);
    expect(done.progress!.bytes).toBeGreaterThan(0);
    // Progress only moves forward, and was seen part-way at least once.
    const fractions = seen.map((d) => d.progress?.fraction ?? 0);
    for (let i = 1; i < fractions.length; i++) expect(fractions[i]!).toBeGreaterThanOrEqual(fractions[i - 1]!);
    expect(
      seen.some(
        (d) => d.status === 'RUNNING' && d.progress !== undefined && d.progress.total > 0 && d.progress.done < d.progress.total,
      ),
    ).toBe(true);
    expect((await h.ring.load())!.nodes).toHaveLength(4);

    const listed = await strata.workflows.list({ workflow: 'scale-out' });
    expect(listed[0]).toMatchObject({ execution: started.execution, status: 'SUCCEEDED' });
  }, 300_000);

  it("HTTP: the 202's location, resolved against the request URL, is the execution's URL", async () => {
    const startUrl = `${url}/v1/admin/workflows/evict-to-s3/executions?name=evict-location`;
    const res = await fetch(startUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(202);
    const location = new URL(res.headers.get('location')!, startUrl);
    expect(location.toString()).toBe(`${url}/v1/admin/workflows/executions/evict-location`);
    const detail = await fetch(location);
    expect(detail.status).toBe(200);
    expect(await detail.json()).toMatchObject({ execution: 'evict-location', workflow: 'evict-to-s3' });
  });

  it('CLI: `workflow start scale-in --wait` prints progress lines and exits 0; a failing one exits 1 with its error', async () => {
    const ok = await cli(
      'workflow',
      'start',
      'scale-in',
      '--mode',
      'parallel',
      '--input',
      JSON.stringify(FAST),
      '--wait',
      '--interval',
      '100',
    );
    expect([ok.code, ok.stderr]).toEqual([0, expect.stringMatching(/^started scale-in-\S+\n/)]);
    expect(ok.stderr).toMatch(/^\[[#-]{24}\] .+$/m);
    expect(ok.stderr).toMatch(/\[#{24}\] \d+\/\d+ sessions · [\d.]+ \S*B · /);
    expect(ok.stderr).not.toContain('\r');
    expect(ok.stderr).toMatch(/scale-in-\S+ SUCCEEDED in [\d.]+ s/);
    const final = JSON.parse(ok.stdout) as { execution: string; status: string; progress: { done: number; total: number } };
    expect(final).toMatchObject({ status: 'SUCCEEDED', progress: { fraction: 1, unit: 'sessions' } });
    expect(final.progress.total).toBeGreaterThan(0);
    expect(final.progress.done).toBe(final.progress.total);
    expect((await h.ring.load())!.nodes).toHaveLength(3);

    const bad = await cli(
      'workflow',
      'start',
      'scale-in',
      '--input',
      '{"nodeId":"n9"}',
      '--name',
      'retire-n9',
      '--wait',
      '--interval',
      '50',
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/strata: retire-n9 FAILED after [\d.]+ s: .*node 'n9' is not in the ring/);
    expect(JSON.parse(bad.stdout)).toMatchObject({ execution: 'retire-n9', status: 'FAILED' });

    const again = await cli('workflow', 'start', 'scale-in', '--name', 'retire-n9');
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('EXECUTION_EXISTS (HTTP 409)');

    const status = await cli('workflow', 'status', 'retire-n9');
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      execution: 'retire-n9',
      workflow: 'scale-in',
      status: 'FAILED',
      error: { error: expect.any(String) },
    });

    const list = await cli('workflow', 'list', '--workflow', 'scale-in');
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^EXECUTION\s+WORKFLOW\s+STATUS\s+STARTED\s+DURATION$/);
    expect(lines[1]).toMatch(/^retire-n9\s+scale-in\s+FAILED\s/);
    expect(lines[2]).toContain(final.execution);
    expect(lines).toHaveLength(3);
  }, 300_000);
});
