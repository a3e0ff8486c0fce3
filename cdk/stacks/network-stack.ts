import { Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { logRetention, removalPolicy } from './settings.js';
import { StrataStack, type StrataStackProps } from './strata-stack.js';

export interface NetworkStackProps extends StrataStackProps {
  /**
   * AWS services some component must call from inside the VPC (see CacheNodeFleet.INTERFACE_ENDPOINTS). Each costs
   * $0.01 per AZ-hour whether used or not, the bulk of an idle environment's bill: a function that needs only AWS
   * APIs runs outside the VPC instead (StrataFunction without `vpc`). @default - none
   */
  readonly interfaceEndpoints?: readonly ec2.InterfaceVpcEndpointAwsService[];
}

/** What the other stacks attach to: the VPC, where workloads go, and the coordinators' security group. */
export interface StrataNetwork {
  readonly vpc: ec2.IVpc;
  /** The private subnets (isolated unless NAT gateways are configured). */
  readonly privateSubnets: ec2.SubnetSelection;
  /** API and workflow Lambdas: the one group the cache and the cache nodes admit. */
  readonly coordinatorSecurityGroup: ec2.ISecurityGroup;
}

/**
 * Network: a VPC with private subnets in the configured AZs and, by default, no NAT gateway and no internet
 * gateway (cost, and nothing leaves the VPC): S3 through a gateway endpoint, other AWS APIs through interface
 * endpoints created only for the services a component declares. VPC flow logs go to CloudWatch Logs.
 */
export class NetworkStack extends StrataStack implements StrataNetwork {
  readonly vpc: ec2.Vpc;
  readonly privateSubnets: ec2.SubnetSelection = { subnetGroupName: 'private' };
  readonly coordinatorSecurityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: NetworkStackProps) {
    super(scope, id, {
      description: `Strata ${props.config.name}: network (VPC, endpoints, coordinators' security group)`,
      ...props,
    });
    const { config } = props;
    const nat = config.network.natGateways;
    const vpcMask = Number(config.network.cidr.split('/')[1]);

    this.vpc = new ec2.Vpc(this, 'Vpc', {
      vpcName: `strata-${config.name}`,
      ipAddresses: ec2.IpAddresses.cidr(config.network.cidr),
      availabilityZones: [...config.availabilityZones],
      natGateways: nat,
      createInternetGateway: nat > 0,
      subnetConfiguration: [
        {
          name: 'private',
          subnetType: nat > 0 ? ec2.SubnetType.PRIVATE_WITH_EGRESS : ec2.SubnetType.PRIVATE_ISOLATED,
          cidrMask: vpcMask + 4,
        },
        ...(nat > 0 ? [{ name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: vpcMask + 8 }] : []),
      ],
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3, subnets: [this.privateSubnets] } },
      // Nothing uses the default security group; restricting it would add a custom-resource Lambda to the stack.
      restrictDefaultSecurityGroup: false,
    });

    // The AZs come from the environment configuration on purpose (offline synth, no AZ lookup; every stack's subnets
    // agree): tell CDK's template validation and cfn-lint, which both warn about literal AZs (W3010).
    const literalAzReason =
      'The AZs come from the environment configuration on purpose: synth works offline (no AZ lookup) and the subnets of every stack agree; change them in cdk/config/<env>.ts or with -c availabilityZones=...';
    Validations.of(this.vpc).acknowledge({ id: 'CloudFormation-Validate::W3010', reason: literalAzReason });
    for (const subnet of [...this.vpc.isolatedSubnets, ...this.vpc.privateSubnets, ...this.vpc.publicSubnets]) {
      (subnet.node.defaultChild as ec2.CfnSubnet).addMetadata('cfn-lint', {
        config: { ignore_checks: ['W3010'], ignore_reasons: { W3010: literalAzReason } },
      });
    }

    const flowLogs = new logs.LogGroup(this, 'FlowLogs', {
      retention: logRetention(config),
      removalPolicy: removalPolicy(config),
    });
    this.vpc.addFlowLog('FlowLog', {
      destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs),
      trafficType: config.network.flowLogTraffic === 'ALL' ? ec2.FlowLogTrafficType.ALL : ec2.FlowLogTrafficType.REJECT,
    });

    const endpointAzs = config.availabilityZones.slice(0, config.network.interfaceEndpointAzs ?? config.availabilityZones.length);
    const seen = new Set<string>();
    for (const service of props.interfaceEndpoints ?? []) {
      if (seen.has(service.shortName)) continue;
      seen.add(service.shortName);
      const endpoint = this.vpc.addInterfaceEndpoint(endpointId(service.shortName), {
        service,
        subnets: { subnetGroupName: 'private', availabilityZones: endpointAzs },
        privateDnsEnabled: true,
        open: false,
      });
      // The configured CIDR rather than the VPC's CidrBlock attribute: the same range, but a literal that checks can read.
      endpoint.connections.allowFrom(ec2.Peer.ipv4(config.network.cidr), ec2.Port.tcp(443), 'HTTPS from the VPC');
    }

    this.coordinatorSecurityGroup = new ec2.SecurityGroup(this, 'CoordinatorSecurityGroup', {
      vpc: this.vpc,
      description: 'Strata coordinators (API and workflow Lambdas): the only group the cache and cache nodes admit',
      allowAllOutbound: false,
    });
    // Private subnets route nowhere but the VPC endpoints (unless NAT is configured): 443 reaches S3 and AWS APIs.
    this.coordinatorSecurityGroup.addEgressRule(
      ec2.Peer.anyIpv4(),
      ec2.Port.tcp(443),
      'HTTPS to S3 (gateway endpoint) and AWS APIs (interface endpoints)',
    );
  }
}

/** `secretsmanager` -> `SecretsManagerEndpoint` (stable construct ids). */
function endpointId(shortName: string): string {
  return `${shortName
    .split(/[.-]/)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join('')}Endpoint`;
}
