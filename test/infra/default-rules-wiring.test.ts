import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { buildStrataApp } from '../../cdk/app.js';
import { dev } from '../../cdk/config/dev.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { policyDefaultsOf } from '../../cdk/lib/policy-defaults.js';
import { compilePolicyInput } from '../../core/policy/compile.js';
import { defaultRulesOptionsSchema } from '../../core/policy/defaults.js';
import { configErrorOf } from './helpers/config-errors.js';
import { PLACEHOLDER_CACHENODE, cdkJsonContext, synthesized } from './helpers/synth.js';

/**
 * The loops the stacks used to wire up themselves (the node-fill alarm's response, the eviction schedule, paper 000's
 * scale trigger) are the policies' default rules when the policy evaluator is on (the default), and stay hard-wired
 * without it: what each function is told, what is (not) deployed, and what watches the ticker instead of the trigger.
 */
type Fn = { Properties: { Description?: string; Environment?: { Variables?: Record<string, unknown> } } };
const functions = (t: Template) => Object.values(t.findResources('AWS::Lambda::Function')) as Fn[];
const defaultsOf = (f: Fn) => f.Properties.Environment?.Variables?.STRATA_POLICY_DEFAULTS;

describe('with the policy evaluator (prod)', () => {
  const prod = synthesized('prod', { nag: false });

  it('gives every function that compiles policies the same default-rule settings, from the config', () => {
    const expected = JSON.stringify(policyDefaultsOf(prod.config));
    const api = functions(prod.templates.api);
    const ticker = functions(prod.templates.workflows).filter((f) =>
      /policy evaluator|write-back flush|job/i.test(f.Properties.Description ?? ''),
    );
    expect(api.length).toBe(5);
    expect(ticker.length).toBeGreaterThanOrEqual(2);
    for (const f of [...api, ...ticker])
      expect({ fn: f.Properties.Description, v: defaultsOf(f) }).toEqual({ fn: f.Properties.Description, v: expected });
    // What the rules are: the node-fill eviction at the alarm's watermark, EvictToS3 every 6 hours, paper 000's trigger.
    const options = defaultRulesOptionsSchema.parse(JSON.parse(expected));
    expect(options).toMatchObject({
      nodeFill: 'evict',
      nodeFillPercent: 85,
      evictEveryHours: 6,
      pruneOrderMarkersEveryHours: 168,
    });
    expect(options.prelaunch).toMatchObject({ unit: 'bytes', lowRate: 50, highRate: 250, mode: 'incremental' });
    const ids = compilePolicyInput({}, { background: true, defaults: options }).rules.map((r) => r.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'default-evict-on-node-fill',
        'default-evict-schedule',
        'default-prelaunch',
        'default-prune-order-markers',
      ]),
    );
  });

  it('lets the evaluator start, list and follow OrderMarkers, for the rule default-prune-order-markers', () => {
    const evaluator = functions(prod.templates.workflows).find((f) => /policy evaluator/i.test(f.Properties.Description ?? ''));
    const arns = JSON.parse(
      JSON.stringify(evaluator?.Properties.Environment?.Variables?.STRATA_WORKFLOW_ARNS ?? '{}'),
    ) as unknown;
    expect(JSON.stringify(arns)).toMatch(/order-markers/);
    const statements = Object.values(prod.templates.workflows.findResources('AWS::IAM::Policy')).flatMap(
      (p) =>
        (p as { Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } } }).Properties
          .PolicyDocument.Statement,
    );
    const start = statements.filter((s) => [s.Action].flat().includes('states:StartExecution'));
    expect(JSON.stringify(start.map((s) => s.Resource))).toMatch(/WorkflowsOrderMarkers/);
  });

  it('deploys neither the trigger nor its schedule and alarms, and watches the ticker instead', () => {
    expect(prod.stacks.workflows.scaleTriggerFunction).toBeUndefined();
    const alarms = Object.values(prod.templates.monitoring.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => (a as { Properties: { AlarmName: string } }).Properties.AlarmName,
    );
    expect(alarms.filter((n) => n.includes('scale-trigger'))).toEqual([]);
    expect(alarms).toEqual(expect.arrayContaining(['strata-prod-policy-ticker-failed', 'strata-prod-policy-ticker-stopped']));
  });
});

