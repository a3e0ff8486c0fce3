/**
 * EC2's documented rules for what the workflows send it, checked against the synthesized templates. LocalStack
 * checks none of them (test/workflows runs the launch there), so a violation would first show on a real account.
 *
 * - The launch: the Fleet stack's launch template merged with the ScaleOut state machine's RunInstances
 *   Parameters, as the state machine evaluates them: the states before the launch run their real step with the
 *   step Lambda's environment (fleet subnets) and an 80-character execution name, the longest Step Functions allows.
 *   ReplaceNode's launch state is the same as ScaleOut's, Parameters and all (test/infra/replace-node.test.ts).
 * - Least privilege: no IAM statement of any stack lets a principal terminate, stop or launch EC2 instances on
 *   resources that are not the fleet's own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENVIRONMENT_NAMES } from '../../cdk/config/schema.js';
import { resolveIntrinsics, stateMachinesOf, type AslDefinition } from '../../cdk/lib/workflow-definitions.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { workflowDepsFromEnv } from '../../core/composition/step-lambda.js';
import { allStates } from '../../core/workflows/local/asl-runner.js';
import { stepHandlers } from '../../core/workflows/steps/handlers.js';
import { runStep } from '../../core/workflows/steps/registry.js';
import { STACK_KEYS, synthesized } from './helpers/synth.js';

type Json = Record<string, unknown>;
type Template = { Resources?: Record<string, { Type: string; Properties?: Json }> };

const RUN_INSTANCES = 'arn:aws:states:::aws-sdk:ec2:runInstances';

// ------------------------------------------------------------------ evaluating a definition up to the launch

/** `$`, `$.a.b` on the state input and `$$.a.b` on the context object: all the paths these definitions use. */
function evalPath(path: string, input: unknown, context: unknown): unknown {
  const [root, rest] = path.startsWith('$$') ? [context, path.slice(2)] : [input, path.slice(1)];
  if (rest !== '' && !rest.startsWith('.')) throw new Error(`unsupported JSONPath ${path}`);
  return rest
    .split('.')
    .slice(1)
    .reduce<unknown>((v, k) => (v as Json | undefined)?.[k], root);
}

/** A state's Parameters with each `key.$` replaced by `key` and the value its path selects. */
function parameters(value: unknown, input: unknown, context: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => parameters(v, input, context));
  if (value === null || typeof value !== 'object') return value;
  const entry = ([k, v]: [string, unknown]) =>
    k.endsWith('.$') ? [k.slice(0, -2), evalPath(String(v), input, context)] : [k, parameters(v, input, context)];
  return Object.fromEntries(Object.entries(value).map(entry));
}

function withResult(input: Json, resultPath: unknown, result: unknown): Json {
  if (resultPath === null) return input;
  if (resultPath === undefined || resultPath === '$') return result as Json;
  const m = /^\$\.([A-Za-z0-9_]+)$/.exec(String(resultPath));
  if (!m) throw new Error(`unsupported ResultPath ${String(resultPath)}`);
  return { ...input, [m[1]!]: result };
}

/**
 * The RunInstances request ScaleOut sends: runs the definition from its start to the launch state, each step
 * Lambda task by the real step handler (deps from `stepEnv` over an empty ring in a folder).
 */
