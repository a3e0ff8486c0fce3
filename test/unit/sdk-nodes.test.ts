/**
 * The SDK's node admin methods (`client.nodes`, `client.nodes.replacement`) and the `strata node` command, against a
 * real local node:http server that scripts responses and records requests as they arrived on the wire.
 */
import {
  ExecutionExistsError,
  NodesClient,
  NotFoundError,
  ReplacementControlsClient,
  StrataClient,
  StrataServerError,
  UnavailableError,
  ValidationError,
  VersionConflictError,
  type CacheNode,
  type NodeList,
  type ReplaceNodeOptions,
  type StrataClientOptions,
} from '../../sdk/src/index.js';
import { runCli, type CliContext } from '../../sdk/src/cli-run.js';
import { describeReplacement, formatNodeList, formatRemoval } from '../../sdk/src/cli-node.js';
import { scriptedServerForSuite, sendError, sendJson } from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

function client(extra: Partial<StrataClientOptions> = {}): StrataClient {
  return new StrataClient({
    endpoint: suite.server.url,
    apiKey: 'admin-key',
    retryBaseDelayMs: 1,
    retryMaxDelayMs: 5,
    timeoutMs: 2000,
    ...extra,
  });
}

const T0 = '2026-11-21T12:00:00.000Z';
const node = (id: string, extra: Partial<CacheNode> = {}): CacheNode => ({
  id,
  url: `http://10.0.1.${id.slice(1)}:7070`,
  state: 'NORMAL',
  az: 'us-east-1a',
  instance: `i-${id}`,
  addedAt: T0,
  ranges: 2,
  ...extra,
});
const LIST: NodeList = {
  ringVersion: 7,
  nodes: [
    node('n1'),
    node('n2', { az: 'us-east-1b' }),
    node('n3', { state: 'DOWN', down: { at: '2026-11-21T11:59:30.000Z', reason: 'health check: 3 failed probes' } }),
  ],
  replacement: { paused: false },
};
const summary = (
  execution = 'replace-node-20261121T120000Z-abcdef',
  status = 'RUNNING',
  extra: Record<string, unknown> = {},
) => ({
  execution,
  workflow: 'replace-node',
  status,
  startedAt: T0,
  ...extra,
});
const sent = () => suite.server.requests.map((r) => `${r.method} ${r.url}`);
const sentBody = (i = 0): unknown => JSON.parse(suite.server.requests[i]!.body.toString());

