import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { buildStrataApp } from '../../cdk/app.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { CacheNodeBundle, type CacheNodeFleet } from '../../cdk/constructs/cache-node-fleet.js';
import { ColdTierBucket } from '../../cdk/constructs/cold-tier-bucket.js';
import { policyEncryptionKeys } from '../../cdk/constructs/policy-encryption-keys.js';
import { StrataFunction } from '../../cdk/constructs/strata-function.js';
import type { ValkeyServerlessCache } from '../../cdk/constructs/valkey-serverless-cache.js';
import { apiLambdaEntry, REPO_ROOT } from '../../cdk/lib/packaging.js';
import { KMS_ENCRYPTION_CONTEXT } from '../../core/transforms/kms-keyring.js';
import { cdkJsonContext, PLACEHOLDER_ALARM_EMAIL, PLACEHOLDER_CACHENODE, synthesized } from './helpers/synth.js';

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

/**
 * Policies' encryption keys (ApiStackProps.policyEncryptionKeys): the API functions that read and write values may
 * use exactly the given KMS keys, for Strata's data keys only; every API function knows the names a policy may use.
 *
 * IAM: GenerateDataKey and Decrypt are authorized by the actions kms:GenerateDataKey and kms:Decrypt on the KMS key
 * resource (arn:aws:kms:<region>:<account>:key/<id>), never on an alias:
 * https://docs.aws.amazon.com/service-authorization/latest/reference/list_awskeymanagementservice.html
 * https://docs.aws.amazon.com/kms/latest/developerguide/kms-api-permissions-reference.html
 * The condition key kms:EncryptionContext:context-key (String, single-valued: StringEquals, no set operator) applies
 * to both Decrypt and GenerateDataKey (its table of API operations):
 * https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-encryption-context
 */
describe('StrataFunction.bindKeyring', () => {
  const KEY_A = 'arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
  const KEY_B = 'arn:aws:kms:us-east-1:111122223333:key/0987dcba-09fe-87dc-65ba-ab0987654321';
  const kmsStatement = {
    Sid: 'PolicyEncryptionKeys',
    Action: ['kms:GenerateDataKey', 'kms:Decrypt'],
    Effect: 'Allow',
    Resource: [KEY_A, KEY_B],
    Condition: { StringEquals: { 'kms:EncryptionContext:strata:purpose': KMS_ENCRYPTION_CONTEXT['strata:purpose'] } },
  };

  it('gives a function that uses the keys STRATA_KEYRING, the names, and GenerateDataKey / Decrypt on exactly those keys', () => {
    const { stack } = fixture();
    const fn = new StrataFunction(stack, 'Fn', { entry: apiLambdaEntry('keys') });
    fn.bindKeyring({ keyArns: [KEY_A, KEY_B], names: [KEY_A, 'alias/orders', KEY_B] }, { use: true });
    const t = Template.fromStack(stack);
    const id = stack.getLogicalId(fn.function.node.defaultChild as lambda.CfnFunction);
    expect(t.toJSON().Resources[id].Properties.Environment.Variables).toMatchObject({
      STRATA_KEYRING: 'kms',
      STRATA_KEYRING_KEYS: `${KEY_A},alias/orders,${KEY_B}`,
    });
    expect(statementsOf(stack)).toEqual([
      expect.objectContaining({ Action: ['logs:CreateLogStream', 'logs:PutLogEvents'] }),
      kmsStatement,
    ]);
    // The context the grant requires is the one the keyring sends (core/transforms/kms-keyring.ts).
    expect(Object.keys(KMS_ENCRYPTION_CONTEXT)).toEqual(['strata:purpose']);
  });

  it('gives a function that only checks policies (the admin function) the names and no KMS permission', () => {
    const { stack } = fixture();
    const fn = new StrataFunction(stack, 'Fn', { entry: apiLambdaEntry('admin') });
    fn.bindKeyring({ keyArns: [KEY_A], names: [KEY_A] }, { use: false });
    const id = stack.getLogicalId(fn.function.node.defaultChild as lambda.CfnFunction);
    expect(Template.fromStack(stack).toJSON().Resources[id].Properties.Environment.Variables).toMatchObject({
      STRATA_KEYRING: 'kms',
      STRATA_KEYRING_KEYS: KEY_A,
    });
    expect(JSON.stringify(statementsOf(stack))).not.toContain('kms:');
  });
});

