import type { PriceCatalog, RegionPrices } from './schema.js';

/**
 * AWS on-demand list prices for the services Strata uses, as of November 2026.
 *
 * Provenance: transcribed by hand from the public AWS pricing pages named in each `source`; they were not
 * fetched live (the environment this was written in cannot reach aws.amazon.com) and no Price List API call is
 * made at build or run time. us-east-1 figures were cross-checked against third-party summaries dated June 2026
 * where one was at hand (m7g.large $0.0816/h; Valkey Serverless $0.084/GB-hour and $0.0023 per million ECPUs).
 * Entries whose `note` says "derived" were computed from published ratios, not read off a page. Confirm prices
 * with `aws pricing get-products` before budgeting with them (docs/COST.md, "Updating prices").
 */

const AS_OF = '2026-11';
const page = (path: string, what: string): string => `AWS public price list, https://aws.amazon.com/${path} (${what})`;

// Region-independent list prices (identical in us-east-1 and eu-west-1).
const lambda: NonNullable<RegionPrices['lambda']> = {
  asOf: AS_OF,
  source: page('lambda/pricing/', 'Arm price, first 7.5 billion GB-s tier; requests'),
  perGBSecondArm64: 0.0000133334,
  requests: { usd: 0.2, per: 1_000_000 },
};
const apiGateway: NonNullable<RegionPrices['apiGateway']> = {
  asOf: AS_OF,
  source: page('api-gateway/pricing/', 'REST APIs, first 333 million requests a month'),
  restRequests: { usd: 3.5, per: 1_000_000 },
};
const stepFunctions: NonNullable<RegionPrices['stepFunctions']> = {
  asOf: AS_OF,
  source: page('step-functions/pricing/', 'Standard workflows, beyond the free tier'),
  standardTransitions: { usd: 0.025, per: 1000 },
};
const s3Classes: RegionPrices['s3']['classes'] = {
  STANDARD: {
    perGBMonth: 0.023,
    put: { usd: 0.005, per: 1000 },
    get: { usd: 0.0004, per: 1000 },
    retrievalPerGB: 0,
    minBillableObjectBytes: 0,
    minStorageDays: 0,
  },
  STANDARD_IA: {
    perGBMonth: 0.0125,
    put: { usd: 0.01, per: 1000 },
    get: { usd: 0.001, per: 1000 },
    retrievalPerGB: 0.01,
    minBillableObjectBytes: 128 * 1024,
    minStorageDays: 30,
  },
  GLACIER_IR: {
    perGBMonth: 0.004,
    put: { usd: 0.02, per: 1000 },
    get: { usd: 0.01, per: 1000 },
    retrievalPerGB: 0.03,
    minBillableObjectBytes: 128 * 1024,
    minStorageDays: 90,
  },
};
const s3Source = page('s3/pricing/', 'first 50 TB tier; requests per 1,000; retrieval per GB');
const transferSource = page(
  'ec2/pricing/on-demand/#Data_Transfer',
  'out to internet, first 10 TB a month after the 100 GB free allowance; inter-AZ each way',
);

// Baseline (not burst) network bandwidth of each size, from the EC2 instance-type documentation.
const graviton = (memoryGiB: number, vcpus: number, networkGbps: number, hourly: number) => ({
  hourly,
  memoryGiB,
  vcpus,
  arch: 'arm64' as const,
  networkGbps,
});

const usEast1: RegionPrices = {
  ec2: {
    asOf: AS_OF,
    source: page('ec2/pricing/on-demand/', 'Linux, US East (N. Virginia)'),
    instances: {
      'r7g.medium': graviton(8, 1, 0.52, 0.0536),
      'r7g.large': graviton(16, 2, 0.937, 0.1071),
      'r7g.xlarge': graviton(32, 4, 1.876, 0.2142),
      'm7g.medium': graviton(4, 1, 0.52, 0.0408),
      'm7g.large': graviton(8, 2, 0.937, 0.0816),
      'm7g.xlarge': graviton(16, 4, 1.876, 0.1632),
      'c7g.medium': graviton(2, 1, 0.52, 0.0363),
      'c7g.large': graviton(4, 2, 0.937, 0.0725),
      'c7g.xlarge': graviton(8, 4, 1.876, 0.145),
      't4g.small': graviton(2, 2, 0.128, 0.0168),
      't4g.medium': graviton(4, 2, 0.256, 0.0336),
    },
  },
  ebs: {
    asOf: AS_OF,
    source: page('ebs/pricing/', 'gp3, US East (N. Virginia)'),
    gp3: {
      perGBMonth: 0.08,
      minSizeGB: 1,
      maxSizeGB: 16384,
      baselineIops: 3000,
      perIopsMonth: 0.005,
      baselineThroughputMBps: 125,
      perMBpsMonth: 0.04,
      maxThroughputMBps: 1000,
    },
  },
  s3: { asOf: AS_OF, source: s3Source, classes: s3Classes },
  dataTransfer: { asOf: AS_OF, source: transferSource, outToInternetPerGB: 0.09, interAzPerGB: 0.01 },
  elasticache: {
    asOf: AS_OF,
    source: page('elasticache/pricing/', 'Valkey: Serverless, and on-demand nodes, US East (N. Virginia)'),
    note: "node prices are the Valkey rates (20% below Redis OSS); memory is the node type's total, before the 25% reserved-memory default",
    serverless: { engine: 'valkey', perGBHour: 0.084, ecpu: { usd: 0.0023, per: 1_000_000 }, minGB: 0.1 },
    nodes: {
      'cache.t4g.small': { hourly: 0.0256, memoryGiB: 1.37, networkGbps: 0.128 },
      'cache.t4g.medium': { hourly: 0.052, memoryGiB: 3.09, networkGbps: 0.256 },
      'cache.m7g.large': { hourly: 0.1264, memoryGiB: 6.38, networkGbps: 0.937 },
      'cache.r7g.large': { hourly: 0.1752, memoryGiB: 13.07, networkGbps: 0.937 },
      'cache.r7g.xlarge': { hourly: 0.3496, memoryGiB: 26.32, networkGbps: 1.876 },
    },
  },
  lambda,
  apiGateway,
  stepFunctions,
  cloudWatch: {
    asOf: AS_OF,
    source: page('cloudwatch/pricing/', 'first tiers: 10,000 metrics, standard alarms, Standard log class'),
    customMetricPerMonth: 0.3,
    dashboardPerMonth: 3,
    alarmStandardPerMonth: 0.1,
    alarmHighResolutionPerMonth: 0.3,
    putMetricData: { usd: 0.01, per: 1000 },
    getMetricDataMetrics: { usd: 0.01, per: 1000 },
    logsIngestionPerGB: 0.5,
    logsStoragePerGBMonth: 0.03,
  },
};

