/**
 * The local dashboard in a real browser: the real local server over Redis (with its L1 near cache) and a
 * LocalStack S3 bucket, real HTTP traffic, then /dashboard in headless Chromium. The screenshot is kept in
 * test-artifacts/dashboard.png.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { chromium, type Browser } from 'playwright-core';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { loadRuntimeEnv } from '../../core/runtime/config.js';
import { buildApiContext, type BuiltContext } from '../../core/runtime/context.js';
import { startLocalServer, type LocalServer } from '../../scripts/local/server.js';
import { testRedisUrl, testS3Endpoint, uniqueName } from '../helpers/env.js';
import { ROOT, freePort } from '../helpers/services.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACT = join(ROOT, 'test-artifacts', 'dashboard.png');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`dashboard-browser.test: skipped, ${CHROMIUM} is missing (apt-get install chromium)`);
const describeWithChromium = haveChromium ? describe : describe.skip;

/** Waits until the clock enters the next `ms`-wide bucket, so two waves of traffic make two points. */
async function nextBucket(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms - (Date.now() % ms) + 20));
}

describeWithChromium('Local dashboard in headless Chromium', () => {
  const RESOLUTION_MS = 1000;
  let ctx: BuiltContext;
  let server: LocalServer;
  let browser: Browser;
  const servedBy = new Set<string>();

  beforeAll(async () => {
    const bucket = uniqueName('strata-dash').toLowerCase();
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
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
          namespaces: { app: {}, shared: { nearCache: { enabled: false } }, big: { writeAroundBytes: 1024, promoteOnRead: false, nearCache: { enabled: false } } },
        }),
      }),
    );
    // 1 s points, so a test run draws lines rather than single dots.
    server = await startLocalServer({ context: ctx, port, metrics: new LocalMetricsStore({ resolutionMs: RESOLUTION_MS }) });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await ctx?.coordinator.close();
  });

  async function send(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Response> {
    const res = await fetch(`${server.url}${path}`, { method, body, headers });
    await res.arrayBuffer();
    const tier = res.headers.get('x-strata-tier');
    if (method === 'GET' && res.status === 200 && tier) servedBy.add(tier);
    return res;
  }

  async function wave(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      await send('PUT', `/v1/ns/app/keys/k${i}`, `value-${i}`);
      await send('GET', `/v1/ns/app/keys/k${i}`);
      await send('PUT', `/v1/ns/shared/keys/s${i}`, `shared-${i}`);
      await send('GET', `/v1/ns/shared/keys/s${i}`);
      await send('PUT', `/v1/ns/big/keys/b${i}`, 'x'.repeat(4096));
      await send('GET', `/v1/ns/big/keys/b${i}`);
      await send('GET', `/v1/ns/app/keys/missing-${i}`);
      await send('GET', `/v1/ns/unconfigured/keys/k${i}`);
    }
    await send('POST', '/v1/ns/app/batch/get', JSON.stringify({ keys: ['k0', 'k1', 'nope'] }), { 'content-type': 'application/json' });
    const bad = await send('PUT', '/v1/ns/app/keys/bad', 'v', { 'x-strata-ttl': 'later' });
    expect(bad.status).toBe(400);
  }

  it('draws the Performance widgets from the run’s traffic, and keeps a screenshot', async () => {
    await wave(4);
    await nextBucket(RESOLUTION_MS);
    await wave(3);
    // Several tiers really served this traffic (Redis, its L1 near cache, S3).
    expect(servedBy).toEqual(new Set(['l1', 'hot', 'cold']));

    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    try {
      await page.goto(`${server.url}/dashboard`);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 15_000 });

      const lines = await page.$$eval('section[data-widget-id] svg path[data-series]', (paths) =>
        paths.map((p) => ({ widget: p.closest('section')!.getAttribute('data-widget-id'), series: p.getAttribute('data-series'), points: Number(p.getAttribute('data-points')), max: Number(p.getAttribute('data-max')), d: p.getAttribute('d') ?? '' })),
      );
      const line = (widget: string, series: string) => lines.find((l) => l.widget === widget && l.series === series);
      // Two waves in two buckets: lines of at least two points, with real values.
      for (const [widget, series] of [['performance.hit-ratio', 'all tiers'], ['performance.hit-ratio', 'hot'], ['performance.hit-ratio', 'cold'], ['performance.hit-ratio', 'l1'], ['performance.throughput', 'requests get'], ['performance.bytes', 'out (read)']] as const) {
        const l = line(widget, series);
        expect([widget, series, l !== undefined]).toEqual([widget, series, true]);
        expect(l!.points).toBeGreaterThanOrEqual(2);
        expect(l!.max).toBeGreaterThan(0);
        expect(l!.d.split(/[ML]/).filter(Boolean)).toHaveLength(l!.points);
      }
      expect(line('performance.errors', 'errors VALIDATION_FAILED')?.max).toBeGreaterThan(0);
      expect(line('performance.latency-p99', 'none')?.max).toBeGreaterThan(0);
      expect(line('performance.misses-by-namespace', 'misses other')?.max).toBeGreaterThan(0);

      const numbers = Object.fromEntries(
        await page.$$eval('section[data-widget-id] .value[data-series]', (els) => els.map((e) => [`${e.closest('section')!.getAttribute('data-widget-id')} ${e.getAttribute('data-series')}`, Number(e.getAttribute('data-value'))] as const)),
      );
      expect(numbers['performance.hit-ratio-now hit ratio']).toBeGreaterThan(0);
      expect(numbers['performance.hit-ratio-now hit ratio']).toBeLessThan(100);
      expect(numbers['performance.throughput-now requests/s']).toBeGreaterThan(0);
      expect(numbers['performance.latency-now p99']).toBeGreaterThan(0);
      expect(numbers['performance.errors-now errors %']).toBeGreaterThan(0);

      mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
      await page.screenshot({ path: ARTIFACT, fullPage: true });
      expect(statSync(ARTIFACT).size).toBeGreaterThan(10_000);

      // The Cost dashboard: the same page, with a reason for each AWS-only widget.
      await page.click('nav button[data-dashboard="cost"]');
      await page.waitForSelector('.grid[data-dashboard="cost"]');
      const notes = await page.$$eval('.grid[data-dashboard="cost"] .note', (els) => els.map((e) => e.textContent));
      expect(notes.length).toBeGreaterThan(0);
      expect(notes.every((n) => /no data locally/.test(n ?? ''))).toBe(true);
    } finally {
      await page.close();
    }
  });
});
