import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/**
 * Diagnostics for a migration benchmark (STRATA_BENCH_TRACE=1): completions per 100 ms, read and write
 * latencies per second, the driver's events, and the CPU time of each process per second (from /proc), printed
 * around the start of the migration. They show where a dip comes from (which process ran out of CPU, which
 * step stalled requests) without a profiler.
 */
export class MigrationTrace {
  private readonly tenths: number[] = [];
  private readonly latency: { reads: number; readMs: number; writes: number; writeMs: number; maxMs: number }[] = [];
  /** Per second, per node that served the read (its owner or reader when it was routed): reads and their summed latency. */
  private readonly perNode: Map<string, { reads: number; ms: number }>[] = [];
  private readonly events: string[] = [];
  private readonly cpu = new Map<string, number[]>();
  private readonly loop: number[] = [];
  private lastLoop = performance.eventLoopUtilization();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly startedAt: () => number) {}

  op(kind: 'read' | 'write', ms: number, node?: string): void {
    const now = Date.now() - this.startedAt();
    if (kind === 'read' && node !== undefined) {
      const m = (this.perNode[Math.floor(now / 1000)] ??= new Map());
      const n = m.get(node) ?? { reads: 0, ms: 0 };
      n.reads++;
      n.ms += ms;
      m.set(node, n);
    }
    const tenth = Math.floor(now / 100);
    this.tenths[tenth] = (this.tenths[tenth] ?? 0) + 1;
    const l = (this.latency[Math.floor(now / 1000)] ??= { reads: 0, readMs: 0, writes: 0, writeMs: 0, maxMs: 0 });
    if (kind === 'read') {
      l.reads++;
      l.readMs += ms;
    } else {
      l.writes++;
      l.writeMs += ms;
    }
    l.maxMs = Math.max(l.maxMs, ms);
  }

  event(name: string): void {
    this.events.push(`${((Date.now() - this.startedAt()) / 1000).toFixed(2)} ${name}`);
  }

  /** Samples, once a second, the CPU time of the named processes (pid undefined: not running) and this event loop. */
  start(pids: () => Record<string, number | undefined>): void {
    this.timer = setInterval(() => {
      const now = performance.eventLoopUtilization();
      this.loop.push(performance.eventLoopUtilization(now, this.lastLoop).utilization);
      this.lastLoop = now;
      for (const [name, pid] of Object.entries(pids())) {
        if (pid === undefined) continue;
        try {
          // utime + stime, in clock ticks (100 per second on Linux), after the command name.
          const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
          const series = this.cpu.get(name) ?? [];
          series[Math.round((Date.now() - this.startedAt()) / 1000)] = (Number(f[11]) + Number(f[12])) * 10;
          this.cpu.set(name, series);
        } catch {
          /* the process is gone */
        }
      }
    }, 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Prints the series from `before` s ahead of the migration's start to `after` s past it. */
  print(migrationStartAt: number, before = 3, after = 16): void {
    const g0 = Math.floor((migrationStartAt - this.startedAt()) / 1000);
    const t0 = Math.floor((migrationStartAt - this.startedAt()) / 100);
    console.log(
      `  trace: completions per 100 ms from -1 s: ${Array.from({ length: 40 }, (_, i) => this.tenths[t0 - 10 + i] ?? 0).join(' ')}`,
    );
    console.log(
      `  trace: driver events (s since the load started; the migration started at ${((migrationStartAt - this.startedAt()) / 1000).toFixed(2)}): ${this.events.join(' | ')}`,
    );
    console.log(
      `  trace: load generator event-loop use: ${Array.from({ length: before + after }, (_, i) => (this.loop[g0 - before + i - 1] ?? 0).toFixed(2)).join(' ')}`,
    );
    for (const [name, series] of this.cpu) {
      const perSecond = Array.from({ length: before + after }, (_, i) => {
        const s = g0 - before + i;
        const a = series[s];
        const b = series[s + 1];
        return a === undefined || b === undefined ? '-' : String(b - a);
      });
      console.log(`  trace: CPU ms/s ${name.padEnd(6)} ${perSecond.join(' ')}`);
    }
    for (let s = g0 - before; s < g0 + after; s++) {
      const l = this.latency[s];
      if (!l) continue;
      const nodes = [...(this.perNode[s] ?? new Map<string, { reads: number; ms: number }>())].sort(([a], [b]) =>
        a.localeCompare(b),
      );
      const byNode = nodes.map(([id, n]) => `${id} ${n.reads}/${(n.ms / n.reads).toFixed(2)}`).join(' ');
      console.log(
        `  trace: t=${s - g0}s reads ${l.reads} (mean ${(l.readMs / Math.max(1, l.reads)).toFixed(2)} ms) writes ${l.writes} (mean ${(l.writeMs / Math.max(1, l.writes)).toFixed(2)} ms) max ${l.maxMs.toFixed(0)} ms${byNode ? ` | reads/mean ms by node: ${byNode}` : ''}`,
      );
    }
  }
}