async function launchRequest(def: AslDefinition, stepEnv: Record<string, string>, executionName: string): Promise<Json> {
  const dir = mkdtempSync(join(tmpdir(), 'strata-ec2-rules-'));
  try {
    const env = loadRuntimeEnv({ ...stepEnv, STRATA_WARM_RING_DIR: dir, STRATA_WARM_SECRET: 'a-fleet-secret-of-16+' });
    const deps = await workflowDepsFromEnv(env);
    const handlers = stepHandlers(deps);
    const context = {
      Execution: { Id: `arn:aws:states:us-east-1:000000000000:execution:x:${executionName}`, Name: executionName },
    };
    let input: Json = {};
    let name = def.StartAt;
    for (let hops = 0; hops < 20; hops++) {
      const state = def.States[name] as Json;
      if (state.Resource === RUN_INSTANCES) return parameters(state.Parameters, input, context) as Json;
      if (state.Type !== 'Task' || !String(state.Resource).includes(':lambda:')) {
        throw new Error(`the walk to the launch meets state '${name}' (${String(state.Type)}), which it cannot run`);
      }
      const result = await runStep(handlers, parameters(state.Parameters, input, context));
      input = withResult(input, state.ResultPath, result);
      name = String(state.Next);
    }
    throw new Error('no RunInstances state on the way from StartAt');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------ reading templates

/**
 * A template value as text: literals kept, references shown as <AWSAccountId>, <Logical.Attr>, <ref> (no colon in
 * them, so an ARN's fields stay where its colons put them).
 */
function text(v: unknown): string {
  if (typeof v === 'string') return v;
  const o = v as Json;
  if (o && 'Fn::Join' in o) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
    return parts.map(text).join(sep);
  }
  if (o && 'Ref' in o) return `<${String(o.Ref).replace(/:/g, '')}>`;
  if (o && 'Fn::GetAtt' in o) return `<${(o['Fn::GetAtt'] as string[]).join('.')}>`;
  return '<ref>';
}

interface Statement {
  where: string;
  actions: string[];
  resources: string[];
  conditionKeys: string[];
}

/** Every Allow statement of every identity policy in a template (policies, managed policies, role inline policies). */
function allowStatements(template: Template): Statement[] {
  const out: Statement[] = [];
  for (const [id, r] of Object.entries(template.Resources ?? {})) {
    const docs: unknown[] = [];
    if (r.Type === 'AWS::IAM::Policy' || r.Type === 'AWS::IAM::ManagedPolicy') docs.push(r.Properties?.PolicyDocument);
    const inline = (r.Properties?.Policies as { PolicyDocument: unknown }[] | undefined) ?? [];
    if (r.Type === 'AWS::IAM::Role') docs.push(...inline.map((p) => p.PolicyDocument));
    for (const doc of docs) {
      for (const s of ((doc as { Statement?: Json[] } | undefined)?.Statement ?? []).filter((x) => x.Effect === 'Allow')) {
        const list = (v: unknown) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
        out.push({
          where: id,
          actions: list(s.Action).map(String),
          resources: list(s.Resource).map(text),
          conditionKeys: Object.values((s.Condition as Record<string, Json> | undefined) ?? {}).flatMap((c) => Object.keys(c)),
        });
      }
    }
  }
  return out;
}

/** Whether an IAM action pattern (wildcards allowed, case-insensitive) grants `action`. */
function grants(pattern: string, action: string): boolean {
  return new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
    'i',
  ).test(action);
}

// ------------------------------------------------------------------ the rules

// RunInstances' TagSpecifications: "You can specify tags for the following resources only: Instances, Volumes,
// Spot Instance requests, Network interfaces".
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html
const RUN_INSTANCES_TAGGABLE = ['instance', 'volume', 'spot-instances-request', 'network-interface'];
// A launch template's TagSpecifications: "instance | volume | network-interface | spot-instances-request".
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateTagSpecificationRequest.html
const LAUNCH_TEMPLATE_TAGGABLE = ['instance', 'volume', 'network-interface', 'spot-instances-request'];

/** Problems of one TagSpecifications list against EC2's tag rules. */
function tagProblems(specs: unknown, taggable: string[]): string[] {
  const problems: string[] = [];
  for (const spec of (specs as { ResourceType: string; Tags?: { Key: string; Value: string }[] }[] | undefined) ?? []) {
    if (!taggable.includes(spec.ResourceType)) problems.push(`resource type '${spec.ResourceType}' cannot be tagged at launch`);
    const keys = (spec.Tags ?? []).map((t) => text(t.Key));
    if (new Set(keys).size !== keys.length) problems.push(`${spec.ResourceType}: a tag key is given twice`);
    for (const t of spec.Tags ?? []) {
      // EC2 Tag: "Tag keys are case-sensitive and accept a maximum of 127 Unicode characters. May not begin with
      // aws:" and "Tag values are case-sensitive and accept a maximum of 256 Unicode characters".
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Tag.html
      const [key, value] = [text(t.Key), text(t.Value)];
      if ([...key].length < 1 || [...key].length > 127) problems.push(`tag key '${key}' is not 1-127 characters`);
      if (/^aws:/i.test(key)) problems.push(`tag key '${key}' begins with aws:`);
      if ([...value].length > 256) problems.push(`tag ${key}'s value is over 256 characters`);
    }
  }
  return problems;
}

