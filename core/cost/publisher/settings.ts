import * as z from 'zod';
import { ValidationError } from '../../errors.js';
import { COST_TIERS } from '../../metrics/metric-catalog.js';
import { DEFAULT_CATALOG_ID } from '../model/price-catalog.js';
import { issueLines } from '../../util/zod-issues.js';

/**
 * What the cost publisher measures and how, as one JSON document (the Lambda's `STRATA_COST_SETTINGS`, written by
 * the CDK construct from the environment's configuration). Validated with zod; a bad document stops the job with a
 * ValidationError (code VALIDATION_FAILED) naming the offending path.
 */
export const costPublisherSettingsSchema = z.strictObject({
  /** Value of the `Environment` dimension (dev, staging, prod). */
  environment: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'environment is 1-32 characters of a-z, 0-9 and "-"'),
  /** Price catalog region; absent: the function's AWS_REGION. */
  region: z
    .string()
    .regex(/^[a-z]{2}(-[a-z]+)+-\d$/)
    .optional(),
  /** @default the newest AWS catalog */
  catalogId: z.string().default(DEFAULT_CATALOG_ID),
  /** Usage window ending at the run's time; request counts are per window, rates per hour. @default 60 */
  windowMinutes: z.number().int().min(5).max(180).default(60),
  /** Tenants and their namespaces (the environment's tenants[]): per-tenant cost follows their namespaces. */
  tenants: z.array(z.strictObject({ name: z.string().min(1).max(64), namespaces: z.array(z.string().min(1)) })).default([]),
  /** Tags every cache-node instance and volume carries (all must match). */
  fleet: z.strictObject({
    tags: z
      .record(z.string().min(1), z.string().min(1))
      .refine(
        (t) => Object.keys(t).length > 0,
        'give at least one tag: an empty filter would price every instance in the account',
      ),
  }),
  /** ElastiCache Serverless cache of the hot tier. */
  hot: z
    .strictObject({
      cacheName: z.string().min(1),
      /**
       * CloudWatch dimension naming a serverless cache in AWS/ElastiCache: serverless caches publish under `clusterId`
       * (the cache's name), not the node-based clusters' `CacheClusterId` (AWS's serverless metrics page; seen in
       * `aws cloudwatch list-metrics` output quoted in open-constructs/aws-cdk-library#68 and
       * cdklabs/cdk-monitoring-constructs#766, which fixed the same mix-up). @default 'clusterId'
       */
      dimension: z.string().min(1).default('clusterId'),
    })
    .optional(),
  /** S3 bucket of the cold tier. */
  cold: z
    .strictObject({
      bucket: z.string().min(3),
      /** The tier's key prefix (one path segment). @default 'v1' */
      prefix: z.string().default('v1'),
      /** Id of the bucket's request-metrics filter, when one is configured (AWS/S3 GetRequests, PutRequests). */
      requestMetricsFilterId: z.string().min(1).optional(),
      /** Bound on the ListObjectsV2 walk used before S3's daily storage metrics exist. @default 200000 */
      maxListedObjects: z.number().int().min(1).default(200_000),
    })
    .optional(),
  /** API Gateway REST API name (dimension ApiName of AWS/ApiGateway). */
  apiName: z.string().min(1).optional(),
  /** Lambda functions billed to a tier (the publisher adds itself under `monitoring`). */
  functions: z
    .array(z.strictObject({ name: z.string().min(1), memoryMb: z.number().int().min(128).max(10240), tier: z.enum(COST_TIERS) }))
    .default([]),
  /** What monitoring itself costs besides the publisher: dashboards, alarm metrics, and how often this job runs. */
  monitoring: z
    .strictObject({
      dashboards: z.number().int().min(0).default(0),
      alarmMetrics: z.number().int().min(0).default(0),
      /** @default 4 (every 15 minutes) */
      runsPerHour: z.number().positive().max(60).default(4),
    })
    .prefault({}),
});

export type CostPublisherSettingsInput = z.input<typeof costPublisherSettingsSchema>;
export type CostPublisherSettings = z.output<typeof costPublisherSettingsSchema>;

/** The environment variable holding the settings document. */
export const COST_SETTINGS_ENV = 'STRATA_COST_SETTINGS';

/** Validates a settings object. */
export function parseCostPublisherSettings(input: unknown): CostPublisherSettings {
  const r = costPublisherSettingsSchema.safeParse(input);
  if (r.success) return r.data;
  const issues = issueLines(r.error.issues);
  throw new ValidationError(COST_SETTINGS_ENV, issues.join('; '), { issues });
}

/** Parses and validates the JSON text of {@link COST_SETTINGS_ENV}. */
export function costPublisherSettingsFromJson(text: string | undefined): CostPublisherSettings {
  if (text === undefined || text.trim() === '')
    throw new ValidationError(COST_SETTINGS_ENV, 'is not set: the cost publisher needs its settings document');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(COST_SETTINGS_ENV, `is not valid JSON: ${(e as Error).message}`);
  }
  return parseCostPublisherSettings(json);
}
