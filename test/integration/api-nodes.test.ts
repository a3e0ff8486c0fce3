/**
 * The node admin routes end to end on a local run: real cache-node processes and their ring in a folder (the ring
 * store of test/workflows/harness.ts, as a FileCasStore), the real local server configured with that folder as its
 * warm tier (STRATA_WARM_RING_DIR: the composition root builds what the node routes need from it), and on the client
 * side the SDK and the `strata` CLI as a separate process. The workflows are a recording stand-in: what matters here
 * is that a replacement starts replace-node for the node (the workflow has tests of its own).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HealthControls } from '../../core/nodes/health-controls.js';
import { markDown } from '../../core/ring/document.js';
import { FileCasStore } from '../../core/ring/store.js';
import type { ExecutionSummary, WorkflowService } from '../../core/workflows/admin-service.js';
import type { WorkflowName } from '../../core/workflows/progress.js';
import {
  NamespaceForbiddenError,
  NotFoundError,
  StrataClient,
  VersionConflictError,
  type NodeList,
  type NodeRemoval,
} from '../../sdk/src/index.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';
import { runStrataCli, type CliRun } from '../helpers/strata-cli.js';
import { harness, type Harness } from '../workflows/harness.js';
import { SECRET } from './warm-fixtures.js';

const started: { workflow: WorkflowName; input: Record<string, unknown>; name?: string }[] = [];
const workflows: WorkflowService = {
  start: async (workflow, input, name): Promise<ExecutionSummary> => {
    started.push({ workflow, input, ...(name !== undefined ? { name } : {}) });
    return {
      execution: name ?? `${workflow}-${started.length}`,
      workflow,
      status: 'RUNNING',
      startedAt: new Date().toISOString(),
    };
  },
  describe: async () => undefined,
  list: async () => [],
};

let ringDir: string;
let h: Harness;
let api: TestApi;
const ACCESS = [
  { keyId: 'web-key', tenant: 'web', namespaces: ['*'] },
  { keyId: 'ops-key', tenant: 'ops', admin: true },
];
const admin = () => new StrataClient({ endpoint: api.url, apiKey: 'ops-key', retries: 0 });
/** A tenant's client, for the data: the admin key reaches no namespace. */
const tenant = () => new StrataClient({ endpoint: api.url, apiKey: 'web-key', namespace: 'app', retries: 0 });
/** `strata <args>` in its own process, with the admin key. */
const cli = (...args: string[]): Promise<CliRun> => runStrataCli(api.url, ['--api-key', 'ops-key', ...args]);

beforeAll(async () => {
  ringDir = mkdtempSync(join(tmpdir(), 'strata-nodes-ring-'));
  h = await harness({ cas: new FileCasStore(ringDir) });
  api = await startTestApi(
    'embedded',
    { STRATA_WARM_RING_DIR: ringDir, STRATA_WARM_SECRET: SECRET, STRATA_TENANT_ACCESS: JSON.stringify(ACCESS) },
    { workflows },
  );
}, 300_000);

afterAll(async () => {
  await api?.close();
  await h?.close();
  if (ringDir) rmSync(ringDir, { recursive: true, force: true });
});