describe('policyEncryptionKeys validation', () => {
  const stackIn = (region: string) => new Stack(new App(), 'Api', { env: { region, account: '111122223333' } });
  const arn = (region: string, id = '1234abcd-12ab-34cd-56ef-1234567890ab') => `arn:aws:kms:${region}:111122223333:key/${id}`;

  it('is none when absent or empty, and takes keys and aliases with their key (one grant per key, every name)', () => {
    const stack = stackIn('us-east-1');
    expect(policyEncryptionKeys(stack, undefined)).toBeUndefined();
    expect(policyEncryptionKeys(stack, [])).toBeUndefined();
    const key = kms.Key.fromKeyArn(stack, 'Key', arn('us-east-1'));
    const alias = kms.Alias.fromAliasAttributes(stack, 'Alias', { aliasName: 'alias/orders', aliasTargetKey: key });
    const keys = policyEncryptionKeys(stack, [alias, key])!;
    expect(keys.keyArns).toEqual([arn('us-east-1')]);
    expect(stack.resolve(keys.names)).toEqual([
      'alias/orders',
      { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':kms:us-east-1:111122223333:alias/orders']] },
      arn('us-east-1'),
    ]);
  });

  it.each([
    [
      'an alias whose key is unknown',
      (s: Stack) => [kms.Alias.fromAliasName(s, 'A', 'alias/orders')],
      /policyEncryptionKeys\[0\] is an alias whose key is unknown .*kms\.Alias\.fromAliasAttributes/,
    ],
    [
      'an alias ARN given as a key',
      (s: Stack) => [kms.Key.fromKeyArn(s, 'K', 'arn:aws:kms:us-east-1:111122223333:alias/orders')],
      /policyEncryptionKeys\[0\]: 'arn:aws:kms:us-east-1:111122223333:alias\/orders' is not a KMS key ARN/,
    ],
    [
      'a key in another region',
      (s: Stack) => [kms.Key.fromKeyArn(s, 'K', arn('eu-west-1'))],
      /policyEncryptionKeys\[0\]: the key is in eu-west-1, but the API functions call KMS in us-east-1: KMS keys are regional/,
    ],
    [
      'a key listed twice',
      (s: Stack) => [kms.Key.fromKeyArn(s, 'K1', arn('us-east-1')), kms.Key.fromKeyArn(s, 'K2', arn('us-east-1'))],
      /policyEncryptionKeys\[1\]: the key .* is listed twice/,
    ],
    [
      'more keys than fit the environment',
      (s: Stack) =>
        Array.from({ length: 9 }, (_, i) =>
          kms.Key.fromKeyArn(s, `K${i}`, arn('us-east-1', `1234abcd-12ab-34cd-56ef-12345678900${i}`)),
        ),
      /policyEncryptionKeys lists 9 keys, at most 8/,
    ],
  ])('refuses %s', (_what, keys, message) => {
    const stack = stackIn('us-east-1');
    expect(() => policyEncryptionKeys(stack, keys(stack))).toThrow(message);
  });
});

