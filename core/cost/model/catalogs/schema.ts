import * as z from 'zod';

/**
 * Shape of a price catalog. Every service block names the date its prices hold for (`asOf`, YYYY-MM) and
 * where they come from (`source`), so a reader can tell a stale number from a wrong one.
 */

const usd = z.number().nonnegative().finite();
const positive = z.number().positive().finite();
const asOf = z.string().regex(/^\d{4}-(0[1-9]|1[0-2])(-\d{2})?$/, 'asOf must be YYYY-MM or YYYY-MM-DD');
const provenance = { asOf, source: z.string().min(8), note: z.string().optional() };

/** A price per batch of requests: `{ usd: 0.01, per: 10000 }` is "$0.01 per 10,000 requests". */
export const requestPriceSchema = z.strictObject({ usd, per: positive });
export type RequestPrice = z.infer<typeof requestPriceSchema>;

export const instanceSchema = z.strictObject({
  hourly: usd,
  memoryGiB: positive,
  vcpus: positive,
  arch: z.enum(['arm64', 'x86_64', 'i386']),
  /** Sustained (baseline) network bandwidth; burst figures are not used by the model. */
  networkGbps: positive,
  /** Instance-store disk, for the paper's "-disk" placements; absent on EBS-only types. */
  localDiskGB: positive.optional(),
});
export type InstancePrice = z.infer<typeof instanceSchema>;

export const ec2Schema = z.strictObject({ ...provenance, instances: z.record(z.string(), instanceSchema) });

export const ebsSchema = z.strictObject({
  ...provenance,
  /** gp3: storage plus provisioned performance above the free baseline; no per-I/O charge. */
  gp3: z
    .strictObject({
      perGBMonth: usd,
      minSizeGB: positive,
      maxSizeGB: positive,
      baselineIops: positive,
      perIopsMonth: usd,
      baselineThroughputMBps: positive,
      perMBpsMonth: usd,
      maxThroughputMBps: positive,
    })
    .optional(),
  /** Magnetic ("standard") volumes, the only EBS of 2010: storage plus a charge per I/O request. */
  standard: z.strictObject({ perGBMonth: usd, io: requestPriceSchema, maxSizeGB: positive }).optional(),
});

export const s3ClassSchema = z.strictObject({
  perGBMonth: usd,
  /** PUT, COPY, POST, LIST. */
  put: requestPriceSchema,
  /** GET, SELECT and the rest. */
  get: requestPriceSchema,
  retrievalPerGB: usd,
  /** Objects smaller than this are billed as this size (128 KB for IA and Glacier IR). */
  minBillableObjectBytes: z.number().int().nonnegative(),
  minStorageDays: z.number().int().nonnegative(),
});
export const s3StorageClasses = ['STANDARD', 'STANDARD_IA', 'GLACIER_IR'] as const;
export type S3StorageClass = (typeof s3StorageClasses)[number];
export const s3Schema = z.strictObject({
  ...provenance,
  classes: z
    .partialRecord(z.enum(s3StorageClasses), s3ClassSchema)
    .refine((c) => c.STANDARD !== undefined, 'S3 needs at least the STANDARD class'),
});

export const dataTransferSchema = z.strictObject({
  ...provenance,
  /** Out to the internet, first priced tier (the account-wide free allowance is not modelled). */
  outToInternetPerGB: usd,
  /** Between availability zones, each direction. */
  interAzPerGB: usd.optional(),
});

export const elasticacheSchema = z.strictObject({
  ...provenance,
  serverless: z
    .strictObject({
      engine: z.enum(['valkey', 'redis']),
      perGBHour: usd,
      /** ElastiCache Processing Units: 1 ECPU per KiB read or written by simple commands. */
      ecpu: requestPriceSchema,
      minGB: positive,
    })
    .optional(),
  nodes: z.record(z.string().regex(/^cache\./), z.strictObject({ hourly: usd, memoryGiB: positive, networkGbps: positive })),
});

export const lambdaSchema = z.strictObject({ ...provenance, perGBSecondArm64: usd, requests: requestPriceSchema });
export const apiGatewaySchema = z.strictObject({ ...provenance, restRequests: requestPriceSchema });
export const stepFunctionsSchema = z.strictObject({ ...provenance, standardTransitions: requestPriceSchema });
export const cloudWatchSchema = z.strictObject({
  ...provenance,
  customMetricPerMonth: usd,
  dashboardPerMonth: usd,
  alarmStandardPerMonth: usd,
  alarmHighResolutionPerMonth: usd,
  putMetricData: requestPriceSchema,
  /** Charged per metric requested, not per call. */
  getMetricDataMetrics: requestPriceSchema,
  logsIngestionPerGB: usd,
  logsStoragePerGBMonth: usd,
});

export const regionPricesSchema = z.strictObject({
  ec2: ec2Schema,
  ebs: ebsSchema,
  s3: s3Schema,
  dataTransfer: dataTransferSchema,
  elasticache: elasticacheSchema.optional(),
  lambda: lambdaSchema.optional(),
  apiGateway: apiGatewaySchema.optional(),
  stepFunctions: stepFunctionsSchema.optional(),
  cloudWatch: cloudWatchSchema.optional(),
});
export type RegionPrices = z.infer<typeof regionPricesSchema>;

export const priceCatalogSchema = z
  .strictObject({
    id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/),
    /** Bumped on every price change; recorded next to any cost a report prints. */
    version: z.string().min(1),
    description: z.string().min(1),
    currency: z.literal('USD'),
    /** Hours billed per month: AWS uses 730 (8,760 / 12); paper 001's tables use 744 (31 days). */
    hoursPerMonth: positive,
    /** Bytes in a billed GB: 2^30 for AWS, 10^9 in the paper's tables. */
    bytesPerGB: positive,
    /** Which placements the recommender offers: the paper's seven, or Strata's tiers. */
    placements: z.enum(['paper-2010', 'strata']),
    regions: z.record(z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/), regionPricesSchema),
  })
  .refine((c) => Object.keys(c.regions).length > 0, 'a catalog needs at least one region');
export type PriceCatalog = z.infer<typeof priceCatalogSchema>;
