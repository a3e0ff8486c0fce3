import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DEFAULT_NODE_STATS_INTERVAL_MS, nodeStatsKey } from '../../core/ring/node-reports.js';
import { formatIssues } from '../../core/util/zod-issues.js';
import { LOG_LEVELS, type LogLevel } from '../../core/util/logger.js';
import { MIN_PEER_PROTOCOL, PROTOCOL_VERSION } from '../../core/nodes/protocol.js';

/**
 * Cache node configuration: environment variables, each overridable by a command-line flag of the same name
 * (`STRATA_NODE_DATA_DIR` ↔ `--data-dir`). The secret should come from the environment or a file: flags show
 * up in process listings.
 */
export const nodeConfigSchema = z.object({
  /** TCP port; 0 picks a free one (printed on start). */
  STRATA_NODE_PORT: z.coerce.number().int().min(0).max(65535).default(7070),
  STRATA_NODE_HOST: z.string().default('0.0.0.0'),
  /** Folder of the LMDB environment (the EBS mount on EC2). */
  STRATA_NODE_DATA_DIR: z.string().min(1),
  STRATA_NODE_SECRET: z.string().min(16, 'the shared secret must be at least 16 characters').optional(),
  STRATA_NODE_SECRET_FILE: z.string().optional(),
  /**
   * `1`: read the shared secret from the ring store (its `fleet/secret` document, ring/fleet-secret.ts) at start,
   * waiting while it does not exist yet. How fleet nodes get it (the workflow steps create it), so that no node
   * needs Secrets Manager. Needs STRATA_NODE_RING_STORE; excludes STRATA_NODE_SECRET and STRATA_NODE_SECRET_FILE.
   */
  STRATA_NODE_SECRET_FROM_RING: z
    .enum(['1', '0', 'true', 'false'])
    .transform((v) => v === '1' || v === 'true')
    .default(false),
  /** Stable node id; default: the one stored in the data dir, else a new random one. */
  STRATA_NODE_ID: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
    .optional(),
  /** Accounted bytes the node may hold (keys + headers + values + per-entry overhead). */
  STRATA_NODE_CAPACITY_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .default(8 * 1024 ** 3),
  /** Fill ratio from which the node asks for eviction. */
  STRATA_NODE_WATERMARK: z.coerce.number().gt(0).max(1).default(0.85),
  /** 'flush': acknowledge writes once fsynced; 'commit': once committed (survives a process crash only). */
  STRATA_NODE_SYNC: z.enum(['flush', 'commit']).default('flush'),
  /**
   * How often small writes, durable in the write journal once acknowledged, are applied to LMDB (ms). Longer:
   * fewer, larger LMDB transactions (a page written by many puts is written once) and more memory for the
   * writes waiting (bounded: see cachenode/README.md).
   */
  STRATA_NODE_APPLY_INTERVAL_MS: z.coerce.number().int().min(1).max(60_000).default(1000),
  STRATA_NODE_MAX_VALUE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(2 ** 31)
    .default(512 * 1024 * 1024),
  /** Upper bound of a range export's rate, bytes per second (a request may ask for less). 0 = unlimited. */
  STRATA_NODE_EXPORT_RATE: z.coerce
    .number()
    .int()
    .min(0)
    .default(32 * 1024 * 1024),
  /** How long a graceful shutdown waits for in-flight requests. */
  STRATA_NODE_DRAIN_MS: z.coerce.number().int().min(0).default(10_000),
  /**
   * Time budget of the boot warm-up (ms): before listening, the node serves a short workload of every request
   * kind to a scratch node of its own, so V8 has compiled the hot paths before real traffic (see warmup.ts).
   * 0 = off.
   */
  STRATA_NODE_WARMUP_MS: z.coerce.number().int().min(0).max(60_000).default(2000),
  /** Lowest level of the node's log lines (JSON on stderr). */
  STRATA_LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  /** Expiry sweep period (removes expired entries and tombstones). 0 = off. */
  STRATA_NODE_SWEEP_MS: z.coerce.number().int().min(0).default(10_000),
  /**
   * Where the ring document lives (`file:<dir>` or `s3://<bucket>/<prefix>`): the node reads it every
   * STRATA_NODE_RING_POLL_MS and installs a newer version itself, besides the versions pushed to it.
   */
  STRATA_NODE_RING_STORE: z
    .string()
    .regex(/^(file:.+|s3:\/\/[^/]+.*)$/, 'must be file:<dir> or s3://<bucket>/<prefix>')
    .optional(),
  /** How often to read the ring store (ms). 0 = never (pushes only). */
  STRATA_NODE_RING_POLL_MS: z.coerce.number().int().min(0).default(5000),
  /** S3 endpoint for the ring store (LocalStack); the SDK's default otherwise. */
  STRATA_NODE_S3_ENDPOINT: z.string().url().optional(),
  /**
   * How often the node writes its statistics report (its /stats body) to the ring store (ms), so that readers
   * outside the VPC (cost publisher, scale-out trigger) need neither the node's port nor the secret. 0 = never.
   */
  STRATA_NODE_STATS_INTERVAL_MS: z.coerce
    .number()
    .int()
    .refine((n) => n === 0 || (n >= 100 && n <= 3_600_000), 'must be 0 (off) or 100-3600000')
    .default(DEFAULT_NODE_STATS_INTERVAL_MS),
  /**
   * The id the report is stored under (`nodes/<id>/stats.json`); default: the node id. On EC2 it is the
   * instance-profile session's aws:userid (`<role id>:<instance id>`), the one report key the node's role may
   * write (cdk/constructs/cache-node-fleet.ts).
   */
  STRATA_NODE_STATS_ID: z
    .string()
    .refine((id) => isReportId(id), 'must be 1-128 characters of A-Z a-z 0-9 . _ : -')
    .optional(),
  /**
   * The oldest protocol version the node accepts from callers (core/nodes/protocol.ts). Raise it to this build's
   * version once every coordinator and node runs it, so a forgotten older caller is refused, not half-served.
   */
  STRATA_NODE_MIN_PROTOCOL: z.coerce.number().int().min(MIN_PEER_PROTOCOL).max(PROTOCOL_VERSION).default(MIN_PEER_PROTOCOL),
  /** The build label /healthz reports (a commit, an image tag); default: the package version. */
  STRATA_NODE_BUILD: z.string().max(100).optional(),
  /** How often the node checks that its data directory is still the one it opened (ms; volume-watch.ts). 0 = off. */
  STRATA_NODE_VOLUME_CHECK_MS: z.coerce.number().int().min(0).max(60_000).default(1000),
});

