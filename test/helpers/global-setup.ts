import { ensureLocalStack, LOCALSTACK_ENDPOINT, startRedis } from './services';

/** Handles live in this process: Jest runs global setup and teardown in the same one. */
export interface TestServices {
  redisPid: number;
  localstackPid: number | null;
}
const state = globalThis as { __strataTestServices?: TestServices };

/**
 * Jest global setup: unless STRATA_TEST_SERVICES=none (unit runs), start a real redis-server for this run
 * and make sure LocalStack is up. Workers read STRATA_TEST_REDIS_URL and STRATA_TEST_S3_ENDPOINT.
 */
export default async function globalSetup(): Promise<void> {
  // Cache nodes that tests start skip the boot warm-up (seconds per node over a run); its own test turns it on.
  process.env.STRATA_NODE_WARMUP_MS ??= '0';
  if (process.env.STRATA_TEST_SERVICES === 'none') return;
  const started = Date.now();
  const [redis, localstackPid] = await Promise.all([startRedis(), ensureLocalStack()]);
  process.env.STRATA_TEST_REDIS_URL = redis.url;
  process.env.STRATA_TEST_S3_ENDPOINT = LOCALSTACK_ENDPOINT;
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
  process.env.AWS_REGION ??= 'us-east-1';
  state.__strataTestServices = { redisPid: redis.pid, localstackPid };
  process.stderr.write(
    `\n[test services] redis ${redis.url}, LocalStack ${LOCALSTACK_ENDPOINT}${localstackPid ? ' (started)' : ' (reused)'} in ${Date.now() - started} ms\n`,
  );
}
