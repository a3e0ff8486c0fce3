import type { TestServices } from './global-setup';

/** Stops what global setup started (LocalStack only if this run started it and STRATA_KEEP_LOCALSTACK is unset). */
export default async function globalTeardown(): Promise<void> {
  const state = globalThis as { __strataTestServices?: TestServices };
  const s = state.__strataTestServices;
  if (!s) return;
  state.__strataTestServices = undefined;
  for (const pid of [s.redisPid, process.env.STRATA_KEEP_LOCALSTACK ? null : s.localstackPid]) {
    if (!pid) continue;
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        /* gone */
      }
    }
  }
}
