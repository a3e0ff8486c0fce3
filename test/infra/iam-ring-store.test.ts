/**
 * Who may read and write the ring store (the `strata-ring/` prefix of the cold tier's bucket; issue 20, item 2b),
 * judged from the synthesized IAM of every stack of every environment: each role's inline policies, AWS::IAM::Policy
 * and AWS::IAM::ManagedPolicy documents (followed across stacks through Fn::GetStackOutput), evaluated against
 * concrete object ARNs of each kind of ring-store document.
 *
 * The S3 and IAM rules this relies on:
 * - S3 conditional writes (If-Match / If-None-Match) are PutObject requests and need s3:PutObject, nothing more: the
 *   header only decides whether the write lands, not who may write, so whoever holds s3:PutObject on the ring
 *   document (or the policy documents, which the admin API function writes the same way) can replace it.
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html (and its bucket policies, which
 *   condition s3:PutObject on s3:if-none-match / s3:if-match:
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html).
 * - A GET or HEAD of a missing key answers 404 only to a caller with s3:ListBucket on the bucket, 403 otherwise
 *   (HeadObject / GetObject "Permissions":
 *   https://docs.aws.amazon.com/AWSJavaScriptSDK/v3/latest/client/s3/command/HeadObjectCommand/); S3 evaluates that
 *   ListBucket with the requested key as s3:prefix (Ceph matched this AWS behaviour: ceph/ceph#68577,
 *   https://github.com/ceph/ceph/pull/68577), so ListBucket limited by `StringLike s3:prefix` to the readable keys
 *   keeps an absent document a 404 (S3CasStore reads 404 as "absent", 403 as "store unavailable").
 * - In a Resource ARN, `*` matches any run of characters, `/` included, and `?` one character; in an Action,
 *   wildcards match likewise, case-insensitively.
 *   https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html
 */
import { Stack } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { ENVIRONMENT_NAMES } from '../../cdk/config/schema.js';
import { ColdTierBucket } from '../../cdk/constructs/cold-tier-bucket.js';
import { POLICY_CURRENT_KEY, policyVersionKey } from '../../core/policy/admin.js';
import { HEALTH_CHECKER_KEY } from '../../core/nodes/health-snapshot.js';
import { EVALUATOR_STATE_KEY } from '../../core/policy/evaluator-store.js';
import { JOBS_KEY } from '../../core/policy/jobs.js';
import { STACK_KEYS, synthesized, type StackKey, type SynthesizedEnvironment } from './helpers/synth.js';

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Properties?: Json;
}
interface TemplateJson {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, { Value: unknown; Export?: { Name: unknown } }>;
}
interface Statement {
  Effect: 'Allow' | 'Deny';
  Action?: string | string[];
  NotAction?: string | string[];
  Resource?: unknown;
  NotResource?: unknown;
  Condition?: Record<string, Record<string, unknown>>;
}

/** One object of each kind the ring store holds (keys under strata-ring/), and one no code writes. */
const PROBES = {
  ring: 'ring.json',
  migrationSession: 'migrations/sessions/s-1',
  migrationPlan: 'migrations/plans/p-1',
  execution: 'workflows/executions/scale-out-1',
  scaleLock: 'workflows/scale-locks/n1',
  triggerSample: 'workflows/scale-trigger-sample',
  nodeStats: 'nodes/n1/stats.json',
  fleetSecret: 'fleet/secret',
  policyCurrent: POLICY_CURRENT_KEY,
  policyVersion: policyVersionKey(7, 'b3f1c2d4'),
  evaluatorState: EVALUATOR_STATE_KEY,
  evaluatorJobs: JOBS_KEY,
  healthControls: 'health/controls',
  healthChecker: HEALTH_CHECKER_KEY,
  other: 'anything-else',
} as const;
type Probe = keyof typeof PROBES;

/**
 * Written only by the ring's writers (ColdTierBucket.grantRingWriters): today the workflow step function. The ring
 * document itself also by the failure detector (the policy evaluator), below.
 */
const WRITERS_ONLY: readonly Probe[] = ['migrationSession', 'migrationPlan', 'execution', 'scaleLock'];

/** The policy documents (core/policy/admin.ts): written by the admin API function alone, read by every API function. */
const POLICY_DOCUMENTS: readonly Probe[] = ['policyCurrent', 'policyVersion'];

/**
 * AWS managed policies roles of this app attach, with what they grant that matters here: nothing in S3. A managed
 * policy missing from this list fails the test until it is added (with what it grants).
 */
