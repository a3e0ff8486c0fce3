/** The workflow service's pure parts and the runtime's configuration of it (composition/workflow-service-env.ts). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileCasStore, S3CasStore } from '../../core/ring/store.js';
import { ConfigError } from '../../core/errors.js';
import {
  parseWorkflowArns,
  progressCasFromEnv,
  workflowEnvSchema,
  workflowServiceFromEnv,
} from '../../core/composition/workflow-service-env.js';
import { WORKFLOW_NAMES, type WorkflowProgress } from '../../core/workflows/progress.js';
import {
  EXECUTION_NAME,
  SfnWorkflowService,
  checkExecutionName,
  newExecutionName,
  progressView,
} from '../../core/workflows/admin-service.js';
import { LocalWorkflowService } from '../../core/workflows/local/local-workflow-service.js';
import type { LocalExecution } from '../../core/workflows/local/asl-runner.js';

const ARN = (wf: string) => `arn:aws:states:us-east-1:123456789012:stateMachine:strata-dev-${wf}`;

function doc(p: Partial<WorkflowProgress>): WorkflowProgress {
  return {
    execution: 'e',
    workflow: 'scale-out',
    phase: 'x',
    total: 0,
    done: 0,
    keys: 0,
    bytes: 0,
    startedAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    facts: {},
    ...p,
  };
}

describe('execution names', () => {
  it('generates sortable, unique names Step Functions accepts', () => {
    const at = new Date('2026-11-21T12:34:56.789Z');
    const names = new Set(Array.from({ length: 200 }, () => newExecutionName('tier-migrate', at)));
    expect(names.size).toBe(200);
    for (const n of names) {
      expect(n).toMatch(/^tier-migrate-20261121T123456Z-[0-9a-f]{6}$/);
      expect(EXECUTION_NAME.test(n)).toBe(true);
    }
    expect(
      newExecutionName('scale-out', new Date('2026-01-01T00:00:00Z')) <
        newExecutionName('scale-out', new Date('2026-01-01T00:00:01Z')),
    ).toBe(true);
  });

  it('accepts 1-80 characters of A-Z a-z 0-9 _ - and nothing else', () => {
    expect(checkExecutionName('a')).toBe('a');
    expect(checkExecutionName('x'.repeat(80))).toHaveLength(80);
    for (const bad of ['', 'x'.repeat(81), 'a b', 'a:b', 'a/b', 'ü', 'a.b'])
      expect(() => checkExecutionName(bad)).toThrow(
        expect.objectContaining({ code: 'VALIDATION_FAILED', details: expect.objectContaining({ field: 'name' }) }),
      );
  });
});

describe('progressView', () => {
  it('computes the fraction from done/total, clamped, with the unit of the workflow', () => {
    expect(progressView(doc({ total: 5, done: 2 }), 'RUNNING')).toMatchObject({ fraction: 0.4, unit: 'sessions' });
    expect(progressView(doc({ total: 2, done: 3 })).fraction).toBe(1);
    expect(progressView(doc({ total: 0, done: 0 }), 'RUNNING').fraction).toBe(0);
    expect(progressView(doc({ workflow: 'evict-to-s3', total: 4, done: 1 })).unit).toBe('nodes');
    expect(progressView(doc({ workflow: 'tier-migrate' })).unit).toBe('batches');
    expect(progressView(doc({ workflow: 'scale-in' })).unit).toBe('sessions');
  });

  it('is full once the execution succeeded (also with nothing to move), not when it failed half-way', () => {
    expect(progressView(doc({ total: 3, done: 2 }), 'SUCCEEDED').fraction).toBe(1);
    expect(progressView(doc({ total: 0, outcome: 'succeeded' })).fraction).toBe(1);
    expect(progressView(doc({ total: 3, done: 1, outcome: 'rolled-back' }), 'FAILED').fraction).toBeCloseTo(1 / 3);
  });

  it('keeps the document as written', () => {
    const d = doc({ total: 3, done: 1, keys: 10, bytes: 99, facts: { planId: 'p1' }, outcome: 'failed' });
    expect(progressView(d)).toEqual({ ...d, fraction: 1 / 3, unit: 'sessions' });
  });
});

describe('LocalWorkflowService over a runner', () => {
  const rec = (name: string, startedAt: string): LocalExecution => ({
    name,
    workflow: 'scale-in',
    status: 'SUCCEEDED',
    input: {},
    startedAt,
    stoppedAt: startedAt,
    states: [],
  });
  const execs = Array.from({ length: 130 }, (_, i) =>
    rec(`e${String(i).padStart(3, '0')}`, new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()),
  );
  const runner = { workflows: [...WORKFLOW_NAMES], list: () => [...execs], describe: () => undefined, start: () => execs[0]! };
  const svc = new LocalWorkflowService({ runner });

  it('lists newest first with the default limit 20 and at most 100', async () => {
    const page = await svc.list();
    expect(page).toHaveLength(20);
    expect(page[0]!.execution).toBe('e129');
    expect(page.at(-1)!.execution).toBe('e110');
    expect(await svc.list({ limit: 1000 })).toHaveLength(100);
    expect(await svc.list({ limit: 0 })).toHaveLength(1);
  });

  it('refuses a workflow the runner does not have', async () => {
    const partial = new LocalWorkflowService({ runner: { ...runner, workflows: ['scale-out'] } });
    await expect(partial.start('tier-migrate', {})).rejects.toMatchObject({ code: 'WORKFLOWS_UNAVAILABLE', status: 503 });
  });
});

describe('runtime configuration (composition/workflow-service-env.ts)', () => {
  it('parses STRATA_WORKFLOW_ARNS', () => {
    expect(parseWorkflowArns(JSON.stringify({ 'scale-out': ARN('scale-out'), 'scale-in': ARN('scale-in') }))).toEqual({
      'scale-out': ARN('scale-out'),
      'scale-in': ARN('scale-in'),
    });
    expect(parseWorkflowArns('{}')).toEqual({});
  });

  it('names what is wrong with STRATA_WORKFLOW_ARNS', () => {
    const cases: [string, RegExp][] = [
      ['{"scale-out":', /not valid JSON/],
      ['["arn"]', /must be a JSON object/],
      [
        JSON.stringify({ 'scale-up': ARN('scale-up') }),
        /unknown workflow 'scale-up' \(workflows: scale-out, scale-in, evict-to-s3, tier-migrate, replace-node, rolling-upgrade, invalidation-sweep, order-markers, upload-commit\)/,
      ],
      [
        JSON.stringify({ 'scale-out': 'arn:aws:lambda:us-east-1:123456789012:function:x' }),
        /STRATA_WORKFLOW_ARNS\.scale-out: must be a state machine ARN/,
      ],
      [JSON.stringify({ 'scale-out': 42 }), /STRATA_WORKFLOW_ARNS\.scale-out/],
    ];
    for (const [raw, msg] of cases) {
      expect(() => parseWorkflowArns(raw)).toThrow(ConfigError);
      expect(() => parseWorkflowArns(raw)).toThrow(msg);
    }
  });

  it('builds no service without STRATA_WORKFLOW_ARNS, and a Step Functions one with it', () => {
    expect(workflowServiceFromEnv({})).toBeUndefined();
    expect(workflowServiceFromEnv({ STRATA_WORKFLOW_ARNS: '' })).toBeUndefined();
    const svc = workflowServiceFromEnv({
      STRATA_WORKFLOW_ARNS: JSON.stringify({ 'evict-to-s3': ARN('evict-to-s3') }),
      STRATA_SFN_ENDPOINT: 'http://127.0.0.1:4566',
    })!;
    expect(svc).toBeInstanceOf(SfnWorkflowService);
    expect(svc.workflows).toEqual(['evict-to-s3']);
    expect(svc.executionArn('evict-to-s3', 'run-1')).toBe(
      'arn:aws:states:us-east-1:123456789012:execution:strata-dev-evict-to-s3:run-1',
    );
    expect(() => workflowServiceFromEnv({ STRATA_WORKFLOW_ARNS: '{}', STRATA_SFN_ENDPOINT: 'not a url' })).toThrow(
      /STRATA_SFN_ENDPOINT/,
    );
  });

  it("reads progress from the workflow docs store, else the warm ring's, else nowhere", () => {
    const env = (e: Record<string, string>) => workflowEnvSchema.parse(e);
    const s3 = progressCasFromEnv(
      env({ STRATA_WORKFLOW_DOCS_BUCKET: 'ring-bucket', STRATA_WORKFLOW_DOCS_PREFIX: 'strata/ring' }),
    );
    expect(s3).toBeInstanceOf(S3CasStore);
    (s3 as S3CasStore).close();
    const warm = progressCasFromEnv(env({ STRATA_WARM_RING_BUCKET: 'warm-bucket' }));
    expect(warm).toBeInstanceOf(S3CasStore);
    (warm as S3CasStore).close();
    const dir = mkdtempSync(join(tmpdir(), 'strata-progress-'));
    try {
      expect(progressCasFromEnv(env({ STRATA_WORKFLOW_DOCS_DIR: dir }))).toBeInstanceOf(FileCasStore);
      // The docs variables win over the warm ring's.
      expect(progressCasFromEnv(env({ STRATA_WORKFLOW_DOCS_DIR: dir, STRATA_WARM_RING_BUCKET: 'warm-bucket' }))).toBeInstanceOf(
        FileCasStore,
      );
      const docs = progressCasFromEnv(env({ STRATA_WORKFLOW_DOCS_BUCKET: 'docs-bucket', STRATA_WARM_RING_DIR: dir }));
      expect(docs).toBeInstanceOf(S3CasStore);
      (docs as S3CasStore).close();
      expect(progressCasFromEnv(env({ STRATA_WARM_RING_DIR: dir }))).toBeInstanceOf(FileCasStore);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(progressCasFromEnv(env({}))).toBeUndefined();
  });
});
