import { createHash, createHmac } from 'node:crypto';
import type { RedisCredentialSource } from '../tiers/redis/redis-tier.js';

/**
 * ElastiCache IAM authentication (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html): instead of a
 * password, a connection presents a short-lived token that is a SigV4-presigned request, signed with the caller's
 * own AWS credentials, so no password exists anywhere and nothing needs to be read from Secrets Manager. What the
 * page requires, and where it is kept:
 * - the ElastiCache user has authentication mode `iam`, and its user id equals its user name (cdk/constructs/
 *   valkey-serverless-cache.ts), and the caller is granted `elasticache:Connect` on the cache and on the user
 *   (StrataFunction.bindHotTier);
 * - the token is the request `GET http://<cache name>/?Action=connect&User=<user id>[&ResourceType=ServerlessCache]`
 *   presigned for service `elasticache` in the cache's region, without the scheme ({@link elastiCacheIamToken});
 * - it is valid for 15 minutes ({@link IAM_TOKEN_TTL_SECONDS}), so each new connection signs its own (the tier reads
 *   {@link ElastiCacheIamAuth.password} as every connection opens);
 * - IAM-authenticated connections are closed after 12 hours unless they authenticate again with a new token (AUTH or
 *   HELLO), so the tier re-authenticates every live connection after {@link IAM_REAUTH_AFTER_MS}.
 * The token is signed here with node:crypto rather than @smithy/signature-v4 because ioredis reads the password
 * synchronously as a connection opens (its reconnects included) and the smithy signer is asynchronous; the unit test
 * checks the two produce the same token.
 */

/**
 * The token is valid for 15 minutes (the presigned request's X-Amz-Expires):
 * https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html (Limitations).
 */
export const IAM_TOKEN_TTL_SECONDS = 900;

/**
 * IAM-authenticated connections are disconnected after 12 hours, and AUTH (or HELLO) with a new token extends a
 * connection by 12 hours (https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/auth-iam.html, Limitations).
 * Re-authenticating after 11 hours leaves an hour for the check interval (the tier checks every 10 minutes at most)
 * and for a failed attempt to be retried.
 */
export const IAM_REAUTH_AFTER_MS = 11 * 3600_000;

/** SigV4's signing name of ElastiCache, and the action the token authorizes (auth-iam's token request). */
const SERVICE = 'elasticache';
const ALGORITHM = 'AWS4-HMAC-SHA256';
const EMPTY_SHA256 = createHash('sha256').update('').digest('hex');

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When temporary credentials stop working (absent for credentials that do not expire by themselves). */
  readonly expiration?: Date;
}

export interface IamTokenRequest {
  /** The cache the token is for: a serverless cache's name (or a replication group's id with `serverless: false`). */
  readonly cacheName: string;
  /** The ElastiCache user id (equal to its user name for IAM users). */
  readonly userId: string;
  /** The cache's region. */
  readonly region: string;
  /** auth-iam: serverless caches add `ResourceType=ServerlessCache` to the signed request. @default true */
  readonly serverless?: boolean;
}

/** RFC 3986 encoding, as SigV4 canonicalizes query strings (encodeURIComponent leaves !'()* as they are). */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/**
 * The IAM authentication token for one connection: the presigned URL of auth-iam's connect request, scheme removed,
 * signed at `now` (SigV4 query-string signing: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html).
 */
