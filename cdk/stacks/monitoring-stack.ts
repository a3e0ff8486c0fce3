import { Duration } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { runtimeEnvSchema } from '../../layers/core/runtime/config.js';
import { OPERATIONS, OTHER } from '../../layers/core/metrics/catalog.js';
import { CostPublisher } from '../constructs/cost-publisher.js';
import { StrataAlarms } from '../constructs/strata-alarms.js';
import { StrataDashboards } from '../constructs/strata-dashboards.js';
import type { ApiStack } from './api-stack.js';
import type { DataStack } from './data-stack.js';
import type { FleetStack } from './fleet-stack.js';
import type { StrataNetwork } from './network-stack.js';
import { logRetention, removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface MonitoringStackProps extends StrataStackProps {
  /** The cost publisher runs in the VPC: it reads each cache node's /stats. */
  readonly network: StrataNetwork;
  readonly api: Pick<ApiStack, 'restApi' | 'functions'>;
  readonly data: Pick<DataStack, 'hotTier' | 'coldTier'>;
  readonly fleet: Pick<FleetStack, 'fleet'>;
}

/** The ring document's prefix in the cold-tier bucket: the runtime's default (STRATA_WARM_RING_PREFIX). */
export const RING_PREFIX: string = runtimeEnvSchema.shape.STRATA_WARM_RING_PREFIX.parse(undefined);

/**
 * Monitoring: the live cost publisher (Strata/Cost, Strata/Fleet), the Cost, Performance and Fleet dashboards
 * (rendered from dashboards/), and the alarms, all notifying the alarm topic (subscribed by the budget e-mails).
 *
 * Starting a workflow from an alarm: `alarms.responses.nodeFill` (and `.projectedCostCritical`) is an EventBridge
 * rule matching the alarm's transitions to ALARM, without a target. Attach one in cdk/app.ts once both stacks
 * exist, e.g. `monitoring.alarms.responses.nodeFill.addTarget(new targets.SfnStateMachine(workflows.evictToS3))`.
 * The target (and its role) then live here, so this stack depends on the Workflows stack: the Workflows stack
 * must not reference this one (it does not; keep it so, or there is a cycle).
 */
export class MonitoringStack extends StrataStack {
  /** Where every Strata alarm notifies. */
  readonly alarmTopic: sns.Topic;
  readonly costPublisher: CostPublisher;
  readonly dashboards: StrataDashboards;
  readonly alarms: StrataAlarms;
  readonly watched: Omit<MonitoringStackProps, keyof StrataStackProps | 'network'>;

  constructor(scope: Construct, id: string, props: MonitoringStackProps) {
    super(scope, id, { description: `Strata ${props.config.name}: monitoring (cost publisher, dashboards, alarms, alarm topic)`, ...props });
    const { config, network, api, data, fleet } = props;
    this.watched = { api, data, fleet };
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', { displayName: `Strata ${config.name} alarms`, enforceSSL: true });
    for (const email of config.budgets.alertEmails) this.alarmTopic.addSubscription(new subscriptions.EmailSubscription(email));

    const namespaces = [...new Set(config.tenants.flatMap((t) => t.namespaces))];
    this.dashboards = new StrataDashboards(this, 'Dashboards', {
      environment: config.name,
      splitValues: { Tenant: [...config.tenants.map((t) => t.name), OTHER], Namespace: [...namespaces, OTHER], Operation: [...OPERATIONS] },
    });

    const { costPublisher: publisher, alarms } = config.monitoring;
    const publisherPeriod = Duration.minutes(publisher.scheduleMinutes);
    this.alarms = new StrataAlarms(this, 'Alarms', {
      environment: config.name,
      topic: this.alarmTopic,
      budgetMonthlyUsd: config.budgets.monthlyUsd,
      warningFraction: config.budgets.warningFraction,
      criticalFraction: config.budgets.criticalFraction,
      hitRatioFloorPercent: alarms.hitRatioFloorPercent,
      errorRateCeilingPercent: alarms.errorRateCeilingPercent,
      minRequestsPerPeriod: alarms.minRequestsPerPeriod,
      trafficPeriod: Duration.minutes(alarms.trafficPeriodMinutes),
      nodeFillWatermarkPercent: alarms.nodeFillWatermarkPercent,
      publisherPeriod,
    });

    this.costPublisher = new CostPublisher(this, 'CostPublisher', {
      environment: config.name,
      vpc: network.vpc,
      vpcSubnets: network.privateSubnets,
      securityGroup: network.coordinatorSecurityGroup,
      scheduleMinutes: publisher.scheduleMinutes,
      memoryMb: publisher.memoryMb,
      timeoutSeconds: publisher.timeoutSeconds,
      logRetention: logRetention(config),
      logRemovalPolicy: removalPolicy(config),
      // The launch template tags every cache node and its volumes with these (cdk/constructs/cache-node-fleet.ts
      // and the stack's environment tag).
      fleetTags: { 'strata:env': config.name, 'strata:role': 'cachenode' },
      tenants: config.tenants,
      hotCacheName: data.hotTier.cache.serverlessCacheName,
      cold: { bucket: data.coldTier.bucket, prefix: data.coldTier.prefix, ...(publisher.s3RequestMetricsFilterId ? { requestMetricsFilterId: publisher.s3RequestMetricsFilterId } : {}) },
      ring: { bucket: data.coldTier.bucket, prefix: RING_PREFIX, fleetSecret: fleet.fleet.secret },
      apiName: api.restApi.api.restApiName,
      functions: Object.entries(api.functions).map(([fn, f]) => ({ function: f.function, memoryMb: config.api.functions[fn as keyof typeof config.api.functions].memoryMb, tier: 'api' as const })),
      monitoring: { dashboards: Object.keys(this.dashboards.dashboards).length, alarmMetrics: this.alarms.metricCount },
    });
  }

  /** The node-fill alarm: the connection point of EvictToS3 / ScaleOut (see {@link StrataAlarms.responses}). */
  get fillAlarm(): cloudwatch.Alarm {
    return this.alarms.nodeFill;
  }
}
