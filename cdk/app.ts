import { join } from 'node:path';
import { Tags, Validations, type App } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as kms from 'aws-cdk-lib/aws-kms';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { EnvironmentConfig } from './config/schema.js';
import { CacheNodeBundle, CacheNodeFleet } from './constructs/cache-node-fleet.js';
import { ColdTierBucket } from './constructs/cold-tier-bucket.js';
import { REPO_ROOT } from './lib/packaging.js';
import { ApiStack } from './stacks/api-stack.js';
import { DataStack } from './stacks/data-stack.js';
import { FleetStack } from './stacks/fleet-stack.js';
import { MonitoringStack } from './stacks/monitoring-stack.js';
import { NetworkStack } from './stacks/network-stack.js';
import { stackId } from './stacks/strata-stack.js';
import { WorkflowsStack } from './stacks/workflows-stack.js';
import { WORKFLOW_NAMES } from '../core/workflows/progress.js';

/** The cachenode daemon's entry point (cachenode/). */
export const CACHENODE_ENTRY = join(REPO_ROOT, 'cachenode', 'src', 'main.ts');

export interface StrataAppOptions {
  readonly config: EnvironmentConfig;
  /** @default CacheNodeBundle.fromEntry(CACHENODE_ENTRY, { nativeModules: ['lmdb'] }) */
  readonly cacheNodeBundle?: CacheNodeBundle;
  /** Run cdk-nag's AwsSolutions checks on every stack (findings are synth errors). @default true */
  readonly nag?: boolean;
  /** The KMS keys namespace policies may encrypt with (ApiStackProps.policyEncryptionKeys). @default - none */
  readonly policyEncryptionKeys?: readonly kms.IKey[];
}

export interface StrataStacks {
  readonly network: NetworkStack;
  readonly data: DataStack;
  readonly fleet: FleetStack;
  readonly api: ApiStack;
  readonly monitoring: MonitoringStack;
  readonly workflows: WorkflowsStack;
}

/** Adds one environment's stacks to `app`. */
export function buildStrataApp(app: App, options: StrataAppOptions): StrataStacks {
  const { config } = options;
  Tags.of(app).add('project', 'strata');
  // Interface endpoints only for what must call an AWS API from inside the VPC. The cost publisher (CloudWatch, EC2),
  // the policy evaluator or the scale-out trigger and the admin API (Step Functions) run outside it, where those APIs
  // need no endpoint.
  // Lambda origins are invoked by the data functions, in the VPC without internet access: through Lambda's endpoint.
  const interfaceEndpoints = [
    ...CacheNodeFleet.INTERFACE_ENDPOINTS,
    ...(config.api.lambdaOrigins.length ? [ec2.InterfaceVpcEndpointAwsService.LAMBDA] : []),
  ];
  const network = new NetworkStack(app, stackId(config, 'Network'), { config, interfaceEndpoints });
  const data = new DataStack(app, stackId(config, 'Data'), { config, network });
  const fleet = new FleetStack(app, stackId(config, 'Fleet'), {
    config,
    network,
    bundle: options.cacheNodeBundle ?? CacheNodeBundle.fromEntry(CACHENODE_ENTRY, { nativeModules: ['lmdb'] }),
    ringStore: { bucket: data.coldTier.bucket, prefix: ColdTierBucket.RING_PREFIX },
  });
  const api = new ApiStack(app, stackId(config, 'Api'), {
    config,
    network,
    data,
    fleet,
    ...(options.policyEncryptionKeys ? { policyEncryptionKeys: options.policyEncryptionKeys } : {}),
  });
  const workflows = new WorkflowsStack(app, stackId(config, 'Workflows'), {
    config,
    network,
    data,
    fleet,
    ...(options.policyEncryptionKeys ? { policyEncryptionKeys: options.policyEncryptionKeys } : {}),
  });
  // Monitoring alarms on the workflows' functions and state machines (and its node-fill rule targets one): it
  // depends on the Workflows stack, never the reverse.
  const monitoring = new MonitoringStack(app, stackId(config, 'Monitoring'), { config, network, api, data, fleet, workflows });
  // The admin API starts and follows the workflows.
  api.functions.admin.bindWorkflows(
    Object.fromEntries(
      WORKFLOW_NAMES.map((w) => [w, { machine: workflows.stateMachines[w], name: `strata-${config.name}-${w}` }]),
    ),
  );
  // The data functions' flushes and invalidations start their sweeps by writing sweep requests, whose S3 events the
  // Workflows stack's rule turns into executions (their VPC has no route to Step Functions): no grant here.
  // The node-fill alarm's response: with the policy evaluator, the rule default-evict-on-node-fill (which an operator
  // can see and change: cdk/lib/policy-defaults.ts), and the alarm only notifies; without it, the alarm starts the
  // configured workflow itself.
  const response = config.workflows.fillAlarmResponse;
  if (!config.policies.evaluator && response !== 'none')
    workflows.respondTo(
      monitoring.alarms.responses.nodeFill,
      response,
      response === 'scale-out' ? { reason: 'node-fill alarm' } : {},
    );
  if (options.nag ?? true) Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { network, data, fleet, api, monitoring, workflows };
}
