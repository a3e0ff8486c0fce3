import { CfnOutput } from 'aws-cdk-lib';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { CacheNodeFleet, type CacheNodeBundle } from '../constructs/cache-node-fleet.js';
import type { StrataNetwork } from './network-stack.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface FleetStackProps extends StrataStackProps {
  readonly network: StrataNetwork;
  /** The cachenode daemon. */
  readonly bundle: CacheNodeBundle;
  /** The ring store: the nodes poll the ring there, read the fleet secret from it and write their reports to it. */
  readonly ringStore: { readonly bucket: s3.IBucket; readonly prefix: string };
}

/**
 * Warm tier fleet: what the EC2 fleet provider launches cache nodes from (launch template, instance role, security
 * group; the shared secret lives in the ring store). No instance runs until the scale-out workflow launches one.
 */
export class FleetStack extends StrataStack {
  readonly fleet: CacheNodeFleet;

  constructor(scope: Construct, id: string, props: FleetStackProps) {
    super(scope, id, {
      description: `Strata ${props.config.name}: warm-tier cache node fleet (launch template, role, security group)`,
      ...props,
    });
    const { config, network } = props;
    this.fleet = new CacheNodeFleet(this, 'CacheNodes', {
      name: `strata-${config.name}`,
      vpc: network.vpc,
      vpcSubnets: network.privateSubnets,
      instanceType: config.fleet.instanceType,
      capacity: config.fleet.capacity,
      ...(config.fleet.instanceTypes ? { instanceTypes: config.fleet.instanceTypes } : {}),
      ...(config.fleet.onDemandBase !== undefined ? { onDemandBase: config.fleet.onDemandBase } : {}),
      dataVolume: config.fleet.dataVolume,
      port: config.fleet.port,
      coordinatorSecurityGroup: network.coordinatorSecurityGroup,
      bundle: props.bundle,
      ringStore: props.ringStore,
    });
    new CfnOutput(this, 'LaunchTemplateId', {
      value: this.fleet.launchTemplate.launchTemplateId!,
      description: 'Launch template of the cache nodes',
    });
  }
}
