/**
 * The scheduled policy evaluator as AWS runs it (core/composition/policy-evaluator-lambda.ts), one tick per
 * invocation of its two halves (the flush beside the tiers, the tick outside the VPC), over real parts: the local folder as cold tier and policy store, a memory hot tier with write-back,
 * and LocalStack CloudWatch for the cost projection. It must flush write-back values with no request arriving, keep
 * its timers and firing history across invocations in the policy store (which the admin API serves), judge cost
 * rules against the published projection, and tell the ticker when to tick again within the minute.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudWatchClient, PutMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { buildApiContext, type BuiltContext } from '../../core/composition/api-context.js';
import { policyFlush, policyJobs, policyTick, type PolicyTickRuntime } from '../../core/composition/policy-evaluator-lambda.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { METRICS } from '../../core/metrics/metric-catalog.js';
import { uniqueName } from '../helpers/env.js';
import { LOCALSTACK_ENDPOINT } from '../helpers/services.js';

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

describe('the scheduled policy evaluator (one tick per invocation)', () => {
  let dir: string;
  let ctx: BuiltContext;
  let rt: PolicyTickRuntime;
  const environment = uniqueName('tick');
  const cw = new CloudWatchClient({ endpoint: LOCALSTACK_ENDPOINT, region: 'us-east-1', credentials });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'strata-tick-'));
    const env = loadRuntimeEnv({
      STRATA_LOCAL_DIR: join(dir, 'data'),
      STRATA_POLICY_STORE: `file:${join(dir, 'policies')}`,
      STRATA_POLICY_EVALUATOR: '1',
      STRATA_ENV: environment,
    });
    ctx = buildApiContext(env, { flushTimer: false });
    await ctx.coordinator.ready();
    // metricsTtlMs 0: every tick asks CloudWatch (a deployed evaluator keeps the answer a minute).
    rt = {
      live: ctx.livePolicy!,
      store: ctx.evaluatorState!,
      cloudWatch: cw,
      environment,
      fleet: () => undefined,
      metricsTtlMs: 0,
      jobs: ctx.jobBoard!,
    };
  });
  afterAll(async () => {
    await ctx?.coordinator.close();
    cw.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('flushes write-back values without traffic, fires timers across invocations, and asks to tick again in the minute', async () => {
    const current = await ctx.policyAdmin!.current();
    await ctx.policyAdmin!.put(
      {
        namespaces: { sessions: { preset: 'low-latency', with: { flushSeconds: 1 } } },
        budgets: [{ id: 'monthly', monthlyUsd: 100 }],
        rules: [
          { id: 'heartbeat', on: { timer: { everySeconds: 1 } }, do: [{ alert: { message: 'still here' } }] },
          {
            id: 'over-budget',
            on: { threshold: { cost: 'projectedMonthlyUsd', op: '>', value: { budget: 'monthly' } } },
            do: [{ alert: { message: 'projected spend is over budget' } }],
          },
        ],
      },
      { ifVersion: current.version, author: 'test' },
    );
    // The first tick reads the policy and starts the timers' clocks; the first flush reads it too (the coordinator follows it).
    const first = await policyTick({}, rt);
    await policyFlush(ctx);
    expect(first).toMatchObject({ ticks: 1, again: true, waitSeconds: 1 });
    // A write-back value, then no request at all: only the evaluator's tick can write it down.
    const w = await ctx.coordinator.put('sessions', 'cart', Buffer.from('3 items'));
    expect(w.durable).toBe(false);
    const cold = ctx.tiers.find((t) => t.name === 'cold')!;
    expect(await cold.head('sessions', 'cart')).toBeUndefined();
    await new Promise((r) => setTimeout(r, 1100));
    // The cost publisher's projection, as it publishes it.
    await cw.send(
      new PutMetricDataCommand({
        Namespace: METRICS.projectedMonthlyCost.namespace,
        MetricData: [
          {
            MetricName: METRICS.projectedMonthlyCost.name,
            Dimensions: [{ Name: 'Environment', Value: environment }],
            Value: 250,
            Timestamp: new Date(),
          },
        ],
      }),
    );
    // The ticker invokes both halves side by side: the flush (in the VPC) and the tick (outside it).
    const [flush, second] = await Promise.all([
      policyFlush(ctx),
      policyTick({ startedAt: first.startedAt, ticks: first.ticks }, rt),
    ]);
    expect(flush.flushed).toBe(1);
    expect(second).toMatchObject({ startedAt: first.startedAt, ticks: 2, again: true });
    expect((await cold.get('sessions', 'cart'))?.value.toString()).toBe('3 items');
    // Kept in the policy store, newest first, where the admin API reads it.
    const firings = await ctx.storedFirings!.firings(10);
    expect(firings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ rule: 'heartbeat', response: 'alert', outcome: 'done', detail: 'still here' }),
        expect.objectContaining({ rule: 'over-budget', outcome: 'done' }),
      ]),
    );
    // A tick that starts late in the minute's window does not ask for another.
    const late = await policyTick({ startedAt: new Date(Date.now() - 54_500).toISOString(), ticks: 9 }, rt);
    expect(late).toMatchObject({ ticks: 10, again: false });
  });

  it('queues a background copy (re-warming hot) for the job runner, which carries it out beside the tiers; the next tick records it', async () => {
    const current = await ctx.policyAdmin!.current();
    await ctx.policyAdmin!.put(
      {
        rules: [
          {
            id: 'prewarm',
            scope: { namespace: 'catalog' },
            on: { timer: { everySeconds: 1 } },
            do: [{ copy: { from: 'cold', to: ['hot'], what: [{ object: 'tag', equals: 'popular' }] } }],
          },
        ],
      },
      { ifVersion: current.version, author: 'test' },
    );
    await ctx.livePolicy!.refresh(); // this process's coordinator follows it (the API functions do per request)
    const hot = ctx.tiers.find((t) => t.name === 'hot')!;
    // Written through to hot and cold, then gone from hot (evicted, as a full cache does).
    for (let i = 0; i < 6; i++) {
      await ctx.coordinator.put('catalog', `item${i}`, Buffer.from(`item ${i}`), { tags: i % 2 ? ['popular'] : [] });
      await hot.delete('catalog', `item${i}`);
    }
    const inHot = async (key: string) => (await hot.get('catalog', key))?.value.toString();
    expect(await inHot('item1')).toBeUndefined();
    // The first tick starts the timer's clock; a second later the rule fires: the evaluator (outside the VPC) reaches
    // no tier, so it queues the copy and tells the ticker to start the runner.
    const first = await policyTick({}, rt);
    expect(first.runJobs).toBeUndefined();
    await new Promise((r) => setTimeout(r, 1100));
    const second = await policyTick({ startedAt: first.startedAt, ticks: first.ticks }, rt);
    expect(second.runJobs).toBe(true);
    expect(await inHot('item1')).toBeUndefined();
    // The runner (in the VPC) does the work; the evaluator's next tick records the end, from the board.
    expect(await policyJobs({ owner: 'test-invocation', budgetMs: 20_000 }, ctx)).toEqual({ ran: 1, finished: 1 });
    for (let i = 0; i < 6; i++) {
      expect(await inHot(`item${i}`)).toBe(i % 2 ? `item ${i}` : undefined);
      expect((await ctx.coordinator.get('catalog', `item${i}`))?.entry.value.toString()).toBe(`item ${i}`);
    }
    const third = await policyTick({ startedAt: first.startedAt, ticks: second.ticks }, rt);
    expect(third.runJobs).toBeUndefined();
    expect(await ctx.storedFirings!.firings(5)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          rule: 'prewarm',
          response: 'copy',
          outcome: 'done',
          detail: expect.stringMatching(/^copy finished: 3 of 6 entries selected, 3 copied/),
        }),
        expect.objectContaining({ rule: 'prewarm', response: 'copy', detail: expect.stringMatching(/^copy queued/) }),
      ]),
    );
  });
});
