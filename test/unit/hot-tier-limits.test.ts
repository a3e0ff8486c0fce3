/**
 * grow / shrink of the hot tier: ElastiCache Serverless usage limits (core/composition/hot-tier-limits.ts).
 * ElastiCache does not run here (LocalStack's community edition has no serverless caches), so the SDK client is a
 * stub at the SDK boundary that records the requests and answers as DescribeServerlessCaches documents. The AWS
 * rules the requests must follow are checked on what was sent:
 *  - DataStorage.Unit is required and `GB` is its only value; Maximum 1..5000 GB; ECPUPerSecond.Maximum 1000..15,000,000
 *    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-elasticache-serverlesscache-datastorage.html
 *    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-elasticache-serverlesscache-ecpupersecond.html
 *    https://docs.aws.amazon.com/cdk/api/v2/docs/@aws-cdk_aws-elasticache-alpha.CacheUsageLimitsProperty.html (the bounds)
 */
import { DescribeServerlessCachesCommand, ModifyServerlessCacheCommand } from '@aws-sdk/client-elasticache';
import { HotTierLimits, type ElastiCacheLimitsClient } from '../../core/composition/hot-tier-limits.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { BackgroundEvaluator } from '../../core/policy/evaluator.js';

function stub(limits: { gb?: number; ecpu?: number }, status = 'available') {
  const sent: unknown[] = [];
  const client: ElastiCacheLimitsClient = {
    send: (async (command: DescribeServerlessCachesCommand | ModifyServerlessCacheCommand) => {
      sent.push(command);
      if (command instanceof DescribeServerlessCachesCommand)
        return {
          ServerlessCaches: [
            {
              ServerlessCacheName: command.input.ServerlessCacheName,
              Status: status,
              CacheUsageLimits: {
                ...(limits.gb !== undefined ? { DataStorage: { Maximum: limits.gb, Unit: 'GB' } } : {}),
                ...(limits.ecpu !== undefined ? { ECPUPerSecond: { Maximum: limits.ecpu } } : {}),
              },
            },
          ],
        };
      return {};
    }) as ElastiCacheLimitsClient['send'],
  };
  const modified = () =>
    sent.filter((c) => c instanceof ModifyServerlessCacheCommand).map((c) => (c as ModifyServerlessCacheCommand).input);
  return { client, sent, modified };
}

describe('the hot tier grows and shrinks by its ElastiCache Serverless limits', () => {
  it('raises both maxima by the percentage, naming the cache, with the GB unit DataStorage requires', async () => {
    const s = stub({ gb: 10, ecpu: 5000 });
    expect(await new HotTierLimits(s.client, 'strata-prod').resize(50)).toBe(
      'hot tier limits raised: data storage 10 → 15 GB, 5000 → 7500 ECPU/s',
    );
    expect(s.modified()).toEqual([
      {
        ServerlessCacheName: 'strata-prod',
        CacheUsageLimits: { DataStorage: { Maximum: 15, Unit: 'GB' }, ECPUPerSecond: { Maximum: 7500 } },
      },
    ]);
  });

  it("stays within ElastiCache's bounds, and skips when there is nothing left to change", async () => {
    const high = stub({ gb: 4000, ecpu: 12_000_000 });
    await new HotTierLimits(high.client, 'c').resize(100);
    expect(high.modified()[0]!.CacheUsageLimits).toEqual({
      DataStorage: { Maximum: 5000, Unit: 'GB' },
      ECPUPerSecond: { Maximum: 15_000_000 },
    });
    const floor = stub({ gb: 1, ecpu: 1000 });
    expect(await new HotTierLimits(floor.client, 'c').resize(-50)).toBe("skipped: the limits are at ElastiCache's minimum");
    expect(floor.modified()).toEqual([]);
  });

  it('leaves an uncapped cache alone and waits for a cache being modified', async () => {
    expect(await new HotTierLimits(stub({}).client, 'c').resize(50)).toMatch(/^skipped: the cache has no usage limits/);
    const busy = stub({ gb: 10 }, 'modifying');
    expect(await new HotTierLimits(busy.client, 'c').resize(50)).toBe('skipped: the cache is modifying');
    expect(busy.modified()).toEqual([]);
  });

  it('a grow rule on the hot tier is carried out by percent; one by nodes is refused', async () => {
    const s = stub({ gb: 8, ecpu: 2000 });
    const limits = new HotTierLimits(s.client, 'c');
    const ev = new BackgroundEvaluator({
      actions: {
        fleetSize: async () => 1,
        scaling: async () => false,
        scaleOut: async () => 'x',
        scaleIn: async () => 'x',
        resizeHot: (percent) => limits.resize(percent),
      },
      state: async () => ({ tiers: { hot: { fillPercent: 90 } } }),
    });
    const policy = compilePolicyInput(
      {
        rules: [
          {
            id: 'hot-up',
            on: { threshold: { tier: 'hot', metric: 'fillPercent', op: '>=', value: 80 } },
            do: [{ grow: { tier: 'hot', percent: 25 } }],
          },
        ],
      },
      { background: true, defaults: false },
    );
    expect(await ev.tick(policy)).toEqual([
      expect.objectContaining({
        rule: 'hot-up',
        response: 'grow',
        outcome: 'done',
        detail: 'hot tier limits raised: data storage 8 → 10 GB, 2000 → 2500 ECPU/s',
      }),
    ]);
    expect(() =>
      compilePolicyInput(
        {
          rules: [
            {
              id: 'hot-up',
              on: { threshold: { tier: 'hot', metric: 'fillPercent', op: '>=', value: 80 } },
              do: [{ grow: { tier: 'hot', nodes: 1 } }],
            },
          ],
        },
        { background: true },
      ),
    ).toThrow(/grow of the hot tier is by percent/);
  });
});
