/**
 * `strata policy get|put|validate|history|rollback|firings` (sdk/src/cli-policy.ts through cli-run.ts) in-process, against a
 * scripted node:http server: what each subcommand sends, prints and exits with.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { COMMAND_HELP, runCli, USAGE, type CliContext } from '../../sdk/src/cli-run.js';
import { formatPolicyFirings, formatPolicyHistory, formatValidation, POLICY_USAGE } from '../../sdk/src/cli-policy.js';
import type { PolicyFiring, PolicyValidation, PolicyVersionSummary, PolicyView } from '../../sdk/src/index.js';
import { scriptedServerForSuite, sendError, sendJson, type RecordedRequest } from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

interface Run {
  code: number;
  out: string;
  err: string;
}

async function strata(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<Run> {
  let out = '';
  let err = '';
  const ctx: CliContext = {
    stdout: { write: (c: string | Uint8Array) => void (out += typeof c === 'string' ? c : Buffer.from(c).toString('utf8')) },
    stderr: { write: (t: string) => void (err += t) },
    env: { STRATA_ENDPOINT: suite.server.url, ...env },
    stdin: stdin === undefined ? undefined : [Buffer.from(stdin)],
  };
  const code = await runCli(args, ctx);
  return { code, out, err };
}

/** Answers by `METHOD /path`; anything else is a 500 the test would see. */
function route(routes: Record<string, (req: RecordedRequest, res: ServerResponse) => void>): void {
  suite.server.script((req, res) => {
    const handler = routes[`${req.method} ${req.path}`];
    if (handler) handler(req, res);
    else sendError(res, 500, 'INTERNAL', `unexpected ${req.method} ${req.url}`);
  });
}

const DOC = { rules: [{ id: 'flush', on: { timer: { everySeconds: 3600 } }, do: [{ flush: {} }] }] };

const view = (version: number, extra: Partial<PolicyView> = {}): PolicyView => ({
  version,
  source: version === 0 ? 'deployment' : 'runtime',
  document: DOC,
  ...(version === 0 ? {} : { updatedAt: '2026-11-21T12:00:00.000Z', updatedBy: 'alice' }),
  hash: '0123456789abcdef',
  ...extra,
});

const PROBLEMS = [
  { path: 'rules[0].on.timer.everySeconds', rule: 'flush', message: 'must be at least 60' },
  { path: 'controls.maxFleetSize', message: 'must be a whole number' },
];
const PROBLEM_LINES =
  "rules[0].on.timer.everySeconds (rule 'flush'): must be at least 60\ncontrols.maxFleetSize: must be a whole number\n";

function refuse(res: ServerResponse): void {
  sendError(res, 400, 'VALIDATION_FAILED', 'policy: invalid policy document', { field: 'policy', problems: PROBLEMS });
}

