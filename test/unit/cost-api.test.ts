/**
 * The cost routes (`/v1/cost/...`) through the service Lambda handler (in-process, API Gateway proxy events): their
 * answers are the cost model's, their text what `npm run cost` prints, and every bad parameter a 400 naming it.
 */
import type { Context } from 'aws-lambda';
import { handler as service } from '../../lambdas/api/service.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { API_ROUTES, matchRoute } from '../../core/api/routes.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { catalogSummaries } from '../../core/cost/model/price-catalog.js';
import { runCostCli } from '../../core/composition/cost-cli.js';
import { renderDiscrepancies, renderPaperTables, renderRecommendations } from '../../core/cost/model/format.js';
import { PAPER_DISCREPANCIES, paperCells } from '../../core/cost/model/paper-2010-tables.js';
import { recommend } from '../../core/cost/model/recommender.js';
import { setApiContext } from '../../core/composition/api-context.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';

const ctx = { awsRequestId: 'req-cost' } as Context;

async function get(
  resource: string,
  query: Record<string, string> | null = null,
  method = 'GET',
): Promise<{ status: number; body: Record<string, unknown> }> {
  const event = {
    httpMethod: method,
    resource,
    path: resource,
    pathParameters: null,
    queryStringParameters: query,
    headers: {},
    body: null,
    isBase64Encoded: false,
  } as unknown as ApiEvent;
  const res = (await service(event, ctx)) as ApiResult;
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, unknown> };
}

/** What `npm run cost -- <args>` prints, in-process. */
function costCli(...args: string[]): string {
  let stdout = '';
  expect(runCostCli(args, { stdout: (t) => void (stdout += t), stderr: () => undefined })).toBe(0);
  return stdout;
}

interface Placements {
  workload: Record<string, unknown>;
  writesPerMonth: number;
  catalog: { id: string; version: string };
  region: string;
  rankBy: string;
  recommendations: {
    rank: number;
    placement: { id: string; tier: string; persistent: boolean };
    costPerSpeedup: number;
    cost: { total: number };
  }[];
  ranked: number;
  excluded: { placement: { id: string }; reason: string }[];
  text: string;
}

const WORKLOAD = { valueSize: '1MB', keys: '500', requestsPerMonth: '2000' };

beforeAll(() =>
  setApiContext({
    coordinator: new Coordinator({ tiers: [new MemoryTier()], flushTimer: false }),
    inlineLimitBytes: 1024,
    urlTtlSeconds: 60,
  }),
);
afterAll(() => setApiContext(undefined));

