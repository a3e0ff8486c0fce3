/**
 * The hot tier authenticates with IAM, in every environment (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html):
 * - the application user's authentication mode is `iam` and its user id equals its user name;
 * - each function that reaches the cache may `elasticache:Connect` on exactly that cache and that user, whose ARN
 *   formats the Service Authorization Reference gives (resource types serverlesscache and user:
 *   https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticache.html);
 * - the runtime learns the cache and the user (STRATA_REDIS_IAM_CACHE, STRATA_REDIS_USERNAME), and no password
 *   exists: no Secrets Manager secret for it, no password setting, no grant to read one.
 */
import { App, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type { EnvironmentName } from '../../cdk/config/schema.js';
import { ValkeyServerlessCache } from '../../cdk/constructs/valkey-serverless-cache.js';
import { STACK_KEYS, synthesized } from './helpers/synth.js';

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Properties: Json;
}

/** An ARN built with Fn::Join, as text: pseudo parameters as ${AWS::Name}. */
function arnText(v: unknown): string {
  if (typeof v === 'string') return v;
  const o = v as { 'Fn::Join'?: [string, unknown[]]; Ref?: string };
  if (o.Ref) return `\${${o.Ref}}`;
  if (o['Fn::Join']) return o['Fn::Join'][1].map(arnText).join(o['Fn::Join'][0]);
  return JSON.stringify(v);
}

/** Every statement of every policy document attached to `roleId` in `resources`. */
function statementsOf(resources: Record<string, Resource>, roleId: string): Json[] {
  const out: Json[] = [];
  for (const r of Object.values(resources)) {
    if (r.Type !== 'AWS::IAM::Policy') continue;
    if (!(r.Properties.Roles as { Ref: string }[]).some((x) => x.Ref === roleId)) continue;
    out.push(...(r.Properties.PolicyDocument as { Statement: Json[] }).Statement);
  }
  const role = resources[roleId]!;
  const inline = (role.Properties.Policies as { PolicyDocument: { Statement: Json[] } }[] | undefined) ?? [];
  for (const p of inline) out.push(...p.PolicyDocument.Statement);
  return out;
}

const asArray = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

