import { RemovalPolicy } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { EnvironmentConfig } from '../config/schema.js';

/** The environment's removal policy for data and logs. */
export function removalPolicy(config: EnvironmentConfig): RemovalPolicy {
  return config.removalPolicy === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN;
}

/** CloudWatch's enum value for the configured retention (the schema admits only valid periods). */
export function logRetention(config: EnvironmentConfig): logs.RetentionDays {
  return config.logRetentionDays as logs.RetentionDays;
}
