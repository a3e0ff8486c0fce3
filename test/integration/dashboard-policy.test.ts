/**
 * The local dashboard's Policy firings panel (Fleet tab) in headless Chromium: the real local server with `npm
 * start`'s background evaluator (scripts/local/policy-evaluator.ts) ticking the live policy of a file policy store,
 * policies put through the admin API. The panel must list what `GET /v1/admin/policy/firings` lists (newest first,
 * failed and suppressed firings marked), name the policy in force, pick up new firings without a reload, show a
 * detail holding markup as text, and say so when nothing fired or no evaluator runs. Screenshot:
 * test-artifacts/dashboard-policy.png.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { LocalMetricsStore } from '../../core/metrics/local-store.js';
import { metricsSettings } from '../../core/composition/metrics-settings.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { buildApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { ruleMode } from '../../core/policy/document.js';
import type { Firing } from '../../core/policy/evaluator.js';
import type { FleetState } from '../../core/cost/publisher/fleet-state.js';
import { startLocalPolicyEvaluator, type LocalPolicyEvaluator } from '../../scripts/local/policy-evaluator.js';
import { startLocalServer, type LocalServer } from '../../scripts/local/server.js';
import { FIRINGS_NOTES } from '../../scripts/local/dashboard/data.js';
import { ROOT, freePort } from '../helpers/services.js';
import { eventually } from './warm-fixtures.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACT = join(ROOT, 'test-artifacts', 'dashboard-policy.png');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`dashboard-policy.test: skipped, ${CHROMIUM} is missing (apt-get install chromium)`);
const describeWithChromium = haveChromium ? describe : describe.skip;

const PANEL = 'section[data-widget-id="fleet.local-policy-firings"]';
/** An alert's message is the policy author's text: markup in it must reach the page as text. */
const MARKUP = `<script>document.body.dataset.pwned = 'script'</script><img src=x onerror="document.body.dataset.pwned = 'img'"> & <b>bold</b>`;

/** A warm fleet of two nodes without reports: grow has room, but this run has no workflows, so ScaleOut fails. */
const FLEET: FleetState = { ringVersion: 1, nodes: 2, fills: [], maxFillPercent: undefined, migrationsInProgress: 0, silent: [] };

const rules = [
  { id: 'heartbeat', on: { timer: { everySeconds: 1 } }, do: [{ alert: { message: MARKUP } }] },
  { id: 'grow-warm', on: { timer: { everySeconds: 1 } }, do: [{ grow: { tier: 'warm', nodes: 1 } }] },
];

/** The panel as the page shows it: its rows (texts as rendered), note and policy line. */
async function readPanel(page: Page) {
  return page.$eval(PANEL, (panel) => {
    const rows = [...panel.querySelectorAll('table.firings tr[data-rule]')].map((tr) => {
      const td = tr.querySelectorAll('td');
      return {
        at: tr.getAttribute('data-at') ?? '',
        rule: td[1]!.textContent ?? '',
        response: td[2]!.textContent ?? '',
        outcome: td[3]!.textContent ?? '',
        detail: td[4]!.textContent ?? '',
        time: td[0]!.textContent ?? '',
        title: td[0]!.getAttribute('title') ?? '',
      };
    });
    const policy = panel.querySelector('.policy');
    return {
      rows,
      note: panel.querySelector('.note')?.textContent ?? undefined,
      hasData: panel.getAttribute('data-has-data'),
      policy: policy && {
        version: policy.getAttribute('data-policy-version'),
        source: policy.getAttribute('data-policy-source'),
        hash: policy.getAttribute('data-policy-hash'),
        text: policy.textContent ?? '',
      },
      markup: panel.querySelectorAll('script, img, table.firings b').length,
    };
  });
}

async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Opens the Fleet tab and waits for its first render; page errors are collected into `errors`. */
async function openFleet(browser: Browser, url: string, errors: string[], query = ''): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
  await page.goto(`${url}/dashboard?dashboard=fleet${query}`);
  await page.waitForSelector(`body[data-ready="true"] ${PANEL}`, { timeout: 15_000 }).catch(async (e: unknown) => {
    throw new Error(`page not ready: ${String(e)}; errors: ${errors.join('; ')}; header: ${await page.textContent('#meta')}`);
  });
  return page;
}

