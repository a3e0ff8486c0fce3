import { scaleSteps, type ScaleDeps } from './scale-steps.js';
import type { StepHandlers } from './steps.js';

/** What the step Lambda (or a local run) gives the steps. */
export type WorkflowDeps = ScaleDeps;

/** Every step of every workflow, bound to `d`. */
export function stepHandlers(d: WorkflowDeps): StepHandlers {
  const s = scaleSteps(d);
  const pending = async () => {
    throw new Error('not wired yet');
  };
  return {
    'scale-out.begin': s.scaleOutBegin,
    'scale-out.check-node': s.checkNode,
    'scale-out.plan': s.scaleOutPlan,
    'scale-in.begin': s.scaleInBegin,
    'migrate.prepare': s.prepare,
    'migrate.stream': s.stream,
    'migrate.publish': s.publish,
    'migrate.finish': s.finish,
    'migrate.cleanup': s.cleanup,
    'migrate.rollback': s.rollback,
    'evict.plan': pending,
    'evict.batch': pending,
    'evict.report': pending,
    'tier-migrate.begin': pending,
    'tier-migrate.batch': pending,
  };
}
