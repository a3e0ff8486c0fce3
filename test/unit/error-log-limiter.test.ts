/**
 * The error-log limiter (core/util/error-log-limiter.ts) with an injected clock, sink and scheduler (no
 * timing asserts), and the flood it exists for: a coordinator built by buildApiContext over a hot tier that
 * fails every promotion used to log a full stack per failure.
 */
import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { apiHandler } from '../../core/composition/api-handler.js';
import type { ApiEvent, ApiResult } from '../../core/api/http.js';
import { Coordinator } from '../../core/coordinator/coordinator.js';
import { TierUnavailableError } from '../../core/errors.js';
import type { EmfDocument } from '../../core/metrics/emf.js';
import { setMetricsSink } from '../../core/metrics/sink.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { backgroundErrorLog, buildApiContext, setApiContext } from '../../core/composition/api-context.js';
import { MemoryTier } from '../../core/tiers/memory-tier.js';
import { LocalFolderTier } from '../../core/tiers/local-folder-tier.js';
import { ErrorLogLimiter, errorShape, errorSummary, formatErrorLogEntry } from '../../core/util/error-log-limiter.js';
import type { ErrorLogEntry } from '../../core/util/error-log-limiter.js';
import { captureLog } from '../helpers/log-capture.js';

function harness(o: { intervalMs?: number; maxKinds?: number; maxNewKindsPerInterval?: number; forgetAfterMs?: number } = {}) {
  let t = 1_000_000;
  const entries: ErrorLogEntry[] = [];
  const timers: { fn: () => void; at: number }[] = [];
  const limiter = new ErrorLogLimiter({
    ...o,
    now: () => t,
    write: (e) => entries.push(e),
    schedule: (fn, ms) => timers.push({ fn, at: t + ms }),
  });
  return {
    limiter,
    entries,
    timers,
    advance(ms: number) {
      t += ms;
    },
    /** Runs the timers that are due, as the event loop would. */
    runDue() {
      const due = timers.filter((x) => x.at <= t);
      const later = timers.filter((x) => x.at > t);
      timers.length = 0;
      timers.push(...later);
      for (const timer of due) timer.fn();
    },
    lines: () => entries.map((e) => formatErrorLogEntry(e)),
  };
}

const hotDown = () => new TierUnavailableError('hot', new Error('Connection is closed.'));

