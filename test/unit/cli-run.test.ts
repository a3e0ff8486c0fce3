/**
 * The `strata` command (sdk/src/cli-run.ts) in-process, against a scripted node:http server: --version, help,
 * `has`, `get -v`, one-line mistakes, and errors that say what to do next.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../../cdk/lib/packaging.js';
import { COMMAND_HELP, runCli, USAGE, type CliContext } from '../../sdk/src/cli-run.js';
import { COST_USAGE } from '../../sdk/src/cli-cost.js';
import { SDK_VERSION } from '../../sdk/src/index.js';
import { ScriptedServer, scriptedServerForSuite, sendError, sendJson, sendRaw } from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

interface Run {
  code: number;
  out: string;
  err: string;
}

const NOW = Date.parse('2026-11-21T12:00:00.000Z');

async function strata(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<Run> {
  let out = '';
  let err = '';
  const ctx: CliContext = {
    stdout: { write: (c: string | Uint8Array) => void (out += typeof c === 'string' ? c : Buffer.from(c).toString('utf8')) },
    stderr: { write: (t: string) => void (err += t) },
    env: { STRATA_ENDPOINT: suite.server.url, ...env },
    stdin: stdin === undefined ? undefined : [Buffer.from(stdin)],
    now: () => NOW,
  };
  const code = await runCli(args, ctx);
  return { code, out, err };
}

describe('strata --version and help', () => {
  it("--version prints the SDK version, which is package.json's", async () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'sdk/package.json'), 'utf8')) as { version: string };
    expect(await strata(['--version'])).toEqual({ code: 0, out: `${pkg.version}\n`, err: '' });
    expect(SDK_VERSION).toBe(pkg.version);
  });

  it("help lists every command; help <command> and <command> --help print that command's usage", async () => {
    const all = await strata(['help']);
    expect([all.code, all.err]).toEqual([0, '']);
    expect(all.out).toBe(`${USAGE}\n`);
    for (const c of [
      'get',
      'has',
      'put',
      'delete',
      'stats | health',
      'workflow',
      'policy',
      'node',
      'cost',
      'help',
      '--version',
    ]) {
      expect(all.out).toMatch(new RegExp(`^  ${c}\\b`, 'm'));
    }
    for (const [command, text] of Object.entries(COMMAND_HELP)) {
      expect(await strata(['help', command])).toEqual({ code: 0, out: `${text}\n`, err: '' });
      expect(await strata([command, '--help'])).toEqual({ code: 0, out: `${text}\n`, err: '' });
    }
    expect(COMMAND_HELP.cost).toBe(COST_USAGE);
    expect(COMMAND_HELP.get).toMatch(/-v, --verbose/);
    expect(suite.server.requests).toHaveLength(0);
  });

  it('with no command prints the list of commands on stderr and exits 2', async () => {
    expect(await strata([])).toEqual({ code: 2, out: '', err: `${USAGE}\n` });
  });
});

describe('mistakes are one line naming what was wrong and the help to run', () => {
  const WORKFLOWS =
    'scale-out, scale-in, evict-to-s3, tier-migrate, replace-node, rolling-upgrade, invalidation-sweep, order-markers, upload-commit';
  const WORKLOAD = '(--value-size, --keys, --requests-per-month)';
  it.each([
    [['frobnicate'], "strata: unknown command 'frobnicate'; run 'strata help'\n"],
    [['help', 'frobnicate'], "strata: unknown command 'frobnicate'; run 'strata help'\n"],
    [['get'], "strata: get needs a key; run 'strata help get'\n"],
    [['has'], "strata: has needs a key; run 'strata help has'\n"],
    [['get', 'a', 'b'], "strata: get: unexpected argument 'b'; run 'strata help get'\n"],
    [
      ['get', 'a', '--ttl', '5'],
      "strata: --ttl is not an option of strata get (it is an option of strata put, touch); run 'strata help get'\n",
    ],
    [['get', 'a', '--bogus'], "strata: unknown option --bogus; run 'strata help get'\n"],
    [['put', 'k', '--ttl'], "strata: --ttl needs a value; run 'strata help put'\n"],
    [
      ['put', 'k', 'v', '--ttl', 'soon'],
      "strata: --ttl must be a whole number of at least 1, not 'soon'; run 'strata help put'\n",
    ],
    [['stats', '--timeout', '0'], "strata: --timeout must be a whole number of at least 1, not '0'; run 'strata help stats'\n"],
    [['get', 'a', '--ns', 'Not A Namespace'], expect.stringMatching(/^strata: ns: must match .*; run 'strata help get'\n$/)],
    [['workflow', 'start'], "strata: workflow start needs a workflow name; run 'strata help workflow'\n"],
    [
      ['workflow', 'start', 'scale-up'],
      `strata: unknown workflow 'scale-up'; workflows: ${WORKFLOWS}; run 'strata help workflow'\n`,
    ],
    [
      ['workflow', 'start', 'order-markers', '--mode', 'parallel'],
      "strata: --mode of order-markers is prune or backfill; run 'strata help workflow'\n",
    ],
    [
      ['workflow', 'start', 'scale-out', '--mode', 'backfill'],
      "strata: --mode of scale-out is incremental or parallel; run 'strata help workflow'\n",
    ],
    [['cost', '--keys', '5'], `strata: cost: --value-size is required with a workload ${WORKLOAD}; run 'strata help cost'\n`],
    [['cost', '--region', 'x'], `strata: cost: give a workload ${WORKLOAD} or --paper-2010 --tables; run 'strata help cost'\n`],
    [
      ['stats', '--top', '3'],
      "strata: --top is not an option of strata stats (it is an option of strata cost); run 'strata help stats'\n",
    ],
  ])('%j', async (args, err) => {
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'no request was expected'));
    expect(await strata(args)).toEqual({ code: 2, out: '', err });
    expect(suite.server.requests).toHaveLength(0);
  });

  it("a bare `strata workflow` or `strata cost` (asking what it does) gets the command's usage", async () => {
    const wf = await strata(['workflow']);
    expect(wf.code).toBe(2);
    expect(wf.err).toMatch(/^strata: workflow needs a command: start, status or list\n\nusage: strata workflow /);
    const cost = await strata(['cost']);
    expect([cost.code, cost.err]).toEqual([2, expect.stringContaining(`\n\n${COST_USAGE}\n`)]);
  });
});

describe('strata has', () => {
  it('exits 0 when the key exists and 1 when it does not, printing nothing, with a HEAD', async () => {
    suite.server.script((req, res) => {
      if (req.path.endsWith('/there')) sendRaw(res, 200, '', { 'x-strata-version': '3' });
      else sendError(res, 404, 'NOT_FOUND', 'no');
    });
    expect(await strata(['has', 'there', '--ns', 'app'])).toEqual({ code: 0, out: '', err: '' });
    expect(await strata(['has', 'missing'])).toEqual({ code: 1, out: '', err: '' });
    const sent = suite.server.requests.map((r) => `${r.method} ${r.path}`);
    expect(sent).toEqual(['HEAD /v1/ns/app/keys/there', 'HEAD /v1/ns/default/keys/missing']);
  });
});

describe('strata get', () => {
  const headers = {
    'content-type': 'application/json',
    'x-strata-version': '1838747856680960',
    'x-strata-tier': 'warm',
    'x-strata-expires-at': '2026-11-21T12:00:42.000Z',
    'x-strata-tags': 'a,b:c',
  };

  it('writes the value alone to stdout; -v adds version, tier, expiry with the TTL left, type and tags on stderr', async () => {
    suite.server.script((_req, res) => sendRaw(res, 200, '{"n":1}', headers));
    expect(await strata(['get', 'k'])).toEqual({ code: 0, out: '{"n":1}', err: '' });
    const verbose = await strata(['get', 'k', '-v']);
    expect(verbose).toEqual({
      code: 0,
      out: '{"n":1}',
      err: [
        'version  1838747856680960',
        'tier     warm',
        'expires  2026-11-21T12:00:42.000Z (42.0 s left)',
        'type     application/json',
        'tags     a, b:c',
        'size     7 bytes',
        '',
      ].join('\n'),
    });
    expect(await strata(['get', 'k', '--verbose'])).toEqual(verbose);
  });

  it('-v says when the entry does not expire; a miss exits 1', async () => {
    suite.server.script((req, res) => {
      if (req.path.endsWith('/k')) sendRaw(res, 200, 'v', { 'x-strata-version': '2', 'x-strata-tier': 'hot' });
      else sendError(res, 404, 'NOT_FOUND', 'no');
    });
    const r = await strata(['get', 'k', '-v']);
    expect(r.err).toMatch(/^expires {2}never \(no TTL\)$/m);
    expect(await strata(['get', 'gone', '-v'])).toEqual({ code: 1, out: '', err: 'strata: gone not found\n' });
  });

  it('--if-none-match sends the version held: 304 writes nothing to stdout and exits 3; a changed value is written', async () => {
    const sent: (string | undefined)[] = [];
    suite.server.script((req, res) => {
      const held = req.headers['if-none-match'] as string | undefined;
      sent.push(held);
      if (held === '"7"') sendRaw(res, 304, '', { 'x-strata-version': '7', 'x-strata-tier': 'hot', etag: '"7"' });
      else sendRaw(res, 200, 'new', { 'x-strata-version': '8', 'x-strata-tier': 'hot' });
    });
    expect(await strata(['get', 'k', '--if-none-match', '7'])).toEqual({
      code: 3,
      out: '',
      err: 'strata: k not modified (version 7)\n',
    });
    expect(await strata(['get', 'k', '--if-none-match', '6'])).toEqual({ code: 0, out: 'new', err: '' });
    expect(sent).toEqual(['"7"', '"6"']);
    const bad = await strata(['get', 'k', '--if-none-match', 'abc']);
    expect([bad.code, bad.err]).toEqual([2, expect.stringMatching(/--if-none-match must be a version/)]);
  });
});

describe('strata workflow start order-markers', () => {
  it('starts the backfill by hand: --mode backfill is the input', async () => {
    const seen: { method: string; path: string; body: string }[] = [];
    suite.server.script((req, res) => {
      seen.push({ method: req.method, path: req.path, body: req.body.toString() });
      const at = '2026-11-21T12:00:00.000Z';
      sendJson(res, 202, { execution: 'om-1', workflow: 'order-markers', status: 'RUNNING', startedAt: at, stoppedAt: null });
    });
    const r = await strata(['workflow', 'start', 'order-markers', '--mode', 'backfill']);
    expect([r.code, JSON.parse(r.out)]).toEqual([0, expect.objectContaining({ execution: 'om-1', workflow: 'order-markers' })]);
    expect(seen).toEqual([{ method: 'POST', path: '/v1/admin/workflows/order-markers/executions', body: '{"mode":"backfill"}' }]);
  });
});

describe('strata touch', () => {
  it('sends PATCH with the new ttl (or null) and if-match, prints the result; a missing key exits 1', async () => {
    const seen: { method: string; body: string; ifMatch: unknown }[] = [];
    suite.server.script((req, res) => {
      seen.push({ method: req.method, body: req.body.toString(), ifMatch: req.headers['if-match'] });
      if (req.path.endsWith('/gone')) sendError(res, 404, 'NOT_FOUND', 'no');
      else sendJson(res, 200, { ns: 'default', key: 'k', version: 9, expiresAt: null, size: 1, tiers: ['hot'], durable: true });
    });
    const r = await strata(['touch', 'k', '--ttl', '300', '--if-match', '8']);
    expect([r.code, JSON.parse(r.out)]).toEqual([0, expect.objectContaining({ key: 'k', version: 9 })]);
    expect((await strata(['touch', 'k', '--no-ttl'])).code).toBe(0);
    expect(await strata(['touch', 'gone', '--ttl', '5'])).toEqual({ code: 1, out: '', err: 'strata: gone not found\n' });
    expect(seen.slice(0, 2)).toEqual([
      { method: 'PATCH', body: '{"ttl":300}', ifMatch: '8' },
      { method: 'PATCH', body: '{"ttl":null}', ifMatch: undefined },
    ]);
    const neither = await strata(['touch', 'k']);
    expect([neither.code, neither.err]).toEqual([2, expect.stringMatching(/either --ttl <seconds> or --no-ttl/)]);
  });
});

describe('errors that say what to do next', () => {
  it('connection refused: is the server running, npm start, or STRATA_ENDPOINT', async () => {
    const dead = await ScriptedServer.start();
    await dead.close();
    const r = await strata(['get', 'k', '--timeout', '2000'], { STRATA_ENDPOINT: dead.url });
    expect(r.code).toBe(2);
    const next = "is the server running? start it with `npm start`, or set STRATA_ENDPOINT to your deployment's URL";
    expect(r.err).toBe(`strata: cannot connect to ${dead.url} (ECONNREFUSED): ${next}\n`);
  });

  it('no workflows on the local server: how to start one that has them', async () => {
    const message = 'the workflows are not configured in this runtime';
    suite.server.script((_req, res) => sendError(res, 503, 'WORKFLOWS_UNAVAILABLE', message, { requestId: 'r1' }));
    const r = await strata(['workflow', 'list']);
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `strata: WORKFLOWS_UNAVAILABLE (HTTP 503): ${message}\n` +
        'start the local server with STRATA_LOCAL_NODES=3 to run workflows locally: STRATA_LOCAL_NODES=3 npm start\n',
    );
    // One workflow the local run lacks is another matter: no advice to restart.
    const lacks = "workflow 'evict-to-s3' is not available in this local run";
    suite.server.script((_req, res) => sendError(res, 503, 'WORKFLOWS_UNAVAILABLE', lacks, { workflow: 'evict-to-s3' }));
    expect((await strata(['workflow', 'start', 'evict-to-s3'])).err).toBe(`strata: WORKFLOWS_UNAVAILABLE (HTTP 503): ${lacks}\n`);
  });

  it("other request errors: code, status and the server's message on one line, exit 2", async () => {
    suite.server.script((_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'stale', { current: 3 }));
    expect(await strata(['put', 'k', 'v'])).toEqual({ code: 2, out: '', err: 'strata: VERSION_CONFLICT (HTTP 409): stale\n' });
  });
});

describe('strata put and delete', () => {
  it('put sends the value (or stdin) with ttl, tags and content type; delete prints the tombstone version', async () => {
    suite.server.script((req, res) => {
      if (req.method === 'DELETE') sendRaw(res, 204, '', { 'x-strata-version': '9' });
      else sendJson(res, 200, { ns: 'default', key: 'k', version: 8, expiresAt: null, size: req.body.length, tiers: ['hot'] });
    });
    const put = await strata(['put', 'k', '--ttl', '60', '--tags', 'x,y', '--content-type', 'text/csv'], {}, 'a,b\n');
    expect(put.code).toBe(0);
    expect(JSON.parse(put.out)).toMatchObject({ version: 8, size: 4 });
    const [req] = suite.server.requests;
    expect(req!.headers).toMatchObject({ 'x-strata-ttl': '60', 'x-strata-tags': 'x,y', 'content-type': 'text/csv' });
    expect(req!.body.toString()).toBe('a,b\n');
    expect(await strata(['delete', 'k'])).toEqual({ code: 0, out: '{\n  "version": 9\n}\n', err: '' });
  });
});
