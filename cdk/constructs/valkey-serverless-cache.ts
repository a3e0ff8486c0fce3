import { RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as elasticache from 'aws-cdk-lib/aws-elasticache';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { check, intIn } from './validation.js';

export interface ValkeyServerlessCacheProps {
  /** Lower-case name, unique per account and region; also prefixes the user and user-group ids. */
  readonly cacheName: string;
  readonly vpc: ec2.IVpc;
  /** 2-3 subnets in distinct AZs. */
  readonly vpcSubnets: ec2.SubnetSelection;
  /** Usage limit on stored data (the cache never grows, nor bills, beyond it). Valkey: 1-5000 GB. */
  readonly maxDataStorageGb: number;
  /** Usage limit on ElastiCache Processing Units per second: 1000-15,000,000. */
  readonly maxEcpuPerSecond: number;
  /** Days of daily snapshots kept, 0-35. @default 0 (no snapshots) */
  readonly snapshotRetentionDays?: number;
  /** UTC "HH:MM" of the daily snapshot. @default - chosen by ElastiCache */
  readonly dailySnapshotTime?: string;
  /** Key for encryption at rest. @default - an AWS-owned key (data is always encrypted at rest) */
  readonly encryptionKey?: kms.IKey;
  /** @default '8' */
  readonly majorEngineVersion?: string;
  /**
   * ACL of the application user. The default allows every key and channel and every command except wiping or
   * enumerating the keyspace, which the application never needs. @default 'on ~* &* +@all -flushall -flushdb -keys'
   */
  readonly accessString?: string;
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
}

/**
 * The hot tier's connection settings, as the Lambda runtime reads them (layers/core/runtime/config.ts). The password
 * is read from {@link ValkeyServerlessCache.passwordSecret} at start-up (StrataFunction.bindHotTier).
 */
export interface HotTierConnection {
  /** `rediss://<endpoint>:<port>` (TLS is mandatory on ElastiCache Serverless). */
  readonly url: string;
  readonly username: string;
}

const CACHE_PORTS = ec2.Port.tcpRange(6379, 6380); // 6379 primary endpoint, 6380 reader endpoint

/**
 * ElastiCache Serverless (Valkey) for the hot tier: TLS-only, encrypted at rest, role-based access control with a
 * generated password for one application user (the `default` user is disabled), usage limits, and a security
 * group that admits only what {@link allowFrom} names.
 */
export class ValkeyServerlessCache extends Construct {
  readonly cache: elasticache.CfnServerlessCache;
  readonly securityGroup: ec2.SecurityGroup;
  /** Password of the application user (generated; never in the template). */
  readonly passwordSecret: secretsmanager.Secret;
  readonly connection: HotTierConnection;
  readonly connections: ec2.Connections;

  constructor(scope: Construct, id: string, props: ValkeyServerlessCacheProps) {
    super(scope, id);
    check(this, /^[a-z][a-z0-9-]{0,29}$/.test(props.cacheName), `cacheName '${props.cacheName}' must be 1-30 characters of a-z, 0-9 and "-", starting with a letter`);
    check(this, intIn(props.maxDataStorageGb, 1, 5000), `maxDataStorageGb must be a whole number of GB from 1 to 5000 (got ${props.maxDataStorageGb})`);
    check(this, intIn(props.maxEcpuPerSecond, 1000, 15_000_000), `maxEcpuPerSecond must be a whole number from 1000 to 15000000 (got ${props.maxEcpuPerSecond})`);
    const retention = props.snapshotRetentionDays ?? 0;
    check(this, intIn(retention, 0, 35), `snapshotRetentionDays must be 0-35 (got ${retention})`);
    check(this, props.dailySnapshotTime === undefined || /^([01]\d|2[0-3]):[0-5]\d$/.test(props.dailySnapshotTime), `dailySnapshotTime must be "HH:MM" in UTC (got '${props.dailySnapshotTime}')`);
    check(this, props.dailySnapshotTime === undefined || retention > 0, 'dailySnapshotTime needs snapshotRetentionDays > 0');
    const subnets = props.vpc.selectSubnets(props.vpcSubnets);
    check(this, subnets.subnets.length >= 2 && subnets.subnets.length <= 3, `ElastiCache Serverless takes 2-3 subnets; the selection has ${subnets.subnets.length}`);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    this.securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `ElastiCache Serverless ${props.cacheName}: Valkey over TLS from the coordinators only`,
      allowAllOutbound: false,
    });
    this.connections = new ec2.Connections({ securityGroups: [this.securityGroup], defaultPort: CACHE_PORTS });

    this.passwordSecret = new secretsmanager.Secret(this, 'AppUserPassword', {
      description: `Password of the ${props.cacheName} application user (ElastiCache RBAC)`,
      // ElastiCache passwords: 16-128 printable characters without spaces, '"', '/' or '@'.
      generateSecretString: { passwordLength: 32, excludePunctuation: true },
      removalPolicy,
    });
    Validations.of(this.passwordSecret).acknowledge(
      { id: 'AwsSolutions-SMG4', reason: 'The ElastiCache user password is applied by CloudFormation (dynamic reference) to the user, and the functions read it at start-up; rotating it needs a rotation function that calls ModifyUser with both passwords, planned with the ops issue. Access is also bounded by the security group (coordinators only) and TLS.' },
    );

    const username = `${props.cacheName}-app`;
    const appUser = new elasticache.CfnUser(this, 'AppUser', {
      engine: 'valkey',
      userId: `${props.cacheName}-app`,
      userName: username,
      accessString: props.accessString ?? 'on ~* &* +@all -flushall -flushdb -keys',
      authenticationMode: { Type: 'password', Passwords: [this.passwordSecret.secretValue.unsafeUnwrap()] },
    });
    // A user group must contain a user named "default"; this one cannot log in.
    const defaultUser = new elasticache.CfnUser(this, 'DisabledDefaultUser', {
      engine: 'valkey',
      userId: `${props.cacheName}-default`,
      userName: 'default',
      accessString: 'off -@all',
      authenticationMode: { Type: 'no-password-required' },
    });
    const userGroup = new elasticache.CfnUserGroup(this, 'UserGroup', {
      engine: 'valkey',
      userGroupId: props.cacheName,
      userIds: [defaultUser.userId, appUser.userId],
    });
    userGroup.node.addDependency(defaultUser, appUser);

    this.cache = new elasticache.CfnServerlessCache(this, 'Cache', {
      serverlessCacheName: props.cacheName,
      description: 'Strata hot tier',
      engine: 'valkey',
      majorEngineVersion: props.majorEngineVersion ?? '8',
      subnetIds: subnets.subnetIds,
      securityGroupIds: [this.securityGroup.securityGroupId],
      userGroupId: userGroup.userGroupId,
      kmsKeyId: props.encryptionKey?.keyArn,
      cacheUsageLimits: {
        dataStorage: { maximum: props.maxDataStorageGb, unit: 'GB' },
        ecpuPerSecond: { maximum: props.maxEcpuPerSecond },
      },
      snapshotRetentionLimit: retention,
      dailySnapshotTime: props.dailySnapshotTime,
    });
    this.cache.node.addDependency(userGroup);
    this.cache.applyRemovalPolicy(removalPolicy);

    this.connection = {
      url: `rediss://${this.cache.attrEndpointAddress}:${this.cache.attrEndpointPort}`,
      username,
    };
  }

  /** Opens the cache's ports (6379-6380) to `peer`, e.g. the coordinators' security group. */
  allowFrom(peer: ec2.IConnectable, description = 'Valkey over TLS from the coordinators'): void {
    this.connections.allowDefaultPortFrom(peer, description);
  }
}
