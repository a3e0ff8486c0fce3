import { PolicyAdministration } from '../policy/admin.js';
import { compilePolicy, documentFromNamespaceConfig, type CompiledPolicy, type CompileOptions } from '../policy/compile.js';
import { EvaluatorStateStore } from '../policy/evaluator-store.js';
import { LivePolicy } from '../policy/live.js';
import { FileCasStore, S3CasStore, type CasStore } from '../ring/store.js';
import { encryptionCompileOptions, keyringFromEnv, type KeyringSetup } from './keyring-env.js';
import { namespaceConfigFrom, type RuntimeEnv } from './runtime-env.js';

/**
 * The policy side of a runtime, from its environment: what compiles policies here (which background responses an
 * evaluator runs, which encryption keys exist), the deployment's STRATA_NAMESPACES as version 0, the policy store
 * with its administration and live copy, and the scheduled evaluator's memory beside it. The API runtimes build it
 * with their tiers (api-context.ts); the scheduled evaluator, which runs outside the VPC, builds it alone.
 */
export interface PolicyParts {
  readonly keys: KeyringSetup;
  readonly compile: CompileOptions;
  /** STRATA_NAMESPACES as a policy: in force until (and unless) one is edited at runtime. */
  readonly deployment: CompiledPolicy;
  readonly store?: { readonly cas: CasStore; readonly describe: string };
  readonly admin?: PolicyAdministration;
  readonly evaluatorState?: EvaluatorStateStore;
  /** Whether a scheduled evaluator (AWS) runs this deployment's background rules: STRATA_POLICY_EVALUATOR. */
  readonly scheduled: boolean;
  /** The policy in force, kept fresh from the store (undefined without a store); `onChange` follows a new version. */
  live(o: { timer: boolean; onChange: (next: CompiledPolicy) => void }): LivePolicy | undefined;
}

export interface PolicyEnvOptions {
  /** `npm start`'s in-process evaluator runs every background response (see api-context.ts BuildOptions). */
  readonly backgroundEvaluator?: boolean;
  readonly createLocalKeys?: boolean;
}

export function policyPartsFromEnv(env: RuntimeEnv, opts: PolicyEnvOptions = {}): PolicyParts {
  // The keyring of the policies' encrypt rules (STRATA_KEYRING): the codec holds it, and the compiler refuses encrypt
  // rules without one, or naming a key outside STRATA_KEYRING_KEYS.
  const keys = keyringFromEnv(env, { createLocalKeys: opts.createLocalKeys ?? false });
  const encryption = encryptionCompileOptions(keys);
  // What runs background rules: npm start's in-process evaluator (everything), or AWS's scheduled one
  // (STRATA_POLICY_EVALUATOR: alert, grow, shrink, eviction, and copy/move/delete through its job runner).
  const local = opts.backgroundEvaluator ?? false;
  const scheduled = env.STRATA_POLICY_EVALUATOR && !local;
  const compile: CompileOptions = {
    background: local || scheduled,
    transfers: local || scheduled,
    // Both evaluators run the default rules (defaults.ts), so every policy shows them and an operator changes or
    // disables one by writing a rule with its id: in AWS they are what acts (the stacks then deploy no fill-alarm
    // response, eviction schedule or scale trigger of their own). Their deployment settings (STRATA_POLICY_DEFAULTS)
    // come from cdk/config in AWS. Under npm start the variable is normally unset, so: the node-fill eviction and the
    // idle scale-in, but no periodic eviction (the local warm tier is wiped at every start and rarely lives the hours
    // such a sweep is for; the fill rule evicts when a node fills) and no pre-launch (a local node starts in about a
    // second, so there is nothing to launch ahead of; bench/ measures paper 000's trigger with its own settings).
    defaults: local || scheduled ? (env.STRATA_POLICY_DEFAULTS ?? true) : false,
    ...(encryption ? { encryption } : {}),
    ...(env.STRATA_LAMBDA_ORIGINS ? { lambdaOrigins: env.STRATA_LAMBDA_ORIGINS } : {}),
  };
  const deployment = compilePolicy(documentFromNamespaceConfig(namespaceConfigFrom(env)), compile);
  const store = policyStoreFrom(env);
  const admin = store ? new PolicyAdministration({ cas: store.cas, deployment: deployment.document, compile }) : undefined;
  return {
    keys,
    compile,
    deployment,
    scheduled,
    ...(store ? { store, evaluatorState: new EvaluatorStateStore(store.cas) } : {}),
    ...(admin ? { admin } : {}),
    live: (o) =>
      admin
        ? LivePolicy.fromDeployment(
            { admin, refreshMs: env.STRATA_POLICY_REFRESH_MS, timer: o.timer, onChange: (next) => o.onChange(next) },
            deployment,
          )
        : undefined,
  };
}

/** The policy store: STRATA_POLICY_STORE, else the ring store when the warm tier has one. */
function policyStoreFrom(env: RuntimeEnv): { cas: CasStore; describe: string } | undefined {
  const endpoint = env.STRATA_S3_ENDPOINT;
  const s3 = (bucket: string, prefix: string) => ({
    cas: new S3CasStore({
      bucket,
      prefix,
      clientConfig: { region: env.AWS_REGION, ...(endpoint ? { endpoint, forcePathStyle: true } : {}) },
    }),
    describe: `s3://${bucket}/${prefix.replace(/\/+$/, '')}/policies/`,
  });
  const uri = env.STRATA_POLICY_STORE;
  if (uri?.startsWith('file:')) return { cas: new FileCasStore(uri.slice(5)), describe: `${uri.slice(5)}/policies/` };
  const m = uri ? /^s3:\/\/([^/]+)\/?(.*)$/.exec(uri) : null;
  if (m) return s3(m[1]!, m[2] || 'strata-policies');
  if (env.STRATA_WARM_RING_BUCKET) return s3(env.STRATA_WARM_RING_BUCKET, env.STRATA_WARM_RING_PREFIX);
  if (env.STRATA_WARM_RING_DIR)
    return { cas: new FileCasStore(env.STRATA_WARM_RING_DIR), describe: `${env.STRATA_WARM_RING_DIR}/policies/` };
  return undefined;
}
