/**
 * A deliberately simple latency model for the recommender: time to first byte plus size over the narrowest
 * bandwidth on the path. The figures are typical published or commonly measured values, not measurements of
 * Strata; they only need to order placements sensibly (the paper's own speedups were measured, and the
 * paper-2010 tables use those). Override any of them per call.
 */
export interface LatencyModel {
  /** Same-AZ request to a cache node or ElastiCache and back, excluding transfer time. */
  readonly networkRttMs: number;
  /** S3 GET time to first byte (Standard, Standard-IA and Glacier Instant Retrieval alike). */
  readonly s3FirstByteMs: number;
  /** Single-stream S3 GET throughput. */
  readonly s3StreamMBps: number;
  /** ElastiCache Serverless single-connection throughput. */
  readonly elasticacheServerlessMBps: number;
  /** Extra first-byte time of a gp3 read that misses the page cache. */
  readonly gp3FirstByteMs: number;
  /** Magnetic EBS (2010): seek plus rotation, and streaming rate. */
  readonly ebsStandardFirstByteMs: number;
  readonly ebsStandardMBps: number;
  /** Instance-store disk of the m1 generation. */
  readonly localDiskFirstByteMs: number;
  readonly localDiskMBps: number;
}

export const DEFAULT_LATENCY: LatencyModel = {
  networkRttMs: 1,
  s3FirstByteMs: 30,
  s3StreamMBps: 90,
  elasticacheServerlessMBps: 200,
  gp3FirstByteMs: 1,
  ebsStandardFirstByteMs: 10,
  ebsStandardMBps: 40,
  localDiskFirstByteMs: 8,
  localDiskMBps: 60,
};

const MB = 1e6;

/** Seconds to move `bytes` after `firstByteMs`, limited by the slowest of the given rates (MB/s). */
export function transferTimeSec(bytes: number, firstByteMs: number, ...ratesMBps: number[]): number {
  const rate = Math.min(...ratesMBps.filter((r) => r > 0));
  return firstByteMs / 1000 + bytes / (rate * MB);
}

/** Gbit/s to MB/s. */
export const gbpsToMBps = (gbps: number): number => (gbps * 1e9) / 8 / MB;

/**
 * The 2010 services of paper 001, fitted to the hit times its extrapolated speedups imply (h ≈ t / S' at
 * 200,000 requests; e.g. S3: 84 ms at 1 KB, 1.0 s at 5 MB, 11.7 s at 50 MB, results leaving AWS). Used with
 * the paper-2010 catalog so its recommendations follow the paper's measurements rather than today's services.
 */
export const LATENCY_2010: LatencyModel = {
  networkRttMs: 1,
  s3FirstByteMs: 80,
  s3StreamMBps: 4.5,
  elasticacheServerlessMBps: 200,
  gp3FirstByteMs: 1,
  ebsStandardFirstByteMs: 15,
  ebsStandardMBps: 10,
  localDiskFirstByteMs: 10,
  localDiskMBps: 15,
};
