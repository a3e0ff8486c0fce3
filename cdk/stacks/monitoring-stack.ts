import { Annotations, Duration, Lazy } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { runtimeEnvSchema } from '../../core/composition/runtime-env.js';
import { OPERATIONS, OTHER } from '../../core/metrics/metric-catalog.js';
import { alarmDestinationHelp } from '../config/load.js';
import { CostPublisher } from '../constructs/cost-publisher.js';
import { TICKER_SCHEDULE_MINUTES } from '../constructs/policy-ticker.js';
import { StrataAlarms } from '../constructs/strata-alarms.js';
import { StrataDashboards } from '../constructs/strata-dashboards.js';
import type { ApiStack } from './api-stack.js';
import type { DataStack } from './data-stack.js';
import type { FleetStack } from './fleet-stack.js';
import type { StrataNetwork } from './network-stack.js';
import { logRetention, removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';
import type { WorkflowsStack } from './workflows-stack.js';
import type { WorkflowName } from '../../core/workflows/progress.js';

export interface MonitoringStackProps extends StrataStackProps {
  /**
   * Not used any more: the cost publisher runs outside the VPC (it reads the nodes' reports from S3). Accepted so
   * that callers need not change. @deprecated
   */
  readonly network?: StrataNetwork;
  readonly api: Pick<ApiStack, 'restApi' | 'functions'>;
  readonly data: Pick<DataStack, 'hotTier' | 'coldTier'>;
  readonly fleet: Pick<FleetStack, 'fleet'>;
  /**
   * Its functions' Errors and Throttles, its state machines' failed and timed-out executions (but those of
   * {@link UNALARMED_WORKFLOWS}), and the policy ticker's failed or missing executions alarm.
   */
  readonly workflows: Pick<WorkflowsStack, 'stepFunction' | 'scaleTriggerFunction' | 'stateMachines' | 'policyTicker'>;
}

/**
 * Workflows whose failed and timed-out executions have no CloudWatch alarm of their own: ReplaceNode,
 * RollingUpgrade, InvalidationSweep, OrderMarkers and UploadCommit (whose failures its upload's owner hears of when polling), whose two alarm metrics each ($0.20 a month) would take an idle dev environment over its $15 budget
 * (README's idle-cost table, test/infra/idle-cost.test.ts). Their failed, timed-out and aborted executions reach the
 * alarm topic through an EventBridge rule on Step Functions' status-change events instead, which costs nothing (AWS
 * service events are free to match and deliver) but is best-effort delivery, as AWS documents it.
 */
export const UNALARMED_WORKFLOWS: readonly WorkflowName[] = [
  'replace-node',
  'rolling-upgrade',
  'invalidation-sweep',
  'order-markers',
  'upload-commit',
];

/** The ring document's prefix in the cold-tier bucket: the runtime's default (STRATA_WARM_RING_PREFIX). */
export const RING_PREFIX: string = runtimeEnvSchema.shape.STRATA_WARM_RING_PREFIX.parse(undefined);

/**
 * Monitoring: the live cost publisher (Strata/Cost, Strata/Fleet), the Cost, Performance and Fleet dashboards
 * (rendered from dashboards/), and the alarms, all notifying the alarm topic (the destination given at synth time).
 *
 * Starting a workflow from an alarm: `alarms.responses.nodeFill` (and `.projectedCostCritical`) is an EventBridge
 * rule matching the alarm's transitions to ALARM, without a target. Attach one in cdk/app.ts once both stacks
 * exist, e.g. `monitoring.alarms.responses.nodeFill.addTarget(new targets.SfnStateMachine(workflows.evictToS3))`.
 * The target (and its role) then live here, so this stack depends on the Workflows stack: the Workflows stack
 * must not reference this one (it does not; keep it so, or there is a cycle).
 */
export class MonitoringStack extends StrataStack {
  /**
   * Where every Strata alarm notifies: the topic given as `alarmTopicArn` (imported, not created), else one created
   * here with a subscription per `alarmEmails` address (none in a dev environment given no destination).
   */
  readonly alarmTopic: sns.ITopic;
  readonly costPublisher: CostPublisher;
  readonly dashboards: StrataDashboards;
  readonly alarms: StrataAlarms;
  /** The rule that notifies the alarm topic of {@link UNALARMED_WORKFLOWS}' failed executions; absent when none. */
  readonly workflowFailures?: events.Rule;
  readonly watched: Omit<MonitoringStackProps, keyof StrataStackProps | 'network'>;

  constructor(scope: Construct, id: string, props: MonitoringStackProps) {
    super(scope, id, {
      description: `Strata ${props.config.name}: monitoring (cost publisher, dashboards, alarms, alarm topic)`,
      ...props,
    });
    const { config, api, data, fleet, workflows } = props;
    this.watched = { api, data, fleet, workflows };
    const destination = config.monitoring.alarmDestination;
    if (destination && 'topicArn' in destination) {
      this.alarmTopic = sns.Topic.fromTopicArn(this, 'AlarmTopic', destination.topicArn);
    } else {
      const topic = new sns.Topic(this, 'AlarmTopic', { displayName: `Strata ${config.name} alarms`, enforceSSL: true });
      for (const email of destination?.emails ?? []) topic.addSubscription(new subscriptions.EmailSubscription(email));
      this.alarmTopic = topic;
      // Only an environment that may go without (load.ts refuses staging and prod) gets here without a destination.
      if (!destination) {
        const help = alarmDestinationHelp(config.name, config.region);
        Annotations.of(this).addWarningV2(
          'strata:no-alarm-destination',
          `Strata ${config.name}: no alarm destination, so the alarm topic has no subscriber and alarms reach nobody.\n${help}`,
        );
      }
    }

    const namespaces = [...new Set(config.tenants.flatMap((t) => t.namespaces))];
    this.dashboards = new StrataDashboards(this, 'Dashboards', {
      environment: config.name,
      splitValues: {
        Tenant: [...config.tenants.map((t) => t.name), OTHER],
        Namespace: [...namespaces, OTHER],
        Operation: [...OPERATIONS],
      },
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
      // The stage is named after the environment (ApiStack's StrataRestApi stageName).
      restApi: { apiName: api.restApi.api.restApiName, stage: config.name },
      apiServerErrorRatePercent: alarms.apiServerErrorRatePercent,
      apiLatencyP90Ms: alarms.apiLatencyP90Ms,
      functions: {
        ...Object.fromEntries(Object.entries(api.functions).map(([fn, f]) => [`api-${fn}`, { function: f.function }])),
        'workflow-steps': { function: workflows.stepFunction.function },
        // Only without the policy evaluator (with it, the trigger is the rule default-prelaunch, and the ticker's
        // alarms below watch what runs it). Nothing else notices its schedule stopping: scale-outs would silently
        // never start.
        ...(workflows.scaleTriggerFunction
          ? {
              'scale-trigger': {
                function: workflows.scaleTriggerFunction.function,
                expectedEvery: Duration.minutes(config.workflows.scaleTrigger.scheduleMinutes),
              },
            }
          : {}),
      },
      functionErrorsPerPeriod: alarms.functionErrorsPerPeriod,
      stateMachines: Object.fromEntries(
        Object.entries(workflows.stateMachines).filter(([w]) => !UNALARMED_WORKFLOWS.includes(w as WorkflowName)),
      ),
      hotTier: {
        cacheName: data.hotTier.cache.serverlessCacheName,
        maxDataStorageGb: config.hotTier.maxDataStorageGb,
        maxEcpuPerSecond: config.hotTier.maxEcpuPerSecond,
      },
      hotTierUsagePercent: alarms.hotTierUsagePercent,
      ...(workflows.policyTicker
        ? {
            policyTicker: {
              stateMachine: workflows.policyTicker.stateMachine,
              every: Duration.minutes(TICKER_SCHEDULE_MINUTES),
            },
          }
        : {}),
    });

    this.workflowFailures = this.unalarmedWorkflowFailures(config.name, workflows.stateMachines);

    this.costPublisher = new CostPublisher(this, 'CostPublisher', {
      environment: config.name,
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
      cold: {
        bucket: data.coldTier.bucket,
        prefix: data.coldTier.prefix,
        ...(publisher.s3RequestMetricsFilterId ? { requestMetricsFilterId: publisher.s3RequestMetricsFilterId } : {}),
      },
      ring: { store: data.coldTier, reportIdPrefix: fleet.fleet.statsReportIdPrefix },
      apiName: api.restApi.api.restApiName,
      functions: Object.entries(api.functions).map(([fn, f]) => ({
        function: f.function,
        memoryMb: config.api.functions[fn as keyof typeof config.api.functions].memoryMb,
        tier: 'api' as const,
      })),
      // Lazy: the cost publisher's own alarms are added below, once it exists.
      monitoring: {
        dashboards: Object.keys(this.dashboards.dashboards).length,
        alarmMetrics: Lazy.number({ produce: () => this.alarms.metricCount }),
      },
    });
    // Watched once it exists, after the alarms it bills (alarmMetrics is read at synth, so it counts these too).
    // Not expectedEvery: a publisher that stops running is PublisherSilent's alarm already.
    this.alarms.watchFunction('cost-publisher', { function: this.costPublisher.function.function });
  }

  /**
   * Failed, timed-out and aborted executions of the workflows without alarms, as a message on the alarm topic: an
   * EventBridge rule on Step Functions' "Execution Status Change" events, which Step Functions sends to the default
   * bus by itself (https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html; best-effort delivery).
   * The SNS target adds the topic policy that lets EventBridge publish to a topic created here; an imported topic
   * (`alarmTopicArn`) must allow `events.amazonaws.com` to publish itself (docs/COST.md, "Alarms").
   */
  private unalarmedWorkflowFailures(
    environment: string,
    machines: Readonly<Record<WorkflowName, { stateMachineArn: string }>>,
  ): events.Rule | undefined {
    const watched = UNALARMED_WORKFLOWS.filter((w) => machines[w]);
    if (watched.length === 0) return undefined;
    const field = (path: string) => events.EventField.fromPath(path);
    return new events.Rule(this, 'UnalarmedWorkflowFailures', {
      description: `Strata ${environment}: failed, timed-out or aborted executions of ${watched.join(', ')} to the alarm topic`,
      eventPattern: {
        source: ['aws.states'],
        detailType: ['Step Functions Execution Status Change'],
        detail: {
          status: ['FAILED', 'TIMED_OUT', 'ABORTED'],
          stateMachineArn: watched.map((w) => machines[w].stateMachineArn),
        },
      },
      targets: [
        new targets.SnsTopic(this.alarmTopic, {
          message: events.RuleTargetInput.fromText(
            `Strata ${environment}: workflow execution ${field('$.detail.name')} ended ${field('$.detail.status')} ` +
              `(${field('$.detail.executionArn')}). See docs/WORKFLOWS.md for what to do.`,
          ),
        }),
      ],
    });
  }

  /**
   * The node-fill alarm: the connection point of EvictToS3 / ScaleOut without the policy evaluator (see
   * {@link StrataAlarms.responses}); with it, a notification beside the rule default-evict-on-node-fill.
   */
  get fillAlarm(): cloudwatch.Alarm {
    return this.alarms.nodeFill;
  }
}
