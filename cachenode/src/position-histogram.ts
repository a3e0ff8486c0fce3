/**
 * Keys and accounted bytes per bucket of the ring (the top {@link BUCKET_BITS} bits of a key's 64-bit
 * position), kept in step with every write and removal of the node store.
 *
 * A migration plans on a live node: it needs the size of a range and the key at its median (paper 000). Counting
 * those by reading every key of the range costs the node a full scan of a sixth of its data while it serves,
 * which on a small instance stalls its requests for a second. With the buckets, a range is the sum of the buckets
 * it covers, and only the keys in the (at most three) buckets where it starts, ends and is cut are read.
 *
 * 2^16 buckets: 1 MiB of counters, and a bucket holds one 65,536th of the ring (about 150 keys per bucket for a
 * node with ten million keys spread over a third of the ring).
 */
export const BUCKET_BITS = 16;
export const BUCKETS = 1 << BUCKET_BITS;
/** Hex digits of a ring position that name its bucket. */
const BUCKET_HEX = BUCKET_BITS / 4;
const POSITION_HEX = 16;

export class PositionHistogram {
  private readonly keyCounts = new Float64Array(BUCKETS);
  private readonly byteCounts = new Float64Array(BUCKETS);

  /** Adds `keys` and `bytes` (either may be negative) to the bucket of storage key `sk` (position first). */
  add(sk: Uint8Array, keys: number, bytes: number): void {
    const b = (sk[0]! << 8) | sk[1]!;
    this.keyCounts[b]! += keys;
    this.byteCounts[b]! += bytes;
  }

  /** Keys and bytes of buckets [from, to). */
  sum(from: number, to: number): { keys: number; bytes: number } {
    let keys = 0;
    let bytes = 0;
    for (let b = from; b < to; b++) {
      keys += this.keyCounts[b]!;
      bytes += this.byteCounts[b]!;
    }
    return { keys, bytes };
  }

  keysIn(bucket: number): number {
    return this.keyCounts[bucket]!;
  }
}

/** The bucket of a ring position (16 hex digits). */
export function bucketOf(position: string): number {
  return parseInt(position.slice(0, BUCKET_HEX), 16);
}

/** The first position of a bucket; `BUCKETS` gives null (the end of the ring). */
export function bucketStart(bucket: number): string | null {
  return bucket >= BUCKETS ? null : bucket.toString(16).padStart(BUCKET_HEX, '0') + '0'.repeat(POSITION_HEX - BUCKET_HEX);
}

/** Whether a position is the first of its bucket. */
export function isBucketStart(position: string): boolean {
  return /^0+$/.test(position.slice(BUCKET_HEX));
}

/**
 * Ring span [start, end) cut into what the buckets answer and what must be read: a partial bucket at the head,
 * whole buckets [whole.from, whole.to), a partial bucket at the tail (in ring order; either partial may be absent).
 */
export interface SpanPieces {
  head?: { start: string; end: string | null };
  whole: { from: number; to: number };
  tail?: { start: string; end: string };
}

export function spanPieces(start: string, end: string | null): SpanPieces {
  const first = bucketOf(start);
  const firstWhole = isBucketStart(start) ? first : first + 1;
  const lastExcl = end === null ? BUCKETS : bucketOf(end);
  const endPartial = end !== null && !isBucketStart(end);
  if (end !== null && first === lastExcl && !isBucketStart(start)) {
    // Starts and ends inside one bucket: read all of it.
    return { head: { start, end }, whole: { from: 0, to: 0 } };
  }
  const out: SpanPieces = { whole: { from: firstWhole, to: Math.max(firstWhole, lastExcl) } };
  if (firstWhole !== first) out.head = { start, end: bucketStart(firstWhole) };
  if (endPartial) out.tail = { start: bucketStart(lastExcl)!, end };
  return out;
}
