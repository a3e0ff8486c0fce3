import type { ServerResponse } from 'node:http';
import {
  ACCESS_RECORD_BYTES,
  storedEntryRecordBytes,
  writeAccessRecord,
  writeStoredEntryRecord,
  type EntryAccess,
} from '../../core/nodes/wire.js';
import type { SlabPool } from './slab-pool.js';

/**
 * Writes stored entries to a streamed response as entry records, encoded straight into pooled buffers of
 * `pool.slabBytes` and sent one buffer per socket write (a range export: no buffer, string or object per record,
 * which on a node that keeps serving while it exports was most of the export's cost, in garbage collection).
 *
 * A buffer goes back to its pool only when the socket has taken its bytes (the write's callback), or when the
 * response closed first (its socket is gone, nothing reads the buffer any more). When the pool has none free, a
 * buffer of the same size is allocated for the write; a record larger than a buffer gets one of its own.
 */
export class PooledRecordWriter {
  /** Records and bytes added so far. */
  records = 0;
  bytes = 0;
  private buf: Buffer | undefined;
  private pooled = false;
  private used = 0;
  /** Pooled buffers written and not yet given back. */
  private readonly out = new Set<Buffer>();
  private closed = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly pool: SlabPool,
  ) {
    res.once('close', () => {
      this.closed = true;
      for (const b of this.out) this.pool.release(b);
      this.out.clear();
      this.drop();
    });
  }

  /**
   * Adds the record of a stored entry (views may be transient: they are copied now). Answers false when a write
   * it made found the socket full (wait for 'drain' before adding much more).
   */
  add(sk: Buffer, headerJson: Uint8Array, value: Uint8Array): boolean {
    if (this.closed) return true;
    const n = storedEntryRecordBytes(sk, headerJson, value);
    let ok = true;
    if (this.used + n > this.pool.slabBytes) ok = this.flush();
    this.records++;
    this.bytes += n;
    if (n > this.pool.slabBytes) {
      const own = Buffer.allocUnsafe(n);
      writeStoredEntryRecord(own, 0, sk, headerJson, value);
      return this.res.write(own) && ok;
    }
    if (!this.buf) {
      const b = this.pool.acquire();
      this.pooled = b !== undefined;
      this.buf = b ?? Buffer.allocUnsafe(this.pool.slabBytes);
    }
    this.used = writeStoredEntryRecord(this.buf, this.used, sk, headerJson, value);
    return ok;
  }

  /**
   * Adds the access record of the entry record added next (not counted in `records`; its bytes are). Answers as
   * {@link add}.
   */
  addAccess(access: EntryAccess): boolean {
    if (this.closed) return true;
    let ok = true;
    if (this.used + ACCESS_RECORD_BYTES > this.pool.slabBytes) ok = this.flush();
    this.bytes += ACCESS_RECORD_BYTES;
    if (!this.buf) {
      const b = this.pool.acquire();
      this.pooled = b !== undefined;
      this.buf = b ?? Buffer.allocUnsafe(this.pool.slabBytes);
    }
    this.used = writeAccessRecord(this.buf, this.used, access);
    return ok;
  }

  /** Writes what is buffered. Answers false when the socket is full (wait for 'drain'). */
  flush(): boolean {
    if (this.closed) {
      this.drop();
      return true;
    }
    const b = this.buf;
    if (!b || this.used === 0) return true;
    const chunk = b.subarray(0, this.used);
    this.buf = undefined;
    this.used = 0;
    if (!this.pooled) return this.res.write(chunk);
    this.out.add(b);
    return this.res.write(chunk, () => {
      if (this.out.delete(b)) this.pool.release(b);
    });
  }

  /** Forgets what is buffered (the response closed: there is nowhere to send it). */
  private drop(): void {
    if (this.buf && this.pooled) this.pool.release(this.buf);
    this.buf = undefined;
    this.used = 0;
  }
}
