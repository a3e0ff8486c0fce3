import { createRequire } from 'node:module';
import { PERMANENT_ERROR_CLASSES, PERMANENT_ERRORS } from '../../cdk/constructs/workflows/step-task.js';
import { synthesizeWorkflowDefinitions } from '../../cdk/lib/workflow-definitions.js';
import { allStates } from '../../core/workflows/local/asl-runner.js';
import { STEP_NAMES } from '../../core/workflows/steps/registry.js';
import { WORKFLOW_NAMES } from '../../core/workflows/progress.js';

const aslValidator = createRequire(import.meta.url)('asl-validator') as (d: unknown) => {
  isValid: boolean;
  errorsText: (sep?: string) => string;
};

describe('workflow definitions', () => {
  const defs = synthesizeWorkflowDefinitions();

  it.each(WORKFLOW_NAMES)('%s passes asl-validator', (w) => {
    const r = aslValidator(defs[w]);
    if (!r.isValid) throw new Error(r.errorsText('\n'));
    expect(r.isValid).toBe(true);
  });

  it('every Lambda task names a step the step Lambda knows, and every step is used by some workflow', () => {
    const used = new Set<string>();
    for (const w of WORKFLOW_NAMES) {
      for (const [name, s] of allStates(defs[w])) {
        if (s.Type !== 'Task' || !String(s.Resource).includes(':lambda:')) continue;
        const step = (s.Parameters as { step?: string }).step;
        expect([name, STEP_NAMES.includes(step as never)]).toEqual([name, true]);
        used.add(step!);
      }
    }
    expect([...used].sort()).toEqual([...STEP_NAMES].sort());
  });

  it('EC2 calls use Step Functions SDK integrations', () => {
    const resources = WORKFLOW_NAMES.flatMap((w) => allStates(defs[w]).map(([, s]) => s.Resource)).filter(Boolean);
    expect(resources).toEqual(
      expect.arrayContaining(['arn:aws:states:::aws-sdk:ec2:runInstances', 'arn:aws:states:::aws-sdk:ec2:terminateInstances']),
    );
  });

  it('every Lambda task retries nothing of the permanent errors, named as the steps name them', () => {
    // The names come from the classes; what a step throws is named after its class (a Lambda error's errorType).
    expect(PERMANENT_ERRORS).toEqual([
      'ValidationError',
      'ScaleOutInFlightError',
      'NoNodeToRemoveError',
      'NodeLaunchTimeoutError',
      'RingPreconditionError',
      'RingDocumentError',
    ]);
    for (const C of PERMANENT_ERROR_CLASSES) expect(new (C as new (...a: unknown[]) => Error)('x', 'y').name).toBe(C.name);
    for (const w of WORKFLOW_NAMES) {
      for (const [name, s] of allStates(defs[w])) {
        if (s.Type !== 'Task' || !String(s.Resource).includes(':lambda:')) continue;
        const retry = (s as { Retry?: { ErrorEquals: string[]; MaxAttempts?: number }[] }).Retry ?? [];
        expect([name, retry.find((r) => r.MaxAttempts === 0)]).toEqual([
          name,
          expect.objectContaining({ ErrorEquals: PERMANENT_ERRORS }),
        ]);
      }
    }
  });
});
