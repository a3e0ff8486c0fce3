import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Fixed CPU budgets for processes, through Linux cgroups (v1 `cpu` controller, or v2 `cpu.max`): a local stand-in
 * for "each cache node is an instance of its own". Without caps, every node process on this 2-core host draws on
 * the same two cores, so adding a node adds no capacity (a fourth process only adds contention) and a scale-out
 * cannot show what it shows on a fleet. With caps, each node serves what its budget allows, as an instance would.
 *
 * Needs write access to the cgroup file system (root on a VM or a privileged container); {@link CpuCaps.open}
 * answers undefined when it has none, and callers run uncapped and say so.
 */
export class CpuCaps {
  private readonly groups: string[] = [];

  private constructor(
    private readonly root: string,
    private readonly version: 1 | 2,
    private readonly prefix: string,
  ) {}

  /** Caps under `prefix` (a cgroup name per capped process), or undefined when cgroups cannot be written here. */
  static open(prefix: string): CpuCaps | undefined {
    const candidates: [string, 1 | 2][] = [
      ['/sys/fs/cgroup/cpu', 1],
      ['/sys/fs/cgroup', 2],
      ['/sys/fs/cgroup/unified', 2],
    ];
    for (const [root, version] of candidates) {
      const marker = version === 1 ? join(root, 'cpu.cfs_quota_us') : join(root, 'cgroup.controllers');
      if (!existsSync(marker)) continue;
      if (version === 2 && !readFileSync(marker, 'utf8').split(/\s+/).includes('cpu')) continue;
      const caps = new CpuCaps(root, version, prefix);
      try {
        caps.probe();
        return caps;
      } catch {
        /* not writable here: try the next */
      }
    }
    return undefined;
  }

  /** Creates and removes a group, to find out whether this process may. */
  private probe(): void {
    const dir = join(this.root, `${this.prefix}-probe-${process.pid}`);
    mkdirSync(dir);
    try {
      this.setQuota(dir, 0.5);
    } finally {
      rmdirSync(dir);
    }
  }

  private setQuota(dir: string, cpus: number): void {
    const period = 10_000; // µs: short periods throttle in small steps, not 100 ms stalls
    const quota = Math.max(1000, Math.round(cpus * period));
    if (this.version === 1) {
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(period));
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quota));
    } else writeFileSync(join(dir, 'cpu.max'), `${quota} ${period}`);
  }

  /** Puts process `pid` (all its threads) in a group of its own limited to `cpus` CPUs (0.25 = a quarter core). */
  cap(pid: number, name: string, cpus: number): void {
    const dir = join(this.root, `${this.prefix}-${name}`);
    if (!existsSync(dir)) {
      mkdirSync(dir);
      this.groups.push(dir);
    }
    this.setQuota(dir, cpus);
    writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  }

  /** Removes the groups (their processes must have exited, or they move back to the root group first). */
  close(): void {
    const parentProcs = join(this.root, 'cgroup.procs');
    for (const dir of this.groups.splice(0)) {
      try {
        for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean))
          writeFileSync(parentProcs, pid);
        rmdirSync(dir);
      } catch {
        /* best effort: a group left behind is empty and harmless */
      }
    }
  }
}
