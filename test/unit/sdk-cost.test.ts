/**
 * The SDK's cost methods (`client.cost`) and the `strata cost` command, against a real local node:http server that
 * scripts responses and records requests as they arrived on the wire.
 */
import { COST_USAGE as OFFLINE_USAGE } from '../../core/composition/cost-cli.js';
import { COST_OPTIONS, COST_USAGE, costCommand } from '../../sdk/src/cli-cost.js';
import { UsageError, type CliIo } from '../../sdk/src/cli-workflow.js';
import {
  StrataClient,
  StrataServerError,
  ValidationError,
  type CostPlacementsResult,
  type StrataClientOptions,
} from '../../sdk/src/index.js';
import { scriptedServerForSuite, sendError, sendJson, type RecordedRequest } from '../../sdk/test/scripted-server.js';

const suite = scriptedServerForSuite();

function client(extra: Partial<StrataClientOptions> = {}): StrataClient {
  return new StrataClient({
    endpoint: suite.server.url,
    apiKey: 'tenant-key',
    retryBaseDelayMs: 1,
    retryMaxDelayMs: 5,
    timeoutMs: 2000,
    ...extra,
  });
}

const PLACEMENTS: CostPlacementsResult = {
  workload: {
    valueBytes: 1e6,
    keys: 500,
    requestsPerMonth: 2000,
    persistent: false,
    serviceTimeMs: 1000,
    transferOut: 'internet',
  },
  writesPerMonth: 490.9,
  catalog: { id: 'aws-2026-11', version: '2026.11.0' },
  region: 'us-east-1',
  rankBy: 'cost-per-speedup',
  recommendations: [
    {
      rank: 1,
      placement: { id: 's3:STANDARD', label: 'S3', kind: 's3', tier: 'cold', persistent: true, storageClass: 'STANDARD' },
      nodes: 0,
      cost: { alloc: 0, store: 0.01, req: 0.003, io: 0.17, access: 0.01, total: 0.19 },
      speedup: 3.49,
      costPerSpeedup: 0.055,
      hitLatencyMs: 41.1,
      meetsLatency: true,
      notes: [],
    },
  ],
  ranked: 26,
  excluded: [],
  text: 'Placements for 1 MB values ...\n\n #  placement\n 1  s3:STANDARD',
};
const PAPER = {
  tables: 'TABLE III ...\n\nTABLE IV ...',
  discrepancies: [{ id: 'D1' }],
  discrepanciesText: 'Paper 001 cells its formulas do not give (34):',
  cells: [{ key: 'III/1 KB/m1.small-mem/2000/C' }],
};
const CATALOGS = {
  catalogs: [
    {
      id: 'aws-2026-11',
      version: '2026.11.0',
      hoursPerMonth: 730,
      regions: ['us-east-1'],
      asOf: ['2026-11'],
      description: 'AWS',
    },
  ],
  defaultCatalog: 'aws-2026-11',
  defaultRegion: 'us-east-1',
  text: 'aws-2026-11 (2026.11.0, prices as of 2026-11): us-east-1\n  AWS',
};

/** Answers the three cost routes with the fixtures above. */
function costServer(req: RecordedRequest, res: Parameters<Parameters<typeof suite.server.script>[0]>[1]): void {
  if (req.path === '/v1/cost/placements') return sendJson(res, 200, PLACEMENTS);
  if (req.path === '/v1/cost/paper-2010') return sendJson(res, 200, PAPER);
  if (req.path === '/v1/cost/catalogs') return sendJson(res, 200, CATALOGS);
  return sendError(res, 404, 'ROUTE_NOT_FOUND', `no route ${req.method} ${req.path}`);
}

const query = (req: RecordedRequest): Record<string, string> => Object.fromEntries(new URL(req.url, 'http://x').searchParams);