describe('node admin routes on a local run with cache nodes (SDK and CLI)', () => {
  it('lists the nodes of the ring the server routes by', async () => {
    const list: NodeList = await admin().nodes.list();
    const ring = (await h.ring.load())!;
    expect(list.ringVersion).toBe(ring.version);
    expect(list.nodes.map((n) => [n.id, n.state, n.url, n.ranges])).toEqual(
      ring.nodes.map((n) => [n.id, 'NORMAL', n.url, ring.ranges.filter((r) => r.owner === n.id).length]),
    );
    expect(list.replacement).toEqual({ paused: false });
  });

  it('refuses every node route to a tenant key (403), and changes nothing', async () => {
    const web = new StrataClient({ endpoint: api.url, apiKey: 'web-key', retries: 0 }).nodes;
    const before = (await h.ring.load())!.version;
    for (const call of [
      () => web.list(),
      () => web.replace('n3'),
      () => web.remove('n3'),
      () => web.replacement.get(),
      () => web.replacement.pause('intruder'),
      () => web.replacement.resume(),
    ]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NamespaceForbiddenError);
      expect(err).toMatchObject({ code: 'NAMESPACE_FORBIDDEN', status: 403, details: { scope: 'admin', tenant: 'web' } });
    }
    expect(started).toEqual([]);
    expect((await h.ring.load())!.version).toBe(before);
    expect(await new HealthControls(h.cas).get()).toEqual({ paused: false });
    const cliRefused = await runStrataCli(api.url, ['--api-key', 'web-key', 'node', 'list']);
    expect([cliRefused.code, cliRefused.stderr]).toEqual([2, expect.stringContaining('NAMESPACE_FORBIDDEN (HTTP 403)')]);
  });

  it('CLI: pauses and resumes automatic replacement in the ring store the health checkers read, recording who', async () => {
    const paused = await cli('node', 'replacement', 'pause', '--reason', 'network incident');
    expect([paused.code, paused.stderr]).toEqual([0, '']);
    expect(paused.stdout).toMatch(/^automatic replacement: PAUSED by ops at \S+Z: network incident\n$/);
    expect(await new HealthControls(h.cas).get()).toMatchObject({ paused: true, by: 'ops', reason: 'network incident' });
    const status = await cli('node', 'replacement', 'status', '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({ paused: true, by: 'ops' });
    const list = await cli('node', 'list');
    expect(list.stdout).toContain('automatic replacement: PAUSED by ops');
    expect((await cli('node', 'replacement', 'resume')).code).toBe(0);
    expect((await new HealthControls(h.cas).get()).paused).toBe(false);
  });

  it('removes a DOWN node: refused while it is NORMAL, then its ranges go to the others and the data stays readable', async () => {
    const strata = admin();
    const data = tenant();
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    for (const k of keys) await data.put(k, `value of ${k}`);

    const refused = await strata.nodes.remove('n3').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(VersionConflictError);
    expect(refused).toMatchObject({
      message: expect.stringContaining("node 'n3' is NORMAL, not DOWN"),
      details: { state: 'NORMAL' },
    });

    await h.fleet.kill('n3');
    const down = await h.ring.update((d, next) => markDown(d, 'n3', next, 'test: killed'));
    const listed = await cli('node', 'list');
    expect(listed.stdout).toMatch(/^n3\s+DOWN\s+\d+\s.*test: killed$/m);

    const removed = await cli('node', 'remove', 'n3', '--json');
    expect([removed.code, removed.stderr]).toEqual([0, '']);
    const { ringVersion, moved } = JSON.parse(removed.stdout) as NodeRemoval;
    expect(ringVersion).toBe(down.version + 1);
    expect(moved.map((m) => m.start)).toEqual(down.ranges.filter((r) => r.owner === 'n3').map((r) => r.start));
    const ring = (await h.ring.load())!;
    expect(ring.version).toBe(ringVersion);
    expect(ring.nodes.map((n) => n.id)).toEqual(['n1', 'n2']);
    // Every receiver runs the new ring (pushed by the removal).
    for (const id of new Set(moved.map((m) => m.to))) {
      const got = await h.client.getRing(ring.nodes.find((n) => n.id === id)!.url);
      expect({ node: id, version: got?.version }).toEqual({ node: id, version: ringVersion });
    }
    // Nothing was lost: what n3 held is read from the cold tier now.
    for (const k of keys) expect({ k, v: (await data.get(k))?.text() }).toEqual({ k, v: `value of ${k}` });

    await expect(strata.nodes.remove('n3')).rejects.toBeInstanceOf(NotFoundError);
    const again = await cli('node', 'remove', 'n3');
    expect([again.code, again.stderr]).toEqual([
      2,
      expect.stringMatching(/^strata: NOT_FOUND \(HTTP 404\): node 'n3' is not in ring version/),
    ]);
  }, 300_000);

  it('replace starts replace-node for the node with the options given, as the workflow route would', async () => {
    const run = await cli(
      'node',
      'replace',
      'n2',
      '--fill',
      'app,sessions',
      '--rate',
      '1048576',
      '--no-terminate',
      '--name',
      'replace-n2',
    );
    expect([run.code, run.stderr]).toEqual([0, '']);
    expect(JSON.parse(run.stdout)).toMatchObject({ execution: 'replace-n2', workflow: 'replace-node', status: 'RUNNING' });
    const sdk = await admin().nodes.replace('n1', { reason: 'disk errors' });
    expect(sdk.workflow).toBe('replace-node');
    expect(started).toEqual([
      {
        workflow: 'replace-node',
        input: { nodeId: 'n2', fillNamespaces: ['app', 'sessions'], rateBytesPerSec: 1048576, terminate: false },
        name: 'replace-n2',
      },
      { workflow: 'replace-node', input: { nodeId: 'n1', reason: 'disk errors' } },
    ]);
  });
});
