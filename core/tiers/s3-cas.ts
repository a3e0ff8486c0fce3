/**
 * The retry of the S3 tier's compare-and-set writes (entry objects in s3-tier.ts, upload records and commits in
 * s3-uploads.ts): a conditional write that lost (412/409) reads again and decides again, a bounded number of times
 * with a short random wait, so concurrent writers spread out instead of colliding again in step.
 */

/** Conditional writes tried per operation before it gives up as contention. */
export const MAX_CAS_ATTEMPTS = 8;

/** Waits up to 10·2^attempt ms (at most 200 ms), at random. */
export function backoff(attempt: number): Promise<void> {
  const ms = Math.random() * Math.min(200, 10 * 2 ** attempt);
  return new Promise((r) => setTimeout(r, ms));
}
