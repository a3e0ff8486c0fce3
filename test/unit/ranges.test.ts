/**
 * `Range` as the key GET and the local download URLs read it (core/api/ranges.ts): one byte range (RFC 9110 §14);
 * several, or anything else, ignored as S3's GetObject does
 * (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-get-object-request/range.html).
 */
import { StrataError } from '../../core/errors.js';
import { errorResult } from '../../core/api/http.js';
import { contentRange, parseRange } from '../../core/api/ranges.js';

describe('parseRange', () => {
  it('reads first-last, first- and -suffix, cutting a last offset past the end to it', () => {
    expect(parseRange('bytes=0-0', 10)).toEqual({ start: 0, end: 0, size: 10 });
    expect(parseRange('bytes=3-', 10)).toEqual({ start: 3, end: 9, size: 10 });
    expect(parseRange('bytes=-4', 10)).toEqual({ start: 6, end: 9, size: 10 });
    expect(parseRange('bytes=-40', 10)).toEqual({ start: 0, end: 9, size: 10 });
    expect(parseRange('bytes=8-400', 10)).toEqual({ start: 8, end: 9, size: 10 });
    expect(parseRange(' Bytes = 1 - 2 ', 10)).toEqual({ start: 1, end: 2, size: 10 });
    expect(contentRange({ start: 8, end: 9, size: 10 })).toBe('bytes 8-9/10');
  });

  it('ignores what is not one valid byte range: the whole value is sent', () => {
    for (const raw of [undefined, '', 'bytes=', 'bytes=-', 'items=0-1', 'bytes=0-1,4-5', 'bytes=5-1', 'bytes=a-b'])
      expect([raw, parseRange(raw, 10)]).toEqual([raw, undefined]);
  });

  it('refuses a range selecting no byte with 416 RANGE_NOT_SATISFIABLE and content-range: bytes */size', () => {
    for (const [raw, size] of [
      ['bytes=10-', 10],
      ['bytes=10-20', 10],
      ['bytes=-0', 10],
      ['bytes=0-', 0],
      ['bytes=-5', 0],
    ] as const) {
      let err: unknown;
      try {
        parseRange(raw, size);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(StrataError);
      const res = errorResult(err as StrataError);
      expect([raw, res.statusCode, res.headers?.['content-range']]).toEqual([raw, 416, `bytes */${size}`]);
    }
  });
});