let dir: string;
let file: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'strata-cli-policy-'));
  file = join(dir, 'policy.json');
  writeFileSync(file, JSON.stringify(DOC));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('strata policy help', () => {
  it('is listed by strata help; help policy and policy --help print its usage', async () => {
    expect(USAGE).toMatch(/^ {2}policy get \| put <file> \| validate <file> \| history \| rollback <version> \| firings$/m);
    expect(COMMAND_HELP.policy).toContain(POLICY_USAGE);
    expect(await strata(['help', 'policy'])).toEqual({ code: 0, out: `${COMMAND_HELP.policy}\n`, err: '' });
    expect(await strata(['policy', '--help'])).toEqual({ code: 0, out: `${COMMAND_HELP.policy}\n`, err: '' });
    for (const sub of ['get', 'put <file|->', 'validate <file|->', 'history', 'rollback <version>', 'firings [--limit N]'])
      expect(POLICY_USAGE).toContain(`  policy ${sub}`);
  });

  it('a bare `strata policy` prints the usage and exits 2', async () => {
    const r = await strata(['policy']);
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `strata: policy needs a command: get, put, validate, history, rollback, firings\n\nusage: strata policy ` +
        `get|put|validate|history|rollback|firings [options]\n\n${POLICY_USAGE}\n`,
    );
  });

  it.each([
    [['policy', 'frob'], "strata: unknown policy command 'frob'; commands: get, put, validate, history, rollback, firings"],
    [['policy', 'put'], 'strata: policy put needs a file with the policy document (or - for stdin)'],
    [['policy', 'validate'], 'strata: policy validate needs a file with the policy document (or - for stdin)'],
    [['policy', 'rollback'], "strata: policy rollback needs a version (0: the deployment's configuration)"],
    [['policy', 'rollback', 'two'], "strata: the version must be a version number (0, 1, 2, ...), not 'two'"],
    [['policy', 'get', 'extra'], "strata: policy get: unexpected argument 'extra'"],
    [['policy', 'rollback', '1', '2'], "strata: policy rollback: unexpected argument '2'"],
    [['policy', 'get', '--reason', 'x'], 'strata: --reason is not an option of strata policy get'],
    [['policy', 'history', '--if-version', '1'], 'strata: --if-version is not an option of strata policy history'],
    [['policy', 'history', '--limit', '0'], "strata: --limit must be a whole number from 1 to 100, not '0'"],
    [['policy', 'history', '--limit', '101'], "strata: --limit must be a whole number from 1 to 100, not '101'"],
    [['policy', 'firings', '--limit', '0'], "strata: --limit must be a whole number from 1 to 200, not '0'"],
    [['policy', 'firings', '--limit', '201'], "strata: --limit must be a whole number from 1 to 200, not '201'"],
    [['policy', 'firings', '--limit', 'ten'], "strata: --limit must be a whole number from 1 to 200, not 'ten'"],
    [['policy', 'firings', '--before', '3'], 'strata: --before is not an option of strata policy firings'],
    [['policy', 'firings', '--reason', 'x'], 'strata: --reason is not an option of strata policy firings'],
    [['policy', 'firings', 'extra'], "strata: policy firings: unexpected argument 'extra'"],
    [['policy', 'put', '/nonexistent/policy.json'], 'strata: cannot read /nonexistent/policy.json: no such file'],
    [['policy', 'put', '-', '--if-version', 'x'], "strata: --if-version must be a version number (0, 1, 2, ...), not 'x'"],
    [
      ['policy', 'get', '--mode', 'parallel'],
      'strata: --mode is not an option of strata policy (it is an option of strata workflow, node)',
    ],
  ])('%j is a usage error', async (args, message) => {
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'no request was expected'));
    expect(await strata(args, {}, '{}')).toEqual({ code: 2, out: '', err: `${message}; run 'strata help policy'\n` });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('a document that is not JSON, or not an object, is a usage error', async () => {
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'no request was expected'));
    const notJson = await strata(['policy', 'validate', '-'], {}, '{ rules: ');
    expect([notJson.code, notJson.out]).toEqual([2, '']);
    expect(notJson.err).toMatch(/^strata: stdin is not valid JSON: .*; run 'strata help policy'\n$/);
    const array = await strata(['policy', 'put', '-'], {}, '[]');
    expect(array.err).toBe(
      `strata: stdin: a policy document is a JSON object ({ "rules": [...], ... }); run 'strata help policy'\n`,
    );
    expect(suite.server.requests).toHaveLength(0);
  });
});