describe.each(ENVIRONMENT_NAMES)('%s', (envName) => {
  const s = synthesized(envName);
  const workflows = s.templates.workflows.toJSON() as Template;
  const launchTemplate = () => {
    const fleetResources = Object.values((s.templates.fleet.toJSON() as Template).Resources ?? {});
    const lts = fleetResources.filter((r) => r.Type === 'AWS::EC2::LaunchTemplate');
    expect(lts).toHaveLength(1);
    return lts[0]!.Properties!.LaunchTemplateData as Json;
  };
  /** The step Lambda's environment, references resolved to stand-ins (cdk/lib/workflow-definitions.ts). */
  const stepLambdaEnv = () => {
    const isStepLambda = (r: { Type: string; Properties?: Json }) =>
      r.Type === 'AWS::Lambda::Function' && /workflow steps/.test(String(r.Properties?.Description));
    const fn = Object.values(workflows.Resources ?? {}).find(isStepLambda);
    const vars = ((fn?.Properties?.Environment as { Variables?: Json } | undefined)?.Variables ?? {}) as Json;
    return Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(resolveIntrinsics(v))]));
  };
  // Step Functions execution names are up to 80 characters (the admin API passes them through).
  const executionName = `scale-out-${'x'.repeat(70)}`;
  let request: Json;
  beforeAll(async () => {
    const scaleOut = stateMachinesOf(workflows)[`strata-${envName}-scale-out`]!;
    expect(allStates(scaleOut).some(([, st]) => st.Resource === RUN_INSTANCES)).toBe(true);
    // Only what places a launch: the ring store and secrets of the real Lambda are AWS-only.
    const { STRATA_FLEET_SUBNETS } = stepLambdaEnv();
    request = await launchRequest(scaleOut, STRATA_FLEET_SUBNETS ? { STRATA_FLEET_SUBNETS } : {}, executionName);
  });

  describe('ScaleOut RunInstances request with the Fleet launch template', () => {
    it('names its network settings in one place: a network interface, or a top-level subnet and security groups, not both', () => {
      // RunInstances SubnetId: "If you specify a network interface, you must specify any subnets as part of the
      // network interface instead of using this parameter." SecurityGroupIds: "If you specify a network interface,
      // you must specify any security groups as part of the network interface instead of using this parameter."
      // (EC2 answers InvalidParameterCombination.) A launch template's parameters count as specified in the
      // request unless the request overwrites them ("Any additional parameters that you specify for the new
      // instance overwrite the corresponding parameters included in the launch template").
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html
      const lt = launchTemplate();
      const interfaces = request.NetworkInterfaces ?? lt.NetworkInterfaces;
      const topLevel = ['SubnetId', 'SecurityGroupIds', 'SecurityGroups'].filter(
        (k) => request[k] !== undefined || lt[k] !== undefined,
      );
      expect(interfaces === undefined ? [] : topLevel).toEqual([]);
    });

    it('launches into a subnet of the fleet, from the private subnets the begin step knows, with no public IP', () => {
      const lt = launchTemplate();
      const interfaces = (request.NetworkInterfaces ?? lt.NetworkInterfaces) as Json[] | undefined;
      // "If you don't specify a subnet ID, we choose a default subnet from your default VPC": outside Strata's VPC.
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html
      const subnet = interfaces?.[0]?.SubnetId ?? request.SubnetId;
      const fleetSubnets = JSON.parse(stepLambdaEnv().STRATA_FLEET_SUBNETS ?? '[]') as {
        subnetId: string;
        availabilityZone: string;
      }[];
      expect(fleetSubnets.map((x) => x.availabilityZone).sort()).toEqual([...s.config.availabilityZones].sort());
      expect(fleetSubnets.map((x) => x.subnetId)).toContain(subnet);
      // InstanceNetworkInterfaceSpecification DeviceIndex: "If you specify a network interface when launching an
      // instance, you must specify the device index." AssociatePublicIpAddress: "If launching into a default
      // subnet, the default value is true": the nodes' interface says false itself.
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceNetworkInterfaceSpecification.html
      expect(interfaces).toBeDefined();
      for (const ni of interfaces!) expect(typeof ni.DeviceIndex).toBe('number');
      const primary = interfaces!.find((ni) => ni.DeviceIndex === 0);
      expect(primary).toMatchObject({ AssociatePublicIpAddress: false, Groups: [expect.any(String)] });
    });

    it('gives a ClientToken of at most 64 ASCII characters, for the longest execution name', () => {
      // RunInstances ClientToken: "Constraints: Maximum 64 ASCII characters".
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html
      // https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html
      expect(executionName).toHaveLength(80);
      expect(typeof request.ClientToken).toBe('string');
      const token = request.ClientToken as string;
      expect(token.length).toBeLessThanOrEqual(64);
      expect(token).toMatch(/^[\x20-\x7e]+$/);
    });

    it('tags only resources RunInstances can tag, within EC2 tag limits, and always the instance and its volumes', () => {
      expect(tagProblems(request.TagSpecifications, RUN_INSTANCES_TAGGABLE)).toEqual([]);
      expect(tagProblems(launchTemplate().TagSpecifications, LAUNCH_TEMPLATE_TAGGABLE)).toEqual([]);
      // The IAM conditions below rely on these tags (aws:RequestTag on instance and volume).
      const types = (request.TagSpecifications as { ResourceType: string }[]).map((t) => t.ResourceType);
      expect(types).toEqual(expect.arrayContaining(['instance', 'volume']));
    });

    it('asks for exactly one instance', () => {
      // MinCount and MaxCount are required by RunInstances.
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html
      expect([request.MinCount, request.MaxCount]).toEqual([1, 1]);
    });
  });

  describe('IAM for destructive EC2 actions', () => {
    // The documented ways to narrow them (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html):
    // TerminateInstances on instance/* with "ec2:ResourceTag/<key>" (StopInstances alike); RunInstances on
    // image/* with "ec2:Owner": "amazon"; on instance/* and volume/* with "aws:RequestTag/<key>".
    const tagCondition = (st: Statement) => st.conditionKeys.some((k) => /^(ec2|aws):ResourceTag\//i.test(k));

    it('finds the grants it checks: the Workflows stack launches and terminates nodes', () => {
      const actions = allowStatements(workflows).flatMap((st) => st.actions);
      expect(actions).toEqual(expect.arrayContaining(['ec2:RunInstances', 'ec2:TerminateInstances']));
    });

    it.each(STACK_KEYS)('%s: TerminateInstances and StopInstances only on instances carrying a tag condition', (key) => {
      const problems: string[] = [];
      for (const st of allowStatements(s.templates[key].toJSON() as Template)) {
        if (!st.actions.some((a) => grants(a, 'ec2:TerminateInstances') || grants(a, 'ec2:StopInstances'))) continue;
        for (const r of st.resources) {
          if (r === '*') problems.push(`${st.where}: ${st.actions.join(',')} on *`);
          else if (r.includes('*') && !tagCondition(st))
            problems.push(`${st.where}: ${st.actions.join(',')} on ${r}, no tag condition`);
        }
      }
      expect(problems).toEqual([]);
    });

    it.each(STACK_KEYS)(
      "%s: RunInstances only with the fleet's security group, Amazon's images, tagged instances and volumes",
      (key) => {
        const problems: string[] = [];
        for (const st of allowStatements(s.templates[key].toJSON() as Template)) {
          if (!st.actions.some((a) => grants(a, 'ec2:RunInstances'))) continue;
          const requestTagged = st.conditionKeys.some((k) => /^aws:RequestTag\//i.test(k));
          for (const r of st.resources) {
            const type = /:ec2:[^:]*:[^:]*:([a-z-]+)\//.exec(r)?.[1];
            const any = r.includes('*');
            const problem =
              r === '*'
                ? 'any resource'
                : type === 'security-group' && any
                  ? 'any security group'
                  : type === 'image' && any && !st.conditionKeys.includes('ec2:Owner')
                    ? 'any image, no ec2:Owner condition'
                    : (type === 'instance' || type === 'volume') && any && !requestTagged
                      ? 'no aws:RequestTag condition'
                      : undefined;
            if (problem) problems.push(`${st.where}: RunInstances on ${r}: ${problem}`);
          }
        }
        expect(problems).toEqual([]);
      },
    );
  });
});