const AWS_MANAGED_POLICIES: Readonly<Record<string, Statement[]>> = {
  // API Gateway's account-wide CloudWatch role (execution logs): logs:* only.
  'service-role/AmazonAPIGatewayPushToCloudWatchLogs': [],
  // CDK's helper Lambdas (log retention, custom resources): logs:CreateLogGroup/CreateLogStream/PutLogEvents.
  'service-role/AWSLambdaBasicExecutionRole': [],
};

/** Actions that change an object (or its tags), each matched against the statements' action patterns. */
const WRITE_ACTIONS = [
  's3:PutObject',
  's3:DeleteObject',
  's3:DeleteObjectVersion',
  's3:PutObjectTagging',
  's3:DeleteObjectTagging',
  's3:PutObjectAcl',
  's3:RestoreObject',
  's3:AbortMultipartUpload',
];

/** The IAM of one synthesized environment, with CloudFormation references resolved to strings. */
class IamModel {
  private readonly templates: Record<StackKey, TemplateJson>;
  private readonly stackKeyByName: Record<string, StackKey>;
  readonly coldBucket: string;

  constructor(readonly env: SynthesizedEnvironment) {
    const templates = STACK_KEYS.map((k) => [k, env.templates[k].toJSON() as TemplateJson] as const);
    this.templates = Object.fromEntries(templates) as Record<StackKey, TemplateJson>;
    this.stackKeyByName = Object.fromEntries(STACK_KEYS.map((k) => [env.stacks[k].stackName, k]));
    const bucket = env.stacks.data.coldTier.bucket;
    this.coldBucket = `arn:aws:s3:::<bucket:data/${Stack.of(bucket).getLogicalId(bucket.node.defaultChild as s3.CfnBucket)}>`;
  }

  /** The object ARN of a ring-store key. */
  objectArn(key: string): string {
    return `${this.coldBucket}/${ColdTierBucket.RING_PREFIX}/${key}`;
  }

  /** Every IAM role of the environment, as `stack/logicalId`. */
  roles(): string[] {
    const rolesOf = (k: StackKey) => Object.entries(this.templates[k].Resources).filter(([, r]) => r.Type === 'AWS::IAM::Role');
    return STACK_KEYS.flatMap((k) => rolesOf(k).map(([id]) => `${k}/${id}`));
  }

  roleOf(role: iam.Role): string {
    const stack = Stack.of(role);
    const key = STACK_KEYS.find((k) => this.env.stacks[k] === stack)!;
    return `${key}/${stack.getLogicalId(role.node.defaultChild as iam.CfnRole)}`;
  }

  /** Every statement that applies to `role`: inline, attached managed (any stack) and AWS::IAM::Policy. */
  statements(role: string): Statement[] {
    const [stackKey, id] = role.split('/') as [StackKey, string];
    const props = this.templates[stackKey].Resources[id]!.Properties ?? {};
    const docs: unknown[] = ((props.Policies as { PolicyDocument: unknown }[] | undefined) ?? []).map((p) => p.PolicyDocument);
    for (const arn of (props.ManagedPolicyArns as unknown[] | undefined) ?? [])
      docs.push(this.managedPolicyDocument(stackKey, arn));
    for (const k of STACK_KEYS) {
      for (const [pid, r] of Object.entries(this.templates[k].Resources)) {
        if (r.Type !== 'AWS::IAM::Policy' && r.Type !== 'AWS::IAM::ManagedPolicy') continue;
        const attached = ((r.Properties?.Roles as unknown[] | undefined) ?? []).map((x) => this.render(k, x));
        if (attached.includes(`<role:${role}>`)) docs.push(this.policyDocument(k, pid));
      }
    }
    return docs.flatMap((d) =>
      ((d as { Statement: Statement[] }).Statement ?? []).map((s) => this.resolveStatement(stackKey, s)),
    );
  }

  /** The service a role is for (`lambda.amazonaws.com`, `ec2.amazonaws.com`, ...). */
  assumedBy(role: string): string[] {
    const [stackKey, id] = role.split('/') as [StackKey, string];
    type TrustPolicy = { Statement: { Principal?: { Service?: string | string[] } }[] };
    const doc = this.templates[stackKey].Resources[id]!.Properties!.AssumeRolePolicyDocument as TrustPolicy;
    return doc.Statement.flatMap((st) => asArray(st.Principal?.Service ?? []));
  }

