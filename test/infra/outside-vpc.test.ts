import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { CacheNodeFleet } from '../../cdk/constructs/cache-node-fleet.js';
import { ColdTierBucket } from '../../cdk/constructs/cold-tier-bucket.js';
import { StrataFunction } from '../../cdk/constructs/strata-function.js';
import type { ValkeyServerlessCache } from '../../cdk/constructs/valkey-serverless-cache.js';
import { apiLambdaEntry } from '../../cdk/lib/packaging.js';

/**
 * Functions that need only AWS APIs run outside the VPC (issue 20, item 5: interface endpoints were most of an
 * idle environment's bill), and the ring store's documents are granted one kind at a time (item 2b).
 */
function fixture() {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
  const stack = new Stack(app, 'Test', { env: { region: 'us-east-1' } });
  return { stack };
}

function statementsOf(stack: Stack): { Action: unknown; Resource: unknown }[] {
  type Policy = { Properties: { PolicyDocument: { Statement: { Action: unknown; Resource: unknown }[] } } };
  const policies = Template.fromStack(stack).findResources('AWS::IAM::Policy') as Record<string, Policy>;
  return Object.values(policies).flatMap((p) => p.Properties.PolicyDocument.Statement);
}

describe('StrataFunction without a VPC', () => {
  it('runs outside the VPC with a role that may write its logs and nothing else (no network-interface actions)', () => {
    const { stack } = fixture();
    new StrataFunction(stack, 'Fn', { entry: apiLambdaEntry('admin') });
    const t = Template.fromStack(stack);
    const fn = Object.values(t.findResources('AWS::Lambda::Function'))[0] as { Properties: Record<string, unknown> };
    expect(fn.Properties.VpcConfig).toBeUndefined();
    expect(statementsOf(stack)).toEqual([expect.objectContaining({ Action: ['logs:CreateLogStream', 'logs:PutLogEvents'] })]);
    t.resourceCountIs('AWS::EC2::SecurityGroup', 0);
  });

  it('refuses a VPC given in part, which would silently run the function outside it', () => {
    const { stack } = fixture();
    const subnetConfiguration = [{ name: 'private', subnetType: ec2.SubnetType.PRIVATE_ISOLATED }];
    const vpc = new ec2.Vpc(stack, 'Vpc', { natGateways: 0, subnetConfiguration, restrictDefaultSecurityGroup: false });
    const partial = () => new StrataFunction(stack, 'Fn', { entry: apiLambdaEntry('admin'), vpc });
    expect(partial).toThrow(/give vpc, vpcSubnets and securityGroup together, or none of them/);
  });

  it('refuses the hot tier and the cache nodes, which only the VPC reaches', () => {
    const { stack } = fixture();
    const fn = new StrataFunction(stack, 'Fn', { entry: apiLambdaEntry('admin') });
    expect(() => fn.bindHotTier({} as ValkeyServerlessCache)).toThrow(/the hot tier is reachable only from the VPC/);
    expect(() => fn.bindFleet({} as CacheNodeFleet)).toThrow(/the cache nodes are reachable only from the VPC/);
  });
});

describe('ColdTierBucket ring-store grants', () => {
  it('shares one policy per document and access between the roles granted it', () => {
    const { stack } = fixture();
    const cold = new ColdTierBucket(stack, 'Cold');
    const roles = ['A', 'B'].map(
      (id) => new iam.Role(stack, id, { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') }),
    );
    for (const r of roles) cold.grantRingRead(r, ['ring', 'nodeStats']);
    cold.grantRingWriters(roles[0]!);
    const ids = Object.keys(Template.fromStack(stack).findResources('AWS::IAM::ManagedPolicy')).map((id) =>
      id.replace(/[0-9A-F]{8}$/, ''),
    );
    expect(ids.sort()).toEqual([
      'ColdAccessPolicy',
      'ColdRingReadNodeStats',
      'ColdRingReadRing',
      'ColdRingWriteExecutions',
      'ColdRingWriteMigrations',
      'ColdRingWriteRing',
      'ColdRingWriteScaleLocks',
    ]);
  });

  it("grants nothing on the policies/ prefix reserved for the admin path's policy documents", () => {
    const { stack } = fixture();
    const cold = new ColdTierBucket(stack, 'Cold');
    const role = new iam.Role(stack, 'R', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    expect(() => cold.grantRingRead(role, ['policies'])).toThrow(
      /policies\/ prefix is reserved .* \(the policy engine, not built yet\)/,
    );
    expect(() => cold.grantRingWrite(role, ['policies'])).toThrow(/reserved/);
  });
});
