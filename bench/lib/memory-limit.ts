import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A memory limit for one process, through a Linux cgroup (v1 `memory` controller, or v2 `memory.max`): a local
 * stand-in for "a container with N MB". Node sizes its heap from the limit it finds (`process.constrainedMemory()`),
 * and the kernel kills the process when it needs more, so a run inside the limit shows what a deployment with that
 * much memory would see, where an RSS figure taken without one only shows what Node chose to keep on a large host.
 *
 * Needs write access to the cgroup file system (root on a VM or a privileged container); {@link MemoryLimits.open}
 * answers undefined when it has none, and callers say so.
 */
export interface MemoryGroup {
  /** A `sh -c` script that joins the group, then runs its arguments (`exec "$@"`): everything it runs is charged. */
  readonly enterScript: string;
  /** The most the group was charged (anonymous memory and page cache), when the kernel reports it. */
  peakBytes(): number | undefined;
  /** Processes the kernel killed for exceeding the limit. */
  oomKills(): number;
  /** Removes the group (its processes must have exited). */
  remove(): void;
}

export class MemoryLimits {
  private constructor(
    private readonly root: string,
    private readonly version: 1 | 2,
    private readonly prefix: string,
  ) {}

  static open(prefix: string): MemoryLimits | undefined {
    const candidates: [string, 1 | 2][] = [
      ['/sys/fs/cgroup/memory', 1],
      ['/sys/fs/cgroup', 2],
    ];
    for (const [root, version] of candidates) {
      const marker = version === 1 ? join(root, 'memory.limit_in_bytes') : join(root, 'cgroup.subtree_control');
      if (!existsSync(marker)) continue;
      if (version === 2 && !readFileSync(marker, 'utf8').split(/\s+/).includes('memory')) continue;
      const limits = new MemoryLimits(root, version, prefix);
      try {
        limits.group('probe', 64 * 1024 * 1024).remove();
        return limits;
      } catch {
        /* not writable here: try the next */
      }
    }
    return undefined;
  }

  /** A new group `name` limited to `limitBytes`, with swap off so that the limit is the memory the process gets. */
  group(name: string, limitBytes: number): MemoryGroup {
    const dir = join(this.root, `${this.prefix}-${name}-${process.pid}`);
    mkdirSync(dir);
    const file = (f: string): string => join(dir, f);
    const counter = (f: string, key: string): number => {
      const line = readFileSync(file(f), 'utf8')
        .split('\n')
        .find((l) => l.startsWith(`${key} `));
      return line ? Number(line.split(' ')[1]) : 0;
    };
    try {
      if (this.version === 1) {
        writeFileSync(file('memory.limit_in_bytes'), String(limitBytes));
        if (existsSync(file('memory.memsw.limit_in_bytes')))
          writeFileSync(file('memory.memsw.limit_in_bytes'), String(limitBytes));
      } else {
        writeFileSync(file('memory.max'), String(limitBytes));
        if (existsSync(file('memory.swap.max'))) writeFileSync(file('memory.swap.max'), '0');
      }
    } catch (err) {
      rmdirSync(dir);
      throw err;
    }
    return {
      enterScript: `echo $$ > '${file('cgroup.procs')}' && exec "$@"`,
      peakBytes: () => {
        const f = file(this.version === 1 ? 'memory.max_usage_in_bytes' : 'memory.peak');
        return existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : undefined;
      },
      oomKills: () => (this.version === 1 ? counter('memory.oom_control', 'oom_kill') : counter('memory.events', 'oom_kill')),
      remove: () => rmdirSync(dir),
    };
  }
}
