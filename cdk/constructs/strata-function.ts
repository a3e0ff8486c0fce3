import { Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { KMS_ENCRYPTION_CONTEXT } from '../../core/transforms/kms-keyring.js';
import { CHOSEN_PACKAGING, COMMON_ESBUILD, REPO_ROOT, type LambdaPackaging } from '../lib/packaging.js';
import type { CacheNodeFleet } from './cache-node-fleet.js';
import { ColdTierBucket, type RingStoreDocument } from './cold-tier-bucket.js';
import type { PolicyEncryptionKeys } from './policy-encryption-keys.js';
import { check, intIn } from './validation.js';
import type { ValkeyServerlessCache } from './valkey-serverless-cache.js';

export interface StrataFunctionProps {
  /** TypeScript entry file exporting `handler`. */
  readonly entry: string;
  readonly description?: string;
  /**
   * The VPC, for functions that reach something only the VPC has (the hot tier, the cache nodes). Give it with
   * vpcSubnets and securityGroup, or none of the three: a function that needs only AWS APIs (S3, Step Functions,
   * CloudWatch, EC2) runs outside the VPC, where those APIs need no interface endpoint. @default - not in a VPC
   */
  readonly vpc?: ec2.IVpc;
  readonly vpcSubnets?: ec2.SubnetSelection;
  /** The coordinators' security group: what the cache, the cache nodes and endpoints admit. */
  readonly securityGroup?: ec2.ISecurityGroup;
  /** 128-10240 MB. @default 1024 */
  readonly memoryMb?: number;
  /** @default 29 */
  readonly timeoutSeconds?: number;
  /** Upper bound on timeoutSeconds (29 for functions behind API Gateway REST). @default 900 */
  readonly maxTimeoutSeconds?: number;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /** Of the log group. @default RemovalPolicy.RETAIN */
  readonly logRemovalPolicy?: RemovalPolicy;
  /** Plain settings (no secrets); `AWS_*` names are reserved by Lambda. @default - none */
  readonly environment?: Readonly<Record<string, string>>;
  /** @default CHOSEN_PACKAGING (cdk/lib/packaging.ts) */
  readonly packaging?: LambdaPackaging;
  /** Concurrent executions reserved for (and capping) this function. @default - none: the account's unreserved pool */
  readonly reservedConcurrency?: number;
}

/** What a function may do in the ring store (see {@link StrataFunction.bindRingStore}). */
export interface RingStoreAccess {
  readonly read?: readonly RingStoreDocument[];
  readonly write?: readonly RingStoreDocument[];
  /** The ring's writers' grant ({@link ColdTierBucket.grantRingWriters}). */
  readonly writers?: boolean;
}

/**
 * An API/ops Lambda as Strata runs them: nodejs24.x on arm64, one ESM bundle with source maps (and
 * --enable-source-maps), in the VPC behind the coordinators' security group when it needs the VPC (else outside
 * it), its own log group with retention, and a role that starts with nothing but its logs (and, in the VPC, the
 * network interfaces Lambda attaches there). Everything else arrives through the
 * `bindX()` helpers, which set the environment variables the runtime reads (core/composition/runtime-env.ts)
 * together with the matching IAM grant or network path, so one can never be added without the other.
 */
export class StrataFunction extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  /** Whether the function runs in the VPC (only then can it reach the hot tier and the cache nodes). */
  readonly inVpc: boolean;

  constructor(scope: Construct, id: string, props: StrataFunctionProps) {
    super(scope, id);
    const memoryMb = props.memoryMb ?? 1024;
    const timeoutSeconds = props.timeoutSeconds ?? 29;
    const maxTimeout = props.maxTimeoutSeconds ?? 900;
    check(this, intIn(memoryMb, 128, 10240), `memoryMb must be a whole number from 128 to 10240 (got ${memoryMb})`);
    check(
      this,
      intIn(timeoutSeconds, 1, maxTimeout),
      `timeoutSeconds must be 1-${maxTimeout}${maxTimeout === 29 ? ' (API Gateway gives up after 29 s)' : ''} (got ${timeoutSeconds})`,
    );
    for (const k of Object.keys(props.environment ?? {}))
      check(this, !k.startsWith('AWS_'), `environment variable ${k} is reserved by Lambda`);
    const network = [props.vpc, props.vpcSubnets, props.securityGroup].filter((x) => x !== undefined).length;
    const partial = 'give vpc, vpcSubnets and securityGroup together, or none of them (the function then runs outside the VPC)';
    check(this, network === 0 || network === 3, partial);
    this.inVpc = network === 3;
    const reserved = props.reservedConcurrency;
    check(
      this,
      reserved === undefined || (Number.isInteger(reserved) && reserved >= 1),
      `reservedConcurrency must be a whole number >= 1 (got ${reserved}); leave it out for none`,
    );

    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.RETAIN,
    });

    // No managed policies: logs to its own group only, and (in a VPC) the ENI actions Lambda needs there.
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.description ?? id} (Strata)`,
    });
    this.role.addToPolicy(
      new iam.PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [this.logGroup.logGroupArn] }),
    );
    if (this.inVpc) {
      this.role.addToPolicy(
        new iam.PolicyStatement({
          actions: [
            'ec2:CreateNetworkInterface',
            'ec2:DescribeNetworkInterfaces',
            'ec2:DescribeSubnets',
            'ec2:DeleteNetworkInterface',
            'ec2:AssignPrivateIpAddresses',
            'ec2:UnassignPrivateIpAddresses',
          ],
          resources: ['*'],
        }),
      );
      Validations.of(this.role).acknowledge({
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'Lambda needs these EC2 network-interface actions to attach to the VPC; Describe* supports no resource scoping and the ' +
          'ENIs do not exist before the function does (same scope as the AWSLambdaVPCAccessExecutionRole managed policy, minus its ' +
          'logs:* on every log group).',
      });
    }

    const packaging = props.packaging ?? CHOSEN_PACKAGING;
    this.function = new nodejs.NodejsFunction(this, 'Function', {
      entry: props.entry,
      handler: 'handler',
      description: props.description,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: memoryMb,
      timeout: Duration.seconds(timeoutSeconds),
      ...(props.reservedConcurrency !== undefined ? { reservedConcurrentExecutions: props.reservedConcurrency } : {}),
      role: this.role,
      logGroup: this.logGroup,
      ...(this.inVpc ? { vpc: props.vpc, vpcSubnets: props.vpcSubnets, securityGroups: [props.securityGroup!] } : {}),
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}/package-lock.json`,
      environment: { NODE_OPTIONS: '--enable-source-maps', ...props.environment },
      bundling: {
        format: nodejs.OutputFormat.ESM,
        target: COMMON_ESBUILD.target,
        minify: COMMON_ESBUILD.minify,
        keepNames: COMMON_ESBUILD.keepNames,
        sourceMap: COMMON_ESBUILD.sourcemap,
        sourcesContent: COMMON_ESBUILD.sourcesContent,
        banner: COMMON_ESBUILD.banner,
        externalModules: [...packaging.externalModules],
        bundleAwsSDK: !packaging.externalModules.includes('@aws-sdk/*'),
      },
    });
    // lambda.Function declares DependsOn its role although Role: GetAtt already implies it; cfn-lint warns (W3005).
    (this.function.node.defaultChild as lambda.CfnFunction).addMetadata('cfn-lint', {
      config: { ignore_checks: ['W3005'], ignore_reasons: { W3005: 'redundant DependsOn added by aws-cdk-lib lambda.Function' } },
    });
  }

  /** Sets an environment variable (plain settings only). */
  addEnvironment(name: string, value: string): this {
    check(this, !name.startsWith('AWS_'), `environment variable ${name} is reserved by Lambda`);
    this.function.addEnvironment(name, value);
    return this;
  }

  /**
   * Hot tier: STRATA_REDIS_URL (`rediss://`, cluster mode), the IAM user (STRATA_REDIS_USERNAME) and the cache's name
   * (STRATA_REDIS_IAM_CACHE), from which the runtime signs an IAM token per connection with the function's own role
   * (composition/elasticache-iam.ts: no password exists, nothing is read at start-up), `elasticache:Connect` on the cache
   * and that user for the role, and the network path from this function's security group to the cache.
   */
  bindHotTier(cache: ValkeyServerlessCache): this {
    check(this, this.inVpc, 'the hot tier is reachable only from the VPC: give the function vpc, vpcSubnets and securityGroup');
    this.function.addEnvironment('STRATA_REDIS_URL', cache.connection.url);
    this.function.addEnvironment('STRATA_REDIS_CLUSTER', '1');
    this.function.addEnvironment('STRATA_REDIS_USERNAME', cache.connection.username);
    this.function.addEnvironment('STRATA_REDIS_IAM_CACHE', cache.connection.cacheName);
    cache.grantConnect(this.role);
    for (const sg of this.function.connections.securityGroups) cache.allowFrom(sg);
    return this;
  }

  /** Cold tier: STRATA_S3_BUCKET and STRATA_S3_PREFIX, and the tier's access policy (its prefix only). */
  bindColdTier(cold: ColdTierBucket): this {
    this.function.addEnvironment('STRATA_S3_BUCKET', cold.bucket.bucketName);
    this.function.addEnvironment('STRATA_S3_PREFIX', cold.prefix);
    cold.grantTierAccess(this.role);
    return this;
  }

  /**
   * The invalidations document without the cold tier (the admin function's namespace flushes and invalidation log):
   * STRATA_INVALIDATIONS_BUCKET/PREFIX, and read and conditional write of that one object
   * ({@link ColdTierBucket.grantInvalidations}).
   */
  bindInvalidations(cold: ColdTierBucket): this {
    this.function.addEnvironment('STRATA_INVALIDATIONS_BUCKET', cold.bucket.bucketName);
    this.function.addEnvironment('STRATA_INVALIDATIONS_PREFIX', cold.prefix);
    cold.grantInvalidations(this.role);
    return this;
  }

  /**
   * The warm tier's ring store: STRATA_WARM_RING_BUCKET/PREFIX ({@link ColdTierBucket.RING_PREFIX} of the cold
   * tier's bucket), and access to the documents the function uses there, each named: `read` (GET, absent = 404),
   * `write` (read and S3 conditional writes), `writers` (the ring's writers: {@link ColdTierBucket.grantRingWriters}).
   */
  bindRingStore(cold: ColdTierBucket, access: RingStoreAccess): this {
    this.function.addEnvironment('STRATA_WARM_RING_BUCKET', cold.bucket.bucketName);
    this.function.addEnvironment('STRATA_WARM_RING_PREFIX', ColdTierBucket.RING_PREFIX);
    if (access.writers) cold.grantRingWriters(this.role);
    cold.grantRingWrite(this.role, access.write ?? []);
    cold.grantRingRead(this.role, access.read ?? []);
    return this;
  }

  /**
   * The node admin routes (/v1/admin/nodes..., api/node-operations.ts) for a function without the warm tier (the
   * admin function, outside the VPC): STRATA_NODE_ADMIN_RING_BUCKET names the ring store; it reads the ring and
   * reads and writes the operators' replacement switch (`health/controls`). Replacing a node starts a workflow
   * (bindWorkflows); removing one by hand needs the cache nodes, which only the VPC reaches, so it is refused there.
   */
  bindNodeAdmin(cold: ColdTierBucket): this {
    this.function.addEnvironment('STRATA_NODE_ADMIN_RING_BUCKET', cold.bucket.bucketName);
    this.function.addEnvironment('STRATA_WARM_RING_PREFIX', ColdTierBucket.RING_PREFIX);
    cold.grantRingRead(this.role, ['ring']);
    cold.grantRingWrite(this.role, ['healthControls']);
    return this;
  }

  /**
   * The workflow executions' progress documents (`workflows/executions/*` of the ring store), read only, named
   * STRATA_WORKFLOW_DOCS_BUCKET/PREFIX (composition/workflow-service-env.ts) rather than as the ring store: the admin function
   * has no warm tier, and the API context builds one from STRATA_WARM_RING_*.
   */
  bindWorkflowProgress(cold: ColdTierBucket): this {
    this.function.addEnvironment('STRATA_WORKFLOW_DOCS_BUCKET', cold.bucket.bucketName);
    this.function.addEnvironment('STRATA_WORKFLOW_DOCS_PREFIX', ColdTierBucket.RING_PREFIX);
    cold.grantRingRead(this.role, ['executions']);
    return this;
  }

  /**
   * The policy store (core/policy/admin.ts): STRATA_POLICY_STORE (`s3://<bucket>/`{@link ColdTierBucket.RING_PREFIX},
   * the documents `policies/*` next to the ring document), named on its own rather than left to the ring store's
   * fallback so that a function without a warm tier (the admin function) has it too. Every API function re-reads
   * `policies/current.json` (read: GET, absent = 404); `write` (the admin function alone) adds the S3 conditional
   * writes that replace it and create `policies/versions/*`. `evaluatorState` (the policy evaluator alone) adds the
   * conditional write of its own document, `policies/evaluator/state.json`, and of nothing else there; `jobs` (the
   * evaluator and the job runner) that of the background jobs' board, `policies/evaluator/jobs.json`.
   */
  bindPolicyStore(cold: ColdTierBucket, access: { write: boolean; evaluatorState?: boolean; jobs?: boolean }): this {
    this.function.addEnvironment('STRATA_POLICY_STORE', `s3://${cold.bucket.bucketName}/${ColdTierBucket.RING_PREFIX}`);
    if (access.write) cold.grantRingWrite(this.role, ['policies']);
    else cold.grantRingRead(this.role, ['policies']);
    if (access.evaluatorState) cold.grantRingWrite(this.role, ['evaluatorState']);
    if (access.jobs) cold.grantRingWrite(this.role, ['evaluatorJobs']);
    return this;
  }

  /**
   * The policies' encryption keys (KMS, the customer's): STRATA_KEYRING=kms and STRATA_KEYRING_KEYS (the names a
   * policy may encrypt with: core/composition/keyring-env.ts), with which the function checks the policies it is
   * given. `use` (the functions that read and write values) adds kms:GenerateDataKey and kms:Decrypt on exactly those
   * keys, and only for Strata's data keys: the request must carry Strata's encryption context
   * (`kms:EncryptionContext:strata:purpose`, core/transforms/kms-keyring.ts). The key policy must let the account's IAM
   * policies grant use of the key (the default key policy does; a key in another account must name this role).
   */
  /**
   * The Lambda origins the environment declares (cdk/config/lambda-origins.ts): STRATA_LAMBDA_ORIGINS, against which
   * the function checks the policies it is given, and, with `invoke` (the functions that serve reads),
   * lambda:InvokeFunction on exactly those ARNs. IAM matches the ARN as invoked: an unqualified ARN covers unqualified
   * invocations only, a version's or alias's ARN that qualifier only
   * (https://docs.aws.amazon.com/lambda/latest/dg/lambda-api-permissions-ref.html), so no wildcard is needed.
   */
  bindLambdaOrigins(arns: readonly string[], access: { invoke: boolean }): this {
    if (arns.length === 0) return this;
    this.addEnvironment('STRATA_LAMBDA_ORIGINS', arns.join(','));
    if (access.invoke)
      this.role.addToPolicy(
        new iam.PolicyStatement({ sid: 'LambdaOrigins', actions: ['lambda:InvokeFunction'], resources: [...arns] }),
      );
    return this;
  }

  bindKeyring(keys: PolicyEncryptionKeys, access: { use: boolean }): this {
    this.addEnvironment('STRATA_KEYRING', 'kms');
    this.addEnvironment('STRATA_KEYRING_KEYS', keys.names.join(','));
    if (access.use)
      this.role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'PolicyEncryptionKeys',
          actions: ['kms:GenerateDataKey', 'kms:Decrypt'],
          resources: [...keys.keyArns],
          conditions: {
            StringEquals: Object.fromEntries(
              Object.entries(KMS_ENCRYPTION_CONTEXT).map(([k, v]) => [`kms:EncryptionContext:${k}`, v]),
            ),
          },
        }),
      );
    return this;
  }

  /**
   * The cache-node fleet: the shared secret, read at start-up from the ring store's `fleet/secret` object
   * (STRATA_WARM_SECRET_FROM_RING: through the S3 gateway endpoint, never in the configuration) with read access to
   * that one object and the right to create it, never replace it (CacheNodeFleet.grantCreateSecret: whichever
   * coordinator needs it first creates it), the daemon's port, and the network path (the fleet admits the
   * coordinators' security group). The ring store's location comes from {@link bindRingStore}.
   */
  bindFleet(fleet: CacheNodeFleet): this {
    check(
      this,
      this.inVpc,
      'the cache nodes are reachable only from the VPC: give the function vpc, vpcSubnets and securityGroup',
    );
    this.function.addEnvironment('STRATA_WARM_SECRET_FROM_RING', '1');
    this.function.addEnvironment('STRATA_NODE_PORT', String(fleet.port));
    fleet.grantReadSecret(this.role);
    fleet.grantCreateSecret(this.role);
    return this;
  }

  /**
   * The admin API's workflows: STRATA_WORKFLOW_ARNS (workflow name → state machine ARN), and the right to start
   * executions of those state machines, list them and describe them (their progress documents are read from
   * the ring store, see {@link bindWorkflowProgress}). `machines` maps each workflow to its state machine and name.
   */
  bindWorkflows(machines: Readonly<Record<string, { machine: sfn.IStateMachine; name: string }>>): this {
    const stack = Stack.of(this);
    this.function.addEnvironment(
      'STRATA_WORKFLOW_ARNS',
      stack.toJsonString(Object.fromEntries(Object.entries(machines).map(([w, m]) => [w, m.machine.stateMachineArn]))),
    );
    const shown = (v: string, pseudo: string) => (Token.isUnresolved(v) ? `<AWS::${pseudo}>` : v);
    for (const { machine, name } of Object.values(machines)) {
      machine.grantStartExecution(this.role);
      this.role.addToPolicy(
        new iam.PolicyStatement({ actions: ['states:ListExecutions'], resources: [machine.stateMachineArn] }),
      );
      const executions = `arn:${stack.partition}:states:${stack.region}:${stack.account}:execution:${name}:*`;
      this.role.addToPolicy(new iam.PolicyStatement({ actions: ['states:DescribeExecution'], resources: [executions] }));
      Validations.of(this.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::arn:${shown(stack.partition, 'Partition')}:states:${shown(stack.region, 'Region')}:${shown(stack.account, 'AccountId')}:execution:${name}:*]`,
        reason: `Executions of ${name} are named when they start; DescribeExecution takes an execution ARN, so the grant covers that state machine's executions (and no other's).`,
      });
    }
    return this;
  }
}
