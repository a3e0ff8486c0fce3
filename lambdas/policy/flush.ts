// The write-back flush half of a policy tick (AWS), in the VPC beside the tiers: the ticker state machine invokes it
// next to the evaluator (lambdas/policy/evaluator.ts); the wiring lives in core/composition/policy-evaluator-lambda.ts.
import { policyFlush } from '../../core/composition/policy-evaluator-lambda.js';

export const handler = async (): Promise<{ flushed: number }> => policyFlush();
