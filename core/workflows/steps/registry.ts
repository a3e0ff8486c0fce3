import * as z from 'zod';
import { ValidationError } from '../../errors.js';

/**
 * Every step the state machines call, by name. One step Lambda (lambdas/workflows/steps.ts) serves them all:
 * the Task state's payload is `{ step, execution, workflow?, request?, ...fields }`, where `request` carries
 * the execution's input as given (so optional fields need no JSONPath that could fail) and the other fields
 * come from earlier steps' results.
 */
export const STEP_NAMES = [
  'scale-out.begin',
  'scale-out.check-node',
  'scale-out.plan',
  'scale-in.begin',
  'migrate.prepare',
  'migrate.stream',
  'migrate.publish',
  'migrate.finish',
  'migrate.cleanup',
  'migrate.rollback',
  'evict.plan',
  'evict.batch',
  'evict.report',
  'tier-migrate.begin',
  'tier-migrate.batch',
  'replace-node.begin',
  'replace-node.take-over',
  'replace-node.fill',
  'replace-node.finish',
  'replace-node.rollback',
  'rolling-upgrade.begin',
  'rolling-upgrade.next',
  'rolling-upgrade.plan',
  'rolling-upgrade.finish',
  'rolling-upgrade.done',
  'rolling-upgrade.rollback',
  'invalidation-sweep.load',
  'invalidation-sweep.begin',
  'invalidation-sweep.batch',
  'order-markers.begin',
  'order-markers.batch',
  'upload-commit.commit',
  'upload-commit.failed',
] as const;
export type StepName = (typeof STEP_NAMES)[number];

export type StepHandler = (input: Record<string, unknown>) => Promise<unknown>;
export type StepHandlers = Record<StepName, StepHandler>;

const stepEvent = z.looseObject({
  step: z.enum(STEP_NAMES, { error: (i) => `unknown step '${String(i.input)}' (steps: ${STEP_NAMES.join(', ')})` }),
  /** The execution's own input, passed through by the first states. */
  request: z.record(z.string(), z.unknown()).nullish(),
});

/**
 * Runs one step: the request's fields first, then the state's own fields over them. Input errors come back as
 * {@link ValidationError} (Step Functions sees its name and fails the execution instead of retrying).
 */
export async function runStep(handlers: StepHandlers, event: unknown): Promise<unknown> {
  const parsed = stepEvent.safeParse(event);
  if (!parsed.success)
    throw new ValidationError(
      parsed.error.issues[0]?.path.join('.') || 'step',
      parsed.error.issues[0]?.message ?? 'invalid step event',
    );
  const { step, request, ...fields } = parsed.data;
  try {
    return await handlers[step]({ ...(request ?? {}), ...fields });
  } catch (e) {
    if (e instanceof z.ZodError) {
      const issue = e.issues[0]!;
      throw new ValidationError(`${step}: ${issue.path.join('.') || 'input'}`, issue.message);
    }
    throw e;
  }
}