describe('ApiStack policyEncryptionKeys', () => {
  const CFN_LINT = join(REPO_ROOT, '.localstack', 'venv', 'bin', 'cfn-lint');
  const IMPORTED = 'arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';

  /** The dev environment as the CLI synthesizes it (cdk.json flags, cdk-nag on), with a key stack next to it. */
  function synthWithKeys() {
    const outdir = mkdtempSync(join(tmpdir(), 'strata-cdk-keys-'));
    const app = new App({ outdir, context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
    const config = loadEnvironmentConfig('dev', { context: { alarmEmails: PLACEHOLDER_ALARM_EMAIL } });
    const keyStack = new Stack(app, 'CustomerKeys', { env: { account: config.account, region: config.region } });
    // The customer's own key (rotated yearly by KMS) behind an alias, and a key of theirs imported by ARN.
    const own = new kms.Key(keyStack, 'Orders', { enableKeyRotation: true });
    const alias = new kms.Alias(keyStack, 'OrdersAlias', { aliasName: 'alias/strata-orders', targetKey: own });
    const imported = kms.Key.fromKeyArn(keyStack, 'Imported', IMPORTED);
    const stacks = buildStrataApp(app, {
      config,
      cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE),
      nag: true,
      policyEncryptionKeys: [alias, imported],
    });
    app.synth(); // cdk-nag's findings are synth errors
    return { app, stacks, outdir, own };
  }

  const s = synthWithKeys();
  afterAll(() => rmSync(s.outdir, { recursive: true, force: true }));
  const plain = synthesized('dev');

  type Fn = { Properties: { Environment: { Variables: Record<string, unknown> }; Role: { 'Fn::GetAtt': [string, string] } } };
  type Policy = { Properties: { Roles: { Ref: string }[]; PolicyDocument: { Statement: { Sid?: string; Action: unknown }[] } } };
  /** Each API function's environment, and the statements of its role's inline policies. */
  function apiFunctions(t: Template) {
    const res = t.toJSON().Resources as Record<string, Fn & Policy & { Type: string; Properties: { Description?: string } }>;
    const policies = Object.values(res).filter((r) => r.Type === 'AWS::IAM::Policy');
    return Object.fromEntries(
      Object.entries(res)
        .filter(([, r]) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').startsWith('Strata'))
        .map(([id, r]) => {
          const role = r.Properties.Role['Fn::GetAtt'][0];
          const statements = policies
            .filter((p) => p.Properties.Roles.some((x) => x.Ref === role))
            .flatMap((p) => p.Properties.PolicyDocument.Statement);
          return [id.replace(/Function.*/, '').toLowerCase(), { env: r.Properties.Environment.Variables, statements }];
        }),
    );
  }

  it('grants the functions that serve values GenerateDataKey and Decrypt on the keys, and gives every API function the names', () => {
    const fns = apiFunctions(Template.fromStack(s.stacks.api));
    expect(Object.keys(fns).sort()).toEqual(['admin', 'batch', 'keys', 'service', 'transfer']);
    for (const [name, f] of Object.entries(fns)) {
      expect(f.env.STRATA_KEYRING).toBe('kms');
      // Alias name and ARN and the customer key's ARN (outputs of its stack), then the imported key's ARN.
      const keys = JSON.stringify(f.env.STRATA_KEYRING_KEYS);
      expect(keys.match(/OutputRefOrdersAlias/g)).toHaveLength(2);
      expect(keys).toMatch(
        /,arn:aws:kms:us-east-1:.*OutputFnGetAttOrders[0-9A-F]+Arn.*,arn:aws:kms:us-east-1:111122223333:key\//,
      );
      expect(keys).toContain(IMPORTED);
      const kmsStatements = f.statements.filter((st) => JSON.stringify(st.Action).includes('kms:'));
      if (name === 'admin') {
        expect(kmsStatements).toEqual([]);
        continue;
      }
      // The stacks minimize policies (@aws-cdk/aws-iam:minimizePolicies): actions and resources come sorted.
      const ownKeyArn = { 'Fn::GetStackOutput': expect.objectContaining({ StackName: 'CustomerKeys' }) };
      expect(kmsStatements).toEqual([
        {
          Sid: 'PolicyEncryptionKeys',
          Action: ['kms:Decrypt', 'kms:GenerateDataKey'],
          Effect: 'Allow',
          Resource: [IMPORTED, ownKeyArn],
          Condition: { StringEquals: { 'kms:EncryptionContext:strata:purpose': 'value-data-key' } },
        },
      ]);
      // The key itself, never the alias: IAM authorizes KMS use on keys.
      expect(JSON.stringify(kmsStatements)).toMatch(/OutputFnGetAttOrders[0-9A-F]+Arn/);
      expect(JSON.stringify(kmsStatements)).not.toContain('OrdersAlias');
    }
  });

  it('adds no KMS permission and no keyring without the prop (no idle cost: the keys are the customer’s)', () => {
    const api = JSON.stringify(plain.templates.api.toJSON());
    expect(api).not.toContain('kms:');
    expect(api).not.toContain('STRATA_KEYRING');
    expect(api).not.toContain('AWS::KMS::');
  });

  it('passes cdk-nag with no new acknowledgment, and cfn-lint finds no error in the API template', () => {
    const report = new AwsSolutionsChecks().validateScope(s.stacks.api);
    expect(report.violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`))).toEqual([]);
    if (!existsSync(CFN_LINT)) throw new Error(`cfn-lint is missing (${CFN_LINT}); run \`bash scripts/setup.sh\``);
    const template = join(s.outdir, `${s.stacks.api.artifactId}.template.json`);
    const run = spawnSync(CFN_LINT, ['--format', 'json', '--regions', 'us-east-1', '--', template], { encoding: 'utf8' });
    if (run.error) throw run.error;
    const findings = JSON.parse(run.stdout || '[]') as { Level: string; Rule: { Id: string }; Message: string }[];
    expect(findings.filter((f) => f.Level === 'Error').map((f) => `${f.Rule.Id}: ${f.Message}`)).toEqual([]);
  }, 120_000);
});
