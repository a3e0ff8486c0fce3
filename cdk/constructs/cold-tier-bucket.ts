import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { S3Tier } from '../../core/tiers/s3-tier.js';
import { s3ObjectKey, SWEEPS_FOLDER, UPLOADS_FOLDER } from '../../core/tiers/storage-key.js';
import { SYSTEM_NAMESPACE } from '../../core/model/keys.js';
import { INVALIDATIONS_KEY } from '../../core/coordinator/invalidations.js';
import { NODE_STATS_FOLDER, FLEET_SECRET_KEY } from '../../core/ring/node-reports.js';
import { RING_KEY } from '../../core/ring/store.js';
import { EVALUATOR_STATE_KEY } from '../../core/policy/evaluator-store.js';
import { JOBS_KEY } from '../../core/policy/jobs.js';
import { SCALE_TRIGGER_SAMPLE_KEY } from '../../core/workflows/trigger/scale-trigger.js';
import { HEALTH_CHECKER_KEY } from '../../core/nodes/health-snapshot.js';
import { check, intIn } from './validation.js';

/**
 * The ring store's documents (keys under {@link ColdTierBucket.RING_PREFIX}; `folder/*` is a folder of them), each
 * granted on its own by {@link ColdTierBucket.grantRingRead} / {@link ColdTierBucket.grantRingWrite}. Who reads
 * and who writes each, and the code that names the keys:
 */
export const RING_STORE_DOCUMENTS = {
  /**
   * The ring (ring/store.ts RING_KEY): written by the ring's writers and by the policy evaluator, the failure detector in
   * AWS, which only marks nodes DOWN (core/nodes/health-check.ts); read by the API functions, publisher, trigger, nodes.
   */
  ring: RING_KEY,
  /** Migration sessions and plans (core/nodes/migration.ts): the ring's writers only. */
  migrations: 'migrations/*',
  /** Executions' progress (workflows/progress.ts ProgressStore): written by the steps, read by the admin API. */
  executions: 'workflows/executions/*',
  /** Per-node scale-out locks (workflows/progress.ts ScaleLocks): taken by the ScaleOut steps, read by the trigger. */
  scaleLocks: 'workflows/scale-locks/*',
  /** The trigger's previous counter sample (workflows/scale-trigger.ts): the trigger's own document. */
  scaleTriggerSample: SCALE_TRIGGER_SAMPLE_KEY,
  /** Each node's statistics report (ring/node-reports.ts): written by the nodes, read by the publisher and trigger. */
  nodeStats: `${NODE_STATS_FOLDER}/*`,
  /** The fleet's shared secret (ring/node-reports.ts): created by the steps, read by the coordinators and nodes. */
  fleetSecret: FLEET_SECRET_KEY,
  /**
   * Policy documents and their audit trail (core/policy/admin.ts): written by the admin API function, read by every API
   * function. `policies/current.json` (replaced with If-Match, created with If-None-Match) and
   * `policies/versions/<n>-<id>.json` (created once with If-None-Match, never changed). Under the same folder, the
   * policy evaluator's own document ({@link RING_STORE_DOCUMENTS.evaluatorState}), which this grant covers too.
   */
  policies: 'policies/*',
  /**
   * The policy evaluator's state between ticks and its firing history (core/policy/evaluator-store.ts, replaced with
   * If-Match, created with If-None-Match): written by the evaluator alone (cdk/constructs/policy-ticker.ts), which may
   * read the policy documents but never write them; read by the admin function (its policies/* grant).
   */
  evaluatorState: EVALUATOR_STATE_KEY,
  /**
   * The policy evaluator's background jobs (core/policy/jobs.ts, by compare-and-set): queued and taken off by the
   * evaluator, leased and advanced by the job runner (cdk/constructs/policy-ticker.ts); no one else writes it.
   */
  evaluatorJobs: JOBS_KEY,
  /**
   * The operators' switch over automatic node replacement (core/nodes/health-controls.ts, `health/` + `controls`): read
   * by the failure detector (the policy evaluator) when a marking is due.
   */
  healthControls: 'health/controls',
  /** The failure detector's state between ticks (core/composition/fleet-health-tick.ts): the policy evaluator's own. */
  healthChecker: HEALTH_CHECKER_KEY,
} as const;
export type RingStoreDocument = keyof typeof RING_STORE_DOCUMENTS;

/** What {@link ColdTierBucket.grantRingWriters} grants: everything that changes the ring or moves data between nodes. */
export const RING_WRITER_DOCUMENTS: readonly RingStoreDocument[] = ['ring', 'migrations', 'executions', 'scaleLocks'];

