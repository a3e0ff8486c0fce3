/**
 * Teardown and re-deploy, over every synthesized template of every environment. What CloudFormation does that
 * LocalStack does not check:
 * - a resource kept by DeletionPolicy/UpdateReplacePolicy `Retain` outlives its stack and keeps its name, and a
 *   custom name must be unique among active resources, so a retained resource with a fixed name stops the stack from
 *   being created again (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html,
 *   https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html);
 * - a retained resource that uses resources the stack deletes blocks their deletion, or is left broken (a retained
 *   ElastiCache cache keeps its user group in use and its network interfaces in the security group and subnets);
 * - DeletionPolicy `Snapshot` does not cover serverless caches, whose data a final snapshot keeps instead
 *   (FinalSnapshotName, taken by DeleteServerlessCache:
 *   https://docs.aws.amazon.com/AmazonElastiCache/latest/APIReference/API_DeleteServerlessCache.html), and that
 *   snapshot is encrypted with the cache's key, which must then be retained too.
 */
import type { EnvironmentName } from '../../cdk/config/schema.js';
import { STACK_KEYS, synthesized, type StackKey } from './helpers/synth.js';

type Json = unknown;
interface Resource {
  Type: string;
  Properties?: Record<string, Json>;
  DependsOn?: string | string[];
  DeletionPolicy?: string;
  UpdateReplacePolicy?: string;
}
interface Template {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, { Value: Json; Export?: { Name: Json } }>;
}
interface Located {
  stack: string;
  id: string;
  resource: Resource;
}

const ENVS: EnvironmentName[] = ['dev', 'staging', 'prod'];
const KEPT = new Set(['Retain', 'RetainExceptOnCreate', 'Snapshot']);

/** Kept by CloudFormation when the stack is deleted, or when the resource is replaced. */
const retained = (r: Resource) => KEPT.has(r.DeletionPolicy ?? 'Delete') || KEPT.has(r.UpdateReplacePolicy ?? 'Delete');

/** Custom-name properties: CloudFormation's end in `Name` or `Identifier`; some ElastiCache resources are named by an id. */
const NAMED_BY_ID: Record<string, string> = {
  'AWS::ElastiCache::User': 'UserId',
  'AWS::ElastiCache::UserGroup': 'UserGroupId',
  'AWS::ElastiCache::ReplicationGroup': 'ReplicationGroupId',
};
const isNameProperty = (type: string, prop: string) => /(Name|Identifier)$/.test(prop) || NAMED_BY_ID[type] === prop;

/**
 * Retained resources allowed a fixed name, each with the reason (an import path, or why re-creating the stack still
 * works): none today. Key: `<stack key>/<logical id prefix>`.
 */
const FIXED_NAME_JUSTIFIED: Record<string, string> = {};

/**
 * Uses of a deleted resource by a retained one that block nothing, each with the reason. aws-cdk-lib makes API
 * Gateway's account setting DependsOn the REST API (to order their creation); the setting names only the CloudWatch
 * role (retained too), so the API is deleted while the setting stays, unaffected.
 */
const USE_JUSTIFIED: { from: RegExp; to: string; reason: string }[] = [
  {
    from: /^api\/RestApiAccount/,
    to: 'AWS::ApiGateway::RestApi',
    reason: 'creation order only (DependsOn); the setting does not refer to the API',
  },
];

/**
 * Retained resources that are retained in every environment, dev included, and why. API Gateway's CloudWatch role is
 * an account-level setting of the region (AWS::ApiGateway::Account) that every REST API of the account shares, so it
 * outlives any one stack on purpose (strata-rest-api.ts sets cloudWatchRoleRemovalPolicy RETAIN); neither has a name.
 */
const RETAINED_EVERYWHERE: Record<string, RegExp> = {
  'API Gateway account CloudWatch role': /^api\/RestApi(CloudWatchRole|Account)/,
};

class Templates {
  readonly byStack = new Map<string, { key: StackKey; template: Template }>();
  constructor(readonly env: EnvironmentName) {
    const s = synthesized(env, { nag: false });
    for (const key of STACK_KEYS)
      this.byStack.set(s.stacks[key].stackName, { key, template: s.templates[key].toJSON() as Template });
  }

  *resources(): Generator<Located & { key: StackKey }> {
    for (const [stack, { key, template }] of this.byStack) {
      for (const [id, resource] of Object.entries(template.Resources)) yield { stack, key, id, resource };
    }
  }

  resource(stack: string, id: string): Resource {
    return this.byStack.get(stack)!.template.Resources[id]!;
  }

  /** The value behind a cross-stack reference, with the stack it is evaluated in. */
  output(ref: Json): { stack: string; value: Json } | undefined {
    const o = ref as Record<string, Record<string, string>>;
    if (o['Fn::GetStackOutput']) {
      const { StackName, OutputName } = o['Fn::GetStackOutput'];
      const value = this.byStack.get(StackName!)?.template.Outputs?.[OutputName!]?.Value;
      return value === undefined ? undefined : { stack: StackName!, value };
    }
    if (o['Fn::ImportValue'] !== undefined) {
      for (const [stack, { template }] of this.byStack) {
        for (const out of Object.values(template.Outputs ?? {})) {
          if (JSON.stringify(out.Export?.Name) === JSON.stringify(o['Fn::ImportValue'])) return { stack, value: out.Value };
        }
      }
    }
    return undefined;
  }