describe('without the policy evaluator (policies.evaluator: false)', () => {
  const config = loadEnvironmentConfig('dev', { context: {}, env: {} }, { dev: { ...dev, policies: { evaluator: false } } });
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
  const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
  const wf = Template.fromStack(stacks.workflows);
  const monitoring = Template.fromStack(stacks.monitoring);

  it('runs the scale-out trigger every minute and EvictToS3 every 6 hours, as before', () => {
    wf.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^ScaleTriggerFunction'), 'Arn'] } })],
    });
    wf.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(6 hours)',
      Targets: [Match.objectLike({ Arn: { Ref: Match.stringLikeRegexp('^WorkflowsEvictToS3') } })],
    });
    // The order markers' prune, weekly. A rate expression's unit is plural for a value above 1 and singular for 1
    // (`rate(1 hours)` is refused): https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html
    wf.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(7 days)',
      Targets: [
        Match.objectLike({
          Arn: { Ref: Match.stringLikeRegexp('^WorkflowsOrderMarkers') },
          Input: JSON.stringify({ mode: 'prune' }),
        }),
      ],
    });
    expect(stacks.workflows.policyTicker).toBeUndefined();
  });

  it("runs the scale-out trigger outside the VPC on the nodes' reports: no network interface, fleet secret or node port", () => {
    type TriggerFn = { Properties: { VpcConfig?: unknown; Environment: { Variables: Record<string, unknown> } } };
    const trigger = { Properties: { Description: Match.stringLikeRegexp('scale-out trigger') } };
    const fn = Object.values(wf.findResources('AWS::Lambda::Function', trigger))[0] as TriggerFn;
    expect(fn.Properties.VpcConfig).toBeUndefined();
    const vars = fn.Properties.Environment.Variables;
    expect(Object.keys(vars).sort()).toEqual([
      'NODE_OPTIONS',
      'STRATA_ENV',
      'STRATA_NODE_STATS_ID_PREFIX',
      'STRATA_SCALE_OUT_ARN',
      'STRATA_SCALE_TRIGGER',
      'STRATA_WARM_RING_BUCKET',
      'STRATA_WARM_RING_PREFIX',
    ]);
    expect(JSON.parse(vars.STRATA_SCALE_TRIGGER as string)).toMatchObject({ lowRate: 50, highRate: 250 });
  });

  it('starts EvictToS3 from the node-fill alarm, watches the trigger, and tells no function about default rules', () => {
    const rules = Object.values(
      monitoring.findResources('AWS::Events::Rule', {
        Properties: { EventPattern: { 'detail-type': ['CloudWatch Alarm State Change'] } },
      }),
    ) as { Properties: { EventPattern: { resources: unknown }; Targets?: { Arn: unknown }[] } }[];
    const withTargets = rules.filter((r) => (r.Properties.Targets ?? []).length > 0);
    expect(withTargets).toHaveLength(1);
    expect(JSON.stringify(withTargets[0]!.Properties.EventPattern.resources)).toMatch(/NodeFill/i);
    expect(JSON.stringify(withTargets[0]!.Properties.Targets![0]!.Arn)).toMatch(/Strata-dev-Workflows.*EvictToS3/);
    const alarms = Object.values(monitoring.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => (a as { Properties: { AlarmName: string; TreatMissingData?: string } }).Properties,
    );
    // Its schedule stopping is an outage nothing else notices: no invocation in a period alarms.
    expect(alarms.find((a) => a.AlarmName === 'strata-dev-fn-scale-trigger-errors')?.TreatMissingData).toBe('breaching');
    expect(alarms.filter((a) => a.AlarmName.includes('policy-ticker'))).toEqual([]);
    const all = [...functions(Template.fromStack(stacks.api)), ...functions(wf)];
    expect(all.filter((f) => defaultsOf(f) !== undefined)).toEqual([]);
  });
});

describe('config', () => {
  it('refuses an eviction period the rule cannot have, and says what to do', () => {
    const files = { dev: { ...dev, workflows: { evictionEveryHours: 48 } } };
    const message = configErrorOf(() => loadEnvironmentConfig('dev', { context: {}, env: {} }, files));
    expect(message).toMatch(/evictionEveryHours \(48\) is at most 24 with the policy evaluator.*policies\.evaluator: false/);
    const off = { dev: { ...dev, workflows: { evictionEveryHours: 48 }, policies: { evaluator: false } } };
    expect(loadEnvironmentConfig('dev', { context: {}, env: {} }, off).workflows.evictionEveryHours).toBe(48);
  });

  it('refuses an order-marker prune period the rule cannot have, and a bad one, and says what to do', () => {
    const load = (workflows: Record<string, unknown>, policies?: Record<string, unknown>) =>
      loadEnvironmentConfig('dev', { context: {}, env: {} }, { dev: { ...dev, workflows, ...(policies ? { policies } : {}) } });
    expect(configErrorOf(() => load({ orderMarkerPruneEveryHours: 336 }))).toMatch(
      /orderMarkerPruneEveryHours \(336\) is at most 168 with the policy evaluator.*policies\.evaluator: false/,
    );
    expect(load({ orderMarkerPruneEveryHours: 336 }, { evaluator: false }).workflows.orderMarkerPruneEveryHours).toBe(336);
    expect(configErrorOf(() => load({ orderMarkerPruneEveryHours: 1.5 }))).toMatch(/whole number of hours/);
    expect(configErrorOf(() => load({ orderMarkerPruneEveryHours: -1 }))).toMatch(/0 \(off\)/);
    expect(load({}).workflows.orderMarkerPruneEveryHours).toBe(168);
  });

  it('deploys no prune schedule with 0, with or without the evaluator', () => {
    const config = loadEnvironmentConfig(
      'dev',
      { context: {}, env: {} },
      {
        dev: { ...dev, workflows: { orderMarkerPruneEveryHours: 0 }, policies: { evaluator: false } },
      },
    );
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
    const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
    const targets = JSON.stringify(Template.fromStack(stacks.workflows).findResources('AWS::Events::Rule'));
    expect(targets).not.toMatch(/WorkflowsOrderMarkers/);
    expect(policyDefaultsOf(config).pruneOrderMarkersEveryHours).toBe(0);
  });
});