describe('client.cost.placements', () => {
  it('sends the workload as query parameters of GET /v1/cost/placements with the API key, and resolves the answer', async () => {
    suite.server.script(costServer);
    const r = await client().cost.placements({
      valueSize: '1MB',
      keys: 500,
      requestsPerMonth: '200k',
      writesPerMonth: 10,
      persistent: true,
      latencyTarget: 5,
      serviceTime: '2s',
      inRegion: false,
      region: 'eu-west-1',
      catalog: 'paper-2010',
      rankBy: 'cost',
      top: 3,
    });
    expect(r).toEqual(PLACEMENTS);
    const [req] = suite.server.requests;
    expect(`${req!.method} ${req!.path}`).toBe('GET /v1/cost/placements');
    expect(req!.headers['x-api-key']).toBe('tenant-key');
    expect(query(req!)).toEqual({
      valueSize: '1MB',
      keys: '500',
      requestsPerMonth: '200k',
      writesPerMonth: '10',
      persistent: 'true',
      latencyTarget: '5',
      serviceTime: '2s',
      inRegion: 'false',
      region: 'eu-west-1',
      catalog: 'paper-2010',
      rankBy: 'cost',
      top: '3',
    });
  });

  it('sends only the fields given, encoded', async () => {
    suite.server.script(costServer);
    await client().cost.placements({ valueSize: '1.5 MiB', keys: '1M', requestsPerMonth: 0 });
    expect(suite.server.requests[0]!.url).toBe('/v1/cost/placements?valueSize=1.5+MiB&keys=1M&requestsPerMonth=0');
  });

  it('rejects what a query cannot carry before sending anything', async () => {
    suite.server.script(costServer);
    await expect(client().cost.placements({ valueSize: Infinity, keys: 1, requestsPerMonth: 1 })).rejects.toMatchObject({
      constructor: ValidationError,
      status: 0,
      field: 'valueSize',
    });
    await expect(
      client().cost.placements({ valueSize: 1, keys: { n: 1 } as unknown as number, requestsPerMonth: 1 }),
    ).rejects.toMatchObject({ field: 'keys' });
    await expect(
      client().cost.placements(null as unknown as { valueSize: 1; keys: 1; requestsPerMonth: 1 }),
    ).rejects.toMatchObject({ field: 'workload' });
    expect(suite.server.requests).toHaveLength(0);
  });

  it("raises the server's 400 as a ValidationError naming the parameter, without retrying", async () => {
    suite.server.script((_req, res) =>
      sendError(res, 400, 'VALIDATION_FAILED', 'valueSize: not a size: "huge"', { field: 'valueSize' }),
    );
    const err = await client()
      .cost.placements({ valueSize: 'huge', keys: 1, requestsPerMonth: 1 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ status: 400, field: 'valueSize', message: 'valueSize: not a size: "huge"' });
    expect(suite.server.requests).toHaveLength(1);
  });

  it('retries a 503 (the question is a read), and refuses an answer without the fields it relies on', async () => {
    let n = 0;
    suite.server.script((req, res) => (n++ === 0 ? sendError(res, 503, 'TIER_UNAVAILABLE', 'busy') : costServer(req, res)));
    await expect(client().cost.placements({ valueSize: 1, keys: 1, requestsPerMonth: 1 })).resolves.toMatchObject({ ranked: 26 });
    expect(suite.server.requests).toHaveLength(2);

    suite.server.script((_req, res) => sendJson(res, 200, { recommendations: [] }));
    await expect(client().cost.placements({ valueSize: 1, keys: 1, requestsPerMonth: 1 })).rejects.toMatchObject({
      constructor: StrataServerError,
      code: 'INVALID_RESPONSE',
      status: 200,
    });
  });
});

describe('client.cost.paper2010 and client.cost.catalogs', () => {
  it('GET their routes and resolve the answers', async () => {
    suite.server.script(costServer);
    await expect(client().cost.paper2010()).resolves.toEqual(PAPER);
    await expect(client().cost.catalogs()).resolves.toEqual(CATALOGS);
    expect(suite.server.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /v1/cost/paper-2010',
      'GET /v1/cost/catalogs',
    ]);
  });

  it('refuse answers that are not what the routes send', async () => {
    suite.server.script((_req, res) => sendJson(res, 200, { tables: 'x' }));
    await expect(client().cost.paper2010()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
    suite.server.script((_req, res) => sendJson(res, 200, { catalogs: 'none', text: '' }));
    await expect(client().cost.catalogs()).rejects.toMatchObject({ code: 'INVALID_RESPONSE' });
  });
});

