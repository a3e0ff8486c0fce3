/**
 * The upload-commit workflow in a deployment (core/api/async-complete.ts): its state machine (one step, a catch
 * that gives the upload back), the step Lambda's timeout that bounds it, and how a completion starts it (a commit
 * request's S3 event, through an EventBridge rule whose role may start it and nothing else). The AWS rules it relies on, each checked here over the synthesized templates:
 *
 * - API Gateway waits at most 29 s for a REST integration by default (raisable only by a quota request, for Regional
 *   and private REST APIs): https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html. So the transfer
 *   function, which runs the synchronous completions, stops at 29 s, and longer copies go to the workflow.
 * - A Lambda function runs at most 900 s (15 minutes):
 *   https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html. The step that copies runs in the step
 *   Lambda, given exactly that.
 * - A state's input, a task's parameters and an execution's input are at most 256 KiB (262,144 bytes):
 *   https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html,
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_StateEnteredEventDetails.html. The job's input
 *   is the upload's identity alone (no part list), whose largest form stays far below.
 * - states:StartExecution acts on the `stateMachine` resource type (its ARN):
 *   https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html. The grant (of the
 *   EventBridge rule's role: the transfer function, in a VPC without a route to Step Functions, writes a commit
 *   request whose S3 event starts the job) names the upload-commit state machine alone.
 * - S3 sends its events to EventBridge once enabled on the bucket, Object Created with detail.bucket.name and
 *   detail.object.key: https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html,
 *   https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html.
 */
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { buildStrataApp } from '../../cdk/app.js';
import { dev as devConfig } from '../../cdk/config/dev.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { CacheNodeBundle } from '../../cdk/constructs/cache-node-fleet.js';
import { uploadCommitRequest } from '../../core/workflows/steps/upload-commit-steps.js';
import { definitionOf, expectS3RequestRule, s3RequestRules, stateMachineCalling } from './helpers/workflow-templates.js';
import { PLACEHOLDER_CACHENODE, cdkJsonContext, synthesized } from './helpers/synth.js';

type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };

describe('upload-commit wiring', () => {
  const dev = synthesized('dev', { nag: false });
  const resources = (t: { toJSON(): unknown }) => (t.toJSON() as { Resources: Record<string, Resource> }).Resources;
  const api = resources(dev.templates.api);
  const wf = resources(dev.templates.workflows);
  const fnEntry = (group: string) =>
    Object.entries(api).find(
      ([, r]) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').includes(`API '${group}'`),
    )!;
  const machine = stateMachineCalling(wf, 'upload-commit.commit');
  const definition = () => definitionOf(machine[1]);

  it('defines the state machine: Commit (not retried on failure), its catch GiveBack, then Fail', () => {
    expect(machine[1].Properties.StateMachineName).toBe('strata-dev-upload-commit');
    const d = definition();
    expect(d.StartAt).toBe('Commit');
    const commit = d.States.Commit!;
    expect(commit.Type).toBe('Task');
    expect(commit.Parameters).toEqual({
      step: 'upload-commit.commit',
      workflow: 'upload-commit',
      'execution.$': '$$.Execution.Name',
      'request.$': '$',
    });
    // Only Lambda's own service errors are retried: the step itself is not re-run after a failure or a timeout.
    const retries = commit.Retry as { ErrorEquals: string[]; MaxAttempts?: number }[];
    expect(retries.filter((r) => r.ErrorEquals.includes('States.TaskFailed')).map((r) => r.MaxAttempts)).toEqual([0]);
    expect(commit.Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'GiveBack' }]);
    expect(d.States.GiveBack).toMatchObject({ Type: 'Task', Next: 'NotCommitted' });
    expect(d.States.NotCommitted).toMatchObject({ Type: 'Fail', Error: 'UploadNotCommitted' });
  });

  it("gives the step Lambda Lambda's longest timeout, 900 s, and the API functions API Gateway's 29 s", () => {
    const steps = Object.values(wf).find(
      (r) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').includes('workflow steps'),
    )!;
    expect(steps.Properties.Timeout).toBe(900);
    expect(fnEntry('transfer')[1].Properties.Timeout).toBeLessThanOrEqual(29);
    // No integration asks API Gateway for more than its default 29 s.
    const methods = Object.values(api).filter((r) => r.Type === 'AWS::ApiGateway::Method');
    expect(methods.length).toBeGreaterThan(0);
    for (const m of methods) {
      const timeout = (m.Properties.Integration as Json | undefined)?.TimeoutInMillis;
      expect(timeout === undefined || (timeout as number) <= 29_000).toBe(true);
    }
  });

  it('keeps the largest job input far below the 256 KiB payload limit', () => {
    const largest = uploadCommitRequest.parse({
      ns: 'n'.repeat(63),
      key: '\u{10FFFF}'.repeat(256), // 1024 UTF-16 units, 4 bytes each in UTF-8
      uploadId: 'u'.repeat(64),
      owner: 'o'.repeat(512),
      claimId: 'c'.repeat(64),
    });
    // The Commit task's parameters carry this input, the step and workflow names and the execution name (≤ 80).
    const params = { step: 'upload-commit.commit', workflow: 'upload-commit', execution: 'e'.repeat(80), request: largest };
    expect(Buffer.byteLength(JSON.stringify(params), 'utf8')).toBeLessThan(8 * 1024);
    expect(Buffer.byteLength(JSON.stringify(params), 'utf8')).toBeLessThan(256 * 1024);
    // An owner or key longer than these is refused before any execution starts.
    expect(uploadCommitRequest.safeParse({ ...largest, owner: 'o'.repeat(513) }).success).toBe(false);
    expect(uploadCommitRequest.safeParse({ ...largest, key: 'k'.repeat(1025) }).success).toBe(false);
  });

  it("starts the job from the commit request's S3 event: the transfer function needs no route to Step Functions", () => {
    // The transfer function runs in the VPC, which has no NAT gateway and no Step Functions endpoint (an idle
    // environment pays for neither: test/infra/idle-cost.test.ts): it writes the commit request and nothing more.
    const [, transfer] = fnEntry('transfer');
    expect(transfer.Properties.VpcConfig).toBeDefined();
    const vars = ((transfer.Properties.Environment as Json).Variables ?? {}) as Json;
    expect(vars.STRATA_UPLOAD_COMMIT_TRIGGER).toBe('s3-event');
    expect(vars.STRATA_WORKFLOW_ARNS).toBeUndefined();
    const role = (transfer.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const policies = Object.values(api).filter(
      (r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(role),
    );
    expect(JSON.stringify(policies)).not.toContain('states:');

    // The bucket sends its events to EventBridge (S3 then sends every event type:
    // https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html), set on the bucket itself.
    const data = resources(dev.templates.data);
    const buckets = Object.values(data).filter(
      (r) => r.Type === 'AWS::S3::Bucket' && (r.Properties.NotificationConfiguration as Json | undefined) !== undefined,
    );
    expect(buckets.map((b) => b.Properties.NotificationConfiguration)).toEqual([
      { EventBridgeConfiguration: { EventBridgeEnabled: true } },
    ]);
    expect(Object.values(data).some((r) => r.Type === 'Custom::S3BucketNotifications')).toBe(false);

    // The rule: S3's Object Created of `<prefix>/_uploads/*.commit` in that bucket, input = the key, and a role that
    // may start the upload-commit state machine alone.
    expectS3RequestRule(wf, '_uploads/', `${dev.stacks.data.coldTier.prefix}/_uploads/*.commit`, machine[0]);
  });

  it('gives the step Lambda the policy the transfer function compiles: the commit applies the same namespace rules', () => {
    const steps = Object.values(wf).find(
      (r) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').includes('workflow steps'),
    )!;
    const stepVars = ((steps.Properties.Environment as Json).Variables ?? {}) as Json;
    const transferVars = ((fnEntry('transfer')[1].Properties.Environment as Json).Variables ?? {}) as Json;
    const policyKeys = (v: Json) =>
      Object.keys(v)
        .filter((k) => /^STRATA_(POLICY_|NAMESPACES|KEYRING|LAMBDA_ORIGINS)/.test(k))
        .sort();
    expect(policyKeys(stepVars)).toEqual(policyKeys(transferVars));
    expect(stepVars.STRATA_POLICY_STORE).toBeDefined();
    for (const k of policyKeys(transferVars).filter((k) => k !== 'STRATA_POLICY_STORE'))
      expect([k, stepVars[k]]).toEqual([k, transferVars[k]]);
  });

  it('tells no other data function about the upload-commit workflow', () => {
    for (const group of ['keys', 'batch', 'service']) {
      const vars = ((fnEntry(group)[1].Properties.Environment as Json).Variables ?? {}) as Json;
      expect(JSON.stringify(vars.STRATA_WORKFLOW_ARNS ?? '')).not.toContain('upload-commit');
    }
  });
});

