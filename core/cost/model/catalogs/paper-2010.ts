import type { PriceCatalog } from './schema.js';

const TABLE_I = 'Chiu & Agrawal, "Evaluating Caching and Storage Options on the Amazon Web Services Cloud" (paper 001), Table I';

/**
 * The 2010 prices of paper 001's Table I, exactly as printed, for reproducing its Tables III and IV. The
 * paper quotes no region; these were the US Standard / N. Virginia prices. Instance specs are the paper's
 * §II-B text; network bandwidths ("moderate", "high" I/O) are fitted to its measurements and used only by
 * the recommender.
 */
export const paper2010Catalog: PriceCatalog = {
  id: 'paper-2010',
  version: '2010.1',
  description: 'AWS prices of 2010 as printed in paper 001 (Table I); 744-hour months and decimal GB as its tables use',
  currency: 'USD',
  hoursPerMonth: 744,
  bytesPerGB: 1e9,
  placements: 'paper-2010',
  regions: {
    'us-east-1': {
      ec2: {
        asOf: '2010-06',
        source: `${TABLE_I}; instance specs from its §II-B`,
        note: 'networkGbps ("moderate" and "high" I/O) fitted to the in-memory hit times the paper\'s 200,000-request speedups imply',
        instances: {
          'm1.small': { hourly: 0.085, memoryGiB: 1.7, vcpus: 1, arch: 'i386', networkGbps: 0.25, localDiskGB: 160 },
          'm1.xlarge': { hourly: 0.68, memoryGiB: 15, vcpus: 4, arch: 'x86_64', networkGbps: 0.4, localDiskGB: 1690 },
        },
      },
      ebs: {
        asOf: '2010-06',
        source: TABLE_I,
        standard: { perGBMonth: 0.1, io: { usd: 0.1, per: 1_000_000 }, maxSizeGB: 1000 },
      },
      s3: {
        asOf: '2010-06',
        source: TABLE_I,
        classes: {
          STANDARD: {
            perGBMonth: 0.15,
            put: { usd: 0.01, per: 1000 },
            get: { usd: 0.01, per: 10_000 },
            retrievalPerGB: 0,
            minBillableObjectBytes: 0,
            minStorageDays: 0,
          },
        },
      },
      dataTransfer: {
        asOf: '2010-06',
        source: `${TABLE_I} ("$0.15 per GB-out" for S3 and both instance types)`,
        outToInternetPerGB: 0.15,
      },
    },
  },
};
