/**
 * The upload-commit workflow in a deployment (core/api/async-complete.ts): its state machine (one step, a catch
 * that gives the upload back), the step Lambda's timeout that bounds it, and the transfer function's right to start
 * it and nothing else. The AWS rules it relies on, each checked here over the synthesized templates:
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
 *   https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html. The transfer
 *   function's grant names the upload-commit state machine alone.
 */
import { uploadCommitRequest } from '../../core/workflows/steps/upload-commit-steps.js';
import { synthesized } from './helpers/synth.js';

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
  const machine = Object.entries(wf).find(
    ([, r]) => r.Type === 'AWS::StepFunctions::StateMachine' && JSON.stringify(r.Properties).includes('upload-commit.commit'),
  )!;
  const definition = () => {
    // DefinitionString is an Fn::Join of literal text and the step Lambda's ARN: the text is what matters here.
    const parts = (machine[1].Properties.DefinitionString as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1];
    return JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'ARN')).join('')) as {
      StartAt: string;
      States: Record<string, Json>;
    };
  };

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

  it('lets the transfer function start the upload-commit state machine and do nothing else with Step Functions', () => {
    const [id, transfer] = fnEntry('transfer');
    const vars = ((transfer.Properties.Environment as Json).Variables ?? {}) as Json;
    const arns = JSON.stringify(vars.STRATA_WORKFLOW_ARNS);
    expect(arns).toContain('upload-commit');
    expect(arns.match(/\\"[a-z-]+\\":/g)).toEqual(['\\"upload-commit\\":']);
    const role = (transfer.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const policies = Object.values(api).filter(
      (r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(role),
    );
    const statements = policies.flatMap((p) => (p.Properties.PolicyDocument as { Statement: Json[] }).Statement);
    const states = statements.filter((s) => JSON.stringify(s.Action).includes('states:'));
    expect(states).toHaveLength(1);
    expect(states[0]!.Action).toBe('states:StartExecution');
    // One resource: the upload-commit state machine's ARN, exported by the Workflows stack.
    const resource = states[0]!.Resource as Json;
    expect(Array.isArray(resource)).toBe(false);
    expect(JSON.stringify(resource)).toMatch(/UploadCommit/);
    expect(JSON.stringify(resource)).not.toMatch(
      /ScaleOut|ScaleIn|EvictToS3|TierMigrate|ReplaceNode|RollingUpgrade|Sweep|Markers/,
    );
    expect(id).toMatch(/^TransferFunction/);
  });

  it('tells no other data function about the upload-commit workflow', () => {
    for (const group of ['keys', 'batch', 'service']) {
      const vars = ((fnEntry(group)[1].Properties.Environment as Json).Variables ?? {}) as Json;
      expect(JSON.stringify(vars.STRATA_WORKFLOW_ARNS ?? '')).not.toContain('upload-commit');
    }
  });
});
