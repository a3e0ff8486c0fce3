/**
 * `npm start`: Strata's HTTP API on http://localhost:$PORT (default 8080) with embedded defaults — an in-process
 * memory hot tier and a local-folder cold tier under .strata-data/ — so no AWS account, Docker or Redis is
 * needed. REDIS_URL switches the hot tier to Redis; STRATA_S3_BUCKET (+ STRATA_S3_ENDPOINT for LocalStack)
 * switches the cold tier to S3.
 */
import { resolve } from 'node:path';
import { ConfigError, loadRuntimeEnv } from '../layers/core/runtime/config.js';
import { buildApiContext } from '../layers/core/runtime/context.js';
import { warmTierFromEnv } from '../layers/core/runtime/warm.js';
import { LocalFolderTier } from '../layers/core/tiers/local-folder-tier.js';
import { startLocalServer } from './local/server.js';

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 8080);
  const host = process.env.HOST ?? '127.0.0.1';
  const env = loadRuntimeEnv({
    ...process.env,
    STRATA_LOCAL_DIR: process.env.STRATA_LOCAL_DIR ?? resolve('.strata-data'),
    STRATA_PUBLIC_URL: process.env.STRATA_PUBLIC_URL ?? `http://localhost:${port}`,
  });
  const ctx = buildApiContext(env, { warmTier: warmTierFromEnv });
  // Leftovers of a crashed run (temp files, abandoned uploads) in the folder tier.
  if (ctx.presigner instanceof LocalFolderTier) await ctx.presigner.sweep().catch((e) => console.warn(`strata: could not clean ${env.STRATA_LOCAL_DIR}: ${e}`));
  const local = await startLocalServer({ context: ctx, port, host });
  const url = `http://localhost:${port}`;
  console.log(`\nStrata is serving its API on ${url}\n`);
  for (const line of ctx.describe()) console.log(`  ${line}`);
  console.log(`\nTry it:\n  curl -X PUT --data-binary 'hello' ${url}/v1/ns/demo/keys/greeting\n  curl -i ${url}/v1/ns/demo/keys/greeting\n  curl ${url}/v1/stats\n\nCtrl-C stops it (write-back data is flushed first).`);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n${signal}: stopping`);
    await local.close();
    await ctx.coordinator.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((e) => {
  console.error(e instanceof ConfigError ? `strata: ${e.message}` : e);
  process.exit(1);
});
