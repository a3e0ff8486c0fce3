import { ArnFormat, CfnResource, RemovalPolicy, Stack, type CfnDeletionPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as elasticache from 'aws-cdk-lib/aws-elasticache';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import { Construct, type IConstruct } from 'constructs';
import { stackUuid } from '../lib/unique-names.js';
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
  /**
   * Key for encryption at rest. With `onDelete: 'snapshot'` the final snapshot is encrypted with it too, so the key
   * must be retained (RemovalPolicy.RETAIN) for the snapshot to stay restorable. @default - an AWS-owned key
   */
  readonly encryptionKey?: kms.IKey;
  /** @default '8' */
  readonly majorEngineVersion?: string;
  /**
   * ACL of the application user. The default allows every key and channel and every command except wiping or
   * enumerating the keyspace, which the application never needs. @default 'on ~* &* +@all -flushall -flushdb -keys'
   */
  readonly accessString?: string;
  /**
   * What happens to the data when CloudFormation deletes the cache (the stack is deleted, or the cache leaves the
   * template): `snapshot` takes a final snapshot first, named `<cacheName>-final-<stack UUID>`; `destroy` drops it.
   * The cache itself is never retained: a retained cache would keep its user group, users and security group in use
   * (their deletion fails, and so does the stack's), keep its network interfaces in the VPC's subnets, and keep its
   * fixed name taken, so the stack could not be created again. @default 'snapshot'
   */
  readonly onDelete?: 'snapshot' | 'destroy';
}

/**
 * The hot tier's connection settings, as the Lambda runtime reads them (core/composition/runtime-env.ts). There is no
 * password: a function signs an IAM token for `username` on `cacheName` for every connection (StrataFunction.bindHotTier).
 */
export interface HotTierConnection {
  /** `rediss://<endpoint>:<port>` (TLS is mandatory on ElastiCache Serverless, and for IAM authentication). */
  readonly url: string;
  /** The IAM-authenticated user: its user id, which equals its user name. */
  readonly username: string;
  /** The serverless cache's name: the host IAM tokens are signed for. */
  readonly cacheName: string;
}

const CACHE_PORTS = ec2.Port.tcpRange(6379, 6380); // 6379 primary endpoint, 6380 reader endpoint

/**
 * ElastiCache Serverless (Valkey) for the hot tier: TLS-only, encrypted at rest, role-based access control with one
 * application user authenticated by IAM (the `default` user is disabled), usage limits, a security group that admits
 * only what {@link allowFrom} names, and deletion that keeps the data in a final snapshot without keeping the cache.
 *
 * IAM authentication (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html): the user's
 * authentication mode is `iam` and its user id equals its user name; a client is granted `elasticache:Connect` on
 * the cache and on the user ({@link grantConnect}) and presents a short-lived token signed with its own credentials
 * instead of a password. Nothing secret exists: no Secrets Manager secret, no read of one at start-up, and no
 * Secrets Manager endpoint needed for it.
 */
export class ValkeyServerlessCache extends Construct {
  readonly cache: elasticache.CfnServerlessCache;
  readonly securityGroup: ec2.SecurityGroup;
  readonly connection: HotTierConnection;
  readonly connections: ec2.Connections;
  /** The application user (IAM authentication). */
  readonly appUser: elasticache.CfnUser;
  /** The final snapshot's name (`onDelete: 'snapshot'`). */
  readonly finalSnapshotName?: string;

