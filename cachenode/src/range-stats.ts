/**
 * Statistics of a ring span of the node store: its key count, accounted bytes and the position at a quantile of
 * its keys (what a migration plans with), from the position histogram plus bounded, yielding reads of the partial
 * buckets; and the storage-key bounds of a span, which every range read uses. Separate from the store because it
 * is read-only planning arithmetic over LMDB and the histogram, independent of how writes are decided or applied.
 */
import type { Database } from 'lmdb';
import { keyAfter, positionKey } from '../../core/nodes/wire.js';
import { bucketStart, type PositionHistogram, spanPieces, type SpanPieces } from './position-histogram.js';
import { yieldToEventLoop } from './event-loop.js';

/** Keys read per event-loop turn by {@link RangeStats.of}. */
const STATS_CHUNK = 2048;

/** Storage-key bounds of ring span [start, end), after storage key `after` (exclusive) when given. */
export function spanBounds(start: string, end: string | null, after?: Buffer): { start: Buffer; end?: Buffer } {
  const lo = positionKey(start);
  const from = after && Buffer.compare(after, lo) >= 0 ? keyAfter(after) : lo;
  return end === null ? { start: from } : { start: from, end: positionKey(end) };
}

export class RangeStats {
  /**
   * @param meta the store's `meta` database (keys only are read from it)
   * @param metaViews `meta` again, with values read as views (see `VIEW_VALUES`)
   * @param histogram keys and bytes per ring bucket, kept by the store
   */
  constructor(
    private readonly meta: Database<Buffer, Buffer>,
    private readonly metaViews: Database<Buffer, Buffer>,
    private readonly histogram: PositionHistogram,
  ) {}

  /**
   * Number of stored keys and accounted bytes in [start, end), and the position at quantile `q` of its keys. The
   * whole buckets of the span come from the position histogram; only the keys of the partial buckets at its ends
   * and of the bucket the cut falls in are read (in chunks, yielding between them): a migration plans on a live
   * node, and reading a whole range would stall its requests. Reads committed state: the store settles first.
   */
  async of(start: string, end: string | null, q: number): Promise<{ keys: number; bytes: number; cut: string | null }> {
    const pieces = spanPieces(start, end);
    const head = pieces.head ? await this.countSpan(pieces.head.start, pieces.head.end) : { keys: 0, bytes: 0 };
    const whole = this.histogram.sum(pieces.whole.from, pieces.whole.to);
    const tail = pieces.tail ? await this.countSpan(pieces.tail.start, pieces.tail.end) : { keys: 0, bytes: 0 };
    const keys = head.keys + whole.keys + tail.keys;
    const bytes = head.bytes + whole.bytes + tail.bytes;
    let cut: string | null = null;
    if (keys >= 2) {
      cut = await this.positionAt(pieces, head.keys, Math.min(keys - 1, Math.max(1, Math.floor(keys * q))));
      // Keys sharing the cut position all stay on one side; a cut at the range start would move nothing.
      if (cut === start) cut = null;
    }
    return { keys, bytes, cut };
  }

  /** Keys and accounted bytes of [start, end), read from the meta database. */
  private async countSpan(start: string, end: string | null): Promise<{ keys: number; bytes: number }> {
    const b = spanBounds(start, end);
    let keys = 0;
    let bytes = 0;
    for (let after: Buffer | undefined; ; await yieldToEventLoop()) {
      let last: Buffer | undefined;
      for (const { key, value } of this.metaViews.getRange({
        ...b,
        ...(after ? { start: keyAfter(after) } : {}),
        limit: STATS_CHUNK,
      })) {
        keys++;
        bytes += value.readUInt32BE(16);
        last = key;
      }
      if (!last) return { keys, bytes };
      after = last; // a sweep's keys are copies (see VIEW_VALUES), as scanExpired relies on too
    }
  }

  /** The position of the key `skip` keys into the span (0-based), reading only the piece it falls in. */
  private async positionAt(pieces: SpanPieces, headKeys: number, skip: number): Promise<string | null> {
    if (pieces.head && skip < headKeys) return this.nthPosition(pieces.head.start, pieces.head.end, skip);
    let rest = skip - headKeys;
    for (let b = pieces.whole.from; b < pieces.whole.to; b++) {
      const n = this.histogram.keysIn(b);
      if (rest < n) return this.nthPosition(bucketStart(b)!, bucketStart(b + 1), rest);
      rest -= n;
    }
    return pieces.tail ? this.nthPosition(pieces.tail.start, pieces.tail.end, rest) : null;
  }

  /** The position of the key `skip` keys into [start, end); the last one when there are fewer (null: none). */
  private async nthPosition(start: string, end: string | null, skip: number): Promise<string | null> {
    const b = spanBounds(start, end);
    let last: Buffer | undefined;
    for (let after: Buffer | undefined; ; await yieldToEventLoop()) {
      let seen = false;
      for (const k of this.meta.getKeys({ ...b, ...(after ? { start: keyAfter(after) } : {}), limit: STATS_CHUNK * 4 })) {
        last = k as Buffer;
        seen = true;
        if (skip-- === 0) return last.toString('hex', 0, 8);
      }
      if (!seen) return last ? last.toString('hex', 0, 8) : null;
      after = Buffer.from(last!);
    }
  }
}
