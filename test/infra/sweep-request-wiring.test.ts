/**
 * How a flush or an invalidation made through the data API starts its invalidation-sweep in a deployment: the data
 * functions run in a VPC with no route to Step Functions (no NAT gateway, no interface endpoint: an idle environment
 * pays for neither, test/infra/idle-cost.test.ts), so they write a sweep request `<prefix>/_sweeps/<name>.sweep`
 * (core/api/namespace-operations.ts) and an EventBridge rule on its S3 event starts the workflow with the request's
 * key. The AWS rules it relies on, each checked here over the synthesized templates:
 *
 * - S3 sends its events to EventBridge once enabled on the bucket, Object Created with detail.bucket.name and
 *   detail.object.key: https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html,
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html. `wildcard` matching:
 *   https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html.
 * - EventBridge delivers an event at least once (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html
 *   and the targets' retry policy), and the execution it starts gets a generated name: the state machine reads the
 *   request, and one that is gone (a repeated event after the sweep removed it) ends the execution.
 * - A request is created with If-None-Match: * (S3 conditional writes answer 412 when the object exists:
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html), so the tag invalidations that
 *   share one sweep create one object, one event, one execution (checked against LocalStack in
 *   test/integration/api-invalidate.test.ts; LocalStack does not check AWS's rules, this file's references do).
 * - states:StartExecution acts on the `stateMachine` resource type:
 *   https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html.
 */
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { buildStrataApp } from '../../cdk/app.js';
import { dev as devConfig } from '../../cdk/config/dev.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { definitionOf, expectS3RequestRule, s3RequestRules, stateMachineCalling } from './helpers/workflow-templates.js';
import { PLACEHOLDER_CACHENODE, cdkJsonContext, synthesized } from './helpers/synth.js';

type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };
const resources = (t: { toJSON(): unknown }) => (t.toJSON() as { Resources: Record<string, Resource> }).Resources;
const functionsOf = (api: Record<string, Resource>) =>
  Object.values(api)
    .filter((r) => r.Type === 'AWS::Lambda::Function' && /API '(\w+)'/.test(String(r.Properties.Description ?? '')))
    .map((r) => ({
      group: /API '(\w+)'/.exec(String(r.Properties.Description))![1]!,
      inVpc: r.Properties.VpcConfig !== undefined,
      vars: ((r.Properties.Environment as Json | undefined)?.Variables ?? {}) as Json,
    }));
const sweepRules = (wf: Record<string, Resource>) => s3RequestRules(wf, '_sweeps/');

describe('sweep request wiring', () => {
  const dev = synthesized('dev', { nag: false });
  const api = resources(dev.templates.api);
  const wf = resources(dev.templates.workflows);
  const machine = stateMachineCalling(wf, 'invalidation-sweep.batch');
  const definition = () => definitionOf(machine[1]);

  it('tells every data function in the VPC to start sweeps by request, and the admin function to start them itself', () => {
    const fns = functionsOf(api);
    expect(fns.map((f) => f.group).sort()).toEqual(['admin', 'batch', 'keys', 'service', 'transfer']);
    for (const f of fns) {
      expect([f.group, f.vars.STRATA_SWEEP_TRIGGER]).toEqual([f.group, f.inVpc ? 's3-event' : undefined]);
      if (f.inVpc) expect([f.group, f.vars.STRATA_WORKFLOW_ARNS]).toEqual([f.group, undefined]);
    }
  });

  it("starts the sweep from the request's S3 event: Object Created of <prefix>/_sweeps/*.sweep, input = its key", () => {
    const data = resources(dev.templates.data);
    const buckets = Object.values(data).filter((r) => r.Type === 'AWS::S3::Bucket' && r.Properties.NotificationConfiguration);
    expect(buckets.map((b) => b.Properties.NotificationConfiguration)).toEqual([
      { EventBridgeConfiguration: { EventBridgeEnabled: true } },
    ]);
    expectS3RequestRule(wf, '_sweeps/', `${dev.stacks.data.coldTier.prefix}/_sweeps/*.sweep`, machine[0]);
  });

  it('reads the request before waiting for its window, and ends at once when the request is gone', () => {
    const d = definition();
    expect(d.StartAt).toBe('FromRequest');
    const from = d.States.FromRequest as { Choices: { Variable: string; IsPresent: boolean; Next: string }[]; Default: string };
    expect(from.Choices).toEqual([{ Variable: '$.object', IsPresent: true, Next: 'LoadRequest' }]);
    expect(from.Default).toBe('Scheduled');
    const load = d.States.LoadRequest as { Next: string; Parameters: Json };
    expect(load.Parameters).toMatchObject({ step: 'invalidation-sweep.load', 'object.$': '$.object' });
    // No ResultPath: the request replaces the state (the default, as "$" would:
    // https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultpath.html).
    expect(load).not.toHaveProperty('ResultPath');
    expect(load.Next).toBe('RequestFound');
    const found = d.States.RequestFound as { Choices: { Variable: string; Next: string }[]; Default: string };
    expect([found.Choices[0]!.Variable, found.Choices[0]!.Next, found.Default]).toEqual(['$.ns', 'Scheduled', 'RequestGone']);
    expect(d.States.RequestGone).toEqual({ Type: 'Succeed' });
    expect((d.States.Scheduled as { Choices: { Next: string }[] }).Choices[0]!.Next).toBe('WaitForWindow');
  });
});

describe('sweep request wiring with workflows.invalidationSweeps false', () => {
  const build = (workflows: Json) => {
    const config = loadEnvironmentConfig('dev', { context: {}, env: {} }, { dev: { ...devConfig, workflows } });
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
    return buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
  };
  const json = (stack: Parameters<typeof Template.fromStack>[0]) => resources(Template.fromStack(stack));

  it('starts no sweep from the data API, and the bucket still sends events for the upload commits', () => {
    const stacks = build({ invalidationSweeps: false });
    expect(stacks.workflows.sweepRequestRule).toBeUndefined();
    expect(sweepRules(json(stacks.workflows))).toEqual([]);
    for (const f of functionsOf(json(stacks.api))) expect([f.group, f.vars.STRATA_SWEEP_TRIGGER]).toEqual([f.group, undefined]);
    const data = json(stacks.data);
    expect(Object.values(data).some((r) => r.Type === 'AWS::S3::Bucket' && r.Properties.NotificationConfiguration)).toBe(true);
  });

  it('keeps the bucket sending events for the sweeps when only async upload completion is off', () => {
    const stacks = build({ asyncUploadCompletion: false });
    expect(stacks.workflows.uploadCommitRule).toBeUndefined();
    expect(sweepRules(json(stacks.workflows))).toHaveLength(1);
    const data = json(stacks.data);
    expect(Object.values(data).some((r) => r.Type === 'AWS::S3::Bucket' && r.Properties.NotificationConfiguration)).toBe(true);
  });

  it('is on by default', () => {
    expect(loadEnvironmentConfig('dev', { context: {}, env: {} }).workflows.invalidationSweeps).toBe(true);
  });
});