/** What one document of each folder is (cdk-nag acknowledgement reasons). */
const RING_DOCUMENT_UNITS: Partial<Record<RingStoreDocument, string>> = {
  migrations: 'migration session or plan',
  executions: 'workflow execution',
  scaleLocks: 'node being scaled out',
  nodeStats: 'cache node',
  policies: 'policy version (versions/<n>-<id>.json), beside the policy in force (current.json)',
};

export interface ColdTierBucketProps {
  /** Key prefix of every object the tier writes (STRATA_S3_PREFIX): one segment of [A-Za-z0-9._-]. @default 'v1' */
  readonly prefix?: string;
  /** Tombstone lifetime; tombstone objects are expired by a lifecycle rule after it (rounded up to days). @default 10 minutes */
  readonly tombstoneTtl?: Duration;
  /** Days after which never-committed staged uploads (`<prefix>/_uploads/`) are deleted. @default 1 */
  readonly stagingExpirationDays?: number;
  /** Days after which incomplete multipart uploads are aborted. @default 1 */
  readonly abortIncompleteMultipartUploadDays?: number;
  /** Days server access logs are kept. @default 90 */
  readonly accessLogExpirationDays?: number;
  /** @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Whether the bucket sends its events to EventBridge, where the Workflows stack's rules start the upload-commit and
   * invalidation-sweep workflows (config `workflows.asyncUploadCompletion`, `workflows.invalidationSweeps`). S3 then
   * sends every event of every object, billed per million.
   * @default false
   */
  readonly eventBridge?: boolean;
}

/**
 * The S3 cold tier: SSE-S3 encrypted, public access blocked, TLS 1.2+ enforced, bucket-owner-enforced objects,
 * server access logs to a companion bucket, and lifecycle rules for the tier's garbage: incomplete multipart
 * uploads, expired tombstones (S3Tier tags them strata-tombstone=1) and abandoned staged uploads.
 */
export class ColdTierBucket extends Construct {
  readonly bucket: s3.Bucket;
  readonly accessLogsBucket: s3.Bucket;
  readonly prefix: string;
  /**
   * Everything the tier (core/tiers/s3-tier.ts) does, on its prefix only. A managed policy beside the
   * bucket, so the grant is reviewed where the bucket is and roles in other stacks attach it by ARN. The prefix holds
   * the order markers too (`<prefix>/_k/`, core/tiers/s3-order-markers.ts), which the tier PUTs, lists, HEADs and
   * deletes with `If-Match: <ETag>`: a conditional delete needs s3:GetObject as well as s3:DeleteObject
   * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-delete-enforce.html). No lifecycle rule may
   * expire markers: only the tier knows when one is safe to remove.
   */
  readonly accessPolicy: iam.ManagedPolicy;

  constructor(scope: Construct, id: string, props: ColdTierBucketProps = {}) {
    super(scope, id);
    // Log delivery through a bucket policy, not ACLs: ACLs are disabled (bucket owner enforced). Set here so the
    // construct does not depend on the app's feature flags.
    this.node.setContext('@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy', true);
    this.prefix = props.prefix ?? 'v1';
    check(
      this,
      /^[A-Za-z0-9._-]+$/.test(this.prefix) && this.prefix !== '.' && this.prefix !== '..',
      `prefix '${this.prefix}' must be one path segment of A-Z, a-z, 0-9, ".", "_" and "-"`,
    );
    const tombstoneTtlMs = (props.tombstoneTtl ?? Duration.minutes(10)).toMilliseconds();
    check(this, tombstoneTtlMs >= 1000, 'tombstoneTtl must be at least one second');
    const stagingDays = props.stagingExpirationDays ?? 1;
    check(
      this,
      intIn(stagingDays, 1, 365),
      `stagingExpirationDays must be a whole number of days from 1 to 365 (got ${stagingDays})`,
    );
    const abortDays = props.abortIncompleteMultipartUploadDays ?? 1;
    check(this, intIn(abortDays, 1, 365), `abortIncompleteMultipartUploadDays must be 1-365 (got ${abortDays})`);
    const logDays = props.accessLogExpirationDays ?? 90;
    check(this, intIn(logDays, 1, 3650), `accessLogExpirationDays must be 1-3650 (got ${logDays})`);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;

    this.accessLogsBucket = new s3.Bucket(this, 'AccessLogs', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      lifecycleRules: [{ id: 'expire-access-logs', expiration: Duration.days(logDays) }],
      removalPolicy,
    });

