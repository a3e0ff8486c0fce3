import { Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { CHOSEN_PACKAGING, COMMON_ESBUILD, REPO_ROOT, type LambdaPackaging } from '../lib/packaging.js';
import type { CacheNodeFleet } from './cache-node-fleet.js';
import { ColdTierBucket } from './cold-tier-bucket.js';
import { check, intIn } from './validation.js';
import type { ValkeyServerlessCache } from './valkey-serverless-cache.js';

export interface StrataFunctionProps {
  /** TypeScript entry file exporting `handler`. */
  readonly entry: string;
  readonly description?: string;
  readonly vpc: ec2.IVpc;
  readonly vpcSubnets: ec2.SubnetSelection;
  /** The coordinators' security group: what the cache, the cache nodes and endpoints admit. */
  readonly securityGroup: ec2.ISecurityGroup;
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

/**
 * An API/ops Lambda as Strata runs them: nodejs24.x on arm64, one ESM bundle with source maps (and
 * --enable-source-maps), in the VPC behind the coordinators' security group, its own log group with retention,
 * and a role that starts with nothing but its logs and VPC networking. Everything else arrives through the
 * `bindX()` helpers, which set the environment variables the runtime reads (layers/core/runtime/config.ts)
 * together with the matching IAM grant or network path, so one can never be added without the other.
 */
export class StrataFunction extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: StrataFunctionProps) {
    super(scope, id);
    const memoryMb = props.memoryMb ?? 1024;
    const timeoutSeconds = props.timeoutSeconds ?? 29;
    const maxTimeout = props.maxTimeoutSeconds ?? 900;
    check(this, intIn(memoryMb, 128, 10240), `memoryMb must be a whole number from 128 to 10240 (got ${memoryMb})`);
    check(this, intIn(timeoutSeconds, 1, maxTimeout), `timeoutSeconds must be 1-${maxTimeout}${maxTimeout === 29 ? ' (API Gateway gives up after 29 s)' : ''} (got ${timeoutSeconds})`);
    for (const k of Object.keys(props.environment ?? {})) check(this, !k.startsWith('AWS_'), `environment variable ${k} is reserved by Lambda`);
    const reserved = props.reservedConcurrency;
    check(this, reserved === undefined || (Number.isInteger(reserved) && reserved >= 1), `reservedConcurrency must be a whole number >= 1 (got ${reserved}); leave it out for none`);

    this.logGroup = new logs.LogGroup(this, 'Logs', { retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH, removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.RETAIN });

    // No managed policies: logs to its own group only, and the ENI actions Lambda needs to run in a VPC.
    this.role = new iam.Role(this, 'Role', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'), description: `${props.description ?? id} (Strata)` });
    this.role.addToPolicy(new iam.PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [this.logGroup.logGroupArn] }));
    this.role.addToPolicy(new iam.PolicyStatement({
      actions: ['ec2:CreateNetworkInterface', 'ec2:DescribeNetworkInterfaces', 'ec2:DescribeSubnets', 'ec2:DeleteNetworkInterface', 'ec2:AssignPrivateIpAddresses', 'ec2:UnassignPrivateIpAddresses'],
      resources: ['*'],
    }));
    Validations.of(this.role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'Lambda needs these EC2 network-interface actions to attach to the VPC; Describe* supports no resource scoping and the ENIs do not exist before the function does (same scope as the AWSLambdaVPCAccessExecutionRole managed policy, minus its logs:* on every log group).',
    });

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
      vpc: props.vpc,
      vpcSubnets: props.vpcSubnets,
      securityGroups: [props.securityGroup],
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}/package-lock.json`,
      environment: { NODE_OPTIONS: '--enable-source-maps', ...props.environment },
      bundling: {
        format: nodejs.OutputFormat.ESM,
        target: COMMON_ESBUILD.target,
        minify: COMMON_ESBUILD.minify,
        sourceMap: COMMON_ESBUILD.sourcemap,
        sourcesContent: COMMON_ESBUILD.sourcesContent,
        banner: COMMON_ESBUILD.banner,
        externalModules: [...packaging.externalModules],
        bundleAwsSDK: !packaging.externalModules.includes('@aws-sdk/*'),
      },
    });
    // lambda.Function declares DependsOn its role although Role: GetAtt already implies it; cfn-lint warns (W3005).
    (this.function.node.defaultChild as lambda.CfnFunction).addMetadata('cfn-lint', { config: { ignore_checks: ['W3005'], ignore_reasons: { W3005: 'redundant DependsOn added by aws-cdk-lib lambda.Function' } } });
  }

  /** Sets an environment variable (plain settings only). */
  addEnvironment(name: string, value: string): this {
    check(this, !name.startsWith('AWS_'), `environment variable ${name} is reserved by Lambda`);
    this.function.addEnvironment(name, value);
    return this;
  }

  /**
   * Hot tier: STRATA_REDIS_URL (`rediss://`, cluster mode), the user, the password's secret ARN
   * (STRATA_REDIS_PASSWORD_SECRET_ARN, read once per container at start-up by runtime/secrets.ts: the password is
   * never in the function's configuration) with read access to that secret, and the network path from this
   * function's security group to the cache.
   */
  bindHotTier(cache: ValkeyServerlessCache): this {
    this.function.addEnvironment('STRATA_REDIS_URL', cache.connection.url);
    this.function.addEnvironment('STRATA_REDIS_CLUSTER', '1');
    this.function.addEnvironment('STRATA_REDIS_USERNAME', cache.connection.username);
    this.function.addEnvironment('STRATA_REDIS_PASSWORD_SECRET_ARN', cache.passwordSecret.secretArn);
    cache.passwordSecret.grantRead(this.role);
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
   * The warm tier's ring store: STRATA_WARM_RING_BUCKET/PREFIX (the ring and migration documents, changed by S3
   * conditional writes) under {@link ColdTierBucket.RING_PREFIX} of the cold tier's bucket, that prefix only.
   */
  bindRingStore(cold: ColdTierBucket): this {
    this.function.addEnvironment('STRATA_WARM_RING_BUCKET', cold.bucket.bucketName);
    this.function.addEnvironment('STRATA_WARM_RING_PREFIX', ColdTierBucket.RING_PREFIX);
    this.role.addManagedPolicy(cold.ringStorePolicy);
    return this;
  }

  /**
   * The cache-node fleet: the shared secret's ARN (STRATA_WARM_SECRET_ARN, read at start-up: never in the
   * configuration), the daemon's port, and the network path (the fleet admits the coordinators' security group).
   */
  bindFleet(fleet: CacheNodeFleet): this {
    this.function.addEnvironment('STRATA_WARM_SECRET_ARN', fleet.secret.secretArn);
    this.function.addEnvironment('STRATA_NODE_PORT', String(fleet.port));
    fleet.secret.grantRead(this.role);
    return this;
  }

  /**
   * The admin API's workflows: STRATA_WORKFLOW_ARNS (workflow name → state machine ARN), and the right to start
   * executions of those state machines, list them and describe them (their progress documents are read through
   * the ring store, see {@link bindRingStore}). `machines` maps each workflow to its state machine and name.
   */
  bindWorkflows(machines: Readonly<Record<string, { machine: sfn.IStateMachine; name: string }>>): this {
    const stack = Stack.of(this);
    this.function.addEnvironment('STRATA_WORKFLOW_ARNS', stack.toJsonString(Object.fromEntries(Object.entries(machines).map(([w, m]) => [w, m.machine.stateMachineArn]))));
    const shown = (v: string, pseudo: string) => (Token.isUnresolved(v) ? `<AWS::${pseudo}>` : v);
    for (const { machine, name } of Object.values(machines)) {
      machine.grantStartExecution(this.role);
      this.role.addToPolicy(new iam.PolicyStatement({ actions: ['states:ListExecutions'], resources: [machine.stateMachineArn] }));
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
