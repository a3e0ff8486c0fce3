/**
 * Per-environment configuration of a Strata deployment, validated with zod. One file per environment
 * (`dev.ts`, `staging.ts`, `prod.ts`) holds the committed part; account, and optionally region and AZs, come from
 * CDK context or the environment at synth time (see `load.ts`), so nothing account-specific is committed.
 */
import * as z from 'zod';
import { checkPrelaunchSettings, prelaunchSettingsFields } from '../../core/policy/defaults.js';
import { namespaceConfigSchema } from '../../core/policy/namespace-settings.js';
import { NAMESPACE_PATTERN } from '../../core/model/keys.js';
import { lambdaOriginIssues, lambdaOriginsSchema } from './lambda-origins.js';

export const ENVIRONMENT_NAMES = ['dev', 'staging', 'prod'] as const;
export type EnvironmentName = (typeof ENVIRONMENT_NAMES)[number];

export const API_FUNCTION_NAMES = ['keys', 'batch', 'transfer', 'service', 'admin'] as const;

/** CloudWatch Logs accepts only these retention periods (days). */
export const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

const REGION = /^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$/;

const logRetentionDays = z.number().refine((d) => (LOG_RETENTION_DAYS as readonly number[]).includes(d), {
  message: `log retention must be one of CloudWatch's periods: ${LOG_RETENTION_DAYS.join(', ')} days`,
});

const throttleSchema = z.strictObject({
  /** Steady-state requests per second. */
  rateLimit: z.number().positive('rateLimit must be a positive number of requests per second'),
  /** Bucket size: requests allowed in a burst above the steady rate. */
  burstLimit: z.number().int().min(1, 'burstLimit must be at least 1 request'),
});

const functionSchema = z.strictObject({
  /** @default 1024 */
  memoryMb: z.number().int().min(128).max(10240).default(1024),
  /** API Gateway REST integrations time out at 29 s, so API functions may not run longer. @default 29 */
  timeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(29, "API functions cannot outlive API Gateway's 29 s integration timeout")
    .default(29),
  /** Per-container near cache (L1); must leave room for the request buffers. @default 64 */
  nearCacheMb: z.number().int().min(0).default(64),
  /**
   * Reserved concurrency: the most instances this function may run at once, held for it alone. A cap on the API
   * functions keeps one tenant's flood from taking the concurrency the workflows need. @default - none (shares
   * the account's unreserved pool)
   */
  reservedConcurrency: z.number().int().min(1).optional(),
});

const tenantSchema = z.strictObject({
  /** Names the API key (`strata-<env>-<name>`) and usage plan. */
  name: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,39}$/, 'tenant names are 1-40 characters of a-z, 0-9 and "-", starting with a letter'),
  /** Namespaces this tenant's key may use: names, or a prefix ending in `*` (`web-*`); enforced by the API (api/tenant-access.ts). */
  namespaces: z
    .array(
      z
        .string()
        .refine(
          (n) => NAMESPACE_PATTERN.test(n.endsWith('*') ? n.slice(0, -1) || 'x' : n),
          'namespaces are 1-63 characters of a-z, 0-9, "_" and "-", starting with a letter or digit (as the API accepts them), or such a prefix followed by "*" (or "*" alone for all)',
        ),
    )
    .default([]),
  /** The key may call the admin routes (/v1/admin/*: start and follow workflows). @default false */
  admin: z.boolean().default(false),
  throttle: throttleSchema,
  /** Requests per period; omitted = no quota. */
  quota: z.strictObject({ limit: z.number().int().min(1), period: z.enum(['DAY', 'WEEK', 'MONTH']) }).optional(),
});

/** What budgets.alertEmails (committed e-mail addresses) became. */
export const ALERT_EMAILS_MOVED =
  'budgets.alertEmails is no longer read: where alarms go is never committed. Remove it from the file and pass the addresses ' +
  'at synth time: -c alarmEmails=a@example.org,b@example.org (or STRATA_ALARM_EMAILS), or an existing SNS topic with ' +
  '-c alarmTopicArn=arn:aws:sns:... (or STRATA_ALARM_TOPIC_ARN)';

/** An SNS topic ARN: arn:<partition>:sns:<region>:<account>:<name>. */
export const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/;

