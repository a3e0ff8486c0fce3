import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { API_ROUTES } from '../../core/api/routes.js';
import { WORKFLOW_NAMES } from '../../core/workflows/progress.js';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { App } from 'aws-cdk-lib';
import { buildStrataApp } from '../../cdk/app.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { NetworkStack } from '../../cdk/stacks/network-stack.js';
import { cdkJsonContext, PLACEHOLDER_CACHENODE, STACK_KEYS, synthesized } from './helpers/synth.js';
import { CACHE_NODE_V8_FLAGS } from '../../core/nodes/node-process.js';

type Json = Record<string, unknown>;
type Resources = Record<string, { Type: string; Properties: Json; DependsOn?: string[] }>;

// prod has every optional feature on (customer-managed key, snapshots, quotas, tuned volume); dev has the others.
const prod = synthesized('prod');
const dev = synthesized('dev');

function only<T>(record: Record<string, T>): T {
  const values = Object.values(record);
  expect(values).toHaveLength(1);
  return values[0]!;
}

/** Every IAM statement of a template: inline role policies, AWS::IAM::Policy and AWS::IAM::ManagedPolicy. */
function statements(resources: Resources): Json[] {
  const out: Json[] = [];
  for (const r of Object.values(resources)) {
    const docs: Json[] = [];
    if (r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy') docs.push(r.Properties.PolicyDocument as Json);
    if (r.Type === 'AWS::IAM::Role')
      for (const p of (r.Properties.Policies as { PolicyDocument: Json }[] | undefined) ?? []) docs.push(p.PolicyDocument);
    for (const d of docs) out.push(...(d.Statement as Json[]));
  }
  return out;
}

const asArray = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

describe('Stacks', () => {
  describe('Network', () => {
    it('has private subnets in the configured AZs and no NAT or internet gateway', () => {
      const t = prod.templates.network;
      t.resourceCountIs('AWS::EC2::NatGateway', 0);
      t.resourceCountIs('AWS::EC2::InternetGateway', 0);
      const subnets = Object.values(t.findResources('AWS::EC2::Subnet')) as { Properties: Json }[];
      expect(subnets.map((s) => s.Properties.AvailabilityZone).sort()).toEqual([...prod.config.availabilityZones].sort());
      for (const s of subnets) expect(s.Properties.MapPublicIpOnLaunch).toBe(false);
    });

    it('reaches S3 through a gateway endpoint and no AWS API through an interface endpoint', () => {
      // Interface endpoints are billed by the AZ-hour, idle or not: what calls other AWS APIs (the cost publisher,
      // the scale-out trigger, the admin API) runs outside the VPC, and what stays in it calls S3 only.
      const s3 = Match.objectLike({ 'Fn::Join': Match.arrayWith([Match.arrayWith([Match.stringLikeRegexp('\\.s3$')])]) });
      for (const t of [prod.templates.network, dev.templates.network]) {
        t.hasResourceProperties('AWS::EC2::VPCEndpoint', { VpcEndpointType: 'Gateway', ServiceName: s3 });
        expect(Object.keys(t.findResources('AWS::EC2::VPCEndpoint', { Properties: { VpcEndpointType: 'Interface' } }))).toEqual(
          [],
        );
      }
    });

    it('gives an interface endpoint, when a component declares one, the configured endpoint AZs and HTTPS from the VPC block only', () => {
      const endpoints = [ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER, ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER];
      for (const config of [prod.config, dev.config]) {
        const app = new App({ context: cdkJsonContext(), analyticsReporting: false });
        const t = Template.fromStack(new NetworkStack(app, 'Network', { config, interfaceEndpoints: endpoints }));
        const interfaces = Object.values(
          t.findResources('AWS::EC2::VPCEndpoint', { Properties: { VpcEndpointType: 'Interface' } }),
        );
        // One per service however often it is declared; dev keeps its endpoints in one AZ (cost).
        expect(interfaces).toHaveLength(1);
        const azs = config.network.interfaceEndpointAzs ?? config.availabilityZones.length;
        expect((interfaces[0] as { Properties: Json }).Properties.SubnetIds).toHaveLength(azs);
        const https = {
          CidrIp: config.network.cidr,
          FromPort: 443,
          ToPort: 443,
          IpProtocol: 'tcp',
          Description: 'HTTPS from the VPC',
        };
        const endpointGroup = Match.stringLikeRegexp('SecretsmanagerEndpoint');
        t.hasResourceProperties('AWS::EC2::SecurityGroup', { GroupDescription: endpointGroup, SecurityGroupIngress: [https] });
      }
    });

    it('logs VPC flows', () => {
      prod.templates.network.hasResourceProperties('AWS::EC2::FlowLog', {
        TrafficType: 'ALL',
        LogDestinationType: 'cloud-watch-logs',
      });
      dev.templates.network.hasResourceProperties('AWS::EC2::FlowLog', { TrafficType: 'REJECT' });
    });

    it('lets the coordinators out on HTTPS only (further rules come from the tiers they bind)', () => {
      prod.templates.network.hasResourceProperties('AWS::EC2::SecurityGroup', {
        GroupDescription: Match.stringLikeRegexp('^Strata coordinators'),
        SecurityGroupEgress: [
          { CidrIp: '0.0.0.0/0', FromPort: 443, ToPort: 443, IpProtocol: 'tcp', Description: Match.anyValue() },
        ],
      });
    });
  });

  describe('Data tiers', () => {
    it('runs ElastiCache Serverless Valkey with the configured limits, snapshots and customer-managed key', () => {
      const t = prod.templates.data;
      const cache = only(t.findResources('AWS::ElastiCache::ServerlessCache')) as { Properties: Json };
      expect(cache.Properties).toMatchObject({
        Engine: 'valkey',
        MajorEngineVersion: '8',
        ServerlessCacheName: 'strata-prod',
        CacheUsageLimits: {
          DataStorage: { Maximum: prod.config.hotTier.maxDataStorageGb, Unit: 'GB' },
          ECPUPerSecond: { Maximum: prod.config.hotTier.maxEcpuPerSecond },
        },
        SnapshotRetentionLimit: 7,
        DailySnapshotTime: '05:00',
      });
      expect(cache.Properties.SubnetIds).toHaveLength(3);
      expect(cache.Properties.KmsKeyId).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^HotTierKey/), 'Arn'] });
      t.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
      // dev: AWS-owned key (ElastiCache Serverless always encrypts at rest), no snapshots
      const devCache = only(dev.templates.data.findResources('AWS::ElastiCache::ServerlessCache')) as { Properties: Json };
      expect(devCache.Properties.KmsKeyId).toBeUndefined();
      expect(devCache.Properties.SnapshotRetentionLimit).toBe(0);
      dev.templates.data.resourceCountIs('AWS::KMS::Key', 0);
    });

    it('authenticates with RBAC: one IAM-authenticated user (no password anywhere), default user off', () => {
      const t = prod.templates.data;
      const group = only(t.findResources('AWS::ElastiCache::UserGroup')) as { Properties: Json };
      expect(group.Properties).toMatchObject({
        Engine: 'valkey',
        UserGroupId: 'strata-prod',
        UserIds: ['strata-prod-default', 'strata-prod-app'],
      });
      t.hasResourceProperties('AWS::ElastiCache::ServerlessCache', { UserGroupId: Match.anyValue() });
      t.hasResourceProperties('AWS::ElastiCache::User', { UserName: 'default', AccessString: 'off -@all' });
      // IAM users: user id equal to user name (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html).
      const app = only(t.findResources('AWS::ElastiCache::User', { Properties: { UserName: 'strata-prod-app' } })) as {
        Properties: Json;
      };
      expect(app.Properties).toMatchObject({ UserId: 'strata-prod-app', AuthenticationMode: { Type: 'iam' } });
      t.resourceCountIs('AWS::SecretsManager::Secret', 0);
    });

    it('admits only the coordinators, on 6379-6380', () => {
      const t = prod.templates.data;
      t.hasResourceProperties('AWS::EC2::SecurityGroup', {
        GroupDescription: Match.stringLikeRegexp('ElastiCache Serverless'),
        SecurityGroupEgress: Match.anyValue(),
      });
      const ingress = Object.values(t.findResources('AWS::EC2::SecurityGroupIngress')) as { Properties: Json }[];
      expect(ingress).toHaveLength(1);
      expect(ingress[0]!.Properties).toMatchObject({ IpProtocol: 'tcp', FromPort: 6379, ToPort: 6380 });
      expect(JSON.stringify(ingress[0]!.Properties.SourceSecurityGroupId)).toContain('CoordinatorSecurityGroup');
      expect(ingress[0]!.Properties.CidrIp).toBeUndefined();
    });

    it('encrypts the cold bucket, blocks public access and enforces TLS 1.2', () => {
      const t = prod.templates.data;
      const cold = {
        BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
      };
      expect(Object.keys(t.findResources('AWS::S3::Bucket', { Properties: cold }))).toHaveLength(2); // the tier and its access logs
      const policies = Object.values(t.findResources('AWS::S3::BucketPolicy')) as {
        Properties: { PolicyDocument: { Statement: Json[] } };
      }[];
      expect(policies).toHaveLength(2);
      for (const p of policies) {
        expect(p.Properties.PolicyDocument.Statement).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ Effect: 'Deny', Action: 's3:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
            expect.objectContaining({ Effect: 'Deny', Action: 's3:*', Condition: { NumericLessThan: { 's3:TlsVersion': 1.2 } } }),
          ]),
        );
      }
      t.hasResourceProperties('AWS::S3::Bucket', {
        LoggingConfiguration: { DestinationBucketName: Match.anyValue(), LogFilePrefix: 'cold-tier/' },
      });
    });

    it('expires incomplete multipart uploads, tombstones (the rule S3Tier defines) and abandoned staged uploads', () => {
      const tier = new S3Tier({ bucket: 'b', prefix: 'v1', tombstoneTtlMs: 10 * 60_000, region: 'us-east-1' });
      const rule = tier.tombstoneLifecycleRule();
      void tier.close();
      prod.templates.data.hasResourceProperties('AWS::S3::Bucket', {
        LifecycleConfiguration: {
          Rules: [
            {
              Id: 'abort-incomplete-multipart-uploads',
              Status: 'Enabled',
              AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
            },
            {
              Id: rule.ID,
              Status: 'Enabled',
              Prefix: rule.Filter!.And!.Prefix,
              TagFilters: [{ Key: 'strata-tombstone', Value: '1' }],
              ExpirationInDays: rule.Expiration!.Days,
            },
            { Id: 'expire-abandoned-staged-uploads', Status: 'Enabled', Prefix: 'v1/_uploads/', ExpirationInDays: 1 },
            { Id: 'expire-leftover-sweep-requests', Status: 'Enabled', Prefix: 'v1/_sweeps/', ExpirationInDays: 30 },
          ],
        },
      });
    });

    it('scopes the cold-tier policy to the tier prefix of its bucket, with the actions S3Tier uses', () => {
      const policy = only(
        prod.templates.data.findResources('AWS::IAM::ManagedPolicy', {
          Properties: { Description: 'Strata cold tier: objects under v1/ of its bucket' },
        }),
      ) as { Properties: { PolicyDocument: { Statement: Json[] } } };
      const [objects, bucket] = policy.Properties.PolicyDocument.Statement;
      expect(objects).toMatchObject({
        Sid: 'TierObjects',
        Effect: 'Allow',
        Action: ['s3:AbortMultipartUpload', 's3:DeleteObject', 's3:GetObject', 's3:PutObject', 's3:PutObjectTagging'],
      });
      expect(objects!.Resource).toEqual({
        'Fn::Join': ['', [{ 'Fn::GetAtt': [expect.stringMatching(/^ColdTierBucket/), 'Arn'] }, '/v1/*']],
      });
      expect(bucket).toEqual({
        Sid: 'HeadBucket',
        Effect: 'Allow',
        Action: 's3:ListBucket',
        Resource: { 'Fn::GetAtt': [expect.stringMatching(/^ColdTierBucket/), 'Arn'] },
      });
    });

    it('grants the ring store one document kind per policy: read, or read and conditional write, and listing of those keys only', () => {
      // Who attaches which: test/infra/iam-ring-store.test.ts.
      type Policy = { Properties: { PolicyDocument: { Statement: Json[] } } };
      const ringStore = { Properties: { Description: Match.stringLikeRegexp('^Strata ring store') } };
      const policies = prod.templates.data.findResources('AWS::IAM::ManagedPolicy', ringStore) as Record<string, Policy>;
      expect(
        Object.keys(policies)
          .map((id) => id.replace(/^ColdTier(Ring(?:Read|Write)[A-Za-z]+?)[0-9A-F]{8}$/, '$1'))
          .sort(),
      ).toEqual([
        'RingReadExecutions',
        'RingReadHealthControls',
        'RingReadNodeStats',
        'RingReadPolicies',
        'RingReadRing',
        'RingReadScaleLocks',
        'RingWriteEvaluatorJobs',
        'RingWriteEvaluatorState',
        'RingWriteExecutions',
        'RingWriteHealthChecker',
        'RingWriteHealthControls',
        'RingWriteMigrations',
        'RingWritePolicies',
        'RingWriteRing',
        'RingWriteScaleLocks',
        'RingWriteScaleTriggerSample',
      ]);
      const bucketArn = { 'Fn::GetAtt': [expect.stringMatching(/^ColdTierBucket/), 'Arn'] };
      for (const [id, p] of Object.entries(policies)) {
        const [objects, list] = p.Properties.PolicyDocument.Statement as [Json, Json];
        const key = ((objects.Resource as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1][1] as string).replace(/^\//, '');
        expect(key).toMatch(/^strata-ring\/[a-z]/);
        const actions = id.includes('RingWrite') ? ['s3:GetObject', 's3:PutObject'] : 's3:GetObject';
        const objectArn = { 'Fn::Join': ['', [bucketArn, `/${key}`]] };
        expect(objects).toEqual({ Sid: 'RingDocuments', Effect: 'Allow', Action: actions, Resource: objectArn });
        const listed = { StringLike: { 's3:prefix': [key] } };
        const listing = {
          Sid: 'ListRingDocuments',
          Effect: 'Allow',
          Action: 's3:ListBucket',
          Resource: bucketArn,
          Condition: listed,
        };
        expect(list).toEqual(listing);
      }
    });

    it('retains data in prod and deletes it with the stack in dev', () => {
      // The cache is not retained (its users, user group and network would be held): its data is, in a final snapshot.
      const finalSnapshot = { DeletionPolicy: 'Delete', Properties: { FinalSnapshotName: Match.anyValue() } };
      prod.templates.data.hasResource('AWS::ElastiCache::ServerlessCache', finalSnapshot);
      prod.templates.data.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Retain' });
      dev.templates.data.hasResource('AWS::ElastiCache::ServerlessCache', { DeletionPolicy: 'Delete' });
      dev.templates.data.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Delete' });
    });
  });

  describe('Fleet', () => {
    const lt = () =>
      (
        only(prod.templates.fleet.findResources('AWS::EC2::LaunchTemplate')) as {
          Properties: { LaunchTemplateName: string; LaunchTemplateData: Json };
        }
      ).Properties;

    it('launches Amazon Linux 2023 arm64 with IMDSv2 only and the configured instance type', () => {
      const t = prod.templates.fleet;
      expect(lt().LaunchTemplateName).toBe('strata-prod-cachenode');
      expect(lt().LaunchTemplateData).toMatchObject({
        InstanceType: 'r7g.large',
        MetadataOptions: { HttpTokens: 'required', HttpPutResponseHopLimit: 1 },
      });
      // Each launch brings the network settings, no public IP included (test/infra/ec2-launch-rules.test.ts).
      expect(lt().LaunchTemplateData).not.toHaveProperty('NetworkInterfaces');
      expect(lt().LaunchTemplateData).not.toHaveProperty('SecurityGroupIds');
      t.templateMatches({ Parameters: Match.objectLike({}) });
      const params = t.toJSON().Parameters as Record<string, { Default?: string }>;
      expect(
        Object.values(params).some((p) =>
          /^\/aws\/service\/ami-amazon-linux-latest\/al2023-ami-kernel-[\d.]+-arm64$/.test(p.Default ?? ''),
        ),
      ).toBe(true);
    });

    it('encrypts a gp3 root and the configured gp3 data volume', () => {
      expect(lt().LaunchTemplateData.BlockDeviceMappings).toEqual([
        { DeviceName: '/dev/xvda', Ebs: { DeleteOnTermination: true, Encrypted: true, VolumeSize: 10, VolumeType: 'gp3' } },
        {
          DeviceName: '/dev/sdf',
          Ebs: { DeleteOnTermination: true, Encrypted: true, VolumeSize: 500, Iops: 6000, Throughput: 250, VolumeType: 'gp3' },
        },
      ]);
    });

    it('boots the daemon: Node from AL2023, the formatted and mounted volume, the bundle from S3, a systemd unit', () => {
      const userData = JSON.stringify(lt().LaunchTemplateData.UserData);
      for (const step of [
        'dnf install -y nodejs24 unzip',
        'mkfs.xfs -L strata-data /dev/sdf',
        'LABEL=strata-data /var/lib/strata xfs defaults,noatime,nofail',
        'aws s3 cp',
        'STRATA_NODE_PORT=7070',
        `STRATA_NODE_CAPACITY_BYTES=${Math.floor(500 * 1024 ** 3 * 0.9)}`,
        'STRATA_NODE_SECRET_FROM_RING=1',
        'STRATA_NODE_RING_STORE=s3://',
        'STRATA_NODE_RING_POLL_MS=5000',
        `ExecStart=/usr/bin/node-24 ${CACHE_NODE_V8_FLAGS.join(' ')} --enable-source-maps /opt/strata/cachenode/main.mjs`,
        'ProtectSystem=strict',
        'systemctl enable --now strata-cachenode.service',
      ])
        expect(userData).toContain(step);
    });

    it('admits only the coordinators, on the daemon port, and lets nodes out on HTTPS only', () => {
      const t = prod.templates.fleet;
      const ingress = Object.values(t.findResources('AWS::EC2::SecurityGroupIngress')) as { Properties: Json }[];
      expect(ingress).toHaveLength(1);
      expect(ingress[0]!.Properties).toMatchObject({ IpProtocol: 'tcp', FromPort: 7070, ToPort: 7070 });
      expect(JSON.stringify(ingress[0]!.Properties.SourceSecurityGroupId)).toContain('CoordinatorSecurityGroup');
      t.hasResourceProperties('AWS::EC2::SecurityGroup', {
        SecurityGroupEgress: [
          { CidrIp: '0.0.0.0/0', FromPort: 443, ToPort: 443, IpProtocol: 'tcp', Description: Match.anyValue() },
        ],
      });
      // the matching egress on the coordinators' group lives here too (no reference back to the fleet from Network)
      t.hasResourceProperties('AWS::EC2::SecurityGroupEgress', {
        FromPort: 7070,
        ToPort: 7070,
        DestinationSecurityGroupId: Match.anyValue(),
      });
    });

    it('lets the instance role read exactly its bundle object, the ring document and the fleet secret, and write its own report', () => {
      const t = prod.templates.fleet;
      const role = only(t.findResources('AWS::IAM::Role')) as { Properties: Json };
      expect(role.Properties.ManagedPolicyArns).toBeUndefined();
      const s = statements(t.toJSON().Resources as Resources);
      expect(s).toHaveLength(2);
      // Three objects: the bundle, the ring document (the nodes poll it) and the fleet secret, not the rest of the bucket.
      expect(s[0]).toMatchObject({
        Action: 's3:GetObject',
        Effect: 'Allow',
        Resource: [expect.anything(), expect.anything(), expect.anything()],
      });
      const objects = (s[0]!.Resource as Json[]).map((r) => JSON.stringify(r));
      for (const object of [
        /cdk-hnb659fds-assets-.*\/[0-9a-f]{64}\.zip"/,
        /ColdTierBucket.*"\/strata-ring\/ring\.json"/,
        /ColdTierBucket.*"\/strata-ring\/fleet\/secret"/,
      ]) {
        expect(objects.filter((o) => object.test(o))).toHaveLength(1);
      }
      // Its own statistics report only (per instance: test/infra/fleet-ring-access.test.ts).
      expect(s[1]).toMatchObject({ Action: 's3:PutObject', Effect: 'Allow' });
      expect(JSON.stringify(s[1]!.Resource)).toContain('"/strata-ring/nodes/${aws:userid}/stats.json"');
    });
  });

  describe('API', () => {
    const functions = () => prod.templates.api.findResources('AWS::Lambda::Function') as Record<string, { Properties: Json }>;
    const fnLogicalId = (fn: string) =>
      Object.keys(functions()).find((id) => id.startsWith(`${fn.charAt(0).toUpperCase()}${fn.slice(1)}Function`))!;

    it('has one nodejs24.x arm64 function per API group, sized from config', () => {
      const groups = [...new Set(API_ROUTES.map((r) => r.fn))];
      expect(Object.keys(functions())).toHaveLength(groups.length);
      for (const fn of groups) {
        const f = functions()[fnLogicalId(fn)]!.Properties;
        const settings = prod.config.api.functions[fn];
        expect(f).toMatchObject({
          Runtime: 'nodejs24.x',
          Architectures: ['arm64'],
          Handler: 'index.handler',
          MemorySize: settings.memoryMb,
          Timeout: 29,
        });
        if (fn === 'admin') {
          // Step Functions, its progress documents and the policy documents in S3 only: outside the VPC, no interface
          // endpoint needed (S3 over its public endpoint).
          expect(f.VpcConfig).toBeUndefined();
          continue;
        }
        expect(f.VpcConfig).toMatchObject({
          SecurityGroupIds: [expect.anything()],
          SubnetIds: expect.arrayContaining([expect.anything()]),
        });
        expect(JSON.stringify((f.VpcConfig as Json).SecurityGroupIds)).toContain('CoordinatorSecurityGroup');
        expect(f.LoggingConfig).toEqual({ LogGroup: { Ref: expect.stringMatching(/Logs/) } });
      }
      prod.templates.api.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 90 });
    });

    it('gives every function the runtime settings core/composition/runtime-env.ts reads', () => {
      // STRATA_POLICY_STORE: s3://<the cold tier's bucket>/strata-ring, rendered by CloudFormation.
      const policyStore = (bucket: unknown) => ({ 'Fn::Join': ['', ['s3://', bucket, '/strata-ring']] });
      for (const id of Object.keys(functions())) {
        const vars = (functions()[id]!.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
        if (id.startsWith('AdminFunction')) {
          // The admin function: the workflows' state machines and their progress documents (the ring store under names
          // of their own: it has no warm tier), the policy store, and no tier, node or secret.
          const expected = [
            'NODE_OPTIONS',
            'STRATA_NEAR_CACHE_MB',
            // The node routes (/v1/admin/nodes...) through the ring store alone: it reaches no cache node.
            'STRATA_NODE_ADMIN_RING_BUCKET',
            // The default rules as the evaluator runs them, for `strata policy validate` (cdk/lib/policy-defaults.ts).
            'STRATA_POLICY_DEFAULTS',
            // The policy ticker runs the background rules (policies.evaluator): the firing history is in the store.
            'STRATA_POLICY_EVALUATOR',
            'STRATA_POLICY_STORE',
            'STRATA_TAG_SWEEP_WINDOW_MINUTES',
            'STRATA_TENANT_ACCESS',
            'STRATA_URL_TTL_SECONDS',
            // The invalidations document (namespace flushes, the invalidation log): the cold tier's, named on its own.
            'STRATA_INVALIDATIONS_BUCKET',
            'STRATA_INVALIDATIONS_PREFIX',
            'STRATA_WORKFLOW_ARNS',
            'STRATA_WORKFLOW_DOCS_BUCKET',
            'STRATA_WORKFLOW_DOCS_PREFIX',
            'STRATA_WARM_RING_PREFIX',
          ].sort();
          expect(Object.keys(vars).sort()).toEqual(expected);
          expect(vars.STRATA_WARM_RING_PREFIX).toBe('strata-ring');
          // A JSON object (rendered by CloudFormation) naming each workflow's state machine of the Workflows stack.
          for (const w of WORKFLOW_NAMES) {
            expect(JSON.stringify(vars.STRATA_WORKFLOW_ARNS)).toMatch(new RegExp(`\\\\"${w}\\\\":\\\\"".*Strata-prod-Workflows`));
          }
          expect(vars.STRATA_WORKFLOW_DOCS_PREFIX).toBe('strata-ring');
          expect(vars.STRATA_POLICY_STORE).toEqual(policyStore(vars.STRATA_WORKFLOW_DOCS_BUCKET));
          continue;
        }
        // Functions with namespaced routes also get the tenant map (see the tenant test below).
        const tenants = /^(Keys|Batch|Transfer)Function/.test(id) ? ['STRATA_TENANT_ACCESS'] : [];
        // The transfer function's large completions request the upload-commit workflow through S3 (its commit
        // request's event); every data function's flushes and invalidations request their sweeps the same way.
        const uploadCommit = /^TransferFunction/.test(id) ? ['STRATA_UPLOAD_COMMIT_TRIGGER'] : [];
        expect(Object.keys(vars).sort()).toEqual([
          'NODE_OPTIONS',
          'STRATA_NEAR_CACHE_MB',
          'STRATA_NODE_PORT',
          // The policies' default rules as the evaluator runs them (cdk/lib/policy-defaults.ts).
          'STRATA_POLICY_DEFAULTS',
          'STRATA_POLICY_EVALUATOR',
          'STRATA_POLICY_STORE',
          'STRATA_REDIS_CLUSTER',
          'STRATA_REDIS_IAM_CACHE',
          'STRATA_REDIS_URL',
          'STRATA_REDIS_USERNAME',
          'STRATA_S3_BUCKET',
          'STRATA_S3_PREFIX',
          'STRATA_SWEEP_TRIGGER',
          // Tag invalidations' shared sweeps (core/api/namespace-operations.ts).
          'STRATA_TAG_SWEEP_WINDOW_MINUTES',
          ...tenants,
          ...uploadCommit,
          'STRATA_URL_TTL_SECONDS',
          'STRATA_WARM_RING_BUCKET',
          'STRATA_WARM_RING_PREFIX',
          'STRATA_WARM_SECRET_FROM_RING',
        ]);
        expect(vars.NODE_OPTIONS).toBe('--enable-source-maps');
        expect(vars.STRATA_REDIS_CLUSTER).toBe('1');
        expect(vars.STRATA_REDIS_USERNAME).toBe('strata-prod-app');
        expect(vars.STRATA_S3_PREFIX).toBe('v1');
        expect(JSON.stringify(vars.STRATA_REDIS_URL)).toMatch(
          /^\{"Fn::Join":\["",\["rediss:\/\/",.*EndpointAddress.*":",.*EndpointPort/,
        );
        // No password: the runtime signs IAM tokens for this cache (composition/elasticache-iam.ts).
        expect(vars.STRATA_REDIS_IAM_CACHE).toBe('strata-prod');
        expect(JSON.stringify(vars)).not.toContain('{{resolve:secretsmanager:');
        // The warm tier: the ring store in the cold tier's bucket, the fleet secret read from it at start-up.
        expect(vars.STRATA_WARM_RING_BUCKET).toEqual(vars.STRATA_S3_BUCKET);
        expect(vars.STRATA_WARM_RING_PREFIX).toBe('strata-ring');
        expect(vars.STRATA_NODE_PORT).toBe('7070');
        expect(vars.STRATA_WARM_SECRET_FROM_RING).toBe('1');
        // The policy store: the ring store's policies/ (core/composition/api-context.ts policyStoreFrom).
        expect(vars.STRATA_POLICY_STORE).toEqual(policyStore(vars.STRATA_WARM_RING_BUCKET));
      }
    });

    it('grants data functions logs, VPC, tier, ring/policy read, Connect, fleet secret; admin workflows, policy write', () => {
      const t = prod.templates.api;
      const roles = t.findResources('AWS::IAM::Role', {
        Properties: { AssumeRolePolicyDocument: { Statement: [{ Principal: { Service: 'lambda.amazonaws.com' } }] } },
      }) as Record<string, { Properties: Json }>;
      expect(Object.keys(roles)).toHaveLength(new Set(API_ROUTES.map((r) => r.fn)).size);
      const dataOutput = (name: RegExp) => ({
        'Fn::GetStackOutput': expect.objectContaining({ StackName: 'Strata-prod-Data', OutputName: expect.stringMatching(name) }),
      });
      const adminRole = Object.keys(roles).find((id) => id.startsWith('AdminFunction'))!;
      // The data functions read the ring document (to route to the nodes) and the policy in force; the admin function
      // its executions' progress, and it alone writes the policy documents.
      for (const [id, r] of Object.entries(roles)) {
        const data = [
          dataOutput(/^PublishOutputRefColdTierAccessPolicy/),
          dataOutput(/^PublishOutputRefColdTierRingReadRing[0-9A-F]/),
          dataOutput(/^PublishOutputRefColdTierRingReadPolicies[0-9A-F]/),
        ];
        // The node routes: the ring (list, replace) and the operators' replacement switch (read and write).
        const admin = [
          dataOutput(/^PublishOutputRefColdTierRingReadExecutions/),
          dataOutput(/^PublishOutputRefColdTierRingWritePolicies[0-9A-F]/),
          dataOutput(/^PublishOutputRefColdTierRingReadRing[0-9A-F]/),
          dataOutput(/^PublishOutputRefColdTierRingWriteHealthControls[0-9A-F]/),
          dataOutput(/^PublishOutputRefColdTierInvalidationsDocument[0-9A-F]/),
        ];
        expect(r.Properties.ManagedPolicyArns).toEqual(id === adminRole ? admin : data);
      }
      type Policy = { Properties: { PolicyDocument: { Statement: Json[] }; Roles: { Ref: string }[] } };
      const policies = Object.values(t.findResources('AWS::IAM::Policy')) as Policy[];
      expect(policies).toHaveLength(Object.keys(roles).length);
      for (const p of policies) {
        if (p.Properties.Roles[0]!.Ref === adminRole) {
          // Outside the VPC: its logs and the workflows: start and list executions of the five state machines,
          // describe their executions. No network interface, hot tier or fleet secret.
          const [logsStatement, ...rest] = p.Properties.PolicyDocument.Statement;
          const logGroup = { 'Fn::GetAtt': [expect.stringMatching(/Logs/), 'Arn'] };
          expect(logsStatement).toEqual({
            Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
            Effect: 'Allow',
            Resource: logGroup,
          });
          const machine = { 'Fn::GetStackOutput': expect.objectContaining({ StackName: 'Strata-prod-Workflows' }) };
          const WORKFLOWS = [
            'evict-to-s3',
            'invalidation-sweep',
            'order-markers',
            'replace-node',
            'rolling-upgrade',
            'scale-in',
            'scale-out',
            'tier-migrate',
            'upload-commit',
          ];
          const account = { Ref: 'AWS::AccountId' };
          const executions = (w: string) => ({
            'Fn::Join': ['', ['arn:aws:states:us-east-1:', account, `:execution:strata-prod-${w}:*`]],
          });
          expect(rest).toEqual([
            {
              Action: ['states:ListExecutions', 'states:StartExecution'],
              Effect: 'Allow',
              Resource: expect.arrayContaining([machine]),
            },
            { Action: 'states:DescribeExecution', Effect: 'Allow', Resource: WORKFLOWS.map(executions) },
          ]);
          expect((rest[0]!.Resource as unknown[]).length).toBe(WORKFLOWS.length);
          continue;
        }
        // No data function starts a workflow itself: their VPC has no route to Step Functions (the upload commits and
        // the sweeps start from their requests' S3 events: test/infra/sweep-request-wiring.test.ts).
        const statements = p.Properties.PolicyDocument.Statement;
        expect(statements.filter((s) => JSON.stringify(s.Action).includes('states:'))).toEqual([]);
        const own = statements;
        expect(own).toHaveLength(5);
        const [logsStatement, eni, connect, secret, createSecret] = own;
        expect(logsStatement).toEqual({
          Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
          Effect: 'Allow',
          Resource: { 'Fn::GetAtt': [expect.stringMatching(/Logs/), 'Arn'] },
        });
        expect(eni!.Action).toEqual([
          'ec2:AssignPrivateIpAddresses',
          'ec2:CreateNetworkInterface',
          'ec2:DeleteNetworkInterface',
          'ec2:DescribeNetworkInterfaces',
          'ec2:DescribeSubnets',
          'ec2:UnassignPrivateIpAddresses',
        ]);
        // The hot tier: IAM authentication, on the cache and its user only (test/infra/hot-tier-iam.test.ts).
        expect(connect).toMatchObject({ Action: 'elasticache:Connect', Effect: 'Allow' });
        // The fleet's shared secret only: its ring-store object, read, and created if missing (test/infra/fleet-ring-access.test.ts).
        expect(secret).toMatchObject({ Action: 's3:GetObject', Effect: 'Allow' });
        expect(createSecret).toMatchObject({
          Action: 's3:PutObject',
          Effect: 'Allow',
          Condition: { Null: { 's3:if-none-match': 'false' } },
        });
        for (const st of [secret, createSecret])
          expect(JSON.stringify(st!.Resource)).toMatch(/"\/strata-ring\/fleet\/secret"\]\]\}$/);
      }
    });

    it('generates one method per API route, each a Lambda proxy to its group and requiring an API key', () => {
      const t = prod.templates.api;
      const resources = t.toJSON().Resources as Resources;
      const pathOf = (id: string): string => {
        const r = resources[id]!;
        const parent = r.Properties.ParentId as { Ref?: string };
        return `${parent.Ref && resources[parent.Ref]?.Type === 'AWS::ApiGateway::Resource' ? pathOf(parent.Ref) : ''}/${r.Properties.PathPart as string}`;
      };
      const methods = Object.values(t.findResources('AWS::ApiGateway::Method')) as { Properties: Json }[];
      const generated = methods.map((m) => {
        const p = m.Properties;
        expect(p).toMatchObject({ ApiKeyRequired: true, Integration: { Type: 'AWS_PROXY', IntegrationHttpMethod: 'POST' } });
        const uri = JSON.stringify((p.Integration as Json).Uri);
        const fn = ['keys', 'batch', 'transfer', 'service', 'admin'].find((f) => uri.includes(fnLogicalId(f)))!;
        return `${p.HttpMethod as string} ${pathOf((p.ResourceId as { Ref: string }).Ref)} ${fn} ${p.AuthorizationType as string}`;
      });
      // Admin routes also need an IAM principal (SigV4); the others the API key alone.
      expect(generated.sort()).toEqual(
        API_ROUTES.map((r) => `${r.method} ${r.resource} ${r.fn} ${r.auth === 'admin' ? 'AWS_IAM' : 'NONE'}`).sort(),
      );
    });

    it('validates path parameters of every parameterised route', () => {
      const t = prod.templates.api;
      t.hasResourceProperties('AWS::ApiGateway::RequestValidator', {
        ValidateRequestParameters: true,
        ValidateRequestBody: false,
      });
      t.hasResourceProperties('AWS::ApiGateway::Method', {
        HttpMethod: 'PUT',
        RequestParameters: { 'method.request.path.ns': true, 'method.request.path.key': true },
        RequestValidatorId: Match.anyValue(),
      });
    });

    it("accepts binary bodies and logs access as JSON with the caller's API key id", () => {
      const t = prod.templates.api;
      t.hasResourceProperties('AWS::ApiGateway::RestApi', {
        BinaryMediaTypes: ['*/*'],
        EndpointConfiguration: { Types: ['REGIONAL'] },
        ApiKeySourceType: 'HEADER',
      });
      const stage = only(t.findResources('AWS::ApiGateway::Stage')) as {
        Properties: { StageName: string; AccessLogSetting: { Format: string }; MethodSettings: Json[] };
      };
      expect(stage.Properties.StageName).toBe('prod');
      expect(JSON.parse(stage.Properties.AccessLogSetting.Format)).toMatchObject({
        apiKeyId: '$context.identity.apiKeyId',
        status: '$context.status',
        requestId: '$context.requestId',
      });
      expect(stage.Properties.MethodSettings).toEqual([
        expect.objectContaining({
          HttpMethod: '*',
          ResourcePath: '/*',
          ThrottlingRateLimit: 2000,
          ThrottlingBurstLimit: 4000,
          LoggingLevel: 'ERROR',
          DataTraceEnabled: false,
          MetricsEnabled: true,
        }),
      ]);
    });

    it('gives each tenant an API key and a usage plan with its throttle and quota', () => {
      const t = prod.templates.api;
      t.resourceCountIs('AWS::ApiGateway::ApiKey', prod.config.tenants.length);
      t.resourceCountIs('AWS::ApiGateway::UsagePlanKey', prod.config.tenants.length);
      t.hasResourceProperties('AWS::ApiGateway::ApiKey', { Name: 'strata-prod-web', Enabled: true, Value: Match.absent() });
      t.hasResourceProperties('AWS::ApiGateway::UsagePlan', {
        UsagePlanName: 'strata-prod-web',
        Throttle: { RateLimit: 1000, BurstLimit: 2000 },
        Quota: Match.absent(),
      });
      t.hasResourceProperties('AWS::ApiGateway::UsagePlan', {
        UsagePlanName: 'strata-prod-analytics',
        Throttle: { RateLimit: 200, BurstLimit: 400 },
        Quota: { Limit: 5_000_000, Period: 'DAY' },
      });
    });

    it('tells the functions with namespaced routes which namespaces each tenant key id may use', () => {
      const keyIds = Object.keys(prod.templates.api.findResources('AWS::ApiGateway::ApiKey'));
      for (const fn of ['keys', 'batch', 'transfer']) {
        const vars = (functions()[fnLogicalId(fn)]!.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
        // CloudFormation renders the JSON with each key's id (a Ref to the ApiKey resource) in place.
        const rendered = JSON.stringify(vars.STRATA_TENANT_ACCESS);
        for (const t of prod.config.tenants)
          expect(rendered).toContain(
            JSON.stringify(`","tenant":"${t.name}","namespaces":${JSON.stringify(t.namespaces)}}`).slice(1, -1),
          );
        for (const id of keyIds) expect(rendered).toContain(`{"Ref":"${id}"}`);
      }
    });

    it('refuses tenant namespace lists too long for a Lambda environment, pointing to prefix grants', () => {
      const many = Array.from({ length: 150 }, (_, i) => `namespace-${i}`);
      const config = { ...dev.config, tenants: [{ ...dev.config.tenants[0]!, namespaces: many }] };
      const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
      expect(() =>
        buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false }),
      ).toThrow(/namespace lists take \d+ bytes .* grant prefixes \("web-\*"\)/);
    });

    it("outputs the API URL and every tenant's key id", () => {
      const outputs = prod.templates.api.toJSON().Outputs as Record<string, unknown>;
      // PublishOutputRef*: CDK's weak cross-stack references (the Monitoring stack reads the functions' names).
      expect(
        Object.keys(outputs)
          .filter((o) => !o.startsWith('PublishOutputRef'))
          .sort(),
      ).toEqual(['ApiKeyIdAnalytics', 'ApiKeyIdWeb', 'ApiUrl']);
    });
  });

  describe('Monitoring and Workflows', () => {
    it('has the alarm topic, TLS only; EventBridge may publish to it (failed unalarmed workflows)', () => {
      prod.templates.monitoring.resourceCountIs('AWS::SNS::Topic', 1);
      prod.templates.monitoring.hasResourceProperties('AWS::SNS::TopicPolicy', {
        PolicyDocument: {
          Statement: [
            Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
            Match.objectLike({ Effect: 'Allow', Action: 'sns:Publish', Principal: { Service: 'events.amazonaws.com' } }),
          ],
        },
      });
    });

    it("has the state machines' log group", () => {
      // Named after the stack's UUID: retained, so a fixed name would block creating the stack again (teardown.test.ts).
      const name = { 'Fn::Join': ['', ['/aws/vendedlogs/states/strata-prod-', Match.anyValue()]] };
      prod.templates.workflows.hasResourceProperties('AWS::Logs::LogGroup', { LogGroupName: name, RetentionInDays: 90 });
    });
  });

  describe('Everywhere', () => {
    it.each(['dev', 'prod'] as const)(
      '%s: IAM statements name their resources; only VPC networking, the cost publisher\'s and the failure detector\'s reads use "*"',
      (env) => {
        const s = env === 'dev' ? dev : prod;
        for (const key of STACK_KEYS) {
          for (const st of statements(s.templates[key].toJSON().Resources as Resources)) {
            const resources = asArray(st.Resource);
            const actions = asArray(st.Action as string | string[]);
            expect(actions.some((a) => a.endsWith('*'))).toBe(false);
            // Actions without resource-level permissions: VPC networking, and the cost publisher's read-only calls
            // and its PutMetricData, which must be limited by a namespace condition; the failure detector's
            // DescribeInstanceStatus (the policy evaluator's: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html).
            // ... and the state machines' X-Ray tracing and log delivery, which take no resource.
            if (resources.includes('*'))
              expect(
                actions.filter(
                  (a) =>
                    !/^(ec2:(\w+NetworkInterfaces?|DescribeSubnets|(Assign|Unassign)PrivateIpAddresses|DescribeInstances|DescribeInstanceStatus|DescribeVolumes)|cloudwatch:(GetMetricData|PutMetricData)|xray:(PutTraceSegments|PutTelemetryRecords|GetSamplingRules|GetSamplingTargets)|logs:(CreateLogDelivery|GetLogDelivery|UpdateLogDelivery|DeleteLogDelivery|ListLogDeliveries|PutResourcePolicy|DescribeResourcePolicies|DescribeLogGroups))$/.test(
                      a,
                    ),
                ),
              ).toEqual([]);
            if (actions.includes('cloudwatch:PutMetricData'))
              expect(st.Condition).toEqual({ StringEquals: { 'cloudwatch:namespace': expect.any(Array) } });
          }
        }
      },
    );

    it('commits no account id, endpoint or secret: templates refer to the account and secrets symbolically', () => {
      for (const key of STACK_KEYS) {
        const text = JSON.stringify(prod.templates[key].toJSON());
        expect(text).not.toMatch(/arn:[^"]*:\d{12}:|"\d{12}"|\$\{AWS::AccountId\}-\d/);
        expect(text).not.toMatch(/\.cache\.amazonaws\.com/);
      }
    });

    const withAccount = synthesized('dev', { context: { account: '123456789012' } });
    it('uses the account from context when given (deploy-time synth)', () => {
      expect(withAccount.stacks.api.account).toBe('123456789012');
    });

    it('protects prod stacks from deletion', () => {
      for (const key of STACK_KEYS) {
        expect(prod.stacks[key].terminationProtection).toBe(true);
        expect(dev.stacks[key].terminationProtection).toBe(false);
      }
    });
  });
});