function isReportId(id: string): boolean {
  try {
    nodeStatsKey(id);
    return true;
  } catch {
    return false;
  }
}

export type NodeConfigEnv = z.infer<typeof nodeConfigSchema>;

export interface NodeConfig {
  logLevel: LogLevel;
  port: number;
  host: string;
  dataDir: string;
  secret: string;
  nodeId?: string;
  capacityBytes: number;
  watermark: number;
  sync: 'flush' | 'commit';
  /** Journal apply interval, ms (see STRATA_NODE_APPLY_INTERVAL_MS). */
  applyIntervalMs: number;
  maxValueBytes: number;
  exportRateBytesPerSec: number;
  drainMs: number;
  sweepMs: number;
  /** Boot warm-up budget, ms (0 = off). */
  warmupMs: number;
  /** Ring store to poll (see STRATA_NODE_RING_STORE). */
  ringStore?: { uri: string; pollMs: number; s3Endpoint?: string };
  /**
   * The secret is to be read from the ring store (STRATA_NODE_SECRET_FROM_RING): `secret` is empty until the
   * daemon's entry point has waited for it (ring-secret.ts); CacheNode.start refuses to start without one.
   */
  secretFromRing?: boolean;
  /** Statistics reports to the ring store, when one is configured (see STRATA_NODE_STATS_INTERVAL_MS). */
  statsReports?: { intervalMs: number; id?: string };
  /** The oldest protocol version accepted from callers. @default MIN_PEER_PROTOCOL */
  minPeerProtocol?: number;
  /** What /healthz reports as the node's build. @default the package version */
  build?: string;
  /** Data volume check period, ms (0 = off). @default 0: only the daemon's configuration turns it on */
  volumeCheckMs?: number;
}

export class NodeConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NodeConfigError';
  }
}

