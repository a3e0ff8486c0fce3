/** Sizes, durations and money as the cost model reads and prints them. */

const SIZE_UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/**
 * Bytes from "1KB", "5 MB", "1.5GiB" or a bare byte count. KB/MB/GB are decimal (the paper's tables use
 * 1 MB = 0.001 GB); KiB/MiB/GiB are binary.
 * @example parseSize('5MB') // 5_000_000
 */
export function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const factor = m ? SIZE_UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  if (!m || factor === undefined) throw new RangeError(`not a size: "${text}" (use e.g. 1KB, 5MB, 2GiB or a byte count)`);
  return Number(m[1]) * factor;
}

const DURATION_UNITS: Record<string, number> = { us: 1e-3, ms: 1, s: 1000, m: 60_000, min: 60_000 };

/**
 * Milliseconds from "20ms", "2.09s", "1min" or a bare number of milliseconds.
 * @example parseDurationMs('2.09s') // 2090
 */
export function parseDurationMs(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const factor = m ? DURATION_UNITS[(m[2] || 'ms').toLowerCase()] : undefined;
  if (!m || factor === undefined) throw new RangeError(`not a duration: "${text}" (use e.g. 20ms, 2s)`);
  return Number(m[1]) * factor;
}

/** A count with an optional k/M/G suffix: "2000", "200k", "1.5M". */
export function parseCount(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)\s*$/i.exec(text);
  if (!m) throw new RangeError(`not a count: "${text}" (use e.g. 2000, 200k, 1.5M)`);
  const factor = { '': 1, k: 1e3, m: 1e6, g: 1e9 }[(m[2] ?? '').toLowerCase()] ?? 1;
  return Number(m[1]) * factor;
}

/** "1 KB", "5 MB", "2.5 GB": decimal units, as the paper labels its rows. */
export function formatSize(bytes: number): string {
  const units: [number, string][] = [
    [1e12, 'TB'],
    [1e9, 'GB'],
    [1e6, 'MB'],
    [1e3, 'KB'],
  ];
  for (const [factor, unit] of units) if (bytes >= factor) return `${trimNumber(bytes / factor, 3)} ${unit}`;
  return `${bytes} B`;
}

function trimNumber(x: number, maxDecimals: number): string {
  return String(Number(x.toFixed(maxDecimals)));
}

/**
 * Dollars the way the paper prints them: cents from $0.01 up, two significant digits below that
 * ($0.0023, $0.0003), "$0.00" for zero.
 */
export function formatUsd(x: number): string {
  const sign = x < 0 ? '-' : '';
  const a = Math.abs(x);
  if (a === 0) return '$0.00';
  if (a >= 0.01) return `${sign}$${a.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return `${sign}$${String(Number(a.toPrecision(2)))}`;
}

/** A ratio such as a speedup: at most `decimals` decimals, no trailing zeros. */
export function formatNumber(x: number, decimals = 2): string {
  if (!Number.isFinite(x)) return String(x);
  if (x !== 0 && Math.abs(x) < 0.01) return String(Number(x.toPrecision(2)));
  return String(Number(x.toFixed(decimals)));
}
