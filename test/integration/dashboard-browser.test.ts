/**
 * The local dashboard in a real browser: the real local server over Redis (with its L1 near cache) and a
 * LocalStack S3 bucket, the workflows of a local warm tier (cache-node processes) behind its admin API, real HTTP
 * traffic, then /dashboard in headless Chromium. Every number the page shows is checked against the traffic this
 * test sent. Screenshots are kept in test-artifacts/dashboard.png (and -cost.png, -fleet.png).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { chromium, type Browser, type Page } from 'playwright-core';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { metricsSettings } from '../../core/composition/metrics-settings.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { buildApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import type { LocalWorkflows } from '../../core/workflows/local/local-workflows.js';
import { startLocalWarm, startLocalWorkflows, type LocalWarm } from '../../scripts/local/local-warm.js';
import { requestBaseUrl, startLocalServer, type LocalServer } from '../../scripts/local/server.js';
import { testRedisUrl, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { ROOT, freePort } from '../helpers/services.js';
import { eventually } from './warm-fixtures.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACT = join(ROOT, 'test-artifacts', 'dashboard.png');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`dashboard-browser.test: skipped, ${CHROMIUM} is missing (apt-get install chromium)`);
const describeWithChromium = haveChromium ? describe : describe.skip;

/** Waits until the clock enters the next `ms`-wide bucket. */
async function nextBucket(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms - (Date.now() % ms) + 20));
}

interface Line {
  widget: string;
  series: string;
  points: number;
  segments: number;
  moves: number;
  values: [number, number][];
}

interface LegendItem {
  widget: string;
  series: string;
  latest?: number;
  total?: number;
  text: string;
}

const num = (s: string | null): number | undefined => (s === null || s === '' ? undefined : Number(s));

/** What the page shows: lines (with their points), legend entries and number widgets, by widget and series. */
async function readPage(page: Page) {
  const lines: Line[] = await page.$$eval('section[data-widget-id] svg path[data-series]', (paths) =>
    paths.map((p) => ({
      widget: p.closest('section')!.getAttribute('data-widget-id')!,
      series: p.getAttribute('data-series')!,
      points: Number(p.getAttribute('data-points')),
      segments: Number(p.getAttribute('data-segments')),
      moves: (p.getAttribute('d') ?? '').split('M').length - 1,
      values: JSON.parse(p.getAttribute('data-values') ?? '[]') as [number, number][],
    })),
  );
  const legend = (
    await page.$$eval('section[data-widget-id] .legend span[data-series]', (items) =>
      items.map((e) => ({
        widget: e.closest('section')!.getAttribute('data-widget-id')!,
        series: e.getAttribute('data-series')!,
        latest: e.getAttribute('data-latest'),
        total: e.getAttribute('data-total'),
        text: e.textContent ?? '',
      })),
    )
  ).map((e): LegendItem => ({ ...e, latest: num(e.latest), total: num(e.total) }));
  const numbers = await page.$$eval('section[data-widget-id] .value[data-series]', (els) =>
    els.map((e) => ({
      key: `${e.closest('section')!.getAttribute('data-widget-id')} ${e.getAttribute('data-series')}`,
      value: e.getAttribute('data-value'),
      text: e.textContent ?? '',
    })),
  );
  const countTexts = await page.$$eval('[data-unit="Count"]', (els) => els.map((e) => e.textContent ?? ''));
  const bodyText = await page.$eval('body', (b) => (b as unknown as { innerText: string }).innerText);
  return {
    line: (widget: string, series: string) => lines.find((l) => l.widget === widget && l.series === series),
    legend: (widget: string) => legend.filter((l) => l.widget === widget),
    item: (widget: string, series: string) => legend.find((l) => l.widget === widget && l.series === series),
    number: (key: string) => {
      const n = numbers.find((x) => x.key === key);
      return n && { value: num(n.value), text: n.text };
    },
    countTexts,
    bodyText,
  };
}

