import { join } from 'node:path';
import { Duration, Stack, Validations, type RemovalPolicy } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { PUBLISHED_NAMESPACES } from '../../core/cost/publisher/publish-cost.js';
import { COST_SETTINGS_ENV, type CostPublisherSettingsInput } from '../../core/cost/publisher/settings.js';
import type { CostTier } from '../../core/metrics/metric-catalog.js';
import { REPO_ROOT } from '../lib/packaging.js';
import type { ColdTierBucket } from './cold-tier-bucket.js';
import { StrataFunction } from './strata-function.js';
import { check, intIn } from './validation.js';

/** The scheduled cost publisher's entry point. */
export const COST_PUBLISHER_ENTRY = join(REPO_ROOT, 'lambdas', 'ops', 'cost-publisher.ts');

/** A Lambda function whose invocations the publisher bills to a tier. */
export interface CostedFunctionProps {
  readonly function: lambda.IFunction;
  readonly memoryMb: number;
  readonly tier: CostTier;
}

export interface CostPublisherProps {
  /** `Environment` dimension value (dev, staging, prod). */
  readonly environment: string;
  /** 1, 5, 10, 15, 30 or 60. */
  readonly scheduleMinutes: number;
  /** Tags every cache-node instance and volume carries (the fleet's launch template sets them). */
  readonly fleetTags: Readonly<Record<string, string>>;
  readonly tenants: readonly { readonly name: string; readonly namespaces: readonly string[] }[];
  /** The hot tier's ElastiCache Serverless cache name. @default - no hot tier */
  readonly hotCacheName?: string;
  /** The cold tier's bucket and prefix. @default - no cold tier */
  readonly cold?: { readonly bucket: s3.IBucket; readonly prefix: string; readonly requestMetricsFilterId?: string };
  /**
   * The ring store (`store`, the cold tier's bucket): the ring document, to count nodes and migrations, and the
   * statistics report each node writes there, for its fill and whether it went silent, keyed by `reportIdPrefix`
   * and the node's id (CacheNodeFleet.statsReportIdPrefix). @default - no warm tier: the fleet is reported empty
   */
  readonly ring?: { readonly store: ColdTierBucket; readonly reportIdPrefix: string };
  /** API Gateway REST API name (AWS/ApiGateway ApiName). @default - no API */
  readonly apiName?: string;
  /** Functions billed to a tier (the publisher adds itself). @default - none */
  readonly functions?: readonly CostedFunctionProps[];
  /** What monitoring itself costs besides the publisher (dashboards, metrics read by alarms). */
  readonly monitoring?: { readonly dashboards: number; readonly alarmMetrics: number };
  /** @default 256 */
  readonly memoryMb?: number;
  /** @default 120 */
  readonly timeoutSeconds?: number;
  readonly logRetention?: logs.RetentionDays;
  readonly logRemovalPolicy?: RemovalPolicy;
}

/**
 * The live cost publisher: a Lambda (StrataFunction) run by an EventBridge schedule. It reads usage from EC2, S3
 * and CloudWatch and the fleet from the ring store (the ring and the reports the nodes write there), and publishes
 * Strata/Cost and Strata/Fleet (core/cost/publisher/publish-cost.ts). Its role may put metrics in those two
 * namespaces only, list the cold tier's prefix, read the ring document and the nodes' reports, and call the
 * read-only EC2 and CloudWatch APIs that have no resource-level permissions.
 *
 * It runs outside the VPC: it calls only AWS APIs (never a node), and there CloudWatch and EC2 need no interface
 * endpoint, which would cost more than everything else an idle environment runs.
 */
export class CostPublisher extends Construct {
  readonly function: StrataFunction;
  readonly schedule: events.Rule;
  /** What the function reads, as written to STRATA_COST_SETTINGS (tokens where names are known at deploy time). */
  readonly settings: CostPublisherSettingsInput;

