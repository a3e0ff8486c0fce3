import type {
  DescribeServerlessCachesCommand,
  DescribeServerlessCachesCommandOutput,
  ModifyServerlessCacheCommand,
} from '@aws-sdk/client-elasticache';
import { log } from '../util/logger.js';

/**
 * grow / shrink of the hot tier (paper 003, Table 1): ElastiCache Serverless has no nodes to add, so the hot tier
 * grows and shrinks by its usage limits, the most data it may hold and the ECPUs a second it may use, which bound its
 * capacity and its bill. A grow by P% raises both maxima by P%, a shrink lowers them, within what ElastiCache accepts
 * (1..5000 GB, 1000..15,000,000 ECPU/s:
 * https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-elasticache-serverlesscache-datastorage.html
 * and the CDK's ServerlessCache cacheUsageLimits bounds) and the data stack's own validation of the same.
 *
 * A change made here is drift from the stack's template: the next deployment that changes the cache's limits sets them
 * back to the template's (one that does not change them leaves them). docs/POLICIES.md says so.
 */

export const HOT_LIMITS = { minGb: 1, maxGb: 5000, minEcpu: 1000, maxEcpu: 15_000_000 } as const;

/** The two ElastiCache calls, as the SDK's client answers them; tests stub it at the SDK boundary. */
export interface ElastiCacheLimitsClient {
  send(command: DescribeServerlessCachesCommand): Promise<Pick<DescribeServerlessCachesCommandOutput, 'ServerlessCaches'>>;
  send(command: ModifyServerlessCacheCommand): Promise<unknown>;
}

export class HotTierLimits {
  private sdk?: Promise<typeof import('@aws-sdk/client-elasticache')>;

  constructor(
    private readonly client: ElastiCacheLimitsClient,
    /** The serverless cache's name (STRATA_HOT_CACHE_NAME). */
    private readonly cacheName: string,
  ) {}

  /**
   * Raises (percent > 0) or lowers (percent < 0) the cache's data-storage and ECPU maxima; resolves with what it did,
   * or `skipped: <why>` (no limits to change, already at ElastiCache's bound, the cache being modified).
   */
  async resize(percent: number): Promise<string> {
    const { DescribeServerlessCachesCommand, ModifyServerlessCacheCommand } = await (this.sdk ??=
      import('@aws-sdk/client-elasticache'));
    const out = await this.client.send(new DescribeServerlessCachesCommand({ ServerlessCacheName: this.cacheName }));
    const cache = out.ServerlessCaches?.[0];
    if (!cache) return `skipped: no serverless cache named '${this.cacheName}'`;
    if (cache.Status && cache.Status !== 'available') return `skipped: the cache is ${cache.Status}`;
    const limits = cache.CacheUsageLimits;
    const gb = limits?.DataStorage?.Maximum;
    const ecpu = limits?.ECPUPerSecond?.Maximum;
    if (gb === undefined && ecpu === undefined)
      return 'skipped: the cache has no usage limits to change (it grows on its own, without a cap)';
    const scale = (v: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, Math.round(v * (1 + percent / 100))));
    const nextGb = gb === undefined ? undefined : scale(gb, HOT_LIMITS.minGb, HOT_LIMITS.maxGb);
    const nextEcpu = ecpu === undefined ? undefined : scale(ecpu, HOT_LIMITS.minEcpu, HOT_LIMITS.maxEcpu);
    if (nextGb === gb && nextEcpu === ecpu)
      return `skipped: the limits are at ElastiCache's ${percent > 0 ? 'maximum' : 'minimum'}`;
    await this.client.send(
      new ModifyServerlessCacheCommand({
        ServerlessCacheName: this.cacheName,
        CacheUsageLimits: {
          // Unit is required with DataStorage, and GB is its only value; a limit the cache had none of stays unset.
          ...(nextGb !== undefined ? { DataStorage: { Maximum: nextGb, Unit: 'GB' } } : {}),
          ...(nextEcpu !== undefined ? { ECPUPerSecond: { Maximum: nextEcpu } } : {}),
        },
      }),
    );
    const what = [
      nextGb !== undefined ? `data storage ${gb} → ${nextGb} GB` : undefined,
      nextEcpu !== undefined ? `${ecpu} → ${nextEcpu} ECPU/s` : undefined,
    ].filter(Boolean);
    log.info('hot tier limits changed', { cache: this.cacheName, percent, gb: nextGb, ecpu: nextEcpu });
    return `hot tier limits ${percent > 0 ? 'raised' : 'lowered'}: ${what.join(', ')}`;
  }
}
