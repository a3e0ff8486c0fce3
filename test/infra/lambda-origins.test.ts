import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { buildStrataApp } from '../../cdk/app.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { environmentConfigSchema } from '../../cdk/config/schema.js';
import { dev } from '../../cdk/config/dev.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { cdkJsonContext, PLACEHOLDER_ALARM_EMAIL, PLACEHOLDER_CACHENODE } from './helpers/synth.js';

/**
 * Lambda origins (api.lambdaOrigins, docs/POLICIES.md): the functions that serve reads may invoke exactly the declared
 * functions, every function that compiles policies knows them, and the VPC reaches Lambda through its endpoint.
 *
 * IAM: Invoke is authorized by lambda:InvokeFunction on the function ARN as invoked; an unqualified ARN's grant does
 * not cover its versions or aliases, whose ARNs (or `name:*`) must be granted:
 * https://docs.aws.amazon.com/lambda/latest/dg/lambda-api-permissions-ref.html
 */
const ORIGIN = 'arn:aws:lambda:us-east-1:111122223333:function:catalog';
const ALIASED = 'arn:aws:lambda:us-east-1:111122223333:function:prices:live';

function synthWithOrigins() {
  const outdir = mkdtempSync(join(tmpdir(), 'strata-cdk-origins-'));
  const app = new App({ outdir, context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
  const loaded = loadEnvironmentConfig('dev', { context: { alarmEmails: PLACEHOLDER_ALARM_EMAIL } });
  const config = { ...loaded, api: { ...loaded.api, lambdaOrigins: [ORIGIN, ALIASED] } };
  const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: true });
  app.synth(); // cdk-nag's findings are synth errors
  return { stacks, outdir };
}

type Resource = {
  Type: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- CloudFormation properties, read by shape in each test
  Properties: Record<string, any>;
};

describe('declared Lambda origins in the stacks', () => {
  const s = synthWithOrigins();
  afterAll(() => rmSync(s.outdir, { recursive: true, force: true }));
  const api = Template.fromStack(s.stacks.api).toJSON().Resources as Record<string, Resource>;

  /** Per API function (by its description's group name): its environment and its roles' statements. */
  const functions = Object.values(api)
    .filter((r) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').startsWith('Strata dev API'))
    .map((r) => {
      const group = /API '(\w+)'/.exec(r.Properties.Description)![1]!;
      const role = r.Properties.Role['Fn::GetAtt'][0];
      const statements = Object.values(api)
        .filter((p) => p.Type === 'AWS::IAM::Policy' && p.Properties.Roles.some((x: { Ref: string }) => x.Ref === role))
        .flatMap((p) => p.Properties.PolicyDocument.Statement as { Sid?: string; Action: unknown; Resource: unknown }[]);
      return { group, env: r.Properties.Environment.Variables as Record<string, unknown>, statements };
    });

  it('grants lambda:InvokeFunction on exactly the declared ARNs (no wildcard) to the functions that serve reads', () => {
    const readers = functions.filter((f) => ['keys', 'batch', 'transfer'].includes(f.group));
    expect(readers).toHaveLength(3);
    for (const f of readers)
      expect(f.statements.filter((st) => JSON.stringify(st.Action).includes('lambda:'))).toEqual([
        { Sid: 'LambdaOrigins', Effect: 'Allow', Action: 'lambda:InvokeFunction', Resource: [ORIGIN, ALIASED] },
      ]);
  });

  it('gives the other functions no Lambda permission', () => {
    const others = functions.filter((f) => !['keys', 'batch', 'transfer'].includes(f.group));
    expect(others.map((f) => f.group).sort()).toEqual(['admin', 'service']);
    for (const f of others) expect(JSON.stringify(f.statements)).not.toContain('lambda:InvokeFunction');
  });

  it('tells every API function the declared origins, so each refuses policies naming others', () => {
    for (const f of functions) expect(f.env.STRATA_LAMBDA_ORIGINS).toBe(`${ORIGIN},${ALIASED}`);
  });

  it('adds a Lambda interface endpoint to the VPC, whose functions have no internet access', () => {
    const endpoints = Template.fromStack(s.stacks.network).findResources('AWS::EC2::VPCEndpoint');
    const names = Object.values(endpoints).map((e) => JSON.stringify((e as Resource).Properties.ServiceName));
    expect(names.some((n) => n.includes('.lambda'))).toBe(true);
  });
});

describe('api.lambdaOrigins validation', () => {
  const parse = (api: Record<string, unknown>) => environmentConfigSchema.safeParse({ ...dev, api: { ...dev.api, ...api } });
  const messages = (r: ReturnType<typeof parse>) => r.error?.issues.map((i) => i.message).join('\n') ?? '';

  it('refuses a function in another region than the deployment', () => {
    const r = parse({ lambdaOrigins: ['arn:aws:lambda:eu-west-1:111122223333:function:f'] });
    expect(messages(r)).toMatch(/is not in us-east-1: the API functions reach Lambda through the VPC's endpoint/);
  });

  it('refuses something other than a function ARN', () => {
    expect(messages(parse({ lambdaOrigins: ['catalog'] }))).toMatch(/Lambda origins are function ARNs/);
  });

  it('refuses namespace settings naming an undeclared origin, listing the declared ones', () => {
    const namespaces = { namespaces: { shop: { origin: { lambda: ALIASED } } } };
    expect(messages(parse({ lambdaOrigins: [ORIGIN], namespaces }))).toContain(
      `${ALIASED} is not declared in api.lambdaOrigins (declared: ${ORIGIN})`,
    );
    expect(parse({ lambdaOrigins: [ALIASED], namespaces }).success).toBe(true);
  });

  it('defaults to none, so a dev deployment grants no Lambda permission', () => {
    expect(environmentConfigSchema.parse(dev).api.lambdaOrigins).toEqual([]);
  });
});
