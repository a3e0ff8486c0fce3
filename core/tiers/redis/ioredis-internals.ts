// Everything of the hot tier that reaches into ioredis internals (undocumented or private members), in one place:
// each function says which ones it touches and why. Check these first when upgrading ioredis.
import type { Socket as NetStream } from 'node:net';
import { Command, type Redis } from 'ioredis';

/** Reply encodings of the commands the tier makes itself (`new Command(…)`). */
export const BUFFER_REPLY = { replyEncoding: null };
export const STRING_REPLY = { replyEncoding: 'utf8' as const };

/**
 * A script call whose whole RESP frame is built by the caller in one buffer. ioredis would otherwise measure and
 * copy every argument into a new buffer (the value included) on each write. The frame is also the command's only
 * argument, which is what an error reply carries back (see {@link RedisTier.rerun}). ioredis' own scripts
 * subclass Command the same way.
 *
 * Internal: overrides `Command#toWritable`, which ioredis calls to serialize a command for the socket.
 */
export class FramedCommand extends Command {
  constructor(
    name: 'evalsha' | 'eval',
    private readonly frame: Buffer,
  ) {
    super(name, [frame], STRING_REPLY);
  }

  override toWritable(): Buffer {
    return this.frame;
  }
}

/**
 * Writes commands to a standalone client's socket at once, with no auto-pipelining machinery: the socket is corked
 * until the end of the tick, so the commands of one tick still leave in one write (what auto-pipelining achieves,
 * for far less per command).
 *
 * Internal: corks `Redis#stream` (the connection's socket) around `sendCommand`.
 */
export class TickCorker {
  /** The socket corked for the current tick. */
  private corked: NetStream | undefined;
  private readonly uncork = (): void => {
    const s = this.corked;
    this.corked = undefined;
    s?.uncork();
  };

  /** Sends `cmd` on `c`, which the caller has checked is ready. */
  send(c: Redis, cmd: Command): Promise<unknown> {
    if (this.corked === undefined && c.stream) {
      this.corked = c.stream;
      this.corked.cork();
      process.nextTick(this.uncork);
    }
    c.sendCommand(cmd);
    return cmd.promise;
  }
}

/**
 * The commands in flight on a connection: sent and awaiting a reply, plus those held while a cluster node
 * (re)connects. Internal: reads `Redis#commandQueue` and the private `Redis#offlineQueue` (the stall watchdog).
 */
export function pendingCommandCount(c: Redis): number {
  // The offline queue only holds commands on a cluster node that is (re)connecting.
  return c.commandQueue.length + ((c as unknown as { offlineQueue?: { length: number } }).offlineQueue?.length ?? 0);
}

/** The oldest command awaiting a reply on `c`. Internal: peeks at `Redis#commandQueue` (the stall watchdog). */
export function oldestPendingCommand(c: Redis): unknown {
  return c.commandQueue.peekFront();
}

/** The socket of a connection, if it has one. Internal: `Redis#stream` (the stall watchdog reads its counters). */
export function connectionSocket(c: Redis): NetStream | undefined {
  return c.stream as NetStream | undefined;
}

/**
 * Resets a connection: its pending commands reject with `err` and it reconnects (standalone). Internal:
 * `Redis#recoverFromFatalError`, what ioredis itself does on a protocol error (flush the queues with the error,
 * emit it, disconnect and reconnect); there is no public call that rejects the commands in flight.
 */
export function resetConnection(c: Redis, err: Error): void {
  c.recoverFromFatalError(err, err, {});
}

/**
 * Makes `conn` read its password from `password()` each time it connects or reconnects. Internal: replaces
 * `conn.options.password` with a getter, relying on Redis#connect copying `options.password` into the AUTH of its
 * handshake as each connect starts (cluster slot-map queries use copies of a node's options, `duplicate`, which
 * read the getter when they are made).
 */
export function passwordReadOnEachConnect(conn: Redis, password: () => string): void {
  Object.defineProperty(conn.options, 'password', { get: password, enumerable: true, configurable: true });
}
