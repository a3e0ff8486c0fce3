/**
 * What an S3 error means to the tier: S3 names its errors (`name`, or `Code` in some clients and LocalStack) and
 * answers an HTTP status; each predicate accepts either.
 */

interface S3ErrorLike {
  name?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number };
}

export function errName(e: unknown): string | undefined {
  const x = e as S3ErrorLike | undefined;
  return x?.name ?? x?.Code;
}

export function errStatus(e: unknown): number | undefined {
  return (e as S3ErrorLike | undefined)?.$metadata?.httpStatusCode;
}

/** A missing object (not a missing bucket, which is an outage). HEAD on a missing bucket also answers a bare 404, though. */
export function isNotFound(e: unknown): boolean {
  const n = errName(e);
  if (n === 'NoSuchBucket') return false;
  return n === 'NoSuchKey' || n === 'NotFound' || errStatus(e) === 404;
}

/** A conditional write lost: 412 PreconditionFailed, or 409 ConditionalRequestConflict (concurrent conditional writes). */
export function isConflict(e: unknown): boolean {
  const n = errName(e);
  const s = errStatus(e);
  return n === 'PreconditionFailed' || n === 'ConditionalRequestConflict' || s === 412 || s === 409;
}

export function isNotImplemented(e: unknown): boolean {
  return errName(e) === 'NotImplemented' || errStatus(e) === 501;
}
