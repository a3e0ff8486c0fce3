import { closeSync, constants, openSync, readdirSync, readFileSync, unlink, unlinkSync, writev } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

/**
 * The node store's write-ahead journal: append-only segment files in the data directory, written by group commit.
 *
 * Every small write the store decides is appended here as one record and acknowledged once its group is on disk,
 * long before LMDB writes the B+-tree pages it touches. A group is all the records appended while the groups
 * before it were being written: one `writev` call on a file opened with `O_DSYNC` (the write returns once the
 * data is on the device, like a write plus `fdatasync`, in one thread-pool job; the main thread never waits for
 * the disk). The store applies durable records to LMDB in large transactions and {@link Journal.release}s them
 * once LMDB has flushed those; a segment whose records are all released is deleted.
 *
 * Records are numbered (`seq`) across segments and restarts: a segment's file name holds the number of its first
 * record. After a crash, {@link readJournal} hands back the records of the segments left, in order, with their
 * numbers, so the store can skip those its LMDB already holds.
 *
 * Why: a 1 KB put into a hash-ordered B+-tree dirties its own 4 KiB leaf page, and LMDB syncs once per
 * transaction, so acknowledging after LMDB's flush costs a scattered page write and a share of two syncs per
 * put. The journal acknowledges after a sequential append instead, and the transactions that apply it are large,
 * so a leaf page written by several puts is written once (see `cachenode/README.md`).
 *
 * Record framing: `[u32 payload length][u32 CRC-32 of the payload][payload]`, big-endian. A record cut short or
 * failing its checksum ends the journal when it is in the last segment (the tail of a group under way at a
 * crash, never acknowledged); in any other segment it is corruption, and {@link readJournal} refuses it.
 */
export interface JournalOptions {
  dir: string;
  /** Acknowledge a group once it is on the device (false: once written, which survives a process crash only). */
  fsync: boolean;
  /** Number of the first record this journal appends (records already in the directory come before it). */
  firstSeq: number;
  /** A segment is closed and a new one started once it holds this many bytes. @default 64 MiB */
  segmentBytes?: number;
  /** Called (once) when a write fails: the journal then refuses every append. */
  onError?: (e: Error) => void;
  /** Called after groups became durable, with the number of the last durable record. */
  onDurable?: (seq: number) => void;
}

/** Bytes a record's buffer keeps free at its start for its frame (see {@link Journal.append}). */
export const FRAME_BYTES = 8;
/** Buffers per `writev` call (the platform's IOV_MAX is 1024). */
const IOV_MAX = 1024;
/** Groups written at once: the next group is written while the last one's write is still on its way to disk. */
const MAX_IN_FLIGHT = 2;
/** A fully released active segment is replaced by a new file once it holds this many bytes. */
const RECYCLE_BYTES = 4 * 1024 * 1024;
const SEGMENT = /^journal-(\d{16})\.log$/;

function segmentName(firstSeq: number): string {
  return `journal-${String(firstSeq).padStart(16, '0')}.log`;
}

/** Writes `bufs` at byte `position` of the file, in order, whatever the platform's limits and short writes. */
function writevAll(fd: number, bufs: Buffer[], position: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let rest = bufs;
    const next = (): void => {
      if (rest.length === 0) return resolve();
      const chunk = rest.slice(0, IOV_MAX);
      writev(fd, chunk, position, (err, written) => {
        if (err) return reject(err);
        position += written;
        // A short write (rare: a full disk, a signal) leaves the rest of its chunk to write.
        let i = 0;
        while (i < chunk.length && written >= chunk[i]!.length) written -= chunk[i++]!.length;
        rest = rest.slice(i);
        if (written > 0) rest[0] = rest[0]!.subarray(written);
        next();
      });
    };
    next();
  });
}

interface Segment {
  name: string;
  /** Number of its last durable record (its first record's number minus one while it has none). */
  lastSeq: number;
  bytes: number;
}

/** A group of records being written. */
interface Group {
  lastSeq: number;
  bytes: number;
  waiters: (() => void)[];
  rejecters: ((e: Error) => void)[];
  done: boolean;
}

export class Journal {
  /** Number of the last record appended. */
  private seq: number;
  /** Every record up to this one is on disk. */
  durableSeq: number;
  private releasedSeq: number;
  private queued: Buffer[] = [];
  private queuedWaiters: (() => void)[] = [];
  private queuedRejecters: ((e: Error) => void)[] = [];
  /** Groups being written, oldest first, until they and every group before them are done. */
  private groups: Group[] = [];
  private scheduled = false;
  private failed: Error | undefined;
  private fd: number;
  private active: Segment;
  /** Where the next group goes in the active segment. */
  private offset = 0;
  /** Closed segments, oldest first, waiting for their records to be released. */
  private readonly closed: Segment[] = [];
  private readonly segmentBytes: number;
  /** Segment deletions under way (asynchronous: unlinking a large file takes a while). */
  private readonly unlinking = new Set<Promise<void>>();
  private idle: (() => void)[] = [];
  private isClosed = false;