describe('GET /v1/cost/placements', () => {
  it('ranks the placements for a workload by C/S, with the table npm run cost prints', async () => {
    const { status, body } = await get('/v1/cost/placements', WORKLOAD);
    expect(status).toBe(200);
    const r = body as unknown as Placements;
    expect(r).toMatchObject({
      workload: {
        valueBytes: 1e6,
        keys: 500,
        requestsPerMonth: 2000,
        persistent: false,
        serviceTimeMs: 1000,
        transferOut: 'internet',
      },
      catalog: { id: 'aws-2026-11', version: '2026.11.0' },
      region: 'us-east-1',
      rankBy: 'cost-per-speedup',
    });
    expect(r.writesPerMonth).toBeCloseTo(490.9, 1);
    expect(r.recommendations[0]!.placement.id).toBe('s3:STANDARD');
    expect(r.recommendations.map((x) => x.rank)).toEqual(r.recommendations.map((_, i) => i + 1));
    const cs = r.recommendations.map((x) => x.costPerSpeedup);
    expect(cs).toEqual([...cs].sort((a, b) => a - b));
    expect(r.ranked).toBe(r.recommendations.length);
    // The model's own answer, rendered as the offline command renders it.
    const report = recommend({ valueBytes: 1e6, keys: 500, requestsPerMonth: 2000 });
    expect(r.text).toBe(renderRecommendations(report));
    expect(`${r.text}\n`).toBe(costCli('--value-size', '1MB', '--keys', '500', '--requests-per-month', '2000'));
    expect(JSON.parse(JSON.stringify(report.recommendations))).toEqual(r.recommendations);
  });

  it('takes every option of strata cost as a query parameter, an empty one as absent', async () => {
    const query = {
      valueSize: '50MB',
      keys: '500',
      requestsPerMonth: '200k',
      writesPerMonth: '',
      persistent: 'true',
      latencyTarget: '20ms',
      serviceTime: '2s',
      inRegion: '1',
      region: 'eu-west-1',
      catalog: '',
      rankBy: 'cost',
      top: '3',
    };
    const { status, body } = await get('/v1/cost/placements', query);
    expect(status).toBe(200);
    const r = body as unknown as Placements;
    expect(r.workload).toMatchObject({
      valueBytes: 50e6,
      requestsPerMonth: 200_000,
      persistent: true,
      latencyTargetMs: 20,
      serviceTimeMs: 2000,
      transferOut: 'in-region',
    });
    expect(r.workload).not.toHaveProperty('writesPerMonth');
    expect(r).toMatchObject({ region: 'eu-west-1', rankBy: 'cost', catalog: { id: 'aws-2026-11' } });
    expect(r.recommendations).toHaveLength(3);
    expect(r.ranked).toBeGreaterThan(3);
    expect(r.recommendations.every((x) => x.placement.persistent)).toBe(true);
    expect(r.excluded.map((x) => x.placement.id)).toContain('elasticache-serverless');
    expect(r.text).toContain(`ranked by cost; top 3 of ${r.ranked}`);
    expect(`${r.text}\n`).toBe(
      costCli(
        '--value-size',
        '50MB',
        '--keys',
        '500',
        '--requests-per-month',
        '200k',
        '--persistent',
        '--latency-target',
        '20ms',
        '--service-time',
        '2s',
        '--in-region',
        '--region',
        'eu-west-1',
        '--rank-by',
        'cost',
        '--top',
        '3',
      ),
    );
  });

  it("prices with the 2010 catalog when asked: the paper's placements", async () => {
    const { body } = await get('/v1/cost/placements', { ...WORKLOAD, catalog: 'paper-2010' });
    const r = body as unknown as Placements;
    expect(r.catalog.id).toBe('paper-2010');
    expect(r.recommendations.map((x) => x.placement.id)).toContain('ec2-mem:m1.small');
  });

  it.each([
    [{ keys: '500', requestsPerMonth: '2000' }, 'valueSize', /valueSize is required/],
    [
      { valueSize: '1MB', requestsPerMonth: '2000' },
      'keys',
      /keys is required with a workload \(valueSize, keys, requestsPerMonth\)/,
    ],
    [{ ...WORKLOAD, valueSize: 'huge' }, 'valueSize', /valueSize: not a size: "huge"/],
    [{ ...WORKLOAD, valueSize: '0' }, 'valueSize', /valueSize: Too small/],
    [{ ...WORKLOAD, keys: '0' }, 'keys', /keys: Too small/],
    [{ ...WORKLOAD, keys: '2.5' }, 'keys', /keys: .*int/],
    [{ ...WORKLOAD, requestsPerMonth: 'lots' }, 'requestsPerMonth', /not a count: "lots"/],
    [{ ...WORKLOAD, writesPerMonth: '-1' }, 'writesPerMonth', /not a count/],
    [{ ...WORKLOAD, persistent: 'maybe' }, 'persistent', /persistent must be true or false, got "maybe"/],
    [{ ...WORKLOAD, inRegion: 'yes' }, 'inRegion', /inRegion must be true or false/],
    [{ ...WORKLOAD, latencyTarget: 'fast' }, 'latencyTarget', /not a duration: "fast"/],
    [{ ...WORKLOAD, serviceTime: '0s' }, 'serviceTime', /serviceTime: Too small/],
    [{ ...WORKLOAD, rankBy: 'speed' }, 'rankBy', /rankBy must be cs or cost, got "speed"/],
    [{ ...WORKLOAD, top: '0' }, 'top', /top must be a whole number of at least 1/],
    [{ ...WORKLOAD, top: '1.5' }, 'top', /top must be a whole number/],
    [{ ...WORKLOAD, catalog: 'aws-1999' }, 'catalog', /unknown price catalog 'aws-1999'/],
    [{ ...WORKLOAD, region: 'mars-1' }, 'region', /no prices for region 'mars-1'/],
    [{ ...WORKLOAD, value_size: '1MB' }, 'value_size', /unknown query parameter; the parameters are valueSize, keys/],
  ])('answers %j with 400 VALIDATION_FAILED naming %s', async (query, field, message) => {
    const { status, body } = await get('/v1/cost/placements', query as Record<string, string>);
    expect(status).toBe(400);
    expect(body).toEqual({
      error: { code: 'VALIDATION_FAILED', message: expect.stringMatching(message), details: expect.objectContaining({ field }) },
    });
  });

  it('answers no query string at all with a 400 naming the first required parameter', async () => {
    const { status, body } = await get('/v1/cost/placements', null);
    expect(status).toBe(400);
    expect(body).toMatchObject({ error: { code: 'VALIDATION_FAILED', details: { field: 'valueSize' } } });
  });
});