describeWithChromium('Local dashboard in headless Chromium', () => {
  const RESOLUTION_MS = 1000;
  let ctx: BuiltContext;
  let server: LocalServer;
  let browser: Browser;
  let warm: LocalWarm;
  let workflows: LocalWorkflows;
  const warmDir = mkdtempSync(join(tmpdir(), 'strata-dash-warm-'));
  const servedBy = new Set<string>();
  /** What this test sent: requests per operation, value bytes written, misses per namespace, 400s. */
  const sent = { requests: new Map<string, number>(), bytesIn: 0, missesApp: 0, missesOther: 0, validationErrors: 0 };

  beforeAll(async () => {
    const bucket = uniqueName('strata-dash').toLowerCase();
    const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1', credentials });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
    const port = await freePort();
    ctx = buildApiContext(
      loadRuntimeEnv({
        STRATA_REDIS_URL: testRedisUrl(),
        STRATA_S3_BUCKET: bucket,
        STRATA_S3_ENDPOINT: testS3Endpoint(),
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
        STRATA_PUBLIC_URL: `http://127.0.0.1:${port}`,
        // `app` reads come from the L1 near cache, `shared` (no near cache) from Redis, and `big`, which writes
        // around the hot tier, from S3.
        STRATA_NAMESPACES: JSON.stringify({
          namespaces: {
            app: {},
            shared: { nearCache: { enabled: false } },
            big: { writeAroundBytes: 1024, promoteOnRead: false, nearCache: { enabled: false } },
          },
        }),
      }),
    );
    // 1 s buckets, so a test run draws lines rather than single dots. One store for the handlers' and the workflow
    // steps' metrics, as `npm start` has.
    const metrics = new LocalMetricsStore({ resolutionMs: RESOLUTION_MS });
    // The workflows of `STRATA_LOCAL_NODES=2 npm start` (cache-node processes, synthesized state machines); the API
    // itself keeps no warm tier, so the tiers serving the traffic below stay L1, Redis and S3.
    warm = await startLocalWarm({ nodes: 2, dataDir: warmDir });
    workflows = await startLocalWorkflows(warm, [], { store: metrics, environment: metricsSettings().environment });
    server = await startLocalServer({ context: { ...ctx, workflows: workflows.service }, port, metrics });
    const args = [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
    ];
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [...args, '--disable-component-update', '--disable-sync'],
    });
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await workflows?.close();
    await warm?.close();
    await ctx?.coordinator.close();
    rmSync(warmDir, { recursive: true, force: true });
  });

  /** The `Operation` dimension the request recorder gives a request of this test. */
  function operationOf(method: string, path: string): string {
    if (path.startsWith('/v1/admin/')) return 'admin';
    if (path.includes('/batch/')) return 'batch-get';
    return method.toLowerCase();
  }

  async function send(
    method: string,
    path: string,
    body?: string,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; text: string }> {
    const res = await fetch(`${server.url}${path}`, { method, body, headers });
    const text = await res.text();
    const op = operationOf(method, path);
    sent.requests.set(op, (sent.requests.get(op) ?? 0) + 1);
    if (method === 'PUT' && res.status === 200) sent.bytesIn += Buffer.byteLength(body ?? '');
    const tier = res.headers.get('x-strata-tier');
    if (method === 'GET' && res.status === 200 && tier) servedBy.add(tier);
    return { status: res.status, text };
  }

  async function wave(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      await send('PUT', `/v1/ns/app/keys/k${i}`, `value-${i}`);
      await send('GET', `/v1/ns/app/keys/k${i}`);
      await send('PUT', `/v1/ns/shared/keys/s${i}`, `shared-${i}`);
      await send('GET', `/v1/ns/shared/keys/s${i}`);
      await send('PUT', `/v1/ns/big/keys/b${i}`, 'x'.repeat(4096));
      await send('GET', `/v1/ns/big/keys/b${i}`);
      expect((await send('GET', `/v1/ns/app/keys/missing-${i}`)).status).toBe(404);
      expect((await send('GET', `/v1/ns/unconfigured/keys/k${i}`)).status).toBe(404);
      sent.missesApp++;
      sent.missesOther++;
    }
    // k0 and k1 were written; `nope` is a miss.
    await send('POST', '/v1/ns/app/batch/get', JSON.stringify({ keys: ['k0', 'k1', 'nope'] }), {
      'content-type': 'application/json',
    });
    sent.missesApp++;
    const bad = await send('PUT', '/v1/ns/app/keys/bad', 'v', { 'x-strata-ttl': 'later' });
    expect(bad.status).toBe(400);
    sent.validationErrors++;
  }

  it('shows numbers that add up to the traffic sent, lines that break at gaps, modelled costs and a workflow run', async () => {
    // A scale-out through the admin API, followed to its end (the Fleet tab must show it).
    const input = JSON.stringify({ mode: 'incremental', streamMaxMs: 150, graceMs: 500 });
    const json = { 'content-type': 'application/json' };
    const start = await send('POST', '/v1/admin/workflows/scale-out/executions?name=dash-scale-out', input, json);
    expect(start.status).toBe(202);
    let detail: { status: string; progress?: { facts: { allocationMs?: number } } } = { status: 'RUNNING' };
    await eventually(
      async () => {
        detail = JSON.parse((await send('GET', '/v1/admin/workflows/executions/dash-scale-out')).text);
        return detail.status !== 'RUNNING';
      },
      120_000,
      'scale-out to end',
    );
    expect(detail.status).toBe('SUCCEEDED');

    // Two waves of traffic with at least one empty bucket between them: a gap the lines must show.
    await nextBucket(RESOLUTION_MS);
    await wave(4);
    await nextBucket(RESOLUTION_MS);
    await nextBucket(RESOLUTION_MS);
    await wave(3);
    // Several tiers really served this traffic (Redis, its L1 near cache, S3).
    expect(servedBy).toEqual(new Set(['l1', 'hot', 'cold']));
    // The page frozen at the end of the bucket the last request went into: that bucket is the latest complete one.
    await nextBucket(RESOLUTION_MS);
    const until = Date.now();
    const total = [...sent.requests.values()].reduce((a, b) => a + b, 0);

    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => void (m.type() === 'error' && pageErrors.push(m.text())));
    try {
      await page.goto(`${server.url}/dashboard?until=${until}`);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 15_000 }).catch(async (e: unknown) => {
        throw new Error(
          `page not ready: ${String(e)}; errors: ${pageErrors.join('; ')}; header: ${await page.textContent('#meta')}`,
        );
      });
      expect(pageErrors).toEqual([]);
      let p = await readPage(page);

      // Nothing unreadable, and counts are whole numbers (no "12.00 requests").
      expect(p.bodyText).not.toMatch(/NaN|undefined|Infinity/);
      expect(p.countTexts.length).toBeGreaterThan(10);
      for (const t of p.countTexts) expect([t, /^(\d+|–)$/.test(t)]).toEqual([t, true]);
      // Per-bucket counts say per how long.
      expect(await page.textContent('section[data-widget-id="performance.throughput"] h2')).toContain(
        `per ${RESOLUTION_MS / 1000} s`,
      );

      // Requests per operation: each line's total over the chart is exactly what was sent.
      const byOp = p.legend('performance.throughput');
      const sentByOp = Object.fromEntries([...sent.requests].map(([op, n]) => [`requests ${op}`, n]));
      expect(Object.fromEntries(byOp.map((l) => [l.series, l.total]))).toEqual(sentByOp);
      expect(byOp.reduce((a, l) => a + l.total!, 0)).toBe(total);
      for (const l of byOp) expect(l.text).toContain(`${l.total} in the chart`);

      // The headline rate is the latest bucket's requests over the bucket's seconds: the legend's latest values.
      const inLatest = byOp.reduce((a, l) => a + l.latest!, 0);
      expect(inLatest).toBeGreaterThan(0);
      const rps = p.number('performance.throughput-now requests/s')!;
      expect(rps.value).toBeCloseTo(inLatest / (RESOLUTION_MS / 1000), 9);
      expect(rps.text).toMatch(/^\d+(\.\d+)?\/s$/);
      // Hit ratio: headline and the "all tiers" legend are the same bucket's value.
      const ratio = p.number('performance.hit-ratio-now hit ratio')!.value!;
      expect(ratio).toBe(p.item('performance.hit-ratio', 'all tiers')!.latest);
      expect(ratio).toBeGreaterThan(0);
      expect(ratio).toBeLessThan(100);
      // Error rate: the latest bucket's errors (all codes) over its requests.
      const errorsByCode = p.legend('performance.errors').filter((l) => l.series.startsWith('errors '));
      const errorsLatest = errorsByCode.reduce((a, l) => a + (l.latest ?? 0), 0);
      expect(p.number('performance.errors-now errors %')!.value).toBeCloseTo((100 * errorsLatest) / inLatest, 9);
      expect(p.item('performance.errors', 'errors VALIDATION_FAILED')!.total).toBe(sent.validationErrors);
      expect(p.number('performance.latency-now p99')!.value).toBeGreaterThan(0);
      // Misses and bytes written add up too.
      expect(p.item('performance.misses-by-namespace', 'misses app')!.total).toBe(sent.missesApp);
      expect(p.item('performance.misses-by-namespace', 'misses other')!.total).toBe(sent.missesOther);
      expect(p.item('performance.bytes', 'in (written)')!.total).toBe(sent.bytesIn);

      // Lines: one subpath per run of consecutive buckets; the empty buckets between the waves break them.
      const gapped = [
        ['performance.hit-ratio', 'all tiers'],
        ['performance.throughput', 'requests get'],
        ['performance.bytes', 'in (written)'],
      ] as const;
      for (const [widget, series] of gapped) {
        const l = p.line(widget, series)!;
        expect([widget, series, l.points >= 2, l.segments >= 2, l.moves]).toEqual([widget, series, true, true, l.segments]);
        const times = l.values.map(([t]) => t);
        const runs = times.filter((t, i) => i === 0 || t - times[i - 1]! !== RESOLUTION_MS).length;
        expect(runs).toBe(l.segments);
      }

      mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
      await page.screenshot({ path: ARTIFACT, fullPage: true });
      expect(statSync(ARTIFACT).size).toBeGreaterThan(10_000);

      // Cost: modelled from this traffic, per tier, clearly marked as such.
      await page.click('nav button[data-dashboard="cost"]');
      await page.waitForSelector('.grid[data-dashboard="cost"]');
      p = await readPage(page);
      expect(await page.textContent('[data-caption="cost"]')).toMatch(/^Modelled, not billed/);
      expect(await page.$$eval('.grid[data-dashboard="cost"] .note', (els) => els.length)).toBe(0);
      const cards = await page.$$eval('.grid[data-dashboard="cost"] section', (els) =>
        els.map((e) => e.querySelector('.badge')?.textContent),
      );
      expect(cards.every((b) => b === 'modelled')).toBe(true);
      const perTier = p.legend('cost.per-tier');
      expect(perTier.map((l) => l.series)).toEqual(['hot', 'warm', 'cold', 'api', 'workflows', 'monitoring']);
      const costNow = p.number('cost.total-now all tiers')!;
      expect(costNow.value).toBeGreaterThan(0);
      expect(costNow.text).toMatch(/^\$\d/);
      expect(costNow.value).toBeCloseTo(
        perTier.reduce((a, l) => a + l.latest!, 0),
        12,
      );
      // The latest bucket had requests: the API tier (API Gateway + Lambda) costs something, as does the hot tier.
      expect(p.item('cost.per-tier', 'api')!.latest).toBeGreaterThan(0);
      expect(p.item('cost.per-tier', 'hot')!.latest).toBeGreaterThan(0);
      expect(p.number('cost.projected-month projected month')!.value).toBeGreaterThan(costNow.value!);
      expect(p.number('cost.per-1000-hits-now $ / 1,000 hits')!.value).toBeGreaterThan(0);
      expect(p.bodyText).not.toMatch(/NaN|undefined|Infinity/);
      await page.screenshot({ path: ARTIFACT.replace(/\.png$/, '-cost.png'), fullPage: true });

      // Fleet: the scale-out this test started, its counts and its progress.
      await page.click('nav button[data-dashboard="fleet"]');
      await page.waitForSelector('.grid[data-dashboard="fleet"]');
      p = await readPage(page);
      const row = await page.$eval('tr[data-execution="dash-scale-out"]', (tr) => ({
        status: tr.getAttribute('data-status'),
        percent: tr.querySelector('[data-percent]')!.getAttribute('data-percent'),
      }));
      expect(row).toEqual({ status: 'SUCCEEDED', percent: '100' });
      const runs = Object.fromEntries(p.legend('fleet.local-executions').map((l) => [l.series, l.total]));
      expect(runs).toEqual({ started: 1, succeeded: 1, failed: 0, aborted: 0 });
      expect(Math.max(...p.line('fleet.local-progress', 'dash-scale-out')!.values.map(([, v]) => v))).toBe(100);
      // The steps' own metrics (Strata/Workflows), which their Lambdas publish in AWS.
      // The steps' own metrics (Strata/Workflows), which their Lambdas publish in AWS: the new node's allocation time.
      expect(Math.max(...p.line('fleet.allocation-time', 'max')!.values.map(([, v]) => v))).toBe(
        detail.progress!.facts.allocationMs,
      );
      expect(p.bodyText).not.toMatch(/NaN|undefined|Infinity/);
      await page.screenshot({ path: ARTIFACT.replace(/\.png$/, '-fleet.png'), fullPage: true });
      expect(pageErrors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 300_000);
});

