import { FileCasStore, RingStore, S3CasStore } from '../ring/store.js';
import { RingView } from '../ring/view.js';
import { WarmTier } from '../tiers/warm-tier.js';
import type { RuntimeEnv } from './config.js';

/**
 * The warm tier when a ring store is configured (STRATA_WARM_RING_BUCKET in AWS, STRATA_WARM_RING_DIR locally):
 * routes by the cached ring, refreshed from its compare-and-set store. Pass to buildApiContext as `warmTier`.
 */
export function warmTierFromEnv(env: RuntimeEnv): WarmTier | undefined {
  if (!env.STRATA_WARM_RING_BUCKET && !env.STRATA_WARM_RING_DIR) return undefined;
  const cas = env.STRATA_WARM_RING_BUCKET
    ? new S3CasStore({ bucket: env.STRATA_WARM_RING_BUCKET, prefix: env.STRATA_WARM_RING_PREFIX, clientConfig: { region: env.AWS_REGION, ...(env.STRATA_S3_ENDPOINT ? { endpoint: env.STRATA_S3_ENDPOINT, forcePathStyle: true } : {}) } })
    : new FileCasStore(env.STRATA_WARM_RING_DIR!);
  const ring = new RingView({ store: new RingStore(cas), onError: (e) => console.error(JSON.stringify({ level: 'warn', msg: 'ring refresh failed', error: String(e) })) });
  return new WarmTier({ ring, ownsRing: true, secret: env.STRATA_WARM_SECRET, timeoutMs: env.STRATA_WARM_TIMEOUT_MS });
}