describe('ErrorLogLimiter', () => {
  it('writes the first error of a kind with its stack, then one summary line per interval with the count', () => {
    const h = harness();
    for (let i = 0; i < 12_345; i++) h.limiter.report(hotDown(), 'promotion');
    expect(h.entries).toHaveLength(1);
    expect(h.entries[0]).toMatchObject({ type: 'first', what: 'promotion', count: 1 });
    expect(h.lines()[0]).toMatch(
      /^\[strata\] background promotion failed: TierUnavailableError: tier 'hot' is unavailable\n\s+at /,
    );
    expect(h.lines()[0]).toContain('Connection is closed.'); // the cause, as console.error prints it

    h.advance(10_000);
    h.limiter.report(hotDown(), 'promotion');
    expect(h.entries).toHaveLength(2);
    expect(h.entries[1]).toMatchObject({ type: 'repeated', count: 12_345, periodMs: 10_000 });
    expect(h.lines()[1]).toBe(
      "[strata] background promotion failed 12,345 times in the last 10 s: TierUnavailableError tier 'hot' is unavailable" +
        ' (cause: Error Connection is closed.)',
    );
    expect(h.lines()[1]).not.toContain('\n');
  });

  it('writes the count when the failures stop, from its timer (one timer for all kinds)', () => {
    const h = harness();
    for (let i = 0; i < 50; i++) h.limiter.report(hotDown(), 'promotion');
    for (let i = 0; i < 7; i++) h.limiter.report(new Error('disk full'), 'write-back flush');
    expect(h.timers).toHaveLength(1);
    h.advance(9_999);
    h.runDue();
    expect(h.entries.map((e) => e.type)).toEqual(['first', 'first']);
    h.advance(1);
    h.runDue();
    expect(h.entries.slice(2).map((e) => [e.what, e.count])).toEqual([
      ['promotion', 49],
      ['write-back flush', 6],
    ]);
    expect(h.timers).toHaveLength(0); // nothing pending: no timer keeps running
    h.limiter.flush();
    expect(h.entries).toHaveLength(4);
  });

  it('groups errors by what failed and the shape of the error, not its numbers', () => {
    expect(errorShape(new Error('timed out after 1003 ms'))).toBe(errorShape(new Error('timed out after 998 ms')));
    expect(errorShape(new Error('request 7f3a9c0d2e4b failed'))).toBe(errorShape(new Error('request 0123456789ab failed')));
    expect(errorShape(new TierUnavailableError('hot'))).not.toBe(errorShape(new TierUnavailableError('warm')));
    expect(errorShape(hotDown())).not.toBe(errorShape(new TierUnavailableError('hot', new Error('OOM command not allowed'))));
    const h = harness();
    h.limiter.report(new Error('timed out after 1003 ms'), 'promotion');
    h.limiter.report(new Error('timed out after 998 ms'), 'promotion');
    h.limiter.report(new Error('timed out after 998 ms'), 'write-back flush');
    expect(h.entries.map((e) => [e.type, e.what])).toEqual([
      ['first', 'promotion'],
      ['first', 'write-back flush'],
    ]);
    expect(errorSummary(Object.assign(new Error('boom'), { code: 'ECONNRESET' }))).toBe('Error [ECONNRESET] boom');
    expect(errorSummary('x'.repeat(1000))).toHaveLength(300);
  });

  it('keeps at most maxKinds kinds, writing the count of the one it drops', () => {
    const h = harness({ maxKinds: 3, maxNewKindsPerInterval: 100 });
    for (const what of ['a', 'b', 'c']) for (let i = 0; i < 3; i++) h.limiter.report(new Error(`kind ${what}`), what);
    h.limiter.report(new Error('kind a'), 'a'); // a is now the most recently seen: b is dropped first
    h.limiter.report(new Error('kind d'), 'd');
    expect(h.limiter.size).toBe(3);
    expect(h.entries.filter((e) => e.type === 'repeated').map((e) => [e.what, e.count])).toEqual([['b', 2]]);
  });

  it('counts new kinds past maxNewKindsPerInterval together, so messages that all differ cannot flood', () => {
    const h = harness({ maxNewKindsPerInterval: 3 });
    // Keys of letters only (numbers are blanked out of a kind's shape): every message is a new kind.
    const letters = (n: number): string => (n < 26 ? '' : letters(Math.floor(n / 26) - 1)) + String.fromCharCode(97 + (n % 26));
    for (let i = 0; i < 10_000; i++) h.limiter.report(new Error(`no such key 'user:${letters(i)}'`), 'promotion');
    expect(h.entries).toHaveLength(3);
    h.advance(10_000);
    h.runDue();
    expect(h.entries).toHaveLength(4);
    expect(h.entries[3]).toMatchObject({ type: 'repeated', otherKinds: true, count: 9_997 });
    expect(h.lines()[3]).toMatch(
      /^\[strata\] background promotion failed 9,997 times in the last 10 s with errors of other kinds/,
    );
    expect(h.limiter.size).toBeLessThanOrEqual(4);
  });

  it('forgets a kind not seen for a while, so the next outage logs its stack again', () => {
    const h = harness({ forgetAfterMs: 60_000 });
    h.limiter.report(hotDown(), 'promotion');
    h.advance(30_000);
    h.limiter.report(hotDown(), 'promotion'); // counted and written at once: its last line is older than the interval
    h.advance(60_001);
    h.limiter.report(hotDown(), 'promotion');
    expect(h.entries.map((e) => e.type)).toEqual(['first', 'repeated', 'first']);
  });

  it('survives a sink that throws', () => {
    const limiter = new ErrorLogLimiter({
      write: () => {
        throw new Error('stderr closed');
      },
      schedule: null,
    });
    expect(() => limiter.report(hotDown(), 'promotion')).not.toThrow();
  });
});

