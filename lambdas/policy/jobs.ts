// The policy job runner (AWS), in the VPC beside the tiers: the ticker state machine starts it without waiting when
// a copy, move, delete or blob collection waits for a runner (core/policy/jobs.ts); the wiring lives in
// core/composition/policy-evaluator-lambda.ts.
import type { Context } from 'aws-lambda';
import { policyJobs } from '../../core/composition/policy-evaluator-lambda.js';

export const handler = async (_event: unknown, context: Context): Promise<{ ran: number; finished: number }> =>
  policyJobs({ owner: context.awsRequestId, remainingMs: context.getRemainingTimeInMillis() });
