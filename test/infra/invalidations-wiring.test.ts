/**
 * Where invalidations live in a deployment (issue 24, items 1 and 3): the admin function, outside the VPC and
 * without the cold tier, flushes namespaces and reads the invalidation log through the one document the data
 * functions check (never a copy in its own memory), with access to that object alone; the function serving the
 * tenant flush and the prefix invalidation may start the invalidation-sweep workflow, and no other.
 *
 * The S3 rule this relies on: a GET or HEAD of a missing key answers 404 only to a caller with s3:ListBucket on the
 * bucket (evaluated with the key as s3:prefix), 403 otherwise, so before the first invalidation the admin function
 * must be able to list exactly that key.
 * https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html
 * https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
 */
import { INVALIDATIONS_KEY } from '../../core/coordinator/invalidations.js';
import { SYSTEM_NAMESPACE } from '../../core/model/keys.js';
import { s3ObjectKey } from '../../core/tiers/storage-key.js';
import { dev as devConfig } from '../../cdk/config/dev.js';
import { loadEnvironmentConfig } from '../../cdk/config/load.js';
import { configErrorOf } from './helpers/config-errors.js';
import { synthesized } from './helpers/synth.js';

type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };

describe('Invalidations wiring', () => {
  const dev = synthesized('dev', { nag: false });
  const api = (dev.templates.api.toJSON() as { Resources: Record<string, Resource> }).Resources;
  const data = (dev.templates.data.toJSON() as { Resources: Record<string, Resource> }).Resources;
  const fn = (group: string) =>
    Object.values(api).find(
      (r) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description ?? '').includes(`API '${group}'`),
    )!;
  const env = (group: string) => ((fn(group).Properties.Environment as Json).Variables ?? {}) as Json;

  it("gives the admin function the cold tier's bucket and prefix for the document, and no cold tier", () => {
    const vars = env('admin');
    expect(vars.STRATA_INVALIDATIONS_BUCKET).toBeDefined();
    expect(vars.STRATA_INVALIDATIONS_PREFIX).toBe(dev.stacks.data.coldTier.prefix);
    expect(vars.STRATA_S3_BUCKET).toBeUndefined();
    // The data functions hold the cold tier, whose lowest tier holds the same document.
    expect(env('batch').STRATA_S3_BUCKET).toBeDefined();
  });

  it('grants read, conditional write and a listing of the document alone', () => {
    const key = s3ObjectKey(dev.stacks.data.coldTier.prefix, SYSTEM_NAMESPACE, INVALIDATIONS_KEY);
    const policies = Object.values(data).filter(
      (r) => r.Type === 'AWS::IAM::ManagedPolicy' && String(r.Properties.Description ?? '').startsWith('Strata invalidations'),
    );
    expect(policies).toHaveLength(1);
    const statements = (policies[0]!.Properties.PolicyDocument as { Statement: Json[] }).Statement;
    const text = JSON.stringify(statements);
    expect(text).toContain(`/${key}`);
    expect(statements.map((s) => s.Action)).toEqual([['s3:GetObject', 's3:PutObject'], 's3:ListBucket']);
    expect(statements[1]!.Condition).toEqual({ StringLike: { 's3:prefix': [key] } });
    expect(text).not.toContain('*');
  });

  it("tells every API function the tag sweeps' window", () => {
    for (const group of ['batch', 'admin']) expect(env(group).STRATA_TAG_SWEEP_WINDOW_MINUTES).toBe('60');
  });

  it('makes a tag sweep wait for its window on an absolute time, before its first step', () => {
    // Wait: "exactly one of Seconds, Timestamp, SecondsPath, or TimestampPath"; the path's value an RFC 3339 UTC
    // time (sweep-steps.ts checks the input's `notBefore`: https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html).
    const wf = (dev.templates.workflows.toJSON() as { Resources: Record<string, Resource> }).Resources;
    const machine = Object.values(wf).find(
      (r) => r.Type === 'AWS::StepFunctions::StateMachine' && JSON.stringify(r.Properties).includes('invalidation-sweep.begin'),
    )!;
    const raw = JSON.stringify(machine.Properties.DefinitionString);
    // First the request a sweep request's S3 event names, if any (test/infra/sweep-request-wiring.test.ts), then this.
    expect(raw).toContain('\\"StartAt\\":\\"FromRequest\\"');
    expect(raw).toContain('\\"Default\\":\\"Scheduled\\"');
    expect(raw).toMatch(
      /\\"WaitForWindow\\":\{\\"Type\\":\\"Wait\\",\\"TimestampPath\\":\\"\$\.notBefore\\",\\"Next\\":\\"Begin\\"\}/,
    );
  });

  it('lets the batch function start no workflow itself: its VPC has no route to Step Functions', () => {
    // Its sweeps start from their requests' S3 events (test/infra/sweep-request-wiring.test.ts).
    expect(env('batch').STRATA_WORKFLOW_ARNS).toBeUndefined();
    expect(env('batch').STRATA_SWEEP_TRIGGER).toBe('s3-event');
    const api = dev.templates.api.toJSON() as { Resources: Record<string, Resource> };
    const policies = Object.entries(api.Resources).filter(
      ([id, r]) => r.Type === 'AWS::IAM::Policy' && /^BatchFunction/.test(id),
    );
    expect(JSON.stringify(policies)).not.toContain('states:');
  });
});

describe('tag sweeps config', () => {
  it("refuses a window the sweep's state machine could not wait for, and says what to do", () => {
    const files = { dev: { ...devConfig, workflows: { tagSweepWindowMinutes: 1440 } } };
    const message = configErrorOf(() => loadEnvironmentConfig('dev', { context: {}, env: {} }, files));
    expect(message).toMatch(/tagSweepWindowMinutes \(1440\) is at most 720 .*use 0 to start no tag sweeps/);
    const off = { dev: { ...devConfig, workflows: { tagSweepWindowMinutes: 0 } } };
    expect(loadEnvironmentConfig('dev', { context: {}, env: {} }, off).workflows.tagSweepWindowMinutes).toBe(0);
  });
});