/** GET/POST with an explicit Host header (fetch cannot set one). */
function rawRequest(url: string, method: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('URLs the local server hands out', () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-public-url-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function serve(publicUrl: string | undefined): Promise<{ server: LocalServer; ctx: BuiltContext; port: number }> {
    const port = await freePort();
    const base = publicUrl ?? `http://localhost:${port}`;
    const ctx = buildApiContext(loadRuntimeEnv({ STRATA_LOCAL_DIR: dir, STRATA_PUBLIC_URL: base }));
    const server = await startLocalServer({ context: ctx, port, publicUrl: base, hostUrls: publicUrl === undefined });
    return { server, ctx, port };
  }

  it('follow the request’s host when STRATA_PUBLIC_URL is unset, if that host is this machine', async () => {
    const { server, ctx, port } = await serve(undefined);
    try {
      const upload = async (host: string) => {
        const res = await rawRequest(`${server.url}/v1/ns/app/uploads/k`, 'POST', host);
        return JSON.parse(res.body).url as string;
      };
      expect(await upload(`127.0.0.1:${port}`)).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/local-blobs/`));
      expect(await upload(`localhost:${port}`)).toMatch(new RegExp(`^http://localhost:${port}/local-blobs/`));
      // A name that is not this machine's, or another port, is not echoed: the default base stays.
      expect(await upload(`attacker.example:${port}`)).toMatch(new RegExp(`^http://localhost:${port}/local-blobs/`));
      expect(await upload(`127.0.0.1:${port + 1}`)).toMatch(new RegExp(`^http://localhost:${port}/local-blobs/`));
      // The URL handed out works.
      const url = await upload(`127.0.0.1:${port}`);
      expect((await fetch(url, { method: 'PUT', body: 'hello' })).status).toBe(200);
    } finally {
      await server.close();
      await ctx.coordinator.close();
    }
  });

  it('use STRATA_PUBLIC_URL when it is set, whatever the host', async () => {
    const { server, ctx, port } = await serve('https://strata.example.test:8443');
    try {
      const res = await rawRequest(`${server.url}/v1/ns/app/uploads/k`, 'POST', `127.0.0.1:${port}`);
      expect(JSON.parse(res.body).url).toMatch(/^https:\/\/strata\.example\.test:8443\/local-blobs\//);
    } finally {
      await server.close();
      await ctx.coordinator.close();
    }
  });

  it('accept a Host only when it is a plain host and port of this machine', () => {
    expect(requestBaseUrl('localhost:8080', 8080)).toBe('http://localhost:8080');
    expect(requestBaseUrl('[::1]:8080', 8080)).toBe('http://[::1]:8080');
    expect(requestBaseUrl('localhost', 80)).toBe('http://localhost');
    const refused = [
      undefined,
      '',
      'localhost:8081',
      'user@localhost:8080',
      'localhost:8080/x',
      'example.com:8080',
      'localhost:8080?x',
    ];
    for (const bad of refused) expect([bad, requestBaseUrl(bad, 8080)]).toEqual([bad, undefined]);
  });
});