  constructor(scope: Construct, id: string, props: CostPublisherProps) {
    super(scope, id);
    check(
      this,
      [1, 5, 10, 15, 30, 60].includes(props.scheduleMinutes),
      `scheduleMinutes must be 1, 5, 10, 15, 30 or 60 (got ${props.scheduleMinutes})`,
    );
    check(
      this,
      Object.keys(props.fleetTags).length > 0,
      'fleetTags is empty: the publisher would price every instance in the account',
    );
    check(
      this,
      /^[A-Za-z0-9._-]*$/.test(props.cold?.prefix ?? ''),
      `cold.prefix '${props.cold?.prefix}' must be one path segment`,
    );
    for (const f of props.functions ?? [])
      check(this, intIn(f.memoryMb, 128, 10240), `functions: memoryMb must be 128-10240 (got ${f.memoryMb})`);

    this.settings = {
      environment: props.environment,
      tenants: props.tenants.map((t) => ({ name: t.name, namespaces: [...t.namespaces] })),
      fleet: { tags: { ...props.fleetTags } },
      ...(props.hotCacheName ? { hot: { cacheName: props.hotCacheName } } : {}),
      ...(props.cold
        ? {
            cold: {
              bucket: props.cold.bucket.bucketName,
              prefix: props.cold.prefix,
              ...(props.cold.requestMetricsFilterId ? { requestMetricsFilterId: props.cold.requestMetricsFilterId } : {}),
            },
          }
        : {}),
      ...(props.apiName ? { apiName: props.apiName } : {}),
      functions: (props.functions ?? []).map((f) => ({ name: f.function.functionName, memoryMb: f.memoryMb, tier: f.tier })),
      monitoring: {
        dashboards: props.monitoring?.dashboards ?? 0,
        alarmMetrics: props.monitoring?.alarmMetrics ?? 0,
        runsPerHour: 60 / props.scheduleMinutes,
      },
    };

    this.function = new StrataFunction(this, 'Handler', {
      entry: COST_PUBLISHER_ENTRY,
      description: `Strata ${props.environment}: publishes Strata/Cost and Strata/Fleet every ${props.scheduleMinutes} min`,
      memoryMb: props.memoryMb ?? 256,
      timeoutSeconds: props.timeoutSeconds ?? 120,
      ...(props.logRetention ? { logRetention: props.logRetention } : {}),
      ...(props.logRemovalPolicy ? { logRemovalPolicy: props.logRemovalPolicy } : {}),
      environment: { [COST_SETTINGS_ENV]: Stack.of(this).toJsonString(this.settings) },
    });
    // A run publishes its own timestamp; a retry of a failed run would publish the same instant again, so none.
    this.function.function.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(props.scheduleMinutes) });

    // The ring (nodes, migrations in progress) and the nodes' reports (fill, silence): read only.
    if (props.ring) {
      this.function.bindRingStore(props.ring.store, { read: ['ring', 'nodeStats'] });
      this.function.addEnvironment('STRATA_NODE_STATS_ID_PREFIX', props.ring.reportIdPrefix);
    }

    this.grantReads(props);

    this.schedule = new events.Rule(this, 'Schedule', {
      description: `Runs the Strata ${props.environment} cost publisher every ${props.scheduleMinutes} min`,
      schedule: events.Schedule.rate(Duration.minutes(props.scheduleMinutes)),
      targets: [new targets.LambdaFunction(this.function.function, { retryAttempts: 0 })],
    });
  }

  private grantReads(props: CostPublisherProps): void {
    const role = this.function.role;
    // Only in its own two namespaces (cloudwatch:namespace is the one condition PutMetricData supports).
    const put = new iam.PolicyStatement({
      sid: 'PublishCostAndFleet',
      actions: ['cloudwatch:PutMetricData'],
      resources: ['*'],
      conditions: { StringEquals: { 'cloudwatch:namespace': [...PUBLISHED_NAMESPACES] } },
    });
    const read = new iam.PolicyStatement({
      sid: 'ReadUsage',
      actions: ['cloudwatch:GetMetricData', 'ec2:DescribeInstances', 'ec2:DescribeVolumes'],
      resources: ['*'],
    });
    const statements = [put, read];
    if (props.cold) {
      const prefix = props.cold.prefix;
      statements.push(
        new iam.PolicyStatement({
          sid: 'ListColdTier',
          actions: ['s3:ListBucket'],
          resources: [props.cold.bucket.bucketArn],
          conditions: { StringLike: { 's3:prefix': prefix ? [`${prefix}/`, `${prefix}/*`] : ['*'] } },
        }),
      );
    }
    const policy = new iam.Policy(this, 'UsagePolicy', { statements, roles: [role] });
    Validations.of(policy).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'cloudwatch:PutMetricData, cloudwatch:GetMetricData, ec2:DescribeInstances and ec2:DescribeVolumes support no resource-level permissions; PutMetricData is limited to the Strata/Cost and Strata/Fleet namespaces by condition, the others only read.',
    });
  }
}
