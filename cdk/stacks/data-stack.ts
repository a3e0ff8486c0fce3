import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as kms from 'aws-cdk-lib/aws-kms';
import type { Construct } from 'constructs';
import { ColdTierBucket } from '../constructs/cold-tier-bucket.js';
import { ValkeyServerlessCache } from '../constructs/valkey-serverless-cache.js';
import type { StrataNetwork } from './network-stack.js';
import { removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface DataStackProps extends StrataStackProps {
  readonly network: StrataNetwork;
}

/** Data tiers: the hot tier (ElastiCache Serverless, Valkey) and the cold tier (S3). The warm tier is the fleet. */
export class DataStack extends StrataStack {
  readonly hotTier: ValkeyServerlessCache;
  readonly coldTier: ColdTierBucket;
  /** Customer-managed key of the hot tier, when configured. */
  readonly hotTierKey?: kms.Key;

  constructor(scope: Construct, id: string, props: DataStackProps) {
    super(scope, id, { description: `Strata ${props.config.name}: data tiers (ElastiCache Serverless Valkey, S3)`, ...props });
    const { config, network } = props;
    const removal = removalPolicy(config);

    if (config.hotTier.encryptionKey === 'customer-managed') {
      // Retained with the data (removal 'retain'): the cache's final snapshot is encrypted with it.
      this.hotTierKey = new kms.Key(this, 'HotTierKey', {
        description: `Strata ${config.name} hot tier (ElastiCache) encryption at rest`,
        enableKeyRotation: true,
        removalPolicy: removal,
      });
    }
    this.hotTier = new ValkeyServerlessCache(this, 'HotTier', {
      cacheName: `strata-${config.name}`,
      vpc: network.vpc,
      vpcSubnets: network.privateSubnets,
      maxDataStorageGb: config.hotTier.maxDataStorageGb,
      maxEcpuPerSecond: config.hotTier.maxEcpuPerSecond,
      snapshotRetentionDays: config.hotTier.snapshotRetentionDays,
      dailySnapshotTime: config.hotTier.dailySnapshotTime,
      encryptionKey: this.hotTierKey,
      // Where data is retained, the hot tier's is kept in a final snapshot: the cache itself is deleted with the stack.
      onDelete: removal === RemovalPolicy.RETAIN ? 'snapshot' : 'destroy',
    });
    this.hotTier.allowFrom(network.coordinatorSecurityGroup);

    this.coldTier = new ColdTierBucket(this, 'ColdTier', {
      prefix: config.coldTier.prefix,
      tombstoneTtl: Duration.minutes(config.coldTier.tombstoneTtlMinutes),
      stagingExpirationDays: config.coldTier.stagingExpirationDays,
      accessLogExpirationDays: config.coldTier.accessLogExpirationDays,
      removalPolicy: removal,
      // Upload commit requests and sweep requests start their workflows through these events (Workflows stack).
      eventBridge: config.workflows.asyncUploadCompletion || config.workflows.invalidationSweeps,
    });
  }
}
