/**
 * What the cache-node fleet may do in the ring store, and how the coordinators get the fleet secret, as
 * synthesized (issue 20 item 5: no Secrets Manager, so no interface endpoint for it). LocalStack checks no IAM,
 * so these rules are tested here, each against the AWS documentation it relies on:
 *
 *  - A policy variable may stand in the resource part of an ARN (after the fifth colon) and is replaced by the
 *    request's value; it needs policy language version 2012-10-17:
 *    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#policy-vars-resourceelement
 *  - For a role assigned to an EC2 instance (instance profile), aws:userid is `role-id:ec2-instance-id`:
 *    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#principaltable
 *    so `nodes/${aws:userid}/stats.json` is one key per instance, and the role id is the role's RoleId attribute
 *    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-iam-role.html#aws-resource-iam-role-return-values).
 *  - Requiring the If-None-Match header (Null s3:if-none-match false) lets a put only create:
 *    https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html (example 1).
 */
import { CacheNodeFleet } from '../../cdk/constructs/cache-node-fleet.js';
import { synthesized } from './helpers/synth.js';

type Json = Record<string, unknown>;
type Resources = Record<string, { Type: string; Properties: Json }>;

const prod = synthesized('prod');

/** The template as text, with CloudFormation's Fn::Join parts glued (tokens shown as their JSON). */
function rendered(value: unknown): string {
  if (Array.isArray(value)) return value.map(rendered).join('');
  if (value && typeof value === 'object') {
    const o = value as Json;
    if ('Fn::Join' in o) {
      const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
      return parts.map(rendered).join(sep);
    }
    if ('Fn::Base64' in o) return rendered(o['Fn::Base64']);
    return JSON.stringify(o);
  }
  return String(value);
}

function nodeRolePolicy(): { Version: string; Statement: Json[] } {
  const resources = prod.templates.fleet.toJSON().Resources as Resources;
  const isNodeRole = (r: Resources[string]) =>
    r.Type === 'AWS::IAM::Role' && JSON.stringify(r.Properties.AssumeRolePolicyDocument).includes('ec2.amazonaws.com');
  const roleId = Object.keys(resources).find((id) => isNodeRole(resources[id]!))!;
  const ofRole = (r: Resources[string]) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(roleId);
  const policies = Object.values(resources).filter(ofRole);
  expect(policies).toHaveLength(1);
  expect(resources[roleId]!.Properties.ManagedPolicyArns).toBeUndefined();
  expect(resources[roleId]!.Properties.Policies).toBeUndefined();
  return policies[0]!.Properties.PolicyDocument as { Version: string; Statement: Json[] };
}