describe('GET /v1/cost/paper-2010', () => {
  it('answers Tables III and IV as the model renders them, the cells and the recorded discrepancies', async () => {
    const { status, body } = await get('/v1/cost/paper-2010');
    expect(status).toBe(200);
    expect(body.tables).toBe(renderPaperTables());
    expect(body.tables).toMatch(/TABLE III[\s\S]*TABLE IV/);
    expect(body.discrepanciesText).toBe(renderDiscrepancies());
    expect(body.discrepancies).toEqual(JSON.parse(JSON.stringify(PAPER_DISCREPANCIES)));
    expect(body.cells).toEqual(JSON.parse(JSON.stringify(paperCells())));
    expect(`${body.tables as string}\n\n${body.discrepanciesText as string}\n`).toBe(costCli('--paper-2010', '--tables'));
  });
});

describe('GET /v1/cost/catalogs', () => {
  it('lists the catalogs with their regions and price dates, as npm run cost -- --catalogs does', async () => {
    const { status, body } = await get('/v1/cost/catalogs');
    expect(status).toBe(200);
    expect(body).toMatchObject({ defaultCatalog: 'aws-2026-11', defaultRegion: 'us-east-1' });
    expect(body.catalogs).toEqual(JSON.parse(JSON.stringify(catalogSummaries())));
    expect(body.catalogs).toEqual(JSON.parse(costCli('--catalogs', '--json')));
    expect(`${body.text as string}\n`).toBe(costCli('--catalogs'));
  });
});

describe('cost routes in the route table', () => {
  it('are GET routes of the service function, open to tenant keys', () => {
    const routes = API_ROUTES.filter((r) => r.resource.startsWith('/v1/cost/'));
    expect(routes.map((r) => `${r.method} ${r.resource} ${r.fn} ${r.auth ?? 'tenant'}`)).toEqual([
      'GET /v1/cost/placements service tenant',
      'GET /v1/cost/paper-2010 service tenant',
      'GET /v1/cost/catalogs service tenant',
    ]);
    expect(matchRoute('GET', '/v1/cost/placements').route?.resource).toBe('/v1/cost/placements');
  });

  it('answers another method with 405', async () => {
    const { status, body } = await get('/v1/cost/catalogs', null, 'POST');
    expect(status).toBe(405);
    expect(body).toMatchObject({ error: { code: 'METHOD_NOT_ALLOWED' } });
  });
});