describe('client.nodes', () => {
  it('is a NodesClient on every client, with the replacement controls', () => {
    expect(client().nodes).toBeInstanceOf(NodesClient);
    expect(client().nodes.replacement).toBeInstanceOf(ReplacementControlsClient);
  });

  it('list GETs /v1/admin/nodes with the API key and resolves the nodes as the server sent them', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, LIST));
    const got = await client().nodes.list();
    expect(got).toEqual(LIST);
    // Typed: the states of the contract, the DOWN record.
    const down: CacheNode | undefined = got.nodes.find((n) => n.state === 'DOWN');
    expect(down?.down?.reason).toBe('health check: 3 failed probes');
    expect(sent()).toEqual(['GET /v1/admin/nodes']);
    expect(suite.server.requests[0]!.headers['x-api-key']).toBe('admin-key');
  });

  it('list raises INVALID_RESPONSE for a body that is not a node list, and retries a 5xx (a read)', async () => {
    for (const bad of [{ nodes: 'x' }, { ringVersion: 1, nodes: [{ id: 'n1' }], replacement: { paused: false } }, LIST.nodes]) {
      suite.server.script((_req, res) => sendJson(res, 200, bad));
      await expect(client().nodes.list()).rejects.toMatchObject({ constructor: StrataServerError, code: 'INVALID_RESPONSE' });
    }
    let n = 0;
    suite.server.script((_req, res) =>
      n++ === 0 ? sendError(res, 503, 'TIER_UNAVAILABLE', 'ring store') : sendJson(res, 200, LIST),
    );
    expect((await client().nodes.list()).ringVersion).toBe(7);
    expect(n).toBe(2);
  });

  it('raises UnavailableError, permanent and not retried, where the runtime has no warm tier', async () => {
    suite.server.script((_req, res) =>
      sendError(res, 503, 'TIER_UNAVAILABLE', 'this runtime has no warm tier', { tier: 'warm', permanent: true }),
    );
    const err = await client()
      .nodes.list()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(err).toMatchObject({ permanent: true, retryable: false });
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('client.nodes.replace', () => {
  it("POSTs the options to the node's replace route, with the name in the query, and resolves the execution", async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary('replace-n3')));
    const options: ReplaceNodeOptions = { fillNamespaces: ['sessions', 'carts'], rateBytesPerSec: 16 << 20, terminate: false };
    const run = await client().nodes.replace('n3', options, { name: 'replace-n3' });
    expect(run).toEqual({
      execution: 'replace-n3',
      workflow: 'replace-node',
      status: 'RUNNING',
      startedAt: new Date(T0),
      stoppedAt: null,
    });
    expect(sent()).toEqual(['POST /v1/admin/nodes/n3/replace?name=replace-n3']);
    expect(suite.server.requests[0]!.headers['content-type']).toBe('application/json');
    expect(sentBody()).toEqual(options);
  });

  it('sends {} without options, and percent-encodes node ids with a colon', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary()));
    await client().nodes.replace('i-0abc:7070');
    expect(sent()).toEqual(['POST /v1/admin/nodes/i-0abc%3A7070/replace']);
    expect(sentBody()).toEqual({});
  });

  it('refuses a bad node id, nodeId among the options, a bad name, before sending', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary()));
    const c = client();
    for (const bad of ['', 'a b', 'x'.repeat(65), 'replacement', '..', 'n1/2']) {
      await expect(c.nodes.replace(bad)).rejects.toMatchObject({ constructor: ValidationError, status: 0, field: 'nodeId' });
    }
    await expect(c.nodes.replace('n3', { nodeId: 'n4' } as ReplaceNodeOptions)).rejects.toMatchObject({ field: 'input.nodeId' });
    await expect(c.nodes.replace('n3', [] as unknown as ReplaceNodeOptions)).rejects.toMatchObject({ field: 'input' });
    await expect(c.nodes.replace('n3', {}, { name: 'a b' })).rejects.toMatchObject({ field: 'name' });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('maps the server refusals to their classes, and does not repeat a start after a 5xx', async () => {
    suite.server.script((_req, res) =>
      sendError(res, 400, 'VALIDATION_FAILED', 'body.rateBytesPerSec: too small', { field: 'body.rateBytesPerSec' }),
    );
    await expect(client().nodes.replace('n3', { rateBytesPerSec: 5 })).rejects.toMatchObject({
      constructor: ValidationError,
      field: 'body.rateBytesPerSec',
    });
    suite.server.script((_req, res) => sendError(res, 409, 'EXECUTION_EXISTS', 'taken', { execution: 'replace-n3' }));
    await expect(client().nodes.replace('n3', {}, { name: 'replace-n3' })).rejects.toBeInstanceOf(ExecutionExistsError);
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'boom'));
    await expect(client().nodes.replace('n3')).rejects.toBeInstanceOf(StrataServerError);
    expect(suite.server.requests).toHaveLength(1);
  });
});

describe('client.nodes.remove', () => {
  it('DELETEs the node and resolves the new ring version and the moved ranges', async () => {
    const removal = { ringVersion: 9, moved: [{ start: '0000000000000000', end: '4000000000000000', to: 'n1' }] };
    suite.server.script((_req, res) => sendJson(res, 200, removal));
    expect(await client().nodes.remove('n3')).toEqual(removal);
    expect(sent()).toEqual(['DELETE /v1/admin/nodes/n3']);
  });

  it('raises NotFoundError for a node not in the ring, VersionConflictError for one that is not DOWN; neither is retried', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'NOT_FOUND', "node 'n9' is not in ring version 7", { node: 'n9' }));
    await expect(client().nodes.remove('n9')).rejects.toBeInstanceOf(NotFoundError);
    suite.server.script((_req, res) =>
      sendError(res, 409, 'VERSION_CONFLICT', "node 'n1' is NORMAL, not DOWN", { node: 'n1', state: 'NORMAL', ringVersion: 7 }),
    );
    const err = await client()
      .nodes.remove('n1')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VersionConflictError);
    expect(err).toMatchObject({ message: "node 'n1' is NORMAL, not DOWN", details: { state: 'NORMAL' } });
    expect(suite.server.requests).toHaveLength(1);
  });

  it('is not repeated after a 503 (it may have gone through), and refuses `replacement` before sending', async () => {
    suite.server.script((_req, res) =>
      sendError(res, 503, 'TIER_UNAVAILABLE', 'a receiver could not be reached', { tier: 'warm' }),
    );
    await expect(client().nodes.remove('n3')).rejects.toBeInstanceOf(UnavailableError);
    expect(suite.server.requests).toHaveLength(1);
    suite.server.script((_req, res) => sendJson(res, 200, {}));
    await expect(client().nodes.remove('replacement')).rejects.toMatchObject({ field: 'nodeId' });
    expect(suite.server.requests).toHaveLength(0);
  });
});