    // The tombstone rule comes from the tier itself, so the tag, prefix and lifetime cannot drift apart.
    const tier = new S3Tier({ bucket: 'lifecycle-rule-template', prefix: this.prefix, tombstoneTtlMs, region: 'us-east-1' });
    const rule = tier.tombstoneLifecycleRule();
    void tier.close();
    const filter = rule.Filter?.And;
    check(
      this,
      !!filter && rule.Expiration?.Days !== undefined,
      'S3Tier.tombstoneLifecycleRule() changed shape: update ColdTierBucket',
    );

    this.bucket = new s3.Bucket(this, 'Bucket', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: this.accessLogsBucket,
      serverAccessLogsPrefix: 'cold-tier/',
      removalPolicy,
      lifecycleRules: [
        { id: 'abort-incomplete-multipart-uploads', abortIncompleteMultipartUploadAfter: Duration.days(abortDays) },
        {
          id: rule.ID,
          prefix: filter!.Prefix,
          tagFilters: Object.fromEntries((filter!.Tags ?? []).map((t) => [t.Key!, t.Value!])),
          expiration: Duration.days(rule.Expiration!.Days!),
        },
        {
          id: 'expire-abandoned-staged-uploads',
          prefix: `${this.prefix}/${UPLOADS_FOLDER}/`,
          expiration: Duration.days(stagingDays),
        },
        // A sweep removes its request when done (core/workflows/steps/sweep-steps.ts); one whose sweep failed stays
        // behind (a few hundred bytes), until this.
        { id: 'expire-leftover-sweep-requests', prefix: `${this.prefix}/${SWEEPS_FOLDER}/`, expiration: Duration.days(30) },
      ],
    });
    // S3 sends its events to EventBridge, where the Workflows stack's rule starts the upload-commit workflow when an
    // upload's commit request is created (core/api/async-complete.ts): the API functions cannot reach Step Functions
    // from the VPC. Set on the bucket itself (CloudFormation's NotificationConfiguration), not through the
    // notifications custom resource that `eventBridgeEnabled` deploys. Once enabled S3 sends every event type of every
    // object (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html), and EventBridge bills S3's
    // events as "AWS opt-in data events", per million (https://aws.amazon.com/eventbridge/pricing/): nothing while
    // idle, but a cost that follows the cold tier's write rate, not the commit requests alone (docs/API.md).
    if (props.eventBridge)
      (this.bucket.node.defaultChild as s3.CfnBucket).addPropertyOverride(
        'NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled',
        true,
      );

    this.accessPolicy = new iam.ManagedPolicy(this, 'AccessPolicy', {
      description: `Strata cold tier: objects under ${this.prefix}/ of its bucket`,
      statements: [
        new iam.PolicyStatement({
          sid: 'TierObjects',
          actions: ['s3:GetObject', 's3:PutObject', 's3:PutObjectTagging', 's3:DeleteObject', 's3:AbortMultipartUpload'],
          resources: [this.bucket.arnForObjects(`${this.prefix}/*`)],
        }),
        new iam.PolicyStatement({ sid: 'HeadBucket', actions: ['s3:ListBucket'], resources: [this.bucket.bucketArn] }),
      ],
    });
    const bucketId = Stack.of(this).getLogicalId(this.bucket.node.defaultChild as s3.CfnBucket);
    Validations.of(this.accessPolicy).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${this.prefix}/*]`,
      reason:
        'Object keys are derived from user keys at run time (<prefix>/<ns>/<shard>/<key>), so the tier needs every key under its prefix; the grant stops at that prefix of this one bucket.',
    });
  }

  /** Prefix of the warm tier's ring store (ring, migration and workflow documents) in this bucket. */
  static readonly RING_PREFIX = 'strata-ring';

  /**
   * Grants read of ring-store documents: s3:GetObject on each, and s3:ListBucket limited by s3:prefix to the same
   * keys, so that a document not written yet reads as absent (404), not as denied (403). One managed policy per
   * document beside the bucket, attached by ARN: who may touch what is reviewed here, document by document.
   */
  grantRingRead(grantee: iam.IRole, documents: readonly RingStoreDocument[]): void {
    for (const d of documents) grantee.addManagedPolicy(this.ringPolicy('Read', d));
  }

  /**
   * Grants conditional write of ring-store documents, and their read: every ring-store write is a
   * read-modify-write that names the etag it read (S3 conditional writes need s3:PutObject only; there is no
   * separate permission for If-Match / If-None-Match). Nothing deletes a ring-store document, so no DeleteObject.
   */
  grantRingWrite(grantee: iam.IRole, documents: readonly RingStoreDocument[]): void {
    for (const d of documents) grantee.addManagedPolicy(this.ringPolicy('Write', d));
  }

  /**
   * The ring's writers: change the ring document and run migrations (ring, migration sessions and plans, the
   * executions' progress and the scale-out locks). Today the workflow step function. The failure detector (the policy
   * evaluator) writes the ring document alone, to mark nodes DOWN. Everyone else reads at most.
   */
  grantRingWriters(grantee: iam.IRole): void {
    this.grantRingWrite(grantee, RING_WRITER_DOCUMENTS);
  }

  private ringPolicy(access: 'Read' | 'Write', document: RingStoreDocument): iam.ManagedPolicy {
    const id = `Ring${access}${document.charAt(0).toUpperCase()}${document.slice(1)}`;
    const existing = this.node.tryFindChild(id) as iam.ManagedPolicy | undefined;
    if (existing) return existing;
    const key = `${ColdTierBucket.RING_PREFIX}/${RING_STORE_DOCUMENTS[document]}`;
    const policy = new iam.ManagedPolicy(this, id, {
      description: `Strata ring store: ${access === 'Read' ? 'read' : 'read and conditional write'} of ${key} in the cold tier's bucket`,
      statements: [
        new iam.PolicyStatement({
          sid: 'RingDocuments',
          actions: access === 'Read' ? ['s3:GetObject'] : ['s3:GetObject', 's3:PutObject'],
          resources: [this.bucket.arnForObjects(key)],
        }),
        // A GET of a missing key is answered 404 only to a caller that may list it; S3 checks that with the key as s3:prefix.
        new iam.PolicyStatement({
          sid: 'ListRingDocuments',
          actions: ['s3:ListBucket'],
          resources: [this.bucket.bucketArn],
          conditions: { StringLike: { 's3:prefix': [key] } },
        }),
      ],
    });
    if (key.endsWith('/*')) {
      const bucketId = Stack.of(this).getLogicalId(this.bucket.node.defaultChild as s3.CfnBucket);
      Validations.of(policy).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${key}]`,
        reason:
          `One document per ${RING_DOCUMENT_UNITS[document] ?? 'item'}, named at run time under ${key.slice(0, -1)}; ` +
          'the grant stops at that folder.',
      });
    }
    return policy;
  }

  /**
   * Grants read and conditional write of the invalidations document alone (core/coordinator/invalidations.ts), to a
   * function that flushes namespaces and reads their log without the cold tier itself (the admin function): GET and
   * PUT of that one object, and s3:ListBucket limited by s3:prefix to its key, so that before the first invalidation
   * it reads as absent (404), not as denied (403).
   * https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html ("If you don't have the s3:ListBucket
   * permission, Amazon S3 returns an HTTP status code 403 Access Denied error")
   */
  grantInvalidations(grantee: iam.IRole): void {
    const existing = this.node.tryFindChild('InvalidationsDocument') as iam.ManagedPolicy | undefined;
    const key = this.invalidationsKey;
    const policy =
      existing ??
      new iam.ManagedPolicy(this, 'InvalidationsDocument', {
        description: `Strata invalidations: read and conditional write of ${key} in the cold tier's bucket`,
        statements: [
          new iam.PolicyStatement({
            sid: 'InvalidationsDocument',
            actions: ['s3:GetObject', 's3:PutObject'],
            resources: [this.bucket.arnForObjects(key)],
          }),
          new iam.PolicyStatement({
            sid: 'ListInvalidationsDocument',
            actions: ['s3:ListBucket'],
            resources: [this.bucket.bucketArn],
            conditions: { StringLike: { 's3:prefix': [key] } },
          }),
        ],
      });
    grantee.addManagedPolicy(policy);
  }

  /** The invalidations document's object key (as S3Tier names the entry: system namespace, its shard, its key). */
  get invalidationsKey(): string {
    return s3ObjectKey(this.prefix, SYSTEM_NAMESPACE, INVALIDATIONS_KEY);
  }

  /** ARN pattern of the tier's objects (`<bucket>/<prefix>/*`): everything the tier reads and writes. */
  get tierObjectsArn(): string {
    return this.bucket.arnForObjects(`${this.prefix}/*`);
  }

  /**
   * Attaches {@link accessPolicy} to `grantee`'s role: read/HEAD, conditional put, copy (commit of presigned
   * uploads), tagged put (tombstones), delete (conditional too: order markers) and abort of failed multipart uploads
   * on the tier prefix only, and HeadBucket (s3:ListBucket, which also lists the order markers) for health checks.
   * Presigned URLs carry the same permissions.
   */
  grantTierAccess(grantee: iam.IRole): void {
    grantee.addManagedPolicy(this.accessPolicy);
  }
}