  /**
   * May `role` perform one of `actions` on `arn`? Allow statements only (no role here has a Deny on its S3
   * grants); any condition counts as met unless `condition` says otherwise (the conservative reading).
   */
  allows(role: string, actions: readonly string[], arn: string, condition?: (s: Statement) => boolean): boolean {
    return this.statements(role).some((s) => {
      if (s.Effect !== 'Allow') return false;
      const action = (a: string) =>
        s.Action !== undefined ? matchesAny(s.Action, a, true) : !matchesAny(s.NotAction ?? [], a, true);
      if (!actions.some(action)) return false;
      const notResource = (s.NotResource ?? []) as string[];
      const resource = s.Resource !== undefined ? matchesAny(s.Resource as string[], arn) : !matchesAny(notResource, arn);
      return resource && (condition ? condition(s) : true);
    });
  }

  /** May `role` list the cold tier's bucket with `key` (under the ring prefix) as s3:prefix? */
  mayListAs(role: string, key: string): boolean {
    const prefix = `${ColdTierBucket.RING_PREFIX}/${key}`;
    return this.allows(role, ['s3:ListBucket'], this.coldBucket, (s) => {
      const cond = s.Condition ?? {};
      const keys = Object.entries(cond).flatMap(([op, kv]) =>
        Object.entries(kv).map(([k, v]) => ({ op, k, v: asArray(v as string[]) })),
      );
      return keys.every(({ op, k, v }) => {
        if (k !== 's3:prefix') return false; // a condition this check does not model: treat as not granting
        if (op === 'StringLike') return v.some((p) => wildcard(p, prefix));
        if (op === 'StringEquals') return v.includes(prefix);
        return false;
      });
    });
  }

  private resolveStatement(stackKey: StackKey, s: Statement): Statement {
    const r = (x: unknown) => (Array.isArray(x) ? x.map((y) => this.render(stackKey, y)) : this.render(stackKey, x));
    return {
      ...s,
      ...(s.Resource !== undefined ? { Resource: r(s.Resource) } : {}),
      ...(s.NotResource !== undefined ? { NotResource: r(s.NotResource) } : {}),
    };
  }

  private managedPolicyDocument(stackKey: StackKey, arn: unknown): unknown {
    const ref = this.refTarget(stackKey, arn);
    if (ref) return this.policyDocument(ref.stack, ref.id);
    const aws = /^arn:aws:iam::aws:policy\/(.+)$/.exec(this.render(stackKey, arn))?.[1];
    if (aws && AWS_MANAGED_POLICIES[aws]) return { Statement: AWS_MANAGED_POLICIES[aws] };
    throw new Error(
      `${stackKey}: managed policy ${JSON.stringify(arn)} is neither this app's nor a known AWS one: model its grants`,
    );
  }

  private policyDocument(stackKey: StackKey, id: string): unknown {
    const doc = this.templates[stackKey].Resources[id]!.Properties!.PolicyDocument as { Statement: Statement[] };
    return { Statement: doc.Statement.map((s) => this.resolveStatement(stackKey, s)) };
  }

  /** The resource a `{ Ref }` (possibly through Fn::GetStackOutput) points to. */
  private refTarget(stackKey: StackKey, v: unknown): { stack: StackKey; id: string } | undefined {
    if (isObj(v) && typeof v.Ref === 'string') {
      return this.templates[stackKey].Resources[v.Ref] ? { stack: stackKey, id: v.Ref } : undefined;
    }
    if (isObj(v) && isObj(v['Fn::GetStackOutput'])) {
      const o = v['Fn::GetStackOutput'] as { StackName: string; OutputName: string };
      const k = this.stackKeyByName[o.StackName]!;
      return this.refTarget(k, this.templates[k].Outputs![o.OutputName]!.Value);
    }
    return undefined;
  }