  constructor(scope: Construct, id: string, props: ValkeyServerlessCacheProps) {
    super(scope, id);
    check(
      this,
      /^[a-z][a-z0-9-]{0,29}$/.test(props.cacheName),
      `cacheName '${props.cacheName}' must be 1-30 characters of a-z, 0-9 and "-", starting with a letter`,
    );
    check(
      this,
      intIn(props.maxDataStorageGb, 1, 5000),
      `maxDataStorageGb must be a whole number of GB from 1 to 5000 (got ${props.maxDataStorageGb})`,
    );
    check(
      this,
      intIn(props.maxEcpuPerSecond, 1000, 15_000_000),
      `maxEcpuPerSecond must be a whole number from 1000 to 15000000 (got ${props.maxEcpuPerSecond})`,
    );
    const retention = props.snapshotRetentionDays ?? 0;
    check(this, intIn(retention, 0, 35), `snapshotRetentionDays must be 0-35 (got ${retention})`);
    check(
      this,
      props.dailySnapshotTime === undefined || /^([01]\d|2[0-3]):[0-5]\d$/.test(props.dailySnapshotTime),
      `dailySnapshotTime must be "HH:MM" in UTC (got '${props.dailySnapshotTime}')`,
    );
    check(this, props.dailySnapshotTime === undefined || retention > 0, 'dailySnapshotTime needs snapshotRetentionDays > 0');
    const subnets = props.vpc.selectSubnets(props.vpcSubnets);
    check(
      this,
      subnets.subnets.length >= 2 && subnets.subnets.length <= 3,
      `ElastiCache Serverless takes 2-3 subnets; the selection has ${subnets.subnets.length}`,
    );
    const onDelete = props.onDelete ?? 'snapshot';
    const keyPolicy = props.encryptionKey ? deletionPolicyOf(props.encryptionKey) : undefined;
    check(
      this,
      onDelete !== 'snapshot' || keyPolicy === undefined || keyPolicy === 'Retain',
      `the final snapshot is encrypted with encryptionKey, which is deleted with the stack (DeletionPolicy ${keyPolicy}): ` +
        'retain the key, or the snapshot cannot be restored',
    );

    this.securityGroup = new ec2.SecurityGroup(this, 'SecurityGroup', {
      vpc: props.vpc,
      description: `ElastiCache Serverless ${props.cacheName}: Valkey over TLS from the coordinators only`,
      allowAllOutbound: false,
    });
    this.connections = new ec2.Connections({ securityGroups: [this.securityGroup], defaultPort: CACHE_PORTS });

    // The user name and user id of an IAM-enabled user must be identical
    // (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html, Limitations).
    const username = `${props.cacheName}-app`;
    this.appUser = new elasticache.CfnUser(this, 'AppUser', {
      engine: 'valkey',
      userId: username,
      userName: username,
      accessString: props.accessString ?? 'on ~* &* +@all -flushall -flushdb -keys',
      // Type is updated in place ("Update requires: No interruption",
      // https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-elasticache-user-authenticationmode.html),
      // so a deployment whose user had a password keeps the same user.
      authenticationMode: { Type: 'iam' },
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
      userIds: [defaultUser.userId, this.appUser.userId],
    });
    userGroup.node.addDependency(defaultUser, this.appUser);

    // The final snapshot's name must be unique in the account (a name taken fails the delete with
    // ServerlessCacheSnapshotAlreadyExistsFault:
    // https://docs.aws.amazon.com/AmazonElastiCache/latest/APIReference/API_DeleteServerlessCache.html)
    // and match ^[a-z][a-z0-9]*(-[a-z0-9]+)*$, at most 255 characters
    // (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-elasticache-serverlesscachesnapshot.html):
    // the stack's UUID (lower-case hex and dashes) makes it unique, also when the stack is deleted and created again.
    this.finalSnapshotName = onDelete === 'snapshot' ? `${props.cacheName}-final-${stackUuid(this)}` : undefined;
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
      // Taken by CloudFormation's delete (DeleteServerlessCache with FinalSnapshotName), since DeletionPolicy
      // Snapshot does not apply to serverless caches
      // (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html); not
      // create-only, so adding it to an existing cache updates it in place
      // (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-elasticache-serverlesscache.html).
      finalSnapshotName: this.finalSnapshotName,
    });
    this.cache.node.addDependency(userGroup);
    // Deleted with the stack, the data kept by the final snapshot (see onDelete).
    this.cache.applyRemovalPolicy(RemovalPolicy.DESTROY);

    this.connection = {
      url: `rediss://${this.cache.attrEndpointAddress}:${this.cache.attrEndpointPort}`,
      username,
      cacheName: props.cacheName,
    };
  }

  /**
   * The ARNs `elasticache:Connect` is granted on, in the stack of `scope` (so a grant in another stack refers to no
   * resource of this one): the cache and the user, whose formats are
   * `arn:${Partition}:elasticache:${Region}:${Account}:serverlesscache:${ServerlessCacheName}` and
   * `arn:${Partition}:elasticache:${Region}:${Account}:user:${UserId}` (Service Authorization Reference, resource types:
   * https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticache.html).
   */
  connectArns(scope: IConstruct): [cache: string, user: string] {
    const stack = Stack.of(scope);
    const arn = (resource: string, resourceName: string) =>
      stack.formatArn({ service: 'elasticache', resource, resourceName, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
    return [arn('serverlesscache', this.connection.cacheName), arn('user', this.connection.username)];
  }

  /**
   * The IAM identity needs `elasticache:Connect` on the cache and on the ElastiCache user, nothing more
   * (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html, Setup).
   */
  grantConnect(grantee: iam.IGrantable & IConstruct): iam.Grant {
    return iam.Grant.addToPrincipal({ grantee, actions: ['elasticache:Connect'], resourceArns: this.connectArns(grantee) });
  }

  /** Opens the cache's ports (6379-6380) to `peer`, e.g. the coordinators' security group. */
  allowFrom(peer: ec2.IConnectable, description = 'Valkey over TLS from the coordinators'): void {
    this.connections.allowDefaultPortFrom(peer, description);
  }
}

/** The DeletionPolicy of a key defined in this app (undefined for an imported key, whose lifetime is not ours). */
function deletionPolicyOf(key: kms.IKey): `${CfnDeletionPolicy}` | undefined {
  const child = key.node.defaultChild;
  return child instanceof CfnResource ? (child.cfnOptions.deletionPolicy ?? 'Delete') : undefined;
}
