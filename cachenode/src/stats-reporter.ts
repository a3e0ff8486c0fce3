import { randomUUID } from 'node:crypto';
import { mkdir, open as openFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { nodeStatsKey, type NodeStatsReport } from '../../core/ring/node-reports.js';
import { logLine } from '../../core/util/logger.js';
import { nodeLog } from './node-log.js';

/**
 * Where a node's reports go: the ring store, written with a plain put. Only this node writes its report key, so
 * a compare-and-set would buy nothing and cost a read per report (and, on S3, a conditional write the node's
 * role would have to be allowed besides).
 */
export interface ReportSink {
  write(key: string, body: string): Promise<void>;
  close(): void;
  /** For log lines. */
  readonly describe: string;
}

/** Longest an S3 report write may take. */
const REPORT_WRITE_TIMEOUT_MS = 10_000;

/** `file:<dir>` (a temporary file renamed into place: readers never see half a report) or `s3://<bucket>/<prefix>`. */
export function reportSinkFromUri(uri: string, s3Endpoint?: string): ReportSink {
  if (uri.startsWith('file:')) {
    const dir = uri.slice('file:'.length);
    return {
      describe: uri,
      async write(key, body) {
        if (key.includes('..')) throw new Error(`invalid report key '${key}'`);
        const file = join(dir, key);
        await mkdir(dirname(file), { recursive: true });
        const tmp = `${file}.${randomUUID()}.tmp`;
        try {
          const fh = await openFile(tmp, 'w');
          try {
            await fh.writeFile(body, 'utf8');
          } finally {
            await fh.close();
          }
          await rename(tmp, file);
        } catch (e) {
          await rm(tmp, { force: true });
          throw e;
        }
      },
      close() {},
    };
  }
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(uri);
  if (!m) throw new Error(`a ring store must be file:<dir> or s3://<bucket>/<prefix> (got '${uri}')`);
  const bucket = m[1]!;
  // The same prefix rule as the ring's CAS store (ring/store.ts casStoreFromUri), so both agree on every key.
  const prefix = (m[2] || 'strata-ring').replace(/\/+$/, '') + '/';
  const client = new S3Client({ ...(s3Endpoint ? { endpoint: s3Endpoint, forcePathStyle: true } : {}), maxAttempts: 2 });
  return {
    describe: `s3://${bucket}/${prefix}`,
    async write(key, body) {
      // Bounded: a write that hangs would hold up every later report (one is under way at a time) and the shutdown.
      const put = new PutObjectCommand({ Bucket: bucket, Key: prefix + key, Body: body, ContentType: 'application/json' });
      await client.send(put, { abortSignal: AbortSignal.timeout(REPORT_WRITE_TIMEOUT_MS) });
    },
    close() {
      client.destroy();
    },
  };
}

export interface StatsReporterOptions {
  sink: ReportSink;
  /** The node's id (in the report body). */
  nodeId: string;
  /** The id the report is stored under: nodes/<reportId>/stats.json. @default nodeId */
  reportId?: string;
  intervalMs: number;
  /** The node's /stats body at the moment of the call. */
  stats: () => Record<string, unknown>;
  /** @default the node's structured logger */
  log?: (line: Record<string, unknown>) => void;
  now?: () => number;
}

/** What the reporter did so far (part of the node's /stats body). */
export interface StatsReportCounters {
  written: number;
  failed: number;
  /** Failures since the last report that was written. */
  failingInARow: number;
  lastWrittenAt: number | null;
  lastError: string | null;
}

/** Consecutive failures between two log lines (the first one is always logged). */
const LOG_EVERY_FAILURES = 10;
/** How long a graceful stop waits for the final report (the store may be the thing that is down). */
const FINAL_REPORT_TIMEOUT_MS = 3000;

/**
 * Writes the node's statistics report every `intervalMs`, the first one right away. A failed write is counted,
 * logged (the first of a series, then every 10th, and once when writes work again) and retried at the next
 * tick: a store outage never stops the node. At most one write is under way (a slow store does not pile them up).
 */
export class StatsReporter {
  readonly key: string;
  readonly counters: StatsReportCounters = { written: 0, failed: 0, failingInARow: 0, lastWrittenAt: null, lastError: null };
  private timer?: NodeJS.Timeout;
  private inFlight?: Promise<boolean>;
  private stopped = false;
  private readonly log: (line: Record<string, unknown>) => void;
  private readonly now: () => number;

  constructor(private readonly opts: StatsReporterOptions) {
    this.key = nodeStatsKey(opts.reportId ?? opts.nodeId);
    this.log = opts.log ?? ((line) => logLine(line, nodeLog));
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    void this.report();
    this.timer = setInterval(() => void this.report(), this.opts.intervalMs);
    this.timer.unref();
  }

  /** Writes one report now, unless one is under way. Never throws; resolves to whether it was written. */
  report(extra: Record<string, unknown> = {}): Promise<boolean> {
    if (this.inFlight) return this.inFlight;
    let body: NodeStatsReport;
    let write: Promise<void>;
    try {
      body = {
        nodeId: this.opts.nodeId,
        at: this.now(),
        intervalMs: this.opts.intervalMs,
        stats: { ...this.opts.stats(), ...extra },
      };
      write = this.opts.sink.write(this.key, JSON.stringify(body));
    } catch (e) {
      // Collecting the stats failed: counted like a failed write (this runs from a timer, where a throw would be fatal).
      body = { nodeId: this.opts.nodeId, at: this.now(), intervalMs: this.opts.intervalMs, stats: {} };
      write = Promise.reject(e);
    }
    const p = write.then(
      () => {
        if (this.counters.failingInARow > 0) {
          const failedBefore = this.counters.failingInARow;
          this.log({
            level: 'info',
            msg: 'stats report written again',
            store: this.opts.sink.describe,
            key: this.key,
            failedBefore,
          });
        }
        this.counters.written++;
        this.counters.failingInARow = 0;
        this.counters.lastWrittenAt = body.at;
        return true;
      },
      (e: unknown) => {
        const error = e instanceof Error ? e.message : String(e);
        if (this.counters.failingInARow % LOG_EVERY_FAILURES === 0) {
          const failingInARow = this.counters.failingInARow + 1;
          const where = { store: this.opts.sink.describe, key: this.key };
          this.log({ level: 'warn', msg: 'could not write the stats report', ...where, failingInARow, error });
        }
        this.counters.failed++;
        this.counters.failingInARow++;
        this.counters.lastError = error;
        return false;
      },
    );
    this.inFlight = p.finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /**
   * Stops the timer; with `final`, writes one last report (marked `stopped: true`, so readers can tell a node that
   * left from one that went silent) within a few seconds. Call before the store the stats come from is closed.
   */
  async stop(final: boolean): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    // Within a few seconds overall: the store may be the thing that is down.
    const deadline = Date.now() + FINAL_REPORT_TIMEOUT_MS;
    const within = async (p: Promise<unknown>) => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([p, new Promise((r) => (timer = setTimeout(r, Math.max(0, deadline - Date.now()))))]);
      clearTimeout(timer);
    };
    if (this.inFlight) await within(this.inFlight);
    // A report still under way past the deadline is not waited for again (report() would hand it back).
    if (final && !this.inFlight) await within(this.report({ stopped: true }));
    this.opts.sink.close();
  }
}