  /** Every resource `value` (in `stack`) refers to: Ref, GetAtt, Sub, DependsOn, and through other stacks' outputs. */
  references(value: Json, stack: string, out: Located[] = []): Located[] {
    const add = (s: string, id: string) => {
      const resource = this.byStack.get(s)?.template.Resources[id];
      if (resource && !out.some((l) => l.stack === s && l.id === id)) out.push({ stack: s, id, resource });
    };
    if (Array.isArray(value)) {
      for (const v of value) this.references(v, stack, out);
    } else if (value && typeof value === 'object') {
      const o = value as Record<string, Json>;
      const cross = this.output(o);
      if (cross) return this.references(cross.value, cross.stack, out);
      if (typeof o.Ref === 'string') add(stack, o.Ref);
      const att = o['Fn::GetAtt'];
      if (att) add(stack, Array.isArray(att) ? String(att[0]) : String(att).split('.')[0]!);
      const sub = o['Fn::Sub'];
      if (sub !== undefined) {
        const [text, vars] = Array.isArray(sub) ? [String(sub[0]), sub[1] as Record<string, Json>] : [String(sub), {}];
        for (const m of text.matchAll(/\$\{([^!}][^}.]*)(\.[^}]*)?\}/g)) if (!(m[1]! in vars)) add(stack, m[1]!);
        this.references(vars, stack, out);
      }
      for (const [k, v] of Object.entries(o)) if (k !== 'Fn::Sub') this.references(v, stack, out);
    }
    return out;
  }

  /**
   * Whether a name is the same every time the stack is created: literals and the stack's fixed pseudo parameters
   * (region, account, partition, stack name) are; AWS::StackId (a new UUID per created stack) and names CloudFormation
   * generates for other resources are not.
   */
  fixed(value: Json, stack: string): boolean {
    if (typeof value === 'string' || typeof value === 'number') return true;
    if (Array.isArray(value)) return value.every((v) => this.fixed(v, stack));
    const o = value as Record<string, Json>;
    const cross = this.output(o);
    if (cross) return this.fixed(cross.value, cross.stack);
    if (typeof o.Ref === 'string') return o.Ref.startsWith('AWS::') && o.Ref !== 'AWS::StackId';
    if (o['Fn::GetAtt']) return false;
    if (o['Fn::Join']) return this.fixed((o['Fn::Join'] as Json[])[1], stack);
    if (o['Fn::Select']) return this.fixed((o['Fn::Select'] as Json[])[1], stack);
    if (o['Fn::Split']) return this.fixed((o['Fn::Split'] as Json[])[1], stack);
    if (o['Fn::Sub'] !== undefined) {
      const sub = o['Fn::Sub'];
      const [text, vars] = Array.isArray(sub) ? [String(sub[0]), sub[1] as Record<string, Json>] : [String(sub), {}];
      const fixedVariable = (name: string) =>
        name in vars ? this.fixed(vars[name], stack) : name.startsWith('AWS::') && name !== 'AWS::StackId';
      return [...text.matchAll(/\$\{([^!}][^}]*)\}/g)].every((m) => fixedVariable(m[1]!));
    }
    return true; // an intrinsic not understood here: treated as fixed, to be looked at
  }
}

/** Evaluates the intrinsics a generated name uses, for a stack created with `stackId`. */
function evaluate(value: Json, stackId: string): string {
  if (typeof value === 'string') return value;
  const o = value as Record<string, Json>;
  if (o.Ref === 'AWS::StackId') return stackId;
  if (o['Fn::Join']) {
    const [sep, parts] = o['Fn::Join'] as [string, Json[]];
    return parts.map((p) => evaluate(p, stackId)).join(sep);
  }
  if (o['Fn::Select']) {
    const [i, list] = o['Fn::Select'] as [number, Json];
    const l = (list as Record<string, Json>)['Fn::Split'] as [string, Json];
    return evaluate(l[1], stackId).split(l[0] as string)[i]!;
  }
  throw new Error(`cannot evaluate ${JSON.stringify(value)}`);
}

const SAMPLE_STACK_ID =
  'arn:aws:cloudformation:us-east-1:123456789012:stack/Strata-prod-Data/1c2fa620-982a-11e3-aff7-50e2416294e0';

