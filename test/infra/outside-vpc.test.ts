import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
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

  it('grants read of the policy documents to any role and their conditional write as one managed policy each', () => {
    const { stack } = fixture();
    const cold = new ColdTierBucket(stack, 'Cold');
    const [reader, writer] = ['Reader', 'Writer'].map(
      (id) => new iam.Role(stack, id, { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') }),
    );
    cold.grantRingRead(reader!, ['policies']);
    cold.grantRingWrite(writer!, ['policies']);
    const t = Template.fromStack(stack);
    type Managed = { Properties: { PolicyDocument: { Statement: unknown[] } } };
    const policies = t.findResources('AWS::IAM::ManagedPolicy') as Record<string, Managed>;
    const ids = Object.keys(policies).map((id) => id.replace(/[0-9A-F]{8}$/, ''));
    expect(ids.sort()).toEqual(['ColdAccessPolicy', 'ColdRingReadPolicies', 'ColdRingWritePolicies']);
    const bucketId = Object.keys(t.findResources('AWS::S3::Bucket')).find((id) => id.startsWith('ColdBucket'))!;
    const objects = { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/strata-ring/policies/*']] };
    const list = {
      Sid: 'ListRingDocuments',
      Action: 's3:ListBucket',
      Effect: 'Allow',
      Resource: { 'Fn::GetAtt': [bucketId, 'Arn'] },
      // GET of a key not written yet (policies/current.json before the first edit) answers 404, not 403.
      Condition: { StringLike: { 's3:prefix': ['strata-ring/policies/*'] } },
    };
    const statements = (prefix: string) =>
      Object.entries(policies).find(([id]) => id.startsWith(prefix))![1].Properties.PolicyDocument.Statement;
    expect(statements('ColdRingReadPolicies')).toEqual([
      { Sid: 'RingDocuments', Action: 's3:GetObject', Effect: 'Allow', Resource: objects },
      list,
    ]);
    // Conditional writes (If-Match / If-None-Match) need s3:PutObject and nothing more; nothing deletes a policy document.
    // https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
    expect(statements('ColdRingWritePolicies')).toEqual([
      { Sid: 'RingDocuments', Action: ['s3:GetObject', 's3:PutObject'], Effect: 'Allow', Resource: objects },
      list,
    ]);
  });
});

describe('StrataFunction.bindPolicyStore', () => {
  it('names the policy store (the ring store of the cold tier bucket) and grants read, or write to the writer', () => {
    const { stack } = fixture();
    const cold = new ColdTierBucket(stack, 'Cold');
    const reader = new StrataFunction(stack, 'Reader', { entry: apiLambdaEntry('keys') }).bindPolicyStore(cold, { write: false });
    const writer = new StrataFunction(stack, 'Writer', { entry: apiLambdaEntry('admin') }).bindPolicyStore(cold, { write: true });
    const t = Template.fromStack(stack);
    const bucketId = Object.keys(t.findResources('AWS::S3::Bucket')).find((id) => id.startsWith('ColdBucket'))!;
    // core/composition/api-context.ts policyStoreFrom: s3://<bucket>/<prefix> keeps the documents under <prefix>/policies/.
    const store = { 'Fn::Join': ['', ['s3://', { Ref: bucketId }, `/${ColdTierBucket.RING_PREFIX}`]] };
    for (const f of [reader, writer]) {
      const id = stack.getLogicalId(f.function.node.defaultChild as lambda.CfnFunction);
      expect(t.toJSON().Resources[id].Properties.Environment.Variables).toMatchObject({ STRATA_POLICY_STORE: store });
    }
    const managed = (f: StrataFunction) =>
      (
        t.toJSON().Resources[stack.getLogicalId(f.role.node.defaultChild as iam.CfnRole)].Properties.ManagedPolicyArns as {
          Ref: string;
        }[]
      ).map((a) => a.Ref.replace(/[0-9A-F]{8}$/, ''));
    expect(managed(reader)).toEqual(['ColdRingReadPolicies']);
    expect(managed(writer)).toEqual(['ColdRingWritePolicies']);
  });
});
