/**
 * Spot capacity (issue 23 item 6): the configuration's rules, and what a spot or mixed fleet synthesizes: the
 * instant EC2 Fleet launch inside ScaleOut, its IAM, the launch template it needs, and the EventBridge rule that
 * sends EC2's Spot warnings to the spot-interruption handler. Only real AWS runs any of it (LocalStack's EC2 models
 * neither CreateFleet's allocation nor Spot, and sends no Spot events), so each AWS rule is written here against the
 * documented shapes, with the page in a comment.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { buildStrataApp } from '../../cdk/app.js';
import { dev } from '../../cdk/config/dev.js';
import { environmentConfigSchema, type EnvironmentConfigInput } from '../../cdk/config/schema.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { stateMachinesOf } from '../../cdk/lib/workflow-definitions.js';
import { cdkJsonContext, PLACEHOLDER_CACHENODE } from './helpers/synth.js';
import { DOCUMENTED_REBALANCE, DOCUMENTED_WARNING } from '../helpers/spot-events.js';

type Json = Record<string, unknown>;

function configWith(fleet: Partial<EnvironmentConfigInput['fleet']>) {
  return environmentConfigSchema.safeParse({ ...dev, fleet: { ...dev.fleet, ...fleet } });
}

function messages(fleet: Partial<EnvironmentConfigInput['fleet']>): string[] {
  const r = configWith(fleet);
  return r.success ? [] : r.error.issues.map((i) => i.message);
}

function synth(fleet: Partial<EnvironmentConfigInput['fleet']>) {
  const config = configWith(fleet);
  if (!config.success) throw new Error(config.error.message);
  const context: Json = { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] };
  const app = new App({ outdir: mkdtempSync(join(tmpdir(), 'strata-spot-')), context, analyticsReporting: false });
  const stacks = buildStrataApp(app, {
    config: { ...config.data, monitoring: { ...config.data.monitoring, alarmDestination: { emails: ['a@example.com'] } } },
    cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE),
    nag: false,
  });
  app.synth();
  return { stacks, workflows: Template.fromStack(stacks.workflows), fleet: Template.fromStack(stacks.fleet) };
}

const SPOT_TYPES = ['t4g.small', 't4g.medium', 'm7g.medium'];

describe('fleet capacity configuration', () => {
  it('defaults to on-demand: today behaviour, no spot rule', () => {
    const r = configWith({});
    expect(r.success && r.data.fleet.capacity).toBe('on-demand');
  });

  it('refuses spot with a single instance type, and says why', () => {
    // One type is one Spot pool per AZ: AWS can reclaim the pool, and with it every node, at once.
    expect(messages({ capacity: 'spot' }).join('\n')).toMatch(/needs at least 2 instance types.*whole pool at once/);
    expect(messages({ capacity: 'mixed', instanceTypes: ['t4g.small'] }).join('\n')).toMatch(/at least 2 instance types/);
    expect(messages({ capacity: 'spot', instanceTypes: SPOT_TYPES })).toEqual([]);
  });

  it('refuses onDemandBase outside a mixed fleet, and non-Graviton or repeated types', () => {
    expect(messages({ capacity: 'spot', instanceTypes: SPOT_TYPES, onDemandBase: 1 }).join('\n')).toMatch(
      /onDemandBase applies to capacity 'mixed' only/,
    );
    expect(messages({ capacity: 'spot', instanceTypes: ['t4g.small', 'm7i.large'] }).join('\n')).toMatch(/not a Graviton/);
    expect(messages({ capacity: 'spot', instanceTypes: ['t4g.small', 't4g.small'] }).join('\n')).toMatch(/listed twice/);
  });
});

// AWS's documented sample events (test/helpers/spot-events.ts).
const INTERRUPTION_SAMPLE = DOCUMENTED_WARNING;
const REBALANCE_SAMPLE = DOCUMENTED_REBALANCE;
const STATE_CHANGE = {
  ...INTERRUPTION_SAMPLE,
  'detail-type': 'EC2 Instance State-change Notification',
  detail: { 'instance-id': 'i-1234567890abcdef0', state: 'shutting-down' },
};

/**
 * EventBridge's matching for the pattern forms the rule uses: "each field ... specified in the pattern must be in the
 * event", and an array of values matches when the event's value is one of them (exact, case-sensitive).
 * https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html
 */