  constructor(private readonly opts: JournalOptions) {
    this.segmentBytes = opts.segmentBytes ?? 64 * 1024 * 1024;
    this.seq = this.durableSeq = this.releasedSeq = opts.firstSeq - 1;
    this.active = { name: segmentName(opts.firstSeq), lastSeq: this.seq, bytes: 0 };
    this.fd = this.openSegment(this.active.name);
  }

  private openSegment(name: string): number {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | (this.opts.fsync ? constants.O_DSYNC : 0);
    return openSync(join(this.opts.dir, name), flags, 0o600);
  }

  /** Bytes in segments not yet deleted. */
  get retainedBytes(): number {
    return this.closed.reduce((n, s) => n + s.bytes, this.active.bytes);
  }

  /**
   * Appends one record per buffer: its first {@link FRAME_BYTES} bytes are free for the frame, which is written
   * there, and the rest is the payload. Buffers are written as they are (no copy), so they must not change until
   * the promise settles. Answers the last record's number with a promise that resolves once they are on disk.
   * Records are written in the order of the calls.
   */
  append(records: Buffer[]): { seq: number; durable: Promise<void> } {
    if (this.isClosed) return { seq: this.seq, durable: Promise.reject(new Error('the journal is closed')) };
    if (this.failed) return { seq: this.seq, durable: Promise.reject(this.failed) };
    for (const r of records) {
      r.writeUInt32BE(r.length - FRAME_BYTES, 0);
      r.writeUInt32BE(crc32(r.subarray(FRAME_BYTES)), 4);
      this.queued.push(r);
    }
    const seq = (this.seq += records.length);
    const durable = new Promise<void>((resolve, reject) => {
      this.queuedWaiters.push(resolve);
      this.queuedRejecters.push(reject);
    });
    // Started on the next turn: the requests that arrive together share one write.
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.pump();
      });
    }
    return { seq, durable };
  }

  /** Starts writing what is queued as one group, while fewer than {@link MAX_IN_FLIGHT} groups are under way. */
  private pump(): void {
    while (this.queued.length > 0 && !this.failed && this.groups.length < MAX_IN_FLIGHT) {
      if (this.offset >= this.segmentBytes) {
        if (this.groups.length > 0) return; // rotated once the groups under way are done
        this.rotate();
      }
      const bufs = this.queued;
      const group: Group = { lastSeq: this.seq, bytes: 0, waiters: this.queuedWaiters, rejecters: this.queuedRejecters, done: false };
      for (const b of bufs) group.bytes += b.length;
      this.queued = [];
      this.queuedWaiters = [];
      this.queuedRejecters = [];
      const at = this.offset;
      this.offset += group.bytes;
      this.groups.push(group);
      writevAll(this.fd, bufs, at).then(
        () => {
          group.done = true;
          this.completeGroups();
          this.pump();
        },
        (e: unknown) => this.fail(e instanceof Error ? e : new Error(String(e))),
      );
    }
    if (this.groups.length === 0 && this.queued.length === 0 && !this.scheduled) this.notifyIdle();
  }

  /** Acknowledges the groups at the head of the line that are on disk (a group waits for those before it). */
  private completeGroups(): void {
    let advanced = false;
    while (this.groups.length > 0 && this.groups[0]!.done) {
      const g = this.groups.shift()!;
      this.active.lastSeq = g.lastSeq;
      this.active.bytes += g.bytes;
      this.durableSeq = g.lastSeq;
      for (const w of g.waiters) w();
      advanced = true;
    }
    if (advanced) this.opts.onDurable?.(this.durableSeq);
  }

  private notifyIdle(): void {
    const idle = this.idle;
    this.idle = [];
    for (const f of idle) f();
  }

  private fail(e: Error): void {
    if (this.failed) return;
    this.failed = new Error(`the node's write journal failed: ${e.message}`);
    const rejecters = [...this.groups.flatMap((g) => g.rejecters), ...this.queuedRejecters];
    this.queued = [];
    this.queuedWaiters = [];
    this.queuedRejecters = [];
    this.groups = [];
    for (const r of rejecters) r(this.failed);
    this.opts.onError?.(this.failed);
    this.notifyIdle();
  }

  /** Closes the active segment and starts the next (with no group under way). */
  private rotate(): void {
    closeSync(this.fd);
    this.closed.push(this.active);
    this.active = { name: segmentName(this.durableSeq + 1), lastSeq: this.durableSeq, bytes: 0 };
    this.fd = this.openSegment(this.active.name);
    this.offset = 0;
    void this.deleteReleased();
  }

  /**
   * Records up to `seq` are applied and flushed elsewhere: segments holding nothing newer are deleted (the active
   * one is replaced by a new file once it is large enough to be worth it). Resolves once they are gone.
   */
  release(seq: number): Promise<void> {
    if (this.isClosed) return Promise.resolve();
    this.releasedSeq = Math.max(this.releasedSeq, seq);
    const idle = this.groups.length === 0 && this.queued.length === 0 && !this.scheduled;
    if (idle && !this.failed && this.active.lastSeq <= this.releasedSeq && this.offset >= RECYCLE_BYTES) this.rotate();
    return this.deleteReleased();
  }

  /** Deletes the closed segments whose records are all released, off the main thread. */
  private deleteReleased(): Promise<void> {
    while (this.closed.length > 0 && this.closed[0]!.lastSeq <= this.releasedSeq) {
      const file = join(this.opts.dir, this.closed.shift()!.name);
      const done: Promise<void> = new Promise<void>((resolve) =>
        unlink(file, (err) => {
          // Left behind, it is replayed harmlessly at the next start (its records are applied): worth a warning only.
          if (err) console.error(JSON.stringify({ level: 'warn', msg: 'could not delete a released journal segment', file, error: err.message }));
          resolve();
        }),
      ).finally(() => this.unlinking.delete(done));
      this.unlinking.add(done);
    }
    return Promise.all(this.unlinking).then(() => undefined);
  }

  /** Waits for the writes under way, then closes the file; deletes every segment whose records are released. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    if (this.groups.length > 0 || this.queued.length > 0 || this.scheduled) await new Promise<void>((resolve) => this.idle.push(resolve));
    this.isClosed = true;
    closeSync(this.fd);
    await this.deleteReleased();
    if (this.active.lastSeq <= this.releasedSeq && this.durableSeq === this.seq) unlinkSync(join(this.opts.dir, this.active.name));
  }
}

/** A segment that failed its check before the end of the journal. */
export class JournalCorruptError extends Error {}