describe.each(ENVS)('Teardown and re-deploy (%s)', (env) => {
  const t = new Templates(env);

  it('gives no retained resource a fixed name, so the stacks can be deleted and created again', () => {
    const fixedNames: string[] = [];
    for (const { stack, key, id, resource } of t.resources()) {
      if (!retained(resource)) continue;
      if (Object.keys(FIXED_NAME_JUSTIFIED).some((k) => `${key}/${id}`.startsWith(k))) continue;
      for (const [prop, value] of Object.entries(resource.Properties ?? {})) {
        if (!isNameProperty(resource.Type, prop) || !t.fixed(value, stack)) continue;
        fixedNames.push(`${stack}/${id} (${resource.Type}, ${resource.DeletionPolicy}) ${prop}=${JSON.stringify(value)}`);
      }
    }
    expect(fixedNames).toEqual([]);
  });

  it('retains nothing that uses a resource the stacks delete (as a retained cache holds its user group, security group, subnets)', () => {
    const dangling: string[] = [];
    for (const { stack, key, id, resource } of t.resources()) {
      if (!retained(resource)) continue;
      const dependsOn = ([] as string[]).concat(resource.DependsOn ?? []).map((d) => ({ Ref: d }));
      const uses = t.references([resource.Properties ?? {}, dependsOn], stack);
      const justified = (u: Located) => USE_JUSTIFIED.some((j) => j.from.test(`${key}/${id}`) && j.to === u.resource.Type);
      for (const u of uses) {
        if (retained(u.resource) || justified(u)) continue;
        dangling.push(`${stack}/${id} (${resource.Type}) uses ${u.stack}/${u.id} (${u.resource.Type})`);
      }
    }
    expect(dangling).toEqual([]);
  });
});

describe('Removal policies per environment', () => {
  const kept = (env: EnvironmentName) =>
    [...new Templates(env).resources()]
      .filter((r) => retained(r.resource))
      .map((r) => `${r.key}/${r.id}`)
      .filter((k) => !Object.values(RETAINED_EVERYWHERE).some((re) => re.test(k)));

  it('deletes everything in dev, the hot tier data included', () => {
    const t = new Templates('dev');
    expect(kept('dev')).toEqual([]);
    const caches = [...t.resources()].filter((r) => r.resource.Type === 'AWS::ElastiCache::ServerlessCache');
    expect(caches).toHaveLength(1);
    expect(caches[0]!.resource.DeletionPolicy).toBe('Delete');
    expect(caches[0]!.resource.Properties!.FinalSnapshotName).toBeUndefined();
  });

  it.each(['staging', 'prod'] as const)(
    'keeps buckets, logs, the KMS key and the hot tier data (a final snapshot) in %s',
    (env) => {
      const t = new Templates(env);
      const all = [...t.resources()];
      const ofType = (type: string) => all.filter((r) => r.resource.Type === type);
      for (const type of ['AWS::S3::Bucket', 'AWS::Logs::LogGroup', 'AWS::KMS::Key']) {
        expect(ofType(type).length).toBeGreaterThan(0);
        for (const r of ofType(type)) {
          expect([r.id, r.resource.DeletionPolicy, r.resource.UpdateReplacePolicy]).toEqual([r.id, 'Retain', 'Retain']);
        }
      }
      // The cache goes (so its users, user group, security group and network interfaces can go too); its data stays
      // in a final snapshot, whose name is unique per created stack and valid for a serverless cache snapshot
      // (^[a-z][a-z0-9]*(-[a-z0-9]+)*$, at most 255:
      // https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-elasticache-serverlesscachesnapshot.html).
      const [cache, ...more] = ofType('AWS::ElastiCache::ServerlessCache');
      expect(more).toEqual([]);
      expect(cache!.resource.DeletionPolicy).toBe('Delete');
      const name = cache!.resource.Properties!.FinalSnapshotName;
      expect(t.fixed(name, cache!.stack)).toBe(false);
      const sample = evaluate(name, SAMPLE_STACK_ID);
      expect(sample).toBe(`strata-${env}-final-1c2fa620-982a-11e3-aff7-50e2416294e0`);
      expect(sample).toMatch(/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/);
      expect(sample.length).toBeLessThanOrEqual(255);
      // The snapshot is encrypted with the cache's key: that key is retained.
      const [key] = t.references(cache!.resource.Properties!.KmsKeyId, cache!.stack);
      expect(key?.resource.Type).toBe('AWS::KMS::Key');
      expect(key?.resource.DeletionPolicy).toBe('Retain');
      const access = [...ofType('AWS::ElastiCache::User'), ...ofType('AWS::ElastiCache::UserGroup')];
      for (const r of access) expect(retained(r.resource)).toBe(false);
    },
  );

  it("names the state machines' retained log group after the stack, under /aws/vendedlogs/states/", () => {
    const t = new Templates('prod');
    const group = [...t.resources()].find((r) => r.key === 'workflows' && r.id.startsWith('StateMachineLogs'))!;
    const name = evaluate(group.resource.Properties!.LogGroupName, SAMPLE_STACK_ID);
    expect(name).toBe('/aws/vendedlogs/states/strata-prod-1c2fa620-982a-11e3-aff7-50e2416294e0');
    // LogGroupName: ^[.\-_/#A-Za-z0-9]{1,512}$
    // (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html)
    expect(name).toMatch(/^[.\-_/#A-Za-z0-9]{1,512}$/);
  });
});