describe('strata policy get', () => {
  it('prints the document on stdout and its version, author and reason on stderr', async () => {
    route({ 'GET /v1/admin/policy': (_req, res) => sendJson(res, 200, view(3, { reason: 'cap the fleet' })) });
    const r = await strata(['policy', 'get']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual(DOC);
    expect(r.err).toBe(
      'version  3 (runtime)\nwritten  2026-11-21T12:00:00Z by alice\nreason   cap the fleet\nhash     0123456789abcdef\n',
    );
  });

  it('says when the deployment configuration is in force; --json prints the whole view', async () => {
    route({ 'GET /v1/admin/policy': (_req, res) => sendJson(res, 200, view(0)) });
    const r = await strata(['policy', 'get']);
    expect(r.err).toBe("version  0 (deployment)\nwritten  never: the deployment's configuration\nhash     0123456789abcdef\n");
    const j = await strata(['policy', 'get', '--json']);
    expect([j.code, j.err]).toEqual([0, '']);
    expect(JSON.parse(j.out)).toEqual(view(0));
  });

  it('uses $STRATA_ADMIN_API_KEY before $STRATA_API_KEY (an admin route), and --api-key before both', async () => {
    route({ 'GET /v1/admin/policy': (_req, res) => sendJson(res, 200, view(1)) });
    await strata(['policy', 'get'], { STRATA_ADMIN_API_KEY: 'admin', STRATA_API_KEY: 'tenant' });
    await strata(['policy', 'get'], { STRATA_API_KEY: 'tenant' });
    await strata(['policy', 'get', '--api-key', 'given'], { STRATA_ADMIN_API_KEY: 'admin' });
    expect(suite.server.requests.map((r) => r.headers['x-api-key'])).toEqual(['admin', 'tenant', 'given']);
  });

  it('POLICIES_UNAVAILABLE (permanent) prints the server message once and exits 2', async () => {
    const message = 'no policy store is configured in this deployment';
    suite.server.script((_req, res) => sendError(res, 503, 'POLICIES_UNAVAILABLE', message, { permanent: true }));
    expect(await strata(['policy', 'get'])).toEqual({
      code: 2,
      out: '',
      err: `strata: POLICIES_UNAVAILABLE (HTTP 503): ${message}\n`,
    });
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('strata policy put', () => {
  it('with --if-version PUTs the file with if-match and the reason, and prints the new version', async () => {
    route({ 'PUT /v1/admin/policy': (_req, res) => sendJson(res, 200, view(4, { reason: 'freeze' })) });
    const r = await strata(['policy', 'put', file, '--if-version', '3', '--reason', 'freeze']);
    expect(r).toEqual({ code: 0, out: 'policy version 4 in force (replaced version 3; hash 0123456789abcdef)\n', err: '' });
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('PUT /v1/admin/policy');
    expect(req!.headers).toMatchObject({ 'if-match': '3', 'x-strata-reason': 'freeze', 'content-type': 'application/json' });
    expect(JSON.parse(req!.body.toString())).toEqual(DOC);
  });

  it('without --if-version reads the version in force and puts over it; "-" reads stdin; --json prints the view', async () => {
    route({
      'GET /v1/admin/policy': (_req, res) => sendJson(res, 200, view(7)),
      'PUT /v1/admin/policy': (_req, res) => sendJson(res, 200, view(8)),
    });
    const r = await strata(['policy', 'put', '-', '--json'], {}, JSON.stringify({ description: 'from stdin' }));
    expect([r.code, r.err]).toEqual([0, '']);
    expect(JSON.parse(r.out)).toEqual(view(8));
    expect(suite.server.requests.map((q) => `${q.method} ${q.path} ${q.headers['if-match'] ?? ''}`)).toEqual([
      'GET /v1/admin/policy ',
      'PUT /v1/admin/policy 7',
    ]);
    expect(JSON.parse(suite.server.requests[1]!.body.toString())).toEqual({ description: 'from stdin' });
    expect(suite.server.requests[1]!.headers).not.toHaveProperty('x-strata-reason');
  });

  it('a refused document prints each problem on stderr and exits 2', async () => {
    route({ 'PUT /v1/admin/policy': (_req, res) => refuse(res) });
    expect(await strata(['policy', 'put', file, '--if-version', '3'])).toEqual({
      code: 2,
      out: '',
      err: `strata: the policy document was refused:\n${PROBLEM_LINES}`,
    });
  });

  it('a version conflict says what to do next, exits 2, and is not retried', async () => {
    route({
      'PUT /v1/admin/policy': (_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'policy is at version 5', { current: 5 }),
    });
    expect(await strata(['policy', 'put', file, '--if-version', '3'])).toEqual({
      code: 2,
      out: '',
      err:
        'strata: VERSION_CONFLICT (HTTP 409): policy is at version 5\n' +
        "the policy changed since version 3 (it is at version 5 now): read it with 'strata policy get', redo your edit " +
        'and put it with that version\n',
    });
    expect(suite.server.requests).toHaveLength(1);
  });

  it('a reason the SDK refuses (too long for the header) is a failed request naming it, nothing sent', async () => {
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'no request was expected'));
    const r = await strata(['policy', 'put', file, '--if-version', '1', '--reason', 'x'.repeat(201)]);
    expect(r).toEqual({ code: 2, out: '', err: 'strata: VALIDATION_FAILED: reason: must be at most 200 characters (201)\n' });
    expect(suite.server.requests).toHaveLength(0);
  });
});

describe('strata policy validate', () => {
  const validation: PolicyValidation = {
    valid: true,
    document: DOC,
    hash: 'fedcba9876543210',
    namespaces: {},
    wouldFire: [
      { rule: 'flush', mode: 'background', fires: true, reason: 'the timer is due' },
      { rule: 'evict-idle', mode: 'background', fires: false, reason: 'cold fill 0.40 < 0.80' },
    ],
    warnings: ['rule flush runs every hour'],
  };

  it('a valid document: which rules would fire now, and the warnings; exit 0', async () => {
    route({ 'POST /v1/admin/policy/validate': (_req, res) => sendJson(res, 200, validation) });
    const r = await strata(['policy', 'validate', file]);
    expect(r).toEqual({
      code: 0,
      err: '',
      out: [
        'valid policy document (hash fedcba9876543210)',
        'would fire now: flush',
        'RULE        MODE        FIRES  WHY',
        'flush       background  yes    the timer is due',
        'evict-idle  background  no     cold fill 0.40 < 0.80',
        'warning: rule flush runs every hour',
        '',
      ].join('\n'),
    });
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.url}`).toBe('POST /v1/admin/policy/validate');
    expect(JSON.parse(req!.body.toString())).toEqual(DOC);
    expect(formatValidation({ ...validation, wouldFire: [], warnings: [] })).toBe(
      'valid policy document (hash fedcba9876543210)\nno background rules\n',
    );
  });

  it('an invalid document: its problems one a line on stdout, exit 1', async () => {
    route({ 'POST /v1/admin/policy/validate': (_req, res) => refuse(res) });
    expect(await strata(['policy', 'validate', '-'], {}, JSON.stringify(DOC))).toEqual({
      code: 1,
      out: PROBLEM_LINES,
      err: 'strata: invalid policy document (2 problems)\n',
    });
    const j = await strata(['policy', 'validate', file, '--json']);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.out)).toEqual({ valid: false, problems: PROBLEMS });
  });

  it('a request that fails otherwise exits 2', async () => {
    suite.server.script((_req, res) => sendError(res, 503, 'POLICIES_UNAVAILABLE', 'no store', { permanent: true }));
    expect(await strata(['policy', 'validate', file])).toEqual({
      code: 2,
      out: '',
      err: 'strata: POLICIES_UNAVAILABLE (HTTP 503): no store\n',
    });
  });
});

describe('strata policy history', () => {
  const summary = (version: number, extra: Partial<PolicyVersionSummary> = {}): PolicyVersionSummary => ({
    version,
    source: 'runtime',
    updatedAt: '2026-11-21T12:00:00.000Z',
    updatedBy: 'alice',
    hash: 'h',
    previous: version - 1,
    diff: ['~ controls.maxFleetSize: 16 -> 8'],
    ...extra,
  });
  const rows = [
    summary(6, {
      source: 'deployment',
      restoredFrom: 0,
      updatedBy: 'bob',
      reason: 'back to the deployment',
      diff: ['- rules[flush]'],
    }),
    summary(5, { diff: ['+ rules[flush]', '+ budgets[b1]', '~ description', '- controls.minFleetSize'] }),
    summary(4, { diff: [], reason: 'x'.repeat(50) }),
  ];

  it('prints the audit trail as a table, newest first, with --limit and --before in the query', async () => {
    const WHEN = '2026-11-21T12:00:00Z';
    const pad = (n: number): string => ' '.repeat(n);
    route({ 'GET /v1/admin/policy/versions': (_req, res) => sendJson(res, 200, { versions: rows }) });
    const r = await strata(['policy', 'history', '--limit', '3', '--before', '7']);
    expect(r).toEqual({
      code: 0,
      err: '',
      out: [
        'VERSION  WHEN                  WHO    SOURCE      REASON                                    CHANGES',
        `6        ${WHEN}  bob    deployment  back to the deployment${pad(20)}rollback to 0 (deployment); - rules[flush]`,
        `5        ${WHEN}  alice  runtime     -${pad(41)}+ rules[flush]; + budgets[b1] (+2 more)`,
        `4        ${WHEN}  alice  runtime     ${'x'.repeat(39)}…  no change`,
        '',
      ].join('\n'),
    });
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/policy/versions?limit=3&before=7');
    expect(formatPolicyHistory([])).toBe('no policy versions\n');
  });

  it('--json prints the versions as the server sent them', async () => {
    route({ 'GET /v1/admin/policy/versions': (_req, res) => sendJson(res, 200, { versions: rows }) });
    const r = await strata(['policy', 'history', '--json']);
    expect(JSON.parse(r.out)).toEqual(rows);
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/policy/versions');
  });
});

describe('strata policy rollback', () => {
  it('POSTs the version and reason (and if-match with --if-version) and prints what is in force', async () => {
    route({ 'POST /v1/admin/policy/rollback': (_req, res) => sendJson(res, 200, view(9)) });
    const r = await strata(['policy', 'rollback', '2', '--reason', 'undo', '--if-version', '8']);
    expect(r).toEqual({
      code: 0,
      out: "policy version 9 in force: version 2's document restored (hash 0123456789abcdef)\n",
      err: '',
    });
    const [req] = suite.server.requests;
    expect(req!.headers['if-match']).toBe('8');
    expect(JSON.parse(req!.body.toString())).toEqual({ version: 2, reason: 'undo' });
  });

  it('rollback 0 goes back to the deployment configuration', async () => {
    route({ 'POST /v1/admin/policy/rollback': (_req, res) => sendJson(res, 200, view(10, { source: 'deployment' })) });
    const r = await strata(['policy', 'rollback', '0']);
    expect(r.out).toBe("policy version 10 in force: the deployment's configuration restored (hash 0123456789abcdef)\n");
    expect(suite.server.requests[0]!.headers).not.toHaveProperty('if-match');
    expect(JSON.parse(suite.server.requests[0]!.body.toString())).toEqual({ version: 0 });
  });

  it('an unknown version is a failed request (exit 2); a conflict says what to do', async () => {
    route({ 'POST /v1/admin/policy/rollback': (_req, res) => sendError(res, 404, 'NOT_FOUND', 'no policy version 42') });
    expect(await strata(['policy', 'rollback', '42'])).toEqual({
      code: 2,
      out: '',
      err: 'strata: NOT_FOUND (HTTP 404): no policy version 42\n',
    });
    route({ 'POST /v1/admin/policy/rollback': (_req, res) => sendError(res, 409, 'VERSION_CONFLICT', 'stale', { current: 9 }) });
    const r = await strata(['policy', 'rollback', '2', '--if-version', '8']);
    expect(r.code).toBe(2);
    expect(r.err).toContain(
      "the policy changed since version 8 (it is at version 9 now): read it with 'strata policy get', roll back with " +
        '--if-version set to that version\n',
    );
  });
});

describe('strata policy firings', () => {
  const rows: PolicyFiring[] = [
    {
      at: '2026-11-21T12:05:00.000Z',
      rule: 'grow-hot',
      response: 'grow',
      outcome: 'done',
      detail: 'ScaleOut by 1 (execution scale-out-20261121T120500Z-a1b2c3)',
    },
    {
      at: '2026-11-21T12:00:00.000Z',
      rule: 'grow-hot',
      response: 'grow',
      outcome: 'suppressed',
      detail: 'at most 6 background actions a minute (controls)',
    },
    { at: '2026-11-21T11:59:00.000Z', rule: 'page-ops', response: 'alert', outcome: 'done', detail: '' },
  ];

  it('prints the firings as a table, newest first, with --limit in the query', async () => {
    route({ 'GET /v1/admin/policy/firings': (_req, res) => sendJson(res, 200, { firings: rows }) });
    const r = await strata(['policy', 'firings', '--limit', '3']);
    expect(r).toEqual({
      code: 0,
      err: '',
      out: [
        'WHEN                  RULE      RESPONSE  OUTCOME     DETAIL',
        '2026-11-21T12:05:00Z  grow-hot  grow      done        ScaleOut by 1 (execution scale-out-20261121T120500Z-a1b2c3)',
        '2026-11-21T12:00:00Z  grow-hot  grow      suppressed  at most 6 background actions a minute (controls)',
        '2026-11-21T11:59:00Z  page-ops  alert     done        -',
        '',
      ].join('\n'),
    });
    expect(suite.server.requests.map((q) => `${q.method} ${q.url}`)).toEqual(['GET /v1/admin/policy/firings?limit=3']);
    expect(formatPolicyFirings([])).toBe('no background rule has fired\n');
  });

  it('--json prints the firings as the server sent them; none is an empty table message', async () => {
    route({ 'GET /v1/admin/policy/firings': (_req, res) => sendJson(res, 200, { firings: rows }) });
    const j = await strata(['policy', 'firings', '--json']);
    expect([j.code, j.err]).toEqual([0, '']);
    expect(JSON.parse(j.out)).toEqual(rows);
    expect(suite.server.requests[0]!.url).toBe('/v1/admin/policy/firings');
    route({ 'GET /v1/admin/policy/firings': (_req, res) => sendJson(res, 200, { firings: [] }) });
    expect(await strata(['policy', 'firings'])).toEqual({ code: 0, out: 'no background rule has fired\n', err: '' });
  });

  it('where no background evaluator runs: the server message once, exit 2', async () => {
    const message = 'no background evaluator runs in this runtime';
    suite.server.script((_req, res) => sendError(res, 503, 'POLICIES_UNAVAILABLE', message, { permanent: true }));
    expect(await strata(['policy', 'firings'])).toEqual({
      code: 2,
      out: '',
      err: `strata: POLICIES_UNAVAILABLE (HTTP 503): ${message}\n`,
    });
    expect(suite.server.requests).toHaveLength(1);
  });
});
