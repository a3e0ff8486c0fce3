import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { EC2Client } from '@aws-sdk/client-ec2';
import { S3Client } from '@aws-sdk/client-s3';
import { RingStore, S3CasStore } from '../ring/store.js';
import { loadRuntimeEnv } from '../runtime/config.js';
import { casStoreFromEnv, readFleetSecret } from '../runtime/warm.js';
import { NodeClient } from '../warm/node-client.js';
import { CloudWatchMetricSource, Ec2FleetReader, S3ListingReader } from './aws-usage-readers.js';
import type { CostPublisherDeps } from './cost-publisher.js';
import { COST_SETTINGS_ENV, costPublisherSettingsFromJson, type CostPublisherSettings } from './cost-publisher-settings.js';
import type { FleetStateSource } from './fleet-state.js';
import { CloudWatchMetricSink } from './publisher.js';
import type { CostedFunction } from './usage.js';

/**
 * The cost publisher's dependencies built from environment variables (the Lambda's configuration):
 *   STRATA_COST_SETTINGS    the settings document (cost-publisher-settings.ts)
 *   AWS_REGION              region of the AWS clients, and of the prices unless the settings name one
 *   STRATA_WARM_RING_BUCKET / STRATA_WARM_RING_PREFIX, or STRATA_WARM_RING_DIR, and STRATA_WARM_SECRET_ARN (or _SECRET)
 *                           where the ring document is and the fleet's secret (as the API runtime reads them);
 *                           absent: no warm tier, the fleet is empty
 *   STRATA_S3_ENDPOINT / AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
 *                           endpoint overrides (LocalStack); the SDK reads AWS_ENDPOINT_URL itself
 *   AWS_LAMBDA_FUNCTION_NAME, AWS_LAMBDA_FUNCTION_MEMORY_SIZE
 *                           set by Lambda: the publisher bills its own invocations to `monitoring`
 */
export interface CostPublisherRuntime {
  readonly settings: CostPublisherSettings;
  readonly deps: CostPublisherDeps;
  readonly extraFunctions: readonly CostedFunction[];
  close(): Promise<void>;
}

export function costPublisherFromEnv(env: NodeJS.ProcessEnv = process.env): CostPublisherRuntime {
  const parsed = costPublisherSettingsFromJson(env[COST_SETTINGS_ENV]);
  const runtime = loadRuntimeEnv(env);
  const region = parsed.region ?? runtime.AWS_REGION;
  const settings: CostPublisherSettings = { ...parsed, region };

  const s3 = new S3Client({ region, ...(runtime.STRATA_S3_ENDPOINT ? { endpoint: runtime.STRATA_S3_ENDPOINT, forcePathStyle: true } : {}) });
  const ec2 = new EC2Client({ region });
  const cloudWatch = new CloudWatchClient({ region });
  const metrics = new CloudWatchMetricSource(cloudWatch);

  const cas = casStoreFromEnv(runtime);
  const ring = cas ? new RingStore(cas) : undefined;
  // The fleet secret (from Secrets Manager by STRATA_WARM_SECRET_ARN in AWS) is read on the first node call.
  let nodes: Promise<NodeClient> | undefined;
  const nodeClient = () => (nodes ??= readFleetSecret(runtime).then((secret) => new NodeClient({ secret, timeoutMs: runtime.STRATA_WARM_TIMEOUT_MS })));
  const fleetState: FleetStateSource = {
    ring: async () => (ring ? ring.load() : undefined),
    nodeStats: async (url) => (await nodeClient()).stats(url),
  };

  const self = env.AWS_LAMBDA_FUNCTION_NAME;
  const memoryMb = Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE);
  const extraFunctions: CostedFunction[] = self && Number.isInteger(memoryMb) && memoryMb > 0 ? [{ name: self, memoryMb, tier: 'monitoring' }] : [];

  return {
    settings,
    deps: { fleet: new Ec2FleetReader(ec2, settings.fleet.tags), objects: new S3ListingReader(s3), metrics, fleetState, sink: new CloudWatchMetricSink(cloudWatch) },
    extraFunctions,
    close: async () => {
      if (nodes) await (await nodes.catch(() => undefined))?.close();
      if (cas instanceof S3CasStore) cas.close();
      s3.destroy();
      ec2.destroy();
      cloudWatch.destroy();
    },
  };
}