const euWest1: RegionPrices = {
  ec2: {
    asOf: AS_OF,
    source: page('ec2/pricing/on-demand/', 'Linux, Europe (Ireland)'),
    note: 'r7g/m7g/c7g derived: us-east-1 price x the published eu-west-1/us-east-1 ratio of the r6g/m6g/c6g sizes (1.119/1.117/1.135); t4g transcribed',
    instances: {
      'r7g.medium': graviton(8, 1, 0.52, 0.06),
      'r7g.large': graviton(16, 2, 0.937, 0.1199),
      'r7g.xlarge': graviton(32, 4, 1.876, 0.2397),
      'm7g.medium': graviton(4, 1, 0.52, 0.0456),
      'm7g.large': graviton(8, 2, 0.937, 0.0911),
      'm7g.xlarge': graviton(16, 4, 1.876, 0.1823),
      'c7g.medium': graviton(2, 1, 0.52, 0.0412),
      'c7g.large': graviton(4, 2, 0.937, 0.0823),
      'c7g.xlarge': graviton(8, 4, 1.876, 0.1646),
      't4g.small': graviton(2, 2, 0.128, 0.0184),
      't4g.medium': graviton(4, 2, 0.256, 0.0368),
    },
  },
  ebs: {
    asOf: AS_OF,
    source: page('ebs/pricing/', 'gp3, Europe (Ireland)'),
    gp3: {
      perGBMonth: 0.088,
      minSizeGB: 1,
      maxSizeGB: 16384,
      baselineIops: 3000,
      perIopsMonth: 0.0055,
      baselineThroughputMBps: 125,
      perMBpsMonth: 0.044,
      maxThroughputMBps: 1000,
    },
  },
  s3: { asOf: AS_OF, source: s3Source, classes: s3Classes },
  dataTransfer: { asOf: AS_OF, source: transferSource, outToInternetPerGB: 0.09, interAzPerGB: 0.01 },
  elasticache: {
    asOf: AS_OF,
    source: page('elasticache/pricing/', 'Valkey: Serverless, and on-demand nodes, Europe (Ireland)'),
    note: 'derived: Redis OSS eu-west-1 rates (Serverless $0.14/GB-hour, $0.0038/M ECPU) x the Valkey discount (33% serverless, 20% nodes)',
    serverless: { engine: 'valkey', perGBHour: 0.0941, ecpu: { usd: 0.0026, per: 1_000_000 }, minGB: 0.1 },
    nodes: {
      'cache.t4g.small': { hourly: 0.0288, memoryGiB: 1.37, networkGbps: 0.128 },
      'cache.t4g.medium': { hourly: 0.0576, memoryGiB: 3.09, networkGbps: 0.256 },
      'cache.m7g.large': { hourly: 0.1408, memoryGiB: 6.38, networkGbps: 0.937 },
      'cache.r7g.large': { hourly: 0.1944, memoryGiB: 13.07, networkGbps: 0.937 },
      'cache.r7g.xlarge': { hourly: 0.3888, memoryGiB: 26.32, networkGbps: 1.876 },
    },
  },
  lambda,
  apiGateway,
  stepFunctions,
  cloudWatch: {
    asOf: AS_OF,
    source: page('cloudwatch/pricing/', 'Europe (Ireland); first tiers, standard alarms, Standard log class'),
    customMetricPerMonth: 0.3,
    dashboardPerMonth: 3,
    alarmStandardPerMonth: 0.1,
    alarmHighResolutionPerMonth: 0.3,
    putMetricData: { usd: 0.01, per: 1000 },
    getMetricDataMetrics: { usd: 0.01, per: 1000 },
    logsIngestionPerGB: 0.57,
    logsStoragePerGBMonth: 0.03,
  },
};

export const aws202611Catalog: PriceCatalog = {
  id: 'aws-2026-11',
  version: '2026.11.0',
  description:
    "AWS on-demand list prices for Strata's services (Graviton EC2, gp3, S3, ElastiCache Valkey, Lambda arm64, API Gateway REST, Step Functions, CloudWatch)",
  currency: 'USD',
  hoursPerMonth: 730,
  bytesPerGB: 1024 ** 3,
  placements: 'strata',
  regions: { 'us-east-1': usEast1, 'eu-west-1': euWest1 },
};