describe('client.nodes.replacement', () => {
  it('get, pause (with and without a reason) and resume: GET and PUT /v1/admin/nodes/replacement', async () => {
    const answers = [
      { paused: false },
      { paused: true, by: 'ops', reason: 'INC-42', at: T0 },
      { paused: true, by: 'ops', at: T0 },
      { paused: false, by: 'ops', at: T0 },
    ];
    let i = 0;
    suite.server.script((_req, res) => sendJson(res, 200, answers[i++]));
    const c = client().nodes.replacement;
    expect(await c.get()).toEqual(answers[0]);
    expect(await c.pause('INC-42')).toEqual(answers[1]);
    expect(await c.pause()).toEqual(answers[2]);
    expect(await c.resume()).toEqual(answers[3]);
    expect(sent()).toEqual([
      'GET /v1/admin/nodes/replacement',
      'PUT /v1/admin/nodes/replacement',
      'PUT /v1/admin/nodes/replacement',
      'PUT /v1/admin/nodes/replacement',
    ]);
    expect([1, 2, 3].map(sentBody)).toEqual([{ paused: true, reason: 'INC-42' }, { paused: true }, { paused: false }]);
  });

  it('refuses a reason above 200 characters before sending; raises INVALID_RESPONSE for a body without `paused`', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { paused: 'yes' }));
    await expect(client().nodes.replacement.pause('x'.repeat(201))).rejects.toMatchObject({ field: 'reason', status: 0 });
    expect(suite.server.requests).toHaveLength(0);
    await expect(client().nodes.replacement.get()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });
});

