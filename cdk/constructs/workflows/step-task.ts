import { Duration } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import type { Construct } from 'constructs';
import { ValidationError } from '../../../core/errors.js';
import { RingDocumentError } from '../../../core/ring/document.js';
import { RingPreconditionError } from '../../../core/ring/store.js';
import { NodeLaunchTimeoutError, NoNodeToRemoveError, ScaleOutInFlightError } from '../../../core/workflows/steps/scale-steps.js';
import type { StepName } from '../../../core/workflows/steps/registry.js';
import type { WorkflowName } from '../../../core/workflows/progress.js';

/** What every workflow's states share: the step Lambda and the workflow's name (for progress records). */
export interface StepContext {
  readonly scope: Construct;
  readonly fn: lambda.IFunction;
  readonly workflow: WorkflowName;
}

/** Errors a step throws on bad input or a broken precondition: retrying them cannot help. */
export const PERMANENT_ERROR_CLASSES = [
  ValidationError,
  ScaleOutInFlightError,
  NoNodeToRemoveError,
  NodeLaunchTimeoutError,
  RingPreconditionError,
  RingDocumentError,
] as const;

/**
 * Their names, as Step Functions sees them (a Lambda error's name is its `errorType`). Each class's instances are
 * named after the class (StrataError sets `name` from the class, the ring errors set it to the same; Lambda bundles
 * keep class names: cdk/lib/packaging.ts), which test/unit/contract-drift.test.ts checks.
 */
export const PERMANENT_ERRORS: string[] = PERMANENT_ERROR_CLASSES.map((c) => c.name);

/**
 * A Task state calling one step of the step Lambda. `payloadResponseOnly` makes the Resource the function itself
 * (input = the payload, output = the function's result), which is also exactly what a local run's handler
 * override does, so local and AWS runs see the same data. Transient failures (Lambda service errors, a step
 * that lost a race or could not reach a node) are retried with backoff; permanent ones are not.
 */
export function stepTask(
  c: StepContext,
  id: string,
  step: StepName,
  fields: Record<string, unknown>,
  o: { resultPath?: string; retries?: number } = {},
): tasks.LambdaInvoke {
  // `$` (the step's result replaces the state) is written as no ResultPath at all, which Step Functions reads the same
  // way (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultpath.html): the local runner's
  // interpreter (aws-local-stepfunctions) stores an explicit `$` under a key named "$" instead.
  const resultPath = o.resultPath === '$' ? undefined : (o.resultPath ?? sfn.JsonPath.DISCARD);
  const t = new tasks.LambdaInvoke(c.scope, id, {
    lambdaFunction: c.fn,
    payloadResponseOnly: true,
    payload: sfn.TaskInput.fromObject({ step, workflow: c.workflow, 'execution.$': '$$.Execution.Name', ...fields }),
    ...(resultPath !== undefined ? { resultPath } : {}),
    retryOnServiceExceptions: true,
  });
  // The first retrier that matches applies: permanent errors first, with no attempts, then everything else.
  t.addRetry({ errors: PERMANENT_ERRORS, maxAttempts: 0 });
  t.addRetry({
    errors: ['States.TaskFailed'],
    interval: Duration.seconds(2),
    backoffRate: 2,
    maxAttempts: o.retries ?? 3,
    jitterStrategy: sfn.JitterType.FULL,
  });
  return t;
}
