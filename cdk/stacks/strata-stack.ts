import { Stack, Tags, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import type { EnvironmentConfig } from '../config/schema.js';

export interface StrataStackProps extends Omit<StackProps, 'env'> {
  readonly config: EnvironmentConfig;
}

/**
 * Base of every Strata stack: the environment's account (when known) and region, its configured AZs (so synth
 * needs no AZ lookup and works offline), termination protection in prod, and the environment tags.
 */
export class StrataStack extends Stack {
  readonly config: EnvironmentConfig;

  constructor(scope: Construct, id: string, props: StrataStackProps) {
    super(scope, id, {
      terminationProtection: props.config.name === 'prod',
      ...props,
      env: { account: props.config.account, region: props.config.region },
    });
    this.config = props.config;
    Tags.of(this).add('strata:env', props.config.name);
  }

  override get availabilityZones(): string[] {
    return [...this.config.availabilityZones];
  }
}

/** Stack id and name: `Strata-<env>-<Concern>`. */
export function stackId(config: EnvironmentConfig, concern: string): string {
  return `Strata-${config.name}-${concern}`;
}