/** Where alarms notify: e-mail addresses (a topic is created with their subscriptions), or an existing SNS topic. */
export const alarmDestinationSchema = z.union([
  z.strictObject({
    emails: z.array(z.email('alarm e-mails must be e-mail addresses')).min(1, 'give at least one alarm e-mail address'),
  }),
  z.strictObject({
    topicArn: z
      .string()
      .regex(SNS_TOPIC_ARN, 'the alarm topic must be an SNS topic ARN, e.g. arn:aws:sns:us-east-1:123456789012:oncall'),
  }),
]);
export type AlarmDestination = z.output<typeof alarmDestinationSchema>;

/** A Graviton (arm64) instance type name: the nodes run the arm64 AMI. */
export const GRAVITON_INSTANCE_TYPE = /^[a-z]+[0-9]+g[a-z-]*\.[a-z0-9]+$/;

/** Where and why a fleet's capacity settings are wrong, in words for the user. */
export interface FleetCapacityIssue {
  readonly path: (string | number)[];
  readonly message: string;
}

/**
 * What is wrong with a fleet's capacity settings (the schema's and CacheNodeFleet's check alike): spot needs several
 * Graviton instance types, `onDemandBase` only means something for a mixed fleet.
 */
export function fleetCapacityIssues(f: {
  readonly instanceType: string;
  readonly capacity?: 'on-demand' | 'spot' | 'mixed';
  readonly instanceTypes?: readonly string[];
  readonly onDemandBase?: number;
}): FleetCapacityIssue[] {
  const issues: FleetCapacityIssue[] = [];
  const capacity = f.capacity ?? 'on-demand';
  const types = f.instanceTypes ?? [f.instanceType];
  for (const [i, t] of types.entries()) {
    if (!GRAVITON_INSTANCE_TYPE.test(t))
      issues.push({
        path: ['fleet', 'instanceTypes', i],
        message: `instance type '${t}' is not a Graviton (arm64) type such as t4g.small, m7g.large or r7g.xlarge: the nodes run the arm64 AMI`,
      });
  }
  const dup = types.find((t, i) => types.indexOf(t) !== i);
  if (dup) issues.push({ path: ['fleet', 'instanceTypes'], message: `instance type '${dup}' is listed twice` });
  if (capacity !== 'on-demand' && new Set(types).size < 2) {
    issues.push({
      path: ['fleet', 'instanceTypes'],
      message:
        `capacity '${capacity}' needs at least 2 instance types in fleet.instanceTypes (e.g. ["r7g.large", "m7g.large", "r6g.large"]): ` +
        'each type is a separate Spot capacity pool, and AWS can reclaim a whole pool at once, which with one type would take ' +
        'every spot node (and with them the warm tier) together',
    });
  }
  if (f.onDemandBase !== undefined && capacity !== 'mixed') {
    issues.push({
      path: ['fleet', 'onDemandBase'],
      message: `onDemandBase applies to capacity 'mixed' only (this fleet is '${capacity}'): remove it, or set capacity: 'mixed'`,
    });
  }
  return issues;
}

