import {
  close,
  closeSync,
  constants,
  fsync,
  fsyncSync,
  open,
  openSync,
  readdirSync,
  readFileSync,
  rename,
  renameSync,
  unlink,
  unlinkSync,
  writev,
} from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { crc32 } from 'node:zlib';
import { nodeLog } from './node-log.js';

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
 * Segment files are recycled: up to {@link MAX_SPARES} released segments are renamed to spares
 * (`journal-spare-<n>.log`) instead of deleted, and a new segment is a spare renamed (the directory synced before
 * any record goes in). Overwriting blocks a file already has is one device write per group; appending to a new
 * file also commits the file system's own journal (the file's size and blocks) on every `O_DSYNC` write, which on
 * ext4 here took 2.4× as long at p50 and 5× at p90 for a 36 KiB group (0.51 against 0.22 ms; 2.0 against 0.36).
 * A recycled file still holds its old records past the new ones: every record's checksum covers its number too,
 * so an old record never reads as the next one.
 *
 * Why: a 1 KB put into a hash-ordered B+-tree dirties its own 4 KiB leaf page, and LMDB syncs once per
 * transaction, so acknowledging after LMDB's flush costs a scattered page write and a share of two syncs per
 * put. The journal acknowledges after a sequential append instead, and the transactions that apply it are large,
 * so a leaf page written by several puts is written once (see `cachenode/README.md`).
 *
 * Record framing: `[u32 payload length][u32 CRC-32 of (record number as u64 ‖ payload)][payload]`, big-endian. A
 * record cut short or failing its checksum ends its segment: the tail of a group under way at a crash (never
 * acknowledged), or a recycled file's old records. The next segment must then start with the next number, so a
 * damaged record before the last segment shows as a gap, which {@link readJournal} refuses.
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
/** Released segment files kept for reuse (each as large as a segment: 128 MiB of the data volume by default). */
const MAX_SPARES = 2;
const SEGMENT = /^journal-(\d{16})\.log$/;
const SPARE = /^journal-spare-(\d+)\.log$/;

function segmentName(firstSeq: number): string {
  return `journal-${String(firstSeq).padStart(16, '0')}.log`;
}

function spareName(n: number): string {
  return `journal-spare-${n}.log`;
}

/** Deletes a released segment file. Left behind, it is replayed harmlessly at the next start: a warning only. */
function removeFile(file: string): Promise<void> {
  return new Promise<void>((resolve) =>
    unlink(file, (err) => {
      if (err) nodeLog.warn('could not delete a released journal segment', { file, error: err.message });
      resolve();
    }),
  );
}

const closeAsync = promisify(close);
const fsyncAsync = promisify(fsync);
const openAsync = promisify(open);
const renameAsync = promisify(rename);