function matches(pattern: Json, event: Json): boolean {
  return Object.entries(pattern).every(([k, p]) => {
    const v = event[k];
    if (Array.isArray(p)) return p.every((x) => typeof x !== 'object') && (p as unknown[]).includes(v);
    return typeof p === 'object' && p !== null && typeof v === 'object' && v !== null && matches(p as Json, v as Json);
  });
}

describe.each([
  ['spot', { capacity: 'spot' as const, instanceTypes: SPOT_TYPES }],
  ['mixed', { capacity: 'mixed' as const, instanceTypes: SPOT_TYPES, onDemandBase: 2 }],
])('a %s fleet', (kind, fleet) => {
  const s = synth(fleet);
  const resources = (t: Template, type: string) => Object.entries(t.findResources(type)) as [string, { Properties: Json }][];
  const rule = () => {
    const rules = resources(s.workflows, 'AWS::Events::Rule').filter(([, r]) => /Spot/.test(String(r.Properties.Description)));
    expect(rules).toHaveLength(1);
    return rules[0]![1].Properties;
  };
  const spotFunction = () => {
    const fns = resources(s.workflows, 'AWS::Lambda::Function').filter(([, r]) =>
      /spot interruption/.test(String(r.Properties.Description)),
    );
    expect(fns).toHaveLength(1);
    return fns[0]!;
  };

  it("matches AWS's sample interruption warning and rebalance recommendation, and no other EC2 event", () => {
    const pattern = rule().EventPattern as Json;
    expect(matches(pattern, INTERRUPTION_SAMPLE)).toBe(true);
    expect(matches(pattern, REBALANCE_SAMPLE)).toBe(true);
    expect(matches(pattern, STATE_CHANGE)).toBe(false);
  });

  it('targets the spot-interruption function with a bounded retry and a dead-letter queue', () => {
    const [fnId] = spotFunction();
    const targets = rule().Targets as Json[];
    expect(targets).toHaveLength(1);
    expect(targets[0]!.Arn).toEqual({ 'Fn::GetAtt': [fnId, 'Arn'] });
    // RetryPolicy: MaximumRetryAttempts 0-185, MaximumEventAgeInSeconds 60-86400; a DLQ keeps what exhausts them.
    // https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html
    const retry = targets[0]!.RetryPolicy as { MaximumRetryAttempts: number; MaximumEventAgeInSeconds: number };
    expect(retry.MaximumRetryAttempts).toBeGreaterThanOrEqual(0);
    expect(retry.MaximumRetryAttempts).toBeLessThanOrEqual(185);
    expect(retry.MaximumEventAgeInSeconds).toBeGreaterThanOrEqual(60);
    expect(retry.MaximumEventAgeInSeconds).toBeLessThanOrEqual(120);
    expect((targets[0]!.DeadLetterConfig as Json).Arn).toBeDefined();
  });

  it("bounds Lambda's own retries of a failed handler to the drain's time scale", () => {
    // Lambda retries an asynchronous invocation whose function fails (MaximumRetryAttempts 0-2, default 2) while the
    // event is younger than MaximumEventAgeInSeconds (60-21600, default six hours):
    // https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html
    const [fnId] = spotFunction();
    const configs = resources(s.workflows, 'AWS::Lambda::EventInvokeConfig').filter(
      ([, c]) => JSON.stringify(c.Properties.FunctionName) === JSON.stringify({ Ref: fnId }),
    );
    expect(configs).toHaveLength(1);
    expect(configs[0]![1].Properties).toMatchObject({ MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 900 });
  });

  it('gives the function the ring store and the two state machines it starts, outside the VPC', () => {
    const [, fn] = spotFunction();
    expect(fn.Properties.VpcConfig).toBeUndefined();
    const vars = (fn.Properties.Environment as { Variables: Json }).Variables;
    for (const v of ['STRATA_WARM_RING_BUCKET', 'STRATA_WARM_RING_PREFIX', 'STRATA_SCALE_IN_ARN', 'STRATA_SCALE_OUT_ARN'])
      expect(vars[v]).toBeDefined();
    // A failed drain's replacement is the failure detector's to start.
    expect(vars.STRATA_REPLACE_NODE_ARN).toBeUndefined();
  });

  it('lets the function start exactly ScaleIn and ScaleOut', () => {
    const [fnId, fn] = spotFunction();
    const roleId = ((fn.Properties.Role as Json)['Fn::GetAtt'] as string[])[0];
    const started = resources(s.workflows, 'AWS::IAM::Policy')
      .filter(([, p]) => (p.Properties.Roles as Json[]).some((r) => r.Ref === roleId))
      .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Json[] }).Statement)
      .filter((st) => [st.Action].flat().includes('states:StartExecution'))
      .flatMap((st) => [st.Resource].flat().map((r) => (r as Json).Ref));
    const machines = resources(s.workflows, 'AWS::StepFunctions::StateMachine');
    const named = (w: string) => machines.find(([, m]) => m.Properties.StateMachineName === `strata-dev-${w}`)![0];
    expect(started.sort()).toEqual([named('scale-in'), named('scale-out')].sort());
    expect(fnId).toBeDefined();
  });

  it('names the security group in the launch template (an EC2 Fleet request has no network settings) and no network interface', () => {
    const lt = resources(s.fleet, 'AWS::EC2::LaunchTemplate')[0]![1].Properties.LaunchTemplateData as Json;
    expect(lt.SecurityGroupIds).toHaveLength(1);
    expect(lt.NetworkInterfaces).toBeUndefined();
    // Volumes take the fleet's tag from the template: an instant fleet's request tags only fleet and instance.
    const volumeTags = (lt.TagSpecifications as { ResourceType: string; Tags: { Key: string; Value: string }[] }[]).find(
      (t) => t.ResourceType === 'volume',
    )!.Tags;
    expect(volumeTags).toEqual(expect.arrayContaining([{ Key: 'strata:fleet', Value: 'strata-dev' }]));
  });

  it('launches into subnets that assign no public IP (nothing in an EC2 Fleet request can turn it off)', () => {
    const subnets = resources(Template.fromStack(s.stacks.network), 'AWS::EC2::Subnet');
    expect(subnets.length).toBeGreaterThan(0);
    for (const [, sn] of subnets) expect(sn.Properties.MapPublicIpOnLaunch).toBe(false);
  });

  describe('the CreateFleet request of ScaleOut', () => {
    const scaleOut = stateMachinesOf(s.workflows.toJSON() as Parameters<typeof stateMachinesOf>[0])['strata-dev-scale-out']!;
    const launch = scaleOut.States.LaunchNode as { Type: string; Branches: { States: Record<string, Json> }[] };
    const branch = launch.Branches[0]!.States;
    const create = Object.values(branch).find((st) => String(st.Resource).endsWith(':ec2:createFleet'))!;
    const p = create.Parameters as Json;

    it('is a Parallel state around an instant fleet, so callers chain and catch it like the task', () => {
      expect(launch.Type).toBe('Parallel');
      expect(create).toBeDefined();
    });

    it('asks for one instance of an instant fleet, idempotent per launch', () => {
      // CreateFleet: Type instant is synchronous and returns Instances and Errors; ClientToken makes it idempotent.
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html
      expect(p.Type).toBe('instant');
      expect(p['ClientToken.$']).toBe('$.begin.launch.clientToken');
      expect((p.TargetCapacitySpecification as Json).TotalTargetCapacity).toBe(1);
      expect((p.TargetCapacitySpecification as Json)['DefaultTargetCapacityType.$']).toBeDefined();
    });

    it("offers every configured type in the begin step's subnet", () => {
      const configs = p.LaunchTemplateConfigs as { LaunchTemplateSpecification: Json; Overrides: Json[] }[];
      expect(configs).toHaveLength(1);
      // A launch template specification needs the template and a version.
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateSpecificationRequest.html
      expect(configs[0]!.LaunchTemplateSpecification.Version).toBe('$Latest');
      expect(configs[0]!.Overrides.map((o) => o.InstanceType)).toEqual(SPOT_TYPES);
      for (const o of configs[0]!.Overrides) expect(o['SubnetId.$']).toBe('$.begin.launch.subnetId');
    });

    it('allocates Spot by price-capacity-optimized and on-demand by the configured order', () => {
      // SpotOptionsRequest AllocationStrategy: price-capacity-optimized (recommended) | capacity-optimized | ... ;
      // OnDemandOptionsRequest AllocationStrategy: lowest-price | prioritized (Priority of each override).
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_SpotOptionsRequest.html
      // https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_OnDemandOptionsRequest.html
      expect((p.SpotOptions as Json).AllocationStrategy).toBe('price-capacity-optimized');
      expect((p.OnDemandOptions as Json).AllocationStrategy).toBe('prioritized');
    });

    it('tags only the fleet and the instance, both with the fleet tag the IAM conditions need', () => {
      // "If the fleet type is instant, specify a resource type of fleet to tag the fleet or instance to tag the
      // instances at launch." https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html
      const specs = p.TagSpecifications as { ResourceType: string; Tags: Json[] }[];
      expect(specs.map((t) => t.ResourceType).sort()).toEqual(['fleet', 'instance']);
      for (const t of specs) expect(t.Tags).toEqual(expect.arrayContaining([{ Key: 'strata:fleet', Value: 'strata-dev' }]));
    });

    it(`decides on-demand or spot at launch (${kind})`, () => {
      const counts = Object.values(branch).filter((st) => String(st.Resource).endsWith(':ec2:describeInstances'));
      // Spot: only the describe of the launched node; mixed: two counts before it.
      expect(counts).toHaveLength(kind === 'mixed' ? 3 : 1);
    });
  });

  it('grants CreateFleet only with the fleet tag on what it creates, and passes cdk-nag', () => {
    const statements = resources(s.workflows, 'AWS::IAM::Policy').flatMap(
      ([, p]) => (p.Properties.PolicyDocument as { Statement: Json[] }).Statement,
    );
    const createFleet = statements.filter((st) => [st.Action].flat().includes('ec2:CreateFleet'));
    expect(createFleet.length).toBeGreaterThan(0);
    for (const st of createFleet) {
      const text = JSON.stringify(st.Resource);
      if (/(instance|volume|fleet)\/\*/.test(text) && !/spot-instances-request/.test(text))
        expect(JSON.stringify(st.Condition)).toMatch(/aws:RequestTag\/strata:fleet/);
    }
    for (const stack of [s.stacks.workflows, s.stacks.fleet]) {
      const report = new AwsSolutionsChecks().validateScope(stack);
      const findings = report.violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
      expect(findings).toEqual([]);
    }
  });
});

describe('an on-demand fleet', () => {
  it('has no spot-interruption rule or function (EC2 sends those events for Spot Instances only)', () => {
    const s = synth({});
    expect(JSON.stringify(s.workflows.findResources('AWS::Events::Rule'))).not.toMatch(/Spot Instance/);
    expect(s.stacks.workflows.spotInterruptionFunction).toBeUndefined();
  });
});
