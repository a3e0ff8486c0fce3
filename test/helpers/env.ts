import { DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';

/** Service endpoints published by global-setup for integration tests. */
export function testRedisUrl(): string {
  const url = process.env.STRATA_TEST_REDIS_URL;
  if (!url)
    throw new Error(
      'STRATA_TEST_REDIS_URL is not set: integration tests need the Jest global setup (do not set STRATA_TEST_SERVICES=none)',
    );
  return url;
}

export function testS3Endpoint(): string {
  const url = process.env.STRATA_TEST_S3_ENDPOINT;
  if (!url) throw new Error('STRATA_TEST_S3_ENDPOINT is not set: integration tests need the Jest global setup');
  return url;
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Empties a test bucket (a page of up to 1,000 objects at a time, however many there are) and deletes it. */
export async function removeBucket(s3: S3Client, bucket: string): Promise<void> {
  for (;;) {
    const list = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    const keys = (list.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length === 0) break;
    await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
  }
  await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
}
