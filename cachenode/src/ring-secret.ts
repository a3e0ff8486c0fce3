import { FleetSecretInvalidError, readStoredFleetSecret } from '../../core/ring/fleet-secret.js';
import { FLEET_SECRET_KEY } from '../../core/ring/node-reports.js';
import type { CasStore } from '../../core/ring/store.js';
import { logLine } from '../../core/util/logger.js';
import { nodeLog } from './node-log.js';

export interface WaitForSecretOptions {
  /** Where the store is (log lines). */
  describe: string;
  /** First pause between reads (ms); it doubles up to `maxRetryMs`. @default 500 */
  retryMs?: number;
  /** @default 10000 */
  maxRetryMs?: number;
  /** A waiting line at most this often (ms). @default 30000 */
  logEveryMs?: number;
  /** @default the node's structured logger */
  log?: (line: Record<string, unknown>) => void;
}

/**
 * The fleet secret from the ring store, waiting for as long as it takes to appear: the workflow steps create it
 * before they launch the first node, but a node can also be started by hand, or boot while S3 is unreachable.
 * Logs one line when it starts waiting (and then every `logEveryMs`) saying where it looks and why it waits.
 *
 * A missing object and a refused read look alike here: without s3:ListBucket, S3 answers a GET of a missing key
 * with 403 rather than 404 (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, Permissions), and
 * the node's role has no list right. Both are waited out. A stored secret nobody can use (FleetSecretInvalidError)
 * is thrown: waiting would not fix it.
 */
export async function waitForRingSecret(cas: CasStore, opts: WaitForSecretOptions): Promise<string> {
  const log = opts.log ?? ((line) => logLine(line, nodeLog));
  const maxRetryMs = opts.maxRetryMs ?? 10_000;
  const logEveryMs = opts.logEveryMs ?? 30_000;
  const started = Date.now();
  const where = { store: opts.describe, key: FLEET_SECRET_KEY };
  let pause = opts.retryMs ?? 500;
  let loggedAt: number | undefined;
  for (;;) {
    let reason: string;
    try {
      const secret = await readStoredFleetSecret(cas);
      if (secret) {
        const waitedMs = Date.now() - started;
        if (loggedAt !== undefined) log({ level: 'info', msg: 'fleet secret found in the ring store', ...where, waitedMs });
        return secret;
      }
      reason = 'it does not exist yet (the workflow steps create it before they launch the first node)';
    } catch (e) {
      if (e instanceof FleetSecretInvalidError) throw e;
      reason = `it cannot be read (yet): ${e instanceof Error ? e.message : String(e)}`;
    }
    if (loggedAt === undefined || Date.now() - loggedAt >= logEveryMs) {
      log({
        level: 'info',
        msg: 'waiting for the fleet secret in the ring store',
        ...where,
        reason,
        waitedMs: Date.now() - started,
      });
      loggedAt = Date.now();
    }
    await new Promise((r) => setTimeout(r, pause));
    pause = Math.min(maxRetryMs, pause * 2);
  }
}