/** One record read back at boot: its number and payload. */
export interface JournalRecord {
  seq: number;
  payload: Buffer;
}

/**
 * The records numbered after `afterSeq` (those the caller does not hold yet) in the journal segments of `dir`,
 * oldest first, for replay at boot; `lastSeq` is the number of the last record read once `records` is consumed
 * (0 with no segments), and `done` deletes the segments once the caller has made their records durable
 * elsewhere. A torn record at the end of the last segment ends the journal (it was never acknowledged); one
 * anywhere else throws {@link JournalCorruptError}, as does a gap in the numbers after `afterSeq`.
 */
export function readJournal(dir: string, afterSeq = 0): { records: Generator<JournalRecord>; segments: string[]; lastSeq: () => number; done: () => void } {
  const segments = readdirSync(dir).filter((f) => SEGMENT.test(f)).sort();
  let lastSeq = 0;
  function* records(): Generator<JournalRecord> {
    for (let s = 0; s < segments.length; s++) {
      const first = Number(SEGMENT.exec(segments[s]!)![1]);
      if (s > 0 && first - 1 > Math.max(lastSeq, afterSeq)) {
        throw new JournalCorruptError(`journal segment ${segments[s]} in ${dir} starts at record ${first}, but the segment before it ends at ${lastSeq}: refusing to start without the records between. Restore the data volume, or remove the journal segments to accept their loss.`);
      }
      lastSeq = first - 1;
      const buf = readFileSync(join(dir, segments[s]!));
      let at = 0;
      while (at < buf.length) {
        const len = at + FRAME_BYTES <= buf.length ? buf.readUInt32BE(at) : -1;
        const end = at + FRAME_BYTES + len;
        if (len < 0 || end > buf.length || crc32(buf.subarray(at + FRAME_BYTES, end)) !== buf.readUInt32BE(at + 4)) {
          if (s === segments.length - 1) return;
          throw new JournalCorruptError(`journal segment ${segments[s]} in ${dir} is damaged at byte ${at} (not its last segment): refusing to start without the writes after it. Restore the data volume, or remove the segment to accept their loss.`);
        }
        if (++lastSeq > afterSeq) yield { seq: lastSeq, payload: buf.subarray(at + FRAME_BYTES, end) };
        at = end;
      }
    }
  }
  return { records: records(), segments, lastSeq: () => lastSeq, done: () => segments.forEach((f) => unlinkSync(join(dir, f))) };
}