describe('strata cost', () => {
  function io(): CliIo & { out: string; err: string } {
    const o = { out: '', err: '' } as CliIo & { out: string; err: string };
    o.stdout = { write: (t: string) => (o.out += t) };
    o.stderr = { write: (t: string) => (o.err += t) };
    return o;
  }
  const cost = async (flags: Record<string, string | boolean>) => {
    const out = io();
    const code = await costCommand(client(), flags, out);
    return { code, out: out.out, err: out.err };
  };

  it('takes the flags of `npm run cost` (core/composition/cost-cli.ts), no more and no fewer', () => {
    // The first column of the option lines: `  --value-size <size>    ...`, `  --paper-2010 --tables   ...`, `  -h, --help`.
    const flags = (usage: string) =>
      new Set(
        usage
          .split('\n')
          .filter((l) => /^ {2}(-h, )?--/.test(l))
          .flatMap(
            (l) =>
              l
                .trim()
                .split(/\s{2,}/)[0]!
                .match(/--[a-z0-9-]+/g) ?? [],
          ),
      );
    expect(flags(COST_USAGE)).toEqual(flags(OFFLINE_USAGE));
    expect(Object.keys(COST_OPTIONS).sort()).toEqual(
      [...flags(OFFLINE_USAGE)]
        .map((f) => f.slice(2))
        .filter((f) => f !== 'json' && f !== 'help')
        .sort(),
    );
  });

  it("prints the server's table for a workload, each flag sent as its query parameter", async () => {
    suite.server.script(costServer);
    const r = await cost({
      'value-size': '1MB',
      keys: '500',
      'requests-per-month': '2000',
      'writes-per-month': '10',
      persistent: true,
      'latency-target': '5ms',
      'service-time': '2s',
      'in-region': true,
      region: 'eu-west-1',
      catalog: 'aws-2026-11',
      'rank-by': 'cost',
      top: '3',
    });
    expect(r).toEqual({ code: 0, out: `${PLACEMENTS.text}\n`, err: '' });
    expect(query(suite.server.requests[0]!)).toEqual({
      valueSize: '1MB',
      keys: '500',
      requestsPerMonth: '2000',
      writesPerMonth: '10',
      persistent: 'true',
      latencyTarget: '5ms',
      serviceTime: '2s',
      inRegion: 'true',
      region: 'eu-west-1',
      catalog: 'aws-2026-11',
      rankBy: 'cost',
      top: '3',
    });
  });

  it('prices a workload with the 2010 catalog under --paper-2010, and prints the answer as JSON with --json', async () => {
    suite.server.script(costServer);
    const r = await cost({ 'paper-2010': true, 'value-size': '1MB', keys: '500', 'requests-per-month': '2000', json: true });
    expect(query(suite.server.requests[0]!)).toMatchObject({ catalog: 'paper-2010' });
    const { text: _text, ...withoutText } = PLACEMENTS;
    expect(JSON.parse(r.out)).toEqual(withoutText);
  });

  it('prints the tables then the discrepancies for --paper-2010 --tables, the discrepancies alone for --discrepancies', async () => {
    suite.server.script(costServer);
    expect((await cost({ 'paper-2010': true, tables: true })).out).toBe(`${PAPER.tables}\n\n${PAPER.discrepanciesText}\n`);
    expect((await cost({ 'paper-2010': true })).out).toBe(`${PAPER.tables}\n\n${PAPER.discrepanciesText}\n`);
    expect((await cost({ discrepancies: true })).out).toBe(`${PAPER.discrepanciesText}\n`);
    expect(JSON.parse((await cost({ tables: true, json: true })).out)).toEqual({
      cells: PAPER.cells,
      discrepancies: PAPER.discrepancies,
    });
  });

  it('lists the catalogs as text, or as JSON', async () => {
    suite.server.script(costServer);
    expect((await cost({ catalogs: true })).out).toBe(`${CATALOGS.text}\n`);
    expect(JSON.parse((await cost({ catalogs: true, json: true })).out)).toEqual(CATALOGS.catalogs);
  });

  it("prints the server's 400 with the flag named and exits 2", async () => {
    suite.server.script((_req, res) =>
      sendError(res, 400, 'VALIDATION_FAILED', 'valueSize: not a size: "huge" (use e.g. 1KB)', { field: 'valueSize' }),
    );
    expect(await cost({ 'value-size': 'huge', keys: '5', 'requests-per-month': '1' })).toEqual({
      code: 2,
      out: '',
      err: 'strata cost: --value-size: not a size: "huge" (use e.g. 1KB)\n',
    });
    suite.server.script((_req, res) =>
      sendError(res, 400, 'VALIDATION_FAILED', "region: catalog 'aws-2026-11' has no prices for region 'mars-1'", {
        field: 'region',
      }),
    );
    expect((await cost({ 'value-size': '1MB', keys: '5', 'requests-per-month': '1', region: 'mars-1' })).err).toBe(
      "strata cost: --region: catalog 'aws-2026-11' has no prices for region 'mars-1'\n",
    );
  });

  it('raises usage errors before any request: with its usage for a bare `strata cost`, a one-liner for a mistake', async () => {
    suite.server.script(costServer);
    const bare = await cost({}).catch((e: unknown) => e);
    expect(bare).toBeInstanceOf(UsageError);
    const workload = '(--value-size, --keys, --requests-per-month)';
    expect(bare).toMatchObject({ message: `cost: give a workload ${workload} or --paper-2010 --tables`, usage: COST_USAGE });
    expect(bare).toMatchObject({ command: 'cost' });
    const incomplete = await cost({ 'value-size': '1MB', keys: '5' }).catch((e: unknown) => e);
    expect(incomplete).toBeInstanceOf(UsageError);
    expect(incomplete).toMatchObject({
      message: `cost: --requests-per-month is required with a workload ${workload}`,
      usage: undefined,
    });
    expect(incomplete).toMatchObject({ command: 'cost' });
    const other = await cost({ region: 'eu-west-1' }).catch((e: unknown) => e);
    expect(other).toMatchObject({ message: expect.stringContaining('give a workload'), usage: undefined });
    expect(suite.server.requests).toHaveLength(0);
  });

  it('lets other failures reach the CLI (it prints them and exits 2)', async () => {
    suite.server.script((_req, res) => sendError(res, 404, 'ROUTE_NOT_FOUND', 'no route GET /v1/cost/catalogs'));
    await expect(cost({ catalogs: true })).rejects.toMatchObject({ code: 'ROUTE_NOT_FOUND', status: 404 });
  });
});
