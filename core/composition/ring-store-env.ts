import { FileCasStore, S3CasStore, type CasStore } from '../ring/store.js';
import { runtimeEnvSchema } from './runtime-env.js';
import { ConfigError } from '../errors.js';
import { formatIssues } from '../util/zod-issues.js';

/**
 * The ring store, and only what reaching it takes, for functions that read the nodes' reports instead of talking
 * to the nodes (the cost publisher, the scale-out trigger): STRATA_WARM_RING_BUCKET / STRATA_WARM_RING_PREFIX
 * (AWS) or STRATA_WARM_RING_DIR (local), AWS_REGION, STRATA_S3_ENDPOINT (or AWS_ENDPOINT_URL_S3), and
 * STRATA_NODE_STATS_ID_PREFIX (what precedes a node's id in its report's key: CacheNodeFleet.statsReportIdPrefix
 * on EC2, empty locally). Unlike loadRuntimeEnv it does not ask for the fleet secret: these functions never call
 * a node.
 */
const ringStoreEnvSchema = runtimeEnvSchema.pick({
  STRATA_WARM_RING_BUCKET: true,
  STRATA_WARM_RING_PREFIX: true,
  STRATA_WARM_RING_DIR: true,
  STRATA_S3_ENDPOINT: true,
  AWS_REGION: true,
});

/** A report id is at most 128 characters (node-reports.ts); the prefix leaves room for the node's id. */
const REPORT_ID_PREFIX = /^[A-Za-z0-9._:-]{0,64}$/;

export interface RingStoreEnv {
  readonly region: string;
  /** S3 endpoint override (LocalStack). */
  readonly s3Endpoint?: string;
  /** The ring store; undefined when neither a bucket nor a folder is configured. */
  readonly cas?: CasStore;
  /** Where the store is, for messages. */
  readonly describe?: string;
  /** See ring/node-report-reader.ts nodeReportKey. */
  readonly reportIdPrefix: string;
}

export function ringStoreFromEnv(raw: NodeJS.ProcessEnv = process.env): RingStoreEnv {
  const given = {
    STRATA_WARM_RING_BUCKET: raw.STRATA_WARM_RING_BUCKET,
    STRATA_WARM_RING_PREFIX: raw.STRATA_WARM_RING_PREFIX,
    STRATA_WARM_RING_DIR: raw.STRATA_WARM_RING_DIR,
    STRATA_S3_ENDPOINT: raw.STRATA_S3_ENDPOINT || raw.AWS_ENDPOINT_URL_S3,
    AWS_REGION: raw.AWS_REGION,
  };
  // Empty means unset, as loadRuntimeEnv reads it.
  const r = ringStoreEnvSchema.safeParse(
    Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined && v !== '')),
  );
  if (!r.success) {
    throw new ConfigError(`invalid configuration: ${formatIssues(r.error.issues, { root: '' })}`);
  }
  const env = r.data;
  const reportIdPrefix = raw.STRATA_NODE_STATS_ID_PREFIX ?? '';
  if (!REPORT_ID_PREFIX.test(reportIdPrefix)) {
    throw new ConfigError('invalid configuration: STRATA_NODE_STATS_ID_PREFIX: at most 64 of A-Z a-z 0-9 . _ : -');
  }
  const s3Endpoint = env.STRATA_S3_ENDPOINT;
  const base = { region: env.AWS_REGION, reportIdPrefix, ...(s3Endpoint ? { s3Endpoint } : {}) };
  if (env.STRATA_WARM_RING_BUCKET) {
    const clientConfig = { region: env.AWS_REGION, ...(s3Endpoint ? { endpoint: s3Endpoint, forcePathStyle: true } : {}) };
    const cas = new S3CasStore({ bucket: env.STRATA_WARM_RING_BUCKET, prefix: env.STRATA_WARM_RING_PREFIX, clientConfig });
    return { ...base, cas, describe: `s3://${env.STRATA_WARM_RING_BUCKET}/${env.STRATA_WARM_RING_PREFIX}` };
  }
  if (env.STRATA_WARM_RING_DIR)
    return { ...base, cas: new FileCasStore(env.STRATA_WARM_RING_DIR), describe: env.STRATA_WARM_RING_DIR };
  return base;
}