  /** A CloudFormation value as a string: references to resources become `<kind:stack/id>` names. */
  render(stackKey: StackKey, v: unknown): string {
    if (typeof v === 'string') return v;
    if (!isObj(v)) throw new Error(`cannot render ${JSON.stringify(v)}`);
    if (typeof v.Ref === 'string') return this.refName(stackKey, v.Ref);
    if (Array.isArray(v['Fn::GetAtt'])) {
      const [id, attr] = v['Fn::GetAtt'] as [string, string];
      const role = attr === 'Arn' && this.templates[stackKey].Resources[id]?.Type === 'AWS::IAM::Role';
      return role ? `<role:${stackKey}/${id}>` : this.attrName(stackKey, id, attr);
    }
    if (Array.isArray(v['Fn::Join'])) {
      const [sep, parts] = v['Fn::Join'] as [string, unknown[]];
      return parts.map((p) => this.render(stackKey, p)).join(sep);
    }
    if (isObj(v['Fn::GetStackOutput'])) {
      const o = v['Fn::GetStackOutput'] as { StackName: string; OutputName: string };
      const k = this.stackKeyByName[o.StackName];
      if (!k) throw new Error(`output of unknown stack ${o.StackName}`);
      return this.render(k, this.templates[k].Outputs![o.OutputName]!.Value);
    }
    if (typeof v['Fn::Sub'] === 'string') {
      return (v['Fn::Sub'] as string).replace(/\$\{([^}]+)\}/g, (_m, name: string) => {
        const [id, attr] = name.split('.') as [string, string | undefined];
        return attr ? this.attrName(stackKey, id, attr) : this.refName(stackKey, id);
      });
    }
    throw new Error(`${stackKey}: cannot render ${JSON.stringify(v).slice(0, 200)} (extend IamModel.render)`);
  }

  private refName(stackKey: StackKey, id: string): string {
    const pseudo: Record<string, string> = {
      'AWS::Partition': 'aws',
      'AWS::Region': '<region>',
      'AWS::AccountId': '<account>',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': `<stack:${stackKey}>`,
    };
    if (pseudo[id]) return pseudo[id];
    const r = this.templates[stackKey].Resources[id];
    if (!r) throw new Error(`${stackKey}: Ref to unknown ${id}`);
    if (r.Type === 'AWS::IAM::Role') return `<role:${stackKey}/${id}>`;
    if (r.Type === 'AWS::S3::Bucket') return `<bucket:${stackKey}/${id}>`;
    return `<ref:${stackKey}/${id}>`;
  }

  private attrName(stackKey: StackKey, id: string, attr: string): string {
    const r = this.templates[stackKey].Resources[id];
    if (r?.Type === 'AWS::S3::Bucket' && attr === 'Arn') return `arn:aws:s3:::<bucket:${stackKey}/${id}>`;
    return `<${stackKey}/${id}.${attr}>`;
  }
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function asArray<T>(v: T | T[]): T[] {
  return Array.isArray(v) ? v : [v];
}

/**
 * A PutObject grant that can only create: S3 accepts only `*` in If-None-Match, so a put required to carry the
 * header cannot replace an object. https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html
 */
function createOnly(s: Statement): boolean {
  const c = s.Condition ?? {};
  return (
    c.Null?.['s3:if-none-match'] === 'false' || asArray((c.StringEquals?.['s3:if-none-match'] ?? []) as string[]).includes('*')
  );
}

/** IAM wildcard match: `*` any run of characters, `?` one. */
function wildcard(pattern: string, value: string, ignoreCase = false): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, ignoreCase ? 'is' : 's').test(value);
}

function matchesAny(patterns: string | string[], value: string, ignoreCase = false): boolean {
  return asArray(patterns).some((p) => wildcard(p, value, ignoreCase));
}