export function elastiCacheIamToken(req: IamTokenRequest, credentials: AwsCredentials, now: Date = new Date()): string {
  // ElastiCache keeps cache names and user ids in lower case; a token signed for another spelling is refused.
  const host = req.cacheName.toLowerCase();
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, ''); // YYYYMMDDTHHMMSSZ
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${req.region}/${SERVICE}/aws4_request`;
  const params: [string, string][] = [
    ['Action', 'connect'],
    ['User', req.userId.toLowerCase()],
    ...((req.serverless ?? true) ? ([['ResourceType', 'ServerlessCache']] as [string, string][]) : []),
    ['X-Amz-Algorithm', ALGORITHM],
    ['X-Amz-Credential', `${credentials.accessKeyId}/${scope}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(IAM_TOKEN_TTL_SECONDS)],
    ...(credentials.sessionToken ? ([['X-Amz-Security-Token', credentials.sessionToken]] as [string, string][]) : []),
    ['X-Amz-SignedHeaders', 'host'],
  ];
  const query = params
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  // Canonical request: method, path, query, the signed `host` header, its name, and the hash of the empty body.
  const canonical = ['GET', '/', query, `host:${host}`, '', 'host', EMPTY_SHA256].join('\n');
  const toSign = [ALGORITHM, amzDate, scope, createHash('sha256').update(canonical, 'utf8').digest('hex')].join('\n');
  let key = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const part of [req.region, SERVICE, 'aws4_request']) key = hmac(key, part);
  return `${host}/?${query}&X-Amz-Signature=${createHmac('sha256', key).update(toSign, 'utf8').digest('hex')}`;
}

export interface ElastiCacheIamAuthOptions {
  /** @default the AWS SDK's default credential provider chain (a Lambda's execution role, from its environment) */
  readonly credentials?: () => Promise<AwsCredentials>;
  /** @default {@link IAM_REAUTH_AFTER_MS} */
  readonly reauthenticateAfterMs?: number;
  /** Clock, for tests. @default Date.now */
  readonly now?: () => number;
}

/** Refresh temporary credentials this long before they expire (the SDK's own providers refresh 5 minutes early). */
const REFRESH_BEFORE_EXPIRY_MS = 5 * 60_000;

/**
 * The hot tier's credentials under IAM authentication ({@link RedisCredentialSource}): a token signed anew for every
 * connection and every re-authentication. AWS credentials are resolved (asynchronously) before the first connection
 * by {@link prepare}, and refreshed in the background as temporary ones near their expiry; signing itself is
 * synchronous, as ioredis needs.
 */
export class ElastiCacheIamAuth implements RedisCredentialSource {
  readonly reauthenticateAfterMs: number;
  private readonly provider: () => Promise<AwsCredentials>;
  private readonly now: () => number;
  private current: AwsCredentials | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(
    private readonly request: IamTokenRequest,
    opts: ElastiCacheIamAuthOptions = {},
  ) {
    this.provider = opts.credentials ?? defaultCredentials();
    this.reauthenticateAfterMs = opts.reauthenticateAfterMs ?? IAM_REAUTH_AFTER_MS;
    this.now = opts.now ?? Date.now;
  }

  /** Resolves the AWS credentials (once; later calls only wait for a refresh under way). */
  prepare(): Promise<void> {
    if (this.current) return this.refreshing ?? Promise.resolve();
    return this.refresh();
  }

  /** A token for a connection opening (or re-authenticating) now. */
  password(): string {
    const creds = this.current;
    if (!creds) {
      // Not prepared: start resolving, and let this connection fail its AUTH (ioredis reconnects), rather than throw
      // inside ioredis' connect, which would leave the connection stuck in `connecting`.
      void this.refresh().catch(() => undefined);
      return 'aws-credentials-not-resolved-yet';
    }
    if (creds.expiration && creds.expiration.getTime() - this.now() < REFRESH_BEFORE_EXPIRY_MS)
      void this.refresh().catch(() => undefined);
    return elastiCacheIamToken(this.request, creds, new Date(this.now()));
  }

  private refresh(): Promise<void> {
    this.refreshing ??= this.provider()
      .then((c) => {
        this.current = c;
      })
      .finally(() => {
        this.refreshing = undefined;
      });
    return this.refreshing;
  }
}

/** The SDK's default chain, loaded only when used (the Lambda runtime provides the SDK; local runs never load it). */
function defaultCredentials(): () => Promise<AwsCredentials> {
  let provider: (() => Promise<AwsCredentials>) | undefined;
  return async () => {
    if (!provider) {
      const { defaultProvider } = await import('@aws-sdk/credential-provider-node');
      provider = defaultProvider();
    }
    return provider();
  };
}