describe('upload-commit wiring with workflows.asyncUploadCompletion and invalidationSweeps false', () => {
  // The opt-out for deployments whose cold-tier writes should not pay for S3's events in EventBridge (every object's
  // events, billed per million: https://aws.amazon.com/eventbridge/pricing/). The sweeps' requests use the same
  // events (test/infra/sweep-request-wiring.test.ts): with either on, the bucket sends them.
  const config = loadEnvironmentConfig(
    'dev',
    { context: {}, env: {} },
    { dev: { ...devConfig, workflows: { asyncUploadCompletion: false, invalidationSweeps: false } } },
  );
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] }, analyticsReporting: false });
  const stacks = buildStrataApp(app, { config, cacheNodeBundle: CacheNodeBundle.fromEntry(PLACEHOLDER_CACHENODE), nag: false });
  const json = (stack: Parameters<typeof Template.fromStack>[0]) =>
    (Template.fromStack(stack).toJSON() as { Resources: Record<string, Resource> }).Resources;

  it('sends no S3 events to EventBridge, starts no job from them, and keeps every completion in the request', () => {
    expect(config.workflows.asyncUploadCompletion).toBe(false);
    const data = json(stacks.data);
    expect(Object.values(data).some((r) => r.Type === 'AWS::S3::Bucket' && r.Properties.NotificationConfiguration)).toBe(false);
    expect(stacks.workflows.uploadCommitRule).toBeUndefined();
    expect(s3RequestRules(json(stacks.workflows), 'Object Created')).toEqual([]);
    const transfer = Object.values(json(stacks.api)).find(
      (r) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').includes("API 'transfer'"),
    )!;
    const vars = ((transfer.Properties.Environment as Json).Variables ?? {}) as Json;
    // Without the trigger the runtime would ask the workflow service, which this VPC cannot reach: never asynchronous.
    expect([vars.STRATA_ASYNC_COMPLETE_BYTES, vars.STRATA_UPLOAD_COMMIT_TRIGGER]).toEqual(['0', undefined]);
  });

  it('is on by default', () => {
    expect(loadEnvironmentConfig('dev', { context: {}, env: {} }).workflows.asyncUploadCompletion).toBe(true);
  });
});