const seqBytes = Buffer.alloc(8);
/** A record's checksum: CRC-32 of its number (u64, big-endian) followed by its payload. */
function recordCrc(seq: number, payload: Uint8Array): number {
  seqBytes.writeUInt32BE(Math.floor(seq / 0x1_0000_0000), 0);
  seqBytes.writeUInt32BE(seq >>> 0, 4);
  return crc32(payload, crc32(seqBytes));
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
  /** Released segments being deleted or renamed to spares (asynchronous: unlinking a large file takes a while). */
  private readonly disposing = new Set<Promise<void>>();
  private idle: (() => void)[] = [];
  private isClosed = false;
  /** Spare segment files (names), ready to become the next segment. */
  private readonly spares: string[] = [];
  /** Released segments being renamed to spares. */
  private sparing = 0;
  private nextSpare: number;
  /** The data directory, open for syncing new segment names. */
  private readonly dirFd: number;
  /** Closing the active segment and opening the next, off the main thread (appends queue meanwhile). */
  private rotating: Promise<void> | undefined;

  constructor(private readonly opts: JournalOptions) {
    this.segmentBytes = opts.segmentBytes ?? 64 * 1024 * 1024;
    this.seq = this.durableSeq = this.releasedSeq = opts.firstSeq - 1;
    const names = readdirSync(opts.dir);
    const spareNumbers = names.flatMap((f) => SPARE.exec(f)?.[1] ?? []).map(Number);
    this.spares.push(...spareNumbers.map(spareName));
    this.nextSpare = Math.max(0, ...spareNumbers) + 1;
    this.dirFd = openSync(opts.dir, 'r');
    this.active = { name: segmentName(opts.firstSeq), lastSeq: this.seq, bytes: 0 };
    // At boot a file by this name holds no record the store kept (readJournal's `done` leaves it): replaced.
    const spare = this.spares.shift();
    if (spare) renameSync(join(opts.dir, spare), join(opts.dir, this.active.name));
    this.fd = openSync(join(opts.dir, this.active.name), this.segmentFlags(!spare), 0o600);
    fsyncSync(this.dirFd);
  }

  /** A new file is created empty; a spare keeps its blocks (and old records, which no longer check out). */
  private segmentFlags(create: boolean): number {
    return constants.O_WRONLY | (create ? constants.O_CREAT | constants.O_TRUNC : 0) | (this.opts.fsync ? constants.O_DSYNC : 0);
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
    let seq = this.seq;
    for (const r of records) {
      r.writeUInt32BE(r.length - FRAME_BYTES, 0);
      r.writeUInt32BE(recordCrc(++seq, r.subarray(FRAME_BYTES)), 4);
      this.queued.push(r);
    }
    this.seq = seq;
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
    while (this.queued.length > 0 && !this.failed && this.groups.length < MAX_IN_FLIGHT && !this.rotating) {
      if (this.offset >= this.segmentBytes) {
        if (this.groups.length === 0) this.rotate(); // else rotated once the groups under way are done
        return;
      }
      const bufs = this.queued;
      const group: Group = {
        lastSeq: this.seq,
        bytes: 0,
        waiters: this.queuedWaiters,
        rejecters: this.queuedRejecters,
        done: false,
      };
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
    if (this.isIdle()) this.notifyIdle();
  }

  private isIdle(): boolean {
    return this.groups.length === 0 && this.queued.length === 0 && !this.scheduled && !this.rotating;
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

  /**
   * Closes the active segment and starts the next (with no group under way), on the thread pool: a spare renamed,
   * or a new file, and in either case the directory synced before any record goes in, so a crash cannot leave
   * acknowledged records in a file under another name. Appends queue meanwhile; a failure fails the journal.
   */
  private rotate(): void {
    const oldFd = this.fd;
    this.fd = -1;
    this.closed.push(this.active);
    this.active = { name: segmentName(this.durableSeq + 1), lastSeq: this.durableSeq, bytes: 0 };
    this.offset = 0;
    const path = join(this.opts.dir, this.active.name);
    const spare = this.spares.shift();
    this.rotating = (async () => {
      await closeAsync(oldFd);
      // A spare that cannot be renamed (gone from under the node) is dropped: the segment starts as a new file.
      const recycled =
        spare !== undefined &&
        (await renameAsync(join(this.opts.dir, spare), path).then(
          () => true,
          () => false,
        ));
      this.fd = await openAsync(path, this.segmentFlags(!recycled), 0o600);
      await fsyncAsync(this.dirFd);
    })().then(
      () => {
        this.rotating = undefined;
        void this.disposeReleased();
        this.pump();
      },
      (e: unknown) => {
        this.rotating = undefined;
        this.fail(e instanceof Error ? e : new Error(String(e)));
      },
    );
  }

  /**
   * Records up to `seq` are applied and flushed elsewhere: segments holding nothing newer are disposed of (kept as
   * spares or deleted; the active one is replaced by the next segment once it is large enough to be worth it).
   * Resolves once they are gone.
   */
  release(seq: number): Promise<void> {
    if (this.isClosed) return Promise.resolve();
    this.releasedSeq = Math.max(this.releasedSeq, seq);
    if (this.isIdle() && !this.failed && this.active.lastSeq <= this.releasedSeq && this.offset >= RECYCLE_BYTES) this.rotate();
    return this.disposeReleased();
  }

  /**
   * Disposes of the closed segments whose records are all released, off the main thread: renamed to spares while
   * fewer than {@link MAX_SPARES} are kept (and the segment is large enough to be worth reusing), else deleted.
   */
  private disposeReleased(): Promise<void> {
    while (this.closed.length > 0 && this.closed[0]!.lastSeq <= this.releasedSeq) {
      const segment = this.closed.shift()!;
      const file = join(this.opts.dir, segment.name);
      const done = this.worthSparing(segment.bytes) ? this.spare(file) : removeFile(file);
      const tracked: Promise<void> = done.finally(() => this.disposing.delete(tracked));
      this.disposing.add(tracked);
    }
    return Promise.all(this.disposing).then(() => undefined);
  }

  private worthSparing(bytes: number): boolean {
    return this.spares.length + this.sparing < MAX_SPARES && bytes >= Math.min(RECYCLE_BYTES, this.segmentBytes);
  }

  /** Renames a released segment to a spare (deleted instead if that fails). */
  private async spare(file: string): Promise<void> {
    const name = spareName(this.nextSpare++);
    this.sparing++;
    try {
      await renameAsync(file, join(this.opts.dir, name));
      this.spares.push(name);
    } catch {
      await removeFile(file);
    } finally {
      this.sparing--;
    }
  }

  /** Waits for the writes under way, then closes the file; disposes of every segment whose records are released. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    if (!this.isIdle()) await new Promise<void>((resolve) => this.idle.push(resolve));
    this.isClosed = true;
    if (this.fd >= 0) closeSync(this.fd);
    await this.disposeReleased();
    if (this.active.lastSeq <= this.releasedSeq && this.durableSeq === this.seq) {
      const file = join(this.opts.dir, this.active.name);
      if (this.worthSparing(this.active.bytes)) await this.spare(file);
      else unlinkSync(file);
    }
    closeSync(this.dirFd);
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
 * elsewhere; all but one named for the record after the last (a {@link Journal} started there takes that name
 * over). A record cut short or failing its checksum ends its segment (a group under way at a crash, never
 * acknowledged, or a recycled file's old records); a gap in the numbers after `afterSeq` between one segment's
 * last record and the next segment's first, which is what damage before the last segment leaves, throws
 * {@link JournalCorruptError}.
 */
export function readJournal(
  dir: string,
  afterSeq = 0,
): { records: Generator<JournalRecord>; segments: string[]; lastSeq: () => number; done: () => void } {
  const segments = readdirSync(dir)
    .filter((f) => SEGMENT.test(f))
    .sort();
  let lastSeq = 0;
  function* records(): Generator<JournalRecord> {
    for (let s = 0; s < segments.length; s++) {
      const first = Number(SEGMENT.exec(segments[s]!)![1]);
      if (s > 0 && first - 1 > Math.max(lastSeq, afterSeq)) {
        throw new JournalCorruptError(
          `journal segment ${segments[s]} in ${dir} starts at record ${first}, but the segment before it ends at ${lastSeq} (missing, or damaged after that record): refusing to start without the records between. Restore the data volume, or remove the journal segments to accept their loss.`,
        );
      }
      lastSeq = first - 1;
      const buf = readFileSync(join(dir, segments[s]!));
      let at = 0;
      while (at < buf.length) {
        const len = at + FRAME_BYTES <= buf.length ? buf.readUInt32BE(at) : -1;
        const end = at + FRAME_BYTES + len;
        if (
          len < 0 ||
          end > buf.length ||
          recordCrc(lastSeq + 1, buf.subarray(at + FRAME_BYTES, end)) !== buf.readUInt32BE(at + 4)
        )
          break;
        if (++lastSeq > afterSeq) yield { seq: lastSeq, payload: buf.subarray(at + FRAME_BYTES, end) };
        at = end;
      }
    }
  }
  const done = (): void => {
    const reused = segmentName(Math.max(lastSeq, afterSeq) + 1);
    for (const f of segments) if (f !== reused) unlinkSync(join(dir, f));
  };
  return { records: records(), segments, lastSeq: () => lastSeq, done };
}
