/**
 * Presigned URLs of the S3 tier (downloads, single-PUT uploads, upload parts): signing them with the tier's client,
 * and how long they may last. Kept apart from s3-tier.ts because both the tier (downloads) and its uploads
 * (s3-uploads.ts) sign, and what makes a URL work on AWS (no checksum parameters, no expiry past the credentials')
 * is one concern.
 */
import type { GetObjectCommand, PutObjectCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';

/** The longest a presigned URL lasts (SigV4's limit: 7 days). */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;
/** Kept between a URL's expiry and its credentials' expiry: clocks differ, and a client needs time to start. */
const CREDENTIAL_MARGIN_SECONDS = 30;

/** Whole seconds in 1..7 days, never past the entry's expiry. */
export function presignSeconds(requested: number, expiresAt: number | null, now: number): number {
  let s = Number.isFinite(requested) ? Math.floor(requested) : 900;
  if (expiresAt !== null) s = Math.min(s, Math.floor((expiresAt - now) / 1000));
  return Math.max(1, Math.min(MAX_PRESIGN_SECONDS, s));
}

export class S3Presigner {
  /** `unavailable` turns a signing failure (credentials that cannot be resolved) into the tier's error. */
  constructor(
    private readonly client: S3Client,
    private readonly unavailable: (e: unknown) => Error,
  ) {}

  /**
   * `seconds`, shortened to what the signing credentials have left. A URL signed with temporary credentials (a
   * Lambda's role, an instance profile) stops working when they expire, whatever its X-Amz-Expires says
   * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html, "Expiration time for
   * presigned URLs"), so the expiry we report and the upload's completion deadline would otherwise be lies.
   * Credentials without a known expiry (long-term keys, Lambda's environment credentials) leave it unchanged.
   */
  async withinCredentials(seconds: number, now: number): Promise<number> {
    let expiration: Date | undefined;
    try {
      expiration = (await this.client.config.credentials()).expiration;
    } catch (e) {
      throw this.unavailable(e);
    }
    if (!expiration) return seconds;
    const left = Math.floor((expiration.getTime() - now) / 1000) - CREDENTIAL_MARGIN_SECONDS;
    return Math.max(1, Math.min(seconds, left));
  }

  /** A presigned URL for `command`, lasting `expiresIn` seconds (without the SDK's flexible-checksum parameters). */
  async url(command: GetObjectCommand | PutObjectCommand | UploadPartCommand, expiresIn: number): Promise<string> {
    // SDK >= 3.729 adds flexible-checksum parameters at presign time (for PUT: the CRC32 of an *empty* body),
    // which real S3 then enforces against the uploaded bytes. Drop them from the request before it is signed.
    const stack = command.middlewareStack as unknown as { addRelativeTo(mw: unknown, opts: Record<string, unknown>): void };
    stack.addRelativeTo(
      (next: (args: { request?: unknown }) => Promise<unknown>) => async (args: { request?: unknown }) => {
        const headers = (args.request as { headers?: Record<string, string> } | undefined)?.headers;
        if (headers) {
          for (const h of Object.keys(headers)) {
            const l = h.toLowerCase();
            if (l.startsWith('x-amz-checksum-') || l === 'x-amz-sdk-checksum-algorithm') delete headers[h];
          }
        }
        return next(args);
      },
      { relation: 'before', toMiddleware: 'presignInterceptMiddleware', name: 'strataStripPresignChecksums', override: true },
    );
    try {
      // getSignedUrl is generic over one command type; the union of three does not infer, each alone does.
      return await getSignedUrl(this.client, command as GetObjectCommand, { expiresIn });
    } catch (e) {
      throw this.unavailable(e);
    }
  }
}
