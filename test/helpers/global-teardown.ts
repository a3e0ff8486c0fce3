import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './services';

const STATE = join(ROOT, 'node_modules', '.strata-test-services.json');

export default async function globalTeardown(): Promise<void> {
  if (!existsSync(STATE)) return;
  const { redisPid, localstackPid } = JSON.parse(readFileSync(STATE, 'utf8')) as { redisPid?: number; localstackPid?: number | null };
  rmSync(STATE);
  for (const pid of [redisPid, process.env.STRATA_KEEP_LOCALSTACK ? null : localstackPid]) {
    if (!pid) continue;
    try { process.kill(-pid, 'SIGTERM'); } catch { try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ } }
  }
}