describe('the coordinator built by buildApiContext, over a hot tier that fails every promotion', () => {
  let dir: string;
  const docs: EmfDocument[] = [];
  beforeAll(() => setMetricsSink({ write: (d) => docs.push(...d) }));
  afterAll(() => setMetricsSink(undefined));
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'strata-flood-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('logs a bounded number of lines (it logged a stack per failure) and counts every failure in BackgroundErrors', async () => {
    const env = loadRuntimeEnv({ STRATA_LOCAL_DIR: dir, STRATA_ENV: 'test' });
    // Values only in the cold tier: every read is a cold hit, promoted to the hot tier, which refuses it.
    const seed = new Coordinator({ tiers: [new LocalFolderTier({ dir, fsync: false })], flushTimer: false });
    for (let i = 0; i < 20; i++) await seed.put('flood', `k${i}`, Buffer.from(`v${i}`));
    await seed.close();

    const log = captureLog();
    try {
      const ctx = buildApiContext(env, { flushTimer: false });
      jest.spyOn(ctx.tiers[0]!, 'put').mockRejectedValue(new TierUnavailableError('hot', new Error('Connection is closed.')));
      const reads = 2_000;
      for (let i = 0; i < reads; i++) expect((await ctx.coordinator.get('flood', `k${i % 20}`))?.tier).toBe('cold');
      await ctx.coordinator.close();
      const lines = log.lines();
      expect(lines.length).toBeLessThanOrEqual(3);
      expect(lines[0]).toMatchObject({
        level: 'error',
        msg: expect.stringMatching(/background promotion failed: TierUnavailableError: tier 'hot' is unavailable/),
      });
      const counted = docs.filter((d) => d.Activity === 'promotion').reduce((n, d) => n + (d.BackgroundErrors as number), 0);
      // The first failure is counted at once, the rest when their summary line is due (10 s, after this test).
      expect(counted).toBeGreaterThanOrEqual(1);
      expect(counted).toBeLessThanOrEqual(reads);
    } finally {
      log.restore();
    }
  });

  it('backgroundErrorLog: one line per kind per interval, and the metric adds up to every failure', () => {
    let t = 0;
    const lines: string[] = [];
    const report = backgroundErrorLog({ environment: 'test', now: () => t, schedule: null, log: (l) => lines.push(l) });
    docs.length = 0;
    const down = hotDown();
    for (let s = 0; s < 30; s++) {
      for (let i = 0; i < 13_000; i++) report(down, 'promotion');
      t += 1_000;
    }
    report(hotDown(), 'promotion'); // after the last second: writes the last interval's count
    expect(lines.length).toBe(4); // the stack, then one line per 10 s (a stack per failure before: 390,001 of them)
    const counted = docs.reduce((n, d) => n + (d.BackgroundErrors as number), 0);
    expect(counted).toBe(30 * 13_000 + 1);
    expect(docs[0]).toMatchObject({ Environment: 'test', Activity: 'promotion' });
  });
});

describe('API requests answered with a typed 5xx (errorResponder)', () => {
  afterEach(() => setApiContext(undefined));

  it('log the first of a kind with its request id, not one line per request', async () => {
    const tier = new MemoryTier({ name: 'hot' });
    jest.spyOn(tier, 'get').mockRejectedValue(new TierUnavailableError('hot', new Error('Connection is closed.')));
    setApiContext({
      coordinator: new Coordinator({ tiers: [tier], flushTimer: false }),
      inlineLimitBytes: 1024,
      urlTtlSeconds: 60,
    });
    const keys = apiHandler('keys');
    const event = {
      ...{
        httpMethod: 'GET',
        resource: '/v1/ns/{ns}/keys/{key}',
        path: '/v1/ns/app/keys/k',
        pathParameters: { ns: 'app', key: 'k' },
      },
      ...{ headers: {}, body: null, isBase64Encoded: false, requestContext: {} },
    } as unknown as ApiEvent;
    const log = captureLog();
    try {
      for (let i = 0; i < 500; i++) {
        const res = (await keys(event, { awsRequestId: `req-${i}` } as Context)) as ApiResult;
        expect(res.statusCode).toBe(503);
      }
      expect(log.lines()).toHaveLength(1);
      expect(log.lines()[0]).toMatchObject({ msg: 'request failed', requestId: 'req-0', code: 'TIER_UNAVAILABLE' });
    } finally {
      log.restore();
    }
  });
});
