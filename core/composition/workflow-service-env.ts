import { SFNClient } from '@aws-sdk/client-sfn';
import * as z from 'zod';
import { FileCasStore, S3CasStore, type CasStore } from '../ring/store.js';
import { WORKFLOW_NAMES, ProgressStore, type WorkflowName } from '../workflows/progress.js';
import { SfnWorkflowService } from '../workflows/admin-service.js';
import { ConfigError } from '../errors.js';
import { formatIssues } from '../util/zod-issues.js';

/**
 * The admin API's workflow service in AWS: Step Functions for the state machines, the progress documents from the
 * CAS store next to the ring. A module of its own so that only the admin Lambda bundles the SFN client.
 *
 * Environment:
 * - `STRATA_WORKFLOW_ARNS`: JSON `{ "scale-out": "arn:aws:states:...:stateMachine:<prefix>-scale-out", ... }`
 *   (workflows left out cannot be started or listed). Unset: no service (the admin routes answer 503).
 * - Progress documents: `STRATA_WORKFLOW_DOCS_BUCKET` (+ `STRATA_WORKFLOW_DOCS_PREFIX`, default `strata-ring`) in
 *   AWS, or `STRATA_WORKFLOW_DOCS_DIR` locally: the ring's store. They fall back to `STRATA_WARM_RING_BUCKET` /
 *   `STRATA_WARM_RING_PREFIX` / `STRATA_WARM_RING_DIR`, but a function without a warm tier (the admin Lambda)
 *   should use the `STRATA_WORKFLOW_DOCS_*` names: the API context refuses the warm-ring variables without one.
 *   Neither set: executions are reported without progress.
 * - `STRATA_SFN_ENDPOINT` (LocalStack), else `AWS_ENDPOINT_URL_SFN` as the SDK reads it; `AWS_REGION`;
 *   `STRATA_S3_ENDPOINT` / `AWS_ENDPOINT_URL_S3` for the progress bucket.
 */
export const workflowEnvSchema = z.object({
  STRATA_WORKFLOW_ARNS: z.string().optional(),
  STRATA_WORKFLOW_DOCS_BUCKET: z.string().min(3).optional(),
  STRATA_WORKFLOW_DOCS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._/-]+$/)
    .optional(),
  STRATA_WORKFLOW_DOCS_DIR: z.string().min(1).optional(),
  STRATA_WARM_RING_BUCKET: z.string().min(3).optional(),
  STRATA_WARM_RING_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9._/-]+$/)
    .optional(),
  STRATA_WARM_RING_DIR: z.string().min(1).optional(),
  STRATA_SFN_ENDPOINT: z.string().url().optional(),
  STRATA_S3_ENDPOINT: z.string().url().optional(),
  AWS_ENDPOINT_URL_S3: z.string().url().optional(),
  AWS_REGION: z.string().default('us-east-1'),
});

const STATE_MACHINE_ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$/;

/** The state machine ARNs of STRATA_WORKFLOW_ARNS, validated (ConfigError naming the bad entry). */
export function parseWorkflowArns(raw: string): Partial<Record<WorkflowName, string>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw new ConfigError(`STRATA_WORKFLOW_ARNS is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError('STRATA_WORKFLOW_ARNS must be a JSON object { "<workflow>": "<state machine ARN>" }');
  const out: Partial<Record<WorkflowName, string>> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (!(WORKFLOW_NAMES as readonly string[]).includes(k))
      throw new ConfigError(`STRATA_WORKFLOW_ARNS: unknown workflow '${k}' (workflows: ${WORKFLOW_NAMES.join(', ')})`);
    if (typeof v !== 'string' || !STATE_MACHINE_ARN.test(v))
      throw new ConfigError(
        `STRATA_WORKFLOW_ARNS.${k}: must be a state machine ARN (arn:aws:states:<region>:<account>:stateMachine:<name>)`,
      );
    out[k as WorkflowName] = v;
  }
  return out;
}

/** The CAS store holding the progress documents, from the environment; undefined when none is configured. */
export function progressCasFromEnv(env: z.infer<typeof workflowEnvSchema>): CasStore | undefined {
  // The STRATA_WORKFLOW_DOCS_* pair first, then the warm ring's.
  const [bucket, prefix, dir] =
    env.STRATA_WORKFLOW_DOCS_BUCKET || env.STRATA_WORKFLOW_DOCS_DIR
      ? [env.STRATA_WORKFLOW_DOCS_BUCKET, env.STRATA_WORKFLOW_DOCS_PREFIX, env.STRATA_WORKFLOW_DOCS_DIR]
      : [env.STRATA_WARM_RING_BUCKET, env.STRATA_WARM_RING_PREFIX, env.STRATA_WARM_RING_DIR];
  if (bucket) {
    const endpoint = env.STRATA_S3_ENDPOINT ?? env.AWS_ENDPOINT_URL_S3;
    return new S3CasStore({
      bucket,
      prefix: prefix ?? 'strata-ring',
      clientConfig: { region: env.AWS_REGION, ...(endpoint ? { endpoint, forcePathStyle: true } : {}) },
    });
  }
  return dir ? new FileCasStore(dir) : undefined;
}

/**
 * Builds the Step Functions workflow service from the environment (see {@link workflowEnvSchema}); undefined
 * when STRATA_WORKFLOW_ARNS is not set. A bad value throws {@link ConfigError} naming the variable.
 */
export function workflowServiceFromEnv(raw: NodeJS.ProcessEnv = process.env): SfnWorkflowService | undefined {
  const input = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== ''));
  const r = workflowEnvSchema.safeParse(input);
  if (!r.success) throw new ConfigError(`invalid configuration: ${formatIssues(r.error.issues, { root: '' })}`);
  const env = r.data;
  if (!env.STRATA_WORKFLOW_ARNS) return undefined;
  const stateMachines = parseWorkflowArns(env.STRATA_WORKFLOW_ARNS);
  const cas = progressCasFromEnv(env);
  return new SfnWorkflowService({
    client: new SFNClient({ region: env.AWS_REGION, ...(env.STRATA_SFN_ENDPOINT ? { endpoint: env.STRATA_SFN_ENDPOINT } : {}) }),
    stateMachines,
    ...(cas ? { progress: new ProgressStore(cas) } : {}),
  });
}
