// The stall watchdog of the hot tier: resets a Redis connection whose commands in flight get no answer in time.
import type { Socket as NetStream } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { connectionSocket, oldestPendingCommand, pendingCommandCount, resetConnection } from './ioredis-internals.js';

/** What the watchdog last saw on a connection with commands in flight. */
interface Progress {
  stream: unknown;
  bytesRead: number;
  unsent: number;
  head: unknown;
  since: number;
}

/**
 * The stall watchdog (one interval per tier, nothing per command): a connection with commands in flight that
 * has received nothing, sent nothing more and completed nothing for `stallMs` is reset. Its pending commands
 * reject (→ TierUnavailableError) and it reconnects in the background, failing fast meanwhile. Checks every
 * quarter of `stallMs` (50..250 ms) until {@link stop}.
 */
export class StallWatchdog {
  private readonly timer: NodeJS.Timeout;
  private readonly intervalMs: number;
  private readonly progress = new Map<Redis, Progress>();
  /** When the previous check ran: a much later check means this process, not Redis, stood still. */
  private lastCheck = Date.now();

  constructor(
    private readonly client: Redis | Cluster,
    private readonly stallMs: number,
  ) {
    this.intervalMs = Math.min(250, Math.max(50, Math.floor(this.stallMs / 4)));
    this.timer = setInterval(() => this.checkStalls(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.progress.clear();
  }

  private checkStalls(): void {
    const now = Date.now();
    // A stalled event loop (a long GC, a starved process) runs this check before it reads the answers that arrived
    // meanwhile, so the time it stood still beyond one interval does not count against Redis: without this a
    // server that answered in time is reset. A loop that keeps lagging still accrues one interval per check.
    const lag = now - this.lastCheck - this.intervalMs;
    this.lastCheck = now;
    if (lag > this.intervalMs) for (const p of this.progress.values()) p.since += lag;
    const conns = this.client.isCluster ? (this.client as Cluster).nodes('all') : [this.client as Redis];
    for (const c of conns) {
      const pending = pendingCommandCount(c);
      if (pending === 0) {
        this.progress.delete(c);
        continue;
      }
      const stream: NetStream | undefined = connectionSocket(c);
      const seen: Progress = {
        stream,
        bytesRead: stream?.bytesRead ?? -1,
        unsent: stream?.writableLength ?? -1,
        head: oldestPendingCommand(c),
        since: now,
      };
      const last = this.progress.get(c);
      if (
        !last ||
        last.stream !== seen.stream ||
        last.bytesRead !== seen.bytesRead ||
        last.unsent !== seen.unsent ||
        last.head !== seen.head
      ) {
        this.progress.set(c, seen);
      } else if (now - last.since >= this.stallMs) {
        this.progress.delete(c);
        const err = new Error(
          `Redis sent nothing for ${now - last.since} ms with ${pending} command(s) in flight: connection reset`,
        );
        if (this.client.isCluster) {
          // A cluster drops a node whose connection ends (it does not reconnect nodes) and, with auto-pipelining,
          // may not notice it is missing: ask for the slot map again, which reconnects the nodes it lists.
          const cluster = this.client as Cluster;
          c.once('end', () => {
            if (cluster.status === 'ready') cluster.refreshSlotsCache();
          });
        }
        resetConnection(c, err); // rejects the pending commands and reconnects (standalone)
        stream?.destroy(); // without waiting for a stalled peer to acknowledge the close
      }
    }
    if (this.progress.size > conns.length) {
      for (const c of this.progress.keys()) if (!conns.includes(c)) this.progress.delete(c);
    }
  }
}
