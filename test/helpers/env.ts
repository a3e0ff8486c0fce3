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
