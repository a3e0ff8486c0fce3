/**
 * Cache node daemon entry point (one per EC2 instance, or per local process in tests and `npm start`).
 *
 *   STRATA_NODE_SECRET=... node --import tsx cachenode/src/main.ts --data-dir /data/strata --port 7070
 *
 * With STRATA_NODE_SECRET_FROM_RING=1 it first waits for the fleet secret in the ring store (ring-secret.ts).
 * Runs a short warm-up first (STRATA_NODE_WARMUP_MS, see warmup.ts) and prints `{"event":"warmed-up",...}`.
 * Prints one JSON line `{"event":"listening",...}` when it accepts requests. SIGTERM/SIGINT shut it down
 * gracefully (in-flight requests drain, the store is flushed); exit code 0 after a clean shutdown. Exit codes: 2 for
 * bad configuration, 3 for a data directory the node cannot use (another build's key order, a damaged journal, or
 * the data volume lost while it ran: volume-watch.ts).
 */
import { FleetSecretInvalidError } from '../../core/ring/fleet-secret.js';
import { casStoreFromUri } from '../../core/ring/store.js';
import { loadNodeConfig, NodeConfigError, type NodeConfig } from './config.js';
import { JournalCorruptError } from './journal.js';
import { waitForRingSecret } from './ring-secret.js';
import { CacheNode } from './server.js';
import { StoreLayoutError } from './store.js';
import { warmUp } from './warmup.js';
import { nodeLog } from './node-log.js';
import { registerSecret, setLogLevel } from '../../core/util/logger.js';

/** Exit status for a data directory the node cannot use: the systemd units do not restart after it. */
const EXIT_UNUSABLE_DATA_DIR = 3;
/**
 * How long a node whose volume is lost goes on answering 503 VOLUME_LOST before it exits: requests in flight get
 * their refusal and a prober may read the reason, and then the process is gone, which is what the failure detector
 * treats as a dead node (a node answering 503 is not one).
 */
const VOLUME_LOST_EXIT_MS = 1000;

async function main(): Promise<void> {
  let config;
  try {
    config = loadNodeConfig(process.env, process.argv.slice(2));
  } catch (e) {
    if (e instanceof NodeConfigError) {
      nodeLog.error(e.message);
      process.exit(2);
    }
    throw e;
  }
  setLogLevel(config.logLevel);
  if (config.secretFromRing) config = await secretFromRing(config);
  registerSecret(config.secret);
  if (config.warmupMs > 0) {
    try {
      const w = await warmUp(config, config.warmupMs);
      process.stdout.write(JSON.stringify({ event: 'warmed-up', ...w }) + '\n');
    } catch (e) {
      // A warm-up is an optimization: a node that could not run it still serves.
      nodeLog.warn('warm-up failed (starting without it)', { error: e });
    }
  }
  const node = await CacheNode.start(config);
  node.onVolumeLost = (reason) => {
    process.stdout.write(JSON.stringify({ event: 'volume-lost', reason }) + '\n');
    // No graceful shutdown: there is nothing left to flush to. A restart on this path would bring the node back empty
    // while the ring still gives it ranges; exiting with this status lets it be replaced instead.
    setTimeout(() => process.exit(EXIT_UNUSABLE_DATA_DIR), VOLUME_LOST_EXIT_MS);
  };
  process.stdout.write(
    JSON.stringify({
      event: 'listening',
      nodeId: node.nodeId,
      port: node.port,
      host: config.host,
      pid: process.pid,
      ringVersion: node.ownership.version,
      keys: node.store.stats().keys,
    }) + '\n',
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    node.shutdown().then(
      () => {
        process.stdout.write(JSON.stringify({ event: 'stopped', signal }) + '\n');
        process.exit(0);
      },
      (e: unknown) => {
        nodeLog.error('shutdown failed', { error: e });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** The config with the secret read from the ring store (waiting until it exists); exit 2 for an unusable one. */
async function secretFromRing(config: NodeConfig): Promise<NodeConfig> {
  const store = config.ringStore!;
  const cas = casStoreFromUri(store.uri, store.s3Endpoint);
  try {
    return { ...config, secret: await waitForRingSecret(cas, { describe: store.uri }) };
  } catch (e) {
    if (e instanceof FleetSecretInvalidError) {
      nodeLog.error(e.message);
      process.exit(2);
    }
    throw e;
  } finally {
    cas.close?.();
  }
}

main().catch((e: unknown) => {
  // A data directory the node cannot use is the operator's to fix: the message says how, a stack would not help.
  if (e instanceof StoreLayoutError || e instanceof JournalCorruptError) {
    nodeLog.error(`cannot open the store: ${e.message}`);
    process.exit(EXIT_UNUSABLE_DATA_DIR);
  }
  nodeLog.error('failed to start', { error: e });
  process.exit(1);
});