export const environmentConfigSchema = z
  .strictObject({
    name: z.enum(ENVIRONMENT_NAMES),
    /** Default region; `-c region=...` or CDK_DEPLOY_REGION override it. */
    region: z.string().regex(REGION, 'region must look like "us-east-1"'),
    /** Never committed: filled from `-c account=...`, CDK_DEPLOY_ACCOUNT or the CLI's credentials. */
    account: z
      .string()
      .regex(/^\d{12}$/, 'account must be a 12-digit AWS account id')
      .optional(),
    /** AZs of the VPC (2-3): ElastiCache Serverless and the API Lambdas span them. */
    availabilityZones: z
      .array(z.string())
      .min(2, 'give at least 2 availability zones: ElastiCache Serverless needs subnets in 2 or more')
      .max(3, 'at most 3 availability zones (ElastiCache Serverless takes 2-3 subnets)'),
    /** The account's Lambda concurrency quota in the region (reservations must leave 100 of it unreserved). @default 1000 */
    lambdaAccountConcurrency: z.number().int().min(100).default(1000),
    /** What deleting the stack does to data (bucket, cache, logs). */
    removalPolicy: z.enum(['destroy', 'retain']),
    logRetentionDays,
    network: z.strictObject({
      /** @default '10.40.0.0/16' */
      cidr: z
        .string()
        .regex(
          /^(\d{1,3}\.){3}\d{1,3}\/(1[6-9]|20)$/,
          'cidr must be an IPv4 block from /16 to /20, e.g. "10.40.0.0/16" (each subnet gets 1/16 of it)',
        )
        .default('10.40.0.0/16'),
      /** 0 = private isolated subnets only (no internet egress; S3 and AWS APIs through endpoints). @default 0 */
      natGateways: z.number().int().min(0).default(0),
      /** Interface endpoints (billed per AZ-hour) go into the first N AZs only. @default all AZs */
      interfaceEndpointAzs: z.number().int().min(1).optional(),
      /** @default 'REJECT' */
      flowLogTraffic: z.enum(['ALL', 'REJECT']).default('REJECT'),
    }),
    hotTier: z.strictObject({
      /** ElastiCache Serverless usage limits: the cache never grows beyond these (and neither does its bill). */
      maxDataStorageGb: z.number().int().min(1).max(5000),
      maxEcpuPerSecond: z.number().int().min(1000).max(15_000_000),
      /** @default 0 (no snapshots) */
      snapshotRetentionDays: z.number().int().min(0).max(35).default(0),
      /** UTC "HH:MM" when snapshots are taken (only with snapshotRetentionDays > 0). */
      dailySnapshotTime: z
        .string()
        .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'dailySnapshotTime is "HH:MM" in UTC')
        .optional(),
      /** 'customer-managed' creates a KMS key (with rotation) for encryption at rest. @default 'aws-owned' */
      encryptionKey: z.enum(['aws-owned', 'customer-managed']).default('aws-owned'),
    }),
    coldTier: z.strictObject({
      /** Key prefix of every object (STRATA_S3_PREFIX). @default 'v1' */
      prefix: z
        .string()
        .regex(/^[A-Za-z0-9._-]+$/, 'prefix is one path segment of A-Z, a-z, 0-9, ".", "_" and "-"')
        .default('v1'),
      /** How long a delete's tombstone lives; the lifecycle rule removes tombstone objects after it (whole days). @default 10 */
      tombstoneTtlMinutes: z.number().int().min(1).default(10),
      /** Staged uploads (`<prefix>/_uploads/`) never committed are deleted after this many days. @default 1 */
      stagingExpirationDays: z.number().int().min(1).default(1),
      /** Server access logs are kept this many days. @default 90 */
      accessLogExpirationDays: z.number().int().min(1).default(90),
    }),
    fleet: z.strictObject({
      /**
       * A Graviton (arm64) type, e.g. "r7gd.large" or "t4g.medium": the launch template's type, and the only type of an
       * on-demand fleet.
       */
      instanceType: z.string(),
      /**
       * How the warm tier's nodes are bought (docs/WORKFLOWS.md, "Spot capacity"). 'on-demand': every node on demand,
       * launched with RunInstances. 'spot': every node a Spot Instance, launched with an instant EC2 Fleet
       * (CreateFleet) that picks, among `instanceTypes` in the launch's subnet, the pool AWS expects to be interrupted
       * least at the lowest price (price-capacity-optimized). 'mixed': the first `onDemandBase` nodes on demand, the
       * rest spot, decided at each launch by counting the fleet's running on-demand instances. A Spot node's
       * interruption warning drains it (the spot-interruption rule). @default 'on-demand' (today's behaviour)
       */
      capacity: z.enum(['on-demand', 'spot', 'mixed']).default('on-demand'),
      /**
       * The Graviton types a spot or mixed launch may choose among (at least 2 of similar size: each type is its own
       * Spot pool, and one pool can be reclaimed at once); on-demand launches of a mixed fleet take the first type
       * that has capacity, in this order. Unused by an on-demand fleet. @default [instanceType]
       */
      instanceTypes: z.array(z.string()).min(1, 'give at least one instance type').optional(),
      /**
       * Mixed fleets only: how many nodes stay on demand. A launch is on demand while fewer of the fleet's running
       * instances than this are on demand, else spot. @default 1
       */
      onDemandBase: z.number().int().min(1, 'onDemandBase is at least 1 (with 0, use capacity: "spot")').optional(),
      /** The encrypted gp3 data volume of each cache node. */
      dataVolume: z.strictObject({
        sizeGiB: z.number().int(),
        /** @default 3000 (gp3 baseline, included in the price) */
        iops: z.number().int().default(3000),
        /** @default 125 (gp3 baseline, included in the price) */
        throughputMiBps: z.number().int().default(125),
      }),
      /** Port the cachenode daemon listens on. @default 7070 */
      port: z.number().int().default(7070),
    }),
    api: z.strictObject({
      /** Stage-wide default throttle (each tenant's usage plan throttles its own key). */
      throttle: throttleSchema,
      /** Per-function settings; omitted functions take the defaults. */
      functions: z
        .strictObject({
          keys: functionSchema.prefault({}),
          batch: functionSchema.prefault({}),
          transfer: functionSchema.prefault({}),
          service: functionSchema.prefault({}),
          admin: functionSchema.prefault({}),
        })
        .prefault({}),
      /**
       * Lifetime of presigned upload/download URLs (STRATA_URL_TTL_SECONDS). A URL signed with temporary credentials
       * (the functions' role) dies with them, whatever it says: at most 12 hours, the longest role session, and the
       * runtime shortens each URL to what its signing credentials have left (s3-tier.ts). @default 900
       */
      urlTtlSeconds: z
        .number()
        .int()
        .min(60)
        .max(12 * 3600, 'urlTtlSeconds is at most 43200 (12 h): presigned URLs die with the role session that signs them')
        .default(900),
      /** Lambda functions namespace policies may read through (origin.lambda): see lambda-origins.ts. @default [] */
      lambdaOrigins: lambdaOriginsSchema,
      /** Namespace policies (STRATA_NAMESPACES); omitted = every namespace write-through. */
      namespaces: namespaceConfigSchema.optional(),
      /** API Gateway execution logs (needs the account-wide API Gateway CloudWatch role). @default 'ERROR' */
      executionLogging: z.enum(['OFF', 'ERROR', 'INFO']).default('ERROR'),
    }),
    tenants: z.array(tenantSchema).min(1, 'define at least one tenant: every API call needs a tenant API key'),
    budgets: z.strictObject({
      /** Monthly cost budget in USD; the monitoring stack alarms on projected spend above it. */
      monthlyUsd: z.number().positive('monthlyUsd must be a positive amount'),
      /** Gone: where alarms go is never committed (load.ts reads `-c alarmEmails=...` or STRATA_ALARM_EMAILS). */
      alertEmails: z.never({ message: ALERT_EMAILS_MOVED }).optional(),
      /** Warning alarm when the projected month exceeds this share of monthlyUsd. @default 0.8 */
      warningFraction: z
        .number()
        .positive('warningFraction must be a positive share of monthlyUsd, e.g. 0.8')
        .max(10)
        .default(0.8),
      /** Critical alarm when the projected month exceeds this share of monthlyUsd. @default 1 */
      criticalFraction: z.number().positive('criticalFraction must be a positive share of monthlyUsd, e.g. 1').max(10).default(1),
    }),
    monitoring: z
      .strictObject({
        /** The scheduled cost publisher (Strata/Cost, Strata/Fleet). */
        costPublisher: z
          .strictObject({
            /** How often it runs; also the period of the alarms on its metrics. @default 15 */
            scheduleMinutes: z
              .union([z.literal(1), z.literal(5), z.literal(10), z.literal(15), z.literal(30), z.literal(60)], {
                message: 'scheduleMinutes must be 1, 5, 10, 15, 30 or 60',
              })
              .default(15),
            /** @default 256 */
            memoryMb: z.number().int().min(128).max(10240).default(256),
            /** @default 120 */
            timeoutSeconds: z.number().int().min(10).max(900).default(120),
            /** Id of a request-metrics filter on the cold-tier bucket, if one is configured (else S3 requests are estimated). */
            s3RequestMetricsFilterId: z.string().min(1).optional(),
          })
          .prefault({}),
        alarms: z
          .strictObject({
            /** Alarm when fewer lookups than this share (hits over hits + misses, %) are answered. @default 50 */
            hitRatioFloorPercent: z.number().min(0).max(100).default(50),
            /** Alarm when more requests than this share (%) are answered with an error. @default 5 */
            errorRateCeilingPercent: z.number().min(0).max(100).default(5),
            /** Hit-ratio and error-rate alarms stay quiet in periods with fewer requests than this. @default 100 */
            minRequestsPerPeriod: z.number().int().min(1).default(100),
            /** Period of the hit-ratio and error-rate alarms. @default 5 */
            trafficPeriodMinutes: z.number().int().min(1).max(60).default(5),
            /** Alarm when the fullest cache node is fuller than this (%); the daemon's own watermark defaults to 85. @default 85 */
            nodeFillWatermarkPercent: z.number().gt(0).max(100).default(85),
            /** Alarm when more than this share (%) of API Gateway's requests end in a 5xx (its 5XXError Average). @default 5 */
            apiServerErrorRatePercent: z.number().gt(0, 'apiServerErrorRatePercent must be above 0 (%)').max(100).default(5),
            /** Alarm when API Gateway's p90 latency stays above this many milliseconds. @default 1000 */
            apiLatencyP90Ms: z
              .number()
              .int()
              .min(1)
              .max(29_000, "apiLatencyP90Ms must be below API Gateway's 29 s integration timeout")
              .default(1000),
            /** Alarm when a Strata function fails (exception, timeout, out of memory) this often in a traffic period. @default 1 */
            functionErrorsPerPeriod: z.number().int().min(1).default(1),
            /** Alarm when the hot tier uses this share (%) of its data-storage or ECPU limit (AWS recommends 75). @default 75 */
            hotTierUsagePercent: z
              .number()
              .gt(0)
              .lt(100, 'hotTierUsagePercent must be below 100: at the limit the cache already evicts or throttles')
              .default(75),
          })
          .prefault({}),
        /**
         * Where every alarm notifies. Never committed: load.ts fills it from `-c alarmEmails=...` / `-c alarmTopicArn=...`
         * or STRATA_ALARM_EMAILS / STRATA_ALARM_TOPIC_ARN; staging and prod refuse to synthesize without it.
         */
        alarmDestination: alarmDestinationSchema.optional(),
      })
      .prefault({}),
    workflows: z
      .strictObject({
        /**
         * Reserved concurrency of the workflow step function: held for it alone, so a flood of API requests cannot
         * stall a scale-out or an eviction. @default - none
         */
        stepReservedConcurrency: z.number().int().min(1).optional(),
        /**
         * Paper 000's scale-out trigger (core/workflows/trigger/scale-trigger.ts). With `policies.evaluator` (the
         * default) it is the policy rule default-prelaunch, with these settings (`scheduleMinutes` is then unused: the
         * evaluator looks every minute); without, its own function on a schedule.
         */
        scaleTrigger: z
          .strictObject({
            /** How often the threshold is evaluated (its own function only). @default 1 */
            scheduleMinutes: z.number().int().min(1).max(60).default(1),
            // unit, capacity, δ_L, δ_H, mode: core/policy/defaults.ts, shared with the rule default-prelaunch.
            ...prelaunchSettingsFields,
          })
          .superRefine(checkPrelaunchSettings)
          .prefault({}),
        /**
         * EvictToS3 runs every this many hours (0 = only when a node fills, and on demand). With `policies.evaluator`
         * it is the policy rule default-evict-schedule (at most 24: a policy timer's longest period); without, an
         * EventBridge schedule. @default 6
         */
        evictionEveryHours: z.number().int().min(0).max(168).default(6),
        /**
         * Tag invalidations of a namespace within one window of this many minutes share one InvalidationSweep of the
         * whole namespace, started a minute after the window ends (0: tag invalidations start no sweep; their entries
         * leave by expiry and eviction). Each sweep reads every entry's header once in each tier: one S3 HEAD per
         * object in the cold tier ($0.0004 per 1,000 in us-east-1, https://aws.amazon.com/s3/pricing/: $0.40 per
         * million entries swept). At most 720: the sweep's state machine stops after 24 hours. @default 60
         */
        tagSweepWindowMinutes: z
          .number()
          .int()
          .min(0)
          .max(720, {
            error: (i) =>
              `tagSweepWindowMinutes (${String(i.input)}) is at most 720 (12 hours): a tag sweep waits for its window ` +
              'to end, and its state machine stops executions after 24 hours; use 0 to start no tag sweeps',
          })
          .default(60),
        /**
         * What happens when the fullest node passes `monitoring.alarms.nodeFillWatermarkPercent`: an eviction to S3, a
         * scale-out, or nothing. With `policies.evaluator` it is the policy rule default-evict-on-node-fill (`none`:
         * no such rule), and the node-fill alarm only notifies; without, the alarm starts the workflow.
         * @default 'evict-to-s3'
         */
        fillAlarmResponse: z.enum(['evict-to-s3', 'scale-out', 'none']).default('evict-to-s3'),
        /**
         * The order-markers workflow's prune (the S3 tier's key-order markers of objects gone for good) runs every
         * this many hours; 0 = never (start it by hand). With `policies.evaluator` it is the policy rule
         * default-prune-order-markers (at most 168: a policy timer's longest period); without, an EventBridge
         * schedule. Its cost is one S3 LIST per 1,000 markers and one HEAD per marker older than an hour, two more
         * and a DELETE for each stale one (docs/WORKFLOWS.md). @default 168 (weekly)
         */
        orderMarkerPruneEveryHours: z
          .number()
          .int('orderMarkerPruneEveryHours must be a whole number of hours (168 = weekly, 0 = off)')
          .min(0, 'orderMarkerPruneEveryHours must be 0 (off) or a number of hours, e.g. 168 for weekly')
          .max(8760, 'orderMarkerPruneEveryHours is at most 8760 (a year); 0 switches the prune off')
          .default(168),
        /**
         * Uploads of at least STRATA_ASYNC_COMPLETE_BYTES (1 GiB) complete asynchronously (`202`, the upload-commit
         * workflow), so a copy longer than API Gateway's 29 s still commits. The API's VPC has no route to Step
         * Functions, so the job starts from the S3 event of the upload's commit request: the cold-tier bucket sends its
         * events to EventBridge, which bills them as opt-in data events per million (https://aws.amazon.com/eventbridge/pricing/),
         * and S3 sends one for every object written or deleted, not only commit requests: nothing while idle, ~$1 per
         * million cold-tier writes. false: no events, and every completion runs inside the request (a copy past 29 s
         * answers 504 and is not committed: keep uploads to a few GiB). @default true
         */
        asyncUploadCompletion: z.boolean().default(true),
        /**
         * Flushes and invalidations made through the data API start the invalidation-sweep workflow, which removes
         * what they cover from the tiers (reads never see it either way). The data functions' VPC has no route to Step
         * Functions, so each writes a sweep request `<prefix>/_sweeps/<name>.sweep`, whose S3 event starts the sweep:
         * the cold-tier bucket's events go to EventBridge, at the cost `asyncUploadCompletion` states (either setting
         * turns them on). false: only the admin API's flushes start a sweep; what the others cover leaves the tiers by
         * expiry and eviction. @default true
         */
        invalidationSweeps: z.boolean().default(true),
      })
      .prefault({}),
    policies: z
      .strictObject({
        /**
         * The scheduled policy evaluator (cdk/constructs/policy-ticker.ts): an Express state machine started every
         * minute that ticks the policy's background rules (an evaluator Lambda outside the VPC) and writes write-back
         * values down (a flush Lambda in it): one Express execution and one invocation of each a minute while no rule
         * has a timer under a minute; the API functions are told so
         * (STRATA_POLICY_EVALUATOR=1), and accept policies with background rules. The loops of `workflows` (node-fill
         * response, eviction schedule, scale trigger) are then the policies' default rules, which an operator sees and
         * may change (cdk/lib/policy-defaults.ts). `false` deploys none of it: the API then refuses background rules,
         * and the stacks wire those loops up themselves. @default true
         */
        evaluator: z.boolean().default(true),
      })
      .prefault({}),
  })
  .superRefine((c, ctx) => {
    for (const [i, az] of c.availabilityZones.entries()) {
      if (!new RegExp(`^${c.region}[a-z]$`).test(az)) {
        ctx.addIssue({
          code: 'custom',
          path: ['availabilityZones', i],
          message: `availability zone '${az}' is not in region ${c.region} (pass -c availabilityZones=${c.region}a,${c.region}b when you change the region)`,
        });
      }
    }
    if (c.policies.evaluator && c.workflows.evictionEveryHours > 24) {
      ctx.addIssue({
        code: 'custom',
        path: ['workflows', 'evictionEveryHours'],
        message:
          `evictionEveryHours (${c.workflows.evictionEveryHours}) is at most 24 with the policy evaluator: the eviction ` +
          'schedule is the policy rule default-evict-schedule, whose timer fires at least daily (or set policies.evaluator: false)',
      });
    }
    if (c.policies.evaluator && c.workflows.orderMarkerPruneEveryHours > 168) {
      ctx.addIssue({
        code: 'custom',
        path: ['workflows', 'orderMarkerPruneEveryHours'],
        message:
          `orderMarkerPruneEveryHours (${c.workflows.orderMarkerPruneEveryHours}) is at most 168 with the policy evaluator: ` +
          'the prune is the policy rule default-prune-order-markers, whose timer fires at least weekly ' +
          '(use 168 or less, 0 for none, or set policies.evaluator: false)',
      });
    }
    if (new Set(c.availabilityZones).size !== c.availabilityZones.length)
      ctx.addIssue({ code: 'custom', path: ['availabilityZones'], message: 'availability zones must be distinct' });
    if (c.network.natGateways > c.availabilityZones.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['network', 'natGateways'],
        message: `natGateways (${c.network.natGateways}) cannot exceed the number of availability zones (${c.availabilityZones.length})`,
      });
    }
    if (c.network.interfaceEndpointAzs !== undefined && c.network.interfaceEndpointAzs > c.availabilityZones.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['network', 'interfaceEndpointAzs'],
        message: `interfaceEndpointAzs (${c.network.interfaceEndpointAzs}) cannot exceed the number of availability zones (${c.availabilityZones.length})`,
      });
    }
    for (const issue of fleetCapacityIssues(c.fleet)) ctx.addIssue({ code: 'custom', ...issue });
    for (const issue of lambdaOriginIssues(c)) ctx.addIssue({ code: 'custom', ...issue });
    if (c.hotTier.dailySnapshotTime && c.hotTier.snapshotRetentionDays === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['hotTier', 'dailySnapshotTime'],
        message: 'dailySnapshotTime needs snapshotRetentionDays > 0',
      });
    }
    for (const [i, t] of c.tenants.entries()) {
      if (t.namespaces.length === 0 && !t.admin) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', i, 'namespaces'],
          message: 'a tenant needs at least one namespace (an operator key with none: "admin": true)',
        });
      }
    }
    const names = c.tenants.map((t) => t.name);
    for (const dup of names.filter((n, i) => names.indexOf(n) !== i))
      ctx.addIssue({ code: 'custom', path: ['tenants'], message: `tenant '${dup}' is defined twice` });
    if (c.budgets.warningFraction >= c.budgets.criticalFraction) {
      ctx.addIssue({
        code: 'custom',
        path: ['budgets', 'warningFraction'],
        message: `warningFraction (${c.budgets.warningFraction}) must be below criticalFraction (${c.budgets.criticalFraction})`,
      });
    }
    const urlDays = Math.ceil(c.api.urlTtlSeconds / 86_400);
    if (c.coldTier.stagingExpirationDays < urlDays) {
      ctx.addIssue({
        code: 'custom',
        path: ['coldTier', 'stagingExpirationDays'],
        message: `stagingExpirationDays (${c.coldTier.stagingExpirationDays}) must cover the upload URL lifetime (${c.api.urlTtlSeconds} s = ${urlDays} days), or staged uploads vanish before they can be committed`,
      });
    }
    for (const [fn, f] of Object.entries(c.api.functions)) {
      if (f.nearCacheMb > f.memoryMb / 2) {
        ctx.addIssue({
          code: 'custom',
          path: ['api', 'functions', fn, 'nearCacheMb'],
          message: `nearCacheMb (${f.nearCacheMb}) must be at most half of memoryMb (${f.memoryMb}): the rest holds request and response buffers`,
        });
      }
    }
    // "You can reserve up to the Unreserved account concurrency value that is shown, minus 100 for functions that
    // don't have reserved concurrency" (https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html);
    // the default account concurrency is 1,000 per region (Lambda quotas). A larger sum fails at deploy time.
    const reserved = [
      ...Object.values(c.api.functions).map((f) => f.reservedConcurrency ?? 0),
      c.workflows.stepReservedConcurrency ?? 0,
    ];
    const sum = reserved.reduce((a, b) => a + b, 0);
    if (sum > c.lambdaAccountConcurrency - 100) {
      ctx.addIssue({
        code: 'custom',
        path: ['api', 'functions'],
        message: `the functions reserve ${sum} concurrent executions, but Lambda keeps 100 of the account's ${c.lambdaAccountConcurrency} unreserved: lower reservedConcurrency, or raise lambdaAccountConcurrency after a quota increase`,
      });
    }
  });

/** What an environment file declares (defaults not yet applied). */
export type EnvironmentConfigInput = z.input<typeof environmentConfigSchema>;
/** A validated configuration with defaults applied. */
export type EnvironmentConfig = z.output<typeof environmentConfigSchema>;
export type TenantConfig = EnvironmentConfig['tenants'][number];
export type ThrottleConfig = z.output<typeof throttleSchema>;
export type MonitoringConfig = EnvironmentConfig['monitoring'];
