import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { buildApiContext, type BuildOptions, type BuiltContext } from '../../core/composition/api-context.js';
import { warmTierFromEnv } from '../../core/composition/warm-tier-env.js';
import type { WorkflowService } from '../../core/workflows/admin-service.js';
import { startLocalServer } from '../../scripts/local/server.js';
import { freePort } from './services.js';
import { testRedisUrl, testS3Endpoint, uniqueName } from './env.js';

export interface TestApi {
  url: string;
  ctx: BuiltContext;
  /** The S3 bucket of the `redis+s3` backend. */
  bucket?: string;
  close(): Promise<void>;
}

export type Backend = 'embedded' | 'redis+s3';

/**
 * Starts the real local server on a free port over real tiers: `embedded` (memory + local folder) or
 * `redis+s3` (the run's redis-server and a fresh LocalStack bucket). `o.workflows` serves the admin routes.
 */
export async function startTestApi(
  backend: Backend,
  extraEnv: Record<string, string> = {},
  o: { workflows?: WorkflowService; build?: Pick<BuildOptions, 'policyTimer' | 'flushTimer'> } = {},
): Promise<TestApi> {
  const port = await freePort();
  const env: Record<string, string> = { STRATA_PUBLIC_URL: `http://127.0.0.1:${port}`, ...extraEnv };
  let dir: string | undefined;
  let s3Bucket: string | undefined;
  if (backend === 'embedded') {
    dir = mkdtempSync(join(tmpdir(), 'strata-api-'));
    env.STRATA_LOCAL_DIR = dir;
  } else {
    // A bucket of its own, unless the caller shares one (a second server over the same tiers).
    const bucket = extraEnv.STRATA_S3_BUCKET ?? uniqueName('strata-test').toLowerCase();
    const s3 = new S3Client({
      endpoint: testS3Endpoint(),
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    if (!extraEnv.STRATA_S3_BUCKET) await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3Bucket = bucket;
    s3.destroy();
    Object.assign(env, {
      STRATA_REDIS_URL: testRedisUrl(),
      STRATA_S3_BUCKET: bucket,
      STRATA_S3_ENDPOINT: testS3Endpoint(),
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
    });
  }
  const ctx = buildApiContext(loadRuntimeEnv(env), { warmTier: warmTierFromEnv, ...o.build });
  // The admin routes' workflows (a LocalWorkflowService in tests).
  if (o.workflows) ctx.workflows = o.workflows;
  const server = await startLocalServer({ context: ctx, port });
  return {
    url: server.url,
    ctx,
    ...(s3Bucket ? { bucket: s3Bucket } : {}),
    close: async () => {
      await server.close();
      ctx.livePolicy?.stop();
      await ctx.coordinator.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
