import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { ColdTierBucket, type ColdTierBucketProps } from '../../cdk/constructs/cold-tier-bucket.js';
import { s3OrderMarkerKey } from '../../core/tiers/storage-key.js';
import {
  CacheNodeBundle,
  CacheNodeFleet,
  nativeModulesInstallCommand,
  type CacheNodeFleetProps,
} from '../../cdk/constructs/cache-node-fleet.js';
import { StrataFunction, type StrataFunctionProps } from '../../cdk/constructs/strata-function.js';
import { StrataRestApi, type StrataRestApiProps } from '../../cdk/constructs/strata-rest-api.js';
import { ValkeyServerlessCache, type ValkeyServerlessCacheProps } from '../../cdk/constructs/valkey-serverless-cache.js';
import { apiLambdaEntry } from '../../cdk/lib/packaging.js';
import { PLACEHOLDER_CACHENODE } from './helpers/synth.js';

/** A stack with a 3-AZ isolated VPC and a coordinators' group; bundling off unless asked. */
function fixture(opts: { bundling?: boolean } = {}) {
  const app = new App({ context: opts.bundling ? {} : { 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
  const stack = new Stack(app, 'Test', { env: { region: 'us-east-1' } });
  const vpc = new ec2.Vpc(stack, 'Vpc', {
    availabilityZones: ['us-east-1a', 'us-east-1b', 'us-east-1c'],
    natGateways: 0,
    subnetConfiguration: [{ name: 'private', subnetType: ec2.SubnetType.PRIVATE_ISOLATED }],
    restrictDefaultSecurityGroup: false,
  });
  const coordinators = new ec2.SecurityGroup(stack, 'Coordinators', { vpc, allowAllOutbound: false });
  return { app, stack, vpc, coordinators };
}

function expectInvalid(build: () => unknown, message: RegExp): void {
  let error: unknown;
  try {
    build();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(Error);
  expect((error as Error).name).toBe('InvalidPropsError');
  expect((error as Error).message).toMatch(message);
}

describe('Construct: ValkeyServerlessCache', () => {
  const make = (over: Partial<ValkeyServerlessCacheProps> = {}) => {
    const f = fixture();
    return new ValkeyServerlessCache(f.stack, 'Cache', {
      cacheName: 'strata-test',
      vpc: f.vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      maxDataStorageGb: 1,
      maxEcpuPerSecond: 5000,
      ...over,
    });
  };

  it('builds with valid props and exposes a rediss:// URL', () => {
    expect(make().connection.url).toMatch(/^rediss:\/\//);
    expect(make().connection.username).toBe('strata-test-app');
  });
  it('fails on a cache name ElastiCache would reject', () =>
    expectInvalid(
      () => make({ cacheName: 'Strata_Test' }),
      /Test\/Cache: cacheName 'Strata_Test' must be 1-30 characters of a-z, 0-9 and "-"/,
    ));
  it('fails on a storage limit outside 1-5000 GB', () =>
    expectInvalid(
      () => make({ maxDataStorageGb: 6000 }),
      /maxDataStorageGb must be a whole number of GB from 1 to 5000 \(got 6000\)/,
    ));
  it('fails on an ECPU limit outside 1000-15000000', () =>
    expectInvalid(
      () => make({ maxEcpuPerSecond: 999 }),
      /maxEcpuPerSecond must be a whole number from 1000 to 15000000 \(got 999\)/,
    ));
  it('fails on a snapshot retention above 35 days', () =>
    expectInvalid(() => make({ snapshotRetentionDays: 36 }), /snapshotRetentionDays must be 0-35 \(got 36\)/));
  it('fails on a malformed snapshot time', () =>
    expectInvalid(
      () => make({ snapshotRetentionDays: 1, dailySnapshotTime: '5:00' }),
      /dailySnapshotTime must be "HH:MM" in UTC \(got '5:00'\)/,
    ));
  it('fails on a snapshot time without snapshots', () =>
    expectInvalid(() => make({ dailySnapshotTime: '05:00' }), /dailySnapshotTime needs snapshotRetentionDays > 0/));
  it('fails with more than 3 subnets', () => {
    const f = fixture();
    const vpc = new ec2.Vpc(f.stack, 'Wide', {
      maxAzs: 3,
      natGateways: 0,
      subnetConfiguration: [
        { name: 'a', subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
        { name: 'b', subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      ],
      restrictDefaultSecurityGroup: false,
    });
    expectInvalid(
      () =>
        new ValkeyServerlessCache(f.stack, 'Cache', {
          cacheName: 'x',
          vpc,
          vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
          maxDataStorageGb: 1,
          maxEcpuPerSecond: 5000,
        }),
      /ElastiCache Serverless takes 2-3 subnets; the selection has \d+/,
    );
  });
});

describe('Construct: ColdTierBucket', () => {
  const make = (props: ColdTierBucketProps = {}) => new ColdTierBucket(fixture().stack, 'Cold', props);

  it('derives the tombstone rule from the tier, rounding the TTL up to whole days', () => {
    const cold = make({ tombstoneTtl: Duration.hours(30) });
    Template.fromStack(Stack.of(cold)).hasResourceProperties('AWS::S3::Bucket', {
      LifecycleConfiguration: {
        Rules: [
          { Id: 'abort-incomplete-multipart-uploads' },
          { Id: 'strata-tombstones-v1', ExpirationInDays: 2 },
          { Id: 'expire-abandoned-staged-uploads' },
          { Id: 'expire-leftover-sweep-requests', Prefix: 'v1/_sweeps/', ExpirationInDays: 30 },
        ],
      },
    });
  });
  it('leaves the order markers (<prefix>/_k/) to the tier: in its grant, with the actions pruning needs, expired by no rule', () => {
    const cold = make({ prefix: 'p1' });
    const t = Template.fromStack(Stack.of(cold));
    const marker = s3OrderMarkerKey(cold.prefix, 'ns', 'key');
    type Rule = { Id: string; Prefix?: string; TagFilters?: unknown[]; ExpirationInDays?: number };
    const buckets = Object.values(t.findResources('AWS::S3::Bucket')) as {
      Properties: { LifecycleConfiguration?: { Rules: Rule[] }; LoggingConfiguration?: unknown };
    }[];
    const tierBucket = buckets.find((b) => b.Properties.LoggingConfiguration)!;
    const expiring = tierBucket.Properties.LifecycleConfiguration!.Rules.filter((r) => r.ExpirationInDays !== undefined);
    expect(expiring.map((r) => r.Id)).toEqual([
      'strata-tombstones-p1',
      'expire-abandoned-staged-uploads',
      'expire-leftover-sweep-requests',
    ]);
    // A marker is only ever deleted by S3OrderMarkers.prune: a rule may expire it only by a tag markers never carry.
    for (const r of expiring)
      expect(!!r.TagFilters?.length || (r.Prefix !== undefined && !marker.startsWith(r.Prefix))).toBe(true);
    // Pruning deletes with If-Match: <ETag>, which needs s3:GetObject besides s3:DeleteObject
    // (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-delete-enforce.html); writes need s3:PutObject.
    const policies = Object.values(t.findResources('AWS::IAM::ManagedPolicy')) as {
      Properties: { PolicyDocument: { Statement: { Sid?: string; Action: string[]; Resource: unknown }[] } };
    }[];
    const objects = policies.flatMap((p) => p.Properties.PolicyDocument.Statement).find((st) => st.Sid === 'TierObjects')!;
    expect(objects.Action).toEqual(expect.arrayContaining(['s3:DeleteObject', 's3:GetObject', 's3:PutObject']));
    expect(objects.Resource).toEqual({ 'Fn::Join': ['', [expect.anything(), '/p1/*']] });
    expect(marker.startsWith('p1/')).toBe(true);
  });
  it('fails on a prefix S3Tier would reject', () =>
    expectInvalid(() => make({ prefix: 'a/b' }), /prefix 'a\/b' must be one path segment/));
  it('fails on a sub-second tombstone TTL', () =>
    expectInvalid(() => make({ tombstoneTtl: Duration.millis(10) }), /tombstoneTtl must be at least one second/));
  it('fails on a staging expiration of 0 days', () =>
    expectInvalid(
      () => make({ stagingExpirationDays: 0 }),
      /stagingExpirationDays must be a whole number of days from 1 to 365 \(got 0\)/,
    ));
  it('fails on a multipart abort of 0 days', () =>
    expectInvalid(() => make({ abortIncompleteMultipartUploadDays: 0 }), /abortIncompleteMultipartUploadDays must be 1-365/));
  it('fails on an access-log expiration of 0 days', () =>
    expectInvalid(() => make({ accessLogExpirationDays: 0 }), /accessLogExpirationDays must be 1-3650/));
});

describe('Construct: StrataFunction', () => {
  const make = (over: Partial<StrataFunctionProps> = {}) => {
    const f = fixture();
    return new StrataFunction(f.stack, 'Fn', {
      entry: apiLambdaEntry('service'),
      vpc: f.vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      securityGroup: f.coordinators,
      ...over,
    });
  };

  it('defaults to nodejs24.x on arm64, 1024 MB, 29 s, source maps', () => {
    Template.fromStack(Stack.of(make())).hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      MemorySize: 1024,
      Timeout: 29,
      Environment: { Variables: { NODE_OPTIONS: '--enable-source-maps' } },
    });
  });
  it('binds the hot tier: URL, cluster mode, IAM user and cache, elasticache:Connect and the network path', () => {
    const f = fixture();
    const fn = new StrataFunction(f.stack, 'Fn', {
      entry: apiLambdaEntry('service'),
      vpc: f.vpc,
      vpcSubnets: {},
      securityGroup: f.coordinators,
    });
    const cache = new ValkeyServerlessCache(f.stack, 'Cache', {
      cacheName: 'c',
      vpc: f.vpc,
      vpcSubnets: {},
      maxDataStorageGb: 1,
      maxEcpuPerSecond: 1000,
    });
    fn.bindHotTier(cache);
    const t = Template.fromStack(Stack.of(fn));
    const hot = { STRATA_REDIS_CLUSTER: '1', STRATA_REDIS_USERNAME: 'c-app', STRATA_REDIS_IAM_CACHE: 'c' };
    t.hasResourceProperties('AWS::Lambda::Function', { Environment: { Variables: hot } });
    const connect = Match.arrayWith([Match.objectLike({ Action: 'elasticache:Connect' })]);
    t.hasResourceProperties('AWS::IAM::Policy', { PolicyDocument: { Statement: connect } });
    t.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { FromPort: 6379, ToPort: 6380 });
  });
  it('fails on memory outside 128-10240 MB', () =>
    expectInvalid(() => make({ memoryMb: 64 }), /Test\/Fn: memoryMb must be a whole number from 128 to 10240 \(got 64\)/));
  it('fails on a timeout above the API Gateway limit, saying why', () =>
    expectInvalid(
      () => make({ timeoutSeconds: 30, maxTimeoutSeconds: 29 }),
      /timeoutSeconds must be 1-29 \(API Gateway gives up after 29 s\) \(got 30\)/,
    ));
  it('fails on a reserved environment variable', () =>
    expectInvalid(() => make({ environment: { AWS_REGION: 'x' } }), /environment variable AWS_REGION is reserved by Lambda/));
  it('fails on a reserved environment variable added later', () =>
    expectInvalid(() => make().addEnvironment('AWS_PROFILE', 'x'), /environment variable AWS_PROFILE is reserved/));
});

describe('Construct: StrataRestApi', () => {
  const make = (over: Partial<StrataRestApiProps> = {}) => {
    const f = fixture();
    const fn = new lambda.Function(f.stack, 'Fn', {
      runtime: lambda.Runtime.NODEJS_24_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler=()=>{}'),
    });
    return new StrataRestApi(f.stack, 'Api', {
      apiName: 'strata-test',
      stageName: 'test',
      routes: [{ method: 'GET', resource: '/v1/ns/{ns}/keys/{key}', fn: 'keys' }],
      functions: { keys: fn },
      throttle: { rateLimit: 10, burstLimit: 20 },
      tenants: [{ name: 'team', namespaces: ['demo'], throttle: { rateLimit: 5, burstLimit: 10 } }],
      ...over,
    });
  };
  const route = (r: Partial<{ method: string; resource: string; fn: string }>) => ({
    routes: [{ method: 'GET', resource: '/v1/x', fn: 'keys', ...r }],
  });

  it('builds resources, a method per route, and a key + plan per tenant', () => {
    const t = Template.fromStack(Stack.of(make()));
    t.resourceCountIs('AWS::ApiGateway::Method', 1);
    t.resourceCountIs('AWS::ApiGateway::Resource', 5);
    t.resourceCountIs('AWS::ApiGateway::UsagePlan', 1);
  });
  it('fails on an API name with capitals', () =>
    expectInvalid(() => make({ apiName: 'Strata' }), /apiName 'Strata' must be 1-64 characters/));
  it('fails on a stage name with a slash', () =>
    expectInvalid(() => make({ stageName: 'a/b' }), /stageName 'a\/b' must be 1-128 characters/));
  it('fails without routes', () => expectInvalid(() => make({ routes: [] }), /routes is empty/));
  it('fails on an unknown method', () =>
    expectInvalid(
      () => make(route({ method: 'FETCH' })),
      /route FETCH \/v1\/x: method must be one of GET, HEAD, PUT, DELETE, POST, PATCH, OPTIONS/,
    ));
  it('fails on a malformed resource path', () =>
    expectInvalid(() => make(route({ resource: '/v1/{ns}/' })), /resource must be "\/segment\/\{param\}\/\.\.\."/));
  it('fails on a route defined twice', () =>
    expectInvalid(
      () =>
        make({
          routes: [
            { method: 'GET', resource: '/v1/x', fn: 'keys' },
            { method: 'GET', resource: '/v1/x', fn: 'keys' },
          ],
        }),
      /route GET \/v1\/x is defined twice/,
    ));
  it('fails on a route whose function is missing', () =>
    expectInvalid(
      () => make(route({ fn: 'batch' })),
      /route GET \/v1\/x names function 'batch', which is not in functions \(keys\)/,
    ));
  it('fails on a function that serves no route', () => {
    const f = fixture();
    const fn = new lambda.Function(f.stack, 'Other', {
      runtime: lambda.Runtime.NODEJS_24_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler=()=>{}'),
    });
    expectInvalid(
      () =>
        new StrataRestApi(f.stack, 'Api', {
          apiName: 'a',
          stageName: 's',
          routes: [{ method: 'GET', resource: '/x', fn: 'keys' }],
          functions: { keys: fn, batch: fn },
          throttle: { rateLimit: 1, burstLimit: 1 },
          tenants: [{ name: 't', namespaces: ['n'], throttle: { rateLimit: 1, burstLimit: 1 } }],
        }),
      /function 'batch' serves no route/,
    );
  });
  it('fails on a non-positive stage rate', () =>
    expectInvalid(
      () => make({ throttle: { rateLimit: 0, burstLimit: 1 } }),
      /throttle: rateLimit must be a positive number of requests per second \(got 0\)/,
    ));
  it('fails on a fractional burst', () =>
    expectInvalid(
      () => make({ throttle: { rateLimit: 1, burstLimit: 0.5 } }),
      /throttle: burstLimit must be a whole number of at least 1/,
    ));
  it('fails without tenants', () =>
    expectInvalid(() => make({ tenants: [] }), /tenants is empty: every method requires an API key/));
  it('fails on a tenant name with capitals', () =>
    expectInvalid(
      () => make({ tenants: [{ name: 'Team', namespaces: ['n'], throttle: { rateLimit: 1, burstLimit: 1 } }] }),
      /tenant name 'Team' must be 1-40 characters/,
    ));
  it('fails on a tenant defined twice', () => {
    const t = { name: 'team', namespaces: ['n'], throttle: { rateLimit: 1, burstLimit: 1 } };
    expectInvalid(() => make({ tenants: [t, t] }), /tenant 'team' is defined twice/);
  });
  it('fails on a tenant without namespaces', () =>
    expectInvalid(
      () => make({ tenants: [{ name: 'team', namespaces: [], throttle: { rateLimit: 1, burstLimit: 1 } }] }),
      /tenant 'team' has no namespaces/,
    ));
  it('fails on a tenant throttle of 0', () =>
    expectInvalid(
      () => make({ tenants: [{ name: 'team', namespaces: ['n'], throttle: { rateLimit: 0, burstLimit: 1 } }] }),
      /tenant 'team' throttle: rateLimit must be a positive number/,
    ));
  it('fails on a zero quota', () =>
    expectInvalid(
      () =>
        make({
          tenants: [
            { name: 'team', namespaces: ['n'], throttle: { rateLimit: 1, burstLimit: 1 }, quota: { limit: 0, period: 'DAY' } },
          ],
        }),
      /tenant 'team' quota limit must be a positive whole number/,
    ));
});

describe('Construct: CacheNodeFleet', () => {
  const make = (over: Partial<CacheNodeFleetProps> = {}) => {
    const f = fixture();
    const ringStore = { bucket: new ColdTierBucket(f.stack, 'Cold').bucket, prefix: ColdTierBucket.RING_PREFIX };
    return new CacheNodeFleet(f.stack, 'Fleet', {
      name: 'strata-test',
      vpc: f.vpc,
      vpcSubnets: {},
      instanceType: 't4g.small',
      dataVolume: { sizeGiB: 20 },
      coordinatorSecurityGroup: f.coordinators,
      bundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE),
      ringStore,
      ...over,
    });
  };

  it('accepts Graviton types of every family shape', () => {
    for (const instanceType of ['t4g.small', 'r7gd.large', 'im4gn.xlarge', 'is4gen.medium', 'c7gn.2xlarge', 'm8g.large'])
      expect(() => make({ instanceType })).not.toThrow();
  });
  it('fails on an x86 instance type, saying why', () =>
    expectInvalid(
      () => make({ instanceType: 'm7i.large' }),
      /instanceType 'm7i.large' is not a Graviton \(arm64\) type .*the nodes run the arm64 AMI/,
    ));
  it('fails on a name the launch template would reject', () =>
    expectInvalid(() => make({ name: 'Strata' }), /name 'Strata' must be 1-40 characters/));
  it('fails on a volume above 16 TiB', () =>
    expectInvalid(
      () => make({ dataVolume: { sizeGiB: 20000 } }),
      /dataVolume.sizeGiB must be a whole number from 1 to 16384 \(got 20000\)/,
    ));
  it('fails on IOPS below the gp3 baseline', () =>
    expectInvalid(
      () => make({ dataVolume: { sizeGiB: 20, iops: 1000 } }),
      /dataVolume.iops must be 3000-80000 for gp3 \(got 1000\)/,
    ));
  it('fails on more than 500 IOPS per GiB', () =>
    expectInvalid(
      () => make({ dataVolume: { sizeGiB: 10, iops: 6000 } }),
      /dataVolume.iops 6000 exceeds gp3's 500 IOPS per GiB for 10 GiB/,
    ));
  it('fails on throughput outside 125-2000 MiB/s', () =>
    expectInvalid(
      () => make({ dataVolume: { sizeGiB: 20, throughputMiBps: 100 } }),
      /dataVolume.throughputMiBps must be 125-2000 for gp3 \(got 100\)/,
    ));
  it('fails on throughput above 0.25 MiB/s per IOPS', () =>
    expectInvalid(
      () => make({ dataVolume: { sizeGiB: 100, iops: 3000, throughputMiBps: 1000 } }),
      /exceeds gp3's 0.25 MiB\/s per provisioned IOPS \(3000 IOPS allow 750\)/,
    ));
  it('fails on a privileged port', () => expectInvalid(() => make({ port: 80 }), /port must be 1024-65535 \(got 80\)/));
  it('fails on a capacity ratio leaving no headroom', () =>
    expectInvalid(() => make({ capacityRatio: 1 }), /capacityRatio must be in \(0, 0.95\]/));
  it('fails on a Node package AL2023 does not namespace', () =>
    expectInvalid(
      () => make({ nodePackage: 'nodejs' }),
      /nodePackage 'nodejs' must be an AL2023 namespaced Node.js package, nodejs22 or later/,
    ));
});

describe('Class: CacheNodeBundle', () => {
  const fakeTree = (withArm64: boolean) => {
    const dir = join(mkdtempSync(join(tmpdir(), 'strata-native-')), 'node_modules');
    mkdirSync(join(dir, 'lmdb'), { recursive: true });
    writeFileSync(
      join(dir, 'lmdb', 'package.json'),
      JSON.stringify({
        name: 'lmdb',
        version: '0.0.0',
        optionalDependencies: { '@lmdb/lmdb-linux-arm64': '0.0.0', '@lmdb/lmdb-linux-x64': '0.0.0' },
      }),
    );
    if (withArm64) {
      mkdirSync(join(dir, '@lmdb', 'lmdb-linux-arm64'), { recursive: true });
      writeFileSync(join(dir, '@lmdb', 'lmdb-linux-arm64', 'package.json'), '{"name":"@lmdb/lmdb-linux-arm64"}');
    }
    return dir;
  };
  const bind = (bundle: CacheNodeBundle, opts: { bundling?: boolean } = {}) => bundle.bind(fixture(opts).stack);

  it('fails when the entry does not exist, naming the alternatives', () =>
    expectInvalid(
      () => bind(CacheNodeBundle.fromEntry('/nope/main.ts')),
      /cache node entry .*nope\/main.ts does not exist: .*CacheNodeBundle.fromDirectory\(\)/,
    ));
  it('fails when a native module is not installed, giving the install command', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'strata-native-')), 'node_modules');
    expectInvalid(
      () => bind(CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE, { nativeModules: ['lmdb'], nativeModulesDir: dir })),
      /native module 'lmdb' of the cache node is not in .*npm install --prefix .* --os=linux --cpu=arm64 --libc=glibc lmdb@\d+\.\d+\.\d+/s,
    );
  });
  it('fails when the native module was installed for another platform', () => {
    expectInvalid(
      () =>
        bind(CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE, { nativeModules: ['lmdb'], nativeModulesDir: fakeTree(false) })),
      /lacks @lmdb\/lmdb-linux-arm64, the linux-arm64 build of 'lmdb'/,
    );
  });
  it('bundles main.mjs with its source map and copies the native modules beside it', () => {
    const asset = bind(
      CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE, { nativeModules: ['lmdb'], nativeModulesDir: fakeTree(true) }),
      { bundling: true },
    );
    const dir = join((Stack.of(asset).node.root as App).outdir, asset.assetPath);
    expect(readdirSync(dir).sort()).toEqual(['main.mjs', 'main.mjs.map', 'node_modules', 'package.json']);
    expect(existsSync(join(dir, 'node_modules', '@lmdb', 'lmdb-linux-arm64', 'package.json'))).toBe(true);
  });
  it('fails on a prebuilt directory without main.mjs', () =>
    expectInvalid(() => bind(CacheNodeBundle.fromDirectory(mkdtempSync(join(tmpdir(), 'strata-empty-')))), /has no main.mjs/));
  it("pins the install command to the repository's version", () => {
    expect(nativeModulesInstallCommand(['lmdb'])).toMatch(
      /^npm install --prefix \.tools\/cachenode-native\/linux-arm64 --no-save --no-package-lock --os=linux --cpu=arm64 --libc=glibc lmdb@\d/,
    );
  });
});
