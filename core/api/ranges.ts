/**
 * Byte ranges of a read (`Range: bytes=...`, RFC 9110 §14), as the key GET and the local folder tier's download URLs
 * answer them, and as S3 answers its presigned GETs: one range per request. S3 "doesn't support retrieving multiple
 * ranges of data per GET request" (GetObject `Range`,
 * https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-get-object-request/range.html),
 * so a multi-range request, like a header that is not a byte range at all, is ignored (RFC 9110 §14.2 lets a server
 * ignore Range): the answer is the whole value, 200. A range that starts at or past the end is 416 with
 * `content-range: bytes *\/size` (§15.5.17).
 */
import { StrataError } from '../errors.js';

/** An inclusive byte range `start..end` of a value of `size` bytes. */
export interface ByteRange {
  start: number;
  end: number;
  size: number;
}

const SINGLE_RANGE = /^\s*bytes\s*=\s*(\d{0,16})\s*-\s*(\d{0,16})\s*$/i;

/**
 * The range a `Range` header asks of a value of `size` bytes: undefined when the whole value is to be sent (no
 * header, or one that is not a single valid byte range). A range covering the whole value is still a range (206).
 * Throws 416 RANGE_NOT_SATISFIABLE when the range is valid but selects nothing.
 */
export function parseRange(raw: string | undefined, size: number): ByteRange | undefined {
  if (raw === undefined) return undefined;
  const m = SINGLE_RANGE.exec(raw);
  if (!m) return undefined;
  const [, first, last] = m;
  if (first === '' && last === '') return undefined;
  if (first === '') {
    // A suffix: the last n bytes (all of a shorter value); `bytes=-0` selects nothing.
    const n = Number(last);
    if (n === 0 || size === 0) throw rangeNotSatisfiable(raw, size);
    return { start: Math.max(0, size - n), end: size - 1, size };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return undefined; // an invalid range-spec: ignored, as a syntax error (§14.1.1)
  if (start >= size) throw rangeNotSatisfiable(raw, size);
  return { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1), size };
}

/** `content-range` of a 206. */
export function contentRange(r: ByteRange): string {
  return `bytes ${r.start}-${r.end}/${r.size}`;
}

/** 416, with `details.size` (errorResult turns it into `content-range: bytes *\/size`). */
export function rangeNotSatisfiable(raw: string, size: number): StrataError {
  return new StrataError(
    'RANGE_NOT_SATISFIABLE',
    `range '${raw.slice(0, 60)}' selects no byte of this ${size}-byte value; ranges start below the size (bytes=0-${Math.max(0, size - 1)})`,
    { size },
  );
}
