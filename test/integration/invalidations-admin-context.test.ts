/**
 * The admin function's namespace flush in a deployment's shape (issue 24, item 3): the admin runtime has no cold
 * tier (outside the VPC, an embedded hot tier), and names the cold tier's bucket in STRATA_INVALIDATIONS_BUCKET; its
 * flush must reach the document the data functions check, in LocalStack S3, not a copy in its own memory.
 */
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { buildApiContext } from '../../core/composition/api-context.js';
import { loadRuntimeEnv } from '../../core/composition/runtime-env.js';
import { testS3Endpoint, uniqueName } from '../helpers/env.js';

describe('invalidations from a runtime without the cold tier (admin function, LocalStack S3)', () => {
  const saved = { ...process.env };
  let bucket: string;

  beforeAll(async () => {
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' });
    bucket = uniqueName('strata-inv').toLowerCase();
    const s3 = new S3Client({ endpoint: testS3Endpoint(), forcePathStyle: true, region: 'us-east-1' });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
  });

  afterAll(() => {
    process.env = saved;
  });

  it("flushes what the data functions serve: the admin runtime's flush hides their entries", async () => {
    const common = { AWS_REGION: 'us-east-1', STRATA_S3_ENDPOINT: testS3Endpoint(), STRATA_S3_PREFIX: 'v1' };
    const dataCtx = buildApiContext(loadRuntimeEnv({ ...common, STRATA_S3_BUCKET: bucket }), { flushTimer: false });
    const adminCtx = buildApiContext(
      loadRuntimeEnv({ ...common, STRATA_INVALIDATIONS_BUCKET: bucket, STRATA_INVALIDATIONS_PREFIX: 'v1' }),
      { flushTimer: false },
    );
    try {
      // The admin runtime's only tier is its embedded hot tier.
      expect(adminCtx.coordinator.tierList().map((t) => t.name)).toEqual(['hot']);
      await dataCtx.coordinator.put('web', 'k', Buffer.from('v'));
      await adminCtx.coordinator.invalidate('web', { flush: true }, 'admin');
      expect(await dataCtx.coordinator.get('web', 'k')).toBeUndefined();
      expect((await dataCtx.coordinator.invalidationLog('web'))[0]).toMatchObject({ kind: 'flush', by: 'admin' });
      await dataCtx.coordinator.put('web', 'k', Buffer.from('after'));
      expect((await dataCtx.coordinator.get('web', 'k'))!.entry.value.toString()).toBe('after');
    } finally {
      await Promise.all([dataCtx.coordinator.close(), adminCtx.coordinator.close()]);
    }
  });
});
