import { dataSteps, type DataStepDeps } from './data-steps.js';
import { scaleSteps, type ScaleDeps } from './scale-steps.js';
import type { StepHandlers } from './steps.js';

/** What the step Lambda (or a local run) gives the steps. */
export type WorkflowDeps = ScaleDeps & DataStepDeps;

/** Every step of every workflow, bound to `d`. */
export function stepHandlers(d: WorkflowDeps): StepHandlers {
  const s = scaleSteps(d);
  const data = dataSteps(d);
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
    'evict.plan': data.evictPlan,
    'evict.batch': data.evictBatch,
    'evict.report': data.evictReport,
    'tier-migrate.begin': data.tierMigrateBegin,
    'tier-migrate.batch': data.tierMigrateBatch,
  };
}