describe.each(ENVIRONMENT_NAMES)('ring store grants (%s)', (name) => {
  const env = synthesized(name);
  const iam = new IamModel(env);
  const stepRole = iam.roleOf(env.stacks.workflows.stepFunction.role);
  const apiRoles = Object.entries(env.stacks.api.functions).map(([fn, f]) => [fn, iam.roleOf(f.role)] as const);
  const writers = (probe: Probe) => iam.roles().filter((r) => iam.allows(r, ['s3:PutObject'], iam.objectArn(PROBES[probe])));

  it.each(WRITERS_ONLY)('lets only the workflow step function put %s', (probe) => {
    expect({ probe, writers: writers(probe) }).toEqual({ probe, writers: [stepRole] });
  });

  it('lets only the workflow step function and the failure detector (the policy evaluator) put the ring', () => {
    // The detector (core/composition/fleet-health-tick.ts) marks a node DOWN by a compare-and-set of the ring document
    // (s3:PutObject with If-Match, https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html); it
    // moves no range and writes no migration, lock or progress document (above).
    const evaluatorRole = iam.roleOf(env.stacks.workflows.policyTicker!.evaluator.role);
    expect(writers('ring').sort()).toEqual([stepRole, evaluatorRole].sort());
  });

  it("lets the failure detector keep its state (health/checker) and read the operators' switch (health/controls)", () => {
    // Read with s3:ListBucket on the key as s3:prefix, so that a document not written yet is a 404 (HeadObject /
    // GetObject "Permissions"): a fresh deployment has neither. The operators' switch is written by the admin API
    // alone (PUT /v1/admin/nodes/replacement, StrataFunction.bindNodeAdmin).
    const evaluatorRole = iam.roleOf(env.stacks.workflows.policyTicker!.evaluator.role);
    expect(writers('healthChecker')).toEqual([evaluatorRole]);
    expect(writers('healthControls')).toEqual([iam.roleOf(env.stacks.api.functions.admin.role)]);
    for (const p of ['healthChecker', 'healthControls'] as const) {
      const reads = iam.allows(evaluatorRole, ['s3:GetObject'], iam.objectArn(PROBES[p]));
      expect({ p, reads, lists: iam.mayListAs(evaluatorRole, PROBES[p]) }).toEqual({ p, reads: true, lists: true });
    }
  });

  it('lets no API function replace anything in the ring store but the admin function the policy documents', () => {
    for (const [fn, role] of apiRoles) {
      const replaces = (p: Probe) => iam.allows(role, WRITE_ACTIONS, iam.objectArn(PROBES[p]), (st) => !createOnly(st));
      const written = (Object.keys(PROBES) as Probe[]).filter(replaces);
      // The admin function's policies/* grant also covers the evaluator's state and jobs documents (it reads the
      // firings there); it writes the operators' replacement switch (health/controls) too.
      const admins = [...POLICY_DOCUMENTS, 'evaluatorState', 'evaluatorJobs', 'healthControls'];
      expect({ fn, written }).toEqual({ fn, written: fn === 'admin' ? admins : [] });
    }
  });

  it('lets no API function delete or tag anything in the ring store (nothing deletes a policy document either)', () => {
    const notPut = WRITE_ACTIONS.filter((a) => a !== 's3:PutObject');
    for (const [fn, role] of apiRoles) {
      const changed = (Object.keys(PROBES) as Probe[]).filter((p) => iam.allows(role, notPut, iam.objectArn(PROBES[p])));
      expect({ fn, changed }).toEqual({ fn, changed: [] });
    }
  });

  it('lets an API function at most create the fleet secret where it is missing, and create nothing else', () => {
    // CacheNodeFleet.grantCreateSecret: whichever coordinator needs the secret first creates it (If-None-Match:
    // * only, so it can never replace one), so a fresh deployment's API does not wait for a workflow to run.
    // (The admin function's writes of the policy documents are judged on their own below.)
    for (const [fn, role] of apiRoles) {
      const created = (Object.keys(PROBES) as Probe[]).filter((p) =>
        iam.allows(role, ['s3:PutObject'], iam.objectArn(PROBES[p])),
      );
      const admins = [...POLICY_DOCUMENTS, 'evaluatorState', 'evaluatorJobs', 'healthControls'];
      const others = created.filter((p) => p !== 'fleetSecret' && !(fn === 'admin' && admins.includes(p)));
      expect({ fn, created: others }).toEqual({ fn, created: [] });
    }
  });

  it.each(POLICY_DOCUMENTS)('lets only the admin API function put %s', (probe) => {
    // The admin routes (/v1/admin/policy...) replace policies/current.json with If-Match (If-None-Match: * for the
    // first) and create each policies/versions/<n>-<id>.json with If-None-Match: *: both need s3:PutObject alone
    // (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html), so s3:PutObject is what this
    // judges; no other role holds it there.
    expect({ probe, writers: writers(probe) }).toEqual({ probe, writers: [iam.roleOf(env.stacks.api.functions.admin.role)] });
  });

  it.each(POLICY_DOCUMENTS)('lets every API function read %s, and list it as s3:prefix (absent = 404)', (probe) => {
    // Every API function re-reads policies/current.json (core/policy/live.ts); before the first edit it is absent,
    // which must read as 404 (the deployment's policy), not 403 (store unavailable). The admin function also reads
    // the version files (GET /v1/admin/policy/versions...).
    for (const [fn, role] of apiRoles) {
      const reads = iam.allows(role, ['s3:GetObject'], iam.objectArn(PROBES[probe]));
      expect({ fn, reads, lists: iam.mayListAs(role, PROBES[probe]) }).toEqual({ fn, reads: true, lists: true });
    }
  });

  it('lets the policy evaluator write its own state document and nothing else of the policy store', () => {
    // core/policy/evaluator-store.ts saves policies/evaluator/state.json by compare-and-set (If-Match, If-None-Match: *
    // for the first): s3:PutObject on that key alone. The policy documents stay the admin function's (above).
    const ticker = env.stacks.workflows.policyTicker!;
    const evaluatorRole = iam.roleOf(ticker.evaluator.role);
    const admin = iam.roleOf(env.stacks.api.functions.admin.role);
    expect(writers('evaluatorState').sort()).toEqual([admin, evaluatorRole].sort());
    const written = (Object.keys(PROBES) as Probe[]).filter((p) =>
      iam.allows(evaluatorRole, ['s3:PutObject'], iam.objectArn(PROBES[p])),
    );
    // And the jobs board it queues on (below), paper 000's counter sample (below), and as the failure detector the ring
    // (DOWN marks) and its own state (above); nothing else: the evaluator runs outside the VPC and reaches no node (no
    // fleet secret either).
    expect(written).toEqual(['ring', 'triggerSample', 'evaluatorState', 'evaluatorJobs', 'healthChecker']);
    for (const p of ['policyCurrent', 'evaluatorState', 'ring', 'nodeStats'] as const)
      expect({ p, reads: iam.allows(evaluatorRole, ['s3:GetObject'], iam.objectArn(PROBES[p])) }).toEqual({ p, reads: true });
  });

  it('lets the evaluator and the job runner (and the admin function, by policies/*) write the jobs board', () => {
    // core/policy/jobs.ts: the evaluator queues and takes jobs off, the runner leases and advances them, each by
    // compare-and-set (s3:PutObject with If-Match / If-None-Match). The runner writes nothing else of the store but
    // the fleet secret's creation.
    const ticker = env.stacks.workflows.policyTicker!;
    const runner = iam.roleOf(ticker.jobs.role);
    const expected = [iam.roleOf(env.stacks.api.functions.admin.role), iam.roleOf(ticker.evaluator.role), runner];
    expect(writers('evaluatorJobs').sort()).toEqual(expected.sort());
    const written = (Object.keys(PROBES) as Probe[]).filter((p) =>
      iam.allows(runner, ['s3:PutObject'], iam.objectArn(PROBES[p])),
    );
    // Like every function bound to the fleet (CacheNodeFleet.grantCreateSecret), it may create the fleet secret
    // where it is missing (If-None-Match: * only, never replace it).
    expect(written).toEqual(['fleetSecret', 'evaluatorJobs']);
  });

  it("lets paper 000's trigger (the evaluator's rule default-prelaunch, or its own function) read the locks and keep its sample", () => {
    // core/workflows/trigger/scale-trigger.ts measureScaleOut: the scale-out locks are read (a node with one in flight is
    // skipped), the request-counter sample is read and written by compare-and-set. With the policy evaluator (every
    // committed environment) the evaluator does it; without, the scale trigger's function (default-rules-wiring.test.ts).
    const ticker = env.stacks.workflows.policyTicker!;
    expect(env.stacks.workflows.scaleTriggerFunction).toBeUndefined();
    const evaluatorRole = iam.roleOf(ticker.evaluator.role);
    expect(writers('triggerSample')).toEqual([evaluatorRole]);
    for (const p of ['scaleLock', 'triggerSample'] as const)
      expect({ p, reads: iam.allows(evaluatorRole, ['s3:GetObject'], iam.objectArn(PROBES[p])) }).toEqual({ p, reads: true });
  });

  it('lets nobody write keys no code writes', () => {
    expect(writers('other')).toEqual([]);
  });

  it('lets every function that reads a ring-store document list it as s3:prefix, so an absent document is a 404', () => {
    // The functions read documents that may not exist yet (a new execution's progress, the first sample, a
    // node's first report) and take a 403 for an unavailable store.
    for (const role of iam.roles().filter((r) => iam.assumedBy(r).includes('lambda.amazonaws.com'))) {
      for (const probe of Object.keys(PROBES) as Probe[]) {
        if (!iam.allows(role, ['s3:GetObject'], iam.objectArn(PROBES[probe]))) continue;
        expect({ role, probe, list: iam.mayListAs(role, PROBES[probe]) }).toEqual({ role, probe, list: true });
      }
    }
  });

  it('models the grants it judges: the step function may put the ring, the API functions may read it', () => {
    expect(iam.allows(stepRole, ['s3:PutObject'], iam.objectArn(PROBES.ring))).toBe(true);
    for (const [fn, role] of apiRoles.filter(([f]) => f !== 'admin')) {
      expect({ fn, reads: iam.allows(role, ['s3:GetObject'], iam.objectArn(PROBES.ring)) }).toEqual({ fn, reads: true });
    }
  });
});
