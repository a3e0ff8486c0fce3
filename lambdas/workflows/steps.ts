// Step Lambda of every Strata workflow (Step Functions Task states): { step, ... } in, the step's result out.
// The logic lives in core/workflows; the dependencies come from the environment (composition/step-lambda.ts).
import { getStepHandlers } from '../../core/composition/step-lambda.js';
import { runStep } from '../../core/workflows/steps/registry.js';

export const handler = async (event: unknown): Promise<unknown> => runStep(await getStepHandlers(), event);
