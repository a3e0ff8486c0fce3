import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { EC2Client } from '@aws-sdk/client-ec2';
import { S3Client } from '@aws-sdk/client-s3';
import { ringStoreFromEnv } from './ring-store-env.js';
import { CloudWatchMetricSource, Ec2FleetReader, S3ListingReader } from '../cost/publisher/aws-usage-readers.js';
import type { CostPublisherDeps } from '../cost/publisher/publish-cost.js';
import { COST_SETTINGS_ENV, costPublisherSettingsFromJson, type CostPublisherSettings } from '../cost/publisher/settings.js';
import { ringStoreFleetSource, type FleetStateSource } from '../cost/publisher/fleet-state.js';
import { CloudWatchMetricSink } from '../cost/publisher/metric-writer.js';
import type { CostedFunction } from '../cost/model/usage.js';

/**
 * The cost publisher's dependencies built from environment variables (the Lambda's configuration):
 *   STRATA_COST_SETTINGS    the settings document (core/cost/publisher/settings.ts)
 *   AWS_REGION              region of the AWS clients, and of the prices unless the settings name one
 *   STRATA_WARM_RING_BUCKET / STRATA_WARM_RING_PREFIX, or STRATA_WARM_RING_DIR
 *                           the ring store: the ring document and the nodes' statistics reports
 *                           (ring/node-reports.ts); absent: no warm tier, the fleet is empty. No fleet secret:
 *                           the publisher never calls a node, so it runs outside the VPC
 *   STRATA_NODE_STATS_ID_PREFIX
 *                           what precedes a node's id in its report's key (CacheNodeFleet.statsReportIdPrefix)
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
  const ringStore = ringStoreFromEnv(env);
  const region = parsed.region ?? ringStore.region;
  const settings: CostPublisherSettings = { ...parsed, region };

  const s3 = new S3Client({ region, ...(ringStore.s3Endpoint ? { endpoint: ringStore.s3Endpoint, forcePathStyle: true } : {}) });
  const ec2 = new EC2Client({ region });
  const cloudWatch = new CloudWatchClient({ region });
  const metrics = new CloudWatchMetricSource(cloudWatch);

  const cas = ringStore.cas;
  const fleetState: FleetStateSource = cas
    ? ringStoreFleetSource(cas, { reportIdPrefix: ringStore.reportIdPrefix })
    : { ring: async () => undefined, nodeReport: async () => undefined };

  const self = env.AWS_LAMBDA_FUNCTION_NAME;
  const memoryMb = Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE);
  const extraFunctions: CostedFunction[] =
    self && Number.isInteger(memoryMb) && memoryMb > 0 ? [{ name: self, memoryMb, tier: 'monitoring' }] : [];

  return {
    settings,
    deps: {
      fleet: new Ec2FleetReader(ec2, settings.fleet.tags),
      objects: new S3ListingReader(s3),
      metrics,
      fleetState,
      sink: new CloudWatchMetricSink(cloudWatch),
    },
    extraFunctions,
    close: async () => {
      cas?.close?.();
      s3.destroy();
      ec2.destroy();
      cloudWatch.destroy();
    },
  };
}