describe('strata node (CLI, in-process)', () => {
  interface Run {
    code: number;
    out: string;
    err: string;
  }
  async function strata(args: string[], env: Record<string, string> = {}): Promise<Run> {
    let out = '';
    let err = '';
    const ctx: CliContext = {
      stdout: { write: (c: string | Uint8Array) => void (out += typeof c === 'string' ? c : Buffer.from(c).toString('utf8')) },
      stderr: { write: (t: string) => void (err += t) },
      env: { STRATA_ENDPOINT: suite.server.url, ...env },
    };
    return { code: await runCli(args, ctx), out, err };
  }

  it('list prints the ring version, the replacement controls and a table of the nodes; --json the answer', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, LIST));
    const r = await strata(['node', 'list'], { STRATA_ADMIN_API_KEY: 'ops-key', STRATA_API_KEY: 'tenant-key' });
    expect([r.code, r.err]).toEqual([0, '']);
    expect(r.out).toBe(
      [
        'ring version 7, 3 nodes',
        'automatic replacement: on',
        '',
        'NODE  STATE   RANGES  AZ          INSTANCE  URL                   DOWN SINCE',
        'n1    NORMAL  2       us-east-1a  i-n1      http://10.0.1.1:7070  -',
        'n2    NORMAL  2       us-east-1b  i-n2      http://10.0.1.2:7070  -',
        'n3    DOWN    2       us-east-1a  i-n3      http://10.0.1.3:7070  2026-11-21T11:59:30Z health check: 3 failed probes',
        '',
      ].join('\n'),
    );
    // An admin command: the admin key first.
    expect(suite.server.requests[0]!.headers['x-api-key']).toBe('ops-key');
    const json = await strata(['node', 'list', '--json']);
    expect(JSON.parse(json.out)).toEqual(LIST);
  });

  it('replace sends --fill, --rate, --no-terminate, --reason and --name as the options and prints the execution', async () => {
    suite.server.script((_req, res) => sendJson(res, 202, summary('replace-n3')));
    const r = await strata([
      'node',
      'replace',
      'n3',
      '--fill',
      'sessions, carts',
      '--rate',
      '16777216',
      '--no-terminate',
      '--reason',
      'disk failed',
      '--name',
      'replace-n3',
    ]);
    expect([r.code, r.err]).toEqual([0, '']);
    expect(sent()).toEqual(['POST /v1/admin/nodes/n3/replace?name=replace-n3']);
    expect(sentBody()).toEqual({
      fillNamespaces: ['sessions', 'carts'],
      rateBytesPerSec: 16777216,
      terminate: false,
      reason: 'disk failed',
    });
    expect(JSON.parse(r.out)).toMatchObject({ execution: 'replace-n3', workflow: 'replace-node', status: 'RUNNING' });
  });

  it('replace --wait follows the execution as workflow start --wait does: progress in phases, exit 0 or 1', async () => {
    const progress = (done: number, phase: string) => ({
      execution: 'replace-n3',
      workflow: 'replace-node',
      phase,
      total: 3,
      done,
      keys: 0,
      bytes: 0,
      startedAt: T0,
      updatedAt: T0,
      facts: {},
      fraction: done / 3,
      unit: 'phases',
    });
    for (const [final, code] of [
      [{ ...summary('replace-n3', 'SUCCEEDED', { stoppedAt: '2026-11-21T12:01:00.000Z' }), progress: progress(3, 'filled') }, 0],
      [
        {
          ...summary('replace-n3', 'FAILED', { stoppedAt: T0 }),
          error: { Error: 'RingDocumentError', Cause: "node 'n3' is NORMAL, not DOWN" },
        },
        1,
      ],
    ] as const) {
      let polls = 0;
      suite.server.script((req, res) => {
        if (req.method === 'POST') return sendJson(res, 202, summary('replace-n3'));
        return sendJson(res, 200, polls++ === 0 ? { ...summary('replace-n3'), progress: progress(1, 'launched n4') } : final);
      });
      const r = await strata(['node', 'replace', 'n3', '--wait', '--interval', '1']);
      expect(r.code).toBe(code);
      expect(r.err).toContain('started replace-n3 (replacing node n3)\n');
      expect(r.err).toContain('1/3 phases');
      expect(JSON.parse(r.out)).toMatchObject({ execution: 'replace-n3', status: final.status });
      if (code === 0) expect(r.err).toContain('replace-n3 SUCCEEDED in 1 min 00 s');
      else expect(r.err).toContain("strata: replace-n3 FAILED after 0.0 s: RingDocumentError: node 'n3' is NORMAL, not DOWN");
    }
  });

  it('remove prints who took the ranges; a refusal is one line with the code, exit 2', async () => {
    suite.server.script((_req, res) =>
      sendJson(res, 200, {
        ringVersion: 9,
        moved: [
          { start: '0000000000000000', end: '4000000000000000', to: 'n1' },
          { start: '8000000000000000', end: null, to: 'n2' },
        ],
      }),
    );
    const ok = await strata(['node', 'remove', 'n3']);
    expect(ok).toEqual({
      code: 0,
      out: 'removed node n3: ring version 9; its 2 ranges went to n1 (1), n2 (1), empty (they fill by read-through)\n',
      err: '',
    });
    expect(sent()).toEqual(['DELETE /v1/admin/nodes/n3']);

    suite.server.script((_req, res) =>
      sendError(res, 409, 'VERSION_CONFLICT', "node 'n1' is NORMAL, not DOWN: only a DOWN node is replaced or removed this way"),
    );
    expect(await strata(['node', 'remove', 'n1'])).toEqual({
      code: 2,
      out: '',
      err: "strata: VERSION_CONFLICT (HTTP 409): node 'n1' is NORMAL, not DOWN: only a DOWN node is replaced or removed this way\n",
    });
  });

  it('replacement pause --reason, resume and status print one line (--json the controls)', async () => {
    const answers = [
      { paused: true, by: 'ops', reason: 'network incident', at: '2026-11-21T12:00:00.123Z' },
      { paused: false, by: 'ops', at: '2026-11-21T12:30:00.000Z' },
      { paused: false },
    ];
    let i = 0;
    suite.server.script((_req, res) => sendJson(res, 200, answers[i++]));
    expect(await strata(['node', 'replacement', 'pause', '--reason', 'network incident'])).toEqual({
      code: 0,
      out: 'automatic replacement: PAUSED by ops at 2026-11-21T12:00:00Z: network incident\n',
      err: '',
    });
    expect((await strata(['node', 'replacement', 'resume'])).out).toBe(
      'automatic replacement: on (resumed by ops at 2026-11-21T12:30:00Z)\n',
    );
    expect(JSON.parse((await strata(['node', 'replacement', 'status', '--json'])).out)).toEqual({ paused: false });
    expect(sent()).toEqual([
      'PUT /v1/admin/nodes/replacement',
      'PUT /v1/admin/nodes/replacement',
      'GET /v1/admin/nodes/replacement',
    ]);
    expect([0, 1].map(sentBody)).toEqual([{ paused: true, reason: 'network incident' }, { paused: false }]);
  });

  it.each([
    [['node', 'replace'], "strata: node replace needs a node id (strata node list shows them); run 'strata help node'\n"],
    [
      ['node', 'remove', 'a b'],
      "strata: 'a b' is not a node id: 1-64 characters of A-Z a-z 0-9 _ . : -; run 'strata help node'\n",
    ],
    [['node', 'replace', 'n3', '--rate', '8MiB'], expect.stringContaining("--rate is the fill's cap in bytes per second")],
    [['node', 'replace', 'n3', '--fill', ','], expect.stringContaining('--fill needs namespaces, comma-separated')],
    [
      ['node', 'replace', 'n3', '--interval', '5'],
      expect.stringContaining('--interval is the poll interval of --wait: add --wait'),
    ],
    [['node', 'remove', 'n3', '--fill', 'a'], "strata: --fill is not an option of strata node remove; run 'strata help node'\n"],
    [['node', 'list', 'extra'], "strata: node list: unexpected argument 'extra'; run 'strata help node'\n"],
    [['node', 'replacement'], "strata: node replacement needs pause, resume or status; run 'strata help node'\n"],
    [
      ['node', 'replacement', 'stop'],
      expect.stringContaining("unknown node replacement command 'stop'; commands: pause, resume, status"),
    ],
    [
      ['node', 'replacement', 'resume', '--reason', 'x'],
      expect.stringContaining('--reason goes with node replacement pause, not resume'),
    ],
    [
      ['node', 'frobnicate'],
      expect.stringContaining("unknown node command 'frobnicate'; commands: list, replace, remove, replacement"),
    ],
    [['node', 'list', '--limit', '3'], expect.stringContaining('--limit is not an option of strata node')],
  ])('%j is a usage error before any request', async (args, err) => {
    suite.server.script((_req, res) => sendError(res, 500, 'INTERNAL', 'no request was expected'));
    expect(await strata(args)).toEqual({ code: 2, out: '', err });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('a bare `strata node` prints its usage; `strata help node` lists every subcommand and option', async () => {
    const bare = await strata(['node']);
    expect(bare.code).toBe(2);
    expect(bare.err).toMatch(/^strata: node needs a command: list, replace, remove, replacement, upgrade\n\nusage: strata node /);
    const help = await strata(['help', 'node']);
    expect(help.code).toBe(0);
    for (const s of [
      'node list',
      'node replace <node>',
      '--fill',
      '--rate',
      '--no-terminate',
      '--wait',
      'node remove <node>',
      'node replacement pause',
    ])
      expect(help.out).toContain(s);
  });

  it('formats an empty ring, a paused switch without reason and a removal of one range', () => {
    expect(formatNodeList({ ringVersion: null, nodes: [], replacement: { paused: false } })).toBe(
      'no ring yet: the warm tier has no nodes\nautomatic replacement: on\n',
    );
    expect(describeReplacement({ paused: true })).toBe('automatic replacement: PAUSED');
    expect(formatRemoval('n3', { ringVersion: 4, moved: [{ start: '0000000000000000', end: null, to: 'n1' }] })).toBe(
      'removed node n3: ring version 4; its 1 range went to n1 (1), empty (they fill by read-through)\n',
    );
  });
});