/** `--data-dir x` / `--data-dir=x` → { STRATA_NODE_DATA_DIR: 'x' }. */
export function flagsToEnv(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) throw new NodeConfigError(`unexpected argument '${a}'`);
    const eq = a.indexOf('=');
    const name = eq > 0 ? a.slice(2, eq) : a.slice(2);
    const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined) throw new NodeConfigError(`flag --${name} needs a value`);
    const env = `STRATA_NODE_${name
      .replace(/^node-/, '')
      .toUpperCase()
      .replace(/-/g, '_')}`;
    if (!(env in nodeConfigSchema.shape)) throw new NodeConfigError(`unknown flag --${name}`);
    out[env] = value;
  }
  return out;
}

export function loadNodeConfig(env: NodeJS.ProcessEnv, argv: readonly string[] = []): NodeConfig {
  const input: Record<string, string | undefined> = {};
  for (const k of Object.keys(nodeConfigSchema.shape)) if (env[k] !== undefined && env[k] !== '') input[k] = env[k];
  Object.assign(input, flagsToEnv(argv));
  const r = nodeConfigSchema.safeParse(input);
  if (!r.success) throw new NodeConfigError(`invalid cache node configuration: ${formatIssues(r.error.issues, { root: '' })}`);
  const c = r.data;
  let secret = c.STRATA_NODE_SECRET;
  if (c.STRATA_NODE_SECRET_FROM_RING) {
    if (!c.STRATA_NODE_RING_STORE)
      throw new NodeConfigError('STRATA_NODE_SECRET_FROM_RING needs STRATA_NODE_RING_STORE (it holds it)');
    if (secret || c.STRATA_NODE_SECRET_FILE) {
      throw new NodeConfigError(
        'STRATA_NODE_SECRET_FROM_RING excludes STRATA_NODE_SECRET and STRATA_NODE_SECRET_FILE: one source only',
      );
    }
    secret = '';
  } else {
    if (!secret && c.STRATA_NODE_SECRET_FILE) secret = readFileSync(c.STRATA_NODE_SECRET_FILE, 'utf8').trim();
    if (!secret || secret.length < 16) {
      throw new NodeConfigError(
        'a shared secret of at least 16 characters is required ' +
          '(STRATA_NODE_SECRET, STRATA_NODE_SECRET_FILE or STRATA_NODE_SECRET_FROM_RING)',
      );
    }
  }
  return {
    port: c.STRATA_NODE_PORT,
    host: c.STRATA_NODE_HOST,
    logLevel: c.STRATA_LOG_LEVEL,
    dataDir: c.STRATA_NODE_DATA_DIR,
    secret,
    ...(c.STRATA_NODE_ID ? { nodeId: c.STRATA_NODE_ID } : {}),
    capacityBytes: c.STRATA_NODE_CAPACITY_BYTES,
    watermark: c.STRATA_NODE_WATERMARK,
    sync: c.STRATA_NODE_SYNC,
    applyIntervalMs: c.STRATA_NODE_APPLY_INTERVAL_MS,
    maxValueBytes: c.STRATA_NODE_MAX_VALUE_BYTES,
    exportRateBytesPerSec: c.STRATA_NODE_EXPORT_RATE,
    drainMs: c.STRATA_NODE_DRAIN_MS,
    sweepMs: c.STRATA_NODE_SWEEP_MS,
    warmupMs: c.STRATA_NODE_WARMUP_MS,
    ...(c.STRATA_NODE_RING_STORE
      ? {
          ringStore: {
            uri: c.STRATA_NODE_RING_STORE,
            pollMs: c.STRATA_NODE_RING_POLL_MS,
            ...(c.STRATA_NODE_S3_ENDPOINT ? { s3Endpoint: c.STRATA_NODE_S3_ENDPOINT } : {}),
          },
        }
      : {}),
    ...(c.STRATA_NODE_SECRET_FROM_RING ? { secretFromRing: true } : {}),
    minPeerProtocol: c.STRATA_NODE_MIN_PROTOCOL,
    ...(c.STRATA_NODE_BUILD ? { build: c.STRATA_NODE_BUILD } : {}),
    volumeCheckMs: c.STRATA_NODE_VOLUME_CHECK_MS,
    ...(c.STRATA_NODE_RING_STORE && c.STRATA_NODE_STATS_INTERVAL_MS > 0
      ? {
          statsReports: {
            intervalMs: c.STRATA_NODE_STATS_INTERVAL_MS,
            ...(c.STRATA_NODE_STATS_ID ? { id: c.STRATA_NODE_STATS_ID } : {}),
          },
        }
      : {}),
  };
}
