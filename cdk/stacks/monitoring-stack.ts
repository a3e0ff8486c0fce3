import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import type { ApiStack } from './api-stack.js';
import type { DataStack } from './data-stack.js';
import type { FleetStack } from './fleet-stack.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface MonitoringStackProps extends StrataStackProps {
  /** What the dashboards and alarms will watch (monitoring issue). */
  readonly api: Pick<ApiStack, 'restApi' | 'functions'>;
  readonly data: Pick<DataStack, 'hotTier' | 'coldTier'>;
  readonly fleet: Pick<FleetStack, 'fleet'>;
}

/**
 * Monitoring: the alarm topic (subscribed by the configured budget e-mails) and the wiring the dashboards, cost
 * metrics and alarms of the monitoring issue attach to. Nothing is measured yet.
 */
export class MonitoringStack extends StrataStack {
  /** Where every Strata alarm notifies. */
  readonly alarmTopic: sns.Topic;
  readonly watched: Omit<MonitoringStackProps, keyof StrataStackProps>;

  constructor(scope: Construct, id: string, props: MonitoringStackProps) {
    super(scope, id, { description: `Strata ${props.config.name}: monitoring (alarm topic; dashboards and alarms to come)`, ...props });
    this.watched = { api: props.api, data: props.data, fleet: props.fleet };
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', { displayName: `Strata ${props.config.name} alarms`, enforceSSL: true });
    for (const email of props.config.budgets.alertEmails) this.alarmTopic.addSubscription(new subscriptions.EmailSubscription(email));
  }
}
