// The scheduled policy evaluator (AWS): one tick of the policy's background rules per invocation, driven by the
// ticker state machine (core/policy/ticker.ts); the wiring lives in core/composition/policy-evaluator-lambda.ts.
import { policyTick } from '../../core/composition/policy-evaluator-lambda.js';
import type { TickEvent, TickResult } from '../../core/policy/ticker.js';

export const handler = async (event: TickEvent): Promise<TickResult> => policyTick(event ?? {});