describe.each(['dev', 'staging', 'prod'] as EnvironmentName[])('Hot tier IAM authentication (%s)', (env) => {
  const s = synthesized(env, { nag: false });
  const data = s.templates.data.toJSON().Resources as Record<string, Resource>;
  const cache = Object.values(data).find((r) => r.Type === 'AWS::ElastiCache::ServerlessCache')!;
  const cacheName = cache.Properties.ServerlessCacheName as string;
  const users = Object.values(data).filter((r) => r.Type === 'AWS::ElastiCache::User');
  const app = users.find((u) => u.Properties.UserName !== 'default')!;

  it('authenticates the application user by IAM, its user id equal to its user name, the default user off', () => {
    expect(app.Properties.AuthenticationMode).toEqual({ Type: 'iam' });
    expect(app.Properties.UserId).toBe(app.Properties.UserName);
    expect(app.Properties.UserId).toBe(`${cacheName}-app`);
    const defaultUser = users.find((u) => u.Properties.UserName === 'default')!;
    expect(defaultUser.Properties).toMatchObject({
      AccessString: 'off -@all',
      AuthenticationMode: { Type: 'no-password-required' },
    });
    const group = Object.values(data).find((r) => r.Type === 'AWS::ElastiCache::UserGroup')!;
    expect(group.Properties.UserIds).toEqual([`${cacheName}-default`, `${cacheName}-app`]);
  });

  it('grants every function that reaches the cache elasticache:Connect on exactly the cache and the user', () => {
    let functions = 0;
    for (const key of STACK_KEYS) {
      const resources = s.templates[key].toJSON().Resources as Record<string, Resource>;
      for (const fn of Object.values(resources).filter((r) => r.Type === 'AWS::Lambda::Function')) {
        const vars = ((fn.Properties.Environment as { Variables?: Json } | undefined)?.Variables ?? {}) as Record<
          string,
          unknown
        >;
        const roleId = ((fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'] ?? [])[0];
        // The policy evaluator's HotTierLimits statement (DescribeServerlessCaches, ModifyServerlessCache: the hot
        // tier's usage limits, test/infra/policy-ticker.test.ts) changes the cache's limits; it never connects.
        const elastiCache = (st: Json) =>
          st.Sid !== 'HotTierLimits' && asArray(st.Action as string | string[]).some((a) => a.startsWith('elasticache:'));
        const connect = roleId ? statementsOf(resources, roleId).filter(elastiCache) : [];
        if (!vars.STRATA_REDIS_URL) {
          expect(connect).toEqual([]);
          continue;
        }
        functions++;
        expect(vars).toMatchObject({ STRATA_REDIS_IAM_CACHE: cacheName, STRATA_REDIS_USERNAME: app.Properties.UserName });
        expect(Object.keys(vars).filter((k) => k.startsWith('STRATA_REDIS_PASSWORD'))).toEqual([]);
        expect(connect).toHaveLength(1);
        expect(connect[0]!.Action).toBe('elasticache:Connect');
        expect(connect[0]!.Effect).toBe('Allow');
        expect(connect[0]!.Condition).toBeUndefined();
        // arn:${Partition}:elasticache:${Region}:${Account}:serverlesscache:${ServerlessCacheName} and ...:user:${UserId}
        expect(asArray(connect[0]!.Resource).map(arnText).sort()).toEqual([
          `arn:aws:elasticache:us-east-1:\${AWS::AccountId}:serverlesscache:${cacheName}`,
          `arn:aws:elasticache:us-east-1:\${AWS::AccountId}:user:${app.Properties.UserId}`,
        ]);
      }
    }
    // The API functions and the workflow steps.
    expect(functions).toBeGreaterThanOrEqual(2);
  });

  it('has no password anywhere: no secret for it, and no function may read one for the hot tier', () => {
    expect(
      Object.entries(data).filter(([id, r]) => r.Type === 'AWS::SecretsManager::Secret' && id.startsWith('HotTier')),
    ).toEqual([]);
    for (const key of STACK_KEYS) {
      const text = JSON.stringify(s.templates[key].toJSON());
      expect(text).not.toMatch(/AppUserPassword|STRATA_REDIS_PASSWORD|resolve:secretsmanager/);
    }
  });
});

describe('ValkeyServerlessCache', () => {
  const fixture = () => {
    const app = new App();
    const stack = new Stack(app, 'Data', { env: { account: '111111111111', region: 'eu-west-1' } });
    const subnetType = ec2.SubnetType.PRIVATE_ISOLATED;
    const vpc = new ec2.Vpc(stack, 'Vpc', { maxAzs: 2, natGateways: 0, subnetConfiguration: [{ name: 'p', subnetType }] });
    return {
      app,
      stack,
      vpc,
      props: { cacheName: 'c', vpc, vpcSubnets: { subnetType }, maxDataStorageGb: 1, maxEcpuPerSecond: 1000 },
    };
  };

  it("grants Connect from another stack without referring to any resource of the cache's stack", () => {
    const f = fixture();
    const cache = new ValkeyServerlessCache(f.stack, 'Cache', f.props);
    const other = new Stack(f.app, 'Api', { env: { account: '111111111111', region: 'eu-west-1' } });
    const role = new iam.Role(other, 'Role', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    cache.grantConnect(role);
    const policy = Object.values(Template.fromStack(other).findResources('AWS::IAM::Policy'))[0] as Resource;
    const [statement, ...rest] = (policy.Properties.PolicyDocument as { Statement: Json[] }).Statement;
    expect(rest).toEqual([]);
    expect(statement).toMatchObject({ Action: 'elasticache:Connect', Effect: 'Allow' });
    expect(asArray(statement!.Resource).map(arnText)).toEqual([
      'arn:${AWS::Partition}:elasticache:eu-west-1:111111111111:serverlesscache:c',
      'arn:${AWS::Partition}:elasticache:eu-west-1:111111111111:user:c-app',
    ]);
    expect(JSON.stringify(Template.fromStack(other).toJSON())).not.toMatch(/Fn::GetStackOutput|Fn::ImportValue/);
  });

  it('refuses a final snapshot encrypted with a key the stack deletes (the snapshot could not be restored)', () => {
    const f = fixture();
    const key = new kms.Key(f.stack, 'Key', { removalPolicy: RemovalPolicy.DESTROY });
    expect(() => new ValkeyServerlessCache(f.stack, 'Cache', { ...f.props, encryptionKey: key })).toThrow(
      /the final snapshot is encrypted with encryptionKey, which is deleted with the stack \(DeletionPolicy Delete\)/,
    );
    const dropped = { ...f.props, cacheName: 'd', encryptionKey: key, onDelete: 'destroy' } as const;
    expect(() => new ValkeyServerlessCache(f.stack, 'Dropped', dropped)).not.toThrow();
    const retainedKey = new kms.Key(f.stack, 'RetainedKey', { removalPolicy: RemovalPolicy.RETAIN });
    expect(
      () => new ValkeyServerlessCache(f.stack, 'Kept', { ...f.props, cacheName: 'k', encryptionKey: retainedKey }),
    ).not.toThrow();
  });
});