describeWithChromium('Policy firings on the local dashboard', () => {
  const dir = mkdtempSync(join(tmpdir(), 'strata-dash-policy-'));
  let ctx: BuiltContext;
  let server: LocalServer;
  let evaluator: LocalPolicyEvaluator;
  let browser: Browser;

  beforeAll(async () => {
    const port = await freePort();
    // As `npm start` builds it: a file policy store re-read on a timer, background responses accepted.
    ctx = buildApiContext(
      loadRuntimeEnv({
        STRATA_LOCAL_DIR: join(dir, 'data'),
        STRATA_PUBLIC_URL: `http://127.0.0.1:${port}`,
        STRATA_POLICY_STORE: `file:${join(dir, 'policies')}`,
        STRATA_POLICY_REFRESH_MS: '200',
        STRATA_LOG_LEVEL: 'error',
      }),
      { policyTimer: true, backgroundEvaluator: true },
    );
    const metrics = new LocalMetricsStore({ resolutionMs: 1000 });
    evaluator = startLocalPolicyEvaluator({
      live: ctx.livePolicy!,
      fleet: async () => FLEET,
      metrics,
      environment: metricsSettings().environment,
      intervalMs: 100,
    });
    server = await startLocalServer({ context: { ...ctx, policyFirings: evaluator.evaluator }, port, metrics });
    browser = await launch();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await evaluator?.stop();
    await server?.close();
    ctx?.livePolicy?.stop();
    await ctx?.coordinator.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function api<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const res = await fetch(`${server.url}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }
  const firings = async (limit = 50) =>
    (await api<{ firings: Firing[] }>('GET', `/v1/admin/policy/firings?limit=${limit}`)).firings;
  const putPolicy = (doc: unknown, ifVersion: number) =>
    api<{ version: number; hash: string }>('PUT', '/v1/admin/policy', doc, { 'if-match': `"${ifVersion}"` });

  it('lists the firings newest first, marks failed and suppressed ones, names the policy and shows markup as text', async () => {
    const errors: string[] = [];
    const page = await openFleet(browser, server.url, errors);
    try {
      // Nothing fired yet: the panel says so, under the deployment's policy.
      expect(await firings()).toEqual([]);
      let panel = await readPanel(page);
      expect(panel.rows).toEqual([]);
      expect(panel.hasData).toBe('false');
      expect(panel.note).toMatch(new RegExp(`^${FIRINGS_NOTES.none}`));
      expect(panel.policy).toMatchObject({ version: '0', source: 'deployment' });

      // An alert every second (its message holds markup) and a grow that fails (no workflows in this run).
      const v1 = await putPolicy({ rules }, 0);
      expect(v1.version).toBe(1);
      // The page refreshes on its own, as every panel does: the first firings appear without a reload.
      await page.waitForSelector(`${PANEL} tr[data-rule="heartbeat"]`, { timeout: 20_000 });
      await eventually(async () => (await firings()).some((f) => f.outcome === 'failed'), 20_000, 'a failed grow');

      // The kill switch: grow is suppressed (recorded once a minute), alerts still fire.
      const v2 = await putPolicy({ rules, controls: { backgroundEnabled: false } }, 1);
      await eventually(async () => (await firings()).some((f) => f.outcome === 'suppressed'), 20_000, 'a suppressed grow');
      await eventually(
        async () => {
          const all = await firings();
          const suppressedAt = all.find((f) => f.outcome === 'suppressed')!.at;
          return all.some((f) => f.rule === 'heartbeat' && f.at > suppressedAt);
        },
        20_000,
        'an alert under the kill switch',
      );
      // A history that no longer moves, so the page and the API can be compared.
      await evaluator.stop();
      const served = await firings();
      const policy = await api<{ version: number; source: string; hash: string }>('GET', '/v1/admin/policy');
      expect(policy).toMatchObject({ version: 2, source: 'runtime', hash: v2.hash });

      await page.reload();
      await page.waitForSelector(`body[data-ready="true"] ${PANEL} table.firings`, { timeout: 15_000 });
      panel = await readPanel(page);
      // The same rows as the admin API, in its order (newest first), each field as text.
      expect(panel.rows.map(({ at, rule, response, outcome, detail }) => ({ at, rule, response, outcome, detail }))).toEqual(
        served.map(({ at, rule, response, outcome, detail }) => ({ at, rule, response, outcome, detail })),
      );
      expect(panel.hasData).toBe('true');
      const times = panel.rows.map((r) => Date.parse(r.at));
      expect(times).toEqual([...times].sort((a, b) => b - a));
      for (const r of panel.rows) expect([r.title, r.time]).toEqual([r.at, expect.stringMatching(/\d{1,2}:\d{2}:\d{2}/)]);
      expect(new Set(panel.rows.map((r) => `${r.rule} ${r.response} ${r.outcome}`))).toEqual(
        new Set(['heartbeat alert done', 'grow-warm grow failed', 'grow-warm grow suppressed']),
      );
      const failed = panel.rows.find((r) => r.outcome === 'failed')!;
      expect(failed.detail).toMatch(/no warm tier/);
      const suppressed = panel.rows.find((r) => r.outcome === 'suppressed')!;
      expect(suppressed.detail).toMatch(/controls\.backgroundEnabled/);

      // The alert's markup is text: the detail reads exactly the message, nothing of it ran or became an element.
      for (const r of panel.rows.filter((x) => x.rule === 'heartbeat')) expect(r.detail).toBe(MARKUP);
      expect(panel.markup).toBe(0);
      expect(await page.$eval('body', (b) => b.getAttribute('data-pwned'))).toBeNull();
      expect(await page.$eval(`${PANEL} tr[data-rule="heartbeat"] td.detail`, (td) => td.innerHTML)).toContain('&lt;script&gt;');

      // Failed and suppressed firings stand out: their outcome badge and row are coloured unlike a done one's.
      const look = (outcome: string) =>
        page.$eval(`${PANEL} tr[data-outcome="${outcome}"]`, (tr) => {
          const style = (selector: string) => tr.ownerDocument.defaultView!.getComputedStyle(tr.querySelector(selector)!);
          return { badge: style('.outcome').backgroundColor, row: style('td').backgroundColor };
        });
      const [done, fail, supp] = [await look('done'), await look('failed'), await look('suppressed')];
      expect(new Set([done.badge, fail.badge, supp.badge]).size).toBe(3);
      expect(new Set([done.row, fail.row, supp.row]).size).toBe(3);

      // The policy in force: the version, source and hash the admin API answers.
      expect(panel.policy).toMatchObject({ version: '2', source: 'runtime', hash: policy.hash });
      expect(panel.policy!.text).toContain('version 2');
      expect(panel.policy!.text).toContain(policy.hash);
      // The document's two rules and the defaults a runtime with an evaluator adds (node-fill eviction, idle scale-in).
      const background = ctx.livePolicy!.current.compiled.rules.filter((r) => ruleMode(r) === 'background').length;
      expect(background).toBeGreaterThanOrEqual(rules.length);
      expect(panel.policy!.text).toMatch(new RegExp(` · ${background} background rules$`));
      expect(await page.$eval('body', (b) => (b as unknown as { innerText: string }).innerText)).not.toMatch(
        /NaN|undefined|Infinity|Invalid Date/,
      );

      mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
      await page.$eval(PANEL, (e) => e.scrollIntoView());
      await page.screenshot({ path: ARTIFACT, fullPage: true });
      expect(statSync(ARTIFACT).size).toBeGreaterThan(10_000);

      // As it was at a moment (`?until=`): only the firings that had happened by then.
      const until = Date.parse(served.find((f) => f.outcome === 'suppressed')!.at) - 1;
      const then = await openFleet(browser, server.url, errors, `&until=${until}`);
      try {
        const earlier = await readPanel(then);
        const kept = (await firings(200)).filter((f) => Date.parse(f.at) <= until).slice(0, 50);
        expect(earlier.rows.map((r) => r.at)).toEqual(kept.map((f) => f.at));
        expect(earlier.rows.some((r) => r.outcome === 'suppressed')).toBe(false);
        expect(earlier.rows.length).toBeGreaterThan(0);
      } finally {
        await then.close();
      }
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 300_000);

  it('says when no background evaluator runs in the runtime', async () => {
    // The same context without an evaluator's history (as an embedding of the local server without one).
    const other = await startLocalServer({ context: ctx, port: await freePort() });
    const errors: string[] = [];
    const page = await openFleet(browser, other.url, errors);
    try {
      const panel = await readPanel(page);
      expect(panel.rows).toEqual([]);
      expect(panel.note).toBe(FIRINGS_NOTES.noEvaluator);
      const policy = await api<{ version: number; source: string; hash: string }>('GET', '/v1/admin/policy');
      expect(panel.policy).toMatchObject({ version: String(policy.version), source: policy.source, hash: policy.hash });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
      await other.close();
    }
  }, 300_000);
});
