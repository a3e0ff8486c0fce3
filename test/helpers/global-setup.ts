import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureLocalStack, LOCALSTACK_ENDPOINT, ROOT, startRedis } from './services';

const STATE = join(ROOT, 'node_modules', '.strata-test-services.json');

/**
 * Jest global setup: unless STRATA_TEST_SERVICES=none (unit runs), start a real redis-server for this run
 * and make sure LocalStack is up. Workers read STRATA_TEST_REDIS_URL and STRATA_TEST_S3_ENDPOINT.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.STRATA_TEST_SERVICES === 'none') return;
  const started = Date.now();
  const [redis, localstackPid] = await Promise.all([startRedis(), ensureLocalStack()]);
  process.env.STRATA_TEST_REDIS_URL = redis.url;
  process.env.STRATA_TEST_S3_ENDPOINT = LOCALSTACK_ENDPOINT;
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
  process.env.AWS_REGION ??= 'us-east-1';
  writeFileSync(STATE, JSON.stringify({ redisPid: redis.pid, localstackPid }));
  process.stderr.write(`\n[test services] redis ${redis.url}, LocalStack ${LOCALSTACK_ENDPOINT}${localstackPid ? ' (started)' : ' (reused)'} in ${Date.now() - started} ms\n`);
}