describe('Cache-node fleet and the ring store', () => {
  it('lets a node read its bundle, the ring document and the fleet secret, and write only its own stats report', () => {
    const doc = nodeRolePolicy();
    // Policy variables are literal text under older policy language versions.
    expect(doc.Version).toBe('2012-10-17');
    expect(doc.Statement).toHaveLength(2);
    const [read, write] = doc.Statement as {
      Sid: string;
      Action: unknown;
      Effect: string;
      Resource: unknown;
      Condition?: unknown;
    }[];
    expect(read).toMatchObject({ Sid: 'ReadBundleRingAndSecret', Action: 's3:GetObject', Effect: 'Allow' });
    const objects = (read!.Resource as unknown[]).map(rendered);
    expect(objects).toHaveLength(3);
    expect(objects).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/cdk-hnb659fds-assets-.*\/[0-9a-f]{64}\.zip$/),
        expect.stringMatching(/ColdTierBucket.*\/strata-ring\/ring\.json$/),
        expect.stringMatching(/ColdTierBucket.*\/strata-ring\/fleet\/secret$/),
      ]),
    );
    // One key per instance: the instance profile session's aws:userid (`<role id>:<instance id>`), no wildcard.
    expect(write).toMatchObject({ Sid: 'WriteOwnStatsReport', Action: 's3:PutObject', Effect: 'Allow' });
    expect(write!.Condition).toBeUndefined();
    const own = rendered(write!.Resource);
    expect(own).toMatch(/ColdTierBucket.*\/strata-ring\/nodes\/\$\{aws:userid\}\/stats\.json$/);
    expect(own).not.toContain('*');
    expect(JSON.stringify(doc)).not.toMatch(/secretsmanager|s3:ListBucket|s3:DeleteObject/);
  });

  it("keys each node's report by its role id and instance id, the value IAM substitutes for aws:userid", () => {
    type LaunchTemplate = { Properties: { LaunchTemplateData: { UserData: unknown } } };
    const lt = Object.values(prod.templates.fleet.findResources('AWS::EC2::LaunchTemplate'))[0] as LaunchTemplate;
    const userData = rendered(lt.Properties.LaunchTemplateData.UserData);
    const role = Object.keys(prod.templates.fleet.findResources('AWS::IAM::Role'))[0]!;
    expect(userData).toContain('STRATA_NODE_ID=$INSTANCE_ID\n');
    expect(userData).toContain(`STRATA_NODE_STATS_ID=${JSON.stringify({ 'Fn::GetAtt': [role, 'RoleId'] })}:$INSTANCE_ID\n`);
    // The secret comes from the ring store at daemon start: no Secrets Manager call, no secret file, no pre-start step.
    expect(userData).toContain('STRATA_NODE_SECRET_FROM_RING=1\n');
    expect(userData).toMatch(/STRATA_NODE_RING_STORE=s3:\/\/.*\/strata-ring\n/);
    expect(userData).not.toMatch(/secretsmanager|STRATA_NODE_SECRET_FILE|ExecStartPre/);
  });

  it('has no Secrets Manager secret, and asks the network for no interface endpoint', () => {
    prod.templates.fleet.resourceCountIs('AWS::SecretsManager::Secret', 0);
    expect(CacheNodeFleet.INTERFACE_ENDPOINTS).toEqual([]);
  });

  it("gives the coordinators bound to the fleet the secret's object to read, and to create but never replace", () => {
    type Fn = { Properties: { Environment: { Variables: Json }; Role: { 'Fn::GetAtt': [string, string] } } };
    const functions = prod.templates.api.findResources('AWS::Lambda::Function') as Record<string, Fn>;
    const bound = Object.entries(functions).filter(([, f]) => 'STRATA_NODE_PORT' in f.Properties.Environment.Variables);
    expect(bound.length).toBeGreaterThan(0);
    type Policy = { Properties: { PolicyDocument: { Statement: Json[] }; Roles: unknown } };
    const policies = Object.values(prod.templates.api.findResources('AWS::IAM::Policy')) as Policy[];
    for (const [id, f] of bound) {
      const vars = f.Properties.Environment.Variables;
      expect(vars.STRATA_WARM_SECRET_FROM_RING).toBe('1');
      expect(vars.STRATA_WARM_SECRET_ARN).toBeUndefined();
      const role = f.Properties.Role['Fn::GetAtt'][0];
      const policy = policies.find((p) => JSON.stringify(p.Properties.Roles).includes(role))!;
      const onSecret = policy.Properties.PolicyDocument.Statement.filter((s) =>
        /\/strata-ring\/fleet\/secret$/.test(rendered(s.Resource)),
      );
      const shown = onSecret.map((s) => ({ ...s, Resource: rendered(s.Resource).replace(/^.*\/strata-ring/, 'strata-ring') }));
      expect({ id, onSecret: shown }).toEqual({
        id,
        onSecret: [
          { Action: 's3:GetObject', Effect: 'Allow', Resource: 'strata-ring/fleet/secret' },
          // Only with If-None-Match: a put that can create the secret, never replace it.
          {
            Action: 's3:PutObject',
            Effect: 'Allow',
            Resource: 'strata-ring/fleet/secret',
            Condition: { Null: { 's3:if-none-match': 'false' } },
          },
        ],
      });
      // Nothing of the Secrets Manager secret the fleet used to have.
      expect(JSON.stringify(policy.Properties.PolicyDocument)).not.toContain('CacheNodesSharedSecret');
    }
  });

  it('gives the workflow steps, which create the secret before any launch, the same access', () => {
    type Fn = { Properties: { Environment?: { Variables: Json } } };
    const functions = prod.templates.workflows.findResources('AWS::Lambda::Function') as Record<string, Fn>;
    const steps = Object.values(functions).filter(
      (f) => f.Properties.Environment?.Variables.STRATA_WARM_SECRET_FROM_RING === '1',
    );
    expect(steps.length).toBeGreaterThanOrEqual(1);
    const text = JSON.stringify(prod.templates.workflows.findResources('AWS::IAM::Policy'));
    expect(text).toContain('"s3:if-none-match":"false"');
    expect(text).not.toContain('CacheNodesSharedSecret');
  });
});
