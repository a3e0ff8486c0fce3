import * as hdr from 'hdr-histogram-js';

export interface LoadResult {
  ops: number;
  seconds: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  errors: number;
}

/**
 * Closed-loop load: `concurrency` workers call `op` back to back for `seconds` after a warm-up. Latencies go
 * into an HDR histogram (microsecond resolution).
 */
export async function closedLoop(
  op: (i: number) => Promise<unknown>,
  opts: { concurrency: number; seconds: number; warmupSeconds?: number },
): Promise<LoadResult> {
  const run = async (seconds: number, record: boolean) => {
    const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
    let ops = 0;
    let errors = 0;
    const start = performance.now();
    const deadline = start + seconds * 1000;
    let counter = 0;
    const worker = async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        try {
          await op(counter++);
        } catch {
          errors++;
        }
        if (record) h.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
        ops++;
      }
    };
    await Promise.all(Array.from({ length: opts.concurrency }, worker));
    const elapsed = (performance.now() - start) / 1000;
    const result: LoadResult = {
      ops,
      seconds: round(elapsed),
      opsPerSec: Math.round(ops / elapsed),
      p50Ms: h.getValueAtPercentile(50) / 1000,
      p99Ms: h.getValueAtPercentile(99) / 1000,
      p999Ms: h.getValueAtPercentile(99.9) / 1000,
      errors,
    };
    h.destroy();
    return result;
  };
  if (opts.warmupSeconds) await run(opts.warmupSeconds, false);
  return run(opts.seconds, true);
}

export function round(n: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function table(rows: Record<string, string | number>[]): string {
  const cols = Object.keys(rows[0] ?? {});
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(width[i]!)).join('  ');
  return [line(cols), line(width.map((w) => '-'.repeat(w))), ...rows.map((r) => line(cols.map((c) => String(r[c]))))].join('\n');
}
